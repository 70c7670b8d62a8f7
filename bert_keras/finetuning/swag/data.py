"""SWAG: the official CSV files (train.csv, val.csv, test.csv) and the 4-way choice inputs.

Header: `,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,
label` (test.csv has no `label`). As in the BERT paper, each example gives four sentence pairs: the
context `sent1` as sentence A and `sent2 + " " + ending<k>` as sentence B (`choice_texts`, which
the raw-text export `bert_keras.finetuning.swag.serving` runs in its graph too); the label
(0-3) is the right ending. Scored with accuracy (`bert_keras.metrics.classification.accuracy`).

Example:

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "val.csv")
>>> _ = open(path, "w").write(
...     ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,"
...     "ending0,ending1,ending2,ending3,label\\n"
...     "0,v1,5,She sits down. She,She sits down.,She,gold,eats.,runs.,sleeps.,flies.,0\\n")
>>> example = read_swag_examples(path)[0]
>>> example.context, example.endings[1], example.label
('She sits down.', 'She runs.', 0)
>>> arrays = examples_to_arrays([example])
>>> arrays["text_a"].shape, arrays["text_b"][0, 3], arrays["label"].tolist()
((1, 4), 'She flies.', [0])
"""

import csv
import dataclasses

import numpy as np

from bert_keras.finetuning.tasks.common import DataFormatError, check_file

NUM_CHOICES = 4
_REQUIRED = ("video-id", "sent1", "sent2", "ending0", "ending1", "ending2", "ending3")


@dataclasses.dataclass
class SwagExample:
    """`context` = sent1; `endings[k]` = sent2 + " " + ending<k>; label 0-3 or None (test)."""

    example_id: str
    context: str
    endings: list
    label: int = None


def read_swag_examples(path):
    """The examples of one SWAG CSV file; DataFormatError names the file and line on bad rows."""
    path = check_file(path, "SWAG CSV file")
    examples = []
    with open(path, "r", encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            raise DataFormatError(f"{path}: the file is empty") from None
        except csv.Error as error:
            raise DataFormatError(f"{path}: line 1: {error}") from error
        missing = [name for name in _REQUIRED if name not in header]
        if missing:
            raise DataFormatError(f"{path}: line 1: header lacks column(s) {missing}; expected "
                                  f"the official SWAG header with {list(_REQUIRED)}")
        column = {name: header.index(name) for name in header}
        has_label = "label" in column
        id_column = column.get("", 0)
        while True:
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as error:
                raise DataFormatError(f"{path}: line {reader.line_num}: {error}") from error
            line = reader.line_num
            if not row:
                continue
            if len(row) != len(header):
                raise DataFormatError(f"{path}: line {line}: expected {len(header)} fields, "
                                      f"found {len(row)}")
            label = None
            if has_label:
                text = row[column["label"]].strip()
                if text not in ("0", "1", "2", "3"):
                    raise DataFormatError(f"{path}: line {line}: label {text!r} is not 0, 1, 2 "
                                          "or 3")
                label = int(text)
            endings = choice_texts(
                np.asarray(row[column["sent2"]], dtype=object),
                np.asarray([row[column[f"ending{k}"]] for k in range(NUM_CHOICES)], dtype=object))
            examples.append(SwagExample(example_id=row[id_column] or f"line-{line}",
                                        context=row[column["sent1"]], endings=endings.tolist(),
                                        label=label))
    return examples


def choice_texts(sent2, endings, xp=np):
    """Sentence B of each choice: `sent2 + " " + ending`, or whichever of the two is not empty.

    Args:
      sent2: the start of the next sentence, e.g. a 0-d object array [] or a tf.string [batch, 1].
      endings: the endings, broadcasting with `sent2`, e.g. object [num_choices] or tf.string
        [batch, num_choices].
      xp: `np` for object arrays of Python strings, `tf` for string tensors (in a graph).
    Returns:
      The joined texts, the broadcast shape (object array or tf.string).

    Example:

    >>> choice_texts(np.asarray("She", dtype=object),
    ...              np.asarray(["eats.", "", "runs."], dtype=object)).tolist()
    ['She eats.', 'She', 'She runs.']
    """
    joined = xp.where(endings == "", sent2, sent2 + " " + endings)
    return xp.where(sent2 == "", endings, joined)


def examples_to_arrays(examples):
    """{"text_a": [N, 4], "text_b": [N, 4] (str, dtype object), "label": int32 [N] if labelled}.

    Row i, column k is the pair (context, choice k) of example i; flatten to [N * 4] pairs for
    the encoder and reshape its scores back to [N, 4].
    """
    text_a = np.asarray([[e.context] * NUM_CHOICES for e in examples], dtype=object)
    text_b = np.asarray([list(e.endings) for e in examples], dtype=object)
    text_a = text_a.reshape(len(examples), NUM_CHOICES)
    text_b = text_b.reshape(len(examples), NUM_CHOICES)
    arrays = {"text_a": text_a, "text_b": text_b}
    if examples and all(e.label is not None for e in examples):
        arrays["label"] = np.asarray([e.label for e in examples], np.int32)
    return arrays
