"""The one masking rule: its count and shares, and its static (NumPy, written records) and
dynamic (TensorFlow, on the fly) forms checked against each other on the same sequences."""

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.data import instances, masking
from bert_keras.pretraining import dynamic_masking
from helpers.pretraining_data_fixtures import random_packed

SPECIAL = instances.SpecialTokenIds(pad_id=0, unknown_id=1, cls_id=2, sep_id=3, mask_id=4,
                                    vocab_size=1000)


def test_num_to_predict_rounds_like_python3_in_numpy_and_in_graph():
    lengths = np.arange(5, 513, dtype=np.float32)
    for prob in (0.15, 0.2, 0.1, 0.5):
        expected = [min(20, max(1, int(round(length * prob)))) for length in range(5, 513)]
        assert masking.num_to_predict(lengths.astype(np.float64), prob, 20).tolist() == expected
        in_graph = tf.function(lambda n: masking.num_to_predict(n, prob, 20,
                                                                xp=tf))
        assert in_graph(tf.constant(lengths)).numpy().astype(int).tolist() == expected


def _shares(original, masked, positions, weights):
    rows, slots = np.nonzero(weights)
    labels = original[rows, positions[rows, slots]]
    new = masked[rows, positions[rows, slots]]
    is_mask = new == SPECIAL.mask_id
    is_keep = ~is_mask & (new == labels)
    return np.array([is_mask.mean(), is_keep.mean(), (~is_mask & ~is_keep).mean()])


def test_static_and_dynamic_masking_are_the_same_rule():
    ids, lengths, length_a = random_packed(20000, 64, np.random.default_rng(0), SPECIAL)
    options = instances.InstanceOptions(max_seq_length=64, max_predictions_per_seq=8)
    static_ids, static_positions, _, static_weights, _ = instances.mask_instances(
        ids, lengths, length_a, options, SPECIAL, np.random.default_rng(1))
    input_mask = (np.arange(64)[None, :] < lengths[:, None]).astype(np.int32)
    dynamic = dynamic_masking.mask_tokens(
        {"input_ids": ids, "input_mask": input_mask}, (7, 8), 8, SPECIAL.vocab_size,
        SPECIAL.cls_id, SPECIAL.sep_id, SPECIAL.mask_id)
    dynamic = {name: np.asarray(value) for name, value in dynamic.items()}
    # The same number of predictions in every sequence (the count rule is deterministic) ...
    np.testing.assert_array_equal(static_weights.sum(axis=1), dynamic["masked_lm_weights"].sum(axis=1))
    # ... at candidate positions only ...
    candidates = instances.masking_candidates(ids, lengths, length_a)
    for positions, weights in ((static_positions, static_weights),
                               (dynamic["masked_lm_positions"], dynamic["masked_lm_weights"])):
        rows, slots = np.nonzero(weights)
        assert candidates[rows, positions[rows, slots]].all()
    # ... replaced in the same shares (about 110,000 predictions: sd of a share < 0.0013).
    static = _shares(ids, static_ids, static_positions, static_weights)
    dynamic_shares = _shares(ids, dynamic["input_ids"], dynamic["masked_lm_positions"],
                             dynamic["masked_lm_weights"])
    np.testing.assert_allclose(static, dynamic_shares, atol=0.01)
    np.testing.assert_allclose(dynamic_shares, [0.8, 0.1, 0.1], atol=0.006)
    # Positions are spread alike over the candidates: the mean relative position agrees.
    def mean_relative_position(positions, weights):
        rows, slots = np.nonzero(weights)
        return np.mean(positions[rows, slots] / lengths[rows])
    assert mean_relative_position(static_positions, static_weights) == pytest.approx(
        mean_relative_position(dynamic["masked_lm_positions"], dynamic["masked_lm_weights"]), abs=0.01)
