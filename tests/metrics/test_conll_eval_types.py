"""Per-type scores and conlleval's printout, on an example worked by hand."""

import pytest

from bert_keras.metrics import conll_eval

GOLD = [["B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG", "I-ORG"], ["B-MISC", "O", "B-LOC"]]
PREDICTED = [["B-PER", "I-PER", "O", "B-ORG", "O", "B-ORG", "O"], ["B-MISC", "O", "B-LOC"]]
# By hand: gold chunks PER 0-1, LOC 3, ORG 5-6 | MISC 0, LOC 2 (5: LOC 2, MISC 1, ORG 1, PER 1);
# predicted PER 0-1, ORG 3, ORG 5 | MISC 0, LOC 2 (5: LOC 1, MISC 1, ORG 2, PER 1); correct:
# PER 0-1, MISC 0, LOC 2 (ORG 5 ends one word early). Tags right: 5 of 7, then 3 of 3.


def test_per_type_precision_recall_f1():
    scores = conll_eval.evaluate(GOLD, PREDICTED)
    assert (scores["precision"], scores["recall"], scores["f1"]) == (60.0, 60.0, 60.0)
    assert scores["accuracy"] == 80.0 and scores["num_tokens"] == 10
    per_type = scores["per_type"]
    assert list(per_type) == ["LOC", "MISC", "ORG", "PER"]
    assert per_type["LOC"]["precision"] == 100.0 and per_type["LOC"]["recall"] == 50.0
    assert per_type["LOC"]["f1"] == pytest.approx(200 / 3)
    assert (per_type["ORG"]["num_predicted"], per_type["ORG"]["num_gold"],
            per_type["ORG"]["num_correct"], per_type["ORG"]["f1"]) == (2, 1, 0, 0.0)
    assert per_type["PER"]["f1"] == per_type["MISC"]["f1"] == 100.0


def test_report_prints_what_conlleval_prints():
    assert conll_eval.report(conll_eval.evaluate(GOLD, PREDICTED)).split("\n") == [
        "processed 10 tokens with 5 phrases; found: 5 phrases; correct: 3.",
        "accuracy:  80.00%; precision:  60.00%; recall:  60.00%; FB1:  60.00",
        "              LOC: precision: 100.00%; recall:  50.00%; FB1:  66.67  1",
        "             MISC: precision: 100.00%; recall: 100.00%; FB1: 100.00  1",
        "              ORG: precision:   0.00%; recall:   0.00%; FB1:   0.00  2",
        "              PER: precision: 100.00%; recall: 100.00%; FB1: 100.00  1",
    ]
