"""Serving of the glue family's heads from raw text: the SavedModel signature and the lite export.

`text_a` string [batch] (and `text_b` [batch] for sentence-pair tasks) are tokenized and packed
as `[CLS] A [SEP] (B [SEP])`; a pair too long loses wordpieces from the end of the currently
longer text (the second when equal), as fine-tuning's features. Outputs: `probabilities`,
`logits` float32 [batch, num_labels], `label_id` int32 [batch], `label_name` string [batch];
regression: `score` float32 [batch].
"""

import tensorflow as tf

from bert_keras.finetuning.glue.data import is_pair_task
from bert_keras.finetuning.tasks.serving import Serving, label_names, same_batch, sanitize_utf8
from bert_keras.text.packing import pack_segments


class ClassificationServing(Serving):
    """The classification and regression heads' `serving_default(text_a[, text_b])` and
    `encode(...)` (the packed inputs), and the module's `label_names` and `text_pair`."""

    def build(self):
        module = self.module
        num_outputs = self._model.head.num_classes
        pair = is_pair_task(self._task_config)
        module.text_pair = pair
        regression = self._task_config["head"] == "regression"
        if not regression:
            module.label_names = tf.Variable(label_names(self._task_config, num_outputs),
                                             trainable=False, name="label_names")
        text_spec = tf.TensorSpec([None], tf.string, name="text_a")
        signature = [text_spec] + ([tf.TensorSpec([None], tf.string, name="text_b")] if pair else [])

        def encode(texts):
            segments = [self._tokenize(sanitize_utf8(text))[0].merge_dims(1, 2) for text in texts]
            return pack_segments(segments, self._seq_length, self._cls, self._sep, self._pad)

        def predict(*texts):
            logits = tf.cast(self._run_model(encode(texts)), tf.float32)  # [batch, labels]
            if regression:
                return {"score": logits[:, 0]}
            label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
            return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1),
                    "label_id": label_id, "label_name": tf.gather(module.label_names, label_id)}

        if pair:
            def serve(text_a, text_b):
                return predict(*same_batch("text_a", text_a, text_b=text_b))

            def encode_pair(text_a, text_b):
                return encode(same_batch("text_a", text_a, text_b=text_b))

            module.encode = tf.function(encode_pair, input_signature=signature, autograph=False)
        else:
            def serve(text_a):
                return predict(text_a)

            def encode_single(text_a):
                return encode([text_a])

            module.encode = tf.function(encode_single, input_signature=signature, autograph=False)
        module.serving_default = tf.function(serve, input_signature=signature, autograph=False)


def lite_fields(task_config, model):
    """What lite_config.json records for a classification or regression head: the TensorFlow
    Lite model's `outputs` (["logits"]), `text_pair`, and a classifier's `label_names`."""
    fields = {"outputs": ["logits"], "text_pair": is_pair_task(task_config)}
    if task_config["head"] == "classification":
        fields["label_names"] = label_names(task_config, model.head.num_classes)
    return fields


__all__ = ["ClassificationServing", "lite_fields"]
