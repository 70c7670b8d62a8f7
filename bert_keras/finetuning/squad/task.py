"""The squad family's `FinetuningTask`. SQuAD v1.1 and v2.0: answer spans from the sequence output, windows over long contexts."""

import os

import keras

from bert_keras.finetuning.squad import data as squad
from bert_keras.finetuning.squad.head import build_span_model
from bert_keras.finetuning.squad import postprocess as squad_postprocess
from bert_keras.finetuning.task import FinetuningTask, TaskData
from bert_keras.finetuning.tasks.common import DataFormatError
from bert_keras.metrics import squad_eval
from bert_keras.model.encoder import INPUT_NAMES


class SquadFinetuning(FinetuningTask):
    """SQuAD v1.1 / v2.0: windows over the context, start/end logits, official post-processing.

    Files: `<data_dir>/train-v1.1.json` and `dev-v1.1.json` (v2.0 likewise). Predictions:
    `<split>/predictions.json`, `nbest_predictions.json` and (v2.0) `null_odds.json`.
    Metrics: exact_match / f1 (v1.1), or the v2.0 script's dict with best_exact / best_f1 and
    their thresholds found on these predictions (`null_score_diff_threshold` in
    task_config.json is set to the best-F1 one).
    """

    family = "squad"
    defaults = dict(learning_rate=5e-5, train_batch_size=32, num_train_epochs=3, max_seq_length=384)
    predict_splits = ()

    def __init__(self, name, data_dir, model_dir, options=None):
        super().__init__(name, data_dir, model_dir, options)
        self.version_2_with_negative = name == "squad_v2"
        self.paths = squad.squad_file_paths(self.data_dir, self.version_2_with_negative)
        self.best_threshold = None

    def option_defaults(self):
        if self.name == "squad_v2":  # the paper's SQuAD 2.0 setup
            return dict(self.defaults, train_batch_size=48, num_train_epochs=2)
        return self.defaults

    def split_exists(self, split):
        return os.path.isfile(self.paths[split])

    def load(self, split, training=False):
        data = squad.read_squad(self.paths[split], is_training=training,
                                version_2_with_negative=self.version_2_with_negative)
        examples = self.limited(data.examples, training)
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
        return build_span_model(encoder, dtype=dtype)

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


__all__ = ["SquadFinetuning"]
