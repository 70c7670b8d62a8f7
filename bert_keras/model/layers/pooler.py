"""The BERT pooler: a tanh dense layer over the hidden state of [CLS]."""

import keras


class Pooler(keras.layers.Layer):
    """Maps the first token's hidden state to `pooled_output` (tanh(W h_[CLS] + b)).

    Call arguments:
      sequence_output: float [batch, seq_length, hidden_size].
    Returns:
      pooled_output: float [batch, hidden_size].

    Example:

    >>> import numpy as np
    >>> Pooler(hidden_size=4)(np.ones((2, 3, 4), "float32")).shape
    TensorShape([2, 4])
    """

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(
            hidden_size, activation="tanh", name="dense", dtype=self.dtype_policy,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range))

    def build(self, input_shape=None):
        self.dense.build((None, self.hidden_size))
        self.built = True

    def call(self, sequence_output):
        return self.dense(sequence_output[:, 0, :])

    def compute_output_shape(self, sequence_output_shape):
        return (sequence_output_shape[0], self.hidden_size)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, initializer_range=self.initializer_range)
        return config
