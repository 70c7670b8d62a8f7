"""The masked LM head's training form (TensorFlow) against its composed form: logits, gradients."""

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.model.layers import BertEmbeddings
from bert_keras.model.pretraining_heads import MaskedLMHead


def _logits_and_gradients(head, sequence_output, positions, upstream, training):
    with tf.GradientTape() as tape:
        tape.watch(sequence_output)
        logits = head(sequence_output, positions, training=training)
    variables = [head.embeddings.word_embeddings, head.output_bias, head.transform.kernel]
    gradients = tape.gradient(logits, [sequence_output] + variables, output_gradients=upstream)
    return logits, [tf.convert_to_tensor(g) for g in gradients]


@pytest.mark.parametrize("dtype, tolerance", [("float32", 2e-5), ("mixed_bfloat16", 2e-2)])
def test_training_form_matches_the_composed_logits_and_gradients(dtype, tolerance):
    embeddings = BertEmbeddings(vocab_size=50, hidden_size=16, dtype=dtype)
    embeddings.build()
    head = MaskedLMHead(embeddings, hidden_act="gelu", dtype=dtype)
    head.build()
    rng = np.random.default_rng(0)
    head.output_bias.assign(rng.normal(size=[50]).astype("float32"))
    sequence_output = tf.constant(rng.normal(size=[3, 7, 16]), head.compute_dtype)
    positions = tf.constant([[1, 2, 6, 0], [0, 0, 3, 5], [6, 5, 4, 3]], tf.int32)
    upstream = tf.constant(rng.normal(size=[3, 4, 50]), tf.float32)

    composed = _logits_and_gradients(head, sequence_output, positions, upstream, training=False)
    trained = _logits_and_gradients(head, sequence_output, positions, upstream, training=True)

    assert trained[0].dtype == tf.float32 and trained[0].shape == (3, 4, 50)
    np.testing.assert_allclose(trained[0], composed[0], rtol=tolerance, atol=tolerance)
    for got, want in zip(trained[1], composed[1]):
        assert got.dtype == want.dtype and got.shape == want.shape
        scale = float(tf.reduce_max(tf.abs(tf.cast(want, tf.float32))))
        assert scale > 0.1  # a gradient that flows, not zeros on both sides
        np.testing.assert_allclose(tf.cast(got, tf.float32), tf.cast(want, tf.float32),
                                   rtol=tolerance, atol=tolerance * scale)
    # The table's gradient is float32 [vocab, hidden], as its variable, in either dtype policy.
    assert trained[1][1].dtype == tf.float32 and trained[1][1].shape == (50, 16)


def test_table_gradient_is_upstream_transposed_times_the_transformed_hidden_states():
    embeddings = BertEmbeddings(vocab_size=11, hidden_size=8)
    embeddings.build()
    head = MaskedLMHead(embeddings, hidden_act="gelu")
    head.build()
    rng = np.random.default_rng(1)
    sequence_output = tf.constant(rng.normal(size=[2, 5, 8]), tf.float32)
    positions = tf.constant([[4, 1, 0], [2, 2, 3]], tf.int32)
    upstream = rng.normal(size=[2, 3, 11]).astype("float32")
    _, gradients = _logits_and_gradients(head, sequence_output, positions, tf.constant(upstream),
                                         training=True)
    gathered = tf.gather(sequence_output, positions, batch_dims=1)
    hidden = head.layer_norm(head.transform(gathered)).numpy().reshape(-1, 8)
    np.testing.assert_allclose(gradients[1], upstream.reshape(-1, 11).T @ hidden,
                               rtol=1e-5, atol=1e-5)
