"""Dropout whose training mask on TensorFlow costs half the random numbers.

Keras' dropout on TensorFlow draws one float32 uniform per unit (one call of the Philox
generator yields four 32-bit words; each unit takes one), compares it with the rate, scales and
selects, each a pass over memory, and selects again for the gradient. In BERT's pre-training
step on a CPU those random numbers are among the largest costs outside the matmuls (the
largest in mixed bfloat16). Here, training on
the TensorFlow backend, each unit takes 16 random bits instead (two units from one 32-bit word
of the same generator, seeded by the layer's seed generator as Keras' own) and is kept when they
are at least round(rate * 65536): a drop probability within 8e-6 of the rate (0.100006 for 0.1),
each unit independent as before. The comparison, the 1 / (1 - rate) scaling and the selection
are one XLA-compiled pass forward and one backward (a custom gradient that reuses the bits).
Everywhere else (inference, the JAX backend, `noise_shape`) this is Keras' `Dropout`.

Example:

>>> import numpy as np
>>> dropout = Dropout(0.5, seed=1)
>>> outputs = np.asarray(dropout(np.ones((4, 1000), "float32"), training=True))
>>> sorted(set(outputs.ravel().tolist()))
[0.0, 2.0]
>>> 0.45 < float((outputs == 0).mean()) < 0.55
True
>>> np.asarray(dropout(np.ones((2, 3), "float32"))).tolist()  # inference: the identity
[[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
"""

import keras

from bert_keras.common.xla import xla_function

_BITS = 16


def drop_threshold(rate):
    """The 16-bit value below which a unit is dropped: its drop probability is threshold / 2^16."""
    return int(round(rate * (1 << _BITS)))


@keras.saving.register_keras_serializable(package="bert_keras")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` with the 16-bit training mask of the module docstring on TensorFlow.

    Call arguments:
      inputs: float tensor of any shape.
      training: Python bool.
    Returns:
      the inputs' shape and dtype.
    """

    def call(self, inputs, training=False):
        if (training and 0 < self.rate < 1 and self.noise_shape is None
                and keras.backend.backend() == "tensorflow"):
            return _sixteen_bit_dropout(inputs, self.rate, self.seed_generator.next())
        return super().call(inputs, training=training)


def _apply_mask_math(values, bits, threshold, scale):
    """values * scale where the unit's 16 bits are >= threshold, else 0."""
    import tensorflow as tf

    halves = tf.reshape(tf.bitcast(bits, tf.uint16), [-1])[:tf.size(values)]
    keep = tf.reshape(halves, tf.shape(values)) >= threshold
    return tf.where(keep, values * tf.cast(scale, values.dtype), tf.zeros_like(values))


# One XLA-compiled pass, forward and backward alike.
_apply_mask = xla_function(_apply_mask_math)


def _sixteen_bit_dropout(inputs, rate, seed):
    import tensorflow as tf

    inputs = tf.convert_to_tensor(inputs)
    if seed.dtype != tf.int32:  # Keras keeps seeds as int64 variables on TensorFlow
        seed = tf.cast(tf.math.floormod(seed, tf.int32.max - 1), tf.int32)
    words = (tf.size(inputs) + 1) // 2
    bits = tf.random.stateless_uniform([words], seed, dtype=tf.uint32, minval=None, maxval=None)
    threshold = tf.constant(drop_threshold(rate), tf.uint16)
    scale = tf.constant(1.0 / (1.0 - rate), tf.float32)

    @tf.custom_gradient
    def dropout(values):
        def gradient(upstream):
            return _apply_mask(upstream, bits, threshold, scale)
        return _apply_mask(values, bits, threshold, scale), gradient

    return dropout(inputs)
