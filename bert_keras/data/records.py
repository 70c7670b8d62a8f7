"""The pre-training record format: the original BERT `tf.train.Example` features.

Every record is a `tf.train.Example` with the features of google-research/bert's
`create_pretraining_data.py`, read by its `run_pretraining.py`:

| feature                | dtype   | length                  |
|------------------------|---------|-------------------------|
| `input_ids`            | int64   | max_seq_length          |
| `input_mask`           | int64   | max_seq_length          |
| `segment_ids`          | int64   | max_seq_length          |
| `masked_lm_positions`  | int64   | max_predictions_per_seq |
| `masked_lm_ids`        | int64   | max_predictions_per_seq |
| `masked_lm_weights`    | float32 | max_predictions_per_seq |
| `next_sentence_labels` | int64   | 1 (1 = B is a random next) |

`instance_features` gives these features of an `InstanceBatch`; `bert_keras.data.example_encoding`
serializes and frames many of them at once with NumPy; the one reader of them is
`bert_keras.pretraining.inputs` (`make_dataset_fn` for training, `read_records` to inspect).

Example:

>>> feature_lengths(max_seq_length=128, max_predictions_per_seq=20)["masked_lm_ids"]
20
"""

import glob
import os

import numpy as np

from bert_keras.common.errors import BertKerasError

SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")
PREDICTION_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
FEATURE_NAMES = SEQUENCE_FEATURES + PREDICTION_FEATURES + ("next_sentence_labels",)
FLOAT_FEATURES = ("masked_lm_weights",)


class RecordsError(BertKerasError):
    """Pre-training records are missing, unreadable, or do not match the flags."""


def feature_lengths(max_seq_length, max_predictions_per_seq):
    """{feature name: values per record}."""
    lengths = {name: max_seq_length for name in SEQUENCE_FEATURES}
    lengths.update({name: max_predictions_per_seq for name in PREDICTION_FEATURES})
    lengths["next_sentence_labels"] = 1
    return lengths


def feature_spec(max_seq_length, max_predictions_per_seq):
    """The `tf.io.parse_example` spec of the original `run_pretraining.py`."""
    import tensorflow as tf
    return {name: tf.io.FixedLenFeature([length], tf.float32 if name in FLOAT_FEATURES
                                        else tf.int64)
            for name, length in feature_lengths(max_seq_length, max_predictions_per_seq).items()}


def instance_features(batch):
    """{feature name: array} of an `InstanceBatch`, in the original tool's order and dtypes."""
    return {
        "input_ids": batch.input_ids,
        "input_mask": batch.input_mask,
        "segment_ids": batch.segment_ids,
        "masked_lm_positions": batch.masked_lm_positions,
        "masked_lm_ids": batch.masked_lm_ids,
        "masked_lm_weights": batch.masked_lm_weights.astype(np.float32),
        "next_sentence_labels": batch.next_sentence_labels.reshape(-1, 1),
    }


def expand_file_pattern(file_pattern):
    """Sorted files matching a glob, a comma-separated list of globs, or a list of them."""
    import tensorflow as tf
    patterns = file_pattern.split(",") if isinstance(file_pattern, str) else list(file_pattern)
    files = []
    for pattern in patterns:
        pattern = os.fspath(pattern).strip()
        if not pattern:
            continue
        matched = tf.io.gfile.glob(pattern) if glob.has_magic(pattern) else (
            [pattern] if tf.io.gfile.exists(pattern) else [])
        files.extend(sorted(matched))
    if not files:
        raise RecordsError(f"no pre-training record files match {file_pattern!r}")
    return files


