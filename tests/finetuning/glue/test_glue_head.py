"""The glue family's head against its definition written out in NumPy."""

import keras
import numpy as np

from bert_keras.finetuning.glue.head import ClassificationHead

RNG = np.random.default_rng(0)


def _dense(x, layer):
    return x @ np.asarray(layer.kernel) + np.asarray(layer.bias)


def test_classification_head_is_a_dense_layer_on_the_pooled_output():
    head = ClassificationHead(num_classes=3, dropout_rate=0.5)
    pooled = RNG.standard_normal((4, 8)).astype("float32")
    logits = np.asarray(head(pooled, training=False))
    np.testing.assert_allclose(logits, _dense(pooled, head.dense), rtol=1e-5, atol=1e-6)
    assert set(head.weight_map()) == {"kernel", "bias"}
    assert head.weight_map()["kernel"].shape == (8, 3)
    # Dropout is on in training.
    assert not np.allclose(np.asarray(head(pooled, training=True)), logits)


def test_the_head_round_trips_through_get_config():
    for layer in [ClassificationHead(num_classes=2, dropout_rate=0.2, initializer_range=0.01)]:
        config = layer.get_config()
        assert type(layer).from_config(config).get_config() == config


def test_the_head_returns_float32_under_mixed_precision():
    policy = keras.mixed_precision.DTypePolicy("mixed_bfloat16")
    assert ClassificationHead(2, dtype=policy)(np.ones((2, 8), "float32")).dtype == "float32"
