"""Fine-tuning runs in one process (`sweep`) and the fair comparison of initializations
(`transfer`), on the bundled SST-2 sentences with tiny random models.

The comparison is checked with a control: the same initial weights on both sides give a margin
of zero (tests/test_main_job.py adds the job's own controls, where both sides learn)."""

import doctest
import json
import os

import numpy as np
import pytest

from bert_keras.finetuning import sweep as sweep_lib
from bert_keras.finetuning import transfer
from bert_keras.finetuning.task import FinetuningOptions, get_task
from bert_keras.data.bundled import SST2_DATA_DIR
from helpers.finetuning_fixtures import tiny_model_dir

TRAIN = os.path.join(SST2_DATA_DIR, "train.tsv")
DEV = os.path.join(SST2_DATA_DIR, "dev.tsv")


@pytest.mark.parametrize("module", [sweep_lib, transfer])
def test_the_docstring_examples_run(module):
    assert doctest.testmod(module).failed == 0


@pytest.fixture(scope="module")
def sst2(tmp_path_factory):
    """The bundled SST-2 task, a tiny random model directory over its words, and one sweep."""
    root = tmp_path_factory.mktemp("sst2")
    model = tiny_model_dir(root, [TRAIN, DEV])
    task = get_task("glue/sst2", SST2_DATA_DIR, model,
                    FinetuningOptions(max_seq_length=48))
    from bert_keras.modeldir import model_dir

    config = model_dir.read_config(model)
    sweep = sweep_lib.FinetuningSweep(task, config)
    sweep.model_dir = model
    return task, config, model_dir.read_weights(model), sweep


def test_a_run_does_not_depend_on_the_runs_before_it(sst2):
    """Weights, optimizer moments, schedule and dropout are all reset: the same run twice in
    one sweep, with another run in between, gives the same loss and scores."""
    task, _, weights, sweep = sst2
    train = sweep_lib.subset(task.load("train", training=True), np.arange(200))
    dev = sweep_lib.subset(task.load("dev"), np.arange(200))
    first = sweep.run(weights, train, 3e-3, 2, seed=5, evaluate={"dev": dev})
    other = sweep.run(weights, train, 1e-4, 3, seed=6, evaluate={"dev": dev})
    again = sweep.run(weights, train, 3e-3, 2, seed=5, evaluate={"dev": dev})
    assert first.steps == 2 * 7 and other.steps == 3 * 7
    assert again.train_loss == pytest.approx(first.train_loss, abs=1e-6)
    assert again.metrics == first.metrics
    assert other.train_loss != pytest.approx(first.train_loss, abs=1e-4)


def test_a_run_learns_the_task(sst2):
    """Against the majority label of the same dev sentences."""
    task, config, _, sweep = sst2
    train = sweep_lib.subset(task.load("train", training=True), np.arange(1000))
    dev = task.load("dev")
    result = sweep.run(sweep_lib.random_encoder_weights(config, 3), train, 3e-3, 5, seed=1,
                       evaluate={"dev": dev})
    majority = max(np.mean(dev.labels == 0), np.mean(dev.labels == 1))
    assert result.metrics["dev"]["accuracy"] >= majority + 0.08, (result.metrics, majority)


SMALL = transfer.TransferOptions(num_train_examples=200, selection_examples=100,
                                 learning_rates=(1e-3, 3e-3), epochs=(2,), seeds=(1, 2),
                                 curve_examples=(100, 200))


def test_the_same_initialization_on_both_sides_gives_a_margin_of_zero(sst2, tmp_path):
    task, config, weights, sweep = sst2
    result = transfer.compare_initializations(task, config, {"a": weights, "b": weights}, SMALL,
                                              state_path=str(tmp_path / "runs.json"), log=None,
                                              sweep=sweep)
    a, b = result["sides"]["a"], result["sides"]["b"]
    assert a["chosen"] == b["chosen"]
    assert abs(a["dev_mean"] - b["dev_mean"]) < 0.005
    assert a["curve"] == pytest.approx(b["curve"], abs=0.005)
    assert not transfer.clearly_better(result, "a", "b")
    assert not transfer.clearly_better(result, "b", "a")
    # Chosen on held-out *training* rows: the selection scores are recorded, dev is not used.
    assert set(a["selection"]) == {"lr=0.001,epochs=2", "lr=0.003,epochs=2"}
    with open(tmp_path / "runs.json", encoding="utf-8") as f:
        runs = json.load(f)["runs"]
    assert all("selection" in run for key, run in runs.items() if "n=200" in key and "seed=1" in key)


def _sides(a_scores, b_scores):
    """A comparison's result as `compare_initializations` records it: per side the dev score
    of each seed and their mean."""
    return {"sides": {name: {"dev": list(scores), "dev_mean": float(np.mean(scores))}
                      for name, scores in (("a", a_scores), ("b", b_scores))}}


def test_clearly_better_needs_the_margin_and_twice_the_standard_error():
    # Worked by hand: margin 0.80 - 0.70 = 0.10; each side's seed-to-seed sd is 0.01 (ddof=1)
    # over 3 seeds, so the standard error of the difference is sqrt(2 * 0.01**2 / 3) = 0.0082.
    result = _sides([0.79, 0.80, 0.81], [0.69, 0.70, 0.71])
    assert transfer.clearly_better(result, "a", "b") is True
    assert transfer.clearly_better(result, "b", "a") is False
    # Zero spreads (one seed's score repeated): the 3-point margin alone decides, 0.029 is
    # just below it, 0.031 just above.
    assert transfer.clearly_better(_sides([0.729, 0.729], [0.70, 0.70]), "a", "b") is False
    assert transfer.clearly_better(_sides([0.731, 0.731], [0.70, 0.70]), "a", "b") is True
    # A margin of 0.05 (above 3 points) against twice the standard error of the difference:
    # seeds 0.7755 and 0.8245 (sd 0.03465, se 0.0245 against 0.75 twice) pass, seeds 0.7745 and
    # 0.8255 (se 0.0255) do not, nor 0.70 and 0.90 (se 0.1).
    assert transfer.clearly_better(_sides([0.7755, 0.8245], [0.75, 0.75]), "a", "b") is True
    assert transfer.clearly_better(_sides([0.7745, 0.8255], [0.75, 0.75]), "a", "b") is False
    assert transfer.clearly_better(_sides([0.70, 0.90], [0.75, 0.75]), "a", "b") is False


def test_a_rerun_continues_from_the_recorded_runs(sst2, tmp_path):
    task, config, weights, sweep = sst2
    state = str(tmp_path / "runs.json")
    options = transfer.TransferOptions(num_train_examples=100, selection_examples=100,
                                       learning_rates=(3e-3,), epochs=(2,), seeds=(1, 2),
                                       curve_examples=(50, 100))
    first = transfer.compare_initializations(task, config, {"a": weights}, options, state, None,
                                             sweep)
    calls = []
    original = sweep.run
    sweep.run = lambda *args, **kwargs: calls.append(args) or original(*args, **kwargs)
    try:
        again = transfer.compare_initializations(task, config, {"a": weights}, options, state,
                                                 None, sweep, keep="a")
    finally:
        del sweep.run
    assert calls == [] and again["sides"] == first["sides"]
    # Read back, not computed: there are no fine-tuned weights to keep.
    assert again["kept_weights"] is None


def test_the_kept_model_is_the_chosen_run_of_its_side(sst2):
    """`keep`: the weights kept from the selection are those of training the side again at its
    chosen setting with the first seed (what the main job exports), not those of the last run."""
    task, config, weights, sweep = sst2
    other = sweep_lib.random_encoder_weights(config, 4)
    options = transfer.TransferOptions(num_train_examples=100, selection_examples=100,
                                       learning_rates=(1e-4, 3e-3), epochs=(2,), seeds=(1,),
                                       curve_examples=(100,))
    result = transfer.compare_initializations(task, config, {"a": weights, "b": other}, options,
                                              log=None, sweep=sweep, keep="a")
    kept = result["kept_weights"]
    chosen = result["sides"]["a"]["chosen"]
    last = sweep.weights()  # side "b"'s last run
    train = sweep_lib.subset(task.load("train", training=True), np.arange(100))
    sweep.run(weights, train, chosen["learning_rate"], chosen["epochs"], seed=1)
    again = sweep.weights()
    assert sorted(kept) == sorted(again)
    assert max(float(np.abs(kept[name] - again[name]).max()) for name in kept) <= 1e-6
    assert max(float(np.abs(kept[name] - last[name]).max()) for name in kept) > 1e-3
    with pytest.raises(ValueError, match="keep='c' is not one of the sides"):
        transfer.compare_initializations(task, config, {"a": weights}, options, log=None,
                                         sweep=sweep, keep="c")


@pytest.mark.parametrize("change,message", [
    (dict(num_train_examples=10 ** 6), "labelled rows"),
    (dict(num_train_examples=0), "whole number >= 1"),
    (dict(num_train_examples=-5), "whole number >= 1"),
    (dict(curve_examples=(10 ** 6,)), "labelled rows"),
    (dict(learning_rates=(-1e-3,)), "positive"),
    (dict(epochs=(1.5,)), "whole numbers"),
])
def test_impossible_settings_are_refused_before_any_run(sst2, change, message):
    task, config, weights, sweep = sst2
    options = transfer.TransferOptions(**{**SMALL.__dict__, **change})
    with pytest.raises(ValueError, match=message):
        transfer.compare_initializations(task, config, {"a": weights}, options, log=None,
                                         sweep=sweep)


def test_a_training_file_with_one_class_is_refused_naming_it(sst2, tmp_path):
    _, config, weights, sweep = sst2
    rows = [line for line in open(TRAIN, encoding="utf-8").read().splitlines()[1:]
            if line.endswith("\t1")]
    (tmp_path / "train.tsv").write_text("sentence\tlabel\n" + "\n".join(rows) + "\n",
                                        encoding="utf-8")
    (tmp_path / "dev.tsv").write_text(open(DEV, encoding="utf-8").read(), encoding="utf-8")
    task = get_task("glue/sst2", str(tmp_path), sweep.model_dir, FinetuningOptions(max_seq_length=48))
    with pytest.raises(ValueError, match="one label only") as raised:
        transfer.compare_initializations(task, config, {"a": weights}, SMALL, log=None)
    assert str(tmp_path) in str(raised.value)
