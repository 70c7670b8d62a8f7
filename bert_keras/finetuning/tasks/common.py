"""Pieces shared by the task readers: the error type, file checks and tf.data conversion.

Nothing here imports TensorFlow at module level; `to_tf_dataset` imports it when called.
"""

import logging
import os

from bert_keras.common.errors import BertKerasError

logger = logging.getLogger("bert_keras.finetuning.tasks")

# Label id for positions that carry no label (wordpieces after the first, special tokens,
# padding); the loss and the metrics skip them.
IGNORE_LABEL_ID = -100


class DataFormatError(BertKerasError):
    """An input data file is missing or does not follow its official format.

    The message names the file and, where there is one, the line.
    """


def check_file(path, what="data file"):
    """Returns `path` as a string; raises DataFormatError when it is not an existing file."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        if os.path.isdir(path):
            raise DataFormatError(f"{path}: expected a {what} but found a directory")
        raise DataFormatError(f"{path}: {what} not found")
    return path


def read_text_lines(path):
    """Yields `(line_number, line)` of a UTF-8 text file, without the line break.

    Only "\\n" and "\\r\\n" end a line (not the other Unicode line breaks that `str.splitlines`
    knows), so the line numbers match what an editor shows.
    """
    with open(path, "rb") as f:
        for line_number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise DataFormatError(
                    f"{path}: line {line_number}: not valid UTF-8 ({error})") from error
            if line.endswith("\n"):
                line = line[:-1]
            if line.endswith("\r"):
                line = line[:-1]
            if line_number == 1 and line.startswith("\ufeff"):
                line = line[1:]
            yield line_number, line


def to_tf_dataset(inputs, labels=None):
    """A `tf.data.Dataset` of `inputs` (a dict of equal-length arrays), paired with `labels`.

    `labels` is an array, a dict of arrays, or None (then the dataset yields `inputs` alone).
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    if labels is None:
        return tf.data.Dataset.from_tensor_slices(dict(inputs))
    if isinstance(labels, dict):
        labels = dict(labels)
    return tf.data.Dataset.from_tensor_slices((dict(inputs), labels))
