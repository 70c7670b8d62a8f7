"""End-to-end GLUE fine-tuning on tiny fixtures: the model learns (its dev score, on rows it
did not train on, above the baseline of a model that learned nothing), the files have the
official layout, the metrics agree with the written predictions, and bad input stops before
training."""

import importlib.util
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from bert_keras.finetuning import task_models
from bert_keras.finetuning.run import run_finetuning
from bert_keras.finetuning.glue import data as glue
from bert_keras.finetuning.tasks.common import DataFormatError
from helpers.finetuning_fixtures import (data_dir, fixture, read_lines, tiny_model_dir,
                                         word_labelled_mrpc, word_scored_stsb)
from helpers.support import REPO_ROOT as REPO

# Small and fast, with a step large enough for a randomly initialized tiny model to learn.
QUICK = dict(learning_rate=1e-3, train_batch_size=2, num_train_epochs=12, max_seq_length=32,
             eval_batch_size=4)
# The learning checks: 40 training rows of a rule a word tells (tests/helpers), 60 steps.
LEARN = dict(QUICK, learning_rate=2e-3, train_batch_size=4, num_train_epochs=6,
             eval_batch_size=24)


def _labels(path, column):
    rows = [line.split("\t") for line in read_lines(path)]
    index = rows[0].index(column)
    return [row[index] for row in rows[1:]]


def test_mrpc_trains_evaluates_and_writes_the_submission_layout(tmp_path):
    test = fixture("glue", "MRPC", "test.tsv")
    data = data_dir(tmp_path, {"test.tsv": test})
    train = word_labelled_mrpc(os.path.join(data, "train.tsv"), 40, seed=1)
    dev = word_labelled_mrpc(os.path.join(data, "dev.tsv"), 24, seed=2)
    init = tiny_model_dir(tmp_path, [train, dev, test])
    out = str(tmp_path / "out")

    class SeeCheckpoints(keras.callbacks.Callback):
        seen = []

        def on_epoch_end(self, epoch, logs=None):
            self.seen.append(sorted(os.listdir(os.path.join(out, "checkpoints"))))

    result = run_finetuning("glue/mrpc", data, init, out, do_predict=True,
                            callbacks=[SeeCheckpoints()], **LEARN)

    loss = result.train_loss
    assert len(loss) == LEARN["num_train_epochs"]
    assert loss[-1] < 0.7 * loss[0], loss

    # Dev predictions: "index<TAB>prediction" with label strings, one row per example.
    lines = read_lines(os.path.join(out, "predictions", "dev", "MRPC.tsv"))
    assert lines[0] == "index\tprediction"
    rows = [line.split("\t") for line in lines[1:]]
    gold = _labels(dev, "Quality")
    assert [int(r[0]) for r in rows] == list(range(len(gold)))
    predicted = [r[1] for r in rows]
    assert set(predicted) <= {"0", "1"}

    # The reported metrics are those of the written predictions (computed here by hand).
    pairs = list(zip(predicted, gold))
    accuracy = sum(p == g for p, g in pairs) / len(pairs)
    true_positive = sum(p == g == "1" for p, g in pairs)
    precision = true_positive / max(1, predicted.count("1"))
    recall = true_positive / gold.count("1")
    f1 = 0.0 if true_positive == 0 else 2 * precision * recall / (precision + recall)
    results = json.load(open(os.path.join(out, "eval_results.json")))
    assert results["metrics"]["dev"]["accuracy"] == pytest.approx(accuracy)
    # Learnt, on dev rows it never saw: well above always answering the majority label.
    majority = max(gold.count("0"), gold.count("1")) / len(gold)
    assert accuracy >= majority + 0.25, (accuracy, majority, loss)
    assert results["metrics"]["dev"]["f1"] == pytest.approx(f1)
    assert results["train"]["loss_per_epoch"] == pytest.approx(loss)

    # Test predictions for a GLUE submission, no metrics (no labels).
    test_lines = read_lines(os.path.join(out, "predictions", "test", "MRPC.tsv"))
    assert test_lines[0] == "index\tprediction" and len(test_lines) == len(read_lines(test))
    assert "test" not in results["metrics"]

    # A fine-tuned model directory that rebuilds the same classifier.
    task_config = json.load(open(os.path.join(out, "task_config.json")))
    assert task_config["task"] == "glue/mrpc"
    assert task_config["label_names"] == ["0", "1"]
    assert task_config["head"] == "classification" and task_config["max_seq_length"] == 32
    assert task_config["text_pair"] is True
    model, _ = task_models.load_task_model(out)
    arrays = glue.examples_to_arrays(glue.read_glue_examples("mrpc", data, "dev"), "mrpc")
    from bert_keras.finetuning.task import get_task
    inputs = get_task("glue/mrpc", data, out).encode(arrays["text_a"], arrays["text_b"])
    reloaded = np.asarray(model.predict(inputs, verbose=0)).argmax(-1)
    assert [str(label) for label in reloaded] == predicted

    # The state for resuming was written after every epoch, and removed at the end.
    assert len(SeeCheckpoints.seen) == LEARN["num_train_epochs"]
    assert "latest.weights.h5" in SeeCheckpoints.seen[-1]
    assert not os.path.exists(os.path.join(out, "checkpoints"))
    if importlib.util.find_spec("tensorboard"):
        assert os.listdir(os.path.join(out, "logs", "train"))


def test_stsb_is_regression_with_correlations(tmp_path):
    data = data_dir(tmp_path, {})
    train = word_scored_stsb(os.path.join(data, "train.tsv"), 40, seed=1)
    dev = word_scored_stsb(os.path.join(data, "dev.tsv"), 24, seed=2)
    init = tiny_model_dir(tmp_path, [train, dev])
    out = str(tmp_path / "out")

    result = run_finetuning("glue/stsb", data, init, out, save_checkpoints=False, **LEARN)

    assert result.train_loss[-1] < 0.7 * result.train_loss[0], result.train_loss
    rows = [line.split("\t") for line in read_lines(os.path.join(out, "predictions", "dev",
                                                                 "STS-B.tsv"))[1:]]
    scores = np.array([float(r[1]) for r in rows])
    gold = np.array([float(s) for s in _labels(dev, "score")])
    assert result.metrics["dev"]["pearson"] == pytest.approx(np.corrcoef(scores, gold)[0, 1],
                                                             rel=1e-5)
    assert set(result.metrics["dev"]) == {"pearson", "spearman"}
    # Learnt, on dev pairs it never saw: far above chance, the correlation of scores drawn at
    # random (a model that learned nothing gives about the same score to every pair).
    chance = np.corrcoef(np.random.default_rng(0).uniform(0, 5, len(gold)), gold)[0, 1]
    pearson = np.corrcoef(scores, gold)[0, 1]
    assert pearson >= max(0.0, chance) + 0.6, (pearson, chance, result.train_loss)
    task_config = json.load(open(os.path.join(out, "task_config.json")))
    assert task_config["head"] == "regression" and task_config["label_names"] is None


def test_mnli_evaluates_matched_and_mismatched_in_mixed_precision(tmp_path):
    files = {name: fixture("glue", "MNLI", name) for name in
             ("train.tsv", "dev_matched.tsv", "dev_mismatched.tsv")}
    data = data_dir(tmp_path, files)
    init = tiny_model_dir(tmp_path, list(files.values()))
    out = str(tmp_path / "out")

    result = run_finetuning("glue/mnli", data, init, out, save_checkpoints=False,
                            dtype="mixed_float16", **dict(QUICK, num_train_epochs=1))

    # float16 needs loss scaling, which Keras adds only for a model-wide float16 policy.
    assert isinstance(result.model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert np.isfinite(result.train_loss).all()

    assert set(result.metrics) == {"dev_matched", "dev_mismatched"}
    for split, name in (("dev_matched", "MNLI-m.tsv"), ("dev_mismatched", "MNLI-mm.tsv")):
        lines = read_lines(os.path.join(out, "predictions", split, name))
        assert {line.split("\t")[1] for line in lines[1:]} <= {"contradiction", "entailment",
                                                               "neutral"}


def test_missing_split_and_malformed_row_fail_before_training(tmp_path):
    dev = fixture("glue", "MRPC", "dev.tsv")
    init = tiny_model_dir(tmp_path, [dev])
    only_dev = data_dir(tmp_path, {"dev.tsv": dev})
    with pytest.raises(DataFormatError, match="train split not found"):
        run_finetuning("glue/mrpc", only_dev, init, str(tmp_path / "out"), **QUICK)

    bad = tmp_path / "bad"
    bad.mkdir()
    lines = read_lines(dev)
    (bad / "train.tsv").write_text("\n".join(lines[:3] + ["1\tonly three\tfields"]) + "\n")
    (bad / "dev.tsv").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFormatError, match=r"train.tsv: line 4: expected 5"):
        run_finetuning("glue/mrpc", str(bad), init, str(tmp_path / "out"), **QUICK)
    assert not os.path.exists(tmp_path / "out" / "logs")  # nothing was trained


def test_cli_trains_and_reports_bad_input_in_one_line(tmp_path):
    dev = fixture("glue", "MRPC", "dev.tsv")
    data = data_dir(tmp_path, {"train.tsv": dev, "dev.tsv": dev})
    init = tiny_model_dir(tmp_path, [dev])
    script = os.path.join(REPO, "tools", "run_finetuning.py")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    args = [sys.executable, script, "--task=glue/mrpc", f"--data_dir={data}",
            f"--init_model_dir={init}", "--learning_rate=1e-3", "--train_batch_size=2",
            "--num_train_epochs=1", "--max_seq_length=32"]

    done = subprocess.run(args + [f"--output_dir={tmp_path / 'out'}"], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "glue/mrpc dev: accuracy=" in done.stdout
    assert os.path.exists(tmp_path / "out" / "predictions" / "dev" / "MRPC.tsv")

    failed = subprocess.run(args[:3] + [f"--data_dir={tmp_path / 'nowhere'}"] + args[4:]
                            + [f"--output_dir={tmp_path / 'out2'}"], capture_output=True,
                            text=True, env=env, timeout=300)
    assert failed.returncode == 2
    assert "error: mrpc train split not found" in failed.stderr.lower()
    assert "Traceback" not in failed.stderr
