"""Dense's float32 training gradient (the kernel transposed beforehand) against Keras' Dense."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras.model.layers import Dense


IN, OUT = 512, 512  # the smallest kernel that takes the pre-transposed gradient


def _pair(dtype, activation=None, units=OUT):
    ours = Dense(units, activation=activation, dtype=dtype)
    reference = keras.layers.Dense(units, activation=activation, dtype=dtype)
    rng = np.random.default_rng(0)
    for layer in (ours, reference):
        layer.build((None, IN))
    kernel = (rng.normal(size=(IN, units)) / np.sqrt(IN)).astype("float32")
    bias = rng.normal(size=units).astype("float32")
    for layer in (ours, reference):
        layer.kernel.assign(kernel)
        layer.bias.assign(bias)
    return ours, reference


def _outputs_and_gradients(layer, x, upstream, training):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=training)
    return y, tape.gradient(y, [x, layer.kernel, layer.bias], output_gradients=upstream)


@pytest.mark.parametrize("activation", [None, "gelu"])
def test_float32_training_gradient_matches_keras_dense(activation):
    ours, reference = _pair("float32", activation)
    assert ours.takes_pretransposed_gradient
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(size=(7, IN)), tf.float32)
    upstream = tf.constant(rng.normal(size=(7, OUT)), tf.float32)
    got = _outputs_and_gradients(ours, x, upstream, training=True)
    want = _outputs_and_gradients(reference, x, upstream, training=True)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)
    for g, w in zip(got[1], want[1]):
        assert float(tf.reduce_max(tf.abs(w))) > 0.1  # gradients that flow
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    if activation is None:  # the inputs' gradient: upstream times the kernel transposed (numpy)
        np.testing.assert_allclose(got[1][0], upstream.numpy() @ ours.kernel.numpy().T,
                                   rtol=1e-5, atol=1e-5)


def test_training_step_in_a_tf_function_updates_like_keras_dense():
    ours, reference = _pair("float32")
    x = tf.constant(np.random.default_rng(2).normal(size=(4, IN)), tf.float32)

    def step(layer):
        @tf.function
        def run():
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.square(layer(x, training=True)))
            grads = tape.gradient(loss, layer.trainable_variables)
            for variable, grad in zip(layer.trainable_variables, grads):
                variable.assign_sub(0.01 * grad)
        run()
        return [v.numpy() for v in layer.trainable_variables]

    for got, want in zip(step(ours), step(reference)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype, shape, units", [("mixed_bfloat16", (7, IN), OUT),
                                                ("float32", (2, 7, IN), OUT),
                                                ("float32", (7, IN), OUT // 2)])
def test_mixed_precision_3d_inputs_and_smaller_kernels_are_keras_dense(dtype, shape, units):
    ours, reference = _pair(dtype, units=units)
    assert ours.takes_pretransposed_gradient == (dtype == "float32" and units == OUT)
    x = tf.constant(np.random.default_rng(3).normal(size=shape), ours.compute_dtype)
    np.testing.assert_array_equal(tf.cast(ours(x, training=True), tf.float32),
                                  tf.cast(reference(x, training=True), tf.float32))
