"""Packing wordpiece segments into the encoder's three inputs.

`[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, padded to `seq_length`; pairs are truncated
longest-first like the original `_truncate_seq_pair` (the longer segment loses its last
wordpiece, B on ties). The graph code is shared with the exported preprocessor and task models
(`bert_keras.export.preprocessor_export.pack_segments`), so all of them pack identically.

Example:

>>> import tensorflow as tf
>>> a = tf.ragged.constant([[7, 8, 9]])
>>> b = tf.ragged.constant([[5, 6]])
>>> special = {"start_of_sequence_id": 2, "end_of_segment_id": 3, "padding_id": 0}
>>> bert_pack_inputs([a, b], 7, special)["input_word_ids"].numpy().tolist()
[[2, 7, 8, 3, 5, 3, 0]]
"""


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
    from bert_keras.export.preprocessor_export import _flat_segment, pack_segments

    flat = [_flat_segment(segment) for segment in segments]
    return pack_segments(flat, seq_length, special_ids["start_of_sequence_id"],
                         special_ids["end_of_segment_id"], special_ids["padding_id"])
