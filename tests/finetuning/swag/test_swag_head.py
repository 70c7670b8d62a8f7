"""The swag family's head against its definition written out in NumPy."""

import numpy as np

from bert_keras.finetuning.swag.head import MultipleChoiceHead

RNG = np.random.default_rng(0)


def test_multiple_choice_head_scores_each_choice():
    head = MultipleChoiceHead()
    pooled = RNG.standard_normal((3, 4, 8)).astype("float32")
    logits = np.asarray(head(pooled, training=False))
    assert logits.shape == (3, 4)
    expected = pooled @ np.asarray(head.dense.kernel)[:, 0] + np.asarray(head.dense.bias)[0]
    np.testing.assert_allclose(logits, expected, rtol=1e-5, atol=1e-6)


def test_the_head_round_trips_through_get_config():
    for layer in [MultipleChoiceHead(dropout_rate=0.3)]:
        config = layer.get_config()
        assert type(layer).from_config(config).get_config() == config
