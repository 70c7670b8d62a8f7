"""Packing against the original truncation loop, worked case by case in plain Python."""

import numpy as np
import tensorflow as tf

from bert_keras.text.packing import bert_pack_inputs

SPECIAL = {"start_of_sequence_id": 2, "end_of_segment_id": 3, "padding_id": 0}


def _original_pack(a, b, seq_length):
    """The original: pop from the longer list (B on ties) until the pair fits, then lay out."""
    a, b = list(a), list(b) if b is not None else None
    if b is None:
        a = a[:seq_length - 2]
        ids = [2] + a + [3]
        types = [0] * len(ids)
    else:
        while len(a) + len(b) > seq_length - 3:
            if len(a) > len(b):
                a.pop()
            else:
                b.pop()
        ids = [2] + a + [3] + b + [3]
        types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    padding = seq_length - len(ids)
    return ids + [0] * padding, [1] * len(ids) + [0] * padding, types + [0] * padding


def test_hand_worked_pair():
    a = tf.ragged.constant([[10, 11, 12, 13, 14]])
    b = tf.ragged.constant([[20, 21, 22, 23, 24]])
    packed = bert_pack_inputs([a, b], 9, SPECIAL)
    # 6 wordpieces fit: the loop pops B, A, B, A -> A keeps 3, B keeps 3.
    assert packed["input_word_ids"].numpy().tolist() == [[2, 10, 11, 12, 3, 20, 21, 22, 3]]
    assert packed["input_type_ids"].numpy().tolist() == [[0, 0, 0, 0, 0, 1, 1, 1, 1]]
    assert packed["input_mask"].numpy().tolist() == [[1] * 9]


def test_random_pairs_and_singles_match_the_original_loop():
    rng = np.random.default_rng(0)
    for seq_length in (5, 8, 13, 32):
        rows_a = [list(rng.integers(10, 99, rng.integers(0, 30))) for _ in range(40)]
        rows_b = [list(rng.integers(10, 99, rng.integers(0, 30))) for _ in range(40)]
        pairs = bert_pack_inputs([tf.ragged.constant(rows_a, dtype=tf.int32),
                                  tf.ragged.constant(rows_b, dtype=tf.int32)], seq_length, SPECIAL)
        singles = bert_pack_inputs([tf.ragged.constant(rows_a, dtype=tf.int32)], seq_length, SPECIAL)
        for row, (a, b) in enumerate(zip(rows_a, rows_b)):
            for packed, expected in ((pairs, _original_pack(a, b, seq_length)),
                                     (singles, _original_pack(a, None, seq_length))):
                got = [packed[name].numpy()[row].tolist()
                       for name in ("input_word_ids", "input_mask", "input_type_ids")]
                assert got == [list(map(int, x)) for x in expected], (seq_length, a, b)


def test_word_level_segments_are_flattened():
    words = tf.ragged.constant([[[10, 11], [12]], [[13]]], dtype=tf.int32)
    packed = bert_pack_inputs([words], 6, SPECIAL)
    assert packed["input_word_ids"].numpy().tolist() == [[2, 10, 11, 12, 3, 0], [2, 13, 3, 0, 0, 0]]
