"""Serving of the conll family's token tagging heads (NER) from raw text: word tags to
entities in-graph.

Each word (as the tokenizer's basic tokenization splits it: whitespace, then punctuation) is
labelled from its first wordpiece; long texts are cut into consecutive runs of whole words of at
most seq_length - 2 wordpieces (as `bert_keras.finetuning.conll.data`), at most `max_windows`
per text. Entities are chunks of the BIO/IOB1 tags as conlleval reads them.
"""

import tensorflow as tf

from bert_keras.finetuning.tasks.serving import Serving, column, label_names, sanitize_utf8
from bert_keras.text.packing import dense_inputs, first_n


def _tag_parts(label_names):
    """(prefix, type id) of every tag: prefix 0 = O, 1 = B, 2 = I; types numbered from 0.

    "B-PER"/"I-PER" (IOB1 or IOB2), "O"; a tag without a "B-"/"I-"/"E-"/"S-" prefix is an
    I-tag of its own type (IO tagging).
    """
    types, prefixes, type_ids = [], [], []
    for name in label_names:
        if name == "O":
            prefixes.append(0)
            type_ids.append(-1)
            continue
        prefix, sep, kind = name.partition("-")
        if sep and prefix in ("B", "S"):
            code = 1
        elif sep and prefix in ("I", "E"):
            code = 2
        else:
            code, kind = 2, name
        if kind not in types:
            types.append(kind)
        prefixes.append(code)
        type_ids.append(types.index(kind))
    return prefixes, type_ids, types


class NerServing(Serving):
    """The token tagging heads' `serving_default(text)`, and the module's `label_names` and
    `entity_types`."""

    min_seq_length = 3
    position_padding = 0.0

    def build(self):
        num_labels = self._model.head.num_classes
        names = label_names(self._task_config, num_labels)
        prefixes, type_ids, types = _tag_parts(names)
        self.module.label_names = tf.Variable(names, trainable=False, name="label_names")
        self.module.entity_types = tf.Variable(types or [""], trainable=False,
                                               name="entity_types")
        self._tag_prefix = prefixes
        self._tag_type = type_ids
        self.module.serving_default = tf.function(
            self._ner, input_signature=[tf.TensorSpec([None], tf.string, name="text")],
            autograph=False)

    def _ner_windows(self, ids):
        """Consecutive runs of whole words of at most seq_length - 2 wordpieces each.

        ids: ragged [batch, (words), (wordpieces)], at most max_windows * (seq_length - 2)
        words per text. Returns (features [W, S], window of every word [num_words], position of
        every word's first wordpiece in its window [num_words], whether the word is in one of
        the first max_windows windows of its text [num_words]).
        """
        budget = self._seq_length - 2
        batch = tf.shape(ids.row_lengths())[0]
        words = ids.values  # [num_words, (wordpieces)], the words of all texts in order
        num_words = tf.shape(words.row_lengths())[0]
        words = first_n(words, tf.fill([num_words], budget))
        word_length = tf.cast(words.row_lengths(), tf.int32)
        word_text = tf.cast(ids.value_rowids(), tf.int32)  # the text of every word
        first_of_text = tf.not_equal(word_text, tf.concat([[-1], word_text[:-1]], 0))

        # Greedy packing is sequential (a word opens a window when it does not fit), as in
        # bert_keras.finetuning.conll.data; a scan over the words of the batch.
        def step(state, element):
            window, used = state
            length, first = element
            new_window = first | (used + length > budget)
            return (tf.where(new_window, window + 1, window),
                    tf.where(new_window, length, used + length))

        window_of_word, _ = tf.scan(step, (word_length, first_of_text),
                                    initializer=(tf.constant(-1), tf.constant(0)))
        num_packed = tf.reduce_max(tf.concat([window_of_word, [-1]], 0)) + 1

        # Keep the first max_windows windows of each text and renumber them.
        text_first_window = tf.math.unsorted_segment_min(window_of_word, word_text, batch)
        keep_word = window_of_word - tf.gather(text_first_window, word_text) < self._max_windows
        window_kept = tf.math.unsorted_segment_max(tf.cast(keep_word, tf.int32), window_of_word,
                                                   num_packed) > 0
        new_window = tf.cumsum(tf.cast(window_kept, tf.int32)) - 1
        num_windows = tf.reduce_sum(tf.cast(window_kept, tf.int32))
        window_of_word = tf.where(keep_word, tf.gather(new_window, window_of_word), 0)

        kept_words = tf.ragged.boolean_mask(words, keep_word)
        piece_window = tf.repeat(tf.boolean_mask(window_of_word, keep_word),
                                 tf.cast(kept_words.row_lengths(), tf.int32))
        window_pieces = tf.RaggedTensor.from_value_rowids(
            kept_words.flat_values, tf.cast(piece_window, tf.int64),
            nrows=tf.cast(num_windows, tf.int64))
        # A word's first wordpiece sits after [CLS] and the wordpieces of the earlier words of
        # its window.
        cumulative = tf.cumsum(word_length, exclusive=True)
        window_offset = tf.math.unsorted_segment_min(
            tf.where(keep_word, cumulative, tf.int32.max), window_of_word, num_windows)
        position = tf.where(keep_word, 1 + cumulative - tf.gather(window_offset, window_of_word), 0)
        features = dense_inputs(
            [(column(self._cls, num_windows), 0), (window_pieces, 0),
             (column(self._sep, num_windows), 0)], self._seq_length, self._pad)
        return features, window_of_word, position, keep_word

    def _ner(self, text):
        text = sanitize_utf8(text)
        batch = tf.shape(text)[0]
        # More words than the windows can hold are never looked at.
        max_words = self._max_windows * (self._seq_length - 2)
        ids, starts, ends = (t[:, :max_words] for t in self._tokenize(text))
        features, window_of_word, position, keep_word = self._ner_windows(ids)
        logits = tf.cast(self._run_model(features), tf.float32)  # [W, S, labels]
        probabilities = tf.nn.softmax(logits, axis=-1)
        # The prediction of every word, read at its first wordpiece.
        word_probabilities = tf.gather_nd(probabilities, tf.stack([window_of_word, position], 1))
        tag = tf.argmax(word_probabilities, axis=-1, output_type=tf.int32)  # [num_words]
        tag_probability = tf.reduce_max(word_probabilities, axis=-1)
        prefix = tf.gather(tf.constant(self._tag_prefix, tf.int32), tag)
        tag_type = tf.gather(tf.constant(self._tag_type, tf.int32), tag)
        prefix = tf.where(keep_word, prefix, 0)  # words beyond the window cap: outside

        word_text = tf.cast(ids.value_rowids(), tf.int32)
        same_text = tf.concat([[False], word_text[1:] == word_text[:-1]], 0)[:tf.shape(tag)[0]]
        previous_prefix = tf.concat([[0], prefix[:-1]], 0)[:tf.shape(tag)[0]]
        previous_type = tf.concat([[-1], tag_type[:-1]], 0)[:tf.shape(tag)[0]]
        inside = prefix > 0
        continues = (inside & (prefix == 2) & same_text & (previous_prefix > 0)
                     & (previous_type == tag_type))
        starts_entity = inside & ~continues
        entity_of_word = tf.cumsum(tf.cast(starts_entity, tf.int32)) - 1  # global entity id
        num_entities_total = tf.reduce_sum(tf.cast(starts_entity, tf.int32))
        entity_segment = tf.where(inside, entity_of_word, num_entities_total)

        word_start = tf.gather(starts.flat_values, tf.cast(starts.values.row_starts(), tf.int32))
        word_end = tf.gather(ends.flat_values, tf.cast(ends.values.row_limits(), tf.int32) - 1)
        segments = num_entities_total + 1
        entity_start = tf.math.unsorted_segment_min(word_start, entity_segment, segments)[:-1]
        entity_end = tf.math.unsorted_segment_max(word_end, entity_segment, segments)[:-1]
        entity_score = (tf.math.unsorted_segment_sum(tag_probability, entity_segment, segments)
                        / tf.maximum(tf.math.unsorted_segment_sum(
                            tf.ones_like(tag_probability), entity_segment, segments), 1.0))[:-1]
        entity_type = tf.boolean_mask(tag_type, starts_entity)
        entity_text_id = tf.boolean_mask(word_text, starts_entity)

        texts = tf.gather(text, entity_text_id)
        entity_string = tf.strings.substr(texts, entity_start, entity_end - entity_start)
        zeros = tf.zeros_like(entity_start)
        char_start = tf.strings.length(tf.strings.substr(texts, zeros, entity_start), unit="UTF8_CHAR")
        char_end = tf.strings.length(tf.strings.substr(texts, zeros, entity_end), unit="UTF8_CHAR")
        label = tf.gather(self.entity_types, entity_type)

        def per_text(values, default):
            ragged = tf.RaggedTensor.from_value_rowids(values, tf.cast(entity_text_id, tf.int64),
                                                       nrows=tf.cast(batch, tf.int64))
            return ragged.to_tensor(default_value=default)

        num_entities = tf.math.unsorted_segment_sum(tf.ones_like(entity_text_id), entity_text_id,
                                                    batch)
        return {"entity_text": per_text(entity_string, ""),
                "entity_label": per_text(label, ""),
                "entity_start": per_text(char_start, -1),
                "entity_end": per_text(char_end, -1),
                "entity_score": per_text(entity_score, 0.0),
                "num_entities": num_entities}


__all__ = ["NerServing"]
