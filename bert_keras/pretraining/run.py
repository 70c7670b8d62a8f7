"""Pre-training BERT (masked LM + next sentence) with any `tf.distribute` strategy, TPU first.

`run_pretraining(PretrainingOptions(...))` reads pre-training TFRecords and leaves a model
directory (config, vocab, encoder weights, MLM and NSP heads) in `output_dir`, loadable by
`bert_keras.load_encoder` and `bert_keras.load_pretraining_model`.

The training step (`bert_keras.pretraining.step`) is a plain `tf.function` around `strategy.run`,
not `Model.fit` (Keras 3's `fit` has open bugs on TPUs): each replica computes the gradients of its
share of the batch (optionally in micro-batches), the gradients are summed over replicas once,
clipped to a global norm, and applied. `steps_per_execution` steps run inside one `tf.function`
call (a `while_loop`), which is what keeps a TPU busy.

Layout of `output_dir`:

    bert_config.json, vocab.txt, tokenizer_config.json   written at the start
    model.safetensors                                    written at the end (original names)
    pretraining_options.json                             the options of the last run
    checkpoints/ckpt-<step>.*, checkpoints/checkpoint    model, optimizer, step, dropout seeds
    checkpoints/run.json                                 what must not change between reruns
    logs/train, logs/eval                                TensorBoard
    eval_results.txt                                     from mode "eval"

A rerun with the same `output_dir` resumes from the latest checkpoint: same step, same optimizer
state, and the same position in the record stream (see `bert_keras.pretraining.inputs`).

Example:

>>> from bert_keras.pretraining.run import PretrainingOptions, run_pretraining
>>> run_pretraining(PretrainingOptions(
...     input_files="data/part-*.tfrecord", output_dir="models/tiny", config="tiny",
...     vocab_file="data/vocab.txt", train_batch_size=32, num_train_steps=1000,
...     num_warmup_steps=100, learning_rate=1e-3))  # doctest: +SKIP
"""

import os
import shutil
import sys
import tempfile
import time

import keras
import tensorflow as tf
from absl import logging

from bert_keras import distribution, optimization
from bert_keras.common.files import write_text_atomic
from bert_keras.modeldir import model_dir as model_dir_lib
from bert_keras.pretraining import inputs as pretraining_input
from bert_keras.pretraining.losses import SUM_NAMES, metrics_from_sums
from bert_keras.pretraining.options import (MODES, NonFiniteLossError, PretrainingError,
                                            PretrainingOptions)
from bert_keras.pretraining.output_dir import (CHECKPOINTS_DIR, EVAL_RESULTS_FILE,
                                               check_output_dir, check_sequence_length,
                                               inference_weights, remove_earlier_run,
                                               resolve_model_setup, write_model_files,
                                               write_run_files)
from bert_keras.pretraining.step import (TrainingState, assign_initial_weights, build_training_state,
                                         make_eval_function, make_train_function)



# ------------------------------------------------------------------------------------- input
def _check_batch(options, strategy):
    replicas = strategy.num_replicas_in_sync
    divisor = replicas * options.gradient_accumulation_steps
    if options.train_batch_size % divisor:
        raise ValueError(f"train_batch_size {options.train_batch_size} must be a multiple of replicas "
                         f"({replicas}) x gradient_accumulation_steps ({options.gradient_accumulation_steps})")


# -------------------------------------------------------------------------------------- train
def _summary_writer(options, strategy, name):
    if not distribution.is_chief(strategy):
        return tf.summary.create_noop_writer()
    return tf.summary.create_file_writer(os.path.join(options.output_dir, "logs", name))


def remove_partial_checkpoints(directory):
    """Removes what an interrupted checkpoint save leaves in `directory` (TensorFlow's
    `ckpt-N_temp/` folders of `.tempstate` files, never a usable checkpoint); returns their names.

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> os.makedirs(os.path.join(folder, "ckpt-500_temp"))
    >>> remove_partial_checkpoints(folder), os.listdir(folder)
    (['ckpt-500_temp'], [])
    """
    removed = []
    if os.path.isdir(directory):
        for name in sorted(os.listdir(directory)):
            if name.startswith("ckpt-") and name.endswith("_temp"):
                shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
                removed.append(name)
    return removed


def _checkpoint_manager(options, state):
    directory = os.path.join(options.output_dir, CHECKPOINTS_DIR)
    if not distribution.is_chief(state.strategy):
        # Every worker must take part in saving; only the chief's files are kept.
        directory = os.path.join(tempfile.gettempdir(), f"bert_keras_worker_{distribution.task_id(state.strategy)}")
    removed = remove_partial_checkpoints(directory)
    if removed:
        logging.info("removed the partial checkpoint(s) of an interrupted save: %s",
                     ", ".join(removed))
    return tf.train.CheckpointManager(state.checkpoint, directory, max_to_keep=options.keep_checkpoint_max,
                                      checkpoint_name="ckpt")


def _resolve_precision(options, strategy):
    """Decides `mixed_precision="auto"` for `strategy`'s device (`optimization.resolve_dtype`)."""
    options.mixed_precision = optimization.mixed_precision_policy(
        optimization.resolve_dtype(options.mixed_precision, strategy))


def train(options, strategy=None):
    """Trains (or resumes) and writes the model directory; returns the final metrics dict."""
    options.validate()
    strategy = strategy or distribution.resolve_strategy(options.strategy, options.tpu)
    if options.start_over and distribution.is_chief(strategy):
        removed = remove_earlier_run(options.output_dir)
        if removed:
            logging.info("--start_over: removed %s from %s", ", ".join(removed),
                         options.output_dir)
    _resolve_precision(options, strategy)
    _check_batch(options, strategy)
    setup = resolve_model_setup(options)
    check_sequence_length(options, setup.config)
    latest = check_output_dir(options, setup.config)
    files, kind = pretraining_input.prepare_records(options)

    keras.utils.set_random_seed(options.seed)
    state = build_training_state(setup.config, strategy, options)
    chief = distribution.is_chief(strategy)
    if latest:
        state.checkpoint.restore(latest).assert_existing_objects_matched()
        logging.info("resumed from %s at step %d", latest, int(state.step.numpy()))
    elif setup.init_weights is not None:
        assign_initial_weights(state.variable_map, setup.init_weights,
                               f"{options.init_model_dir}/{model_dir_lib.WEIGHTS_NAME}")
        logging.info("initialized from %s", options.init_model_dir)
    if chief:
        write_run_files(options, setup)
    manager = _checkpoint_manager(options, state)

    start = int(state.step.numpy())
    total = options.num_train_steps
    if start >= total:
        logging.info("step %d already reached num_train_steps %d", start, total)
        if chief:
            write_model_files(options, setup, state.variable_map)
        return {"step": start}

    dataset_fn = pretraining_input.make_dataset_fn(
        files, kind, options.max_seq_length, options.max_predictions_per_seq, options.train_batch_size,
        targets=pretraining_input.target_options(options, setup.vocab), start_step=start, shuffle=True, repeat=True,
        seed=options.seed, shuffle_buffer_size=options.shuffle_buffer_size,
        skip_corrupt_records=options.skip_corrupt_records)
    dataset = strategy.distribute_datasets_from_function(dataset_fn)
    iterator = iter(dataset)
    train_steps = make_train_function(state, options.gradient_accumulation_steps, options.jit_compile)
    writer = _summary_writer(options, strategy, "train")
    console = _Console(total, start, options.verbose if chief else 0, options.log_steps)
    step = start
    interval = {}
    metrics = {}
    while step < total:
        next_save = (step // options.save_checkpoints_steps + 1) * options.save_checkpoints_steps
        num_steps = min(options.steps_per_execution, next_save - step, total - step)
        began = time.time()
        try:
            result = train_steps(iterator, tf.constant(num_steps, tf.int32))
            result = {name: value.numpy() for name, value in result.items()}
        except tf.errors.DataLossError as error:
            pretraining_input.raise_corrupt_files(files, error)
        elapsed = max(time.time() - began, 1e-9)
        if result["first_bad_step"] >= 0:
            kept = manager.latest_checkpoint
            raise NonFiniteLossError(
                f"loss is {result['loss']} at step {int(result['first_bad_step'])}; training stopped. "
                + (f"The last good checkpoint {kept} is kept; " if kept else "No checkpoint was saved; ")
                + "lower the learning rate, check the records (masked_lm_weights), or use float32")
        step = int(state.step.numpy())
        metrics = metrics_from_sums({name: result[name] for name in SUM_NAMES})
        metrics.update(examples_per_second=float(result["examples"]) / elapsed,
                       tokens_per_second=float(result["tokens"]) / elapsed,
                       learning_rate=float(result["learning_rate"]))
        for name in SUM_NAMES:
            interval[name] = interval.get(name, 0.0) + float(result[name])
        _log_train(writer, step, metrics)
        console.update(step, metrics)
        if step % options.save_checkpoints_steps == 0 or step >= total:
            try:
                path = manager.save(checkpoint_number=step)
            except (OSError, tf.errors.OpError):
                remove_partial_checkpoints(manager.directory)  # e.g. a full disk
                raise
            since = metrics_from_sums(interval)
            logging.info("step %d: saved %s; since the last save: %s", step, path,
                         ", ".join(f"{k} {v:.4f}" for k, v in sorted(since.items())))
            interval = {}
    writer.flush()
    if chief:
        write_model_files(options, setup, state.variable_map)
        logging.info("wrote the model directory %s", options.output_dir)
    metrics["step"] = step
    return metrics


class _Console:
    """A Keras progress bar on a terminal; otherwise a log line every `log_steps` steps."""

    def __init__(self, total, start, verbose, log_steps):
        self.verbose = verbose
        self.log_steps = log_steps
        self.last_logged = start
        self.progbar = None
        # A terminal or a notebook shows a live bar; logs get a line every `log_steps`.
        if verbose and (sys.stdout.isatty() or "ipykernel" in sys.modules):
            self.progbar = keras.utils.Progbar(total, verbose=1, stateful_metrics=[
                "loss", "mlm_acc", "nsp_acc", "examples/s", "tokens/s", "lr"])
            self.progbar.update(start)

    def update(self, step, metrics):
        shown = [("loss", metrics["loss"]), ("mlm_acc", metrics.get("masked_lm_accuracy", 0.0))]
        if "next_sentence_accuracy" in metrics:
            shown.append(("nsp_acc", metrics["next_sentence_accuracy"]))
        shown += [("examples/s", metrics["examples_per_second"]),
                  ("tokens/s", metrics["tokens_per_second"]), ("lr", metrics["learning_rate"])]
        if self.progbar is not None:
            self.progbar.update(step, shown)
        elif self.verbose and step - self.last_logged >= self.log_steps:
            self.last_logged = step
            logging.info("step %d: %s", step, ", ".join(
                f"{name} {value:.4g}" for name, value in shown))


def _log_train(writer, step, metrics):
    with writer.as_default(step=step):
        for name, value in metrics.items():
            tf.summary.scalar(name, value)


# --------------------------------------------------------------------------- eval and export
def _state_for_inference(options, strategy, setup):
    """A built state whose weights come from the latest checkpoint, the output model or init dir."""
    state = build_training_state(setup.config, strategy, options, with_optimizer=False)
    source, arrays = inference_weights(options, setup)
    if arrays is None:
        state.checkpoint.restore(source).expect_partial()  # the optimizer is not needed here
    else:
        assign_initial_weights(state.variable_map, arrays, source)
    return state, source


def evaluate(options, strategy=None):
    """MLM and NSP accuracy and loss on the records of `input_files`, read once.

    Writes `eval_results.txt` (`name = value` lines, as the original) and returns the dict.
    """
    options.validate()
    strategy = strategy or distribution.resolve_strategy(options.strategy, options.tpu)
    _resolve_precision(options, strategy)
    setup = resolve_model_setup(options)
    files, kind = pretraining_input.prepare_records(options)
    state, source = _state_for_inference(options, strategy, setup)
    tpu = distribution.is_tpu_strategy(strategy)
    dataset_fn = pretraining_input.make_dataset_fn(
        files, kind, options.max_seq_length, options.max_predictions_per_seq, options.eval_batch_size,
        targets=pretraining_input.target_options(options, setup.vocab), shuffle=False, repeat=False, seed=options.seed,
        drop_remainder=tpu, skip_corrupt_records=options.skip_corrupt_records)
    dataset = strategy.distribute_datasets_from_function(dataset_fn)
    eval_step = make_eval_function(state)
    totals = {name: 0.0 for name in SUM_NAMES + ("examples",)}
    batches = 0
    try:
        for batch in dataset:
            sums = eval_step(batch)
            for name in totals:
                totals[name] += float(sums[name].numpy())
            batches += 1
            if options.max_eval_steps and batches >= options.max_eval_steps:
                break
    except tf.errors.DataLossError as error:
        pretraining_input.raise_corrupt_files(files, error)
    results = metrics_from_sums({name: totals[name] for name in SUM_NAMES})
    results.update(examples=int(totals["examples"]), batches=batches, global_step=int(state.step.numpy()))
    if distribution.is_chief(strategy):
        lines = [f"{name} = {value}" for name, value in sorted(results.items())]
        lines.append(f"weights = {source}")
        os.makedirs(options.output_dir, exist_ok=True)
        write_text_atomic(os.path.join(options.output_dir, EVAL_RESULTS_FILE), "\n".join(lines) + "\n")
        writer = _summary_writer(options, strategy, "eval")
        with writer.as_default(step=results["global_step"]):
            for name, value in results.items():
                tf.summary.scalar(name, float(value))
        writer.flush()
    return results


def export_model_dir(options, strategy=None):
    """Writes the model directory of `output_dir` from its latest checkpoint (e.g. after a stop)."""
    strategy = strategy or tf.distribute.get_strategy()
    _resolve_precision(options, strategy)
    setup = resolve_model_setup(options)
    checkpoints = os.path.join(options.output_dir, CHECKPOINTS_DIR)
    if not (tf.io.gfile.exists(checkpoints) and tf.train.latest_checkpoint(checkpoints)):
        raise PretrainingError(f"{checkpoints} holds no checkpoint to export")
    state, source = _state_for_inference(options, strategy, setup)
    write_model_files(options, setup, state.variable_map)
    logging.info("wrote the model directory %s from %s", options.output_dir, source)
    return {"step": int(state.step.numpy()), "checkpoint": source}


def run_pretraining(options, strategy=None):
    """Runs `options.mode` ("train", "eval" or "export"); returns its metrics dict."""
    if options.mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {options.mode!r}")
    if keras.backend.backend() != "tensorflow":  # JAX (Colab's TPU): keras.Model.fit
        from bert_keras.pretraining import keras_fit

        return keras_fit.run(options)
    if options.mode == "train":
        return train(options, strategy)
    if options.mode == "eval":
        return evaluate(options, strategy)
    return export_model_dir(options, strategy)


__all__ = ["PretrainingOptions", "PretrainingError", "NonFiniteLossError", "TrainingState",
           "run_pretraining", "train", "evaluate", "export_model_dir", "resolve_model_setup",
           "check_output_dir", "build_training_state", "assign_initial_weights", "make_train_function",
           "make_eval_function", "remove_partial_checkpoints", "CHECKPOINTS_DIR", "MODES"]
