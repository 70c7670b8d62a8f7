"""Raw-text task models for production: the tokenizer, the encoder and the fine-tuned head in one
SavedModel with a `serving_default` signature that takes strings.

The model directory is a fine-tuned one (`bert_keras.task_models.save_task_model_dir`): its
`task_config.json` names the head and the task, and its `model.safetensors` holds the head's
weights under "task/<head name>/...". The exported signature depends on the head:

classification (GLUE classification tasks)
    inputs `text_a` string [batch] (and `text_b` [batch] for sentence-pair tasks);
    outputs `probabilities` float32 [batch, num_labels], `logits` float32 [batch, num_labels],
    `label_id` int32 [batch], `label_name` string [batch].
regression (STS-B)
    inputs as above; output `score` float32 [batch].
span (SQuAD v1.1 / v2.0)
    inputs `question`, `context` string [batch]; outputs `answer_text` string [batch],
    `answer_start`, `answer_end` int32 [batch] (character offsets into the context, end
    exclusive, -1 when there is no answer), `score` float32 [batch] (start + end logit of the
    answer; for an empty v2.0 answer the null score), `null_odds` float32 [batch] (v2.0: null
    score minus the best non-null score, the quantity compared with
    `null_score_diff_threshold`; 1e6 when no span is possible), `has_answer` bool [batch].
token_tagging, feature_based_bilstm (CoNLL-2003 NER)
    input `text` string [batch]; outputs `entity_text`, `entity_label` string
    [batch, max_entities] ("" as padding), `entity_start`, `entity_end` int32
    [batch, max_entities] (character offsets, end exclusive, -1 as padding),
    `entity_score` float32 [batch, max_entities] (the mean probability of the entity's word
    tags, 0 as padding), `num_entities` int32 [batch].

How text becomes windows, exactly as fine-tuning saw it:

- Classification packs `[CLS] A [SEP] (B [SEP])`; a pair too long loses wordpieces from the
  end of the currently longer text (the second when equal), as the original
  `_truncate_seq_pair` and `bert_keras.tasks.encoding.truncate_pair`.
- SQuAD follows the original `run_squad.py`: the question cut to `max_query_length`
  wordpieces, windows over the context wordpieces `doc_stride` apart, each start token
  considered only in the window where it has the most context, start and end among the
  `n_best_size` largest logits of the window, at most `max_answer_length` wordpieces long. The
  answer is the context's own text between the first wordpiece's start and the last
  wordpiece's end (original casing, accents and punctuation). At most `max_windows` windows per
  context are run; the rest of a longer context is ignored.
- NER labels each word (a word as the tokenizer's basic tokenization splits it: whitespace,
  then punctuation) from its first wordpiece; long texts are cut into consecutive runs of
  whole words of at most seq_length - 2 wordpieces (as `bert_keras.tasks.conll`), at most
  `max_windows` per text. Entities are chunks of the BIO/IOB1 tags as conlleval reads them.

Character offsets count Unicode code points (Python `str` indices) of the input after invalid
UTF-8 bytes were replaced by U+FFFD; for valid UTF-8 input they index the input itself.

Example:

>>> export_task_from_model_dir("runs/mrpc", "exports/mrpc")  # doctest: +SKIP
>>> import tensorflow as tf, tensorflow_text  # doctest: +SKIP
>>> serve = tf.saved_model.load("exports/mrpc").signatures["serving_default"]  # doctest: +SKIP
>>> serve(text_a=tf.constant(["He left."]), text_b=tf.constant(["He went."]))["label_name"]
"""

import json
import logging
import os

import tensorflow as tf

from bert_keras import model_dir as model_dir_lib
from bert_keras.export.encoder_export import _Exportable, dtype_policy
from bert_keras.packing import dense_inputs, first_n, pack_segments

logger = logging.getLogger("bert_keras.export")

# head kind of task_config.json -> serving kind
SERVING_KINDS = {"classification": "classification", "regression": "regression",
                 "span": "squad", "token_tagging": "ner", "feature_based_bilstm": "ner"}
DEFAULT_MAX_WINDOWS = 32
NO_CANDIDATE_NULL_ODDS = 1e6
_NEG = -1e30


class TaskExportError(ValueError):
    """A fine-tuned model directory cannot be exported as a raw-text task model."""


# ------------------------------------------------------------------------------ text helpers
def sanitize_utf8(text):
    """string [batch] with every invalid UTF-8 byte sequence replaced by U+FFFD."""
    return tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace",
                                        replacement_char=0xFFFD, replace_control_characters=False)


def char_offsets(text, byte_offsets):
    """Code point offsets of byte offsets: text string [batch], byte_offsets int [batch, k]."""
    byte_offsets = tf.cast(byte_offsets, tf.int32)
    texts = tf.broadcast_to(text[:, None], tf.shape(byte_offsets))
    prefixes = tf.strings.substr(texts, tf.zeros_like(byte_offsets), byte_offsets)
    return tf.strings.length(prefixes, unit="UTF8_CHAR")


def _column(value, rows):
    return tf.RaggedTensor.from_tensor(tf.fill([rows, 1], tf.cast(value, tf.int32)))


# ---------------------------------------------------------------------------- task settings
def _label_names(task_config, count):
    names = task_config.get("label_names")
    if names is None:
        return [str(i) for i in range(count)]
    names = [str(name) for name in names]
    if len(names) != count:
        raise TaskExportError(f"task_config.json has {len(names)} label_names but the head has "
                              f"{count} outputs")
    return names


def _is_pair_task(task_config):
    """Whether a classification/regression task takes two texts (text_a, text_b)."""
    if "text_pair" in task_config:
        return bool(task_config["text_pair"])
    task = str(task_config.get("task", ""))
    if task.startswith("glue/"):
        from bert_keras.tasks import glue

        return glue.get_task(task.split("/", 1)[1]).text_b is not None
    return False


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


# ------------------------------------------------------------------------------ the module
class TaskModule(_Exportable):
    """The raw-text task model: tokenizer + fine-tuned Keras model + post-processing.

    Callable in memory through `serving_default(...)` (keyword string tensors) exactly as after
    loading; `signatures()` gives what `tf.saved_model.save` writes.

    Args:
      tokenizer: an in-graph tokenizer with `tokenize_with_offsets(strings)` returning
        (ids, start_bytes, end_bytes), each ragged [batch, (words), (wordpieces)].
      model: the fine-tuned `keras.Model` (from `bert_keras.task_models.load_task_model`).
      task_config: the dict of `task_config.json`.
      special_ids: {"start_of_sequence_id", "end_of_segment_id", "padding_id", ...}.
      seq_length: the window length.
      max_windows: SQuAD and NER: at most this many windows per text.
    """

    def __init__(self, tokenizer, model, task_config, special_ids, seq_length, max_windows=None):
        super().__init__()
        self.tokenizer = tokenizer
        object.__setattr__(self, "_model", model)
        self._task_config = dict(task_config)
        head = task_config.get("head")
        if head not in SERVING_KINDS:
            raise TaskExportError(
                f"head {head!r} of task_config.json cannot be served from raw text; supported: "
                f"{', '.join(SERVING_KINDS)}")
        self.kind = SERVING_KINDS[head]
        self._seq_length = int(seq_length)
        self._max_windows = int(max_windows or DEFAULT_MAX_WINDOWS)
        self._cls = int(special_ids["start_of_sequence_id"])
        self._sep = int(special_ids["end_of_segment_id"])
        self._pad = int(special_ids["padding_id"])
        minimum = {"classification": 4, "regression": 4, "squad": 5, "ner": 3}[self.kind]
        if self._seq_length < minimum:
            raise TaskExportError(f"seq_length {seq_length} is too short for {self.kind}")

        self.variables = list(model.variables)
        self.trainable_variables = list(model.trainable_variables)
        # Trackable so that `loaded.seq_length.numpy()` tells a client the window length.
        self.seq_length = tf.Variable(self._seq_length, trainable=False, name="seq_length")

        if self.kind in ("classification", "regression"):
            self._build_classification()
        elif self.kind == "squad":
            self._build_squad()
        else:
            self._build_ner()
        self.serving_default.get_concrete_function()

    def signatures(self):
        return {"serving_default": self.serving_default.get_concrete_function()}

    def _tokenize(self, text):
        """(ids, start_bytes, end_bytes), ragged int [batch, (words), (wordpieces)]."""
        ids, starts, ends = self.tokenizer.tokenize_with_offsets(text)
        return (tf.cast(ids, tf.int32), tf.cast(starts, tf.int32), tf.cast(ends, tf.int32))

    def _run_model(self, features):
        return self._model(features, training=False)

    # ------------------------------------------------------------- classification / regression
    def _build_classification(self):
        num_outputs = self._model.head.num_classes
        pair = _is_pair_task(self._task_config)
        self.text_pair = pair
        regression = self.kind == "regression"
        if not regression:
            self.label_names = tf.Variable(_label_names(self._task_config, num_outputs),
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
                return predict(text_a, text_b)

            def encode_pair(text_a, text_b):
                return encode([text_a, text_b])

            self.encode = tf.function(encode_pair, input_signature=signature, autograph=False)
        else:
            def serve(text_a):
                return predict(text_a)

            def encode_single(text_a):
                return encode([text_a])

            self.encode = tf.function(encode_single, input_signature=signature, autograph=False)
        self.serving_default = tf.function(serve, input_signature=signature, autograph=False)

    # -------------------------------------------------------------------------------- SQuAD
    def _build_squad(self):
        config = self._task_config
        self._version_2 = bool(config.get("version_2_with_negative", config.get("task") == "squad_v2"))
        self._doc_stride = int(config.get("doc_stride", 128))
        self._max_query_length = int(config.get("max_query_length", 64))
        self._max_answer_length = int(config.get("max_answer_length", 30))
        self._n_best_size = int(config.get("n_best_size", 20))
        self._null_threshold = float(config.get("null_score_diff_threshold", 0.0) or 0.0)
        if self._max_query_length > self._seq_length - 4:
            self._max_query_length = self._seq_length - 4
        signature = [tf.TensorSpec([None], tf.string, name="question"),
                     tf.TensorSpec([None], tf.string, name="context")]
        self.serving_default = tf.function(self._squad, input_signature=signature, autograph=False)

    def _squad_windows(self, question, context):
        """The windows of every example and what post-processing needs about them."""
        seq = self._seq_length
        query = self._tokenize(question)[0].merge_dims(1, 2)
        query = first_n(query, tf.fill([tf.shape(question)[0]], self._max_query_length))
        doc_ids, doc_starts, doc_ends = (t.merge_dims(1, 2) for t in self._tokenize(context))
        query_length = tf.cast(query.row_lengths(), tf.int32)  # [b]
        doc_length = tf.cast(doc_ids.row_lengths(), tf.int32)  # [b]
        max_doc = seq - query_length - 3  # [b], >= 1
        stride = tf.minimum(self._doc_stride, max_doc)
        num_windows = 1 + (tf.maximum(doc_length - max_doc, 0) + stride - 1) // stride
        num_windows = tf.minimum(num_windows, self._max_windows)

        example = tf.repeat(tf.range(tf.shape(question)[0]), num_windows)  # [W]
        window_in_example = tf.ragged.range(num_windows).flat_values  # [W]
        window_start = window_in_example * tf.gather(stride, example)  # [W]
        window_length = tf.minimum(tf.gather(doc_length, example) - window_start,
                                   tf.gather(max_doc, example))  # [W]
        window_length = tf.maximum(window_length, 0)

        # The doc wordpieces of each window, gathered from the flat values.
        doc_row_starts = tf.cast(doc_ids.row_starts(), tf.int32)
        flat_index = tf.ragged.range(window_length) + (
            tf.gather(doc_row_starts, example) + window_start)[:, None]  # [W, (len)]
        window_doc = tf.gather(doc_ids.flat_values, flat_index)
        query_rows = tf.gather(query, example)  # [W, (q)]
        num = tf.shape(example)[0]
        features = dense_inputs(
            [(_column(self._cls, num), 0), (query_rows, 0),
             (_column(self._sep, num), 0), (window_doc, 1),
             (_column(self._sep, num), 1)], seq, self._pad)

        # Position p of window w holds doc token j = start + p - offset for offset <= p < offset + len.
        offset = tf.gather(query_length, example) + 2  # [W]
        positions = tf.range(seq)[None, :]  # [1, S]
        doc_index = positions - offset[:, None] + window_start[:, None]  # [W, S] doc token index
        is_doc = (positions >= offset[:, None]) & (positions < (offset + window_length)[:, None])

        # The original's "max context" rule: the window where min(left, right) context is largest
        # (+ 0.01 * window length); the first such window on ties.
        local = doc_index - window_start[:, None]
        context_score = (tf.cast(tf.minimum(local, window_length[:, None] - 1 - local), tf.float32)
                         + 0.01 * tf.cast(window_length, tf.float32)[:, None])
        global_token = doc_index + tf.gather(doc_row_starts, example)[:, None]  # [W, S]
        num_tokens = tf.shape(doc_ids.flat_values)[0]
        segment = tf.where(is_doc, global_token, num_tokens)  # padding goes to a spare segment
        best_score = tf.math.unsorted_segment_max(
            tf.where(is_doc, context_score, _NEG), segment, num_tokens + 1)
        is_best = is_doc & (context_score >= tf.gather(best_score, segment))
        window_global = tf.broadcast_to(tf.range(num)[:, None], tf.shape(is_doc))
        first_window = tf.math.unsorted_segment_min(
            tf.where(is_best, window_global, num), segment, num_tokens + 1)
        is_max_context = is_best & (window_global == tf.gather(first_window, segment))

        doc_index = tf.clip_by_value(
            doc_index, 0, tf.maximum(tf.gather(doc_length, example) - 1, 0)[:, None])
        return features, dict(example=example, is_doc=is_doc, is_max_context=is_max_context,
                              doc_index=doc_index, doc_starts=doc_starts, doc_ends=doc_ends)

    def _squad(self, question, context):
        question, context = sanitize_utf8(question), sanitize_utf8(context)
        batch = tf.shape(question)[0]
        features, info = self._squad_windows(question, context)
        outputs = self._run_model(features)
        start_logits = tf.cast(outputs["start_logits"], tf.float32)  # [W, S]
        end_logits = tf.cast(outputs["end_logits"], tf.float32)  # [W, S]
        seq = self._seq_length
        example, is_doc = info["example"], info["is_doc"]
        num = tf.shape(example)[0]

        # Candidate starts and ends: among the n_best largest logits of their window.
        k = min(self._n_best_size, seq)
        top_start = tf.math.top_k(start_logits, k=k).indices
        top_end = tf.math.top_k(end_logits, k=k).indices
        in_top_start = tf.reduce_any(tf.one_hot(top_start, seq, dtype=tf.bool, on_value=True,
                                                off_value=False), axis=1)
        in_top_end = tf.reduce_any(tf.one_hot(top_end, seq, dtype=tf.bool, on_value=True,
                                              off_value=False), axis=1)
        valid_start = is_doc & info["is_max_context"] & in_top_start  # [W, S]
        valid_end = is_doc & in_top_end  # [W, S]

        # Spans [i, i + d] for d < max_answer_length: [W, S, D].
        span = self._max_answer_length
        end_position = tf.range(seq)[:, None] + tf.range(span)[None, :]  # [S, D]
        in_range = end_position < seq
        end_position = tf.minimum(end_position, seq - 1)
        span_end_logits = tf.gather(end_logits, end_position, axis=1)  # [W, S, D]
        span_valid = (valid_start[:, :, None] & tf.gather(valid_end, end_position, axis=1)
                      & in_range[None])
        span_score = tf.where(span_valid, start_logits[:, :, None] + span_end_logits, _NEG)
        flat_score = tf.reshape(span_score, [num, seq * span])
        best_flat = tf.argmax(flat_score, axis=1, output_type=tf.int32)  # [W]
        window_best = tf.gather(flat_score, best_flat, batch_dims=1)  # [W]
        best_start = best_flat // span
        best_end = best_start + best_flat % span

        # Best window of each example (the first on ties, as the original's stable sort).
        example_best = tf.math.unsorted_segment_max(window_best, example, batch)  # [b]
        is_top = window_best >= tf.gather(example_best, example)
        window_ids = tf.range(num)
        chosen = tf.math.unsorted_segment_min(tf.where(is_top, window_ids, num), example, batch)
        has_window = chosen < num
        chosen = tf.minimum(chosen, tf.maximum(num - 1, 0))
        has_span = has_window & (example_best > _NEG / 2)

        doc_index = info["doc_index"]  # [W, S]

        def doc_token(positions):
            """Doc token index (within its example) at `positions` [W] of each chosen window."""
            rows = tf.gather(doc_index, chosen)  # [b, S]
            return tf.gather(rows, tf.gather(positions, chosen)[:, None], batch_dims=1)[:, 0]

        first = doc_token(best_start)  # the answer's first wordpiece
        last = doc_token(best_end)  # the answer's last wordpiece
        starts_dense = info["doc_starts"].to_tensor(default_value=0)  # [b, doc wordpieces]
        ends_dense = info["doc_ends"].to_tensor(default_value=0)
        start_byte = tf.gather(tf.pad(starts_dense, [[0, 0], [0, 1]]), first[:, None],
                               batch_dims=1)[:, 0]
        end_byte = tf.gather(tf.pad(ends_dense, [[0, 0], [0, 1]]), last[:, None], batch_dims=1)[:, 0]
        start_byte = tf.where(has_span, start_byte, 0)
        end_byte = tf.where(has_span, end_byte, 0)
        span_score_best = tf.where(has_span, example_best, 0.0)

        answer_text = tf.strings.substr(context, start_byte, end_byte - start_byte)
        offsets = char_offsets(context, tf.stack([start_byte, end_byte], axis=1))
        answer_start, answer_end = offsets[:, 0], offsets[:, 1]

        if self._version_2:
            null_window = start_logits[:, 0] + end_logits[:, 0]  # [W]
            null_score = tf.math.unsorted_segment_min(null_window, example, batch)
            null_score = tf.where(has_window, null_score, 0.0)
            null_odds = tf.where(has_span, null_score - example_best, NO_CANDIDATE_NULL_ODDS)
            has_answer = has_span & (null_odds <= self._null_threshold)
            score = tf.where(has_answer, span_score_best, null_score)
        else:
            null_odds = tf.zeros([batch], tf.float32)
            has_answer = has_span
            score = span_score_best
        return {"answer_text": tf.where(has_answer, answer_text, ""),
                "answer_start": tf.where(has_answer, answer_start, -1),
                "answer_end": tf.where(has_answer, answer_end, -1),
                "score": score, "null_odds": null_odds, "has_answer": has_answer}

    # ---------------------------------------------------------------------------------- NER
    def _build_ner(self):
        num_labels = self._model.head.num_classes
        names = _label_names(self._task_config, num_labels)
        prefixes, type_ids, types = _tag_parts(names)
        self.label_names = tf.Variable(names, trainable=False, name="label_names")
        self.entity_types = tf.Variable(types or [""], trainable=False, name="entity_types")
        self._tag_prefix = prefixes
        self._tag_type = type_ids
        self.serving_default = tf.function(
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
        # bert_keras.tasks.conll; a scan over the words of the batch.
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
            [(_column(self._cls, num_windows), 0), (window_pieces, 0),
             (_column(self._sep, num_windows), 0)], self._seq_length, self._pad)
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


# ------------------------------------------------------------------------------- exporting
def build_task_module(model_dir, seq_length=None, dtype="float32", max_windows=None,
                      tokenizer=None):
    """The exportable raw-text task model of a fine-tuned model directory."""
    from bert_keras.task_models import load_task_model

    task_config = model_dir_lib.read_task_config(model_dir)
    if task_config is None:
        raise TaskExportError(f"{model_dir}: no {model_dir_lib.TASK_CONFIG_NAME}; --kind=task needs "
                              "a fine-tuned model directory (tools/run_finetuning.py writes one)")
    head = task_config.get("head")
    if head not in SERVING_KINDS:
        raise TaskExportError(f"{model_dir}: head {head!r} cannot be served from raw text; "
                              f"supported heads: {', '.join(SERVING_KINDS)}")
    seq_length = int(seq_length or task_config.get("max_seq_length") or 128)
    config = model_dir_lib.read_config(model_dir)
    if seq_length > config.max_position_embeddings:
        raise TaskExportError(f"seq_length {seq_length} exceeds max_position_embeddings "
                              f"{config.max_position_embeddings}")
    model, task_config = load_task_model(model_dir, dtype=dtype_policy(dtype))
    if tokenizer is None:
        from bert_keras.export.preprocessor_export import build_tokenizer

        tokenizer = build_tokenizer(model_dir)
    from bert_keras import model_dir as lib

    special_ids = lib.read_vocab(model_dir, config).special_ids()
    return TaskModule(tokenizer, model, task_config, special_ids, seq_length, max_windows)


def save_task_module(module, export_dir):
    """Writes a `TaskModule` as a SavedModel, with its task_config.json in assets.extra/."""
    tf.saved_model.save(module, export_dir, signatures=module.signatures())
    extra = os.path.join(export_dir, "assets.extra")
    os.makedirs(extra, exist_ok=True)
    with open(os.path.join(extra, model_dir_lib.TASK_CONFIG_NAME), "w", encoding="utf-8") as f:
        json.dump(module._task_config, f, indent=2, sort_keys=True)
    return export_dir


def export_task_from_model_dir(model_dir, export_dir, seq_length=None, dtype="float32",
                               max_windows=None):
    """Writes the raw-text task SavedModel of a fine-tuned model directory; returns export_dir."""
    return save_task_module(build_task_module(model_dir, seq_length, dtype, max_windows),
                            export_dir)


__all__ = ["TaskModule", "TaskExportError", "build_task_module", "save_task_module",
           "export_task_from_model_dir", "sanitize_utf8", "char_offsets", "SERVING_KINDS"]
