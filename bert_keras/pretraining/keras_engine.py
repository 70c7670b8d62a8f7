"""The Keras engine of pre-training: `keras.Model.fit` on a Keras backend other than TensorFlow
(JAX: the backend of today's Colab TPU), behind `bert_keras.pretraining.engine.Engine`.

The recipe (`pretraining.run`), the records (the same `tf.data` pipeline, read on the host and
resumed at the same position), the model, the loss (`pretraining.losses`: MLM loss over the
batch's prediction weight + NSP loss over the batch size) and the optimizer, schedule and
clipping (`optimization.create_optimizer`) are the TensorFlow engine's. What differs is the
loop: `fit` on the backend's compiled step instead of the `tf.function` + `tf.distribute` step
of `pretraining.step`, and so:

- checkpoints are `checkpoints/ckpt-<step>.npz`: every variable of the model (dropout's random
  state included) and of the optimizer, by position and path. A rerun resumes the latest one
  exactly (same step, optimizer state, dropout masks and record position).
- gradient accumulation is Keras' (`Optimizer(gradient_accumulation_steps=N)`): `fit` takes
  micro-batches of `train_batch_size / N` and averages their gradients, each micro-batch's MLM
  loss normalized by its own prediction weight (the TensorFlow engine normalizes by the whole
  batch's: the same when every record has the same number of predictions).
- data parallelism over all devices with `keras.distribution.DataParallel` (the chips of a TPU
  v5e-8, the GPUs of a machine); one device trains alone.
- several processes (the hosts of a TPU pod slice, GPU nodes) train one model when
  `--coordinator_address`/`--num_processes`/`--process_id` or Keras' `KERAS_DISTRIBUTION_*`
  variables say so (`distribution.initialize_processes`): each process reads its own record
  files (every `num_processes`-th, from its id) and feeds its share of every global batch, the
  mesh spans every process's devices, process 0 alone writes checkpoints, logs and the model
  directory (on storage every process reads: a shared file system or `gs://`), and every
  process resumes from the same checkpoint. Evaluation and export run in one process.
- float16 loss scaling is not here (bfloat16 is: TPUs and recent GPUs compute it).

`tests/pretraining/test_backends.py` checks that a run on JAX takes the TensorFlow engine's
steps, and that a run killed after a checkpoint resumes to the weights of an uninterrupted one.
"""

import io
import os
import sys
import time

import keras
import numpy as np
from absl import logging
from keras import ops

from bert_keras import distribution, optimization
from bert_keras.common.files import file_system, write_atomic
from bert_keras.model.pretraining_model import build_pretraining_model, pretraining_weight_map
from bert_keras.pretraining import inputs, losses
from bert_keras.pretraining.engine import Engine, LossNotFinite
from bert_keras.pretraining.options import PretrainingError
from bert_keras.pretraining.output_dir import CHECKPOINTS_DIR


def pretraining_loss(outputs, batch):
    """BERT's objective on one batch, with the sums of `pretraining.losses` (the TensorFlow
    trainer's code): the masked-LM loss over the batch's prediction weight plus the
    next-sentence loss over the batch size. Returns (loss, {"masked_lm_loss",
    "masked_lm_accuracy"[, "next_sentence_loss", "next_sentence_accuracy"]}).

    >>> import numpy as np
    >>> logits = np.log(np.array([[[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]]], "float32"))
    >>> loss, parts = pretraining_loss({"mlm_logits": logits}, {
    ...     "masked_lm_ids": np.array([[0, 1]]), "masked_lm_weights": np.ones([1, 2], "float32")})
    >>> round(float(loss), 3), float(parts["masked_lm_accuracy"])  # (-log 0.7 - log 0.1) / 2
    (1.33, 0.5)
    """
    sums = losses.pretraining_sums(outputs, batch)
    weight, count = sums["masked_lm_weight_sum"], sums["next_sentence_count"]
    loss = losses.pretraining_loss(sums, weight, count)
    parts = {"masked_lm_loss": losses.pretraining_loss(sums, weight, 0.0),
             "masked_lm_accuracy": sums["masked_lm_correct"] / ops.maximum(weight, 1e-12)}
    if "next_sentence_logits" in outputs:
        parts["next_sentence_loss"] = sums["next_sentence_loss_sum"] / count
        parts["next_sentence_accuracy"] = sums["next_sentence_correct"] / count
    return loss, parts


class PretrainingTrainer(keras.Model):
    """The pre-training model (`build_pretraining_model`) with BERT's loss, for `fit` on the
    batches of `inputs.make_dataset_fn` (dicts of `input_ids`, `input_mask`, `segment_ids`,
    `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`)."""

    def __init__(self, pretraining_model, **kwargs):
        super().__init__(**kwargs)
        self.pretraining_model = pretraining_model
        self.trackers = {name: keras.metrics.Mean(name=name) for name in (
            "masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss",
            "next_sentence_accuracy")}

    def call(self, batch, training=False):
        return self.pretraining_model(
            {"input_word_ids": batch["input_ids"], "input_mask": batch["input_mask"],
             "input_type_ids": batch["segment_ids"],
             "masked_lm_positions": batch["masked_lm_positions"]}, training=training)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        loss, parts = pretraining_loss(y_pred, x)
        for name, value in parts.items():
            self.trackers[name].update_state(value)
        return loss

    @property
    def metrics(self):
        return [*super().metrics, *self.trackers.values()]


class PretrainingSums(keras.Model):
    """A batch's sums of `pretraining.losses` and its `examples`, dropout off: what `evaluate`
    adds up over the held-out records (`predict_on_batch`, compiled by the backend)."""

    def __init__(self, trainer, **kwargs):
        super().__init__(**kwargs)
        self.trainer = trainer

    def call(self, batch):
        sums = losses.pretraining_sums(self.trainer(batch, training=False), batch)
        sums["examples"] = ops.cast(ops.shape(batch["input_ids"])[0], "float32")
        return sums


# ----------------------------------------------------------------------------- checkpoints
def _checkpoint_variables(trainer):
    """{group: variables} a checkpoint holds: the model's (weights and dropout's random state)
    and the optimizer's (step, moments, accumulated gradients)."""
    groups = {"model": trainer.pretraining_model.variables}
    optimizer = getattr(trainer, "optimizer", None)  # none before `compile` (evaluation)
    if optimizer is not None and optimizer.built:
        groups["optimizer"] = optimizer.variables
    return groups


def save_checkpoint(trainer, path):
    """Writes every checkpointed variable of `trainer` to `path` (an .npz; a local path or any
    file system of `tf.io.gfile`, e.g. gs://), whole: written beside, then renamed
    (`bert_keras.common.files.write_atomic`)."""
    arrays = {}
    for group, variables in _checkpoint_variables(trainer).items():
        arrays[f"{group}/paths"] = np.array([v.path for v in variables])
        for index, variable in enumerate(variables):
            arrays[f"{group}/{index}"] = keras.ops.convert_to_numpy(variable.value)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    write_atomic(path, buffer.getvalue())


def restore_checkpoint(trainer, path, groups=("model", "optimizer")):
    """Assigns the variables of `groups` from a `save_checkpoint` file; a checkpoint of another
    model or optimizer stops with its path and the first variable that differs."""
    with file_system(path).open(path, "rb") as f:
        data = io.BytesIO(f.read())
    with np.load(data, allow_pickle=False) as stored:
        for group in groups:
            variables = _checkpoint_variables(trainer)[group]
            paths = [str(name) for name in stored[f"{group}/paths"]]
            if len(paths) != len(variables):
                raise PretrainingError(f"{path}: holds {len(paths)} {group} variables, this run "
                                       f"has {len(variables)}: another model or optimizer")
            for index, (variable, saved) in enumerate(zip(variables, paths)):
                value = stored[f"{group}/{index}"]
                if tuple(value.shape) != tuple(variable.shape):
                    raise PretrainingError(
                        f"{path}: {group} variable {saved} has shape {value.shape}, this run's "
                        f"{variable.path} {tuple(variable.shape)}: another model")
                variable.assign(value)


# The checkpoints of this engine: ckpt-<step>.npz.
CHECKPOINT_SUFFIX = ".npz"


def checkpoint_path(output_dir, step):
    """Where the Keras engine keeps its checkpoint of `step`."""
    return os.path.join(output_dir, CHECKPOINTS_DIR, f"ckpt-{step}{CHECKPOINT_SUFFIX}")


def checkpoints(output_dir):
    """[(step, path)] of the Keras engine's whole checkpoints in `output_dir`, by step (a save
    is renamed into place whole: no partial file has this name).

    >>> import tempfile
    >>> out = tempfile.mkdtemp()
    >>> os.makedirs(os.path.join(out, CHECKPOINTS_DIR))
    >>> for step in (10, 200, 30):
    ...     open(checkpoint_path(out, step), "w").close()
    >>> [step for step, _ in checkpoints(out)]
    [10, 30, 200]
    """
    import tensorflow as tf

    directory = os.path.join(output_dir, CHECKPOINTS_DIR)
    found = []
    for name in tf.io.gfile.listdir(directory) if tf.io.gfile.isdir(directory) else ():
        step = checkpoint_step(name)
        if step is not None:
            found.append((step, os.path.join(directory, name)))
    return sorted(found)


def checkpoint_step(path):
    """The step of a `checkpoint_path`, or None for any other file.

    >>> checkpoint_step("out/checkpoints/ckpt-200.npz"), checkpoint_step("ckpt-1.index")
    (200, None)
    """
    name = os.path.basename(path)
    stem = name[len("ckpt-"):-len(CHECKPOINT_SUFFIX)]
    if name.startswith("ckpt-") and name.endswith(CHECKPOINT_SUFFIX) and stem.isdigit():
        return int(stem)
    return None


class _Checkpoints(keras.callbacks.Callback):
    """Saves a checkpoint every `save_checkpoints_steps` updates and at the end, keeps the
    newest `keep_checkpoint_max`, stops at a loss that is not finite, and logs the metrics
    (TensorBoard in logs/train, and a line every `log_steps` without a terminal)."""

    def __init__(self, options, start, micro_batches, is_chief=True):
        super().__init__()
        self.options, self.start, self.micro_batches = options, start, micro_batches
        self.is_chief = is_chief  # the process that writes (the others only take the steps)
        self.saved = start
        self.logged = start
        self.began = time.time()
        import tensorflow as tf

        self.tf = tf
        self.writer = tf.summary.create_file_writer(
            os.path.join(options.output_dir, "logs", "train")) if is_chief \
            else tf.summary.create_noop_writer()
        self.console = options.verbose and not (sys.stdout.isatty() or "ipykernel" in sys.modules)

    def on_train_batch_end(self, batch, logs=None):
        micro = batch + 1  # fit's steps so far (micro-batches with accumulation)
        if micro % self.micro_batches:
            return
        step = self.start + micro // self.micro_batches
        logs = dict(logs or {})
        if not np.isfinite(logs.get("loss", 0.0)):
            # With several steps an execution, the logs are the last one's.
            raise LossNotFinite(logs["loss"], step, exact=False)
        every = self.options.save_checkpoints_steps
        # At every multiple of `every`, or the first step past it (steps_per_execution).
        if step >= (self.saved // every + 1) * every or step >= self.options.num_train_steps:
            self.save(step)
        if step - self.logged >= self.options.log_steps or step >= self.options.num_train_steps:
            self.log(step, logs)

    def save(self, step):
        self.saved = step
        if not self.is_chief:
            return
        path = checkpoint_path(self.options.output_dir, step)
        save_checkpoint(self.model, path)  # `self.model` brings JAX's state back into variables
        for _, old in checkpoints(self.options.output_dir)[:-self.options.keep_checkpoint_max]:
            self.tf.io.gfile.remove(old)
        logging.info("step %d: saved %s", step, path)

    def log(self, step, logs):
        elapsed = max(time.time() - self.began, 1e-9)
        logs["examples_per_second"] = (step - self.logged) * self.options.train_batch_size / elapsed
        self.began, self.logged = time.time(), step
        with self.writer.as_default(step=step):
            for name, value in logs.items():
                self.tf.summary.scalar(name, float(value))
        self.writer.flush()
        if self.console:
            logging.info("step %d: %s", step, ", ".join(
                f"{name} {float(value):.4g}" for name, value in sorted(logs.items())))


# ------------------------------------------------------------------------------ the engine
def _build_trainer(options, config):
    model = build_pretraining_model(
        config, causal=options.left_to_right, next_sentence=options.uses_next_sentence,
        dtype=None if options.mixed_precision == "float32" else options.mixed_precision,
        attention_implementation=options.attention_implementation)
    return PretrainingTrainer(model), pretraining_weight_map(model)


def compile_trainer(options, config):
    """(a `PretrainingTrainer` compiled with the run's optimizer and built for it, its
    {original name: variable}) for `options` and the model's `config`."""
    trainer, variable_map = _build_trainer(options, config)
    optimizer = optimization.create_optimizer(
        variable_map, options.learning_rate, options.num_train_steps, options.num_warmup_steps,
        optimizer=options.optimizer, weight_decay=options.weight_decay,
        epsilon=options.adam_epsilon, clip_norm=options.clip_norm,
        mixed_precision=options.mixed_precision, bias_correction=options.adam_bias_correction,
        build=False)
    optimizer.summed_gradients = False  # fit's gradients
    if options.gradient_accumulation_steps > 1:
        optimizer.gradient_accumulation_steps = options.gradient_accumulation_steps
    trainer.compile(optimizer=optimizer, steps_per_execution=options.steps_per_execution)
    optimizer.build(trainer.trainable_variables)  # fit's order of variables
    return trainer, variable_map


class KerasEngine(Engine):
    """`Engine` on a Keras backend other than TensorFlow: `fit`, data parallel over the local
    devices (`distribution.keras_data_parallel`), `.npz` checkpoints."""

    backend = "jax"
    description = "the trainer of the Keras jax backend"
    loss_scaling = False

    def __init__(self, options, purpose, strategy=None):
        del strategy  # the backend holds the devices
        self.options, self.purpose = options, purpose
        if purpose == "train":  # evaluation and export run in one process
            self.processes, process_id = distribution.initialize_processes(
                options.coordinator_address, options.num_processes, options.process_id)
            self.process_id, self.is_chief = process_id, process_id == 0
        else:
            self.process_id = 0
        self.data_parallel = None
        self.trainer = self.variable_map = None
        self.restored_step = 0

    @staticmethod
    def latest_checkpoint(output_dir):
        found = checkpoints(output_dir)
        return found[-1][1] if found else None

    def build(self, config):
        options = self.options
        if self.purpose == "train":
            accumulation = options.gradient_accumulation_steps
            self.data_parallel = distribution.keras_data_parallel(
                {"train_batch_size / gradient_accumulation_steps" if accumulation > 1
                 else "train_batch_size": options.train_batch_size // accumulation})
        elif self.purpose == "eval":
            self.data_parallel = distribution.keras_data_parallel(
                {"eval_batch_size": options.eval_batch_size})
        with distribution.keras_scope(self.data_parallel):
            if self.purpose == "train":
                self.trainer, self.variable_map = compile_trainer(options, config)
            else:
                self.trainer, self.variable_map = _build_trainer(options, config)

    def weights(self):
        return self.variable_map

    def restore(self, path):
        training = self.purpose == "train"
        restore_checkpoint(self.trainer, path, groups=("model", "optimizer") if training
                           else ("model",))  # the optimizer is not needed to evaluate or export
        self.restored_step = checkpoint_step(path) or 0
        return self.step

    @property
    def step(self):
        if self.purpose == "train":
            return int(self.trainer.optimizer.iterations)
        return self.restored_step

    def train(self, records, start):
        options, trainer = self.options, self.trainer
        accumulation = options.gradient_accumulation_steps
        total = options.num_train_steps
        dataset = records(options.train_batch_size // accumulation,
                          start_step=start * accumulation)(
            inputs.process_input_context(self.processes, self.process_id))
        logging.info("pre-training on the Keras %s backend with fit: steps %d to %d of %d%s%s",
                     keras.backend.backend(), start, total, options.train_batch_size,
                     f" ({accumulation} micro-batches)" if accumulation > 1 else "",
                     f", process {self.process_id} of {self.processes} feeding "
                     f"{options.train_batch_size // self.processes}" if self.processes > 1 else "")
        # One iterator of the records, as the TensorFlow engine has: given the dataset itself,
        # Keras on JAX makes a first iterator to build the model, and the shuffle of the next
        # one moves on.
        stream = dataset.as_numpy_iterator()
        tty = sys.stdout.isatty() or "ipykernel" in sys.modules
        began = time.time()
        with distribution.keras_scope(self.data_parallel):
            history = trainer.fit(
                ((batch,) for batch in stream), epochs=1, shuffle=False,
                steps_per_epoch=(total - start) * accumulation,
                callbacks=[_Checkpoints(options, start, accumulation, self.is_chief)],
                verbose=1 if options.verbose and tty else 0)
        elapsed = max(time.time() - began, 1e-9)
        metrics = {name: float(values[-1]) for name, values in history.history.items()}
        metrics.update(examples_per_second=(total - start) * options.train_batch_size / elapsed,
                       learning_rate=float(trainer.optimizer.learning_rate))
        return metrics

    def check_same_checkpoint(self, latest):
        if self.processes == 1:
            return
        from jax.experimental import multihost_utils

        step = -1 if latest is None else checkpoint_step(latest)
        steps = [int(s) for s in multihost_utils.process_allgather(np.int64(step))]
        if len(set(steps)) > 1:
            seen = ", ".join(f"process {index}: " + (f"ckpt-{s}" if s >= 0 else "none")
                             for index, s in enumerate(steps))
            raise PretrainingError(
                f"the processes of this run see different latest checkpoints in "
                f"{os.path.join(self.options.output_dir, CHECKPOINTS_DIR)} ({seen}): "
                "--output_dir must be one storage that every process reads and process 0 "
                "writes (a shared file system, or gs://...)")

    def barrier(self, name):
        if self.processes > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices(name)

    def batch_sums(self, records):
        dataset = records(self.options.eval_batch_size,
                          drop_remainder=self.data_parallel is not None)(None)
        summing = PretrainingSums(self.trainer)
        for batch in dataset.as_numpy_iterator():
            with distribution.keras_scope(self.data_parallel):
                sums = summing.predict_on_batch(batch)
            yield {name: float(np.sum(value)) for name, value in sums.items()}


__all__ = ["PretrainingTrainer", "PretrainingSums", "KerasEngine", "compile_trainer",
           "pretraining_loss", "save_checkpoint", "restore_checkpoint", "checkpoint_path",
           "checkpoints", "checkpoint_step", "CHECKPOINT_SUFFIX"]
