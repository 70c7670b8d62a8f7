"""Entity-level precision, recall and F1 as the CoNLL `conlleval` script defines them.

A tag is split at its first "-" into a prefix and a type ("B-PER" -> "B", "PER"; "O" -> "O",
""). A chunk (entity) ends before a token when the previous token was B or I and the current one
is B or O, or when the previous token was E, S, "[" or "]", or when the previous token was not
O/"." and the type changes. A chunk starts at a token that is B; or I or E after O, E or S
(the IOB1 reading: I- starts an entity after O, B- only separates two adjacent entities of the
same type); or S, "[" or "]"; or any non-O tag whose type differs from the previous one. Both
IOB1 and IOB2 (and IOE/IOBES) sequences are read by these rules. Every sentence ends as if an
"O" followed it.

A predicted chunk is correct when a gold chunk has the same start, end and type. Precision =
correct / predicted chunks, recall = correct / gold chunks, F1 = 2PR / (P + R), all in percent
as conlleval prints them (0 when undefined), plus token accuracy and per-type scores.

>>> scores = evaluate([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "I-PER", "O", "B-ORG"]])
>>> scores["precision"], scores["recall"], scores["f1"]
(50.0, 50.0, 50.0)
"""

import collections


def split_tag(tag):
    """("B", "PER") for "B-PER"; ("O", "") for "O"."""
    if "-" in tag:
        prefix, kind = tag.split("-", 1)
        return prefix, kind
    return tag, ""


def _end_of_chunk(prev_tag, tag, prev_type, kind):
    if prev_tag in ("B", "I") and tag in ("B", "O"):
        return True
    if prev_tag in ("E", "S", "[", "]"):
        return True
    if prev_tag not in ("O", ".") and prev_type != kind:
        return True
    return False


def _start_of_chunk(prev_tag, tag, prev_type, kind):
    if tag in ("B", "S", "[", "]"):
        return True
    if prev_tag in ("E", "S", "O") and tag in ("I", "E"):
        return True
    if tag not in ("O", ".") and prev_type != kind:
        return True
    return False


def extract_chunks(tags):
    """The set of (type, first index, last index) chunks of one tag sequence."""
    chunks = set()
    prev_tag, prev_type = "O", ""
    start = None
    for index, full_tag in enumerate(list(tags) + ["O"]):
        tag, kind = split_tag(full_tag)
        if start is not None and _end_of_chunk(prev_tag, tag, prev_type, kind):
            chunks.add((prev_type, start, index - 1))
            start = None
        if _start_of_chunk(prev_tag, tag, prev_type, kind):
            start = index
        prev_tag, prev_type = tag, kind
    return chunks


def _prf(correct, predicted, gold):
    precision = 100.0 * correct / predicted if predicted else 0.0
    recall = 100.0 * correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def evaluate(gold_sequences, predicted_sequences):
    """Scores of predicted tag sequences against gold ones (lists of per-sentence tag lists).

    Returns {"precision", "recall", "f1", "accuracy", "num_tokens", "num_gold",
    "num_predicted", "num_correct", "per_type": {type: {"precision", "recall", "f1",
    "num_gold", "num_predicted", "num_correct"}}}, types in alphabetical order (every type of
    the gold or the predicted tags). `report` prints it as conlleval does.
    """
    gold_sequences = list(gold_sequences)
    predicted_sequences = list(predicted_sequences)
    if len(gold_sequences) != len(predicted_sequences):
        raise ValueError(f"{len(gold_sequences)} gold sentences but {len(predicted_sequences)} "
                         "predicted")
    counts = collections.defaultdict(lambda: [0, 0, 0])  # type -> correct, predicted, gold
    tokens = correct_tokens = 0
    for index, (gold, predicted) in enumerate(zip(gold_sequences, predicted_sequences)):
        gold, predicted = list(gold), list(predicted)
        if len(gold) != len(predicted):
            raise ValueError(f"sentence {index}: {len(gold)} gold tags but {len(predicted)} "
                             "predicted")
        tokens += len(gold)
        correct_tokens += sum(g == p for g, p in zip(gold, predicted))
        gold_chunks = extract_chunks(gold)
        predicted_chunks = extract_chunks(predicted)
        for kind, _, _ in gold_chunks:
            counts[kind][2] += 1
        for kind, _, _ in predicted_chunks:
            counts[kind][1] += 1
        for kind, _, _ in gold_chunks & predicted_chunks:
            counts[kind][0] += 1
    total_correct = sum(c[0] for c in counts.values())
    total_predicted = sum(c[1] for c in counts.values())
    total_gold = sum(c[2] for c in counts.values())
    precision, recall, f1 = _prf(total_correct, total_predicted, total_gold)
    per_type = {}
    for kind in sorted(counts):
        c = counts[kind]
        p, r, f = _prf(*c)
        per_type[kind] = {"precision": p, "recall": r, "f1": f, "num_correct": c[0],
                          "num_predicted": c[1], "num_gold": c[2]}
    return {"precision": precision, "recall": recall, "f1": f1,
            "accuracy": 100.0 * correct_tokens / tokens if tokens else 0.0,
            "num_tokens": tokens, "num_gold": total_gold, "num_predicted": total_predicted,
            "num_correct": total_correct, "per_type": per_type}


def report(scores):
    """The scores of `evaluate` as conlleval prints them: the totals, then per type its
    precision, recall, FB1 and number of predicted chunks.

    >>> print(report(evaluate([["B-PER", "I-PER", "O", "B-LOC"]], [["B-PER", "I-PER", "O", "B-ORG"]])))
    processed 4 tokens with 2 phrases; found: 2 phrases; correct: 1.
    accuracy:  75.00%; precision:  50.00%; recall:  50.00%; FB1:  50.00
                  LOC: precision:   0.00%; recall:   0.00%; FB1:   0.00  0
                  ORG: precision:   0.00%; recall:   0.00%; FB1:   0.00  1
                  PER: precision: 100.00%; recall: 100.00%; FB1: 100.00  1
    """
    lines = [f"processed {scores['num_tokens']} tokens with {scores['num_gold']} phrases; "
             f"found: {scores['num_predicted']} phrases; correct: {scores['num_correct']}.",
             f"accuracy: {scores['accuracy']:6.2f}%; precision: {scores['precision']:6.2f}%; "
             f"recall: {scores['recall']:6.2f}%; FB1: {scores['f1']:6.2f}"]
    for kind, entry in scores["per_type"].items():
        lines.append(f"{kind:>17}: precision: {entry['precision']:6.2f}%; recall: "
                     f"{entry['recall']:6.2f}%; FB1: {entry['f1']:6.2f}  {entry['num_predicted']}")
    return "\n".join(lines)
