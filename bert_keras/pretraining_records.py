"""Pre-training TFRecords in the original BERT format: writing them fast and reading them with tf.data.

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

`instance_features` gives these features of an `InstanceBatch`; `bert_keras.example_encoding`
serializes and frames many of them at once with NumPy (`encode_examples`,
`encode_framed_examples`, re-exported here); `pretraining_dataset` reads them back in batches
for training.

Example:

>>> import numpy as np, os, tempfile  # doctest: +SKIP
>>> path = os.path.join(tempfile.mkdtemp(), "part-0.tfrecord")  # doctest: +SKIP
>>> write_tfrecords(path, encode_instance_batch(batch))  # doctest: +SKIP
>>> dataset = pretraining_dataset(path, batch_size=32, max_seq_length=128,
...                               max_predictions_per_seq=20)  # doctest: +SKIP
>>> next(iter(dataset))["input_ids"].shape  # doctest: +SKIP
TensorShape([32, 128])
"""

import glob
import os

import numpy as np

from bert_keras.example_encoding import (crc32c_rows, encode_examples,  # noqa: F401
                                        encode_framed_examples, frame_records)

SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")
PREDICTION_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
FEATURE_NAMES = SEQUENCE_FEATURES + PREDICTION_FEATURES + ("next_sentence_labels",)
FLOAT_FEATURES = ("masked_lm_weights",)


class RecordsError(ValueError):
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


# ---------------------------------------------------------------------------------------------
# Writing (the encoder itself is `bert_keras.example_encoding`).


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


def encode_instance_batch(batch):
    """List of serialized examples, one per instance of an `InstanceBatch`."""
    buffer, offsets = encode_examples(instance_features(batch))
    return split_records(buffer, offsets)


def split_records(buffer, offsets):
    view = memoryview(buffer)
    bounds = offsets.tolist()
    return [bytes(view[bounds[i]:bounds[i + 1]]) for i in range(len(bounds) - 1)]


def write_tfrecords(path, records):
    """Writes serialized records to a TFRecord file at `path` (not atomic; see the pipeline)."""
    import tensorflow as tf
    with tf.io.TFRecordWriter(os.fspath(path)) as writer:
        for record in records:
            writer.write(record)


def decode_example(record):
    """{name: numpy array} of one serialized example (for tests and inspection)."""
    import tensorflow as tf
    example = tf.train.Example.FromString(record)
    out = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        values = getattr(feature, kind).value
        out[name] = np.array(values, np.float32 if kind == "float_list" else np.int64)
    return out


# ---------------------------------------------------------------------------------------------
# Reading.


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


def _file_records(filename, size, chunk=256):
    """Records of one file, then a check that they covered the whole file.

    A TFRecord reader reports a corrupted or truncated record without naming the file; here the
    reader's errors end the file's records, and the bytes read (each record takes its length
    plus 16 bytes of framing) are compared with the file size, with the name in the message.
    Records go through the check in chunks, which keeps its cost per record small.

    Returns a dataset of (records [n], filenames [n]) chunks.
    """
    import tensorflow as tf
    chunks = tf.data.TFRecordDataset(filename).ignore_errors().batch(chunk)
    chunks = chunks.map(lambda records: (records, tf.constant(False)))
    end = tf.data.Dataset.from_tensors((tf.zeros([0], tf.string), tf.constant(True)))

    def count(consumed, element):
        records, is_end = element
        consumed += tf.reduce_sum(tf.cast(tf.strings.length(records), tf.int64) + 16)
        return consumed, (records, is_end, consumed)

    def check(records, is_end, consumed):
        ok = tf.logical_or(tf.logical_not(is_end), tf.equal(consumed, size))
        assertion = tf.debugging.Assert(ok, [
            "corrupted or truncated pre-training record file:", filename, "size", size,
            "bytes, readable records end at byte", consumed], summarize=1)
        with tf.control_dependencies([assertion]):
            records = tf.identity(records)
        return records, tf.fill(tf.shape(records), filename)

    return chunks.concatenate(end).scan(tf.constant(0, tf.int64), count).map(check)


def _parse_and_check(records, filenames, max_seq_length, max_predictions_per_seq):
    """Parses a batch of records; names the file of any record whose lengths differ from flags."""
    import tensorflow as tf
    lengths = feature_lengths(max_seq_length, max_predictions_per_seq)
    spec = {name: tf.io.RaggedFeature(tf.float32 if name in FLOAT_FEATURES else tf.int64)
            for name in FEATURE_NAMES}
    parsed = tf.io.parse_example(records, spec)
    out = {}
    for name in FEATURE_NAMES:
        ragged = parsed[name]
        row_lengths = ragged.row_lengths()
        bad = tf.not_equal(row_lengths, lengths[name])
        first_bad = tf.argmax(tf.cast(bad, tf.int32))
        assertion = tf.debugging.Assert(tf.logical_not(tf.reduce_any(bad)), [
            "pre-training record in", tf.gather(filenames, first_bad), "has", name, "of length",
            tf.gather(row_lengths, first_bad), "but the flags say", lengths[name],
            "(max_seq_length=%d, max_predictions_per_seq=%d)" % (
                max_seq_length, max_predictions_per_seq)], summarize=1)
        with tf.control_dependencies([assertion]):
            dense = ragged.to_tensor(shape=[None, lengths[name]])
        if dense.dtype == tf.int64:
            # TPUs want int32; ids and positions fit.
            dense = tf.cast(dense, tf.int32)
        out[name] = dense
    out["next_sentence_labels"] = tf.reshape(out["next_sentence_labels"], [-1])
    return out


def pretraining_dataset(file_pattern, batch_size, max_seq_length, max_predictions_per_seq,
                        shuffle=True, drop_remainder=True, repeat=False, seed=None,
                        shuffle_buffer_size=10000, cycle_length=None, input_context=None,
                        check_files=True):
    """A `tf.data.Dataset` of batches of pre-training features.

    Args:
      file_pattern: glob, comma-separated globs or a list, of TFRecord files written by
        `tools/create_pretraining_data.py` or by the original tool.
      batch_size: records per batch (per replica when `input_context` is given, as its
        `get_per_replica_batch_size` says).
      max_seq_length, max_predictions_per_seq: what the records were made with; a record that
        differs fails with an error naming its file.
      shuffle: shuffle the files, interleave them in a non-deterministic order and shuffle records
        in a buffer of `shuffle_buffer_size`.
      drop_remainder: drop the last partial batch (static shapes, for TPUs).
      repeat: repeat forever (files are reshuffled each epoch).
      seed: seed for the file order and record shuffles.
      cycle_length: files read at once (default: min(number of files, 16)).
      input_context: a `tf.distribute.InputContext`; files are then split between input pipelines.
      check_files: end each file with a check that all its bytes were read, so that a corrupted
        or truncated file fails with its name.

    Returns:
      Dataset of dicts: `input_ids`, `input_mask`, `segment_ids` int32 [batch, max_seq_length];
      `masked_lm_positions`, `masked_lm_ids` int32 and `masked_lm_weights` float32
      [batch, max_predictions_per_seq]; `next_sentence_labels` int32 [batch].
    """
    import tensorflow as tf
    files = expand_file_pattern(file_pattern)
    sizes = [tf.io.gfile.stat(f).length for f in files]
    dataset = tf.data.Dataset.from_tensor_slices((files, tf.constant(sizes, tf.int64)))
    if input_context is not None and input_context.num_input_pipelines > 1:
        if len(files) < input_context.num_input_pipelines:
            raise RecordsError(
                f"{len(files)} record files for {input_context.num_input_pipelines} input "
                "pipelines; write at least one shard per pipeline (--num_output_shards)")
        dataset = dataset.shard(input_context.num_input_pipelines,
                                input_context.input_pipeline_id)
    if shuffle:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    if check_files:
        read = lambda filename, size: _file_records(filename, size)
    else:
        read = lambda filename, size: tf.data.TFRecordDataset(filename).batch(256).map(
            lambda records: (records, tf.fill(tf.shape(records), filename)))
    dataset = dataset.interleave(
        read, cycle_length=cycle_length or min(len(files), 16),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=not shuffle).unbatch()
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    dataset = dataset.map(
        lambda records, filenames: _parse_and_check(records, filenames, max_seq_length,
                                                    max_predictions_per_seq),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=not shuffle)
    return dataset.prefetch(tf.data.AUTOTUNE)


def model_inputs_and_labels(features):
    """Splits a batch into the pre-training model's inputs and its labels.

    Inputs use the encoder's TF Hub names (`input_word_ids`, `input_mask`, `input_type_ids`) plus
    `masked_lm_positions`; labels are `masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`.
    """
    inputs = {
        "input_word_ids": features["input_ids"],
        "input_mask": features["input_mask"],
        "input_type_ids": features["segment_ids"],
        "masked_lm_positions": features["masked_lm_positions"],
    }
    labels = {name: features[name] for name in
              ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")}
    return inputs, labels
