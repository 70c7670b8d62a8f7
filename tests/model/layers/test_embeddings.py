"""BertEmbeddings in mixed precision: the word table stays float32, only the gathered rows cast."""

import numpy as np
import tensorflow as tf

from bert_keras.model.layers import BertEmbeddings


def test_mixed_bfloat16_gathers_float32_rows_and_casts_only_them():
    layer = BertEmbeddings(vocab_size=30, hidden_size=8, max_position_embeddings=16,
                           dropout_rate=0.0, dtype="mixed_bfloat16")
    layer.build()
    ids = tf.constant([[3, 29, 0, 7]], tf.int32)
    types = tf.constant([[0, 0, 1, 1]], tf.int32)
    with tf.GradientTape() as tape:
        output = layer(ids, types)
        loss = tf.reduce_sum(tf.cast(output, tf.float32) * tf.range(8, dtype=tf.float32))
    gradient = tape.gradient(loss, layer.word_embeddings.value)
    assert layer.word_embeddings.dtype == "float32" and output.dtype == tf.bfloat16
    # The same sum as with the table cast first: casting commutes with the gather.
    table = tf.cast(layer.word_embeddings.value, tf.bfloat16)
    word = tf.gather(table, ids)
    segment = tf.matmul(tf.one_hot(types, 2, dtype=tf.bfloat16),
                        tf.cast(layer.token_type_embeddings.value, tf.bfloat16))
    position = tf.cast(layer.position_embeddings.value[:4], tf.bfloat16)[None]
    expected = layer.layer_norm(word + position + segment)
    np.testing.assert_array_equal(tf.cast(output, tf.float32), tf.cast(expected, tf.float32))
    # The gradient reaches only the gathered rows of the float32 table.
    dense = tf.convert_to_tensor(gradient).numpy()
    assert dense.dtype == np.float32
    assert set(np.flatnonzero(np.abs(dense).sum(axis=1))) == {0, 3, 7, 29}
