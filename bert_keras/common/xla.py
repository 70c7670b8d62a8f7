"""TensorFlow functions compiled by XLA, built on their first call.

The training step's one-pass kernels (GELU, dropout's mask, the masked LM's cross entropy,
AdamW's update) are each a `tf.function(jit_compile=True)`; XLA compiles each once per shape and
dtype. Built on first use, they cost nothing to a process that never trains on TensorFlow
(TensorFlow itself is imported only then).

Example:

>>> import numpy as np
>>> double = xla_function(lambda x: 2.0 * x)
>>> [float(v) for v in double(np.array([1.0, 3.0], "float32"))]
[2.0, 6.0]
"""


def xla_function(python_function):
    """`python_function` as `tf.function(jit_compile=True, autograph=False)`, built on its
    first call."""
    compiled = []

    def call(*args):
        if not compiled:
            import tensorflow as tf

            compiled.append(tf.function(python_function, jit_compile=True, autograph=False))
        return compiled[0](*args)

    return call
