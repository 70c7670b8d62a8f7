"""GLUE: the official TSV files (or tensorflow-datasets), label lists and the paper's metrics.

Tasks: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli. Splits: train, dev, test; MNLI has
dev_matched, dev_mismatched, test_matched, test_mismatched instead of dev and test.

Files are looked up as `<data_dir>/<split>.tsv` (the original BERT `--data_dir=$GLUE_DIR/MRPC`)
or `<data_dir>/<TaskDir>/<split>.tsv` (the whole GLUE folder, TaskDir as the GLUE download
script names it: CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI). Every row must have as
many tab-separated fields as the header (CoLA train/dev: no header, 4 fields
`source label original_label sentence`), and its label must be in the task's label list (STS-B:
a number); otherwise a DataFormatError names the file and line. Fields are not quoted (a `"` is
an ordinary character), as in the original reader.

Example:

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> _ = open(os.path.join(folder, "dev.tsv"), "w").write("sentence\\tlabel\\ngreat film\\t1\\n")
>>> examples = read_glue_examples("sst2", folder, "dev")
>>> examples[0]
InputExample(guid='dev-2', text_a='great film', text_b=None, label='1')
>>> arrays = examples_to_arrays(examples, "sst2")
>>> arrays["text_a"].tolist(), arrays["label"].tolist()
(['great film'], [1])
>>> compute_metrics("mrpc", predictions=[1, 0, 1, 1], labels=[1, 0, 0, 1])
{'accuracy': 0.75, 'f1': 0.8}
"""

import dataclasses
import logging
import math
import os

import numpy as np

from bert_keras.finetuning.tasks.common import DataFormatError, read_text_lines
from bert_keras.metrics import classification

logger = logging.getLogger("bert_keras.finetuning.glue.data")


@dataclasses.dataclass(frozen=True)
class GlueTask:
    """How one GLUE task's files look and how it is scored.

    Columns are header names, or field indices for files without a header.
    `label_list` is None for the regression task (STS-B). `metrics` are the names
    `compute_metrics` returns; `paper_metric` is the one the BERT paper's Table 1 reports.
    """

    name: str
    directory: str
    label_list: tuple
    text_a: object
    text_b: object
    label: object
    test_text_a: object
    test_text_b: object
    metrics: tuple
    paper_metric: str
    splits: tuple = ("train", "dev", "test")
    eval_splits: tuple = ("dev",)
    headerless_splits: tuple = ()
    headerless_num_fields: int = 0
    tfds_name: str = ""
    tfds_text_a: str = ""
    tfds_text_b: str = ""
    tfds_label_names: tuple = ()

    @property
    def is_regression(self):
        return self.label_list is None

    @property
    def num_labels(self):
        return 1 if self.label_list is None else len(self.label_list)

    @property
    def text_pair(self):
        """Whether the task takes two texts (text_a, text_b)."""
        return self.text_b is not None


_BINARY = ("0", "1")
_ENTAILMENT = ("entailment", "not_entailment")

TASKS = {
    "cola": GlueTask(
        "cola", "CoLA", _BINARY, text_a=3, text_b=None, label=1, test_text_a="sentence",
        test_text_b=None, metrics=("matthews_corrcoef", "accuracy"),
        paper_metric="matthews_corrcoef", headerless_splits=("train", "dev"),
        headerless_num_fields=4, tfds_name="glue/cola", tfds_text_a="sentence",
        tfds_label_names=("unacceptable", "acceptable")),
    "sst2": GlueTask(
        "sst2", "SST-2", _BINARY, text_a="sentence", text_b=None, label="label",
        test_text_a="sentence", test_text_b=None, metrics=("accuracy",), paper_metric="accuracy",
        tfds_name="glue/sst2", tfds_text_a="sentence", tfds_label_names=("negative", "positive")),
    "mrpc": GlueTask(
        "mrpc", "MRPC", _BINARY, text_a="#1 String", text_b="#2 String", label="Quality",
        test_text_a="#1 String", test_text_b="#2 String", metrics=("accuracy", "f1"),
        paper_metric="f1", tfds_name="glue/mrpc", tfds_text_a="sentence1",
        tfds_text_b="sentence2", tfds_label_names=("not_equivalent", "equivalent")),
    "stsb": GlueTask(
        "stsb", "STS-B", None, text_a="sentence1", text_b="sentence2", label="score",
        test_text_a="sentence1", test_text_b="sentence2", metrics=("pearson", "spearman"),
        paper_metric="spearman", tfds_name="glue/stsb", tfds_text_a="sentence1",
        tfds_text_b="sentence2"),
    "qqp": GlueTask(
        "qqp", "QQP", _BINARY, text_a="question1", text_b="question2", label="is_duplicate",
        test_text_a="question1", test_text_b="question2", metrics=("accuracy", "f1"),
        paper_metric="f1", tfds_name="glue/qqp", tfds_text_a="question1",
        tfds_text_b="question2", tfds_label_names=("not_duplicate", "duplicate")),
    "mnli": GlueTask(
        "mnli", "MNLI", ("contradiction", "entailment", "neutral"), text_a="sentence1",
        text_b="sentence2", label="gold_label", test_text_a="sentence1",
        test_text_b="sentence2", metrics=("accuracy",), paper_metric="accuracy",
        splits=("train", "dev_matched", "dev_mismatched", "test_matched", "test_mismatched"),
        eval_splits=("dev_matched", "dev_mismatched"), tfds_name="glue/mnli",
        tfds_text_a="premise", tfds_text_b="hypothesis",
        tfds_label_names=("entailment", "neutral", "contradiction")),
    "qnli": GlueTask(
        "qnli", "QNLI", _ENTAILMENT, text_a="question", text_b="sentence", label="label",
        test_text_a="question", test_text_b="sentence", metrics=("accuracy",),
        paper_metric="accuracy", tfds_name="glue/qnli", tfds_text_a="question",
        tfds_text_b="sentence", tfds_label_names=("entailment", "not_entailment")),
    "rte": GlueTask(
        "rte", "RTE", _ENTAILMENT, text_a="sentence1", text_b="sentence2", label="label",
        test_text_a="sentence1", test_text_b="sentence2", metrics=("accuracy",),
        paper_metric="accuracy", tfds_name="glue/rte", tfds_text_a="sentence1",
        tfds_text_b="sentence2", tfds_label_names=("entailment", "not_entailment")),
    "wnli": GlueTask(
        "wnli", "WNLI", _BINARY, text_a="sentence1", text_b="sentence2", label="label",
        test_text_a="sentence1", test_text_b="sentence2", metrics=("accuracy",),
        paper_metric="accuracy", tfds_name="glue/wnli", tfds_text_a="sentence1",
        tfds_text_b="sentence2", tfds_label_names=("not_entailment", "entailment")),
}

# tfds label names -> our label strings, where they differ by more than the index.
_TFDS_LABEL_TO_OURS = {
    "unacceptable": "0", "acceptable": "1", "negative": "0", "positive": "1",
    "not_equivalent": "0", "equivalent": "1", "not_duplicate": "0", "duplicate": "1",
}
_TFDS_SPLITS = {"dev": "validation", "dev_matched": "validation_matched",
                "dev_mismatched": "validation_mismatched", "test_matched": "test_matched",
                "test_mismatched": "test_mismatched", "train": "train", "test": "test"}


@dataclasses.dataclass
class InputExample:
    """One sentence or sentence pair; `label` is a label string, a float (STS-B) or None (test).

    `guid` is "<split>-<line number>" for TSV files, "<split>-<index>" for tfds.
    """

    guid: str
    text_a: str
    text_b: str = None
    label: object = None


def task_spec(task):
    """The `GlueTask` named `task` (case-insensitive; "sst-2", "sts-b" also accepted)."""
    key = str(task).lower().replace("-", "")
    if key not in TASKS:
        raise ValueError(f"unknown GLUE task {task!r}; known: {', '.join(TASKS)}")
    return TASKS[key]


def is_pair_task(task_config):
    """Whether the task of a task_config.json takes two texts: its "text_pair" field, else its
    GLUE task's (False for a task of another family)."""
    if "text_pair" in task_config:
        return bool(task_config["text_pair"])
    task = str(task_config.get("task", ""))
    return task.startswith("glue/") and task_spec(task.split("/", 1)[1]).text_pair


def get_labels(task):
    """The label strings of a classification task, in label-id order (None for STS-B)."""
    labels = task_spec(task).label_list
    return None if labels is None else list(labels)


def split_path(task, data_dir, split):
    """The TSV file of a split, or a DataFormatError naming the paths tried."""
    spec = task_spec(task)
    if split not in spec.splits:
        raise ValueError(f"{spec.name} has no split {split!r}; its splits are "
                         f"{', '.join(spec.splits)}")
    data_dir = os.fspath(data_dir)
    candidates = [os.path.join(data_dir, f"{split}.tsv"),
                  os.path.join(data_dir, spec.directory, f"{split}.tsv")]
    for path in candidates:
        if os.path.isfile(path):
            return path
    raise DataFormatError(f"{spec.name} {split} split not found: tried "
                          f"{' and '.join(candidates)}")


def _column(header, column, path, line_number):
    if isinstance(column, int) or column is None:
        return column
    try:
        return header.index(column)
    except ValueError:
        raise DataFormatError(f"{path}: line {line_number}: header has no column {column!r} "
                              f"(columns: {header})") from None


def read_glue_examples(task, data_dir, split, skip_malformed=False):
    """The examples of one split of one task, read from the official TSV file.

    With `skip_malformed=True`, rows with the wrong number of fields or an unknown label are
    logged and left out instead of raising.
    """
    spec = task_spec(task)
    path = split_path(spec.name, data_dir, split)
    is_test = split.startswith("test")
    headerless = split in spec.headerless_splits
    text_a_col = spec.test_text_a if is_test else spec.text_a
    text_b_col = spec.test_text_b if is_test else spec.text_b
    label_col = None if is_test else spec.label
    examples = []
    skipped = 0
    num_fields = spec.headerless_num_fields if headerless else None
    columns = None
    if headerless:
        columns = (text_a_col, text_b_col, label_col)
    for line_number, line in read_text_lines(path):
        if columns is None:
            header = line.split("\t")
            num_fields = len(header)
            columns = tuple(_column(header, c, path, line_number)
                            for c in (text_a_col, text_b_col, label_col))
            continue
        if not line:
            continue  # an empty line (e.g. at the end of the file)
        fields = line.split("\t")
        try:
            if len(fields) != num_fields:
                raise DataFormatError(f"{path}: line {line_number}: expected {num_fields} "
                                      f"tab-separated fields, found {len(fields)}")
            label = None
            if columns[2] is not None:
                label = _parse_label(spec, fields[columns[2]], path, line_number)
        except DataFormatError as error:
            if not skip_malformed:
                raise DataFormatError(f"{error} (pass skip_malformed=True to skip such rows)") \
                    from None
            logger.warning("skipping malformed row: %s", error)
            skipped += 1
            continue
        text_b = fields[columns[1]] if columns[1] is not None else None
        examples.append(InputExample(guid=f"{split}-{line_number}", text_a=fields[columns[0]],
                                     text_b=text_b, label=label))
    if columns is None:
        raise DataFormatError(f"{path}: the file is empty")
    if skipped:
        logger.warning("%s: skipped %d malformed row(s)", path, skipped)
    return examples


def _parse_label(spec, text, path, line_number):
    if spec.is_regression:
        try:
            value = float(text)
        except ValueError:
            raise DataFormatError(f"{path}: line {line_number}: score {text!r} is not a "
                                  "number") from None
        if not math.isfinite(value):
            raise DataFormatError(f"{path}: line {line_number}: score {text!r} is not finite")
        return value
    if text not in spec.label_list:
        raise DataFormatError(f"{path}: line {line_number}: label {text!r} is not one of "
                              f"{list(spec.label_list)}")
    return text


def read_glue_tfds(task, split, data_dir=None):
    """The examples of one split from tensorflow-datasets `glue/<task>` (never downloads).

    The dataset must already be prepared in `data_dir` (or the tfds default folder). Labels are
    mapped to this module's label strings; test splits (label -1) get label None.
    """
    spec = task_spec(task)
    if split not in spec.splits:
        raise ValueError(f"{spec.name} has no split {split!r}; its splits are "
                         f"{', '.join(spec.splits)}")
    try:
        import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel
    except ImportError as error:
        raise ImportError("reading GLUE through tensorflow-datasets needs the "
                          "tensorflow-datasets package (pip install 'bert_keras[tfds]'), or "
                          "read the official TSV files with read_glue_examples") from error
    try:
        dataset, info = tfds.load(spec.tfds_name, split=_TFDS_SPLITS[split], data_dir=data_dir,
                                  download=False, with_info=True)
    except Exception as error:  # tfds raises several types for a dataset that is not prepared
        raise DataFormatError(f"tensorflow-datasets {spec.tfds_name} split "
                              f"{_TFDS_SPLITS[split]} is not available in "
                              f"{data_dir or 'the default tfds data folder'} (it is never "
                              f"downloaded here; prepare it with tfds first): {error}") from error
    names = None
    if not spec.is_regression:
        names = list(info.features["label"].names)
    examples = []
    for index, row in enumerate(tfds.as_numpy(dataset)):
        text_a = _decode(row[spec.tfds_text_a])
        text_b = _decode(row[spec.tfds_text_b]) if spec.tfds_text_b else None
        raw = row["label"]
        if spec.is_regression:
            label = None if split.startswith("test") else float(raw)
        elif int(raw) < 0:
            label = None
        else:
            name = names[int(raw)]
            label = _TFDS_LABEL_TO_OURS.get(name, name)
        examples.append(InputExample(f"{split}-{index}", text_a, text_b, label))
    return examples


def _decode(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def label_ids(examples, task):
    """int32 label ids (classification) or float32 scores (STS-B) of labelled examples."""
    spec = task_spec(task)
    missing = [e.guid for e in examples if e.label is None]
    if missing:
        raise ValueError(f"{len(missing)} example(s) have no label (first: {missing[0]}); "
                         "test splits have no labels")
    if spec.is_regression:
        return np.asarray([e.label for e in examples], np.float32)
    index = {label: i for i, label in enumerate(spec.label_list)}
    try:
        return np.asarray([index[e.label] for e in examples], np.int32)
    except KeyError as error:
        raise ValueError(f"label {error.args[0]!r} is not one of {list(spec.label_list)}") from None


def examples_to_arrays(examples, task):
    """{"text_a", "text_b" (pair tasks), "label" (when labelled)} as NumPy arrays.

    Texts are arrays of Python str (dtype object), ready for `tf.constant` or
    `tf.data.Dataset.from_tensor_slices` and an in-graph preprocessor.
    """
    spec = task_spec(task)
    arrays = {"text_a": np.asarray([e.text_a for e in examples], dtype=object)}
    if spec.text_b is not None:
        arrays["text_b"] = np.asarray([e.text_b or "" for e in examples], dtype=object)
    if examples and all(e.label is not None for e in examples):
        arrays["label"] = label_ids(examples, task)
    return arrays


def compute_metrics(task, predictions, labels):
    """The task's metrics (fractions / correlations, not percentages) as a dict.

    `predictions` and `labels`: label ids (classification; argmax of the logits) or scores
    (STS-B). For MNLI call it once per evaluation split (`task_spec("mnli").eval_splits`).
    """
    spec = task_spec(task)
    functions = {
        "accuracy": classification.accuracy,
        "f1": classification.f1_score,
        "matthews_corrcoef": classification.matthews_corrcoef,
        "pearson": classification.pearson_corrcoef,
        "spearman": classification.spearman_corrcoef,
    }
    predictions = np.asarray(predictions)
    labels = np.asarray(labels)
    if not spec.is_regression and predictions.ndim == 2:
        raise ValueError("pass predicted label ids (argmax of the logits), not the logits")
    if spec.is_regression:
        predictions = predictions.reshape(-1).astype(np.float64)
    return {name: functions[name](predictions, labels) for name in spec.metrics}
