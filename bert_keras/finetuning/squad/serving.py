"""Serving of the squad family's span head from raw text: windows, span selection and answer
text in-graph.

Follows the original `run_squad.py`: the question cut to `max_query_length` wordpieces, windows
over the context wordpieces `doc_stride` apart, each start token considered only in the window
where it has the most context, start and end among the `n_best_size` largest logits of the
window, at most `max_answer_length` wordpieces long. The answer is the context's own text
between the first wordpiece's start and the last wordpiece's end. At most `max_windows` windows
per context are run.
"""

import tensorflow as tf

from bert_keras.finetuning.squad.postprocess import NO_CANDIDATE_NULL_ODDS
from bert_keras.finetuning.tasks.serving import (NEG_INF, Serving, char_offsets, column, same_batch,
                                                 sanitize_utf8)
from bert_keras.text.packing import dense_inputs, first_n


class SquadServing(Serving):
    """The span head's `serving_default(question, context)` and `encode(...)` (v1.1 and v2.0)."""

    min_seq_length = 5
    position_padding = NEG_INF  # an impossible start or end

    def build(self):
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
        self.module.serving_default = tf.function(self._squad, input_signature=signature, autograph=False)
        self.module.encode = tf.function(self._squad_encode, input_signature=signature, autograph=False)

    def _squad_encode(self, question, context):
        """The windows the model sees: `input_word_ids`, `input_mask`, `input_type_ids` int32
        [windows, seq_length], `example_index` int32 [windows] (the question each window is of),
        `token_is_max_context` bool [windows, seq_length]."""
        features, info = self._squad_windows(sanitize_utf8(question), sanitize_utf8(context))
        return dict(features, example_index=info["example"],
                    token_is_max_context=info["is_max_context"])

    def _squad_windows(self, question, context):
        """The windows of every example and what post-processing needs about them."""
        question, context = same_batch("question", question, context=context)
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
            [(column(self._cls, num), 0), (query_rows, 0),
             (column(self._sep, num), 0), (window_doc, 1),
             (column(self._sep, num), 1)], seq, self._pad)

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
            tf.where(is_doc, context_score, NEG_INF), segment, num_tokens + 1)
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
        span_score = tf.where(span_valid, start_logits[:, :, None] + span_end_logits, NEG_INF)
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
        has_span = has_window & (example_best > NEG_INF / 2)

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


__all__ = ["SquadServing"]
