"""Packing wordpiece segments into the encoder's three inputs.

`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, padded to `seq_length`; pairs are truncated
longest-first like the original `_truncate_seq_pair` (the longer segment loses its last
wordpiece, B on ties). The same graph functions run inside the exported preprocessor and task
models (`bert_keras.export`), so all of them pack identically.

Example:

>>> import tensorflow as tf
>>> a = tf.ragged.constant([[7, 8, 9]])
>>> b = tf.ragged.constant([[5, 6]])
>>> special = {"start_of_sequence_id": 2, "end_of_segment_id": 3, "padding_id": 0}
>>> bert_pack_inputs([a, b], 7, special)["input_word_ids"].numpy().tolist()  # A loses 9
[[2, 7, 8, 3, 5, 6, 3]]
"""

import tensorflow as tf

from bert_keras.text.truncation import truncated_pair_lengths


def bert_pack_inputs(segments, seq_length, special_ids):
    """Packs one or two segments.

    Args:
      segments: a list of 1 or 2 int RaggedTensors, [batch, (wordpieces)] or
        [batch, (words), (wordpieces)].
      seq_length: the packed length (a Python int or a scalar int32 tensor).
      special_ids: a dict with `start_of_sequence_id`, `end_of_segment_id` and `padding_id`
        (as `Vocabulary.special_ids()` gives).
    Returns:
      dict of `input_word_ids`, `input_mask`, `input_type_ids`: int32 [batch, seq_length].
    """
    flat = [flat_segment(segment) for segment in segments]
    return pack_segments(flat, seq_length, special_ids["start_of_sequence_id"],
                         special_ids["end_of_segment_id"], special_ids["padding_id"])


def rows_and_positions(ragged):
    """(the row of each value, its position within that row), both int64 [n], of a ragged
    [batch, (n)]. One `searchsorted` finds the rows: `ragged.value_rowids()` would build a
    `tf.repeat` of dozens of ops into every exported graph.

    >>> rows, positions = rows_and_positions(tf.ragged.constant([[7, 8], [], [9]]))
    >>> rows.numpy().tolist(), positions.numpy().tolist()
    ([0, 0, 2], [0, 1, 0])
    """
    splits = tf.cast(ragged.row_splits, tf.int64)
    values = tf.range(splits[-1])
    rows = tf.searchsorted(splits[1:], values, side="right", out_type=tf.int64)
    return rows, values - tf.gather(splits, rows)


def first_n(ragged, lengths):
    """Keeps the first `lengths[i]` values of row i of a ragged [batch, (n)].

    Computed on the flat values (a ragged comparison against a [batch, 1] tensor would build
    a broadcast with dozens of shape checks into every exported graph).
    """
    rows, position = rows_and_positions(ragged)  # [n] each
    keep = tf.where(position < tf.gather(tf.cast(tf.maximum(lengths, 0), tf.int64), rows))[:, 0]
    return tf.RaggedTensor.from_value_rowids(
        tf.gather(ragged.values, keep), tf.gather(rows, keep),
        nrows=ragged.nrows(out_type=tf.int64), validate=False)


def _column(value, rows):
    return tf.RaggedTensor.from_tensor(tf.fill([rows, 1], tf.cast(value, tf.int32)))


def dense_inputs(parts, seq_length, pad_id):
    """The three int32 [rows, seq_length] inputs from (ragged ids [rows, (n)], type id) parts.

    The parts are concatenated in order; `seq_length` may be a Python int (static shape) or
    a scalar tensor. The rows must already fit. Each part's values are scattered straight to
    their places (a ragged concatenation and padding would put dozens of shape checks into
    every exported graph).
    """
    rows = parts[0][0].nrows(out_type=tf.int32)
    shape = tf.stack([rows, tf.cast(seq_length, tf.int32)])
    offset = tf.zeros([rows], tf.int32)  # where each row's next part starts
    indices, word_ids, type_ids = [], [], []
    for part, type_id in parts:
        row, position = (tf.cast(t, tf.int32) for t in rows_and_positions(part))  # [n] each
        indices.append(tf.stack([row, tf.gather(offset, row) + position], axis=1))
        word_ids.append(tf.cast(part.values, tf.int32))
        type_ids.append(tf.fill(tf.shape(row), tf.cast(type_id, tf.int32)))
        offset += tf.cast(part.row_lengths(), tf.int32)
    indices = tf.concat(indices, axis=0)  # [all values, 2]
    word_ids, type_ids = tf.concat(word_ids, axis=0), tf.concat(type_ids, axis=0)

    def scatter(values):
        dense = tf.scatter_nd(indices, values, shape)
        if isinstance(seq_length, int):
            dense.set_shape([None, seq_length])
        return dense

    return {"input_word_ids": scatter(word_ids - pad_id) + pad_id,
            "input_mask": scatter(tf.ones_like(word_ids)),
            "input_type_ids": scatter(type_ids)}


def pack_segments(segments, seq_length, cls_id, sep_id, pad_id):
    """`[CLS] A [SEP] (B [SEP])` from one or two int ragged [batch, (n)] (see the module doc).

    Returns the dict of the three int32 [batch, seq_length] encoder inputs.
    """
    rows = tf.shape(segments[0].row_lengths())[0]
    if len(segments) == 1:
        a = first_n(segments[0], tf.fill([rows], tf.maximum(seq_length - 2, 0)))
        parts = [(_column(cls_id, rows), 0), (a, 0), (_column(sep_id, rows), 0)]
    elif len(segments) == 2:
        length_a, length_b = truncated_pair_lengths(
            tf.cast(segments[0].row_lengths(), tf.int32),
            tf.cast(segments[1].row_lengths(), tf.int32), tf.maximum(seq_length - 3, 0),
            xp=tf)
        a, b = first_n(segments[0], length_a), first_n(segments[1], length_b)
        parts = [(_column(cls_id, rows), 0), (a, 0), (_column(sep_id, rows), 0), (b, 1),
                 (_column(sep_id, rows), 1)]
    else:
        raise ValueError(f"bert_pack_inputs takes one or two segments, got {len(segments)}")
    return dense_inputs(parts, seq_length, pad_id)


def flat_segment(segment):
    """int32 ragged [batch, (wordpieces)] from [batch, (words), (wordpieces)] or itself."""
    if not isinstance(segment, tf.RaggedTensor):
        segment = tf.RaggedTensor.from_tensor(segment)
    if segment.ragged_rank == 2:
        segment = segment.merge_dims(1, 2)
    return tf.cast(segment, tf.int32)
