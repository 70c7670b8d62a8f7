"""Serving of sentence (pair) classification and regression heads (GLUE) from raw text.

`text_a` string [batch] (and `text_b` [batch] for sentence-pair tasks) are tokenized and packed
as `[CLS] A [SEP] (B [SEP])`; a pair too long loses wordpieces from the end of the currently
longer text (the second when equal), as fine-tuning's features. Outputs: `probabilities`,
`logits` float32 [batch, num_labels], `label_id` int32 [batch], `label_name` string [batch];
regression: `score` float32 [batch].
"""

import tensorflow as tf

from bert_keras.export.raw_text import label_names, same_batch, sanitize_utf8
from bert_keras.text.packing import pack_segments


def _is_pair_task(task_config):
    """Whether a classification/regression task takes two texts (text_a, text_b)."""
    if "text_pair" in task_config:
        return bool(task_config["text_pair"])
    from bert_keras.finetuning.catalog import is_pair_task

    task = str(task_config.get("task", ""))
    return task.startswith("glue/") and is_pair_task(task)


class ClassificationServing:
    """`TaskModule` methods of the classification and regression heads."""

    def _build_classification(self):
        num_outputs = self._model.head.num_classes
        pair = _is_pair_task(self._task_config)
        self.text_pair = pair
        regression = self.kind == "regression"
        if not regression:
            self.label_names = tf.Variable(label_names(self._task_config, num_outputs),
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
                    "label_id": label_id, "label_name": tf.gather(self.label_names, label_id)}

        if pair:
            def serve(text_a, text_b):
                return predict(*same_batch("text_a", text_a, text_b=text_b))

            def encode_pair(text_a, text_b):
                return encode(same_batch("text_a", text_a, text_b=text_b))

            self.encode = tf.function(encode_pair, input_signature=signature, autograph=False)
        else:
            def serve(text_a):
                return predict(text_a)

            def encode_single(text_a):
                return encode([text_a])

            self.encode = tf.function(encode_single, input_signature=signature, autograph=False)
        self.serving_default = tf.function(serve, input_signature=signature, autograph=False)
