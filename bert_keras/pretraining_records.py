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

`encode_examples` writes the protocol-buffer bytes of many examples at once with NumPy (the same
wire format as `tf.train.Example.SerializeToString`, which costs tens of microseconds per record);
`pretraining_dataset` reads them back in batches for training.

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
# Writing: protocol-buffer wire format, vectorized.
#
# Example  = field 1 (Features, length-delimited)
# Features = repeated field 1 (map entry: field 1 key string, field 2 Feature)
# Feature  = field 2 FloatList | field 3 Int64List; each list is field 1, packed.


def _varint_size(values):
    values = np.asarray(values)
    size = np.ones(values.shape, np.int8)
    top = int(values.max()) if values.size else 0
    for bits in (7, 14, 21, 28, 35, 42, 49, 56, 63):
        if top < 1 << bits:
            break
        size += values >= (1 << bits)
    return size.astype(np.int64)


def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _varint_stream(values):
    """Varint bytes of non-negative ints [n, k], row-major: (uint8 stream, bytes per row [n])."""
    values = np.asarray(values)
    n = values.shape[0]
    flat = values.reshape(-1)
    if not flat.size or flat.max() < 128:
        return flat.astype(np.uint8), np.full([n], values.size // max(n, 1), np.int64)
    if flat.max() >= 1 << 32:
        flat = flat.astype(np.uint64)
    else:
        flat = flat.astype(np.uint32)
    size = _varint_size(flat)
    groups = int(size.max())
    # Byte j of every value as a column; the used bytes of row-major [values, groups] are the
    # stream.
    columns = [((flat >> (7 * j)) & 0x7F) | ((size > j + 1) << 7).astype(flat.dtype)
               for j in range(groups)]
    data = np.stack(columns, axis=1).astype(np.uint8)
    used = size[:, None] > np.arange(groups)[None, :]
    return data[used], size.reshape(n, -1).sum(axis=1)


def _per_length_stream(lengths, make):
    """Row i gets the bytes `make(lengths[i])`, computed once per distinct length."""
    distinct, inverse = np.unique(lengths, return_inverse=True)
    made = [np.frombuffer(make(int(length)), np.uint8) for length in distinct]
    inverse = inverse.reshape(-1)
    if len(made) == 1:
        return np.tile(made[0], len(lengths)), np.full([len(lengths)], len(made[0]), np.int64)
    width = max(len(m) for m in made)
    table = np.zeros((len(made), width), np.uint8)
    sizes = np.array([len(m) for m in made], np.int64)
    for i, m in enumerate(made):
        table[i, :len(m)] = m
    used = np.arange(width)[None, :] < sizes[inverse][:, None]
    return table[inverse][used], sizes[inverse]


def _interleave_rows(parts, n):
    """Concatenates, row by row, the rows of several parts.

    Args:
      parts: list of (stream uint8, bytes per row [n]); each stream holds its rows one after
        the other.

    Returns:
      (buffer bytes, offsets int64 [n + 1]) with row i = part 0's row i + part 1's row i + ...
    """
    streams = [stream for stream, _ in parts]
    lengths = np.stack([row_lengths for _, row_lengths in parts], axis=1)  # [n, parts]
    source = np.concatenate(streams)
    # Where each (part, row) block starts in `source`, and in the output.
    part_sizes = np.array([len(stream) for stream in streams], np.int64)
    part_starts = np.cumsum(part_sizes) - part_sizes
    source_start = part_starts[None, :] + (np.cumsum(lengths, axis=0) - lengths)  # [n, parts]
    output_start = (np.cumsum(lengths.reshape(-1)) - lengths.reshape(-1))
    shift = np.repeat(source_start.reshape(-1) - output_start, lengths.reshape(-1))
    out = source[np.arange(len(source), dtype=np.int64) + shift]
    offsets = np.zeros([n + 1], np.int64)
    np.cumsum(lengths.sum(axis=1), out=offsets[1:])
    return out.tobytes(), offsets


def _feature_entry_prefix(name, float_list, payload_length):
    """Bytes of a Features map entry before its packed payload of `payload_length` bytes."""
    key = name.encode()
    packed = b"\x0a" + _varint(payload_length)  # list field 1, packed
    list_length = len(packed) + payload_length
    feature = (b"\x12" if float_list else b"\x1a") + _varint(list_length)
    feature_length = len(feature) + list_length
    entry = b"\x0a" + _varint(len(key)) + key + b"\x12" + _varint(feature_length)
    entry_length = len(entry) + feature_length
    return b"\x0a" + _varint(entry_length) + entry + feature + packed


def encode_examples(features):
    """Serialized `tf.train.Example`s of many records.

    Args:
      features: {name: array [n, k]}: integer arrays (non-negative) become Int64Lists, float
        arrays FloatLists. Features are written in the given order.

    Returns:
      (buffer: bytes, offsets: int64 [n + 1]); record i is buffer[offsets[i]:offsets[i + 1]].
    """
    arrays = {name: np.asarray(values) for name, values in features.items()}
    n = len(next(iter(arrays.values())))
    parts = []
    for name, values in arrays.items():
        values = values.reshape(n, -1)
        is_float = np.issubdtype(values.dtype, np.floating)
        if is_float:
            stream = np.ascontiguousarray(values.astype("<f4")).view(np.uint8).reshape(-1)
            lengths = np.full([n], 4 * values.shape[1], np.int64)
        else:
            if values.size and values.min() < 0:
                raise ValueError(f"{name}: negative values are not supported by this encoder")
            stream, lengths = _varint_stream(values)
        parts.append(_per_length_stream(
            lengths, lambda p, name=name, is_float=is_float: _feature_entry_prefix(
                name, is_float, p)))
        parts.append((stream, lengths))
    body_lengths = np.sum([lengths for _, lengths in parts], axis=0)
    # Example: field 1 (Features), length-delimited.
    head = _per_length_stream(body_lengths, lambda length: b"\x0a" + _varint(length))
    return _interleave_rows([head] + parts, n)


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


# ---------------------------------------------------------------------------------------------
# TFRecord framing without TensorFlow: each record is
#   uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
# (little-endian). Computing it here lets worker processes write final records without
# importing TensorFlow.


def _crc32c_tables():
    """Slicing-by-4 tables of CRC-32C (reflected polynomial 0x82F63B78)."""
    tables = np.zeros([4, 256], np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        tables[0, byte] = crc
    for k in range(1, 4):
        tables[k] = (tables[k - 1] >> 8) ^ tables[0][tables[k - 1] & 0xFF]
    return tables


_CRC32C_TABLES = _crc32c_tables()


def crc32c_rows(data, lengths):
    """CRC-32C (Castagnoli) of many byte strings at once, four bytes per step.

    Args:
      data: uint8 [n, width], row i's bytes first, anything after `lengths[i]`.
      lengths: int [n].

    Returns:
      uint32 [n].
    """
    t0, t1, t2, t3 = _CRC32C_TABLES
    lengths = np.asarray(lengths, np.int64)
    n = len(lengths)
    if n == 0:
        return np.zeros([0], np.uint32)
    # Longest first, so that the rows still running at any step are a prefix.
    order = np.argsort(-lengths, kind="stable")
    sorted_lengths = lengths[order]
    width = -(-int(data.shape[1]) // 4) * 4
    padded = np.zeros((n, width), np.uint8)
    padded[:, :data.shape[1]] = data[order]
    words = np.ascontiguousarray(padded.view("<u4").T)  # [steps, n]: each step is contiguous
    crc = np.full([n], 0xFFFFFFFF, np.uint32)
    full_words = sorted_lengths // 4
    active = n
    low = np.empty([n], np.uint32)
    for step in range(int(full_words[0])):
        while full_words[active - 1] <= step:
            active -= 1
        x = crc[:active]
        np.bitwise_xor(x, words[step, :active], out=x)
        b = low[:active]
        np.bitwise_and(x, 0xFF, out=b)
        out = t3[b]
        np.right_shift(x, 8, out=b)
        np.bitwise_and(b, 0xFF, out=b)
        out ^= t2[b]
        np.right_shift(x, 16, out=b)
        np.bitwise_and(b, 0xFF, out=b)
        out ^= t1[b]
        np.right_shift(x, 24, out=b)
        out ^= t0[b]
        crc[:active] = out
    rows = np.arange(n)
    for extra in range(3):
        tail = sorted_lengths % 4 > extra
        if not tail.any():
            break
        byte = padded[rows[tail], full_words[tail] * 4 + extra]
        part = crc[tail]
        crc[tail] = t0[(part ^ byte) & 0xFF] ^ (part >> 8)
    out = np.empty_like(crc)
    out[order] = crc ^ np.uint32(0xFFFFFFFF)
    return out


def masked_crc32c(crc):
    """The TFRecord masking of a CRC: rotate right by 15 bits, add 0xa282ead8."""
    crc = np.asarray(crc, np.uint32).astype(np.uint64)
    rotated = ((crc >> np.uint64(15)) | (crc << np.uint64(17))) & np.uint64(0xFFFFFFFF)
    return ((rotated + np.uint64(0xA282EAD8)) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def frame_records(buffer, offsets):
    """TFRecord framing of records `buffer[offsets[i]:offsets[i + 1]]`.

    Returns:
      (framed bytes, framed offsets int64 [n + 1]): concatenating any of the framed records
      in any order gives a valid TFRecord file.
    """
    source = np.frombuffer(buffer, np.uint8)
    lengths = np.diff(offsets).astype(np.int64)
    n = len(lengths)
    if n == 0:
        return b"", np.zeros([1], np.int64)
    width = int(lengths.max())
    rows = np.zeros((n, width), np.uint8)
    used = np.arange(width)[None, :] < lengths[:, None]
    rows[used] = source[offsets[0]:offsets[-1]]
    length_bytes = lengths.astype("<u8").view(np.uint8).reshape(n, 8)
    length_crc = masked_crc32c(crc32c_rows(length_bytes, np.full([n], 8)))
    data_crc = masked_crc32c(crc32c_rows(rows, lengths))
    framed = np.zeros((n, width + 16), np.uint8)
    framed[:, :8] = length_bytes
    framed[:, 8:12] = length_crc.astype("<u4").view(np.uint8).reshape(n, 4)
    framed[:, 12:12 + width] = rows
    # The data CRC goes right after each row's data.
    crc_bytes = data_crc.astype("<u4").view(np.uint8).reshape(n, 4)
    columns = 12 + lengths[:, None] + np.arange(4)[None, :]
    framed[np.arange(n)[:, None], columns] = crc_bytes
    framed_lengths = lengths + 16
    keep = np.arange(width + 16)[None, :] < framed_lengths[:, None]
    framed_offsets = np.zeros([n + 1], np.int64)
    np.cumsum(framed_lengths, out=framed_offsets[1:])
    return framed[keep].tobytes(), framed_offsets
