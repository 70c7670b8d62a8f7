"""The glue family's `FinetuningTask`. GLUE: a sentence or sentence pair, a label (or STS-B's score) from the pooled output."""

import os

import keras
import numpy as np

from bert_keras.common.files import write_text_atomic
from bert_keras.finetuning.glue import data as glue
from bert_keras.finetuning.glue.head import build_classifier
from bert_keras.finetuning.task import FinetuningTask, TaskData
from bert_keras.finetuning.tasks.common import DataFormatError


_GLUE_SUBMISSION_SUFFIX = {"dev_matched": "-m", "dev_mismatched": "-mm", "test_matched": "-m",
                           "test_mismatched": "-mm"}


class GlueFinetuning(FinetuningTask):
    """GLUE: a sentence or sentence pair, a label (or STS-B's score) from the pooled output.

    Predictions: `<split>/<TaskDir>.tsv` ("index\\tprediction", labels as their strings, STS-B
    scores as written floats), the layout of a GLUE benchmark submission.
    """

    family = "glue"
    defaults = dict(learning_rate=2e-5, train_batch_size=32, num_train_epochs=3, max_seq_length=128)

    def __init__(self, name, data_dir, model_dir, options=None):
        super().__init__(name, data_dir, model_dir, options)
        self.spec = glue.task_spec(name.split("/", 1)[-1])
        self.eval_splits = self.spec.eval_splits
        self.predict_splits = tuple(s for s in self.spec.splits if s.startswith("test"))

    def label_names(self):
        return glue.get_labels(self.spec.name)

    def task_config(self):
        config = super().task_config()
        config["text_pair"] = self.spec.text_pair
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
        examples = self.limited(examples, training)
        if not examples:
            raise DataFormatError(f"{self.name}: the {split} split has no examples")
        arrays = glue.examples_to_arrays(examples, self.spec.name)
        inputs = self.encode(arrays["text_a"], arrays.get("text_b"))
        return TaskData(inputs, arrays.get("label"), context=examples)

    def build_model(self, encoder, dtype=None):
        return build_classifier(
            encoder, num_labels=self.spec.num_labels, regression=self.spec.is_regression,
            dropout_rate=self.options.dropout_rate, dtype=dtype, pooling=self.options.pooling)

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


__all__ = ["GlueFinetuning"]
