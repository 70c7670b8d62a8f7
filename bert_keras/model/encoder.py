"""The BERT encoder as a functional Keras model with TF Hub input and output names."""

import keras

from bert_keras.model.layers import BertEmbeddings, Pooler, TransformerBlock
from bert_keras.model.layers.attention import attention_mask_from_input_mask

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


class AttentionMask(keras.layers.Layer):
    """Turns `input_mask` int [batch, seq] into the additive float32 attention bias."""

    def __init__(self, causal=False, **kwargs):
        super().__init__(**kwargs)
        self.causal = causal

    def call(self, input_mask):
        return attention_mask_from_input_mask(input_mask, causal=self.causal)

    def compute_output_shape(self, input_shape):
        if self.causal:
            return (input_shape[0], 1, input_shape[1], input_shape[1])
        return (input_shape[0], 1, 1, input_shape[1])

    def get_config(self):
        config = super().get_config()
        config.update(causal=self.causal)
        return config


def encoder_inputs(seq_length=None):
    """The three int32 `keras.Input`s of the encoder, [batch, seq_length]."""
    return {name: keras.Input(shape=(seq_length,), dtype="int32", name=name) for name in INPUT_NAMES}


def build_encoder(config, causal=None, dtype=None, name="bert_encoder",
                  attention_implementation="softmax"):
    """Builds the BERT encoder for a `BertConfig`, randomly initialized.

    Inputs (dict of int32 [batch, seq_length]): `input_word_ids`, `input_mask` (1 = real token),
    `input_type_ids` (segment ids).
    Outputs (dict): `sequence_output` [batch, seq_length, hidden_size], `pooled_output`
    [batch, hidden_size] and `encoder_outputs`, the list of every layer's output.

    Args:
      config: a `BertConfig`.
      causal: attend only to earlier positions (the paper's left-to-right ablation); None
        (default): the config's `causal_attention`.
      dtype: a Keras dtype policy name, e.g. "mixed_bfloat16"; default the global policy.
      attention_implementation: "softmax" (the original's arithmetic) or "fused" (one
        `keras.ops.dot_product_attention` per layer: cuDNN flash attention on the JAX backend on
        a GPU; needs `attention_probs_dropout_prob=0` to train). The weights are the same.

    Example:

    >>> import numpy as np, bert_keras
    >>> encoder = bert_keras.build_encoder(bert_keras.BertConfig.from_preset("tiny", vocab_size=100))
    >>> ids = np.array([[2, 7, 3, 0]], "int32")
    >>> outputs = encoder({"input_word_ids": ids, "input_mask": (ids > 0).astype("int32"),
    ...                    "input_type_ids": np.zeros_like(ids)})
    >>> outputs["sequence_output"].shape, outputs["pooled_output"].shape, len(outputs["encoder_outputs"])
    (TensorShape([1, 4, 128]), TensorShape([1, 128]), 2)
    """
    if causal is None:
        causal = config.causal_attention
    inputs = encoder_inputs()
    embeddings = BertEmbeddings(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, initializer_range=config.initializer_range,
        layer_norm_eps=config.layer_norm_eps, dropout_rate=config.hidden_dropout_prob,
        name="embeddings", dtype=dtype)
    attention_mask = AttentionMask(causal=causal, name="attention_mask")
    # A generator: each block is made when the forward pass reaches it, after the layers
    # before it are built, so that the layers draw their initial weights in the order of
    # the layers (the same weights for a seed as ever).
    blocks = (
        TransformerBlock(
            num_heads=config.num_attention_heads, hidden_size=config.hidden_size,
            intermediate_size=config.intermediate_size, hidden_act=config.hidden_act,
            hidden_dropout_rate=config.hidden_dropout_prob,
            attention_dropout_rate=config.attention_probs_dropout_prob,
            initializer_range=config.initializer_range, layer_norm_eps=config.layer_norm_eps,
            attention_implementation=attention_implementation,
            name=f"transformer_layer_{index}", dtype=dtype)
        for index in range(config.num_hidden_layers))
    encoder_outputs = _layer_outputs(embeddings, attention_mask, blocks, inputs)
    hidden_states = encoder_outputs[-1]

    pooled_output = Pooler(config.hidden_size, config.initializer_range, name="pooler",
                           dtype=dtype)(hidden_states)
    outputs = {"sequence_output": hidden_states, "pooled_output": pooled_output,
               "encoder_outputs": encoder_outputs}
    return keras.Model(inputs, outputs, name=name)


def sequence_output_at(encoder, inputs, positions, training=None):
    """An encoder's `sequence_output` at `positions` only, its last layer computing those rows.

    The same values as `encoder(inputs)["sequence_output"]` gathered at `positions` (to float
    rounding: the matmuls have other shapes), from the same layers and weights. The last
    layer's keys and values still cover every position, but its query projection, attention
    output, feed-forward layers and layer norms run on [batch * count] rows instead of
    [batch * seq_length]: pre-training, whose losses read only the masked positions (and the
    first, for next-sentence prediction), saves most of a layer's work (BERT-small at 128 tokens
    and 20 predictions: about 15% of the step's matmuls).

    Args:
      encoder: a model from `build_encoder`.
      inputs: its inputs, a dict of int32 [batch, seq_length] (symbolic or not).
      positions: int32 [batch, count].
    Returns:
      float [batch, count, hidden_size].

    Example:

    >>> import numpy as np, bert_keras
    >>> encoder = bert_keras.build_encoder(bert_keras.BertConfig.from_preset("tiny", vocab_size=100))
    >>> ids = np.array([[2, 7, 9, 3, 0]], "int32")
    >>> inputs = {"input_word_ids": ids, "input_mask": (ids > 0).astype("int32"),
    ...           "input_type_ids": np.zeros_like(ids)}
    >>> at = sequence_output_at(encoder, inputs, np.array([[0, 2]], "int32"))
    >>> whole = np.asarray(encoder(inputs)["sequence_output"])[:, [0, 2]]
    >>> at.shape, bool(np.allclose(at, whole, atol=1e-5))
    (TensorShape([1, 2, 128]), True)
    """
    blocks = [layer for layer in encoder.layers if isinstance(layer, TransformerBlock)]
    return _layer_outputs(encoder.get_layer("embeddings"), encoder.get_layer("attention_mask"),
                          blocks, inputs, positions, training)[-1]


def _layer_outputs(embeddings, attention_mask, blocks, inputs, positions=None, training=None):
    """The encoder's forward pass, written once: every block's output, in order. `blocks`
    may be a generator; with `positions` it is a list, and its last block computes only the
    rows at those positions."""
    kwargs = {} if training is None else {"training": training}
    hidden_states = embeddings(inputs["input_word_ids"], inputs["input_type_ids"], **kwargs)
    mask = attention_mask(inputs["input_mask"])
    outputs = []
    for index, block in enumerate(blocks):
        if positions is not None and index == len(blocks) - 1:
            hidden_states = block(hidden_states, mask, positions, **kwargs)
        else:
            hidden_states = block(hidden_states, mask, **kwargs)
        outputs.append(hidden_states)
    return outputs
