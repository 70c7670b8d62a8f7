"""End-to-end SQuAD v1.1 and v2.0 fine-tuning in the official JSON layout: the model learns
(dev exact match and F1, on questions it did not train on, above always giving the most
frequent training answer, or no answer), and the prediction files are the official ones."""

import collections
import json
import os
import re
import string

import pytest

from bert_keras.finetuning.run import run_finetuning
from bert_keras.finetuning.task import FinetuningOptions, get_task
from helpers.finetuning_fixtures import color_squad, data_dir, fixture, tiny_model_dir

QUICK = dict(learning_rate=1e-3, train_batch_size=8, max_seq_length=64, doc_stride=32,
             max_query_length=24, eval_batch_size=16, save_checkpoints=False)
# The learning checks: questions whose answer is the one color word of their paragraph
# (tests/helpers), a few dozen steps.
LEARN = dict(QUICK, learning_rate=2e-3, train_batch_size=4, eval_batch_size=24)


def _normalize(text):
    # The official scripts' normalization, written out here independently of bert_keras.
    text = "".join(c for c in text.lower() if c not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _f1(prediction, gold):
    common = collections.Counter(prediction.split()) & collections.Counter(gold.split())
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(prediction.split()), overlap / len(gold.split())
    return 2 * precision * recall / (precision + recall)


def _questions(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)["data"]
    return {qa["id"]: qa for article in data for paragraph in article["paragraphs"]
            for qa in paragraph["qas"]}


def _write(path, dataset):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(dataset, f)
    return str(path)


def _constant_answer_scores(answer, questions):
    """Exact match and F1 (in points) of giving `answer` to every question; "" is no answer,
    which scores 1 on an unanswerable question (v2.0) and 0 on the others."""
    exact, f1 = [], []
    for qa in questions.values():
        golds = [a["text"] for a in qa["answers"]] or [""]
        exact.append(max(_normalize(answer) == _normalize(gold) for gold in golds))
        f1.append(max(float(_normalize(answer) == _normalize(gold)) if not gold or not answer
                      else _f1(_normalize(answer), _normalize(gold)) for gold in golds))
    return 100.0 * sum(exact) / len(exact), 100.0 * sum(f1) / len(f1)


def _baseline(train_path, dev_questions):
    """The better of always giving the most frequent training answer and always no answer."""
    answers = collections.Counter(a["text"] for qa in _questions(train_path).values()
                                  for a in qa["answers"][:1])
    return max(_constant_answer_scores(answer, dev_questions)
               for answer in (answers.most_common(1)[0][0], ""))


def test_squad_v1_trains_and_writes_official_predictions(tmp_path):
    source = fixture("squad", "train_v1_small.json")
    data = data_dir(tmp_path, {})
    # Training: 32 learnable questions, and the fixture's (two of its answers do not match
    # their context); dev: 16 other questions.
    train = color_squad(32, seed=1, prefix="train")
    with open(source, encoding="utf-8") as f:
        train["data"] += json.load(f)["data"]
    train_path = _write(os.path.join(data, "train-v1.1.json"), train)
    dev_path = _write(os.path.join(data, "dev-v1.1.json"), color_squad(16, seed=2, prefix="dev"))
    init = tiny_model_dir(tmp_path, [train_path, dev_path])
    out = str(tmp_path / "out")

    result = run_finetuning("squad_v1", data, init, out, num_train_epochs=4, **LEARN)

    assert result.train_loss[-1] < 0.7 * result.train_loss[0], result.train_loss
    questions = _questions(dev_path)
    predictions = json.load(open(os.path.join(out, "predictions", "dev", "predictions.json")))
    assert set(predictions) == set(questions)  # every dev question, even the skipped ones
    assert all(isinstance(text, str) for text in predictions.values())
    nbest = json.load(open(os.path.join(out, "predictions", "dev", "nbest_predictions.json")))
    assert set(nbest) == set(questions)
    assert set(nbest["dev-0"][0]) == {"text", "probability", "start_logit", "end_logit"}
    assert not os.path.exists(os.path.join(out, "predictions", "dev", "null_odds.json"))

    exact = [max(_normalize(predictions[q]) == _normalize(a["text"]) for a in qa["answers"])
             for q, qa in questions.items()]
    f1 = [max(_f1(_normalize(predictions[q]), _normalize(a["text"])) for a in qa["answers"])
          for q, qa in questions.items()]
    metrics = result.metrics["dev"]
    assert metrics["exact_match"] == pytest.approx(100.0 * sum(exact) / len(exact))
    assert metrics["f1"] == pytest.approx(100.0 * sum(f1) / len(f1))
    # Learnt, on questions it never saw: far above a constant answer.
    baseline_exact, baseline_f1 = _baseline(train_path, questions)
    assert metrics["exact_match"] >= baseline_exact + 40, (metrics, baseline_exact)
    assert metrics["f1"] >= baseline_f1 + 40, (metrics, baseline_f1)

    # The two training answers that do not match their context are left out, by name.
    notes = json.load(open(os.path.join(out, "eval_results.json")))["data_notes"]["train"]
    assert any("letters-2" in note and "answer_start does not match" in note for note in notes)
    assert any("letters-3" in note for note in notes)

    task_config = json.load(open(os.path.join(out, "task_config.json")))
    assert task_config["head"] == "span" and task_config["outputs"] == ["start_logits",
                                                                       "end_logits"]
    assert task_config["doc_stride"] == 32 and task_config["max_query_length"] == 24
    assert task_config["version_2_with_negative"] is False


def test_squad_v2_writes_null_odds_and_finds_the_best_threshold(tmp_path):
    # Every third paragraph has no color and its question no answer.
    data = data_dir(tmp_path, {})
    train_path = _write(os.path.join(data, "train-v2.0.json"),
                        color_squad(48, seed=1, prefix="train", impossible_every=3, version="2.0"))
    dev_path = _write(os.path.join(data, "dev-v2.0.json"),
                      color_squad(24, seed=2, prefix="dev", impossible_every=3, version="2.0"))
    init = tiny_model_dir(tmp_path, [train_path, dev_path])
    out = str(tmp_path / "out")

    result = run_finetuning("squad_v2", data, init, out, num_train_epochs=4, **LEARN)

    assert result.train_loss[-1] < 0.7 * result.train_loss[0], result.train_loss
    questions = _questions(dev_path)
    folder = os.path.join(out, "predictions", "dev")
    predictions = json.load(open(os.path.join(folder, "predictions.json")))
    null_odds = json.load(open(os.path.join(folder, "null_odds.json")))
    assert set(predictions) == set(null_odds) == set(questions)
    assert all(isinstance(value, float) for value in null_odds.values())

    metrics = result.metrics["dev"]
    has_answer = [q for q, qa in questions.items() if not qa.get("is_impossible")]
    assert metrics["HasAns_total"] == len(has_answer)
    assert metrics["NoAns_total"] == len(questions) - len(has_answer)
    # At the threshold used (0.0), an unanswerable question scores 1 exactly when its
    # prediction is empty; answerable ones need a match.
    no_answer_right = sum(predictions[q] == "" for q, qa in questions.items()
                          if qa.get("is_impossible"))
    assert metrics["NoAns_exact"] == pytest.approx(100.0 * no_answer_right /
                                                   metrics["NoAns_total"])
    # Predicting "no answer" for everything is one of the thresholds searched.
    assert metrics["best_exact"] >= 100.0 * metrics["NoAns_total"] / len(questions) - 1e-9
    # Learnt, on questions it never saw, at the threshold used: far above a constant answer
    # (no answer at all scores the unanswerable third).
    baseline_exact, baseline_f1 = _baseline(train_path, questions)
    assert metrics["exact"] >= baseline_exact + 30, (metrics, baseline_exact)
    assert metrics["f1"] >= baseline_f1 + 30, (metrics, baseline_f1)
    task_config = json.load(open(os.path.join(out, "task_config.json")))
    assert task_config["null_score_diff_threshold"] == metrics["best_f1_thresh"]
    assert task_config["version_2_with_negative"] is True


def test_bad_squad_input_is_named_before_training(tmp_path):
    source = fixture("squad", "train_v1_small.json")
    init = tiny_model_dir(tmp_path, [source])
    data = data_dir(tmp_path, {"train-v1.1.json": source})
    with pytest.raises(ValueError, match="max_seq_length .* must be larger than max_query_length"):
        run_finetuning("squad_v1", data, init, str(tmp_path / "out"),
                       **dict(QUICK, max_query_length=64))

    # A missing dev file: named, before any model is built.
    with pytest.raises(ValueError, match="dev-v1.1.json"):
        run_finetuning("squad_v1", data, init, str(tmp_path / "out"), **QUICK)

    # An empty context and a question longer than max_query_length: read with a note / cut.
    empty = {"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": "", "qas": [{"id": "e1", "question": "Anything?", "answers": []}]},
        {"context": "Alpha Beta", "qas": [{"id": "long", "question": " ".join(["Alpha"] * 100),
                                           "answers": [{"text": "Beta", "answer_start": 6}]}]}]}]}
    with open(tmp_path / "data" / "dev-v1.1.json", "w") as f:
        json.dump(empty, f)
    task = get_task("squad_v1", data, init, FinetuningOptions(
        max_seq_length=64, doc_stride=32, max_query_length=24))
    dev = task.load("dev")
    assert any("empty context" in note for note in dev.notes)
    assert dev.num_rows == 2
    assert int(dev.inputs["input_mask"][1].sum()) == 24 + 2 + 2 + 1  # question cut to 24
