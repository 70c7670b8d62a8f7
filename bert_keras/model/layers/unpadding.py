"""Inference on the real tokens only ("unpadding"), for served batches of mixed lengths.

A batch padded to its longest sequence (or to a fixed `seq_length`) spends most of an encoder
layer's time in the dense projections of padding positions, whose outputs nobody reads: in a
post-layer-norm Transformer every matmul but attention's two acts on one position at a time. In
the scope of `unpadded_inference()`, a `TransformerBlock` called with `training=False` on the
TensorFlow backend runs its dense layers, GELU and layer norms on the [tokens, hidden] rows of
the real positions only; attention scatters its query, key and value rows back to the padded
[batch, seq_length] layout (zeros at padding) and gathers the context of the real rows again.
The outputs at real positions are those of the padded computation (to float32 rounding: other
matmul shapes); the outputs at padding positions are zeros. A batch whose real tokens fill more
than `MAX_REAL_SHARE` of its positions computes every position (the gathers would cost more than
they save) and then sets the padding positions to zero.

The exports enter this scope for their plain-graph inference (`bert_keras.export`). It needs
tensors of a data-dependent size, so XLA-compiled calls (`jit_compile`) must not enter it; it
is off on the JAX backend, in training and outside the scope, where the layers compute every
position.

The choice between the two computations is a `functional_cond`: a conditional that TensorFlow
runs as an `If` op calling its branch functions, not lowered to `Switch`/`Merge` nodes in the
caller's graph. Where oneDNN is on (TensorFlow's default on CPUs with AVX-512 VNNI/bf16 or AMX),
Grappler's remapper fuses attention's `BatchMatMulV2(...) + mask` and wires the fused op to
output 0 of the `Switch` that feeds the mask into the lowered true branch, the dead output: the
caller got empty tensors (docs/export.md, "Same answers on every CPU").

Example:

>>> import numpy as np
>>> from bert_keras.model.layers import TransformerBlock, attention_mask_from_input_mask
>>> block = TransformerBlock(num_heads=2, hidden_size=8, intermediate_size=32)
>>> hidden = np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32")
>>> mask = attention_mask_from_input_mask(np.array([[1, 1, 1], [1, 0, 0]], "int32"))
>>> padded = np.asarray(block(hidden, mask, training=False))
>>> with unpadded_inference():
...     unpadded = np.asarray(block(hidden, mask, training=False))
>>> bool(np.allclose(unpadded[0], padded[0], atol=1e-5)), bool(np.allclose(unpadded[1, 0], padded[1, 0], atol=1e-5))
(True, True)
>>> unpadded[1, 1:].tolist() == np.zeros((2, 8)).tolist()  # padding positions
True
"""

import contextlib
import threading

import keras

_SCOPE = threading.local()


@contextlib.contextmanager
def unpadded_inference(enabled=True):
    """Within this scope, inference of `TransformerBlock`s on TensorFlow computes the real
    tokens only (module docstring). Nests; `enabled=False` turns it off inside an outer scope."""
    previous = getattr(_SCOPE, "enabled", False)
    _SCOPE.enabled = bool(enabled)
    try:
        yield
    finally:
        _SCOPE.enabled = previous


def takes_unpadded_path(training):
    """Whether a layer called now with `training` computes the real tokens only: inference on
    the TensorFlow backend inside `unpadded_inference()`. An XLA-compiled call must not enter
    the scope (its shapes are fixed at compilation)."""
    return (not training and getattr(_SCOPE, "enabled", False)
            and keras.backend.backend() == "tensorflow")


# Below this share of real positions the rows are unpadded; above it the gathers and
# scatters (about 4 ms each for [4096, 384] on a 2-core EPYC) cost more than the rows saved.
MAX_REAL_SHARE = 0.9


def functional_cond(pred, true_fn, false_fn):
    """`tf.cond(pred, true_fn, false_fn)` that stays an `If` op in a graph (its branches run as
    functions, where each branch's inputs are function arguments) instead of being lowered to
    `Switch`/`Merge` nodes: the lowered form meets a oneDNN fusion that reads a `Switch`'s dead
    output (module docstring). Eagerly it is `tf.cond`.

    >>> import tensorflow as tf
    >>> @tf.function
    ... def scores(q, k, bias, pred):
    ...     return functional_cond(pred, lambda: tf.matmul(q * 0.5, k, transpose_b=True) + bias,
    ...                            lambda: tf.zeros([2, 2, 3, 3]))
    >>> q = tf.ones([2, 2, 3, 4])
    >>> scores(q, q, tf.zeros([2, 1, 1, 3]), tf.constant(True)).shape  # [0] lowered, with oneDNN
    TensorShape([2, 2, 3, 3])
    """
    import tensorflow as tf
    from tensorflow.core.framework import attr_value_pb2

    outputs = tf.cond(pred, true_fn, false_fn)
    if tf.executing_eagerly():
        return outputs
    # cond_v2 returns an Identity of each output of the If op, the op to keep unlowered.
    flat = tf.nest.flatten(outputs)
    if_ops = {id(op): op for op in (tensor.op.inputs[0].op if tensor.op.type == "Identity"
                                    else tensor.op for tensor in flat)}
    for op in if_ops.values():
        if op.type not in ("If", "StatelessIf"):
            raise RuntimeError(f"functional_cond: expected an If op, found {op.type} ({op.name})")
        op._set_attr("_lower_using_switch_merge", attr_value_pb2.AttrValue(b=False))  # pylint: disable=protected-access
    return outputs


class RealTokens:
    """Where the real tokens of a padded batch are, from the encoder's attention bias.

    Args:
      attention_mask: float32 additive bias [batch, 1, 1 or seq_length, seq_length] from
        `attention_mask_from_input_mask` (0 where a key position is real).

    Attributes:
      real: bool [batch * seq_length], the real positions.
      indices: int32 [tokens, 1], the real positions' rows in the flattened
        [batch * seq_length].
      num_rows: batch * seq_length.
      worthwhile: bool scalar tensor, whether the real tokens are at most `MAX_REAL_SHARE` of
        the rows (`TransformerBlock` computes every row otherwise).
    """

    def __init__(self, attention_mask):
        import tensorflow as tf

        bias = tf.convert_to_tensor(attention_mask)
        # A key is real when some query may see it (the last query row, when causal).
        real = tf.reshape(tf.equal(tf.reduce_max(bias, axis=[1, 2]), 0.0), [-1])  # [b * s]
        self.real = real
        self.indices = tf.cast(tf.where(real), tf.int32)  # [tokens, 1]
        self.num_rows = tf.size(real)
        self.worthwhile = (tf.cast(tf.shape(self.indices)[0], tf.float32)
                           <= MAX_REAL_SHARE * tf.cast(self.num_rows, tf.float32))

    def gather(self, rows):
        """[batch * seq_length, width] -> [tokens, width]."""
        import tensorflow as tf

        return tf.gather_nd(rows, self.indices)

    def scatter(self, tokens):
        """[tokens, width] -> [batch * seq_length, width], zeros at padding positions."""
        import tensorflow as tf

        return tf.scatter_nd(self.indices, tokens, [self.num_rows, tf.shape(tokens)[1]])

    def zero_padding(self, rows):
        """[batch * seq_length, width] with the padding positions' rows set to zero."""
        import tensorflow as tf

        return rows * tf.cast(self.real, rows.dtype)[:, None]
