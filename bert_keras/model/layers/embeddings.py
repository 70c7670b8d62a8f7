"""The BERT input embeddings: word + position + segment, then layer norm and dropout."""

import keras
from keras import ops

from bert_keras.model.layers.dropout import Dropout


class BertEmbeddings(keras.layers.Layer):
    """Sums word, position and token-type (segment) embeddings, as in the BERT paper (Fig. 2).

    Call arguments:
      input_word_ids: int32 [batch, seq_length].
      input_type_ids: int32 [batch, seq_length], the segment id (0 for A, 1 for B).
    Returns:
      float [batch, seq_length, hidden_size] in the layer's compute dtype.

    Example:

    >>> import numpy as np
    >>> layer = BertEmbeddings(vocab_size=10, hidden_size=8, max_position_embeddings=16)
    >>> layer(np.zeros((2, 5), "int32"), np.zeros((2, 5), "int32")).shape
    TensorShape([2, 5, 8])
    """

    def __init__(self, vocab_size, hidden_size, max_position_embeddings=512, type_vocab_size=2,
                 initializer_range=0.02, layer_norm_eps=1e-12, dropout_rate=0.1, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.dropout_rate = dropout_rate
        self.layer_norm = keras.layers.LayerNormalization(epsilon=layer_norm_eps, name="layer_norm",
                                                          dtype=self.dtype_policy)
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        initializer = keras.initializers.TruncatedNormal(stddev=self.initializer_range)
        # Not autocast: in mixed precision the rows are gathered in float32 and only they are
        # cast, instead of casting the whole [vocab, hidden] table on every call. The masked LM
        # head casts the table itself for its output projection.
        self.word_embeddings = self.add_weight(
            name="word_embeddings", shape=(self.vocab_size, self.hidden_size),
            initializer=initializer, autocast=False)
        self.position_embeddings = self.add_weight(
            name="position_embeddings", shape=(self.max_position_embeddings, self.hidden_size),
            initializer=initializer)
        self.token_type_embeddings = self.add_weight(
            name="token_type_embeddings", shape=(self.type_vocab_size, self.hidden_size),
            initializer=initializer)
        self.layer_norm.build((None, None, self.hidden_size))
        self.built = True

    def call(self, input_word_ids, input_type_ids, training=None):
        seq_length = ops.shape(input_word_ids)[1]
        word = ops.cast(ops.take(self.word_embeddings, input_word_ids, axis=0),
                        self.compute_dtype)  # [batch, seq, hidden]
        # Token types as a one-hot matmul, as the original does for this small table. The
        # gradient is then a [types, batch*seq] x [batch*seq, hidden] matmul rather than a
        # scatter-add of every position into two rows, which serializes on a GPU (23 ms of a
        # 74 ms BERT-large step on an H100).
        types = ops.one_hot(input_type_ids, self.type_vocab_size, dtype=self.compute_dtype)
        segment = ops.matmul(types, ops.cast(self.token_type_embeddings, self.compute_dtype))
        position = self.position_embeddings[:seq_length][None]  # [1, seq, hidden]
        embeddings = self.layer_norm(word + position + segment)
        return self.dropout(embeddings, training=training)

    def compute_output_shape(self, input_word_ids_shape, input_type_ids_shape=None):
        return tuple(input_word_ids_shape) + (self.hidden_size,)

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, hidden_size=self.hidden_size,
                      max_position_embeddings=self.max_position_embeddings,
                      type_vocab_size=self.type_vocab_size, initializer_range=self.initializer_range,
                      layer_norm_eps=self.layer_norm_eps, dropout_rate=self.dropout_rate)
        return config
