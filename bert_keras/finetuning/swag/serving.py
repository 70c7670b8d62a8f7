"""Serving of the swag family's multiple-choice head from raw text: one score per (context,
ending) pair.

Inputs are the fields of a SWAG CSV row that fine-tuning reads: `sent1` string [batch] (the
context), `sent2` string [batch] (the start of the next sentence) and `endings` string
[batch, num_choices] (`ending0` ... `ending3`). Choice k is the pair (`sent1`,
`sent2 + " " + ending<k>`): the texts come from `bert_keras.finetuning.swag.data.choice_texts`,
the same function fine-tuning reads the CSV with, run here on string tensors; each pair is packed
`[CLS] A [SEP] B [SEP]` and a pair too long loses wordpieces from the end of the currently longer
text (the second when equal), as fine-tuning's features (`bert_keras.text.truncation`).

Outputs: `logits` float32 [batch, num_choices] (each pair's score), `probabilities` float32
[batch, num_choices] (softmax over the choices, the fine-tuning loss's), `label_id` int32
[batch] (the index of the highest-scoring ending, SWAG's `label`).

Example:

>>> import tensorflow as tf, tensorflow_text  # doctest: +SKIP
>>> swag = tf.saved_model.load("exports/swag").signatures["serving_default"]  # doctest: +SKIP
>>> out = swag(sent1=tf.constant(["The chef cracks an egg into the pan."]),
...            sent2=tf.constant(["He"]),
...            endings=tf.constant([["stirs it slowly.", "jumps over the moon.",
...                                  "sings to the audience.", "closes the window."]]))  # doctest: +SKIP
>>> out["probabilities"].shape, out["label_id"].shape  # doctest: +SKIP
(TensorShape([1, 4]), TensorShape([1]))
"""

import tensorflow as tf

from bert_keras.finetuning.swag import data as swag
from bert_keras.finetuning.tasks.serving import Serving, same_batch, sanitize_utf8
from bert_keras.model.encoder import INPUT_NAMES
from bert_keras.text.packing import pack_segments


class MultipleChoiceServing(Serving):
    """The multiple-choice head's `serving_default(sent1, sent2, endings)` and `encode(...)`."""

    def build(self):
        self._num_choices = int(self._task_config.get("num_choices", swag.NUM_CHOICES))
        signature = [tf.TensorSpec([None], tf.string, name="sent1"),
                     tf.TensorSpec([None], tf.string, name="sent2"),
                     tf.TensorSpec([None, self._num_choices], tf.string, name="endings")]
        self.module.serving_default = tf.function(self._multiple_choice, input_signature=signature,
                                           autograph=False)
        self.module.encode = tf.function(self._multiple_choice_encode, input_signature=signature,
                                  autograph=False)

    def _multiple_choice_encode(self, sent1, sent2, endings):
        """The pairs the model sees: `input_word_ids`, `input_mask`, `input_type_ids` int32
        [batch, num_choices, seq_length]."""
        choices = self._num_choices
        sent1, sent2, endings = same_batch("sent1", sent1, sent2=sent2, endings=endings)
        texts_b = swag.choice_texts(sanitize_utf8(sent2)[:, None], sanitize_utf8(endings),
                                    xp=tf)  # [b, choices]
        context = self._tokenize(sanitize_utf8(sent1))[0].merge_dims(1, 2)  # [b, (pieces)]
        segment_a = tf.gather(context, tf.repeat(tf.range(tf.shape(sent1)[0]), choices))
        segment_b = self._tokenize(tf.reshape(texts_b, [-1]))[0].merge_dims(1, 2)  # [b * c, (n)]
        features = pack_segments([segment_a, segment_b], self._seq_length, self._cls, self._sep,
                                 self._pad)  # [b * choices, seq]
        return {name: tf.reshape(features[name], [-1, choices, self._seq_length])
                for name in INPUT_NAMES}

    def _multiple_choice(self, sent1, sent2, endings):
        logits = tf.cast(self._run_model(self._multiple_choice_encode(sent1, sent2, endings)),
                         tf.float32)  # [batch, choices]
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1),
                "label_id": tf.argmax(logits, axis=-1, output_type=tf.int32)}


__all__ = ["MultipleChoiceServing"]
