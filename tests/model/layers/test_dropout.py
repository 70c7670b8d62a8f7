"""The 16-bit dropout mask: its rate, scaling, gradient, seeding and inference identity."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras.model.layers import Dropout
from bert_keras.model.layers.dropout import drop_threshold


@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_the_drop_share_is_the_rate_and_survivors_are_scaled(rate):
    units = 1_000_001  # odd: the last 32-bit word gives one unit
    outputs = Dropout(rate, seed=3)(tf.ones([units]), training=True).numpy()
    dropped = float((outputs == 0).mean())
    # Five binomial standard deviations (0.0015 at 0.5, 0.0009 at 0.1).
    assert abs(dropped - rate) < 5 * np.sqrt(rate * (1 - rate) / units)
    np.testing.assert_allclose(np.unique(outputs), [0.0, np.float32(1 / (1 - rate))])
    assert drop_threshold(0.1) == 6554  # a drop probability of 0.100006


def test_units_are_independent_across_positions_and_the_two_halves_of_a_word():
    outputs = Dropout(0.5, seed=5)(tf.ones([400_000]), training=True).numpy() > 0
    even, odd = outputs[0::2], outputs[1::2]  # the two units of each 32-bit word
    both = float((even & odd).mean())
    assert abs(both - 0.25) < 5 * np.sqrt(0.25 * 0.75 / even.size)
    # And no pattern along the tensor: the first and second half drop alike.
    assert abs(float(outputs[:200_000].mean()) - float(outputs[200_000:].mean())) < 0.01


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_gradient_goes_through_the_same_mask(dtype):
    x = tf.cast(tf.random.stateless_normal([64, 33], seed=[1, 2]), dtype)
    layer = Dropout(0.3, seed=7, dtype=dtype)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
    gradient = tape.gradient(y, x, output_gradients=tf.ones_like(y) * 2)
    assert y.dtype == gradient.dtype == tf.as_dtype(dtype)
    kept = y.numpy() != 0
    scale = tf.cast(1 / 0.7, dtype).numpy()
    np.testing.assert_array_equal(y.numpy()[kept], (x.numpy() * scale)[kept])
    np.testing.assert_array_equal(gradient.numpy(), np.where(kept, 2 * scale, 0).astype(dtype))


def test_masks_change_from_call_to_call_and_repeat_from_the_seed():
    x = tf.ones([4, 256])
    first = Dropout(0.5, seed=11)
    a, b = first(x, training=True).numpy(), first(x, training=True).numpy()
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(Dropout(0.5, seed=11)(x, training=True), a)
    keras.utils.set_random_seed(1)
    c = Dropout(0.5)(x, training=True).numpy()
    keras.utils.set_random_seed(1)
    np.testing.assert_array_equal(Dropout(0.5)(x, training=True), c)


def test_inside_a_compiled_step_and_at_inference():
    layer = Dropout(0.25, seed=2)
    step = tf.function(lambda x: layer(x, training=True))
    x = tf.ones([8, 1000])
    assert not np.array_equal(step(x), step(x))  # the seed generator advances in the graph
    np.testing.assert_array_equal(layer(x), x)
    np.testing.assert_array_equal(Dropout(0.0)(x, training=True), x)
    # `noise_shape` is Keras' own dropout: whole rows dropped together.
    rows = Dropout(0.5, noise_shape=(8, 1), seed=4)(x, training=True).numpy()
    assert all(len(np.unique(row)) == 1 for row in rows)
