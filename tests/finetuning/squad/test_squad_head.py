"""The squad family's head against its definition written out in NumPy."""

import keras
import numpy as np

from bert_keras.finetuning.squad.head import SpanHead

RNG = np.random.default_rng(0)


def _dense(x, layer):
    return x @ np.asarray(layer.kernel) + np.asarray(layer.bias)


def test_span_head_splits_start_and_end():
    head = SpanHead()
    sequence = RNG.standard_normal((2, 5, 8)).astype("float32")
    outputs = head(sequence)
    both = _dense(sequence, head.dense)  # [2, 5, 2]
    np.testing.assert_allclose(np.asarray(outputs["start_logits"]), both[..., 0], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(np.asarray(outputs["end_logits"]), both[..., 1], rtol=1e-5,
                               atol=1e-6)


def test_the_head_round_trips_through_get_config():
    for layer in [SpanHead(initializer_range=0.05)]:
        config = layer.get_config()
        assert type(layer).from_config(config).get_config() == config


def test_the_head_returns_float32_under_mixed_precision():
    policy = keras.mixed_precision.DTypePolicy("mixed_bfloat16")
    sequence = np.ones((2, 3, 8), "float32")
    assert SpanHead(dtype=policy)(sequence)["start_logits"].dtype == "float32"
