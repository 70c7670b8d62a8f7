"""What the raw-text task exports share: UTF-8 clean-up, character offsets, label names.

Character offsets count Unicode code points (Python `str` indices) of the input after invalid
UTF-8 bytes were replaced by U+FFFD; for valid UTF-8 input they index the input itself.

Example:

>>> import tensorflow as tf
>>> char_offsets(tf.constant(["h\u00e9llo"]), tf.constant([[0, 3, 6]])).numpy().tolist()
[[0, 2, 5]]
"""

import tensorflow as tf

from bert_keras.common.errors import BertKerasError

NEG_INF = -1e30  # the score of impossible choices
# Sequences are cut to the batch's longest, rounded up to a multiple of this.
LENGTH_MULTIPLE = 16


class TaskExportError(BertKerasError):
    """A fine-tuned model directory cannot be exported as a raw-text task model."""


def sanitize_utf8(text):
    """string [batch] with every invalid UTF-8 byte sequence replaced by U+FFFD."""
    return tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace",
                                        replacement_char=0xFFFD, replace_control_characters=False)


def char_offsets(text, byte_offsets):
    """Code point offsets of byte offsets: text string [batch], byte_offsets int [batch, k]."""
    byte_offsets = tf.cast(byte_offsets, tf.int32)
    texts = tf.broadcast_to(text[:, None], tf.shape(byte_offsets))
    prefixes = tf.strings.substr(texts, tf.zeros_like(byte_offsets), byte_offsets)
    return tf.strings.length(prefixes, unit="UTF8_CHAR")


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


def same_batch(first_name, first, **others):
    """`first` and `others` (string tensors, batch first) with an in-graph check that they hold
    the same number of rows, naming them: e.g. one context per question. Returns the tensors in
    order (the check runs before anything reads them).

    >>> same_batch("question", tf.constant(["a", "b"]), context=tf.constant(["c"]))
    Traceback (most recent call last):
    tensorflow.python.framework.errors_impl.InvalidArgumentError: ...question and context must have the same batch size (one context per question)...
    """
    batch = tf.shape(first)[0]
    checks = [tf.debugging.assert_equal(
        tf.shape(value)[0], batch,
        message=f"{first_name} and {name} must have the same batch size (one {name} per "
        f"{first_name})") for name, value in others.items()]
    with tf.control_dependencies(checks):
        return [tf.identity(first)] + [tf.identity(value) for value in others.values()]


def column(value, rows):
    return tf.RaggedTensor.from_tensor(tf.fill([rows, 1], tf.cast(value, tf.int32)))


def label_names(task_config, count):
    names = task_config.get("label_names")
    if names is None:
        return [str(i) for i in range(count)]
    names = [str(name) for name in names]
    if len(names) != count:
        raise TaskExportError(f"task_config.json has {len(names)} label_names but the head has "
                              f"{count} outputs")
    return names


__all__ = ["TaskExportError", "NEG_INF", "LENGTH_MULTIPLE", "sanitize_utf8", "char_offsets",
           "cut_to_longest", "pad_positions", "column", "label_names"]
