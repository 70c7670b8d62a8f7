"""End-to-end SWAG fine-tuning in the official CSV layout: the model learns (dev accuracy, on
rows it did not train on, above the majority label), and the predictions have the layout of
the SWAG baselines."""

import csv
import json
import os

import numpy as np
import pytest

from bert_keras.finetuning import task_models
from bert_keras.finetuning.run import run_finetuning
from bert_keras.finetuning.tasks.common import DataFormatError
from helpers.finetuning_fixtures import (data_dir, fixture, read_lines, tiny_model_dir,
                                         word_chosen_swag)

QUICK = dict(learning_rate=1e-3, train_batch_size=1, num_train_epochs=12, max_seq_length=32,
             eval_batch_size=4)


def test_swag_trains_scores_four_choices_and_writes_predictions(tmp_path):
    test = fixture("swag", "test.csv")
    data = data_dir(tmp_path, {"test.csv": test})
    # 32 training rows of a rule a word tells (tests/helpers), 32 steps; 24 dev rows apart.
    train = word_chosen_swag(os.path.join(data, "train.csv"), 32, seed=1)
    val = word_chosen_swag(os.path.join(data, "val.csv"), 24, seed=2)
    init = tiny_model_dir(tmp_path, [train, val, test])
    out = str(tmp_path / "out")

    result = run_finetuning("swag", data, init, out, do_predict=True,
                            **dict(QUICK, learning_rate=3e-3, train_batch_size=8,
                                   num_train_epochs=8, eval_batch_size=24))

    assert result.train_loss[-1] < 0.7 * result.train_loss[0], result.train_loss
    # The layout of the SWAG baselines' csv_predict.py: a pandas index column and "pred".
    lines = read_lines(os.path.join(out, "predictions", "dev", "predictions.csv"))
    assert lines[0] == ",pred"
    rows = [line.split(",") for line in lines[1:]]
    with open(val, newline="", encoding="utf-8") as f:
        gold = [int(row["label"]) for row in csv.DictReader(f)]
    assert [int(r[0]) for r in rows] == list(range(len(gold)))
    predicted = [int(r[1]) for r in rows]
    assert set(predicted) <= {0, 1, 2, 3}
    accuracy = np.mean(np.equal(predicted, gold))
    assert result.metrics["dev"]["accuracy"] == pytest.approx(accuracy)
    # Learnt, on dev rows it never saw: far above always answering the most frequent label.
    majority = max(gold.count(label) for label in range(4)) / len(gold)
    assert accuracy >= majority + 0.4, (accuracy, majority, result.train_loss)
    test_lines = read_lines(os.path.join(out, "predictions", "test", "predictions.csv"))
    assert test_lines[0] == ",pred" and len(test_lines) == 2

    task_config = json.load(open(os.path.join(out, "task_config.json")))
    assert task_config["head"] == "multiple_choice" and task_config["num_choices"] == 4
    # The saved directory rebuilds the model: inputs [batch, 4, seq], logits [batch, 4].
    model, _ = task_models.load_task_model(out)
    assert tuple(model.output.shape) == (None, 4)


def test_swag_bad_label_is_named(tmp_path):
    lines = read_lines(fixture("swag", "val.csv"))
    bad = tmp_path / "data"
    bad.mkdir()
    (bad / "train.csv").write_text("\n".join(lines[:2] + [lines[2][:-1] + "7"]) + "\n")
    init = tiny_model_dir(tmp_path, [fixture("swag", "val.csv")])
    with pytest.raises(DataFormatError, match=r"train.csv: line 3: label '7'"):
        run_finetuning("swag", str(bad), init, str(tmp_path / "out"), **QUICK)
