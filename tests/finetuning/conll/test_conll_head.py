"""The conll family's heads against their definitions written out in NumPy."""

import keras
import numpy as np

from bert_keras.finetuning.conll.head import FeatureBasedBiLSTMHead, TokenTaggingHead

RNG = np.random.default_rng(0)


def _dense(x, layer):
    return x @ np.asarray(layer.kernel) + np.asarray(layer.bias)


def test_token_tagging_head_labels_every_position():
    head = TokenTaggingHead(num_classes=9)
    sequence = RNG.standard_normal((2, 6, 8)).astype("float32")
    np.testing.assert_allclose(np.asarray(head(sequence, training=False)),
                               _dense(sequence, head.dense), rtol=1e-5, atol=1e-6)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _lstm(x, kernel, recurrent_kernel, bias):
    """One direction of an LSTM over x [time, features]; gates i, f, c, o (Hochreiter 1997)."""
    units = recurrent_kernel.shape[0]
    h = np.zeros(units)
    c = np.zeros(units)
    outputs = []
    for step in x:
        z = step @ kernel + h @ recurrent_kernel + bias
        i, f, g, o = (z[k * units:(k + 1) * units] for k in range(4))
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        outputs.append(h)
    return np.stack(outputs)


def test_feature_based_head_is_a_masked_two_layer_bilstm_over_concatenated_layers():
    head = FeatureBasedBiLSTMHead(num_classes=5, lstm_units=6)
    layers = [RNG.standard_normal((2, 7, 4)).astype("float32") for _ in range(3)]
    mask = np.ones((2, 7), "int32")
    mask[1, 4:] = 0
    logits = np.asarray(head(layers, mask, training=False))
    weights = {name: np.asarray(value, np.float64) for name, value in head.weight_map().items()}

    for row, length in ((0, 7), (1, 4)):
        x = np.concatenate([layer[row, :length] for layer in layers], axis=-1).astype(np.float64)
        for index in range(2):
            p = f"lstm_{index}/"
            forward = _lstm(x, weights[p + "forward/kernel"],
                            weights[p + "forward/recurrent_kernel"], weights[p + "forward/bias"])
            backward = _lstm(x[::-1], weights[p + "backward/kernel"],
                             weights[p + "backward/recurrent_kernel"],
                             weights[p + "backward/bias"])[::-1]
            x = np.concatenate([forward, backward], axis=-1)
        expected = x @ weights["output/kernel"] + weights["output/bias"]
        # Padding never reaches the real positions.
        np.testing.assert_allclose(logits[row, :length], expected, rtol=1e-4, atol=1e-5)


def test_the_heads_round_trip_through_get_config():
    for layer in [TokenTaggingHead(num_classes=9),
                  FeatureBasedBiLSTMHead(num_classes=9, lstm_units=12, num_lstm_layers=1)]:
        config = layer.get_config()
        assert type(layer).from_config(config).get_config() == config


def test_the_tagger_returns_float32_under_mixed_precision():
    policy = keras.mixed_precision.DTypePolicy("mixed_bfloat16")
    sequence = np.ones((2, 3, 8), "float32")
    assert TokenTaggingHead(4, dtype=policy)(sequence).dtype == "float32"
