"""The four task families of fine-tuning, each from its files to model inputs and back.

A `FinetuningTask` knows, for one task:

- `load(split)`: the split's examples and their model inputs (`TaskData`: NumPy arrays keyed
  as the model's inputs, the labels, optional per-position sample weights), all read and
  checked before training starts, so bad input fails with a message naming the file and line
  instead of mid-epoch;
- `build_model(encoder)` and `compile_args()`: the head and its loss (the model is compiled by
  the caller with its own optimizer);
- `evaluate(data, outputs, split, output_dir)`: the paper's metrics from the model's outputs,
  and the predictions written in the task's official format under
  `output_dir/predictions/<split>/`;
- `task_config()`: what `task_config.json` records (task, label names, max_seq_length, ...).

Task names (`bert_keras.finetuning.catalog`): `glue/<cola|sst2|mrpc|stsb|qqp|mnli|qnli|rte|wnli>`,
`squad_v1`, `squad_v2`, `swag`, `conll2003`. Each family's task lives in its own folder
(`finetuning/<family>/task.py`, beside the family's data reader, heads and serving) and declares
its defaults (`defaults`). Text is tokenized with the model directory's vocabulary by the
in-graph tokenizer that the exported preprocessor and task models run
(`bert_keras.finetuning.tasks.words`).

Example:

>>> task = get_task("glue/mrpc", data_dir="glue_data/MRPC",
...                 model_dir="models/minilm")  # doctest: +SKIP
>>> train = task.load("train")  # doctest: +SKIP
>>> model = task.build_model(bert_keras.load_encoder("models/minilm"))  # doctest: +SKIP
"""

import dataclasses
import logging
import os

import numpy as np

from bert_keras.common import cli
from bert_keras.common.cli import option
from bert_keras.finetuning.glue.head import POOLINGS
from bert_keras.finetuning.tasks import encoding
from bert_keras.finetuning.tasks.words import WordTokenizer
from bert_keras.modeldir.model_dir import ModelDir

logger = logging.getLogger("bert_keras.finetuning.run")


@dataclasses.dataclass
class FinetuningOptions:
    """Hyper-parameters and task options; None means "the paper's default for the task".

    The paper's defaults (Devlin et al., 2019, Section 4 and Appendix A.3): AdamW, 10% linear
    warm-up then linear decay, batch 32, 3 epochs, learning rate 2e-5 (GLUE, SWAG) or 5e-5
    (SQuAD, CoNLL); SQuAD 2.0: batch 48, 2 epochs; SWAG: batch 16. SQuAD: max_seq_length
    384, doc_stride 128, max_query_length 64; others max_seq_length 128.
    """

    learning_rate: float = option(None, "Peak learning rate (default: 2e-5 GLUE/SWAG, 5e-5 "
                                  "SQuAD/CoNLL, 1e-3 --feature_based).")
    train_batch_size: int = option(None, "Global batch size (default 32; SQuAD 2.0 48, SWAG 16).")
    eval_batch_size: int = option(32, "Prediction batch size.")
    num_train_epochs: int = option(None, "Epochs (default 3; SQuAD 2.0 2).")
    max_seq_length: int = cli.max_seq_length_option(None, "Wordpieces per input (default 128; "
                                                    "SQuAD 384).")
    warmup_proportion: float = option(0.1, "Share of the steps with linear learning-rate "
                                      "warm-up.")
    weight_decay: float = option(0.01, "AdamW weight decay (not on biases and layer norms).")
    clip_norm: float = 1.0
    dropout_rate: float = option(0.1, "Dropout before the task head.")
    pooling: str = option("cls", "GLUE: what the classifier reads: cls, the pooled [CLS] output "
                          "(the paper), or mean, the last layer's mean over the real tokens.",
                          choices=POOLINGS)
    # SQuAD
    doc_stride: int = option(128, "SQuAD: stride between context windows.")
    max_query_length: int = option(64, "SQuAD: question wordpieces kept.")
    max_answer_length: int = option(30, "SQuAD: longest answer, in wordpieces.")
    n_best_size: int = option(20, "SQuAD: candidates in nbest_predictions.json.")
    null_score_diff_threshold: float = option(
        0.0, "SQuAD 2.0: predict no answer when the null odds exceed this (the best one on dev "
        "is reported in eval_results.json).")
    # CoNLL-2003
    feature_based: bool = option(False, "CoNLL-2003: the paper's feature-based approach (frozen "
                                 "BERT, last four layers, two-layer BiLSTM).")
    feature_layers: int = option(4, "--feature_based: hidden layers concatenated.")
    lstm_units: int = option(768, "--feature_based: BiLSTM units per direction.")
    num_lstm_layers: int = 2
    # GLUE
    use_tfds: bool = option(False, "GLUE: read tensorflow-datasets glue/<task> (must be "
                            "prepared already; never downloads).")
    skip_malformed: bool = option(False, "GLUE: skip malformed rows with a warning instead of "
                                  "stopping.")
    # Limits, for quick runs.
    max_train_examples: int = option(None, "Use only the first N training examples (quick "
                                     "runs).")
    max_eval_examples: int = option(None, "Evaluate only the first N examples.")

    def validate(self):
        """ValueError naming the flag of the first setting out of its range (None: the task's
        default, checked once applied)."""
        def bad(name, rule, value):
            raise ValueError(f"--{name} must be {rule}, got {value}")

        if self.learning_rate is not None and not self.learning_rate > 0:
            bad("learning_rate", "positive", self.learning_rate)
        for name in ("train_batch_size", "eval_batch_size", "max_seq_length", "doc_stride",
                     "max_query_length", "max_answer_length", "n_best_size", "feature_layers",
                     "lstm_units", "max_train_examples", "max_eval_examples"):
            value = getattr(self, name)
            if value is not None and not value >= 1:
                bad(name, "at least 1", value)
        for name in ("warmup_proportion", "dropout_rate"):
            value = getattr(self, name)
            if not 0 <= value < 1 and not (name == "warmup_proportion" and value == 1):
                bad(name, "in [0, 1]" if name == "warmup_proportion" else "in [0, 1)", value)
        if not self.weight_decay >= 0:
            bad("weight_decay", "at least 0", self.weight_decay)


@dataclasses.dataclass
class TaskData:
    """One split ready for the model.

    inputs: {input name: int32 array [N, ...]}; labels: array or {output name: array} (None for
    unlabelled test data); sample_weight: float32 array or None; context: whatever `evaluate`
    needs to turn outputs back into predictions (examples, features, ...; None for training
    data); notes: problems in the input that did not stop the run (e.g. SQuAD training answers
    left out), as messages.
    """

    inputs: dict
    labels: object = None
    sample_weight: object = None
    context: object = None
    notes: list = dataclasses.field(default_factory=list)

    @property
    def num_rows(self):
        return len(next(iter(self.inputs.values())))


class FinetuningTask:
    """The common part of every task: vocabulary, tokenizer, options and defaults.

    A family's task sets `family` (its name in `bert_keras.finetuning.catalog`), `defaults`
    (the options applied where None: the paper's for the task; `option_defaults()` where they
    depend on the task or the options) and, to accept `feature_based`,
    `allows_feature_based`.
    """

    family = None
    defaults = {}
    allows_feature_based = False
    eval_splits = ("dev",)
    predict_splits = ("test",)

    def __init__(self, name, data_dir, model_dir, options=None):
        self.name = name
        self.options = dataclasses.replace(options or FinetuningOptions())
        if data_dir is None and not self.options.use_tfds:
            raise ValueError(f"{name}: data_dir is required (the folder of the task's files)")
        self.data_dir = os.fspath(data_dir) if data_dir is not None else None
        if self.options.feature_based and not self.allows_feature_based:
            raise ValueError("feature_based is the paper's CoNLL-2003 experiment; use it "
                             "with the conll2003 task")
        for key, value in self.option_defaults().items():
            if getattr(self.options, key) is None:
                setattr(self.options, key, value)
        self.options.validate()
        # The directory read once: its vocabulary, casing and positions here, its config and
        # weights when the run builds the model.
        self.model_dir = ModelDir.of(model_dir)
        self.vocab = self.model_dir.vocab
        self.do_lower_case = self.model_dir.do_lower_case
        # The in-graph tokenizer of the exported preprocessor and task models: one tokenizer
        # from fine-tuning to serving.
        self.tokenizer = WordTokenizer(self.model_dir.vocab_file, do_lower_case=self.do_lower_case)
        self.max_seq_length = self.options.max_seq_length
        self.model_dir.check_seq_length(self.max_seq_length)

    def option_defaults(self):
        """{option: value} applied where the option is None."""
        return self.defaults

    def limited(self, items, training):
        """The first `max_train_examples` (training) or `max_eval_examples` of `items` (all of
        them when the option is None)."""
        limit = self.options.max_train_examples if training else self.options.max_eval_examples
        return items if limit is None else items[:limit]

    def encode(self, texts_a, texts_b=None):
        """int32 encoder inputs of texts (any shape, e.g. [N] or [N, 4]) and optional pairs."""
        for texts in (texts_a, texts_b):
            if texts is not None:
                self.tokenizer.prepare(np.asarray(texts, dtype=object).reshape(-1).tolist())
        return encoding.encode_texts(texts_a, texts_b, self.tokenizer.tokenize_word, self.vocab,
                                     max_seq_length=self.max_seq_length)

    def task_config(self):
        return {"task": self.name, "max_seq_length": self.max_seq_length,
                "label_names": self.label_names()}

    def label_names(self):
        return None

    def split_exists(self, split):
        return True


def get_task(name, data_dir, model_dir, options=None):
    """The `FinetuningTask` for a task name (see the module docstring)."""
    from bert_keras.finetuning import catalog  # the families' tasks import this module

    task = catalog.parse_task_name(name)
    return catalog.FAMILIES[task.family].task(task.name, data_dir, model_dir, options)


__all__ = ["FinetuningOptions", "FinetuningTask", "TaskData", "get_task"]
