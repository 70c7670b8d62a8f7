"""What the exports share: batches cut to their longest sequence, and per-position outputs
padded back. (The families' raw-text serving shares `bert_keras.finetuning.tasks.serving`.)

Example:

>>> import tensorflow as tf
>>> features = {"input_mask": tf.constant([[1, 1, 0] + [0] * 29])}
>>> int(cut_to_longest(features, 32)[1])
16
"""

import tensorflow as tf

# Sequences are cut to the batch's longest, rounded up to a multiple of this.
LENGTH_MULTIPLE = 16


def cut_to_longest(features, max_length, multiple=LENGTH_MULTIPLE):
    """Packed features cut to the batch's longest sequence, rounded up to `multiple`.

    features: dict of int32 [..., max_length] with "input_mask" (1 = real token). Returns
    (the dict cut to [..., length], length): every real token is kept, and since padding is
    masked out of attention, the model's outputs at real positions are those of the full
    length, for the cost of the batch's longest sequence instead of `max_length`.
    """
    longest = tf.reduce_max(tf.reduce_sum(features["input_mask"], axis=-1))
    length = (tf.maximum(longest, 1) + multiple - 1) // multiple * multiple
    length = tf.minimum(length, max_length)
    return {name: value[..., :length] for name, value in features.items()}, length


def pad_positions(values, max_length, value=0.0):
    """values [windows, length, ...] padded with `value` to [windows, max_length, ...]."""
    rank = len(values.shape)
    padding = [[0, 0], [0, max_length - tf.shape(values)[1]]] + [[0, 0]] * (rank - 2)
    return tf.pad(values, padding, constant_values=value)


__all__ = ["LENGTH_MULTIPLE", "cut_to_longest", "pad_positions"]
