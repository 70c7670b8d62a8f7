"""The one pair-truncation rule against the original loop, in NumPy and in a TensorFlow graph."""

import random

import numpy as np

from bert_keras.text.truncation import truncated_pair_lengths
from helpers.pretraining_reference import truncate_pair

LENGTHS = [(a, b) for a in range(0, 30) for b in range(0, 30)]


def _original(length_a, length_b, budget):
    a, b = list(range(length_a)), list(range(length_b))
    truncate_pair(a, b, budget, random.Random(0))  # the original's loop (random ends)
    return len(a), len(b)


def test_scalars_and_arrays_match_the_original_loop():
    for budget in range(0, 30):
        expected = [_original(a, b, budget) for a, b in LENGTHS]
        got_a, got_b = truncated_pair_lengths(np.array([a for a, _ in LENGTHS]),
                                              np.array([b for _, b in LENGTHS]), budget)
        assert list(zip(got_a.tolist(), got_b.tolist())) == expected, budget
        for (a, b), want in zip(LENGTHS[::37], expected[::37]):
            assert tuple(int(n) for n in truncated_pair_lengths(a, b, budget)) == want


def test_the_graph_form_is_the_same_rule():
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)] * 2 + [tf.TensorSpec([], tf.int32)])
    def in_graph(a, b, budget):
        return truncated_pair_lengths(a, b, budget, xp=tf)

    a = np.array([a for a, _ in LENGTHS], np.int32)
    b = np.array([b for _, b in LENGTHS], np.int32)
    for budget in (0, 1, 6, 7, 13, 40):
        got_a, got_b = in_graph(a, b, budget)
        want_a, want_b = truncated_pair_lengths(a, b, budget)
        np.testing.assert_array_equal(got_a.numpy(), want_a)
        np.testing.assert_array_equal(got_b.numpy(), want_b)
