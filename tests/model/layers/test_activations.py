"""GELU's one-pass training form against the composed Keras GELU: values, gradients, dtypes."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras.model.layers import TransformerBlock, attention_mask_from_input_mask
from bert_keras.model.layers.activations import get_activation


def _value_and_gradient(function, x, upstream):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = function(x)
    return y, tape.gradient(y, x, output_gradients=upstream)


@pytest.mark.parametrize("name", ["gelu", "gelu_new"])
def test_one_pass_gelu_matches_the_composed_gelu_and_its_gradient(name):
    rng = np.random.default_rng(0)
    x = tf.constant(np.concatenate([np.linspace(-8, 8, 2001), rng.normal(0, 3, 4000)]), tf.float32)
    upstream = tf.constant(rng.normal(size=x.shape), tf.float32)
    composed = _value_and_gradient(get_activation(name), x, upstream)
    one_pass = _value_and_gradient(get_activation(name, training=True), x, upstream)
    np.testing.assert_allclose(one_pass[0], composed[0], rtol=1e-6, atol=1e-6)
    # Gradients of order 1; the tanh form's 1 + tanh(.) cancels for x < -5 (6e-6 apart there).
    np.testing.assert_allclose(one_pass[1], composed[1], rtol=1e-5, atol=1e-5)
    # Not the identity or a constant: the gradient of GELU at 0 is 1/2, at -8 about 0.
    assert abs(float(one_pass[1][1000] / upstream[1000]) - 0.5) < 1e-6
    assert abs(float(one_pass[1][0])) < 1e-6


def test_one_pass_gelu_keeps_bfloat16_and_computes_in_float32():
    x32 = tf.constant(np.linspace(-5, 5, 1001), tf.float32)
    x16 = tf.cast(x32, tf.bfloat16)
    y16, gradient16 = _value_and_gradient(get_activation("gelu", training=True), x16,
                                          tf.ones_like(x16))
    assert y16.dtype == gradient16.dtype == tf.bfloat16
    # The float32 result rounded once to bfloat16 (8 significant bits).
    reference, reference_gradient = _value_and_gradient(get_activation("gelu"),
                                                        tf.cast(x16, tf.float32),
                                                        tf.ones_like(x32))
    np.testing.assert_array_equal(y16, tf.cast(reference, tf.bfloat16))
    np.testing.assert_array_equal(gradient16, tf.cast(reference_gradient, tf.bfloat16))


def test_other_activations_have_no_training_form():
    for name in ("relu", "tanh", "swish"):
        assert get_activation(name, training=True) is get_activation(name)
    with pytest.raises(ValueError, match="unsupported hidden_act 'elu'"):
        get_activation("elu")


def test_a_training_block_uses_the_one_pass_gelu_and_learns_the_same_gradients():
    """The block's gradients with the one-pass GELU equal those with the composed GELU (no
    dropout, same weights): the custom gradient is wired into the layer."""
    keras.utils.set_random_seed(0)
    block = TransformerBlock(num_heads=2, hidden_size=16, intermediate_size=64,
                             hidden_dropout_rate=0.0, attention_dropout_rate=0.0)
    hidden = tf.constant(np.random.default_rng(1).normal(size=(2, 5, 16)), tf.float32)
    mask = attention_mask_from_input_mask(np.ones((2, 5), "int32"))

    def gradients(training):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(block(hidden, mask, training=training) ** 2)
        return tape.gradient(loss, block.trainable_variables)

    def compiled_calls(training):
        graph = tf.function(lambda: block(hidden, mask, training=training)
                            ).get_concrete_function().graph
        return [op.get_attr("f").name for op in graph.get_operations()
                if "_XlaMustCompile" in op.node_def.attr]

    assert [name.split("_")[3] for name in compiled_calls(True)] == ["forward"]
    assert compiled_calls(False) == []
    for trained, inferred in zip(gradients(True), gradients(False)):
        np.testing.assert_allclose(trained, inferred, rtol=1e-4, atol=1e-6)
