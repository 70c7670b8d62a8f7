"""The activations named in `bert_config.json`, and GELU's one-pass training form.

"gelu" is the exact (erf) GELU of the original release, x * Phi(x); "gelu_new" (or
"gelu_approximate") its tanh approximation.

Training on the TensorFlow backend, GELU runs as one XLA-compiled elementwise pass forward and one
backward (a custom gradient, dy * (Phi(x) + x * phi(x)) for the exact form), computed in float32
whatever the compute dtype. Composed of TensorFlow ops, the exact GELU is about six passes over
the [batch * seq, intermediate] activations forward and backward, each a read and a write of the
largest activations in the model; fused, the feed-forward activation of BERT-small at batch 16
takes 7.0 instead of 12.7 ms per layer in float32 and 6.0 instead of 19.2 ms in mixed bfloat16
(`docs/benchmarks.md`). The same formula: the values agree to float32 rounding (2.4e-7 on
outputs of order 1). Inference keeps the composed ops, which TensorFlow fuses with the dense
layer's matmul and bias; the JAX backend compiles the whole step with XLA anyway.

Example:

>>> import numpy as np
>>> x = np.array([-1.0, 0.0, 2.0], "float32")
>>> [round(float(v), 4) for v in get_activation("gelu")(x)]
[-0.1587, 0.0, 1.9545]
>>> [round(float(v), 4) for v in get_activation("gelu", training=True)(x)]
[-0.1587, 0.0, 1.9545]
"""

import math

import keras

from bert_keras.common.xla import xla_function

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_SCALE = math.sqrt(2.0 / math.pi)
_CUBIC = 0.044715


def get_activation(name, training=False):
    """The activation `name` (`hidden_act` of `bert_config.json`) as a callable.

    With `training=True` on the TensorFlow backend the GELUs are the one-pass XLA form of the
    module docstring; elsewhere the same functions composed of backend ops.
    """
    if name in ("gelu", "gelu_new", "gelu_approximate"):
        approximate = name != "gelu"
        if training and keras.backend.backend() == "tensorflow":
            return _one_pass_gelu(approximate)
        return lambda x: keras.activations.gelu(x, approximate=approximate)
    if name in ("swish", "silu"):
        return keras.activations.silu
    if name in ("relu", "tanh"):
        return keras.activations.get(name)
    raise ValueError(f"unsupported hidden_act {name!r}")


def _gelu_and_derivative(x, approximate):
    """(GELU(x), dGELU/dx) of a float32 tensor."""
    import tensorflow as tf

    if approximate:
        inner = _TANH_SCALE * (x + _CUBIC * x * x * x)
        tanh = tf.tanh(inner)
        derivative = 0.5 * (1.0 + tanh) + 0.5 * x * (1.0 - tanh * tanh) * _TANH_SCALE * (
            1.0 + 3.0 * _CUBIC * x * x)
        return 0.5 * x * (1.0 + tanh), derivative
    cdf = 0.5 * tf.math.erfc(-x * _SQRT_HALF)
    pdf = tf.exp(-0.5 * x * x) * _INV_SQRT_2PI
    return x * cdf, cdf + x * pdf


def _one_pass_functions(approximate):
    """(forward, backward) of GELU's one-pass form, each one XLA-compiled function."""

    def forward(x):
        import tensorflow as tf

        value, _ = _gelu_and_derivative(tf.cast(x, tf.float32), approximate)
        return tf.cast(value, x.dtype)

    def backward(x, upstream):
        import tensorflow as tf

        _, derivative = _gelu_and_derivative(tf.cast(x, tf.float32), approximate)
        return tf.cast(tf.cast(upstream, tf.float32) * derivative, x.dtype)

    return xla_function(forward), xla_function(backward)


# One pair per form: exact (False) and tanh (True).
_ONE_PASS = {approximate: _one_pass_functions(approximate) for approximate in (False, True)}


def _one_pass_gelu(approximate):
    """GELU with a custom gradient, each direction one XLA-compiled function."""
    import tensorflow as tf

    forward, backward = _ONE_PASS[approximate]

    @tf.custom_gradient
    def gelu(x):
        return forward(x), lambda upstream: backward(x, upstream)

    return gelu
