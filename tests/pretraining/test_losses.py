"""The masked LM sums: TensorFlow's one-pass cross entropy against Keras' loss, with gradients."""

import keras
import numpy as np
import tensorflow as tf

from bert_keras.pretraining import losses


def _logits_and_labels(seed=0, batch=3, predictions=5, vocab=257):
    rng = np.random.default_rng(seed)
    logits = tf.constant(rng.normal(0, 4, (batch, predictions, vocab)), tf.float32)
    labels = rng.integers(0, vocab, (batch, predictions)).astype(np.int32)
    labels[0, 0] = int(np.argmax(logits[0, 0]))  # at least one right, one arg max to match
    weights = np.ones((batch, predictions), np.float32)
    weights[-1, -2:] = 0.0  # padding slots
    return logits, labels, weights


def _sums_and_gradient(logits, labels, weights):
    with tf.GradientTape() as tape:
        tape.watch(logits)
        sums = losses.masked_lm_sums(logits, labels, weights)
    return sums, tape.gradient(sums["masked_lm_loss_sum"], logits)


def test_the_one_pass_cross_entropy_equals_keras_loss_and_its_gradient():
    logits, labels, weights = _logits_and_labels()
    sums, gradient = _sums_and_gradient(logits, labels, weights)

    cross_entropy = keras.ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    correct = (np.argmax(logits, axis=-1) == labels) * weights
    # The gradient of sum(w * CE) is w * (softmax - one_hot).
    expected_gradient = (tf.nn.softmax(logits) - tf.one_hot(labels, logits.shape[-1])) * weights[..., None]
    np.testing.assert_allclose(sums["masked_lm_loss_sum"], np.sum(cross_entropy * weights), rtol=1e-6)
    assert float(sums["masked_lm_correct"]) == correct.sum() >= 1
    assert float(sums["masked_lm_weight_sum"]) == weights.sum()
    np.testing.assert_allclose(gradient, expected_gradient, atol=1e-6)
    assert not np.any(gradient[-1, -2:])  # padding slots get no gradient


def test_inside_a_compiled_step_and_with_a_label_outside_the_vocabulary():
    logits, labels, weights = _logits_and_labels(seed=1)
    eager, _ = _sums_and_gradient(logits, labels, weights)
    compiled, _ = tf.function(_sums_and_gradient)(logits, labels, weights)
    np.testing.assert_allclose(compiled["masked_lm_loss_sum"], eager["masked_lm_loss_sum"], rtol=1e-6)
    labels[1, 1] = logits.shape[-1]
    assert np.isnan(float(losses.masked_lm_sums(logits, labels, weights)["masked_lm_loss_sum"]))
