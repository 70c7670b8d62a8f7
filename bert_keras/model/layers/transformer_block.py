"""The post-layer-norm Transformer encoder block of BERT."""

import keras
from keras import ops

from bert_keras.model.layers.activations import get_activation
from bert_keras.model.layers.attention import SelfAttention, gather_rows
from bert_keras.model.layers.dense import Dense
from bert_keras.model.layers.dropout import Dropout
from bert_keras.model.layers.unpadding import RealTokens, functional_cond, takes_unpadded_path


class TransformerBlock(keras.layers.Layer):
    """One encoder layer: self-attention, add & norm, feed-forward, add & norm.

        attention_output = LayerNorm(x + Dropout(Dense(SelfAttention(x))))
        layer_output = LayerNorm(attention_output + Dropout(Dense(act(Dense(attention_output)))))

    Call arguments:
      hidden_states: float [batch, seq_length, hidden_size].
      attention_mask: float32 additive bias, see `attention_mask_from_input_mask`.
      positions: optional int32 [batch, count]: compute the layer's output at these positions
        only (each still attends to every position), as pre-training does in the last layer,
        whose other positions no loss reads.
    Returns:
      float [batch, seq_length, hidden_size], or [batch, count, hidden_size] with `positions`.
      Inside `unpadding.unpadded_inference()`, inference on a batch with enough padding
      computes the real positions only and returns zeros at padding positions.

    Example:

    >>> import numpy as np
    >>> from bert_keras.model.layers import attention_mask_from_input_mask
    >>> block = TransformerBlock(num_heads=2, hidden_size=8, intermediate_size=32)
    >>> mask = attention_mask_from_input_mask(np.ones((1, 3), "int32"))
    >>> hidden = np.random.default_rng(0).normal(size=(1, 3, 8)).astype("float32")
    >>> block(hidden, mask).shape
    TensorShape([1, 3, 8])
    >>> at_positions = block(hidden, mask, np.array([[2, 0]], "int32"))  # [1, 2, 8]
    >>> bool(np.allclose(at_positions, np.asarray(block(hidden, mask))[:, [2, 0]], atol=1e-5))
    True
    """

    def __init__(self, num_heads, hidden_size, intermediate_size, hidden_act="gelu",
                 hidden_dropout_rate=0.1, attention_dropout_rate=0.1, initializer_range=0.02,
                 layer_norm_eps=1e-12, attention_implementation="softmax", **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_rate = hidden_dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.attention_implementation = attention_implementation

        policy = self.dtype_policy
        initializer = keras.initializers.TruncatedNormal(stddev=initializer_range)
        self.attention = SelfAttention(num_heads, hidden_size, attention_dropout_rate,
                                       initializer_range, attention_implementation,
                                       name="attention", dtype=policy)
        self.attention_output = Dense(hidden_size, kernel_initializer=initializer,
                                      name="attention_output", dtype=policy)
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, name="attention_layer_norm", dtype=policy)
        # The activation is applied in `call`: training on TensorFlow takes GELU's one-pass form.
        self.intermediate = Dense(intermediate_size, kernel_initializer=initializer,
                                  name="intermediate", dtype=policy)
        self.activation = get_activation(hidden_act)
        self.training_activation = get_activation(hidden_act, training=True)
        self.output_dense = Dense(hidden_size, kernel_initializer=initializer,
                                  name="output_dense", dtype=policy)
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_eps, name="output_layer_norm", dtype=policy)
        self.dropout = Dropout(hidden_dropout_rate, dtype=policy)

    def build(self, input_shape=None):
        hidden = (None, None, self.hidden_size)
        self.attention.build(hidden)
        self.attention_output.build(hidden)
        self.attention_layer_norm.build(hidden)
        self.intermediate.build(hidden)
        self.output_dense.build((None, None, self.intermediate_size))
        self.output_layer_norm.build(hidden)
        self.built = True

    def call(self, hidden_states, attention_mask, positions=None, training=None):
        shape = ops.shape(hidden_states)
        # The dense layers see [rows, hidden]: on 2-D inputs a Dense is one MatMul, which
        # TensorFlow fuses with its bias add and GELU (on 3-D inputs reshapes come between).
        rows = ops.reshape(hidden_states, (-1, self.hidden_size))  # [batch * seq, hidden]
        if positions is not None:
            output = self._layer(rows, attention_mask, shape, training, positions=positions)
            return ops.reshape(output, (shape[0], ops.shape(positions)[1], self.hidden_size))
        if not takes_unpadded_path(training):
            return ops.reshape(self._layer(rows, attention_mask, shape, training), shape)
        # Inference on the real tokens' rows only, where padding is worth skipping (`unpadding`);
        # a functional cond, since a lowered one meets a oneDNN fusion bug (`functional_cond`).
        real_tokens = RealTokens(attention_mask)
        output = functional_cond(
            real_tokens.worthwhile,
            lambda: real_tokens.scatter(self._layer(real_tokens.gather(rows), attention_mask,
                                                    shape, training, real_tokens)),
            lambda: real_tokens.zero_padding(self._layer(rows, attention_mask, shape, training)))
        return ops.reshape(output, shape)

    def _layer(self, rows, attention_mask, shape, training, real_tokens=None, positions=None):
        """The layer on rows [rows, hidden] of the [batch, seq] `shape` (or on the real tokens'
        rows, with `real_tokens`) -> [rows, hidden]; with `positions` [batch, count], the
        layer's output at those positions only, [batch * count, hidden]."""
        # With `positions`, every row is a key and a value; the rows at the positions are the
        # queries and the residual, gathered once.
        position_rows = None if positions is None else gather_rows(rows, positions, shape[0], shape[1])
        attention = self.attention.attend_rows(rows, attention_mask, shape[0], shape[1],
                                               training=training, real_tokens=real_tokens,
                                               positions=positions, position_rows=position_rows)
        if positions is not None:
            rows = position_rows
        attention = self.dropout(self.attention_output(attention), training=training)
        attention_output = self.attention_layer_norm(rows + attention)

        activation = self.training_activation if training else self.activation
        intermediate_output = activation(self.intermediate(attention_output))  # [rows, intermediate]
        layer_output = self.dropout(self.output_dense(intermediate_output), training=training)
        return self.output_layer_norm(attention_output + layer_output)

    def compute_output_shape(self, hidden_states_shape, attention_mask_shape=None,
                             positions_shape=None):
        if positions_shape is not None:
            return (hidden_states_shape[0], positions_shape[1], hidden_states_shape[2])
        return tuple(hidden_states_shape)

    def get_config(self):
        config = super().get_config()
        config.update(num_heads=self.num_heads, hidden_size=self.hidden_size,
                      intermediate_size=self.intermediate_size, hidden_act=self.hidden_act,
                      hidden_dropout_rate=self.hidden_dropout_rate,
                      attention_dropout_rate=self.attention_dropout_rate,
                      initializer_range=self.initializer_range, layer_norm_eps=self.layer_norm_eps,
                      attention_implementation=self.attention_implementation)
        return config
