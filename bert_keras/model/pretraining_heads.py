"""The pre-training heads: masked LM (tied to the word embeddings) and next-sentence prediction."""

import keras
from keras import ops

from bert_keras.model.layers.activations import get_activation


class MaskedLMHead(keras.layers.Layer):
    """Predicts the original tokens at `masked_lm_positions` (BERT's "masked LM" task).

    Gathers the hidden states at the masked positions first, then applies the transform
    (dense + activation + layer norm) and the output projection tied to the word embeddings plus
    an output bias, so the vocabulary projection costs [batch, predictions] rows, not
    [batch, seq_length].

    Args:
      embeddings: the encoder's `BertEmbeddings` layer, whose `word_embeddings` [vocab, hidden]
        are the output projection.
    Call arguments:
      sequence_output: float [batch, seq_length, hidden_size].
      masked_lm_positions: int32 [batch, max_predictions_per_seq]; None when `sequence_output`
        holds the masked positions' rows already, [batch, max_predictions_per_seq, hidden_size].
    Returns:
      mlm_logits: float32 [batch, max_predictions_per_seq, vocab_size].

    Example:

    >>> import numpy as np
    >>> from bert_keras.model.layers import BertEmbeddings
    >>> embeddings = BertEmbeddings(vocab_size=10, hidden_size=8)
    >>> embeddings.build()
    >>> head = MaskedLMHead(embeddings, hidden_act="gelu")
    >>> head(np.ones((2, 5, 8), "float32"), np.array([[1, 2], [0, 4]], "int32")).shape
    TensorShape([2, 2, 10])
    """

    def __init__(self, embeddings, hidden_act="gelu", initializer_range=0.02, layer_norm_eps=1e-12,
                 **kwargs):
        super().__init__(**kwargs)
        self.embeddings = embeddings
        self.hidden_size = embeddings.hidden_size
        self.vocab_size = embeddings.vocab_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.transform = keras.layers.Dense(
            self.hidden_size, activation=get_activation(hidden_act), name="transform",
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=initializer_range),
            dtype=self.dtype_policy)
        self.layer_norm = keras.layers.LayerNormalization(epsilon=layer_norm_eps, name="layer_norm",
                                                          dtype=self.dtype_policy)

    def build(self, sequence_output_shape=None, masked_lm_positions_shape=None):
        self.transform.build((None, None, self.hidden_size))
        self.layer_norm.build((None, None, self.hidden_size))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                           initializer="zeros")
        self.built = True

    def call(self, sequence_output, masked_lm_positions=None, training=None):
        gathered = sequence_output  # [b, p, hidden]
        if masked_lm_positions is not None:
            positions = ops.cast(masked_lm_positions, "int32")
            gathered = ops.take_along_axis(sequence_output, positions[:, :, None], axis=1)
        hidden = self.layer_norm(self.transform(gathered))  # [b, p, hidden]
        word_embeddings = ops.cast(self.embeddings.word_embeddings, hidden.dtype)  # [vocab, hidden]
        if training and keras.backend.backend() == "tensorflow":
            logits = _tied_logits(hidden, word_embeddings)
        else:
            logits = ops.matmul(hidden, ops.transpose(word_embeddings))  # [b, p, vocab]
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def compute_output_shape(self, sequence_output_shape, masked_lm_positions_shape=None):
        rows = masked_lm_positions_shape or sequence_output_shape
        return (rows[0], rows[1], self.vocab_size)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_act=self.hidden_act, initializer_range=self.initializer_range,
                      layer_norm_eps=self.layer_norm_eps)
        return config


def _tied_logits(hidden, word_embeddings):
    """hidden [b, p, hidden] times word_embeddings [vocab, hidden] transposed: [b, p, vocab].

    TensorFlow, training: the same matmul, with a gradient that computes the table's gradient
    in its own [vocab, hidden] layout (upstream transposed times hidden). TensorFlow's gradient
    of the composed form computes it as [hidden, vocab] and then transposes it: a pass over the
    largest gradient of the model (15.6M values at BERT's vocabulary and hidden size 512).
    """
    import tensorflow as tf

    @tf.custom_gradient
    def logits(hidden, word_embeddings):
        rows = tf.reshape(hidden, [-1, hidden.shape[-1]])  # [b * p, hidden]
        vocab_size = tf.shape(word_embeddings)[0]

        def gradient(upstream):
            upstream = tf.reshape(upstream, [-1, vocab_size])  # [b * p, vocab]
            return (tf.reshape(tf.matmul(upstream, word_embeddings), tf.shape(hidden)),
                    tf.matmul(upstream, rows, transpose_a=True))

        output = tf.matmul(rows, word_embeddings, transpose_b=True)
        return tf.reshape(output, tf.concat([tf.shape(hidden)[:-1], [vocab_size]], 0)), gradient

    return logits(hidden, word_embeddings)


class NextSentenceHead(keras.layers.Layer):
    """Classifies whether segment B follows A (label 0) or is a random sentence (label 1).

    The weights are stored as in the original: `output_weights` [2, hidden], `output_bias` [2].

    Call arguments:
      pooled_output: float [batch, hidden_size].
    Returns:
      next_sentence_logits: float32 [batch, 2].
    """

    def __init__(self, hidden_size, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            name="output_weights", shape=(2, self.hidden_size),
            initializer=keras.initializers.TruncatedNormal(stddev=self.initializer_range))
        self.output_bias = self.add_weight(name="output_bias", shape=(2,), initializer="zeros")
        self.built = True

    def call(self, pooled_output):
        logits = ops.matmul(pooled_output, ops.transpose(ops.cast(self.output_weights, pooled_output.dtype)))
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def compute_output_shape(self, input_shape):
        return (input_shape[0], 2)

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, initializer_range=self.initializer_range)
        return config
