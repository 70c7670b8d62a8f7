"""What every family's raw-text serving shares: the `Serving` base its families extend, UTF-8
clean-up, character offsets, batch checks and label names.

A family's `serving.py` defines a `Serving` subclass per served head; the raw-text task model
(`bert_keras.export.task_export.TaskModule`) builds it on itself, and the subclass's `build()`
sets the module's `serving_default` signature (and `encode`, and the variables a client reads,
e.g. `label_names`). Character offsets count Unicode code points (Python `str` indices) of the
input after invalid UTF-8 bytes were replaced by U+FFFD; for valid UTF-8 input they index the
input itself.

Example:

>>> import tensorflow as tf
>>> char_offsets(tf.constant(["h\u00e9llo"]), tf.constant([[0, 3, 6]])).numpy().tolist()
[[0, 2, 5]]
"""

import tensorflow as tf

from bert_keras.common.errors import BertKerasError

NEG_INF = -1e30  # the score of impossible choices


class TaskExportError(BertKerasError):
    """A fine-tuned model directory cannot be exported as a raw-text task model."""


class Serving:
    """A head's raw-text serving, built on a `TaskModule`.

    Reads what the module holds (`_task_config`, `_model`, `_seq_length`, `_max_windows`,
    `_cls`, `_sep`, `_pad`, `_tokenize(strings)`, `_run_model(features)`) as its own
    attributes; `build()` sets the module's `serving_default`.

    Class attributes:
      min_seq_length: the shortest window the head can be served with.
      position_padding: for heads with per-position outputs ([windows, length, ...]), the value
        the module pads them back to seq_length with; None for per-sequence outputs.
    """

    min_seq_length = 4
    position_padding = None

    def __init__(self, module):
        self.module = module

    def __getattr__(self, name):
        # Only for names this object does not hold: the module's settings and helpers.
        if name == "module":
            raise AttributeError(name)
        return getattr(self.module, name)

    def build(self):
        raise NotImplementedError


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
    """int32 ragged [rows, 1] filled with `value` (e.g. [CLS] before every window)."""
    return tf.RaggedTensor.from_tensor(tf.fill([rows, 1], tf.cast(value, tf.int32)))


def label_names(task_config, count):
    """The `count` label names of task_config.json ("0", "1", ... when it has none)."""
    names = task_config.get("label_names")
    if names is None:
        return [str(i) for i in range(count)]
    names = [str(name) for name in names]
    if len(names) != count:
        raise TaskExportError(f"task_config.json has {len(names)} label_names but the head has "
                              f"{count} outputs")
    return names


__all__ = ["Serving", "TaskExportError", "NEG_INF", "sanitize_utf8", "char_offsets", "same_batch",
           "column", "label_names"]
