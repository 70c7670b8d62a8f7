"""The conll family's `FinetuningTask`. CoNLL-2003 NER: a tag per word from its first wordpiece (or the feature-based BiLSTM)."""

import io
import os

import logging

import keras
import numpy as np

from bert_keras.common.files import write_text_atomic
from bert_keras.finetuning.conll import data as conll
from bert_keras.finetuning.conll.head import build_token_tagger
from bert_keras.finetuning.task import FinetuningTask, TaskData
from bert_keras.finetuning.tasks.common import DataFormatError, IGNORE_LABEL_ID
from bert_keras.metrics import conll_eval
from bert_keras.model.encoder import INPUT_NAMES

logger = logging.getLogger(__name__)


class ConllFinetuning(FinetuningTask):
    """CoNLL-2003 NER: a tag per word, predicted on its first WordPiece; entity-level F1.

    Files: `<data_dir>/eng.train`, `eng.testa` (dev), `eng.testb` (test), or `train.txt`,
    `dev.txt` (or `valid.txt`), `test.txt`. Predictions:
    `<split>/predictions.txt`, the input layout of `conlleval` ("WORD GOLD PREDICTED" per
    line, a blank line between sentences), and `<split>/conlleval.txt`, what conlleval prints
    for it (also logged). Metrics: conlleval's precision / recall / F1 (in percent), overall
    and in `per_type` (each type's precision, recall, F1 and chunk counts).
    """

    family = "conll"
    defaults = dict(learning_rate=5e-5, train_batch_size=32, num_train_epochs=3, max_seq_length=128)
    allows_feature_based = True  # the paper's frozen-BERT BiLSTM (Section 5.3)
    predict_splits = ()
    eval_splits = ("dev", "test")

    def option_defaults(self):
        if self.options.feature_based:
            # The frozen-BERT BiLSTM trains from scratch: a larger step than fine-tuning BERT.
            return dict(self.defaults, learning_rate=1e-3)
        return self.defaults

    def label_names(self):
        return list(conll.CONLL2003_LABELS)

    def split_exists(self, split):
        return conll.split_path(self.data_dir, split) is not None

    def load(self, split, training=False):
        sentences = conll.read_conll_split(self.data_dir, split)
        sentences = self.limited(sentences, training)
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
        return build_token_tagger(
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
        scores = conll_eval.evaluate([s.tags for s in sentences], predicted)
        # conlleval's own printout, per type, beside the predictions and in the log.
        text = conll_eval.report(scores)
        write_text_atomic(os.path.join(output_dir, "predictions", split, "conlleval.txt"),
                          text + "\n")
        logger.info("%s %s, as conlleval prints it:\n%s", self.name, split, text)
        return scores

    def task_config(self):
        config = super().task_config()
        config["tagging_scheme"] = "first_wordpiece"
        return config


__all__ = ["ConllFinetuning"]
