"""The TensorFlow engine of pre-training: the step of `bert_keras.pretraining.step` under any
`tf.distribute` strategy, TPU first, and `tf.train.Checkpoint`s.

The training step is a plain `tf.function` around `strategy.run`, not `Model.fit` (Keras 3's
`fit` has open bugs on TPUs): each replica computes the gradients of its share of the batch
(optionally in micro-batches), the gradients are summed over replicas once, clipped to a global
norm, and applied. `steps_per_execution` steps run inside one `tf.function` call (a
`while_loop`), which is what keeps a TPU busy.

Checkpoints are `checkpoints/ckpt-<step>.*` with the `checkpoints/checkpoint` index: the model's
variables by their original names, the optimizer, the step and dropout's random state, so that
a resumed run draws the masks an uninterrupted one would.
"""

import os
import sys
import tempfile
import time

import keras
import tensorflow as tf
from absl import logging

from bert_keras import distribution
from bert_keras.common.files import file_system
from bert_keras.pretraining.engine import Engine, LossNotFinite
from bert_keras.pretraining.losses import SUM_NAMES, metrics_from_sums
from bert_keras.pretraining.output_dir import CHECKPOINTS_DIR
from bert_keras.pretraining.step import build_training_state, make_eval_function, make_train_function


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
    fs = file_system(directory)  # gs:// (any scheme://) through tf.io.gfile
    if fs.isdir(directory):
        for name in sorted(fs.listdir(directory)):
            if name.startswith("ckpt-") and name.endswith("_temp"):
                fs.rmtree(os.path.join(directory, name), ignore_errors=True)
                removed.append(name)
    return removed


class TensorFlowEngine(Engine):
    """`Engine` on the Keras TensorFlow backend: a `tf.distribute` strategy (`strategy`, or
    `--strategy` and `--tpu`; export takes the current one)."""

    backend = "tensorflow"
    description = "the TensorFlow trainer"

    def __init__(self, options, purpose, strategy=None):
        if strategy is None:
            strategy = (tf.distribute.get_strategy() if purpose == "export"
                        else distribution.resolve_strategy(options.strategy, options.tpu))
        self.options, self.purpose, self.strategy = options, purpose, strategy
        self.is_chief = distribution.is_chief(strategy)
        self.replicas = strategy.num_replicas_in_sync
        self.state = None

    @staticmethod
    def latest_checkpoint(output_dir):
        checkpoints = os.path.join(output_dir, CHECKPOINTS_DIR)
        return tf.train.latest_checkpoint(checkpoints) if tf.io.gfile.exists(checkpoints) else None

    def build(self, config):
        self.state = build_training_state(config, self.strategy, self.options,
                                          with_optimizer=self.purpose == "train")

    def weights(self):
        return self.state.variable_map

    def restore(self, path):
        status = self.state.checkpoint.restore(path)
        if self.state.optimizer is None:
            status.expect_partial()  # the optimizer is not needed to evaluate or export
        else:
            status.assert_existing_objects_matched()
        return self.step

    @property
    def step(self):
        return int(self.state.step.numpy())

    # ------------------------------------------------------------------------------ train
    def train(self, records, start):
        options, state = self.options, self.state
        dataset = self.strategy.distribute_datasets_from_function(
            records(options.train_batch_size, start_step=start))
        iterator = iter(dataset)
        train_steps = make_train_function(state, options.gradient_accumulation_steps,
                                          options.jit_compile)
        manager = self._checkpoint_manager()
        writer = self._summary_writer("train")
        total = options.num_train_steps
        console = _Console(total, start, options.verbose if self.is_chief else 0, options.log_steps)
        step, interval, metrics = start, {}, {}
        while step < total:
            every = options.save_checkpoints_steps
            num_steps = min(options.steps_per_execution, (step // every + 1) * every - step,
                            total - step)
            began = time.time()
            result = train_steps(iterator, tf.constant(num_steps, tf.int32))
            result = {name: value.numpy() for name, value in result.items()}
            elapsed = max(time.time() - began, 1e-9)
            if result["first_bad_step"] >= 0:
                raise LossNotFinite(result["loss"], int(result["first_bad_step"]))
            step = self.step
            metrics = metrics_from_sums({name: result[name] for name in SUM_NAMES})
            metrics.update(examples_per_second=float(result["examples"]) / elapsed,
                           tokens_per_second=float(result["tokens"]) / elapsed,
                           learning_rate=float(result["learning_rate"]))
            for name in SUM_NAMES:
                interval[name] = interval.get(name, 0.0) + float(result[name])
            with writer.as_default(step=step):
                for name, value in metrics.items():
                    tf.summary.scalar(name, value)
            console.update(step, metrics)
            if step % every == 0 or step >= total:
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
        return metrics

    def _checkpoint_manager(self):
        directory = os.path.join(self.options.output_dir, CHECKPOINTS_DIR)
        if not self.is_chief:
            # Every worker must take part in saving; only the chief's files are kept.
            directory = os.path.join(tempfile.gettempdir(),
                                     f"bert_keras_worker_{distribution.task_id(self.strategy)}")
        removed = remove_partial_checkpoints(directory)
        if removed:
            logging.info("removed the partial checkpoint(s) of an interrupted save: %s",
                         ", ".join(removed))
        return tf.train.CheckpointManager(self.state.checkpoint, directory,
                                          max_to_keep=self.options.keep_checkpoint_max,
                                          checkpoint_name="ckpt")

    def _summary_writer(self, name):
        if not self.is_chief:
            return tf.summary.create_noop_writer()
        return tf.summary.create_file_writer(os.path.join(self.options.output_dir, "logs", name))

    # --------------------------------------------------------------------------- evaluate
    def batch_sums(self, records):
        dataset = self.strategy.distribute_datasets_from_function(records(
            self.options.eval_batch_size,
            drop_remainder=distribution.is_tpu_strategy(self.strategy)))
        eval_step = make_eval_function(self.state)
        for batch in dataset:
            yield {name: float(value.numpy()) for name, value in eval_step(batch).items()}


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


__all__ = ["TensorFlowEngine", "remove_partial_checkpoints"]
