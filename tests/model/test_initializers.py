"""The weight initializer: standard deviation `initializer_range`, tails cut at two deviations."""

import numpy as np

from bert_keras.model.config import BertConfig
from bert_keras.model.layers.initializers import TRUNCATED_STD_FACTOR, weight_initializer
from bert_keras.model.pretraining_model import build_pretraining_model, pretraining_weight_map


def test_the_factor_is_the_std_of_a_unit_normal_cut_at_two():
    rng = np.random.default_rng(0)
    draws = rng.standard_normal(4_000_000)
    assert abs(np.std(draws[np.abs(draws) <= 2]) - TRUNCATED_STD_FACTOR) < 1e-3


def test_weights_have_the_configured_standard_deviation():
    values = np.asarray(weight_initializer(0.05, seed=3)((512, 512)))
    assert abs(values.std() - 0.05) < 0.001
    assert np.abs(values).max() <= 2 * 0.05 / TRUNCATED_STD_FACTOR + 1e-7
    model = build_pretraining_model(BertConfig.from_preset("mini", vocab_size=4000))
    weights = pretraining_weight_map(model)
    for name in ("bert/embeddings/word_embeddings", "bert/encoder/layer_0/attention/self/query/kernel",
                 "bert/encoder/layer_3/intermediate/dense/kernel", "bert/pooler/dense/kernel",
                 "cls/predictions/transform/dense/kernel"):
        assert abs(weights[name].numpy().std() - 0.02) < 0.0005, name
