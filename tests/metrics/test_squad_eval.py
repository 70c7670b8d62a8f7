"""SQuAD exact match / F1 on hand-worked examples (expected values worked out in comments)."""

import logging

import pytest

from bert_keras.metrics import squad_eval as se


def _dataset(questions):
    """A SQuAD "data" list with one paragraph holding `questions` = [(id, [answer texts])]."""
    qas = [{"id": qid, "question": "?", "answers": [{"text": t, "answer_start": 0} for t in texts]}
           for qid, texts in questions]
    return [{"title": "t", "paragraphs": [{"context": "unused", "qas": qas}]}]


def test_normalize_answer():
    # lower -> "the  quick, brown fox!"; punctuation -> "the  quick brown fox";
    # articles -> "  quick brown fox"; whitespace -> "quick brown fox".
    assert se.normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert se.normalize_answer("An apple a day") == "apple day"
    # Articles only as whole words; hyphens are punctuation and disappear without a space.
    assert se.normalize_answer("Theater at the-end") == "theater at theend"
    assert se.normalize_answer("  ") == ""


def test_exact_match():
    assert se.exact_match("the Broncos!", "Broncos") == 1
    assert se.exact_match("Denver Broncos", "Broncos") == 0


def test_f1_token_overlap():
    # pred "cat sat on mat" (4 tokens), gold "cat on mat" (3): overlap 3,
    # P = 3/4, R = 3/3, F1 = 2 * 0.75 * 1 / 1.75 = 6/7.
    assert se.f1_v1("the cat sat on mat", "a cat on the mat") == pytest.approx(6 / 7)
    assert se.f1_v2("the cat sat on mat", "a cat on the mat") == pytest.approx(6 / 7)


def test_f1_counts_repeated_tokens_with_multiplicity():
    # pred cat,cat,dog; gold cat,dog,dog: common = min(2,1) cat + min(1,2) dog = 2 tokens,
    # P = 2/3, R = 2/3, F1 = 2/3.
    assert se.f1_v1("cat cat dog", "cat dog dog") == pytest.approx(2 / 3)


def test_f1_of_empty_answers_differs_between_versions():
    # v1.1: no overlap -> 0. v2.0: both empty -> 1, one empty -> 0.
    assert se.f1_v1("", "") == 0.0
    assert se.f1_v2("", "") == 1.0
    assert se.f1_v2("the", "") == 1.0  # "the" normalizes to nothing
    assert se.f1_v2("Paris", "") == 0.0
    assert se.f1_v2("", "Paris") == 0.0


def test_evaluate_v1():
    dataset = _dataset([("q1", ["Denver Broncos", "Broncos"]), ("q2", ["1895"])])
    predictions = {"q1": "the Broncos", "q2": "in 1895"}
    # q1: "broncos" equals the second gold -> EM 1, F1 1.
    # q2: EM 0; pred {in, 1895} vs gold {1895}: P = 1/2, R = 1, F1 = 2/3.
    # EM = 100 * 1 / 2 = 50; F1 = 100 * (1 + 2/3) / 2 = 83.33...
    result = se.evaluate_v1(dataset, predictions)
    assert result["exact_match"] == pytest.approx(50.0)
    assert result["f1"] == pytest.approx(250 / 3)


def test_evaluate_v1_counts_missing_predictions_as_zero(caplog):
    dataset = _dataset([("q1", ["Broncos"]), ("q2", ["1895"]), ("q3", ["x"])])
    with caplog.at_level(logging.WARNING):
        result = se.evaluate_v1(dataset, {"q1": "Broncos", "q2": "in 1895"})
    # EM = 100 * 1 / 3; F1 = 100 * (1 + 2/3 + 0) / 3 = 55.55...
    assert result["exact_match"] == pytest.approx(100 / 3)
    assert result["f1"] == pytest.approx(500 / 9)
    assert "1 question(s) have no prediction" in caplog.text


V2_DATASET = _dataset([("q1", ["Paris"]), ("q2", ["in 1990"]), ("q3", []), ("q4", [])])
V2_PREDICTIONS = {"q1": "Paris", "q2": "1990", "q3": "", "q4": "London"}
# Raw per-question scores:
#   q1 (has answer): EM 1, F1 1.
#   q2 (has answer): EM 0; {1990} vs {in, 1990}: P = 1, R = 1/2 -> F1 = 2/3.
#   q3 (no answer, predicted ""): EM 1, F1 1 (both empty).
#   q4 (no answer, predicted "London"): EM 0, F1 0.


def test_evaluate_v2_without_no_answer_probabilities():
    result = se.evaluate_v2(V2_DATASET, V2_PREDICTIONS)
    # exact = 100 * (1 + 0 + 1 + 0) / 4 = 50; f1 = 100 * (1 + 2/3 + 1 + 0) / 4 = 66.67
    assert result["exact"] == pytest.approx(50.0)
    assert result["f1"] == pytest.approx(200 / 3)
    assert result["total"] == 4
    # HasAns (q1, q2): exact 50, f1 100 * (5/3) / 2 = 83.33; NoAns (q3, q4): 50 / 50.
    assert result["HasAns_exact"] == pytest.approx(50.0)
    assert result["HasAns_f1"] == pytest.approx(250 / 3)
    assert result["HasAns_total"] == 2
    assert result["NoAns_exact"] == pytest.approx(50.0)
    assert result["NoAns_f1"] == pytest.approx(50.0)
    assert result["NoAns_total"] == 2
    assert "best_f1" not in result


NA_PROBS = {"q1": 0.1, "q2": 0.3, "q3": 0.9, "q4": 0.6}


def test_evaluate_v2_with_threshold_and_best_thresholds():
    result = se.evaluate_v2(V2_DATASET, V2_PREDICTIONS, na_probs=NA_PROBS, na_prob_thresh=0.5)
    # Above 0.5: q3, q4 -> predicted unanswerable; both have no answer -> score 1 each.
    # exact = 100 * (1 + 0 + 1 + 1) / 4 = 75; f1 = 100 * (1 + 2/3 + 1 + 1) / 4 = 91.67
    assert result["exact"] == pytest.approx(75.0)
    assert result["f1"] == pytest.approx(275 / 3)
    assert result["NoAns_exact"] == pytest.approx(100.0)
    assert result["HasAns_f1"] == pytest.approx(250 / 3)
    # Threshold search on the raw scores. Start with everything unanswerable: 2 right (q3, q4).
    # Let questions through by increasing probability: q1 (0.1), q2 (0.3), q4 (0.6), q3 (0.9).
    # exact: q1 +1 -> 3 (best, thresh 0.1); q2 +0 -> 3; q4 -1 (non-empty wrong) -> 2; q3 +0 -> 2.
    # f1:    q1 +1 -> 3 (0.1); q2 +2/3 -> 3.67 (best, 0.3); q4 -1 -> 2.67; q3 +0 -> 2.67.
    assert result["best_exact"] == pytest.approx(75.0)
    assert result["best_exact_thresh"] == pytest.approx(0.1)
    assert result["best_f1"] == pytest.approx(100 * (11 / 3) / 4)
    assert result["best_f1_thresh"] == pytest.approx(0.3)
    assert se.find_best_thresholds(V2_DATASET, V2_PREDICTIONS, NA_PROBS) == {
        key: result[key] for key in ("best_exact", "best_exact_thresh", "best_f1",
                                     "best_f1_thresh")}


def test_best_threshold_stays_zero_when_all_unanswerable_is_best():
    dataset = _dataset([("q1", []), ("q2", ["Paris"])])
    # Start: 1 right (q1). q2 (0.2): predicted "Rome", +0 -> 1. q1 (0.5): "x" wrong, -1 -> 0.
    # Nothing beats the start: best 100 * 1 / 2 = 50 at the initial threshold 0.0.
    result = se.find_best_thresholds(dataset, {"q1": "x", "q2": "Rome"}, {"q1": 0.5, "q2": 0.2})
    assert result["best_exact"] == pytest.approx(50.0)
    assert result["best_exact_thresh"] == 0.0


def test_v2_gold_answers_that_normalize_to_nothing_count_as_no_answer():
    dataset = _dataset([("q1", ["The", "a"])])
    result = se.evaluate_v2(dataset, {"q1": ""})
    assert result["exact"] == 100.0
    assert result["NoAns_total"] == 1 and "HasAns_total" not in result


def test_v2_missing_prediction_scores_zero(caplog):
    with caplog.at_level(logging.WARNING):
        result = se.evaluate_v2(V2_DATASET, {"q1": "Paris"})
    # q1 EM 1; q2, q3, q4 missing -> 0: exact = 25.
    assert result["exact"] == pytest.approx(25.0)
    assert result["total"] == 4
    assert "3 question(s) have no prediction" in caplog.text
