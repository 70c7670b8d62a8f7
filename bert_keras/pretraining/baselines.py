"""What a model that learned nothing scores: the baselines pre-training results are read against.

- `unigram_mlm_accuracy`: always predicting the most frequent masked token of the training
  records, scored on the evaluation records' masked positions;
- `nsp_majority_share`: always answering the more frequent next-sentence label of the
  evaluation records.

A masked-LM accuracy near the first, or a next-sentence accuracy at or below the second, means
nothing was learned beyond label frequencies.

Example:

>>> compute_baselines("data/train/*.tfrecord", "data/heldout/*.tfrecord",
...                   max_seq_length=128, max_predictions_per_seq=20)  # doctest: +SKIP
{'unigram_mlm_accuracy': 0.051, 'nsp_majority_share': 0.603, 'most_frequent_token_id': 1010, ...}
"""

import collections

from bert_keras.pretraining.inputs import read_records


def _masked_counts(pattern, max_seq_length, max_predictions_per_seq, batch_size):
    counts = collections.Counter()
    labels = collections.Counter()
    for batch in read_records(pattern, batch_size, max_seq_length, max_predictions_per_seq):
        counts.update(batch["masked_lm_ids"][batch["masked_lm_weights"] > 0].tolist())
        labels.update(batch["next_sentence_labels"].reshape(-1).tolist())
    return counts, labels


def compute_baselines(train_files, eval_files, max_seq_length, max_predictions_per_seq,
                      batch_size=1024):
    """Baselines of `eval_files` given the training records `train_files` (globs or lists).

    Returns {"unigram_mlm_accuracy", "nsp_majority_share", "most_frequent_token_id",
    "eval_masked_tokens", "eval_instances"}.
    """
    train_counts, _ = _masked_counts(train_files, max_seq_length, max_predictions_per_seq, batch_size)
    eval_counts, eval_labels = _masked_counts(eval_files, max_seq_length, max_predictions_per_seq,
                                              batch_size)
    if not train_counts or not eval_counts:
        raise ValueError("the records hold no masked positions")
    top = train_counts.most_common(1)[0][0]
    masked = sum(eval_counts.values())
    instances = sum(eval_labels.values())
    return {"unigram_mlm_accuracy": eval_counts[top] / masked,
            "nsp_majority_share": float(max(eval_labels.values()) / instances),
            "most_frequent_token_id": int(top), "eval_masked_tokens": int(masked),
            "eval_instances": int(instances)}


__all__ = ["compute_baselines"]
