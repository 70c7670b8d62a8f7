"""From start/end logits to SQuAD answers, as the original BERT `run_squad.py` writes them.

For every example, over all of its windows: the `n_best_size` highest start and end logits of
each window give candidate spans; a span is kept when both ends are document tokens of the
window, the start token has its maximum context in this window, end >= start and it is at most
`max_answer_length` wordpieces long. Candidates are ranked by start_logit + end_logit; the
text of a span is its wordpieces de-tokenized ("##" joined) and aligned back onto the original
context words (`get_final_text`), so that the answer keeps the original casing, accents and
punctuation, and a span that covers part of a word returns just that part.

SQuAD 2.0 (`version_2_with_negative=True`): the null score of an example is the smallest
start_logit[CLS] + end_logit[CLS] over its windows; the null answer competes in the n-best list;
`null_odds[qid]` = null score - (start + end logit of the best non-null answer), and the answer
is "" when `null_odds > null_score_diff_threshold`. Pick the threshold on dev with
`bert_keras.metrics.squad_eval.find_best_thresholds(dataset, result.best_non_null,
result.null_odds)["best_f1_thresh"]`.

Example (`features` from `bert_keras.finetuning.squad.data.create_squad_features`, logits of shape
[num_features, max_seq_length] in the same order):

    result = postprocess_predictions(examples, features, start_logits, end_logits,
                                     version_2_with_negative=True)
    write_predictions(result, output_dir)   # predictions.json, nbest_predictions.json,
                                            # null_odds.json
"""

import collections
import dataclasses
import math
import os

import numpy as np

from bert_keras.common.files import write_json_atomic
from bert_keras.finetuning.tasks.words import basic_tokenize

# The original's layout of the prediction files.
_JSON = {"indent": 4, "ensure_ascii": False}

# No candidate at all (v2.0): the null odds recorded for the question.
NO_CANDIDATE_NULL_ODDS = 1e6


def get_final_text(pred_text, orig_text, do_lower_case=True):
    """Projects de-tokenized wordpiece text `pred_text` back onto `orig_text`.

    `orig_text` is the original words covering the predicted span, joined by spaces. Both are
    compared with spaces removed after basic tokenization of `orig_text`; when they cannot be
    aligned character by character the whole `orig_text` is returned (as the original does).

    >>> get_final_text("steve smith", "Steve Smith's", True)
    'Steve Smith'
    >>> get_final_text("1895", "(1895-1943).", True)
    '1895'
    """
    tok_text = " ".join(basic_tokenize(orig_text, do_lower_case))
    start = tok_text.find(pred_text)
    if start == -1:
        return orig_text
    end = start + len(pred_text) - 1

    def without_spaces(text):
        # Characters other than " ", and for each its position in `text`.
        positions = [i for i, char in enumerate(text) if char != " "]
        return "".join(text[i] for i in positions), positions

    orig_ns, orig_positions = without_spaces(orig_text)
    tok_ns, tok_positions = without_spaces(tok_text)
    if len(orig_ns) != len(tok_ns):
        return orig_text
    tok_to_ns = {position: index for index, position in enumerate(tok_positions)}
    if start not in tok_to_ns or end not in tok_to_ns:
        return orig_text
    orig_start = orig_positions[tok_to_ns[start]]
    orig_end = orig_positions[tok_to_ns[end]]
    return orig_text[orig_start:orig_end + 1]


def _best_indexes(logits, n_best_size):
    """Indices of the n largest logits, largest first; ties keep the lower index first."""
    return np.argsort(-logits, kind="stable")[:n_best_size].tolist()


def _softmax(scores):
    if not scores:
        return []
    top = max(scores)
    exps = [math.exp(score - top) for score in scores]
    total = sum(exps)
    return [e / total for e in exps]


def _detokenize(tokens):
    text = " ".join(tokens)
    text = text.replace(" ##", "").replace("##", "")
    return " ".join(text.strip().split())


@dataclasses.dataclass
class SquadPredictions:
    """Post-processing output, all dicts keyed by question id.

    predictions: the answer text ("" = no answer) - predictions.json.
    nbest: up to n_best_size entries {"text", "probability", "start_logit", "end_logit"}.
    null_odds: (v2.0) null score minus best non-null score - null_odds.json.
    best_non_null: (v2.0) the best non-empty answer, whatever the threshold ("" if none).
    """

    predictions: dict
    nbest: dict
    null_odds: dict
    best_non_null: dict


def _as_logit_rows(logits, num_features, name):
    if isinstance(logits, dict):
        raise TypeError(f"{name} must be an array aligned with the features, not a dict")
    if len(logits) != num_features:
        raise ValueError(f"{name} has {len(logits)} rows but there are {num_features} features; "
                         "predict on every feature, in order")
    return np.asarray(logits, np.float64)


def postprocess_predictions(examples, features, start_logits, end_logits, n_best_size=20,
                            max_answer_length=30, do_lower_case=True,
                            version_2_with_negative=False, null_score_diff_threshold=0.0):
    """Answers for `examples` from the logits of their `features` (see the module docstring).

    `start_logits`, `end_logits`: [num_features, max_seq_length] array-likes, row i for
    `features[i]`. Returns `SquadPredictions`.
    """
    starts = _as_logit_rows(start_logits, len(features), "start_logits")
    ends = _as_logit_rows(end_logits, len(features), "end_logits")
    by_example = collections.defaultdict(list)
    for feature_index, feature in enumerate(features):
        by_example[feature.example_index].append(feature_index)

    predictions, all_nbest, null_odds, best_non_null = {}, {}, {}, {}
    for example_index, example in enumerate(examples):
        feature_indices = by_example.get(example_index, [])
        candidates = []  # (score, feature_index, start, end, start_logit, end_logit)
        null_score = None
        null_logits = (0.0, 0.0)
        null_feature = None
        for feature_index in feature_indices:
            feature = features[feature_index]
            start_array, end_array = starts[feature_index], ends[feature_index]
            start_row, end_row = start_array.tolist(), end_array.tolist()
            if version_2_with_negative:
                score = start_row[0] + end_row[0]
                if null_score is None or score < null_score:
                    null_score = score
                    null_logits = (start_row[0], end_row[0])
                    null_feature = feature_index
            num_tokens = len(feature.tokens)
            end_indexes = _best_indexes(end_array, n_best_size)
            for start in _best_indexes(start_array, n_best_size):
                for end in end_indexes:
                    if start >= num_tokens or end >= num_tokens:
                        continue
                    if (start not in feature.token_to_orig_map
                            or end not in feature.token_to_orig_map):
                        continue
                    if not feature.token_is_max_context.get(start, False):
                        continue
                    if end < start or end - start + 1 > max_answer_length:
                        continue
                    candidates.append((start_row[start] + end_row[end], feature_index, start, end,
                                       start_row[start], end_row[end]))
        if version_2_with_negative and null_feature is not None:
            candidates.append((null_logits[0] + null_logits[1], null_feature, 0, 0) + null_logits)
        candidates.sort(key=lambda c: c[0], reverse=True)

        nbest = []
        seen = set()
        for _, feature_index, start, end, start_logit, end_logit in candidates:
            if len(nbest) >= n_best_size:
                break
            if start > 0:
                feature = features[feature_index]
                pieces = feature.tokens[start:end + 1]
                orig_start = feature.token_to_orig_map[start]
                orig_end = feature.token_to_orig_map[end]
                orig_text = " ".join(example.doc_tokens[orig_start:orig_end + 1])
                text = get_final_text(_detokenize(pieces), orig_text, do_lower_case)
            else:
                text = ""
            if text in seen:
                continue
            seen.add(text)
            nbest.append({"text": text, "start_logit": start_logit, "end_logit": end_logit})
        if version_2_with_negative and "" not in seen and null_feature is not None:
            nbest.append({"text": "", "start_logit": null_logits[0], "end_logit": null_logits[1]})
        if not nbest:
            nbest.append({"text": "" if version_2_with_negative else "empty",
                          "start_logit": 0.0, "end_logit": 0.0})
        probabilities = _softmax([entry["start_logit"] + entry["end_logit"] for entry in nbest])
        for entry, probability in zip(nbest, probabilities):
            entry["probability"] = probability
        all_nbest[example.qas_id] = [
            {"text": e["text"], "probability": e["probability"], "start_logit": e["start_logit"],
             "end_logit": e["end_logit"]} for e in nbest]

        best = next((entry for entry in nbest if entry["text"]), None)
        if not version_2_with_negative:
            predictions[example.qas_id] = nbest[0]["text"]
            continue
        best_non_null[example.qas_id] = best["text"] if best else ""
        if best is None or null_score is None:
            odds = NO_CANDIDATE_NULL_ODDS
        else:
            odds = null_score - best["start_logit"] - best["end_logit"]
        null_odds[example.qas_id] = odds
        predictions[example.qas_id] = "" if (best is None or odds > null_score_diff_threshold) \
            else best["text"]
    return SquadPredictions(predictions, all_nbest, null_odds, best_non_null)


def write_predictions(result, output_dir):
    """Writes predictions.json, nbest_predictions.json and (v2.0) null_odds.json.

    Returns the dict of written paths.
    """
    paths = {"predictions": os.path.join(output_dir, "predictions.json"),
             "nbest": os.path.join(output_dir, "nbest_predictions.json")}
    write_json_atomic(paths["predictions"], result.predictions, **_JSON)
    write_json_atomic(paths["nbest"], result.nbest, **_JSON)
    if result.null_odds:
        paths["null_odds"] = os.path.join(output_dir, "null_odds.json")
        write_json_atomic(paths["null_odds"], result.null_odds, **_JSON)
    return paths
