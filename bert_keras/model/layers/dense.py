"""A dense layer whose float32 training gradient on TensorFlow reads the kernel transposed.

The gradient of `inputs @ kernel` with respect to the inputs is `upstream @ kernel^T`.
TensorFlow computes it as one matmul with `transpose_b`, a layout oneDNN multiplies more slowly
in float32: on a 2-core EPYC a [2048, 2048] x [2048, 512] input gradient takes 14.7 ms that
way and 10.5 ms on a kernel transposed beforehand (a copy of the kernel, 0.5 ms). Training in
float32 on the TensorFlow backend, with 2-D inputs, this layer takes that gradient instead (a
custom gradient; the transpose is XLA-compiled so that TensorFlow's graph optimizer does not
fold it back into the matmul): BERT-small's pre-training step, 4-6% less time
(`docs/benchmarks.md`). The same products, so the same values to float32 rounding.

Kernels under 512 x 512 elements keep Keras' gradient: there the layout saves less than the
copy's XLA launch may cost (with it, the main job's 32 fine-tuning runs of BERT-Tiny took 192
and 199 s, without it 177 and 183 s, within the stage's run-to-run spread). Mixed bfloat16
(where the layouts cost the same), 3-D inputs, inference and the JAX backend are Keras' `Dense`.

Example:

>>> import numpy as np
>>> layer = Dense(512, kernel_initializer="ones", bias_initializer="zeros")
>>> outputs = np.asarray(layer(np.full((2, 512), 0.5, "float32"), training=True))
>>> outputs.shape, float(outputs[0, 0])
((2, 512), 256.0)
>>> layer.takes_pretransposed_gradient
True
"""

import math

import keras
from keras import ops

from bert_keras.common.xla import xla_function


def _transpose_math(matrix):
    import tensorflow as tf

    return tf.transpose(matrix)


# One XLA-compiled copy: opaque to the graph optimizer, which would fold a plain transpose
# feeding a matmul back into `transpose_b`.
_transpose = xla_function(_transpose_math)

# Kernels this large (BERT-small's 512 x 512 and up) take the pre-transposed gradient.
_MIN_KERNEL_SIZE = 1 << 18


@keras.saving.register_keras_serializable(package="bert_keras")
class Dense(keras.layers.Dense):
    """`keras.layers.Dense` with the float32 training gradient of the module docstring.

    Call arguments:
      inputs: float [..., input_dim].
      training: Python bool.
    Returns:
      float [..., units].
    """

    @property
    def takes_pretransposed_gradient(self):
        """Whether float32 training on TensorFlow takes the gradient of the module docstring."""
        return (keras.backend.backend() == "tensorflow" and self.compute_dtype == "float32"
                and math.prod(self.kernel.shape) >= _MIN_KERNEL_SIZE
                and not getattr(self, "lora_enabled", False)
                and getattr(self, "quantization_mode", None) is None)

    def call(self, inputs, training=None):
        if training and len(inputs.shape) == 2 and self.takes_pretransposed_gradient:
            outputs = _matmul_with_pretransposed_gradient(inputs, self.kernel)
            if self.bias is not None:
                outputs = ops.add(outputs, self.bias)
            if self.activation is not None:
                outputs = self.activation(outputs)
            return outputs
        return super().call(inputs, training=training)


def _matmul_with_pretransposed_gradient(inputs, kernel):
    """inputs [rows, in] @ kernel [in, out]; the inputs' gradient multiplies by kernel^T copied."""
    import tensorflow as tf

    kernel = tf.convert_to_tensor(kernel)  # read here: the custom gradient sees a tensor

    @tf.custom_gradient
    def matmul(inputs, kernel):
        def gradient(upstream):
            return (tf.matmul(upstream, _transpose(kernel)),
                    tf.matmul(inputs, upstream, transpose_a=True))

        return tf.matmul(inputs, kernel), gradient

    return matmul(inputs, kernel)
