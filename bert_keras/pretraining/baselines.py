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
    "eval_masked_tokens", "eval_instances"}. Masked positions of weight 0 (the padding of
    records with fewer predictions) are not counted.

    Example (records of 4 tokens and 2 predictions, written by hand; the suite runs it): the
    training records mask token 7 twice and 9 once, so 7 is the constant guess; the held-out
    ones mask 7, 9 and 7 (the fourth slot has weight 0), and both say "is the next" (0).

    >>> import os, tempfile, tensorflow as tf
    >>> def record(masked_lm_ids, masked_lm_weights, next_sentence_label):
    ...     ints = lambda values: tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    ...     features = {"input_ids": ints([2, 4, 4, 3]), "input_mask": ints([1, 1, 1, 1]),
    ...                 "segment_ids": ints([0, 0, 0, 0]), "masked_lm_positions": ints([1, 2]),
    ...                 "masked_lm_ids": ints(masked_lm_ids),
    ...                 "masked_lm_weights": tf.train.Feature(
    ...                     float_list=tf.train.FloatList(value=masked_lm_weights)),
    ...                 "next_sentence_labels": ints([next_sentence_label])}
    ...     example = tf.train.Example(features=tf.train.Features(feature=features))
    ...     return example.SerializeToString()
    >>> root = tempfile.mkdtemp()
    >>> for name, records in [("train", [record([7, 7], [1, 1], 0), record([9, 0], [1, 0], 1)]),
    ...                       ("heldout", [record([7, 9], [1, 1], 0), record([7, 0], [1, 0], 0)])]:
    ...     with tf.io.TFRecordWriter(os.path.join(root, f"{name}.tfrecord")) as writer:
    ...         for serialized in records:
    ...             writer.write(serialized)
    >>> compute_baselines(f"{root}/train.tfrecord", f"{root}/heldout.tfrecord",
    ...                   max_seq_length=4, max_predictions_per_seq=2)
    {'unigram_mlm_accuracy': 0.666..., 'nsp_majority_share': 1.0, 'most_frequent_token_id': 7,
     'eval_masked_tokens': 3, 'eval_instances': 2}
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
