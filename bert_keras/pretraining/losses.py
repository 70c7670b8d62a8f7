"""Pre-training losses and metrics: masked LM (weighted by `masked_lm_weights`) and next sentence.

Everything is computed as *sums* (loss sum, weight sum, correct predictions), so that replicas,
micro-batches and steps can be added up exactly and divided once:

    masked_lm_loss = sum(w * cross_entropy) / sum(w)        over the global batch
    next_sentence_loss = sum(cross_entropy) / batch_size
    loss = masked_lm_loss + next_sentence_loss              (the paper's objective)

The released code divides the MLM sum by `sum(w) + 1e-5` per core; here the denominator is the
global batch's weight, which makes one step independent of how the batch is split.

Written in `keras.ops`: the TensorFlow engine (`pretraining.step`) and `keras.Model.fit` on
any backend (`pretraining.keras_engine`) compute the same loss with the same code. One exception,
for speed: on TensorFlow the masked LM's cross entropy and arg max over the vocabulary are one
XLA-compiled pass, and its gradient (softmax minus the one-hot label) another, instead of
TensorFlow's cross-entropy kernel and a separate arg max (22 against 8 ms a step for BERT-small's
320 predictions over 30,522 tokens, `docs/benchmarks.md`). The same formula; a label outside the
vocabulary gives a NaN loss there (the trainer stops on it) where TensorFlow's kernel raises.

Example:

>>> import numpy as np
>>> logits = np.log(np.array([[[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]]], "float32"))
>>> sums = masked_lm_sums(logits, np.array([[0, 1]]), np.array([[1.0, 1.0]], "float32"))
>>> round(float(sums["masked_lm_loss_sum"]), 4), float(sums["masked_lm_correct"])
(2.6593, 1.0)
"""

import keras
from keras import ops

from bert_keras.common.xla import xla_function

SUM_NAMES = ("masked_lm_loss_sum", "masked_lm_weight_sum", "masked_lm_correct",
             "next_sentence_loss_sum", "next_sentence_correct", "next_sentence_count")


def masked_lm_sums(mlm_logits, masked_lm_ids, masked_lm_weights):
    """Weighted sums of the masked LM predictions.

    Args:
      mlm_logits: float32 [batch, predictions, vocab_size].
      masked_lm_ids: int [batch, predictions], the original tokens.
      masked_lm_weights: float [batch, predictions], 1 for real predictions, 0 for padding.
    Returns:
      {"masked_lm_loss_sum", "masked_lm_weight_sum", "masked_lm_correct"}: float32 scalars.
    """
    logits = ops.cast(mlm_logits, "float32")
    labels = ops.cast(masked_lm_ids, "int32")
    weights = ops.cast(masked_lm_weights, "float32")
    # Padding slots carry weight 0; their (finite) cross entropy is multiplied away.
    if keras.backend.backend() == "tensorflow":
        cross_entropy, correct = _one_pass_cross_entropy(logits, labels)
    else:
        cross_entropy = ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)
        correct = _correct(logits, labels)
    return {
        "masked_lm_loss_sum": ops.sum(cross_entropy * weights),
        "masked_lm_weight_sum": ops.sum(weights),
        "masked_lm_correct": ops.sum(correct * weights),
    }


def _cross_entropy_forward(logits, labels):  # [n, vocab], [n]
    import tensorflow as tf

    shifted = logits - tf.reduce_max(logits, axis=-1, keepdims=True)
    log_sum = tf.math.log(tf.reduce_sum(tf.exp(shifted), axis=-1))
    label_logit = tf.gather(shifted, labels[:, None], batch_dims=1)[:, 0]
    valid = tf.logical_and(labels >= 0, labels < tf.shape(logits)[-1])
    cross_entropy = tf.where(valid, log_sum - label_logit, float("nan"))
    correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels),
                      tf.float32)
    return cross_entropy, correct


def _cross_entropy_backward(logits, labels, upstream):
    import tensorflow as tf

    probabilities = tf.nn.softmax(logits)
    return (probabilities - tf.one_hot(labels, tf.shape(logits)[-1])) * upstream[:, None]


_cross_entropy_pass = xla_function(_cross_entropy_forward)
_cross_entropy_gradient_pass = xla_function(_cross_entropy_backward)


def _one_pass_cross_entropy(logits, labels):
    """(cross entropy, 1.0 where the arg max is the label), each [...] for float32 logits
    [..., vocab] and int32 labels [...], with a custom gradient; TensorFlow only, each direction
    one XLA-compiled function."""
    import tensorflow as tf

    shape = tf.shape(labels)
    flat_labels = tf.reshape(labels, [-1])

    @tf.custom_gradient
    def cross_entropy(logits):
        flat_logits = tf.reshape(logits, [-1, tf.shape(logits)[-1]])
        values, correct = _cross_entropy_pass(flat_logits, flat_labels)

        def gradient(upstream, _):
            return tf.reshape(_cross_entropy_gradient_pass(flat_logits, flat_labels,
                                                           tf.reshape(upstream, [-1])),
                              tf.shape(logits))
        return (tf.reshape(values, shape), tf.reshape(correct, shape)), gradient

    cross_entropy_values, correct = cross_entropy(logits)
    return cross_entropy_values, tf.stop_gradient(correct)


def _correct(logits, labels):
    """1.0 where the arg max of `logits` is `labels`, else 0.0."""
    return ops.cast(ops.equal(ops.cast(ops.argmax(logits, axis=-1), "int32"), labels), "float32")


def next_sentence_sums(next_sentence_logits, next_sentence_labels):
    """Sums of the next-sentence predictions.

    Args:
      next_sentence_logits: float32 [batch, 2].
      next_sentence_labels: int [batch] or [batch, 1]; 0 = B follows A, 1 = B is random.
    Returns:
      {"next_sentence_loss_sum", "next_sentence_correct", "next_sentence_count"}: float32 scalars.
    """
    logits = ops.cast(next_sentence_logits, "float32")
    labels = ops.reshape(ops.cast(next_sentence_labels, "int32"), (-1,))
    cross_entropy = ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return {
        "next_sentence_loss_sum": ops.sum(cross_entropy),
        "next_sentence_correct": ops.sum(_correct(logits, labels)),
        "next_sentence_count": ops.cast(ops.shape(labels)[0], "float32"),
    }


def pretraining_sums(outputs, labels):
    """All sums for a batch of model `outputs` and `labels`; NSP sums are 0 without an NSP head."""
    sums = masked_lm_sums(outputs["mlm_logits"], labels["masked_lm_ids"], labels["masked_lm_weights"])
    if "next_sentence_logits" in outputs:
        sums.update(next_sentence_sums(outputs["next_sentence_logits"], labels["next_sentence_labels"]))
    else:
        sums.update({name: ops.zeros((), "float32") for name in SUM_NAMES
                     if name.startswith("next_sentence")})
    return sums


def pretraining_loss(sums, masked_lm_denominator, next_sentence_denominator):
    """The loss to minimize: MLM loss sum / MLM denominator + NSP loss sum / NSP denominator.

    The denominators are those of the whole (global) batch, so that the losses of micro-batches
    and replicas add up to the batch's loss. A denominator of 0 (no NSP head) drops the term.
    """
    return (_divide_no_nan(sums["masked_lm_loss_sum"], masked_lm_denominator)
            + _divide_no_nan(sums["next_sentence_loss_sum"], next_sentence_denominator))


def _divide_no_nan(numerator, denominator):
    """numerator / denominator, and 0 where the denominator is 0 (a NaN stays NaN)."""
    denominator = ops.cast(denominator, "float32")
    nonzero = ops.not_equal(denominator, 0.0)
    return ops.where(nonzero, numerator / ops.where(nonzero, denominator, 1.0), 0.0)


def metrics_from_sums(sums):
    """{"masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss", "next_sentence_accuracy",
    "loss"} as Python floats from (accumulated) sums; NSP entries are absent without NSP."""
    sums = {name: float(value) for name, value in sums.items()}
    weight = sums.get("masked_lm_weight_sum", 0.0)
    count = sums.get("next_sentence_count", 0.0)
    metrics = {}
    if weight > 0:
        metrics["masked_lm_loss"] = sums["masked_lm_loss_sum"] / weight
        metrics["masked_lm_accuracy"] = sums["masked_lm_correct"] / weight
    if count > 0:
        metrics["next_sentence_loss"] = sums["next_sentence_loss_sum"] / count
        metrics["next_sentence_accuracy"] = sums["next_sentence_correct"] / count
    metrics["loss"] = metrics.get("masked_lm_loss", 0.0) + metrics.get("next_sentence_loss", 0.0)
    return metrics


__all__ = ["SUM_NAMES", "masked_lm_sums", "next_sentence_sums", "pretraining_sums",
           "pretraining_loss", "metrics_from_sums"]
