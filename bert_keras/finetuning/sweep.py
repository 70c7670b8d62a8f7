"""Many short fine-tuning runs of one GLUE task in one process: a grid, seeds, a learning curve.

Comparing a pre-trained model with a randomly initialized one needs dozens of runs: each side's
learning rate and epochs chosen from the same grid on a held-out slice of the *training* data,
several seeds at the chosen setting, and a learning curve over the number of labelled examples.
Built and traced once per run, a tiny BERT spends most of a run's seconds in Keras and TensorFlow
start-up instead of in its steps. `FinetuningSweep` builds the task model, its AdamW optimizer
(the recipe of `finetuning.run.create_finetuning_optimizer`) and the traced training and prediction steps
once; each `run` then

1. assigns the run's initial encoder weights ({original BERT name: array}, e.g. a model
   directory's `model.safetensors`) and draws a fresh task head from the run's seed
   (a normal of standard deviation `initializer_range`, zero biases, as `run_finetuning`),
2. zeroes the optimizer's moments and step count and sets the schedule's peak learning rate,
   warm-up and length (10% linear warm-up, then linear decay to 0, as `run_finetuning`),
3. trains with `keras.Model.fit` on the run's examples (shuffled with the run's seed; dropout
   drawn from the run's seed), and scores the given evaluation sets with the task's metrics.

So a run is the same computation as `run_finetuning` with the same options, without writing a
model directory.

Example (a tiny random encoder, for the shapes; `python -m pytest --doctest-modules` runs it):

>>> import os, tempfile, numpy as np, bert_keras
>>> from bert_keras.finetuning.task import get_task
>>> from bert_keras.modeldir import model_dir
>>> root = tempfile.mkdtemp()
>>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "."]
>>> _ = open(f"{root}/vocab.txt", "w").write("\\n".join(vocab) + "\\n")
>>> config = bert_keras.BertConfig.from_preset("tiny", vocab_size=len(vocab))
>>> model_dir.write_model_dir(f"{root}/model", config, f"{root}/vocab.txt", True,
...                           random_encoder_weights(config, seed=1))
>>> rows = ["sentence\\tlabel"] + ["good film .\\t1", "bad film .\\t0"] * 8
>>> for split in ("train", "dev"):
...     _ = open(f"{root}/{split}.tsv", "w").write("\\n".join(rows) + "\\n")
>>> task = get_task("glue/sst2", root, f"{root}/model",
...                 bert_keras.finetuning.FinetuningOptions(max_seq_length=8))
>>> train, dev = task.load("train", training=True), task.load("dev")
>>> sweep = FinetuningSweep(task, config, train_batch_size=8)
>>> result = sweep.run(task.model_dir.weights, train, learning_rate=1e-2,
...                    epochs=4, seed=0, evaluate={"dev": dev})
>>> result.steps, sorted(result.metrics["dev"])
(8, ['accuracy'])
"""

import dataclasses
import math
import random

import keras
import numpy as np

from bert_keras import optimization
from bert_keras.finetuning.run import (create_finetuning_optimizer, default_jit_compile,
                                      make_dataset, predict)
from bert_keras.finetuning.task_models import (TASK_PREFIX, initial_head_weights,  # noqa: F401
                                               random_encoder_weights, task_weight_map)
from bert_keras.finetuning.glue import data as glue
from bert_keras.model import checkpoint_names
from bert_keras.model.encoder import build_encoder


@dataclasses.dataclass
class RunResult:
    """One run: its settings, the mean training loss of its last epoch's worth of steps
    (`train_loss`) and {evaluation set: {metric: value}}."""

    learning_rate: float
    epochs: int
    seed: int
    num_examples: int
    steps: int
    train_loss: float
    metrics: dict


class _Schedule(keras.optimizers.schedules.LearningRateSchedule):
    """`optimization.warmup_linear_decay` with its three settings held in variables."""

    def __init__(self):
        self.peak = keras.Variable(0.0, dtype="float32", trainable=False, name="peak_learning_rate")
        self.warmup = keras.Variable(0.0, dtype="float32", trainable=False, name="warmup_steps")
        self.total = keras.Variable(1.0, dtype="float32", trainable=False, name="total_steps")

    def __call__(self, step):
        return optimization.warmup_linear_decay(step, self.peak, self.warmup, self.total)

    def get_config(self):
        return {}


class FinetuningSweep:
    """One compiled task model for many runs (see the module docstring).

    Args:
      task: a GLUE `FinetuningTask` (`finetuning.task.get_task("glue/...", ...)`); its options
        give the warm-up proportion, weight decay, clipping and dropout.
      config: the `BertConfig` of every model the runs start from.
      train_batch_size / eval_batch_size: batch sizes.
      dtype: Keras dtype policy of the model (default: the global one).
    """

    def __init__(self, task, config, train_batch_size=32, eval_batch_size=128, dtype=None):
        if not hasattr(task, "spec"):
            raise ValueError(f"FinetuningSweep runs GLUE tasks, not {task.name!r}")
        self.task = task
        self.config = config
        self.train_batch_size = int(train_batch_size)
        self.eval_batch_size = int(eval_batch_size)
        options = task.options
        self.model = task.build_model(build_encoder(config, dtype=dtype), dtype=dtype)
        self.variables = task_weight_map(self.model)
        self.schedule = _Schedule()
        self.optimizer = create_finetuning_optimizer(
            self.model, self.schedule, weight_decay=options.weight_decay,
            clip_norm=options.clip_norm)
        self.model.compile(optimizer=self.optimizer, jit_compile=default_jit_compile(),
                           **task.compile_args())
        self._dropout_seeds = [v for v in self.model.non_trainable_variables
                               if "seed_generator" in v.path]

    def _reset(self, init_weights, seed, source):
        encoder = {name: value for name, value in init_weights.items()
                   if not name.startswith(TASK_PREFIX)}
        head = initial_head_weights(self.variables, self.config.initializer_range, seed)
        checkpoint_names.assign_weights(self.variables, {**encoder, **head},
                                        source=source)
        if self.optimizer.built:
            for variable in self.optimizer.variables:
                variable.assign(np.zeros(variable.shape, variable.dtype))
        for index, variable in enumerate(self._dropout_seeds):
            variable.assign(np.array([seed, index], variable.dtype))
        # Every draw of a run is seeded above (dropout's seed variables, the head) or is
        # stateless (the data order). Not `keras.utils.set_random_seed`: its
        # `tf.random.set_seed` clears TensorFlow's kernel cache, and the next step then
        # prepares the whole training graph again (about a second a run here).
        random.seed(seed)
        np.random.seed(seed)

    def run(self, init_weights, train, learning_rate, epochs, seed, evaluate=None,
            source="initial weights"):
        """Fine-tunes from `init_weights` on `train` (a `TaskData`) and scores `evaluate`
        ({name: TaskData}); returns a `RunResult`. `source` names the weights in errors."""
        if learning_rate <= 0:
            raise ValueError(f"learning_rate must be positive, got {learning_rate}")
        if int(epochs) != epochs or epochs < 1:
            raise ValueError(f"epochs must be a whole number >= 1, got {epochs}")
        epochs = int(epochs)
        self._reset(init_weights, seed, source)
        steps = math.ceil(train.num_rows / self.train_batch_size) * epochs
        self.schedule.peak.assign(float(learning_rate))
        self.schedule.warmup.assign(float(int(steps * self.task.options.warmup_proportion)))
        self.schedule.total.assign(float(steps))
        steps_per_epoch = math.ceil(train.num_rows / self.train_batch_size)
        history = self.model.fit(
            make_dataset(train, self.train_batch_size, training=True, seed=seed),
            epochs=epochs, steps_per_epoch=steps_per_epoch, verbose=0, shuffle=False).history
        losses = history.get("loss", [float("nan")])
        if not np.all(np.isfinite(losses)):
            raise FloatingPointError(f"training loss became {losses[-1]} at learning rate "
                                     f"{learning_rate}; lower it")
        metrics = {name: self.score(data) for name, data in (evaluate or {}).items()}
        return RunResult(float(learning_rate), epochs, int(seed), int(train.num_rows), steps,
                         float(losses[-1]), metrics)

    def score(self, data):
        """{metric: value} of the current model on a labelled `TaskData`."""
        outputs = np.asarray(predict(self.model, data.inputs, self.eval_batch_size))
        predicted = outputs.reshape(-1) if self.task.spec.is_regression else outputs.argmax(-1)
        return glue.compute_metrics(self.task.spec.name, predicted, data.labels)

    def weights(self):
        """{name: array} of the current model, encoder and head (for `save_task_model_dir`)."""
        return checkpoint_names.collect_weights(self.variables)


def subset(data, indices):
    """The rows `indices` of a GLUE `TaskData` (inputs, labels and examples)."""
    from bert_keras.finetuning.task import TaskData

    indices = np.asarray(indices)
    context = data.context
    if isinstance(context, list):
        context = [context[i] for i in indices]
    return TaskData({name: value[indices] for name, value in data.inputs.items()},
                    None if data.labels is None else data.labels[indices], context=context)


__all__ = ["FinetuningSweep", "RunResult", "random_encoder_weights", "subset"]
