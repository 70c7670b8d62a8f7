"""Multi-head scaled dot-product self-attention with a padding (or causal) mask."""

import math

import keras
from keras import ops

from bert_keras.model.layers.dense import Dense
from bert_keras.model.layers.dropout import Dropout

# The original adds -10000 to the logits of masked positions; after the float32 softmax
# their probability is exactly 0.
_MASK_ADDER = -10000.0

# "softmax": the original's arithmetic (scores, float32 softmax, dropout on the probabilities,
# context). "fused": one `keras.ops.dot_product_attention` call, which on the JAX backend on a
# recent NVIDIA GPU is cuDNN's flash attention under mixed precision (no [batch, heads, seq, seq]
# tensor in memory) and elsewhere XLA's or the backend's own composition. It has no dropout on
# the attention probabilities, so a layer that trains with it needs an attention dropout rate 0.
ATTENTION_IMPLEMENTATIONS = ("softmax", "fused")


def check_attention_implementation(attention_implementation, attention_dropout_rate):
    """Raises ValueError for an unknown implementation, or "fused" with attention dropout."""
    if attention_implementation not in ATTENTION_IMPLEMENTATIONS:
        raise ValueError(f"attention_implementation must be one of {ATTENTION_IMPLEMENTATIONS}, "
                         f"got {attention_implementation!r}")
    if attention_implementation == "fused" and attention_dropout_rate:
        raise ValueError(
            "attention_implementation='fused' has no dropout on the attention probabilities; "
            f"set attention_probs_dropout_prob to 0 (got {attention_dropout_rate})")


def attention_mask_from_input_mask(input_mask, causal=False):
    """Additive float32 attention bias from a padding mask.

    Args:
      input_mask: int [batch, seq_length], 1 for real tokens and 0 for padding.
      causal: also hide every later position (the paper's left-to-right ablation).
    Returns:
      float32 [batch, 1, 1, seq_length], or [batch, 1, seq_length, seq_length] when causal.
    """
    # expand_dims, not [:, None, None, :]: TensorFlow Lite has no strided slice adding axes.
    mask = ops.expand_dims(ops.expand_dims(ops.cast(input_mask, "float32"), 1), 1)  # [batch, 1, 1, seq]
    if causal:
        seq_length = ops.shape(input_mask)[1]
        lower = ops.tril(ops.ones((seq_length, seq_length), "float32"))  # [seq, seq]
        mask = mask * ops.expand_dims(ops.expand_dims(lower, 0), 0)  # [batch, 1, seq, seq]
    return (1.0 - mask) * _MASK_ADDER


def gather_rows(rows, positions, batch, seq_length):
    """The rows [batch * seq_length, width] at `positions` int32 [batch, count] of each
    sequence: [batch * count, width]."""
    offsets = ops.arange(batch, dtype="int32")[:, None] * ops.cast(seq_length, "int32")
    return ops.take(rows, ops.reshape(ops.cast(positions, "int32") + offsets, (-1,)), axis=0)


class SelfAttention(keras.layers.Layer):
    """BERT self-attention: query/key/value projections, per-head softmax, output projection.

    The softmax runs in float32 under mixed precision. `attention_implementation="fused"`
    computes the same function in one `keras.ops.dot_product_attention` call (cuDNN flash
    attention on the JAX backend on a GPU) and needs `attention_dropout_rate=0`.

    Call arguments:
      hidden_states: float [batch, seq_length, hidden_size].
      attention_mask: float32 additive bias broadcastable to [batch, heads, seq_length, seq_length],
        from `attention_mask_from_input_mask`.
    Returns:
      float [batch, seq_length, hidden_size] (before the output dense's residual and layer norm,
      which `TransformerBlock` applies). `attend_rows` takes and returns the flattened rows, or
      the real tokens' rows only (`unpadding`).

    Example:

    >>> import numpy as np
    >>> layer = SelfAttention(num_heads=2, hidden_size=8)
    >>> mask = attention_mask_from_input_mask(np.array([[1, 1, 0]]))
    >>> layer(np.ones((1, 3, 8), "float32"), mask).shape
    TensorShape([1, 3, 8])
    """

    def __init__(self, num_heads, hidden_size, attention_dropout_rate=0.1, initializer_range=0.02,
                 attention_implementation="softmax", **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not a multiple of num_heads {num_heads}")
        check_attention_implementation(attention_implementation, attention_dropout_rate)
        self.attention_implementation = attention_implementation
        self.num_heads = num_heads
        self.hidden_size = hidden_size
        self.head_size = hidden_size // num_heads
        self.attention_dropout_rate = attention_dropout_rate
        self.initializer_range = initializer_range

        def dense(name):
            return Dense(
                hidden_size, name=name, dtype=self.dtype_policy,
                kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range))

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.dropout = Dropout(attention_dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        for layer in (self.query, self.key, self.value):
            layer.build((None, None, self.hidden_size))
        self.built = True

    def _split_heads(self, x, batch, seq_length):
        x = ops.reshape(x, (batch, seq_length, self.num_heads, self.head_size))  # [b, s, n, d]
        return ops.transpose(x, (0, 2, 1, 3))  # [b, n, s, d]

    def call(self, hidden_states, attention_mask, training=None):
        batch, seq_length = ops.shape(hidden_states)[0], ops.shape(hidden_states)[1]
        rows = ops.reshape(hidden_states, (-1, self.hidden_size))
        context = self.attend_rows(rows, attention_mask, batch, seq_length, training=training)
        return ops.reshape(context, (batch, seq_length, self.hidden_size))

    def attend_rows(self, rows, attention_mask, batch, seq_length, training=None,
                    real_tokens=None, positions=None, position_rows=None):
        """Attention on the flattened rows of a batch, what `TransformerBlock` calls.

        Args:
          rows: float [batch * seq_length, hidden_size], or the real tokens' rows [tokens,
            hidden_size] with `real_tokens` (an `unpadding.RealTokens`).
          attention_mask: as for `call`.
          batch, seq_length: the padded batch's shape.
          positions: int32 [batch, queries]: attend from these positions only (every position
            is still a key and a value).
          position_rows: with `positions`, the rows at them, [batch * queries, hidden_size]
            (`gather_rows`; the caller gathers them once, for the residual as well).
        Returns:
          float, the shape of `rows`, or [batch * queries, hidden_size] with `positions`.
        """
        # Projections on [rows, hidden]: one MatMul each, fused with its bias add.
        key, value = (self._projection(layer, rows, real_tokens) for layer in (self.key, self.value))
        if positions is None:
            query, queries = self._projection(self.query, rows, real_tokens), seq_length
        else:
            if position_rows is None:
                raise ValueError("attend_rows: `positions` needs `position_rows` (gather_rows)")
            query = self.query(position_rows)
            queries = ops.shape(positions)[1]
            if ops.shape(attention_mask)[2] != 1:  # a causal mask: the queries' rows of it
                attention_mask = ops.take_along_axis(attention_mask, positions[:, None, :, None], axis=2)
        attend = self._fused if self.attention_implementation == "fused" else self._softmax
        context = attend(query, key, value, attention_mask, batch, queries, seq_length, training)
        context = ops.reshape(context, (-1, self.hidden_size))  # [batch * queries, hidden]
        return context if real_tokens is None else real_tokens.gather(context)

    def _projection(self, layer, rows, real_tokens):
        """A query, key or value projection [batch * seq, hidden] (zeros at padding positions
        when `rows` holds the real tokens only)."""
        projection = layer(rows)
        return projection if real_tokens is None else real_tokens.scatter(projection)

    def _softmax(self, query, key, value, attention_mask, batch, queries, seq_length, training):
        query = self._split_heads(query, batch, queries)  # [b, n, q, d]
        key, value = (self._split_heads(x, batch, seq_length) for x in (key, value))  # [b, n, s, d]
        query = query * ops.cast(1.0 / math.sqrt(self.head_size), query.dtype)
        attention_scores = ops.matmul(query, ops.transpose(key, (0, 1, 3, 2)))  # [b, n, q, s]
        attention_scores = ops.cast(attention_scores, "float32") + ops.cast(attention_mask, "float32")
        attention_probs = ops.softmax(attention_scores, axis=-1)
        attention_probs = ops.cast(attention_probs, self.compute_dtype)
        attention_probs = self.dropout(attention_probs, training=training)

        context = ops.matmul(attention_probs, value)  # [b, n, q, d]
        context = ops.transpose(context, (0, 2, 1, 3))  # [b, q, n, d]
        return ops.reshape(context, (batch, queries, self.hidden_size))  # [b, q, hidden]

    def _fused(self, query, key, value, attention_mask, batch, queries, seq_length, training):
        # The layout it takes: [b, q or s, n, d].
        query = ops.reshape(query, (batch, queries, self.num_heads, self.head_size))
        key, value = (ops.reshape(x, (batch, seq_length, self.num_heads, self.head_size))
                      for x in (key, value))
        # cuDNN takes a bias of the scores' [.., q, s] shape, in the inputs' dtype.
        bias = ops.broadcast_to(ops.cast(attention_mask, self.compute_dtype),
                                (batch, 1, queries, seq_length))
        context = ops.dot_product_attention(query, key, value, bias=bias,
                                            scale=1.0 / math.sqrt(self.head_size))
        return ops.reshape(context, (batch, queries, self.hidden_size))  # [b, q, hidden]

    def compute_output_shape(self, hidden_states_shape, attention_mask_shape=None):
        return tuple(hidden_states_shape)

    def get_config(self):
        config = super().get_config()
        config.update(num_heads=self.num_heads, hidden_size=self.hidden_size,
                      attention_dropout_rate=self.attention_dropout_rate,
                      initializer_range=self.initializer_range,
                      attention_implementation=self.attention_implementation)
        return config
