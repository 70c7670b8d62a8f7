"""SQuAD post-processing on constructed logits."""

import json
import math
import os

import numpy as np
import pytest

from bert_keras.metrics import squad_eval
from bert_keras.finetuning.squad import data as squad
from bert_keras.finetuning.squad.postprocess import (NO_CANDIDATE_NULL_ODDS, get_final_text,
                                                           postprocess_predictions, write_predictions)
from helpers.reference_tokenization import ReferenceWordTokenizer

GREEK = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "which", "when", "was", "born", "?",
          "nikola", "tesla", "(", "1856", "-", "1943", ")", "an", "inventor", "."] + GREEK)
TOKENIZER = ReferenceWordTokenizer(VOCAB)
CONTEXT = "Alpha Beta Gamma Delta Epsilon Zeta Eta Theta Iota Kappa"
LOW = -10.0

# With max_seq_length 9, doc_stride 2 and the one-wordpiece question "which", the 10 words fall
# into 4 windows (see test_squad.py); document tokens start at position 3:
#   window 0: pos 3..7 = Alpha Beta Gamma Delta Epsilon   (max context: Alpha..Delta)
#   window 1: pos 3..7 = Gamma Delta Epsilon Zeta Eta     (max context: Epsilon, Zeta = pos 5, 6)
#   window 2: pos 3..7 = Epsilon Zeta Eta Theta Iota      (max context: Eta, Theta = pos 5, 6)
#   window 3: pos 3..6 = Eta Theta Iota Kappa             (max context: Iota, Kappa = pos 5, 6)


def _setup(qids=("q",), context=CONTEXT, version_2=False):
    qas = [{"id": qid, "question": "which", "answers": []} for qid in qids]
    data = squad.squad_data_from_json(
        {"data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]},
        is_training=False, version_2_with_negative=version_2)
    features = squad.create_squad_features(data.examples, TOKENIZER, VOCAB, max_seq_length=9,
                                           doc_stride=2, max_query_length=4)
    starts = np.full((len(features), 9), LOW)
    ends = np.full((len(features), 9), LOW)
    return data, features, starts, ends


def test_get_final_text():
    # Original casing comes back.
    assert get_final_text("epsilon zeta", "Epsilon Zeta") == "Epsilon Zeta"
    # A span inside one whitespace word: basic tokens "( 1856 - 1943 ) .", "1856" at
    # characters 2-5, i.e. characters 1-4 of "(1856-1943)." once spaces are removed.
    assert get_final_text("1856", "(1856-1943).") == "1856"
    # Accents stripped by lower-casing still align character by character.
    assert get_final_text("cafe", "Café!") == "Café"
    # Not found, or not alignable: the whole original text.
    assert get_final_text("xyz", "Alpha") == "Alpha"
    assert get_final_text("cafe", "Cafe\u0301!") == "Cafe\u0301!"
    # Without lower-casing the case must match.
    assert get_final_text("alpha", "Alpha", do_lower_case=False) == "Alpha"
    assert get_final_text("Alpha", "Alpha beta", do_lower_case=False) == "Alpha"


def test_answer_in_several_windows_uses_the_max_context_window():
    data, features, starts, ends = _setup()
    # Window 2: Epsilon (pos 3) .. Zeta (pos 4) scores 8 + 8 = 16, but Epsilon has its max
    # context in window 1, so this candidate is dropped.
    starts[2, 3], ends[2, 4] = 8.0, 8.0
    # Window 1: Epsilon (pos 5) .. Zeta (pos 6) = 3 + 3 = 6.
    starts[1, 5], ends[1, 6] = 3.0, 3.0
    # Window 0: Alpha (pos 3) .. Beta (pos 4) = 2 + 2 = 4.
    starts[0, 3], ends[0, 4] = 2.0, 2.0
    result = postprocess_predictions(data.examples, features, starts, ends)
    assert result.predictions == {"q": "Epsilon Zeta"}
    nbest = result.nbest["q"]
    assert [e["text"] for e in nbest[:2]] == ["Epsilon Zeta", "Alpha Beta"]
    assert (nbest[0]["start_logit"], nbest[0]["end_logit"]) == (3.0, 3.0)
    # Softmax over the n-best scores: the first two differ by 6 - 4 = 2 in log space.
    assert nbest[0]["probability"] / nbest[1]["probability"] == pytest.approx(math.exp(2))
    assert sum(e["probability"] for e in nbest) == pytest.approx(1.0)
    assert len({e["text"] for e in nbest}) == len(nbest) <= 20
    assert result.null_odds == {}


def test_end_before_start_is_skipped():
    data, features, starts, ends = _setup()
    # Delta (pos 6) .. Beta (pos 4) = 18 ends before it starts; Delta .. Delta = 9 + 5 = 14.
    starts[0, 6], ends[0, 4], ends[0, 6] = 9.0, 9.0, 5.0
    result = postprocess_predictions(data.examples, features, starts, ends)
    assert result.predictions["q"] == "Delta"
    assert result.nbest["q"][0]["start_logit"] + result.nbest["q"][0]["end_logit"] == 14.0


def test_spans_longer_than_max_answer_length_are_skipped():
    data, features, starts, ends = _setup()
    # Alpha .. Delta (4 wordpieces) = 18; Alpha .. Beta (2) = 14.
    starts[0, 3], ends[0, 6], ends[0, 4] = 9.0, 9.0, 5.0
    short = postprocess_predictions(data.examples, features, starts, ends, max_answer_length=3)
    assert short.predictions["q"] == "Alpha Beta"
    long = postprocess_predictions(data.examples, features, starts, ends, max_answer_length=4)
    assert long.predictions["q"] == "Alpha Beta Gamma Delta"


def test_only_the_n_best_start_and_end_indices_are_tried():
    data, features, starts, ends = _setup()
    # Top start Delta (9), then Gamma (8); top end Beta (9), then Gamma (8).
    starts[0, 6], starts[0, 5], ends[0, 4], ends[0, 5] = 9.0, 8.0, 9.0, 8.0
    # n_best_size 1: only Delta .. Beta (end before start) in window 0; elsewhere the top
    # index of the all-equal rows is 0 ([CLS]) -> no candidate -> "empty", as the original.
    one = postprocess_predictions(data.examples, features, starts, ends, n_best_size=1)
    assert one.predictions["q"] == "empty"
    assert one.nbest["q"] == [{"text": "empty", "probability": 1.0, "start_logit": 0.0,
                               "end_logit": 0.0}]
    two = postprocess_predictions(data.examples, features, starts, ends, n_best_size=2)
    assert two.predictions["q"] == "Gamma"


def test_v2_null_score_against_best_answer():
    data, features, starts, ends = _setup(qids=("no", "yes"), version_2=True)
    no, yes = features[:4], features[4:]
    # "no": [CLS] scores per window 1+1, .5+.5, 3+3, 2+2 -> null score = min = 1 (window 1).
    for row, cls in zip(range(4), (1.0, 0.5, 3.0, 2.0)):
        starts[row, 0] = ends[row, 0] = cls
    # Best answer: Epsilon .. Zeta in window 1 = 0.2 + 0.3 = 0.5; null odds = 1 - 0.5 = 0.5.
    starts[1, 5], ends[1, 6] = 0.2, 0.3
    # "yes": [CLS] -5 - 5 = -10 everywhere; the same answer scores 0.5; odds -10 - 0.5 = -10.5.
    for row in range(4, 8):
        starts[row, 0] = ends[row, 0] = -5.0
    starts[5, 5], ends[5, 6] = 0.2, 0.3
    assert len(no) == len(yes) == 4
    result = postprocess_predictions(data.examples, features, starts, ends,
                                     version_2_with_negative=True)
    assert result.null_odds["no"] == pytest.approx(0.5)
    assert result.null_odds["yes"] == pytest.approx(-10.5)
    assert result.predictions == {"no": "", "yes": "Epsilon Zeta"}
    assert result.best_non_null == {"no": "Epsilon Zeta", "yes": "Epsilon Zeta"}
    # The null answer competes in the n-best list with the smallest null score (1.0).
    assert result.nbest["no"][0] == pytest.approx(
        {"text": "", "start_logit": 0.5, "end_logit": 0.5, "probability":
         result.nbest["no"][0]["probability"]})
    assert result.nbest["no"][1]["text"] == "Epsilon Zeta"
    # Raising the threshold to 0.5 lets the answer through (0.5 > 0.5 is false).
    relaxed = postprocess_predictions(data.examples, features, starts, ends,
                                      version_2_with_negative=True, null_score_diff_threshold=0.5)
    assert relaxed.predictions["no"] == "Epsilon Zeta"

    # Threshold search on the best non-null answers, gold: "no" unanswerable, "yes" answered.
    dataset = [{"title": "t", "paragraphs": [{"context": CONTEXT, "qas": [
        {"id": "no", "question": "which", "answers": []},
        {"id": "yes", "question": "which", "answers": [{"text": "Epsilon Zeta",
                                                          "answer_start": 23}]}]}]}]
    best = squad_eval.find_best_thresholds(dataset, result.best_non_null, result.null_odds)
    # Start: all unanswerable -> 1 of 2 right. "yes" (-10.5) through: +1 -> 2 (best,
    # threshold -10.5); "no" (0.5) through: wrong non-empty answer -> 1.
    assert best["best_exact"] == pytest.approx(100.0)
    assert best["best_exact_thresh"] == pytest.approx(-10.5)
    scores = squad_eval.evaluate_v2(dataset, result.predictions, result.null_odds, 1.0)
    assert scores["exact"] == pytest.approx(100.0)


def test_v2_empty_context_predicts_no_answer():
    data, features, starts, ends = _setup(context="", version_2=True)
    (feature,) = features
    assert feature.tokens == ["[CLS]", "which", "[SEP]", "[SEP]"]  # unpadded, as the original
    result = postprocess_predictions(data.examples, features, starts, ends,
                                     version_2_with_negative=True)
    assert result.predictions == {"q": ""}
    assert result.null_odds == {"q": NO_CANDIDATE_NULL_ODDS}
    assert [e["text"] for e in result.nbest["q"]] == [""]
    v1 = postprocess_predictions(data.examples, features, starts, ends)
    assert v1.predictions == {"q": "empty"}


def test_prediction_inside_a_word_keeps_just_that_part():
    context = "Nikola Tesla (1856-1943) was an inventor."
    data = squad.squad_data_from_json({"data": [{"title": "t", "paragraphs": [{
        "context": context, "qas": [{"id": "t", "question": "When was Tesla born?",
                                     "answers": [{"text": "1856", "answer_start": 14}]}]}]}]},
        is_training=False)
    features = squad.create_squad_features(data.examples, TOKENIZER, VOCAB, max_seq_length=24,
                                           doc_stride=8, max_query_length=8)
    position = features[0].tokens.index("1856")
    starts = np.full((1, 24), LOW)
    ends = np.full((1, 24), LOW)
    starts[0, position] = ends[0, position] = 5.0
    result = postprocess_predictions(data.examples, features, starts, ends)
    assert result.predictions == {"t": "1856"}
    assert squad_eval.evaluate_v1(data.dataset, result.predictions)["exact_match"] == 100.0


def test_write_predictions(tmp_path):
    data, features, starts, ends = _setup(version_2=True)
    starts[1, 5], ends[1, 6] = 3.0, 3.0
    result = postprocess_predictions(data.examples, features, starts, ends,
                                     version_2_with_negative=True)
    paths = write_predictions(result, str(tmp_path / "out"))
    with open(paths["predictions"], encoding="utf-8") as f:
        assert json.load(f) == {"q": "Epsilon Zeta"}
    with open(paths["null_odds"], encoding="utf-8") as f:
        # null score: min over windows of -10 + -10 = -20; odds -20 - 6 = -26.
        assert json.load(f) == {"q": -26.0}
    with open(paths["nbest"], encoding="utf-8") as f:
        assert json.load(f)["q"][0]["text"] == "Epsilon Zeta"
    v1 = postprocess_predictions(data.examples, features, starts, ends)
    assert "null_odds" not in write_predictions(v1, str(tmp_path / "v1"))
    assert not os.path.exists(tmp_path / "v1" / "null_odds.json")


def test_logits_must_line_up_with_features():
    data, features, starts, ends = _setup()
    with pytest.raises(ValueError, match="start_logits has 3 rows but there are 4 features"):
        postprocess_predictions(data.examples, features, starts[:3], ends)
