"""Exact match and F1 as the official SQuAD v1.1 and v2.0 evaluation scripts define them.

Written from the definitions of the official scripts:

- `normalize_answer`: lower-case, drop ASCII punctuation (`string.punctuation`), drop the
  articles "a", "an", "the" as whole words, collapse whitespace.
- exact match: the normalized prediction equals a normalized gold answer.
- F1: token-level F1 between the normalized prediction and a gold answer, overlap counted
  with multiplicity (bag of tokens), maximised over the gold answers.
- v1.1 (`evaluate_v1`): F1 is 0 when nothing overlaps (so an empty prediction scores 0).
  Questions without a prediction score 0 and are counted.
- v2.0 (`evaluate_v2`): a question whose gold answers are all empty after normalization
  ("is_impossible") has the single gold answer "" ; F1 between an empty and a non-empty token
  list is 0, between two empty lists 1. A question is predicted unanswerable when its
  no-answer probability (or score) is above `na_prob_thresh`; the totals are split into
  HasAns_ and NoAns_, and `find_best_thresholds` gives best_exact / best_f1 and the thresholds
  that reach them. Scores are percentages (0-100) and `total` a count, as in the scripts.
  Unlike the official v2.0 script (which crashes on them), questions missing from the
  predictions score 0 and a warning names how many there were.

`dataset` everywhere is the `data` list of the official JSON file (`json.load(f)["data"]`).
"""

import collections
import logging
import re
import string

logger = logging.getLogger("bert_keras.metrics.squad_eval")

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text):
    """Lower text and remove punctuation, articles and extra whitespace."""
    text = text.lower()
    text = "".join(char for char in text if char not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(text):
    """The normalized tokens of an answer ([] for an empty answer)."""
    if not text:
        return []
    return normalize_answer(text).split()


def exact_match(prediction, gold):
    """1 if the normalized strings are equal, else 0."""
    return int(normalize_answer(prediction) == normalize_answer(gold))


def f1_v1(prediction, gold):
    """Token F1 of SQuAD v1.1: 0 when no token overlaps."""
    prediction_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    return _token_f1(prediction_tokens, gold_tokens)


def f1_v2(prediction, gold):
    """Token F1 of SQuAD v2.0: an empty side scores 1 if both are empty, else 0."""
    prediction_tokens = answer_tokens(prediction)
    gold_tokens = answer_tokens(gold)
    if not prediction_tokens or not gold_tokens:
        return float(prediction_tokens == gold_tokens)
    return _token_f1(prediction_tokens, gold_tokens)


def _token_f1(prediction_tokens, gold_tokens):
    common = collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(prediction_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _questions(dataset):
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                yield qa


def _warn_missing(missing):
    if missing:
        logger.warning("%d question(s) have no prediction and score 0 (first: %s)",
                       len(missing), missing[0])


def evaluate_v1(dataset, predictions):
    """{"exact_match", "f1"} in percent, as the official v1.1 script."""
    exact_total = 0.0
    f1_total = 0.0
    count = 0
    missing = []
    for qa in _questions(dataset):
        count += 1
        if qa["id"] not in predictions:
            missing.append(qa["id"])
            continue
        prediction = predictions[qa["id"]]
        golds = [answer["text"] for answer in qa["answers"]]
        if not golds:
            # A v2.0 unanswerable question read with the v1.1 metric has nothing to match.
            continue
        exact_total += max(exact_match(prediction, gold) for gold in golds)
        f1_total += max(f1_v1(prediction, gold) for gold in golds)
    _warn_missing(missing)
    if count == 0:
        raise ValueError("the dataset has no questions")
    return {"exact_match": 100.0 * exact_total / count, "f1": 100.0 * f1_total / count}


def raw_scores_v2(dataset, predictions):
    """Per-question exact and F1 (0/1 and [0, 1]) of the v2.0 script, before any threshold.

    Returns (exact, f1, has_answer, missing): dicts keyed by question id and the ids without
    a prediction (scored 0).
    """
    exact, f1, has_answer = {}, {}, {}
    missing = []
    for qa in _questions(dataset):
        qid = qa["id"]
        golds = [answer["text"] for answer in qa["answers"] if normalize_answer(answer["text"])]
        has_answer[qid] = bool(golds)
        if not golds:
            golds = [""]
        if qid not in predictions:
            missing.append(qid)
            exact[qid] = 0.0
            f1[qid] = 0.0
            continue
        prediction = predictions[qid]
        exact[qid] = float(max(exact_match(prediction, gold) for gold in golds))
        f1[qid] = max(f1_v2(prediction, gold) for gold in golds)
    return exact, f1, has_answer, missing


def _apply_threshold(scores, na_probs, has_answer, threshold):
    out = {}
    for qid, score in scores.items():
        if na_probs.get(qid, 0.0) > threshold:
            out[qid] = float(not has_answer[qid])
        else:
            out[qid] = score
    return out


def _totals(exact, f1, qids):
    total = len(qids)
    if total == 0:
        return {"exact": 0.0, "f1": 0.0, "total": 0}
    return {"exact": 100.0 * sum(exact[q] for q in qids) / total,
            "f1": 100.0 * sum(f1[q] for q in qids) / total,
            "total": total}


def _best_threshold(predictions, scores, na_probs, has_answer):
    """Best total score (percent) over thresholds and the threshold reaching it.

    Starting from "everything predicted unanswerable" (every unanswerable question right),
    questions are let through in order of increasing no-answer score; letting one through
    gains its score if it has an answer, loses 1 if it has none and a non-empty prediction.
    """
    current = sum(1 for qid in scores if not has_answer[qid])
    best = current
    best_threshold = 0.0
    for qid in sorted(scores, key=lambda q: na_probs.get(q, 0.0)):
        if has_answer[qid]:
            current += scores[qid]
        elif predictions.get(qid):
            current -= 1
        if current > best:
            best = current
            best_threshold = na_probs.get(qid, 0.0)
    return 100.0 * best / len(scores), best_threshold


def find_best_thresholds(dataset, predictions, na_probs):
    """{"best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"} as in the v2.0 script.

    `na_probs` maps question id to the no-answer probability or score (for BERT: the
    null_odds.json score difference). For the most useful search pass, as `predictions`, the
    best non-null answer of every question (the `best_non_null` of the post-processing), not
    the answers already cut at a threshold.
    """
    exact, f1, has_answer, missing = raw_scores_v2(dataset, predictions)
    _warn_missing(missing)
    if not exact:
        raise ValueError("the dataset has no questions")
    best_exact, exact_threshold = _best_threshold(predictions, exact, na_probs, has_answer)
    best_f1, f1_threshold = _best_threshold(predictions, f1, na_probs, has_answer)
    return {"best_exact": best_exact, "best_exact_thresh": exact_threshold,
            "best_f1": best_f1, "best_f1_thresh": f1_threshold}


def evaluate_v2(dataset, predictions, na_probs=None, na_prob_thresh=1.0):
    """The v2.0 script's result dict (percentages; `total` counts).

    Keys: exact, f1, total, HasAns_exact, HasAns_f1, HasAns_total, NoAns_exact, NoAns_f1,
    NoAns_total (HasAns_/NoAns_ only when the dataset has such questions) and, when `na_probs`
    is given, best_exact, best_exact_thresh, best_f1, best_f1_thresh.
    """
    exact_raw, f1_raw, has_answer, missing = raw_scores_v2(dataset, predictions)
    _warn_missing(missing)
    if not exact_raw:
        raise ValueError("the dataset has no questions")
    probs = na_probs if na_probs is not None else {}
    exact = _apply_threshold(exact_raw, probs, has_answer, na_prob_thresh)
    f1 = _apply_threshold(f1_raw, probs, has_answer, na_prob_thresh)
    result = _totals(exact, f1, list(exact))
    has_ids = [qid for qid in exact if has_answer[qid]]
    no_ids = [qid for qid in exact if not has_answer[qid]]
    for prefix, ids in (("HasAns", has_ids), ("NoAns", no_ids)):
        if ids:
            for key, value in _totals(exact, f1, ids).items():
                result[f"{prefix}_{key}"] = value
    if na_probs is not None:
        best_exact, exact_threshold = _best_threshold(predictions, exact_raw, na_probs, has_answer)
        best_f1, f1_threshold = _best_threshold(predictions, f1_raw, na_probs, has_answer)
        result.update({"best_exact": best_exact, "best_exact_thresh": exact_threshold,
                       "best_f1": best_f1, "best_f1_thresh": f1_threshold})
    return result
