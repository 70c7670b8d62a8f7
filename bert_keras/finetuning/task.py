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

Task names: `glue/<cola|sst2|mrpc|stsb|qqp|mnli|qnli|rte|wnli>`, `squad_v1`, `squad_v2`,
`swag`, `conll2003`. Text is tokenized with the model directory's vocabulary by the in-graph
tokenizer that the exported preprocessor and task models run (`bert_keras.finetuning.tasks.words`).

Example:

>>> task = get_task("glue/mrpc", data_dir="glue_data/MRPC",
...                 model_dir="models/minilm")  # doctest: +SKIP
>>> train = task.load("train")  # doctest: +SKIP
>>> model = task.build_model(bert_keras.load_encoder("models/minilm"))  # doctest: +SKIP
"""

import dataclasses
import io
import logging
import os

import keras
import numpy as np

from bert_keras.common import cli
from bert_keras.common.cli import option
from bert_keras.common.files import write_text_atomic
from bert_keras.finetuning import catalog, task_models
from bert_keras.finetuning.tasks import conll, encoding, glue, squad, squad_postprocess, swag
from bert_keras.finetuning.tasks.common import IGNORE_LABEL_ID, DataFormatError
from bert_keras.finetuning.tasks.words import WordTokenizer
from bert_keras.metrics import conll_eval, squad_eval
from bert_keras.metrics.classification import accuracy
from bert_keras.model.encoder import INPUT_NAMES
from bert_keras.modeldir import model_dir as model_dir_lib

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


# task family -> defaults applied where an option is None.
_DEFAULTS = {
    "glue": dict(learning_rate=2e-5, train_batch_size=32, num_train_epochs=3, max_seq_length=128),
    "squad_v1": dict(learning_rate=5e-5, train_batch_size=32, num_train_epochs=3,
                     max_seq_length=384),
    "squad_v2": dict(learning_rate=5e-5, train_batch_size=48, num_train_epochs=2,
                     max_seq_length=384),
    "swag": dict(learning_rate=2e-5, train_batch_size=16, num_train_epochs=3, max_seq_length=128),
    "conll2003": dict(learning_rate=5e-5, train_batch_size=32, num_train_epochs=3,
                      max_seq_length=128),
}
# The frozen-BERT BiLSTM trains from scratch: it needs a larger step than fine-tuning BERT.
_FEATURE_BASED_LEARNING_RATE = 1e-3


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


def _limit(items, limit):
    return items if limit is None else items[:limit]


class FinetuningTask:
    """The common part of every task: vocabulary, tokenizer, options and defaults."""

    family = None
    eval_splits = ("dev",)
    predict_splits = ("test",)

    def __init__(self, name, data_dir, model_dir, options=None):
        self.name = name
        self.options = dataclasses.replace(options or FinetuningOptions())
        if data_dir is None and not self.options.use_tfds:
            raise ValueError(f"{name}: data_dir is required (the folder of the task's files)")
        self.data_dir = os.fspath(data_dir) if data_dir is not None else None
        self.model_dir = os.fspath(model_dir)
        if self.options.feature_based:
            if self.family != "conll2003":
                raise ValueError("feature_based is the paper's CoNLL-2003 experiment; use it "
                                 "with the conll2003 task")
            if self.options.learning_rate is None:
                self.options.learning_rate = _FEATURE_BASED_LEARNING_RATE
        for key, value in _DEFAULTS[self.family].items():
            if getattr(self.options, key) is None:
                setattr(self.options, key, value)
        self.vocab = model_dir_lib.read_vocab(self.model_dir)
        self.do_lower_case = model_dir_lib.read_do_lower_case(self.model_dir)
        # The in-graph tokenizer of the exported preprocessor and task models: one tokenizer
        # from fine-tuning to serving.
        self.tokenizer = WordTokenizer(model_dir_lib.vocab_path(self.model_dir),
                                       do_lower_case=self.do_lower_case)
        self.max_seq_length = self.options.max_seq_length
        config = model_dir_lib.read_config(self.model_dir)
        if self.max_seq_length > config.max_position_embeddings:
            raise ValueError(f"max_seq_length {self.max_seq_length} is longer than the model's "
                             f"max_position_embeddings {config.max_position_embeddings}")

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


# ----------------------------------------------------------------------------------- GLUE
_GLUE_SUBMISSION_SUFFIX = {"dev_matched": "-m", "dev_mismatched": "-mm", "test_matched": "-m",
                           "test_mismatched": "-mm"}


class GlueFinetuning(FinetuningTask):
    """GLUE: a sentence or sentence pair, a label (or STS-B's score) from the pooled output.

    Predictions: `<split>/<TaskDir>.tsv` ("index\\tprediction", labels as their strings, STS-B
    scores as written floats), the layout of a GLUE benchmark submission.
    """

    family = "glue"

    def __init__(self, name, data_dir, model_dir, options=None):
        super().__init__(name, data_dir, model_dir, options)
        self.spec = glue.task_spec(catalog.parse_task_name(name).glue_task)
        self.eval_splits = self.spec.eval_splits
        self.predict_splits = tuple(s for s in self.spec.splits if s.startswith("test"))

    def label_names(self):
        return glue.get_labels(self.spec.name)

    def task_config(self):
        config = super().task_config()
        config["text_pair"] = self.spec.text_b is not None
        return config

    def split_exists(self, split):
        if self.options.use_tfds:
            return True
        try:
            glue.split_path(self.spec.name, self.data_dir, split)
            return True
        except DataFormatError:
            return False

    def load(self, split, training=False):
        if self.options.use_tfds:
            examples = glue.read_glue_tfds(self.spec.name, split, data_dir=self.data_dir)
        else:
            examples = glue.read_glue_examples(self.spec.name, self.data_dir, split,
                                               skip_malformed=self.options.skip_malformed)
        examples = _limit(examples, self.options.max_train_examples if training
                          else self.options.max_eval_examples)
        if not examples:
            raise DataFormatError(f"{self.name}: the {split} split has no examples")
        arrays = glue.examples_to_arrays(examples, self.spec.name)
        inputs = self.encode(arrays["text_a"], arrays.get("text_b"))
        return TaskData(inputs, arrays.get("label"), context=examples)

    def build_model(self, encoder, dtype=None):
        return task_models.build_classifier(
            encoder, num_labels=self.spec.num_labels, regression=self.spec.is_regression,
            dropout_rate=self.options.dropout_rate, dtype=dtype)

    def compile_args(self):
        if self.spec.is_regression:
            return dict(loss=keras.losses.MeanSquaredError(), metrics=[])
        return dict(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                    metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")])

    def _predicted(self, logits):
        logits = np.asarray(logits)
        if self.spec.is_regression:
            return logits.reshape(-1)
        return logits.argmax(-1)

    def evaluate(self, data, outputs, split, output_dir):
        predicted = self._predicted(outputs)
        self.write_predictions(predicted, split, output_dir)
        if data.labels is None:
            return None
        return glue.compute_metrics(self.spec.name, predicted, data.labels)

    def write_predictions(self, predicted, split, output_dir):
        lines = ["index\tprediction"]
        for index, value in enumerate(predicted):
            if self.spec.is_regression:
                lines.append(f"{index}\t{float(value)!r}")
            else:
                lines.append(f"{index}\t{self.spec.label_list[int(value)]}")
        name = self.spec.directory + _GLUE_SUBMISSION_SUFFIX.get(split, "") + ".tsv"
        path = os.path.join(output_dir, "predictions", split, name)
        write_text_atomic(path, "\n".join(lines) + "\n")
        return path


# ---------------------------------------------------------------------------------- SQuAD
class SquadFinetuning(FinetuningTask):
    """SQuAD v1.1 / v2.0: windows over the context, start/end logits, official post-processing.

    Files: `<data_dir>/train-v1.1.json` and `dev-v1.1.json` (v2.0 likewise). Predictions:
    `<split>/predictions.json`, `nbest_predictions.json` and (v2.0) `null_odds.json`.
    Metrics: exact_match / f1 (v1.1), or the v2.0 script's dict with best_exact / best_f1 and
    their thresholds found on these predictions (`null_score_diff_threshold` in
    task_config.json is set to the best-F1 one).
    """

    predict_splits = ()

    def __init__(self, name, data_dir, model_dir, options=None):
        self.family = name
        super().__init__(name, data_dir, model_dir, options)
        self.version_2_with_negative = name == "squad_v2"
        self.paths = squad.squad_file_paths(self.data_dir, self.version_2_with_negative)
        self.best_threshold = None

    def split_exists(self, split):
        return os.path.isfile(self.paths[split])

    def load(self, split, training=False):
        data = squad.read_squad(self.paths[split], is_training=training,
                                version_2_with_negative=self.version_2_with_negative)
        examples = _limit(data.examples, self.options.max_train_examples if training
                          else self.options.max_eval_examples)
        if not examples:
            raise DataFormatError(f"{self.paths[split]}: no usable questions "
                                  f"({len(data.skipped)} skipped)")
        self.tokenizer.prepare([e.question_text for e in examples]
                               + [word for e in examples for word in e.doc_tokens])
        features = squad.create_squad_features(
            examples, self.tokenizer.tokenize_word, self.vocab,
            max_seq_length=self.max_seq_length, doc_stride=self.options.doc_stride,
            max_query_length=self.options.max_query_length, is_training=training)
        arrays = squad.features_to_arrays(features)
        inputs = {name: arrays[name] for name in INPUT_NAMES}
        labels = None
        if training:
            labels = {"start_logits": arrays["start_positions"],
                      "end_logits": arrays["end_positions"]}
        kept = {e.qas_id for e in examples}
        dataset = _keep_questions(data.dataset, kept) if len(kept) < len(data.examples) \
            else data.dataset
        notes = [f"question {s.qas_id} left out: {s.reason}" for s in data.skipped] + data.warnings
        # Training needs only the arrays; the features (large for SQuAD) are let go.
        context = None if training else (examples, features, dataset)
        return TaskData(inputs, labels, context=context, notes=notes)

    def build_model(self, encoder, dtype=None):
        return task_models.build_span_model(encoder, dtype=dtype)

    def compile_args(self):
        # The original averages the start and the end cross-entropy.
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        return dict(loss={"start_logits": loss, "end_logits": loss},
                    loss_weights={"start_logits": 0.5, "end_logits": 0.5})

    def evaluate(self, data, outputs, split, output_dir):
        examples, features, dataset = data.context
        result = squad_postprocess.postprocess_predictions(
            examples, features, outputs["start_logits"], outputs["end_logits"],
            n_best_size=self.options.n_best_size, max_answer_length=self.options.max_answer_length,
            do_lower_case=self.do_lower_case, version_2_with_negative=self.version_2_with_negative,
            null_score_diff_threshold=self.options.null_score_diff_threshold)
        squad_postprocess.write_predictions(result, os.path.join(output_dir, "predictions", split))
        if not self.version_2_with_negative:
            return squad_eval.evaluate_v1(dataset, result.predictions)
        metrics = squad_eval.evaluate_v2(dataset, result.predictions)
        metrics.update(squad_eval.find_best_thresholds(dataset, result.best_non_null,
                                                       result.null_odds))
        metrics["null_score_diff_threshold"] = self.options.null_score_diff_threshold
        self.best_threshold = metrics["best_f1_thresh"]
        return metrics

    def task_config(self):
        config = super().task_config()
        config.update(doc_stride=self.options.doc_stride,
                      max_query_length=self.options.max_query_length,
                      max_answer_length=self.options.max_answer_length,
                      n_best_size=self.options.n_best_size,
                      version_2_with_negative=self.version_2_with_negative)
        if self.version_2_with_negative:
            config["null_score_diff_threshold"] = (
                self.best_threshold if self.best_threshold is not None
                else self.options.null_score_diff_threshold)
        return config


def _keep_questions(articles, kept):
    """The SQuAD "data" list with only the questions in `kept` (for --max_eval_examples)."""
    out = []
    for article in articles:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            qas = [qa for qa in paragraph["qas"] if str(qa["id"]) in kept]
            if qas:
                paragraphs.append(dict(paragraph, qas=qas))
        if paragraphs:
            out.append(dict(article, paragraphs=paragraphs))
    return out


# ----------------------------------------------------------------------------------- SWAG
class SwagFinetuning(FinetuningTask):
    """SWAG: four (context, sent2 + ending) pairs per example, one score each, softmax over 4.

    Files: `<data_dir>/train.csv`, `val.csv` (dev), `test.csv`. Predictions:
    `<split>/predictions.csv`, the layout of the SWAG baselines' `csv_predict.py`
    (header ",pred", then "row,choice"). Metric: accuracy.
    """

    family = "swag"
    _FILES = {"train": "train.csv", "dev": "val.csv", "test": "test.csv"}

    def path(self, split):
        return os.path.join(self.data_dir, self._FILES[split])

    def split_exists(self, split):
        return os.path.isfile(self.path(split))

    def load(self, split, training=False):
        examples = swag.read_swag_examples(self.path(split))
        examples = _limit(examples, self.options.max_train_examples if training
                          else self.options.max_eval_examples)
        if not examples:
            raise DataFormatError(f"{self.path(split)}: no examples")
        arrays = swag.examples_to_arrays(examples)
        inputs = self.encode(arrays["text_a"], arrays["text_b"])  # [N, 4, seq]
        return TaskData(inputs, arrays.get("label"), context=examples)

    def build_model(self, encoder, dtype=None):
        return task_models.build_multiple_choice_model(
            encoder, num_choices=swag.NUM_CHOICES, dropout_rate=self.options.dropout_rate,
            dtype=dtype)

    def compile_args(self):
        return dict(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                    metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")])

    def evaluate(self, data, outputs, split, output_dir):
        predicted = np.asarray(outputs).argmax(-1)
        lines = [",pred"] + [f"{index},{int(choice)}" for index, choice in enumerate(predicted)]
        write_text_atomic(os.path.join(output_dir, "predictions", split, "predictions.csv"),
                    "\n".join(lines) + "\n")
        if data.labels is None:
            return None
        return {"accuracy": accuracy(predicted, data.labels)}

    def task_config(self):
        config = super().task_config()
        config["num_choices"] = swag.NUM_CHOICES
        return config


# ------------------------------------------------------------------------------ CoNLL-2003
class ConllFinetuning(FinetuningTask):
    """CoNLL-2003 NER: a tag per word, predicted on its first WordPiece; entity-level F1.

    Files: `<data_dir>/eng.train`, `eng.testa` (dev), `eng.testb` (test). Predictions:
    `<split>/predictions.txt`, the input layout of `conlleval` ("WORD GOLD PREDICTED" per
    line, a blank line between sentences). Metrics: conlleval's precision / recall / F1 (in
    percent) and per-type scores.
    """

    family = "conll2003"
    predict_splits = ()
    eval_splits = ("dev", "test")

    def __init__(self, name, data_dir, model_dir, options=None):
        super().__init__(name, data_dir, model_dir, options)

    def label_names(self):
        return list(conll.CONLL2003_LABELS)

    def split_exists(self, split):
        return os.path.isfile(os.path.join(self.data_dir, conll.SPLIT_FILES[split]))

    def load(self, split, training=False):
        sentences = conll.read_conll_split(self.data_dir, split)
        sentences = _limit(sentences, self.options.max_train_examples if training
                           else self.options.max_eval_examples)
        if not sentences:
            raise DataFormatError(f"{self.name}: the {split} split has no sentences")
        self.tokenizer.prepare([word for sentence in sentences for word in sentence.words])
        features = conll.create_conll_features(sentences, self.tokenizer.tokenize_word,
                                               self.vocab, max_seq_length=self.max_seq_length)
        arrays = conll.features_to_arrays(features)
        inputs = {name: arrays[name] for name in INPUT_NAMES}
        return TaskData(inputs, arrays["label_ids"], sample_weight=arrays["label_weights"],
                        context=None if training else (sentences, features))

    def build_model(self, encoder, dtype=None):
        return task_models.build_token_tagger(
            encoder, num_labels=len(conll.CONLL2003_LABELS),
            dropout_rate=self.options.dropout_rate, feature_based=self.options.feature_based,
            feature_layers=self.options.feature_layers, lstm_units=self.options.lstm_units,
            num_lstm_layers=self.options.num_lstm_layers, dtype=dtype)

    def compile_args(self):
        return dict(
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                            ignore_class=IGNORE_LABEL_ID),
            weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")])

    def evaluate(self, data, outputs, split, output_dir):
        sentences, features = data.context
        predicted = conll.predictions_to_tags(features, np.asarray(outputs).argmax(-1), sentences)
        buffer = io.StringIO()
        for sentence, tags in zip(sentences, predicted):
            for word, gold, tag in zip(sentence.words, sentence.tags, tags):
                buffer.write(f"{word} {gold} {tag}\n")
            buffer.write("\n")
        write_text_atomic(os.path.join(output_dir, "predictions", split, "predictions.txt"),
                    buffer.getvalue())
        return conll_eval.evaluate([s.tags for s in sentences], predicted)

    def task_config(self):
        config = super().task_config()
        config["tagging_scheme"] = "first_wordpiece"
        return config


def get_task(name, data_dir, model_dir, options=None):
    """The `FinetuningTask` for a task name (see the module docstring)."""
    task = catalog.parse_task_name(name)
    families = {"glue": GlueFinetuning, "squad": SquadFinetuning, "swag": SwagFinetuning,
                "conll": ConllFinetuning}
    return families[task.family](task.name, data_dir, model_dir, options)


__all__ = ["FinetuningOptions", "FinetuningTask", "TaskData", "GlueFinetuning",
           "SquadFinetuning", "SwagFinetuning", "ConllFinetuning", "get_task"]
