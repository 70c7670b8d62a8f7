"""Pre-training BERT (masked LM + next sentence) on TensorFlow (any `tf.distribute` strategy, TPU
first) or on JAX.

`run_pretraining(PretrainingOptions(...))` reads pre-training TFRecords and leaves a model
directory (config, vocab, encoder weights, MLM and NSP heads) in `output_dir`, loadable by
`bert_keras.load_encoder` and `bert_keras.load_pretraining_model`.

This module is the recipe, the same on every backend: set up (options, precision, batch, model
config and vocabulary, output directory, records), restore (a checkpoint of this run, or
`init_model_dir`'s weights), train, evaluate, write the model directory. The loop is an engine
(`bert_keras.pretraining.engine`), chosen once by the Keras backend: on TensorFlow the
`tf.distribute` step of `pretraining.step` (`tensorflow_engine`, TPU first), on JAX
`keras.Model.fit` (`keras_engine`).

Layout of `output_dir`:

    bert_config.json, vocab.txt, tokenizer_config.json   written at the start
    model.safetensors                                    written at the end (original names)
    pretraining_options.json                             the options of the last run
    checkpoints/ckpt-<step>.*, checkpoints/checkpoint    model, optimizer, step, dropout seeds
                                                         (ckpt-<step>.npz on JAX)
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

import keras
import tensorflow as tf
from absl import logging

from bert_keras import precision
from bert_keras.common.files import file_system, write_text_atomic
from bert_keras.modeldir import model_dir as model_dir_lib
from bert_keras.pretraining import inputs
from bert_keras.pretraining.engine import LossNotFinite
from bert_keras.pretraining.keras_engine import KerasEngine
from bert_keras.pretraining.losses import SUM_NAMES, metrics_from_sums
from bert_keras.pretraining.options import (MODES, NonFiniteLossError, PretrainingError,
                                            PretrainingOptions)
from bert_keras.pretraining.output_dir import (CHECKPOINTS_DIR, EVAL_RESULTS_FILE,
                                               check_inputs, check_output_dir,
                                               check_sequence_length, claimed_output_dir,
                                               inference_weights, remove_earlier_run,
                                               resolve_model_setup, write_model_files,
                                               write_run_files)
from bert_keras.pretraining.step import assign_initial_weights
from bert_keras.pretraining.tensorflow_engine import TensorFlowEngine

ENGINES = (TensorFlowEngine, KerasEngine)


def engine_class():
    """The engine of this process's Keras backend: TensorFlow's `tf.distribute` step loop, or
    `fit` on any other backend (JAX)."""
    return TensorFlowEngine if keras.backend.backend() == "tensorflow" else KerasEngine


def run_pretraining(options, strategy=None):
    """Runs `options.mode` ("train", "eval" or "export"); returns its metrics dict."""
    if options.mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {options.mode!r}")
    modes = {"train": train, "eval": evaluate, "export": export_model_dir}
    return modes[options.mode](options, strategy)


# -------------------------------------------------------------------------------------- train
def train(options, strategy=None):
    """Trains (or resumes) and writes the model directory; returns the final metrics dict.

    `strategy`: a `tf.distribute` strategy for the TensorFlow engine (default: `--strategy`)."""
    options.validate()
    check_inputs(options)
    inputs.expand_file_pattern(options.input_files)  # no record files: nothing is written
    engine = engine_class()(options, "train", strategy)
    with claimed_output_dir(options, engine.is_chief):  # the lock, the manifest
        return _train(options, engine)


def _train(options, engine):
    if options.start_over and engine.is_chief:
        removed = remove_earlier_run(options.output_dir)
        if removed:
            logging.info("--start_over: removed %s from %s", ", ".join(removed),
                         options.output_dir)
    engine.barrier("start over")  # no process looks for checkpoints before they are gone
    _resolve_precision(options, engine.strategy, engine.loss_scaling)
    _check_batch(options, engine.replicas)
    setup = resolve_model_setup(options)
    check_sequence_length(options, setup.config)
    latest = _checkpoint_to_resume(options, setup, engine)
    engine.check_same_checkpoint(latest)
    files, kind = inputs.prepare_records(options)
    inputs.check_files_divide(files, engine.processes)

    keras.utils.set_random_seed(options.seed)
    engine.build(setup.config)
    if latest:
        logging.info("resumed from %s at step %d", latest, engine.restore(latest))
    elif setup.init_weights is not None:
        assign_initial_weights(engine.weights(), setup.init_weights,
                               f"{options.init_model_dir}/{model_dir_lib.WEIGHTS_NAME}")
        logging.info("initialized from %s", options.init_model_dir)
    if engine.is_chief:
        write_run_files(options, setup, engine.step)

    start, total = engine.step, options.num_train_steps
    if start >= total:
        logging.info("step %d already reached num_train_steps %d", start, total)
        metrics = {}
    else:
        records = _records(options, files, kind, setup.vocab, training=True)
        try:
            metrics = engine.train(records, start)
        except tf.errors.DataLossError as error:
            inputs.raise_corrupt_files(files, error)
        except LossNotFinite as stop:
            raise _non_finite_loss_error(stop, engine.latest_checkpoint(options.output_dir)) \
                from None
    if engine.is_chief:
        write_model_files(options, setup, engine.weights())
        logging.info("wrote the model directory %s", options.output_dir)
    metrics["step"] = engine.step
    return metrics


def _resolve_precision(options, strategy=None, loss_scaling=True):
    """Decides `mixed_precision="auto"` for the device (of `strategy`, a `tf.distribute`
    strategy, where given; `precision.resolve_dtype`), and refuses float16 to an engine without
    loss scaling."""
    options.mixed_precision = precision.mixed_precision_policy(
        precision.resolve_dtype(options.mixed_precision, strategy))
    if options.mixed_precision == "mixed_float16" and not loss_scaling:
        raise PretrainingError(f"--dtype=float16 needs loss scaling, which pre-training on the "
                               f"Keras {keras.backend.backend()} backend does not have; use "
                               "bfloat16")


def _check_batch(options, replicas):
    divisor = replicas * options.gradient_accumulation_steps
    if options.train_batch_size % divisor:
        raise ValueError(f"train_batch_size {options.train_batch_size} must be a multiple of "
                         f"replicas ({replicas}) x gradient_accumulation_steps "
                         f"({options.gradient_accumulation_steps})")


def _checkpoint_to_resume(options, setup, engine):
    """The engine's latest checkpoint in `output_dir` when it is this run's (None: start), after
    the output directory's checks (`output_dir.check_output_dir`)."""
    out = options.output_dir
    other = next(kind for kind in ENGINES if kind is not type(engine))
    return check_output_dir(options, setup.config, engine.latest_checkpoint(out),
                            keras.backend.backend(),
                            foreign=(other.latest_checkpoint(out), other.backend))


def _records(options, files, kind, vocab, training):
    """`records(batch_size, start_step=0, drop_remainder=True)`: the `dataset_fn` of the run's
    records (`inputs.make_dataset_fn`), shuffled and repeated to train, read once in order to
    evaluate."""
    targets = inputs.target_options(options, vocab)

    def records(batch_size, start_step=0, drop_remainder=True):
        return inputs.make_dataset_fn(
            files, kind, options.max_seq_length, options.max_predictions_per_seq, batch_size,
            targets=targets, start_step=start_step, shuffle=training, repeat=training,
            seed=options.seed, shuffle_buffer_size=options.shuffle_buffer_size,
            drop_remainder=drop_remainder, skip_corrupt_records=options.skip_corrupt_records)

    return records


def _non_finite_loss_error(stop, kept):
    return NonFiniteLossError(
        f"loss is {stop.loss} {'at' if stop.exact else 'by'} step {stop.step}; training "
        "stopped. " + (f"The last good checkpoint {kept} is kept; " if kept
                       else "No checkpoint was saved; ")
        + "lower the learning rate, check the records (masked_lm_weights), or use float32")


# --------------------------------------------------------------------------- eval and export
def _load_weights(options, setup, engine):
    """Builds the engine's model with the weights of the latest checkpoint of `output_dir`, its
    model or `init_model_dir` (`output_dir.inference_weights`); returns where they came from."""
    keras.utils.set_random_seed(options.seed)
    engine.build(setup.config)
    source, arrays = inference_weights(options, setup,
                                       engine.latest_checkpoint(options.output_dir))
    if arrays is None:
        engine.restore(source)
    else:
        assign_initial_weights(engine.weights(), arrays, source)
    return source


def evaluate(options, strategy=None):
    """MLM and NSP accuracy and loss on the records of `input_files`, read once.

    Writes `eval_results.txt` (`name = value` lines, as the original) and returns the dict.
    """
    options.validate()
    inputs.expand_file_pattern(options.input_files)  # no record files: nothing is written
    engine = engine_class()(options, "eval", strategy)
    with claimed_output_dir(options, engine.is_chief):
        return _evaluate(options, engine)


def _evaluate(options, engine):
    _resolve_precision(options, engine.strategy, engine.loss_scaling)
    setup = resolve_model_setup(options)
    files, kind = inputs.prepare_records(options)
    source = _load_weights(options, setup, engine)

    totals = {name: 0.0 for name in SUM_NAMES + ("examples",)}
    batches = 0
    try:
        for sums in engine.batch_sums(_records(options, files, kind, setup.vocab, training=False)):
            for name in totals:
                totals[name] += sums[name]
            batches += 1
            if options.max_eval_steps and batches >= options.max_eval_steps:
                break
    except tf.errors.DataLossError as error:
        inputs.raise_corrupt_files(files, error)
    results = metrics_from_sums({name: totals[name] for name in SUM_NAMES})
    results.update(examples=int(totals["examples"]), batches=batches, global_step=engine.step)
    if engine.is_chief:
        _write_eval_results(options, results, source)
    return results


def _write_eval_results(options, results, source):
    """eval_results.txt (`name = value` lines and the weights' source) and logs/eval."""
    lines = [f"{name} = {value}" for name, value in sorted(results.items())]
    lines.append(f"weights = {source}")
    file_system(options.output_dir).makedirs(options.output_dir)
    write_text_atomic(os.path.join(options.output_dir, EVAL_RESULTS_FILE), "\n".join(lines) + "\n")
    writer = tf.summary.create_file_writer(os.path.join(options.output_dir, "logs", "eval"))
    with writer.as_default(step=results["global_step"]):
        for name, value in results.items():
            tf.summary.scalar(name, float(value))
    writer.flush()


def export_model_dir(options, strategy=None):
    """Writes the model directory of `output_dir` from its latest checkpoint (e.g. after a stop)."""
    engine = engine_class()(options, "export", strategy)
    with claimed_output_dir(options, engine.is_chief):
        return _export_model_dir(options, engine)


def _export_model_dir(options, engine):
    _resolve_precision(options, engine.strategy, engine.loss_scaling)
    setup = resolve_model_setup(options)
    latest = engine.latest_checkpoint(options.output_dir)
    if not latest:
        raise PretrainingError(f"{os.path.join(options.output_dir, CHECKPOINTS_DIR)} holds no "
                               f"checkpoint of {engine.description} to export")
    source = _load_weights(options, setup, engine)
    write_model_files(options, setup, engine.weights())
    logging.info("wrote the model directory %s from %s", options.output_dir, source)
    return {"step": engine.step, "checkpoint": source}


__all__ = ["PretrainingOptions", "PretrainingError", "NonFiniteLossError", "run_pretraining",
           "train", "evaluate", "export_model_dir", "resolve_model_setup", "engine_class",
           "ENGINES", "CHECKPOINTS_DIR", "MODES"]
