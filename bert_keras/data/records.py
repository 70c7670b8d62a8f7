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
import re

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
    check_complete_run(files)
    return files


_SHARD = re.compile(r"^(?P<prefix>.*)shard-(?P<index>\d{5})-of-(?P<total>\d{5})\.tfrecord$")


def check_complete_run(files):
    """Refuses shards of a `create_pretraining_data` run that did not finish: a folder holding
    the run's `manifest.json` but not its `stats.json` (written last), or shards missing from
    the folder (`shard-00003-of-00008` present, another of the 8 absent). Files named otherwise
    are not checked. Raises `RecordsError` naming the folder."""
    import tensorflow as tf

    runs = {}
    for path in files:
        match = _SHARD.match(os.path.basename(path))
        if match:
            key = (os.path.dirname(path), match["prefix"], int(match["total"]))
            runs.setdefault(key, set()).add(int(match["index"]))
    for (folder, prefix, total), indices in sorted(runs.items()):
        manifest = os.path.join(folder, f"{prefix}manifest.json")
        if tf.io.gfile.exists(manifest) and not tf.io.gfile.exists(
                os.path.join(folder, f"{prefix}stats.json")):
            raise RecordsError(
                f"{folder}: the data run that wrote these shards did not finish ({prefix}manifest"
                f".json but no {prefix}stats.json); rerun create_pretraining_data with the same "
                "flags to complete it instead of training on part of the data")
        present = set(indices)
        for name in tf.io.gfile.listdir(folder) if tf.io.gfile.isdir(folder) else ():
            match = _SHARD.match(name)
            if match and match["prefix"] == prefix and int(match["total"]) == total:
                present.add(int(match["index"]))
        missing = sorted(set(range(total)) - present)
        if missing:
            raise RecordsError(
                f"{folder}: {len(missing)} of the {total} shards of {prefix or 'this'} run are "
                f"missing (e.g. {prefix}shard-{missing[0]:05d}-of-{total:05d}.tfrecord); "
                "training on the rest would use part of the data without saying so")


