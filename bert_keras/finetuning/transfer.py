"""What pre-training is worth on a task: initializations compared by fine-tuning, fairly.

`compare_initializations` fine-tunes each of several initial weights (typically a pre-trained
model directory and the same architecture freshly initialized) on the same GLUE task with the
same budget and the same search, as the paper compares its models:

1. **Selection**, on training data only. The last `selection_examples` rows of the training
   file are held out; each side is fine-tuned on the first `num_train_examples` rows with every
   learning rate x epochs of the grid (first seed) and scored on the held-out rows. Each side
   gets the setting with its best score there. The dev set is never used to choose.
2. **Seeds**: each side at its chosen setting with every seed (the selection run is the first
   seed's run); the dev scores' mean and standard deviation are the headline.
3. **Learning curve**: each side at its chosen learning rate and epochs on the first 100,
   300, ... rows (one seed); a set smaller than the headline one gets at least the headline
   run's number of updates, so that it is not also under-trained.

Every run is a `finetuning.sweep.FinetuningSweep` run: one compiled model for all of them. The
runs are recorded in `state_path` (JSON, written atomically after each run), and a rerun with
the same settings continues from there. With `keep=side`, the fine-tuned weights of that side's
chosen run (first seed, headline examples: the model one would ship) are kept from the
selection instead of being trained again.

Example (tiny and random on both sides, for the layout of the result; the suite runs it):

>>> import tempfile, numpy as np, bert_keras
>>> from bert_keras.finetuning.sweep import random_encoder_weights
>>> from bert_keras.finetuning.task import get_task
>>> from bert_keras.modeldir import model_dir
>>> root = tempfile.mkdtemp()
>>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "."]
>>> _ = open(f"{root}/vocab.txt", "w").write("\\n".join(vocab) + "\\n")
>>> config = bert_keras.BertConfig.from_preset("tiny", vocab_size=len(vocab))
>>> model_dir.write_model_dir(f"{root}/model", config, f"{root}/vocab.txt", True,
...                           random_encoder_weights(config, seed=1))
>>> rows = ["sentence\\tlabel"] + ["good film .\\t1", "bad film .\\t0"] * 20
>>> for split in ("train", "dev"):
...     _ = open(f"{root}/{split}.tsv", "w").write("\\n".join(rows) + "\\n")
>>> task = get_task("glue/sst2", root, f"{root}/model",
...                 bert_keras.finetuning.FinetuningOptions(max_seq_length=8))
>>> options = TransferOptions(num_train_examples=16, selection_examples=8,
...                           learning_rates=(1e-3, 1e-2), epochs=(2,), seeds=(1, 2),
...                           curve_examples=(8, 16), train_batch_size=8)
>>> result = compare_initializations(
...     task, config, {"a": random_encoder_weights(config, 1),
...                    "b": random_encoder_weights(config, 2)}, options, log=None)
>>> sorted(result["sides"]["a"]), result["metric"], len(result["sides"]["a"]["dev"])
(['chosen', 'curve', 'dev', 'dev_mean', 'dev_std', 'selection'], 'accuracy', 2)
"""

import dataclasses
import json
import math
import os

import numpy as np

from bert_keras.common.files import write_text_atomic
from bert_keras.finetuning.sweep import FinetuningSweep, subset


@dataclasses.dataclass
class TransferOptions:
    """The budget and the search, the same for every side."""

    num_train_examples: int = 1000
    selection_examples: int = 500
    learning_rates: tuple = (3e-4, 1e-3, 3e-3)
    epochs: tuple = (3, 10)
    seeds: tuple = (1, 2, 3)
    curve_examples: tuple = (100, 300, 1000, 3000)
    train_batch_size: int = 32
    eval_batch_size: int = 128

    def check(self, num_rows, source, labels=None):
        """Raises ValueError naming `source` (the training file) and the setting (with the main
        job's flag) when the rows do not allow this comparison; with `labels` (the training
        rows' class labels, in file order), also when the headline rows hold one class only."""
        n = self.num_train_examples
        if n is None or int(n) != n or n < 1:
            raise ValueError(f"num_train_examples (--finetune_train_examples) must be a whole "
                             f"number >= 1, got {n}")
        if self.selection_examples < 1:
            raise ValueError(f"selection_examples (--finetune_selection_examples) must be >= 1, "
                             f"got {self.selection_examples}")
        if any(int(size) < 1 for size in self.curve_examples):
            raise ValueError(f"learning-curve sizes (--learning_curve) must be >= 1, got "
                             f"{self.curve_examples}")
        needed = max((n,) + tuple(self.curve_examples))
        if needed + self.selection_examples > num_rows:
            raise ValueError(
                f"{source}: {num_rows} labelled rows, but {needed} training examples "
                f"(--finetune_train_examples, --learning_curve) and {self.selection_examples} "
                f"held-out rows for choosing the learning rate and epochs "
                f"(--finetune_selection_examples) need {needed + self.selection_examples}")
        if not self.learning_rates or any(lr <= 0 for lr in self.learning_rates):
            raise ValueError(f"learning rates (--finetune_learning_rates) must be positive, got "
                             f"{self.learning_rates}")
        if not self.epochs or any(int(e) != e or e < 1 for e in self.epochs):
            raise ValueError(f"epochs (--finetune_epochs) must be whole numbers >= 1, got "
                             f"{self.epochs}")
        if not self.seeds:
            raise ValueError("at least one seed (--finetune_seeds) is needed")
        if labels is not None:
            classes = set(np.asarray(labels)[:n].tolist())
            if len(classes) < 2:
                raise ValueError(f"{source}: the first {n} training rows have one label only "
                                 f"({classes.pop()}); a classifier cannot learn from them")


def _run_key(side, num_examples, learning_rate, epochs, seed):
    return f"{side}|n={num_examples}|lr={learning_rate:g}|epochs={epochs}|seed={seed}"


class _Runs:
    """The runs done so far, kept in a JSON file (atomically rewritten after each run)."""

    def __init__(self, path, settings):
        self.path = path
        self.runs = {}
        self.settings = settings
        if path and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                saved = json.load(f)
            if saved.get("settings") == settings:
                self.runs = saved.get("runs", {})

    def get(self, key, compute):
        if key not in self.runs:
            self.runs[key] = compute()
            if self.path:
                write_text_atomic(self.path, json.dumps(
                    {"settings": self.settings, "runs": self.runs}, indent=1, sort_keys=True) + "\n")
        return self.runs[key]


def compare_initializations(task, config, initial_weights, options=None, state_path=None,
                            log=print, sweep=None, keep=None):
    """Fine-tunes every side of `initial_weights` ({side name: {original name: array}}) on
    `task` (a GLUE `FinetuningTask`) as the module docstring says.

    Returns {"metric", "task", "options", "majority_share", "sides": {side: {"selection":
    {"lr=..,epochs=..": score}, "chosen": {"learning_rate", "epochs"}, "dev": [per seed],
    "dev_mean", "dev_std", "curve": {examples: dev score}}}}. Scores are the task's paper
    metric (accuracy for SST-2) on its dev split.

    With `keep` (a side), the result also holds "kept_weights": {name: array} of that side
    fine-tuned at its chosen setting with the first seed on the headline examples (what
    `FinetuningSweep.weights` gives after that run), or None when that run was read back from
    `state_path` instead of computed. Only the best selection run so far is held in memory.
    """
    options = options or TransferOptions()
    metric = task.spec.paper_metric
    train_all = task.load("train", training=True)
    source = getattr(task, "data_dir", "the training file")
    options.check(train_all.num_rows, f"{source}: train",
                  None if task.spec.is_regression else train_all.labels)
    dev = task.load("dev")
    held_out = subset(train_all, np.arange(train_all.num_rows - options.selection_examples,
                                           train_all.num_rows))
    sweep = sweep or FinetuningSweep(task, config, options.train_batch_size,
                                     options.eval_batch_size)
    settings = {"task": task.name, "options": dataclasses.asdict(options),
                "sides": sorted(initial_weights),
                "max_seq_length": task.options.max_seq_length}
    runs = _Runs(state_path, json.loads(json.dumps(settings)))
    say = log or (lambda *args, **kwargs: None)
    if keep is not None and keep not in initial_weights:
        raise ValueError(f"keep={keep!r} is not one of the sides {sorted(initial_weights)}")
    kept = {"setting": None, "score": None, "weights": None}  # `keep`'s best selection run

    def run(side, num_examples, learning_rate, epochs, seed, with_selection=False):
        key = _run_key(side, num_examples, learning_rate, epochs, seed)

        def compute():
            evaluate = {"dev": dev}
            if with_selection:
                evaluate["selection"] = held_out
            result = sweep.run(initial_weights[side], subset(train_all, np.arange(num_examples)),
                               learning_rate, epochs, seed, evaluate, source=side)
            outcome = {name: values[metric] for name, values in result.metrics.items()}
            # Strictly better only: ties go to the earlier setting, as the choice below.
            if side == keep and with_selection and (kept["score"] is None or
                                                    outcome["selection"] > kept["score"]):
                kept.update(setting=(learning_rate, epochs), score=outcome["selection"],
                            weights=sweep.weights())
            return outcome | {"train_loss": result.train_loss, "steps": result.steps}

        outcome = runs.get(key, compute)
        say(f"  {side:>12}: {num_examples} examples, learning rate {learning_rate:g}, "
            f"{epochs} epochs, seed {seed}: " + ", ".join(
                f"{name} {metric} {outcome[name]:.3f}" for name in ("selection", "dev")
                if name in outcome), flush=True)
        return outcome

    n = int(options.num_train_examples)
    sides = {}
    for side in initial_weights:
        selection = {}
        for learning_rate in options.learning_rates:
            for epochs in options.epochs:
                outcome = run(side, n, learning_rate, int(epochs), options.seeds[0], True)
                selection[(learning_rate, int(epochs))] = outcome["selection"]
        # Best held-out score; ties go to the earlier setting of the grid.
        (learning_rate, epochs), _ = max(selection.items(), key=lambda item: item[1])
        dev_scores = [run(side, n, learning_rate, epochs, seed, seed == options.seeds[0])["dev"]
                      for seed in options.seeds]
        headline_steps = math.ceil(n / options.train_batch_size) * epochs
        curve = {}
        for size in options.curve_examples:
            size = int(size)
            if size == n:
                curve[size] = float(np.mean(dev_scores))  # the headline point: its seeds' mean
                continue
            # Smaller sets: the chosen epochs, but at least the headline run's updates.
            size_epochs = max(epochs, math.ceil(headline_steps /
                                                math.ceil(size / options.train_batch_size)))
            curve[size] = run(side, size, learning_rate, size_epochs, options.seeds[0])["dev"]
        sides[side] = {
            "selection": {f"lr={lr:g},epochs={e}": score for (lr, e), score in selection.items()},
            "chosen": {"learning_rate": learning_rate, "epochs": epochs},
            "dev": dev_scores, "dev_mean": float(np.mean(dev_scores)),
            "dev_std": float(np.std(dev_scores)),
            "curve": {str(size): score for size, score in sorted(curve.items())},
        }
    dev_labels = np.asarray(dev.labels)
    majority = None
    if not task.spec.is_regression:
        majority = float(max(np.mean(dev_labels == label) for label in set(dev_labels.tolist())))
    result = {"task": task.name, "metric": metric, "options": dataclasses.asdict(options),
              "majority_share": majority, "sides": sides}
    if keep is not None:
        chosen = sides[keep]["chosen"]
        result["kept_weights"] = (kept["weights"] if kept["setting"] == (
            chosen["learning_rate"], chosen["epochs"]) else None)
    return result


def clearly_better(result, side, other, min_margin=0.03):
    """Whether `side` beats `other` clearly: its mean over seeds is higher by at least
    `min_margin` (3 points by default) *and* by more than twice the standard error of the
    difference of the two means (from the seed-to-seed spreads), so that a lucky draw of
    seeds does not pass."""
    a, b = result["sides"][side], result["sides"][other]
    margin = a["dev_mean"] - b["dev_mean"]
    k_a, k_b = len(a["dev"]), len(b["dev"])
    std_a = float(np.std(a["dev"], ddof=1)) if k_a > 1 else 0.0
    std_b = float(np.std(b["dev"], ddof=1)) if k_b > 1 else 0.0
    standard_error = math.sqrt(std_a ** 2 / k_a + std_b ** 2 / k_b)
    return bool(margin >= min_margin and margin > 2 * standard_error)


__all__ = ["TransferOptions", "compare_initializations", "clearly_better"]
