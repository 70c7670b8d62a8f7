"""The swag family's `FinetuningTask`. SWAG: four endings scored from the pooled output, the most likely one chosen."""

import os

import keras
import numpy as np

from bert_keras.common.files import write_text_atomic
from bert_keras.finetuning.swag import data as swag
from bert_keras.finetuning.swag.head import build_multiple_choice_model
from bert_keras.finetuning.task import FinetuningTask, TaskData
from bert_keras.finetuning.tasks.common import DataFormatError
from bert_keras.metrics.classification import accuracy


class SwagFinetuning(FinetuningTask):
    """SWAG: four (context, sent2 + ending) pairs per example, one score each, softmax over 4.

    Files: `<data_dir>/train.csv`, `val.csv` (dev), `test.csv`. Predictions:
    `<split>/predictions.csv`, the layout of the SWAG baselines' `csv_predict.py`
    (header ",pred", then "row,choice"). Metric: accuracy.
    """

    family = "swag"
    defaults = dict(learning_rate=2e-5, train_batch_size=16, num_train_epochs=3, max_seq_length=128)
    _FILES = {"train": "train.csv", "dev": "val.csv", "test": "test.csv"}

    def path(self, split):
        return os.path.join(self.data_dir, self._FILES[split])

    def split_exists(self, split):
        return os.path.isfile(self.path(split))

    def load(self, split, training=False):
        examples = swag.read_swag_examples(self.path(split))
        examples = self.limited(examples, training)
        if not examples:
            raise DataFormatError(f"{self.path(split)}: no examples")
        arrays = swag.examples_to_arrays(examples)
        inputs = self.encode(arrays["text_a"], arrays["text_b"])  # [N, 4, seq]
        return TaskData(inputs, arrays.get("label"), context=examples)

    def build_model(self, encoder, dtype=None):
        return build_multiple_choice_model(
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


__all__ = ["SwagFinetuning"]
