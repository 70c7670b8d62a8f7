"""Fine-tuning a model directory on a task with `keras.Model.fit`, then evaluating it.

`run_finetuning` is the whole recipe of the paper: read and check every split first (bad input
stops the run before training, with the file and line), build encoder + task head under the
distribution strategy, AdamW with 10% linear warm-up and linear decay to zero, `fit` with a
progress bar, TensorBoard logs and checkpoints, predict the evaluation splits, score them with
the official metrics, and write

    output_dir/
      bert_config.json, vocab.txt, tokenizer_config.json   # a model directory ...
      model.safetensors, task_config.json                  # ... with the task head
      eval_results.json                                    # metrics, training loss, options
      predictions/<split>/...                              # each task's official files
      logs/                                                # TensorBoard
      checkpoints/        # while training: state after each epoch, to resume an interrupted run

The same steps by hand, with any Keras workflow in between:

>>> from bert_keras import finetuning, load_encoder  # doctest: +SKIP
>>> task = finetuning.get_task("glue/mrpc", "glue/MRPC", "models/minilm")  # doctest: +SKIP
>>> train = task.load("train", training=True)  # doctest: +SKIP
>>> model = task.build_model(load_encoder("models/minilm"))  # doctest: +SKIP
>>> steps = 3 * math.ceil(train.num_rows / 32)  # doctest: +SKIP
>>> model.compile(optimizer=finetuning.create_finetuning_optimizer(model, 2e-5, steps, steps // 10),
...               **task.compile_args())  # doctest: +SKIP
>>> model.fit(finetuning.make_dataset(train, 32, training=True), epochs=3,
...           steps_per_epoch=steps // 3)  # doctest: +SKIP
"""

import contextlib
import dataclasses
import importlib.util
import json
import logging
import math
import os
import tempfile

import keras
import numpy as np

from bert_keras import distribution, optimization
from bert_keras.common import cli
from bert_keras.common.cli import option
from bert_keras.common import outputs
from bert_keras.common.files import describe_changes, write_json_atomic, write_text_atomic
from bert_keras.finetuning.task import FinetuningOptions, get_task
from bert_keras.finetuning.task_models import TASK_PREFIX, save_task_model_dir, task_weight_map
from bert_keras.finetuning.tasks.common import DataFormatError
from bert_keras.model import checkpoint_names
from bert_keras.model.encoder import build_encoder
from bert_keras.modeldir.model_dir import ModelDir

logger = logging.getLogger("bert_keras.finetuning.run")

EVAL_RESULTS_NAME = "eval_results.json"
CHECKPOINT_DIR = "checkpoints"
TOOL = "run_finetuning"
# What a run writes in its output directory: an input may lie elsewhere in it.
RUN_OUTPUTS = ("bert_config.json", "vocab.txt", "tokenizer_config.json", "model.safetensors",
               "task_config.json", EVAL_RESULTS_NAME, "predictions", "logs", CHECKPOINT_DIR)
# The settings of an interrupted run, beside its checkpoint: a rerun must share them to resume.
RUN_SETTINGS_NAME = "run.json"
# What `keras.callbacks.BackupAndRestore` writes in the checkpoint folder, with the settings.
_CHECKPOINT_FILES = ("latest.weights.h5", "latest.weights.h5.bkp", "training_metadata.json",
                     "training_metadata.json.bkp", RUN_SETTINGS_NAME)



@dataclasses.dataclass
class FinetuningRunOptions:
    """What a fine-tuning run needs besides `FinetuningOptions`: the task, its data, the model
    directories, the splits and the device (the arguments of `run_finetuning`; the command
    line's flags come from here and from `FinetuningOptions`)."""

    task: str = option(None, "glue/<cola|sst2|mrpc|stsb|qqp|mnli|qnli|rte|wnli>, squad_v1, "
                       "squad_v2, swag or conll2003.", required=True)
    data_dir: str = option(None, "Folder of the task's official files (for --use_tfds: the "
                           "tensorflow-datasets data folder, or unset).")
    init_model_dir: str = option(None, "Model directory to start from.", required=True)
    output_dir: str = option(None, "Where the fine-tuned model directory and the results go.",
                             required=True)
    do_train: bool = option(True, "Fine-tune on the train split.")
    do_eval: bool = option(True, "Evaluate on the dev split(s).")
    do_predict: bool = option(False, "Write predictions for the test split(s).")
    strategy: str = distribution.strategy_option()
    tpu: str = distribution.tpu_option()
    mixed_precision: str = optimization.dtype_option()
    seed: int = cli.seed_option(42, "Random seed.")
    steps_per_execution: int = option(1, "Training steps per compiled call (raise on TPUs).")
    jit_compile: str = option("auto", "XLA; auto: on JAX, and on TensorFlow with a GPU.",
                              choices=("auto", "true", "false"))

    def run(self, **options):
        """`run_finetuning` with these settings; `options`: fields of `FinetuningOptions`."""
        strategy = distribution.resolve_strategy(self.strategy, tpu=self.tpu)
        policy = optimization.mixed_precision_policy(
            optimization.resolve_dtype(self.mixed_precision, strategy))
        return run_finetuning(
            self.task, self.data_dir, self.init_model_dir, self.output_dir,
            do_train=self.do_train, do_eval=self.do_eval, do_predict=self.do_predict,
            strategy=strategy, dtype=None if policy == "float32" else policy, seed=self.seed,
            steps_per_execution=self.steps_per_execution,
            jit_compile={"auto": None, "true": True, "false": False}[self.jit_compile],
            **options)


# ------------------------------------------------------------------------------ optimizer
def create_finetuning_optimizer(model, learning_rate, num_train_steps=None, num_warmup_steps=None,
                                weight_decay=0.01, clip_norm=1.0):
    """AdamW for `model.compile`, with BERT's schedule and weight-decay rule.

    (`optimization.create_optimizer` is pre-training's, on a variable map.)

    The learning rate is `optimization.WarmupLinearDecay` (linear warm-up, then linear decay
    to 0 over all steps, as the original), or `learning_rate` itself when it is already a
    `keras.optimizers.schedules.LearningRateSchedule` (the steps are then ignored); beta1 0.9,
    beta2 0.999, epsilon 1e-6; weight decay 0.01 except on the variables whose name
    (`task_weight_map`) has LayerNorm or bias in it; gradients clipped to global norm 1.0.

    The update is `optimization.AdamWeightDecay` with Adam's bias correction, epsilon added
    after it: PyTorch's `AdamW`, which the Hugging Face recipes use. (Unlike the original it
    corrects the moments' bias.) Keras' own `AdamW` adds epsilon before the correction, and its
    steps part from PyTorch's from the first update (`docs/finetuning.md`).
    """
    if not isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):
        learning_rate = optimization.WarmupLinearDecay(learning_rate, num_warmup_steps,
                                                       max(1, num_train_steps))
    optimizer = optimization.AdamWeightDecay(
        learning_rate=learning_rate, weight_decay=weight_decay, beta_1=0.9, beta_2=0.999,
        epsilon=1e-6, summed_gradients=False, global_clipnorm=clip_norm or None)
    optimizer.exclude_from_weight_decay(
        var_list=optimization.no_decay_variables(task_weight_map(model)))
    return optimizer


# --------------------------------------------------------------------------------- data
def make_dataset(data, batch_size, training=False, seed=0, drop_remainder=False):
    """A batched `tf.data.Dataset` of a `TaskData`: (inputs, labels[, sample_weight]).

    Training data is shuffled (a new order each epoch) and repeated, for `fit` with
    `steps_per_epoch`. The order of epoch k is a function of (`seed`, k) alone (a stateless
    random permutation), not of how many iterators were made before: Keras on the JAX backend
    makes one to build the model before training, and must still see the batches TensorFlow
    sees.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    items = (data.inputs,)
    if data.labels is not None:
        items += (data.labels,)
        if data.sample_weight is not None:
            items += (data.sample_weight,)
    items = items if len(items) > 1 else items[0]
    if not training:
        dataset = tf.data.Dataset.from_tensor_slices(items)
        return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)
    num_rows = data.num_rows
    seed = tf.constant(int(seed), tf.int64)

    def epoch_order(epoch):
        keys = tf.random.stateless_uniform([num_rows], seed=tf.stack([seed, epoch]))
        return tf.data.Dataset.from_tensor_slices(tf.argsort(keys))

    tensors = tf.nest.map_structure(tf.convert_to_tensor, items)
    order = tf.data.Dataset.counter().flat_map(epoch_order)  # row indices, epoch after epoch
    dataset = order.batch(batch_size, drop_remainder=drop_remainder).map(
        lambda rows: tf.nest.map_structure(lambda tensor: tf.gather(tensor, rows), tensors))
    return dataset.prefetch(tf.data.AUTOTUNE)


def predict(model, inputs, batch_size):
    """`model.predict` on a dict of arrays; the last batch is padded to a full one (static
    shapes for TPUs) and the padding rows dropped again."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    count = len(next(iter(inputs.values())))
    padded = math.ceil(count / batch_size) * batch_size
    if padded != count:
        inputs = {name: np.concatenate([value, np.zeros((padded - count,) + value.shape[1:],
                                                        value.dtype)])
                  for name, value in inputs.items()}
    dataset = tf.data.Dataset.from_tensor_slices(inputs).batch(batch_size, drop_remainder=True)
    outputs = model.predict(dataset, verbose=0)
    if isinstance(outputs, dict):
        return {name: value[:count] for name, value in outputs.items()}
    return outputs[:count]


# ---------------------------------------------------------------------------------- run
@dataclasses.dataclass
class FinetuningResult:
    """What `run_finetuning` returns: the trained model, the contents of eval_results.json
    (`results`) and the output directory."""

    model: object
    results: dict
    output_dir: str

    @property
    def metrics(self):
        """{split: {metric: value}}."""
        return self.results["metrics"]

    @property
    def train_loss(self):
        """The mean training loss of each epoch."""
        return self.results["train"]["loss_per_epoch"]


def _load_weights(model, model_dir):
    """Loads the encoder from a model directory (a `ModelDir` or a path), and the head too when
    the directory has one (a fine-tuned directory of the same task), each all or nothing."""
    model_dir = ModelDir.of(model_dir)
    arrays = model_dir.weights
    variables = task_weight_map(model)
    head = [name for name in variables if name.startswith(TASK_PREFIX)]
    has_head = any(name in arrays for name in head)
    checkpoint_names.assign_weights(variables, arrays,
                                    source=model_dir.weights_file,
                                    allow_missing=() if has_head else head)
    if has_head:
        logger.info("loaded the task head from %s", model_dir.path)


def _tensorboard(output_dir):
    # TensorFlow 2.21 no longer installs TensorBoard; without it the callback would fail at
    # the first logged step, so leave it out with a warning instead.
    if importlib.util.find_spec("tensorboard") is None:
        logger.warning("TensorBoard is not installed (pip install tensorboard): no logs written")
        return []
    return [keras.callbacks.TensorBoard(log_dir=os.path.join(output_dir, "logs"))]


def check_output_dir(output_dir, init_model_dir, data_dir):
    """Refuses, before any work, an `output_dir` that is (or holds) the run's inputs, or holds a
    model or another run's files this tool did not write there (naming both flags)."""
    outputs.check_not_over_inputs(output_dir, "output_dir",
                                  [("init_model_dir", getattr(init_model_dir, "path",
                                                              init_model_dir)),
                                   ("data_dir", data_dir)], writes=RUN_OUTPUTS)
    outputs.check_no_foreign_files(output_dir, "output_dir", TOOL)


def _check_resume(checkpoints, settings):
    """Refuses to resume the interrupted run in `checkpoints` with other settings (its epochs
    would be mixed with this run's); records `settings` for the next rerun."""
    path = os.path.join(checkpoints, RUN_SETTINGS_NAME)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            earlier = json.load(f)
        changes = describe_changes(earlier, settings, "there", "now")
        if changes:
            raise ValueError(
                f"{checkpoints} holds an interrupted run with other settings ({changes}); rerun "
                f"with its settings to resume it, or remove {checkpoints} to start again")
    write_json_atomic(path, settings, sort_keys=True)


def _remove_checkpoints(checkpoints, names):
    """Removes the files of an interrupted run's checkpoint (`names`, the run's own), and the
    folder once empty: a file of the user's there stays."""
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(checkpoints, name))
    with contextlib.suppress(OSError):
        os.rmdir(checkpoints)


def default_jit_compile():
    """Whether `fit` runs XLA-compiled by default: always on JAX, where without it every op
    runs eagerly (about 0.4 s a step for the tiny model on a CPU, against milliseconds); on
    TensorFlow with a GPU. XLA pays off on accelerators; on a CPU, TensorFlow's graph compiled
    slower under it and ran no faster here."""
    import keras  # pylint: disable=import-outside-toplevel

    if keras.backend.backend() == "jax":
        return True
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return bool(tf.config.list_physical_devices("GPU"))


def run_finetuning(task, data_dir, init_model_dir, output_dir, *, do_train=True, do_eval=True,
                   do_predict=False, strategy="auto", dtype=None, seed=42, steps_per_execution=1,
                   jit_compile=None, verbose="auto", callbacks=None, save_checkpoints=True,
                   **options):
    """Fine-tunes `init_model_dir` on `task` and evaluates it (see the module docstring).

    Args:
      task: "glue/<name>", "squad_v1", "squad_v2", "swag" or "conll2003".
      data_dir: folder of the task's official files.
      init_model_dir: a model directory (pre-trained, converted, or already fine-tuned for the
        same task, whose head is then loaded too).
      output_dir: where the fine-tuned model directory and the results go.
      do_train / do_eval / do_predict: train; score the dev split(s); write predictions for
        the unlabelled test split(s).
      strategy: a `tf.distribute.Strategy`, or a name for `distribution.resolve_strategy`
        ("auto": a TPU if reachable, else several workers or GPUs, else the one device).
      dtype: Keras dtype policy of the model, e.g. "mixed_bfloat16".
      options: fields of `FinetuningOptions` (learning_rate, train_batch_size,
        num_train_epochs, max_seq_length, warmup_proportion, doc_stride, feature_based, ...).
    Returns:
      A `FinetuningResult`.
    Raises:
      DataFormatError / ModelDirError / ValueError with a message naming the file, before
      any training.
    """
    unknown = set(options) - {f.name for f in dataclasses.fields(FinetuningOptions)}
    if unknown:
        raise TypeError(f"unknown fine-tuning option(s) {sorted(unknown)}; see FinetuningOptions")
    check_output_dir(os.fspath(output_dir), init_model_dir, data_dir)
    task = get_task(task, data_dir, init_model_dir, FinetuningOptions(**options))
    opts = task.options
    epochs = opts.num_train_epochs
    if do_train and (epochs != int(epochs) or epochs < 1):
        raise ValueError(f"num_train_epochs must be a whole number >= 1, got {epochs}")
    epochs = int(epochs)
    output_dir = os.fspath(output_dir)
    keras.utils.set_random_seed(seed)

    # Read and check every split before building anything.
    train = task.load("train", training=True) if do_train else None
    evaluations = {}
    if do_eval:
        for index, split in enumerate(task.eval_splits):
            if index > 0 and not task.split_exists(split):
                logger.info("%s: no %s split; not evaluated", task.name, split)
                continue
            evaluations[split] = task.load(split)
    if do_predict:
        for split in task.predict_splits:
            if task.split_exists(split):
                evaluations[split] = task.load(split)
    if not do_train and not evaluations:
        raise ValueError("nothing to do: do_train, do_eval and do_predict are all off")

    if not hasattr(strategy, "scope"):
        strategy = distribution.resolve_strategy(strategy or "auto")
    replicas = strategy.num_replicas_in_sync
    # On JAX with several devices: data parallel with keras.distribution (None elsewhere).
    data_parallel = distribution.keras_data_parallel(
        {"train_batch_size": opts.train_batch_size, "eval_batch_size": opts.eval_batch_size})
    if data_parallel is not None:
        replicas = len(data_parallel.device_mesh.devices.flatten())
    if jit_compile is None:
        jit_compile = default_jit_compile()
    # TPUs need static shapes, a batch split among devices whole batches: whole batches only.
    full_batches = distribution.is_tpu_strategy(strategy) or data_parallel is not None
    steps_per_epoch = 0
    if train is not None:
        steps_per_epoch = (train.num_rows // opts.train_batch_size if full_batches
                           else math.ceil(train.num_rows / opts.train_batch_size))
        if steps_per_epoch == 0:
            raise ValueError(f"{train.num_rows} training rows make no full batch of "
                             f"{opts.train_batch_size}; lower train_batch_size")
    num_train_steps = steps_per_epoch * epochs
    num_warmup_steps = int(num_train_steps * opts.warmup_proportion)
    # In multi-worker training every worker computes, only the chief writes the outputs (under
    # the output directory's lock, listing what it writes in its manifest).
    chief = distribution.is_chief(strategy)
    write_dir = output_dir if chief else tempfile.mkdtemp()
    with contextlib.ExitStack() as claimed:
        if chief:
            claimed.enter_context(outputs.output_lock(output_dir))
            claimed.enter_context(outputs.recording_outputs(output_dir, TOOL))
        checkpoints = os.path.join(write_dir, CHECKPOINT_DIR)
        if train is not None and save_checkpoints:
            # Weights, optimizer state and epoch after every epoch; a rerun with the same
            # output_dir and settings resumes from there (checked before building anything).
            _check_resume(checkpoints, {
                "task": task.name, "init_model_dir": task.model_dir.path, "seed": seed,
                "options": json.loads(json.dumps(dataclasses.asdict(opts), default=str))})

        config = task.model_dir.config
        with strategy.scope(), distribution.keras_scope(data_parallel):
            model = task.build_model(build_encoder(config, dtype=dtype), dtype=dtype)
            _load_weights(model, task.model_dir)
            optimizer = create_finetuning_optimizer(model, opts.learning_rate, num_train_steps,
                                                    num_warmup_steps, opts.weight_decay,
                                                    opts.clip_norm)
            if keras.dtype_policies.get(dtype or keras.config.dtype_policy()).name == \
                    "mixed_float16":
                # Keras scales the loss only when the model-wide policy is float16, not the
                # layers'.
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            model.compile(optimizer=optimizer, steps_per_execution=steps_per_execution,
                          jit_compile=jit_compile, **task.compile_args())

        history = {}
        if train is not None:
            logger.info("%s: %d training rows, batch %d (%d replica(s)), %d epochs = %d steps, "
                        "%d warm-up, peak learning rate %g", task.name, train.num_rows,
                        opts.train_batch_size, replicas, epochs, num_train_steps, num_warmup_steps,
                        opts.learning_rate)
            all_callbacks = [keras.callbacks.TerminateOnNaN()] + _tensorboard(write_dir)
            if save_checkpoints:
                # Removed once training has finished: its files only (Keras would remove the
                # whole folder).
                all_callbacks.append(keras.callbacks.BackupAndRestore(checkpoints,
                                                                      delete_checkpoint=False))
            all_callbacks += list(callbacks or [])
            dataset = make_dataset(train, opts.train_batch_size, training=True, seed=seed,
                                   drop_remainder=full_batches)
            with distribution.keras_scope(data_parallel):
                history = model.fit(dataset, epochs=epochs, steps_per_epoch=steps_per_epoch,
                                    callbacks=all_callbacks, verbose=verbose, shuffle=False).history
            if not np.all(np.isfinite(history.get("loss", [0.0]))):
                raise FloatingPointError(f"training loss became {history['loss'][-1]}; lower "
                                         "learning_rate")
            if save_checkpoints:
                _remove_checkpoints(checkpoints, _CHECKPOINT_FILES)

        metrics = {}
        for split, data in evaluations.items():
            with distribution.keras_scope(data_parallel):
                predicted = predict(model, data.inputs, opts.eval_batch_size)
            split_metrics = task.evaluate(data, predicted, split, write_dir)
            if split_metrics is not None:
                metrics[split] = split_metrics
                logger.info("%s %s: %s", task.name, split, _summary(split_metrics))

        task_config = save_task_model_dir(model, write_dir, config, task.vocab, task.do_lower_case,
                                          task.task_config())
        results = {
            "task": task.name,
            "metrics": metrics,
            "train": {"loss_per_epoch": [float(v) for v in history.get("loss", [])],
                      "num_rows": train.num_rows if train is not None else 0,
                      "num_train_steps": num_train_steps, "num_warmup_steps": num_warmup_steps,
                      "replicas": replicas},
            "options": dataclasses.asdict(opts),
            "init_model_dir": task.model_dir.path,
            "task_config": task_config,
            "data_notes": {split: data.notes for split, data in
                           [("train", train)] + list(evaluations.items())
                           if data is not None and data.notes},
        }
        write_text_atomic(os.path.join(write_dir, EVAL_RESULTS_NAME),
                          json.dumps(results, indent=2, sort_keys=True, default=_json_default) + "\n")
        return FinetuningResult(model, results, output_dir)


def _json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _summary(metrics):
    return ", ".join(f"{key}={value:.4g}" for key, value in metrics.items()
                     if isinstance(value, (int, float)))


__all__ = ["FinetuningRunOptions", "create_finetuning_optimizer", "make_dataset", "predict",
           "run_finetuning", "FinetuningResult", "FinetuningOptions", "DataFormatError",
           "EVAL_RESULTS_NAME"]
