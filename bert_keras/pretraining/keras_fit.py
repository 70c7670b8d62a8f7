"""Pre-training with `keras.Model.fit`, for Keras backends other than TensorFlow (JAX: the
backend of today's Colab TPU).

`bert_keras.pretraining.run.run_pretraining` comes here when Keras runs on another backend than
TensorFlow (`KERAS_BACKEND=jax`). Shared with the TensorFlow trainer: the options
(`PretrainingOptions`), the records read on the host by the same `tf.data` pipeline
(`inputs.make_dataset_fn`, resumed at the same position), the model, the loss
(`pretraining.losses`: MLM loss over the batch's prediction weight + NSP loss over the batch
size), the optimizer, schedule and clipping (`optimization.create_optimizer`), the output
directory's rules (`output_dir`: resume a run, refuse another's) and the model directory it
writes. What differs is the loop: `fit` on the backend's compiled step instead of the
`tf.function` + `tf.distribute` step of `pretraining.step`, and so:

- checkpoints are `checkpoints/ckpt-<step>.npz`: every variable of the model (dropout's random
  state included) and of the optimizer, by position and path. A rerun resumes the latest one
  exactly (same step, optimizer state, dropout masks and record position); a checkpoint of the
  other trainer is refused with a message.
- gradient accumulation is Keras' (`Optimizer(gradient_accumulation_steps=N)`): `fit` takes
  micro-batches of `train_batch_size / N` and averages their gradients, each micro-batch's MLM
  loss normalized by its own prediction weight (TensorFlow's trainer normalizes by the whole
  batch's: the same when every record has the same number of predictions).
- data parallelism over all local devices with `keras.distribution.DataParallel` (the chips of
  a TPU v5e-8, the GPUs of a machine); one device trains alone.
- float16 loss scaling is not here (bfloat16 is: TPUs and recent GPUs compute it).

`mode="eval"` and `mode="export"` work as on TensorFlow (`evaluate`, `export_model_dir`).
`tests/pretraining/test_backends.py` checks that a run on JAX takes the TensorFlow trainer's
steps, and that a run killed after a checkpoint resumes to the weights of an uninterrupted one.

Example (any backend; this one runs on the backend of the process):

>>> from bert_keras.pretraining.run import PretrainingOptions, run_pretraining
>>> run_pretraining(PretrainingOptions(input_files="data/*.tfrecord", output_dir="models/tiny",
...     config="tiny", vocab_file="data/vocab.txt", num_train_steps=1000))  # doctest: +SKIP
"""

import os
import sys
import time

import keras
import numpy as np
from absl import logging
from keras import ops

from bert_keras import distribution, optimization, precision
from bert_keras.common.files import atomic_path, write_text_atomic
from bert_keras.model.pretraining_model import build_pretraining_model, pretraining_weight_map
from bert_keras.modeldir import model_dir as model_dir_lib
from bert_keras.pretraining import inputs as pretraining_input
from bert_keras.pretraining import losses
from bert_keras.pretraining import output_dir as output_dir_lib
from bert_keras.pretraining.options import NonFiniteLossError, PretrainingError
from bert_keras.pretraining.step import assign_initial_weights


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
    """Writes every checkpointed variable of `trainer` to `path` (an .npz), atomically."""
    arrays = {}
    for group, variables in _checkpoint_variables(trainer).items():
        arrays[f"{group}/paths"] = np.array([v.path for v in variables])
        for index, variable in enumerate(variables):
            arrays[f"{group}/{index}"] = keras.ops.convert_to_numpy(variable.value)
    with atomic_path(path) as temporary:
        with open(temporary, "wb") as f:
            np.savez(f, **arrays)


def restore_checkpoint(trainer, path, groups=("model", "optimizer")):
    """Assigns the variables of `groups` from a `save_checkpoint` file; a checkpoint of another
    model or optimizer stops with its path and the first variable that differs."""
    with np.load(path, allow_pickle=False) as stored:
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


class _Checkpoints(keras.callbacks.Callback):
    """Saves a checkpoint every `save_checkpoints_steps` updates and at the end, keeps the
    newest `keep_checkpoint_max`, stops at a loss that is not finite, and logs the metrics
    (TensorBoard in logs/train, and a line every `log_steps` without a terminal)."""

    def __init__(self, options, start, micro_batches):
        super().__init__()
        self.options, self.start, self.micro_batches = options, start, micro_batches
        self.saved = start
        self.logged = start
        self.began = time.time()
        self.examples = 0
        import tensorflow as tf

        self.tf = tf
        self.writer = tf.summary.create_file_writer(
            os.path.join(options.output_dir, "logs", "train"))
        self.console = options.verbose and not (sys.stdout.isatty() or "ipykernel" in sys.modules)

    def on_train_batch_end(self, batch, logs=None):
        micro = batch + 1  # fit's steps so far (micro-batches with accumulation)
        if micro % self.micro_batches:
            return
        step = self.start + micro // self.micro_batches
        logs = dict(logs or {})
        if not np.isfinite(logs.get("loss", 0.0)):
            kept = output_dir_lib.keras_checkpoints(self.options.output_dir)
            raise NonFiniteLossError(
                f"loss is {logs['loss']} by step {step}; training stopped. "
                + (f"The last good checkpoint {kept[-1][1]} is kept; " if kept
                   else "No checkpoint was saved; ")
                + "lower the learning rate, check the records (masked_lm_weights), or use float32")
        every = self.options.save_checkpoints_steps
        # At every multiple of `every`, or the first step past it (steps_per_execution).
        if step >= (self.saved // every + 1) * every or step >= self.options.num_train_steps:
            self.save(step)
        if step - self.logged >= self.options.log_steps or step >= self.options.num_train_steps:
            self.log(step, logs)

    def save(self, step):
        path = output_dir_lib.keras_checkpoint_path(self.options.output_dir, step)
        save_checkpoint(self.model, path)  # `self.model` brings JAX's state back into variables
        self.saved = step
        for _, old in output_dir_lib.keras_checkpoints(
                self.options.output_dir)[:-self.options.keep_checkpoint_max]:
            os.remove(old)
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


# ------------------------------------------------------------------------------ the runs
def _check_supported(options):
    backend = keras.backend.backend()
    if options.mixed_precision == "mixed_float16":
        raise PretrainingError(f"--dtype=float16 needs loss scaling, which pre-training on the "
                               f"Keras {backend} backend does not have; use bfloat16")


def _resolve_precision(options):
    options.mixed_precision = precision.mixed_precision_policy(
        precision.resolve_dtype(options.mixed_precision))
    _check_supported(options)


def _build_trainer(options, setup):
    keras.utils.set_random_seed(options.seed)
    model = build_pretraining_model(
        setup.config, causal=options.left_to_right, next_sentence=options.uses_next_sentence,
        dtype=None if options.mixed_precision == "float32" else options.mixed_precision,
        attention_implementation=options.attention_implementation)
    return PretrainingTrainer(model), pretraining_weight_map(model)


def compile_trainer(options, setup):
    """(a `PretrainingTrainer` compiled with the run's optimizer and built for it, its
    {original name: variable}) for `options` and a `resolve_model_setup` result."""
    trainer, variable_map = _build_trainer(options, setup)
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


def train(options):
    """`run.train` on a backend other than TensorFlow: trains from `init_model_dir` (or from
    scratch), or resumes the latest checkpoint of `output_dir`, for `num_train_steps`, and
    writes the model directory; returns the last metrics."""
    options.validate()
    backend = keras.backend.backend()
    if options.start_over:
        removed = output_dir_lib.remove_earlier_run(options.output_dir)
        if removed:
            logging.info("--start_over: removed %s from %s", ", ".join(removed),
                         options.output_dir)
    _resolve_precision(options)
    accumulation = options.gradient_accumulation_steps
    if options.train_batch_size % accumulation:
        raise PretrainingError(f"--train_batch_size={options.train_batch_size} must be a multiple "
                               f"of --gradient_accumulation_steps={accumulation}")
    micro_batch_size = options.train_batch_size // accumulation
    data_parallel = distribution.keras_data_parallel(
        {"train_batch_size / gradient_accumulation_steps" if accumulation > 1
         else "train_batch_size": micro_batch_size})
    setup = output_dir_lib.resolve_model_setup(options)
    output_dir_lib.check_sequence_length(options, setup.config)
    latest = output_dir_lib.check_output_dir(options, setup.config, backend)
    files, kind = pretraining_input.prepare_records(options)

    with distribution.keras_scope(data_parallel):
        trainer, variable_map = compile_trainer(options, setup)
    if latest:
        restore_checkpoint(trainer, latest)
        logging.info("resumed from %s at step %d", latest, int(trainer.optimizer.iterations))
    elif setup.init_weights is not None:
        assign_initial_weights(variable_map, setup.init_weights,
                               f"{options.init_model_dir}/{model_dir_lib.WEIGHTS_NAME}")
        logging.info("initialized from %s", options.init_model_dir)
    output_dir_lib.write_run_files(options, setup)

    start, total = int(trainer.optimizer.iterations), options.num_train_steps
    if start >= total:
        logging.info("step %d already reached num_train_steps %d", start, total)
        output_dir_lib.write_model_files(options, setup, variable_map)
        return {"step": start}
    dataset = pretraining_input.make_dataset_fn(
        files, kind, options.max_seq_length, options.max_predictions_per_seq, micro_batch_size,
        targets=pretraining_input.target_options(options, setup.vocab),
        start_step=start * accumulation, shuffle=True, repeat=True, seed=options.seed,
        shuffle_buffer_size=options.shuffle_buffer_size,
        skip_corrupt_records=options.skip_corrupt_records)(None)
    logging.info("pre-training on the Keras %s backend with fit: steps %d to %d of %d%s",
                 backend, start, total, options.train_batch_size,
                 f" ({accumulation} micro-batches)" if accumulation > 1 else "")
    # One iterator of the records, as the TensorFlow trainer has: given the dataset itself, Keras
    # on JAX makes a first iterator to build the model, and the shuffle of the next one moves on.
    stream = dataset.as_numpy_iterator()
    checkpoints = _Checkpoints(options, start, accumulation)
    tty = sys.stdout.isatty() or "ipykernel" in sys.modules
    began = time.time()
    with distribution.keras_scope(data_parallel):
        history = trainer.fit(
            ((batch,) for batch in stream), epochs=1, shuffle=False,
            steps_per_epoch=(total - start) * accumulation, callbacks=[checkpoints],
            verbose=1 if options.verbose and tty else 0)
    elapsed = max(time.time() - began, 1e-9)
    output_dir_lib.write_model_files(options, setup, variable_map)
    logging.info("wrote the model directory %s", options.output_dir)
    metrics = {name: float(values[-1]) for name, values in history.history.items()}
    metrics.update(step=int(trainer.optimizer.iterations),
                   examples_per_second=(total - start) * options.train_batch_size / elapsed,
                   learning_rate=float(trainer.optimizer.learning_rate))
    return metrics


def _trainer_for_inference(options, setup, data_parallel):
    """A trainer with the weights of the latest checkpoint, the output model or init_model_dir,
    and where they came from (as `run._state_for_inference`)."""
    with distribution.keras_scope(data_parallel):
        trainer, variable_map = _build_trainer(options, setup)
    source, arrays = output_dir_lib.inference_weights(options, setup, keras.backend.backend())
    if arrays is None:
        restore_checkpoint(trainer, source, groups=("model",))  # the optimizer is not needed
    else:
        assign_initial_weights(variable_map, arrays, source)
    return trainer, variable_map, source


def evaluate(options):
    """`run.evaluate` on a backend other than TensorFlow: MLM and NSP accuracy and loss on the
    records of `input_files`, read once; writes `eval_results.txt` and returns the dict."""
    options.validate()
    _resolve_precision(options)
    setup = output_dir_lib.resolve_model_setup(options)
    files, kind = pretraining_input.prepare_records(options)
    data_parallel = distribution.keras_data_parallel({"eval_batch_size": options.eval_batch_size})
    trainer, _, source = _trainer_for_inference(options, setup, data_parallel)
    dataset = pretraining_input.make_dataset_fn(
        files, kind, options.max_seq_length, options.max_predictions_per_seq,
        options.eval_batch_size, targets=pretraining_input.target_options(options, setup.vocab),
        shuffle=False, repeat=False, seed=options.seed, drop_remainder=data_parallel is not None,
        skip_corrupt_records=options.skip_corrupt_records)(None)
    if options.max_eval_steps:
        dataset = dataset.take(options.max_eval_steps)
    totals = {}
    batches = 0
    summing = PretrainingSums(trainer)
    try:
        for batch in dataset.as_numpy_iterator():
            with distribution.keras_scope(data_parallel):
                sums = summing.predict_on_batch(batch)
            for name, value in sums.items():
                totals[name] = totals.get(name, 0.0) + float(np.sum(value))
            batches += 1
    except Exception as error:  # a corrupt file: name it, as the TensorFlow trainer does
        import tensorflow as tf

        if isinstance(error, tf.errors.DataLossError):
            pretraining_input.raise_corrupt_files(files, error)
        raise
    results = losses.metrics_from_sums({name: totals.get(name, 0.0)
                                        for name in losses.SUM_NAMES})
    step = output_dir_lib.keras_checkpoint_step(source) or 0  # 0: a model directory's weights
    results.update(examples=int(totals.get("examples", 0)), batches=batches, global_step=step)
    lines = [f"{name} = {value}" for name, value in sorted(results.items())]
    lines.append(f"weights = {source}")
    os.makedirs(options.output_dir, exist_ok=True)
    write_text_atomic(os.path.join(options.output_dir, output_dir_lib.EVAL_RESULTS_FILE),
                      "\n".join(lines) + "\n")
    return results


def export_model_dir(options):
    """`run.export_model_dir` on a backend other than TensorFlow: the model directory of
    `output_dir` from its latest checkpoint (e.g. after a stop)."""
    _resolve_precision(options)
    setup = output_dir_lib.resolve_model_setup(options)
    found = output_dir_lib.keras_checkpoints(options.output_dir)
    if not found:
        raise PretrainingError(f"{os.path.join(options.output_dir, output_dir_lib.CHECKPOINTS_DIR)} "
                               f"holds no checkpoint of the Keras {keras.backend.backend()} "
                               "backend's trainer to export")
    _, variable_map, source = _trainer_for_inference(options, setup, None)
    output_dir_lib.write_model_files(options, setup, variable_map)
    logging.info("wrote the model directory %s from %s", options.output_dir, source)
    return {"step": found[-1][0], "checkpoint": source}


def run(options):
    """Runs `options.mode` ("train", "eval" or "export") on this Keras backend."""
    modes = {"train": train, "eval": evaluate, "export": export_model_dir}
    return modes[options.mode](options)


__all__ = ["PretrainingTrainer", "PretrainingSums", "compile_trainer", "pretraining_loss", "save_checkpoint", "restore_checkpoint",
           "train", "evaluate", "export_model_dir", "run"]
