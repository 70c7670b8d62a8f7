"""In-graph BERT tokenizer with exactly the ids of the original `tokenization.py`.

The original (google-research/bert) runs `BasicTokenizer` (drop NUL, U+FFFD and categories
Cc/Cf, space out CJK ideographs, split on whitespace, lower-case and strip accents for uncased
models, split off punctuation) then greedy longest-match-first WordPiece with "##"
continuations; a word of more than 200 characters (not bytes) becomes [UNK].
`tensorflow_text.FastBertTokenizer` does the same thing fast but with compatibility-style
normalization, so it gives other ids on a fraction of real text (U+2011 NON-BREAKING HYPHEN,
U+2033 DOUBLE PRIME, superscripts, ligatures, soft hyphens in cased mode, unassigned
codepoints, ...).

`BertTokenizer` gets both: every batch first goes through tf-text's fast normalizer and
end-to-end WordPiece, and the rows that could differ from the original are tokenized again on
an exact path and merged back. A row can differ only if it holds a codepoint whose handling by
tf-text differs from the original's; those codepoints are found when the tokenizer is built by
running tf-text's own ops on every assigned codepoint, and matched in the graph with one RE2
pattern. The exact path looks up each codepoint in tables computed from Python's `unicodedata`
(`bert_keras.text.unicode_tables`), fixes the two context rules (final sigma, canonical reordering),
splits on spaces and runs WordPiece on single words.

The tables follow the Unicode data of the Python that builds the tokenizer, as the original
does; the pattern is checked against the tf-text that builds it. Both become constants of an
exported SavedModel (which needs `import tensorflow_text` before loading).

Example:

>>> tokenizer = BertTokenizer(vocab_file, lower_case=True)  # doctest: +SKIP
>>> tokenizer.tokenize(["Hello, World!"])  # doctest: +SKIP
<tf.RaggedTensor [[[7592], [1010], [2088], [999]]]>
"""


import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from bert_keras.text import unicode_tables as ut
from bert_keras.text.fast_path import fast_path_pattern  # noqa: F401 (also public here)
from bert_keras.text.python_tokenizer import MAX_CHARS_PER_WORD, SUFFIX_INDICATOR
from bert_keras.text.vocab import Vocabulary

UNKNOWN_TOKEN = "[UNK]"
_SPACE = 32


def _member(sorted_values, x):
    """(whether each x is in the sorted 1-D `sorted_values`, its index there)."""
    if sorted_values.shape[0] == 0:
        return tf.zeros_like(x, tf.bool), tf.zeros_like(x, tf.int32)
    index = tf.minimum(tf.searchsorted(sorted_values, x), sorted_values.shape[0] - 1)
    return tf.equal(tf.gather(sorted_values, index), x), index


def _utf8_length(codepoints):
    codepoints = tf.cast(codepoints, tf.int64)
    return (1 + tf.cast(codepoints >= 0x80, tf.int64) + tf.cast(codepoints >= 0x800, tf.int64)
            + tf.cast(codepoints >= 0x10000, tf.int64))


class BertTokenizer(tf.Module):
    """Text to WordPiece ids, in graph, identical to the original BERT `FullTokenizer`.

    Args:
      vocab_file: path of a `vocab.txt` (one token per line; [PAD], [UNK], [CLS], [SEP] and
        [MASK] required).
      lower_case: True for uncased vocabularies (lower-case, strip accents), False for cased.
      max_chars_per_word: words longer than this become [UNK] (the original uses 200).
      fast_path: use tf-text's fast ops for the rows where they are exact (same ids, faster).

    All methods take a string tensor of shape [batch] (or a list of Python strings) and work
    eagerly, inside `tf.function` and inside `tf.data` pipelines.

    Example:

    >>> tokenizer = BertTokenizer(vocab_file, lower_case=True)  # doctest: +SKIP
    >>> ids, starts, ends = tokenizer.tokenize_with_offsets(["Ünïcode"])  # doctest: +SKIP
    """

    def __init__(self, vocab_file, lower_case, max_chars_per_word=MAX_CHARS_PER_WORD,
                 fast_path=True, name=None):
        super().__init__(name=name)
        self.vocab = Vocabulary.from_file(vocab_file)
        self.vocab_file = self.vocab.path
        self.lower_case = bool(lower_case)
        self.max_chars_per_word = int(max_chars_per_word)
        self.fast_path = bool(fast_path)
        self.special_ids = self.vocab.special_ids()
        self.vocab_size = len(self.vocab)
        tokens = self.vocab.tokens

        tables = ut.normalization_tables(self.lower_case)
        self._tables = tables
        self._block_index = tf.constant(tables.block_index)
        self._block_rows = tf.constant(tables.block_rows)
        self._rows = tf.constant(tables.rows)
        self._has_context_rules = tables.lower_case
        assert not np.isin(tables.rows[:tables.first_context_row], ut.GREEK_CAPITAL_SIGMA).any()
        self._case_class_starts = tf.constant(tables.case_class_starts)
        self._case_class_values = tf.constant(tables.case_class_values)
        self._mc_nonstarters = tf.constant(tables.mc_nonstarters)
        self._mc_combining_classes = tf.constant(tables.mc_combining_classes)
        self._reorder_blockers = tf.constant(tables.reorder_blockers)

        # Words reach WordPiece whole, so a word of max_chars_per_word 4-byte characters must fit.
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            tokens, suffix_indicator=SUFFIX_INDICATOR, max_bytes_per_word=4 * self.max_chars_per_word,
            token_out_type=tf.int32, unknown_token=UNKNOWN_TOKEN, no_pretokenization=True)
        self._is_suffix = tf.constant([token.startswith(SUFFIX_INDICATOR) for token in tokens])
        if self.fast_path:
            self._fast_normalizer = tf_text.FastBertNormalizer(
                lower_case_nfd_strip_accents=self.lower_case)
            # A word of more bytes than characters allowed may still be short enough: such
            # words come back as [UNK] spanning more than max_chars_per_word bytes, and their
            # rows go to the exact path.
            self._fast_wordpiece = tf_text.FastWordpieceTokenizer(
                tokens, suffix_indicator=SUFFIX_INDICATOR, max_bytes_per_word=self.max_chars_per_word,
                token_out_type=tf.int32, unknown_token=UNKNOWN_TOKEN, no_pretokenization=False)
            self._fast_pattern = fast_path_pattern(self.lower_case)

    # Public API -------------------------------------------------------------------------------

    def tokenize(self, strings):
        """Wordpiece ids: int32 RaggedTensor [batch, (words), (pieces)]."""
        return self._call(self._tokenize_batch, strings)

    def tokenize_merged(self, strings):
        """Wordpiece ids with the words merged: int32 RaggedTensor [batch, (pieces)]."""
        return self._call(self._tokenize_merged_batch, strings)

    def tokenize_with_offsets(self, strings):
        """(ids, start_offsets, end_offsets), each a RaggedTensor [batch, (words), (pieces)].

        Offsets are int64 byte positions in the original string: a wordpiece covers
        `string[start:end]`, from the first byte of the first character it came from to the
        last byte of the last one. When lower-casing or accent stripping turned one character
        into several (Hangul syllables into jamo, "İ" into "i"), wordpieces from the same
        character share its span. Always uses the exact path.
        """
        return self._call(self._exact_tokenize_with_offsets, strings)

    def basic_tokenize(self, strings):
        """The words after the original `BasicTokenizer`: string RaggedTensor [batch, (words)]."""
        return self._call(self._basic_tokenize_batch, strings)

    def get_special_tokens_dict(self):
        """The special ids and vocab size as int32 scalars, as in the TF Hub preprocessors."""
        values = dict(self.special_ids, vocab_size=self.vocab_size)
        return {key: tf.constant(value, tf.int32) for key, value in values.items()}

    def _function(self, method):
        """The `tf.function` of a batch method ([batch] strings), made on its first use: a
        SavedModel holding this tokenizer then saves, and traces, only the methods its
        functions call (each unused one cost seconds of tracing at every export)."""
        name = f"_{method.__name__}_fn"
        function = getattr(self, name, None)
        if function is None:
            with tf.init_scope():  # made outside any graph being traced
                function = tf.function(method, input_signature=[tf.TensorSpec([None], tf.string)],
                                       autograph=False)
                setattr(self, name, function)
        return function

    def _call(self, method, strings):
        function = self._function(method)
        strings = tf.convert_to_tensor(strings, tf.string)
        if strings.shape.rank == 0:
            return tf.nest.map_structure(lambda x: x[0], function(strings[tf.newaxis]))
        if strings.shape.rank != 1:
            raise ValueError(f"expected a string tensor of shape [batch], got {strings.shape}")
        return function(strings)

    # Batch functions --------------------------------------------------------------------------

    def _tokenize_batch(self, strings):
        if not self.fast_path:
            return self._exact_tokenize(strings)
        return self._split_words(self._fast_tokenize(strings))

    def _tokenize_merged_batch(self, strings):
        if not self.fast_path:
            return self._exact_tokenize(strings, merge_words=True)
        return self._fast_tokenize(strings)

    def _basic_tokenize_batch(self, strings):
        codepoints = tf.strings.unicode_decode(strings, "UTF-8", errors="ignore")
        out, out_splits, _ = self._normalize(codepoints)
        text = tf.strings.unicode_encode(
            tf.RaggedTensor.from_row_splits(out, out_splits, validate=False), "UTF-8")
        return tf.strings.split(text)

    def _split_words(self, pieces):
        """[batch, (pieces)] -> [batch, (words), (pieces)]: a word starts at every non-## piece.

        Exact for the original's output: the first piece of a word is looked up without "##",
        the others with it, and a word never starts with "##" ("#" is punctuation).
        """
        ids = pieces.flat_values
        starts = tf.logical_not(tf.gather(self._is_suffix, ids))
        word_splits = tf.concat([tf.where(starts)[:, 0], tf.size(ids, out_type=tf.int64)[None]], 0)
        words_before = tf.concat([tf.zeros([1], tf.int64), tf.cumsum(tf.cast(starts, tf.int64))], 0)
        words = tf.RaggedTensor.from_row_splits(ids, word_splits, validate=False)
        return tf.RaggedTensor.from_row_splits(words, tf.gather(words_before, pieces.row_splits),
                                               validate=False)

    # Fast path --------------------------------------------------------------------------------

    def _fast_tokenize(self, strings):
        """[batch] -> [batch, (pieces)]: tf-text's fast ops, exact path for unsafe rows."""
        safe = tf.strings.regex_full_match(strings, self._fast_pattern)
        normalized = self._fast_normalizer.normalize(strings)
        ids, starts, ends = self._fast_wordpiece.tokenize_with_offsets(normalized)
        too_long = tf.logical_and(
            tf.equal(ids.flat_values, self.special_ids["unknown_id"]),
            ends.flat_values - starts.flat_values > self.max_chars_per_word)

        def with_exact_rows():
            long_rows = tf.math.unsorted_segment_max(
                tf.cast(too_long, tf.int32), ids.value_rowids(), ids.nrows()) > 0
            exact_rows = tf.logical_or(tf.logical_not(safe), long_rows)
            exact = self._exact_tokenize(tf.boolean_mask(strings, exact_rows), merge_words=True)
            # Row i of the result: row i of `ids`, or the next row of `exact` if i is unsafe.
            index = tf.where(exact_rows, ids.nrows() + tf.cumsum(tf.cast(exact_rows, tf.int64)) - 1,
                             tf.range(ids.nrows()))
            return tf.gather(tf.concat([ids, exact], axis=0), index)

        needs_exact = tf.logical_or(tf.logical_not(tf.reduce_all(safe)), tf.reduce_any(too_long))
        return tf.cond(needs_exact, with_exact_rows, lambda: ids)

    # Exact path -------------------------------------------------------------------------------

    def _exact_tokenize(self, strings, merge_words=False):
        """[batch] -> [batch, (words), (pieces)] (or [batch, (pieces)]) on the exact path."""
        words = self._basic_tokenize_batch(strings)
        flat = words.flat_values
        too_long = tf.strings.length(flat, unit="UTF8_CHAR") > self.max_chars_per_word
        # "[UNK]" is a vocabulary token, so WordPiece maps it to the unknown id.
        pieces = self._wordpiece.tokenize(tf.where(too_long, UNKNOWN_TOKEN, flat))
        if merge_words:
            return tf.RaggedTensor.from_row_splits(
                pieces.flat_values, tf.gather(pieces.row_splits, words.row_splits), validate=False)
        return words.with_flat_values(pieces)

    def _normalize(self, codepoints, with_sources=False):
        """The `BasicTokenizer` text as codepoints, one ASCII space at every split point.

        Args:
          codepoints: int32 RaggedTensor [batch, (n)] of the decoded input.
          with_sources: also return, for each output codepoint, the index of the input
            codepoint (in `codepoints.flat_values`) it came from.

        Returns:
          (out int32 [m], out_row_splits int64 [batch + 1], sources int64 [m] or None).
        """
        flat = codepoints.flat_values
        block = tf.gather(self._block_index, tf.bitwise.right_shift(flat, ut.BLOCK_BITS))
        low = tf.bitwise.bitwise_and(flat, ut.BLOCK_SIZE - 1)
        row_numbers = tf.gather(self._block_rows, block * ut.BLOCK_SIZE + low)   # [n]
        rows = tf.gather(self._rows, row_numbers)                                # [n, width]
        keep = tf.not_equal(rows, ut.PAD)
        out = tf.boolean_mask(tf.where(tf.equal(rows, ut.SAME), flat[:, tf.newaxis], rows), keep)
        counts = tf.reduce_sum(tf.cast(keep, tf.int64), axis=1)                 # [n]
        ends = tf.concat([tf.zeros([1], tf.int64), tf.cumsum(counts)], axis=0)
        out_splits = tf.gather(ends, codepoints.row_splits)
        sources = None
        if with_sources:
            sources = tf.repeat(tf.range(tf.size(flat, out_type=tf.int64)), counts)
        if self._has_context_rules:
            def fix():
                fixed = self._final_sigma(out, flat, codepoints.value_rowids())
                return self._canonical_reorder(fixed, counts, flat, codepoints.value_rowids(),
                                               sources)

            def unchanged():
                return out, (sources if with_sources else tf.zeros([0], tf.int64))

            needs_fix = tf.reduce_any(row_numbers >= self._tables.first_context_row)
            out, fixed_sources = tf.cond(needs_fix, fix, unchanged)
            if with_sources:
                sources = fixed_sources
        return out, out_splits, sources

    def _final_sigma(self, out, flat, row_ids):
        """Python's `str.lower()` context rule for GREEK CAPITAL SIGMA (kept as is by the table).

        Final form when preceded by a cased letter and not followed by one, skipping
        case-ignorable characters (and the characters `_clean_text` removes) in the same
        string. Whitespace, CJK ideographs and row ends are neither cased nor ignorable, so
        looking across the whole row equals the original's per-word `lower()`. The k-th sigma
        of the output is the k-th sigma of the input.
        """
        is_sigma = tf.equal(flat, ut.GREEK_CAPITAL_SIGMA)

        def fix():
            classes = tf.gather(self._case_class_values,
                                tf.searchsorted(self._case_class_starts, flat, side="right") - 1)
            counted = tf.not_equal(classes, ut.CASE_IGNORABLE)
            counted_positions = tf.where(counted)[:, 0]                          # [c]
            rank = tf.cumsum(tf.cast(counted, tf.int64)) - 1                     # [n]
            sigma_positions = tf.where(is_sigma)[:, 0]
            k = tf.gather(rank, sigma_positions)
            last = tf.size(counted_positions, out_type=tf.int64) - 1
            previous = tf.gather(counted_positions, tf.maximum(k - 1, 0))
            following = tf.gather(counted_positions, tf.minimum(k + 1, last))
            row = tf.gather(row_ids, sigma_positions)
            previous_cased = ((k > 0) & tf.equal(tf.gather(row_ids, previous), row)
                              & tf.equal(tf.gather(classes, previous), ut.CASE_CASED))
            following_cased = ((k < last) & tf.equal(tf.gather(row_ids, following), row)
                               & tf.equal(tf.gather(classes, following), ut.CASE_CASED))
            final = previous_cased & tf.logical_not(following_cased)
            values = tf.where(final, ut.GREEK_SMALL_FINAL_SIGMA, ut.GREEK_SMALL_SIGMA)
            out_positions = tf.where(tf.equal(out, ut.GREEK_CAPITAL_SIGMA))
            return tf.tensor_scatter_nd_update(out, out_positions, values)

        return tf.cond(tf.reduce_any(is_sigma), fix, lambda: out)

    def _canonical_reorder(self, out, counts, flat, row_ids, sources):
        """NFD's canonical ordering, for the spacing (Mc) non-starters that survive Mn stripping.

        In each run of non-starters (between two starters of the NFD text, including the Mn
        starters that get stripped: `reorder_blockers`) characters are sorted stably by
        combining class. Only needed when a batch holds two Mc non-starters.

        Returns (out, sources), sources empty when none were given.
        """
        is_mc, mc_index = _member(self._mc_nonstarters, out)
        given_sources = sources

        def reorder():
            sources = given_sources
            if sources is None:
                sources = tf.repeat(tf.range(tf.size(flat, out_type=tf.int64)), counts)
            combining = tf.cast(
                tf.where(is_mc, tf.gather(self._mc_combining_classes, mc_index), 0), tf.int64)
            is_blocker, _ = _member(self._reorder_blockers, flat)
            blockers_before = tf.gather(tf.cumsum(tf.cast(is_blocker, tf.int64)), sources)
            source_rows = tf.gather(row_ids, sources)
            new_run = tf.concat([
                tf.ones([1], tf.bool),
                tf.equal(combining[1:], 0)
                | tf.not_equal(blockers_before[1:], blockers_before[:-1])
                | tf.not_equal(source_rows[1:], source_rows[:-1])], axis=0)[:tf.size(out)]
            run = tf.cumsum(tf.cast(new_run, tf.int64))
            order = tf.argsort(run * 256 + combining, stable=True)
            reordered_sources = (tf.gather(sources, order) if given_sources is not None
                                 else tf.zeros([0], tf.int64))
            return tf.gather(out, order), reordered_sources

        def unchanged():
            return out, (given_sources if given_sources is not None else tf.zeros([0], tf.int64))

        return tf.cond(tf.reduce_sum(tf.cast(is_mc, tf.int32)) >= 2, reorder, unchanged)

    def _exact_tokenize_with_offsets(self, strings):
        codepoints, byte_starts = tf.strings.unicode_decode_with_offsets(
            strings, "UTF-8", errors="ignore")
        out, out_splits, sources = self._normalize(codepoints, with_sources=True)
        source_starts = tf.gather(byte_starts.flat_values, sources)
        source_ends = source_starts + _utf8_length(tf.gather(codepoints.flat_values, sources))
        out_rows = tf.ragged.row_splits_to_segment_ids(out_splits)

        # Words: runs of non-space output characters within a row.
        is_space = tf.equal(out, _SPACE)
        first = tf.ones([1], tf.bool)
        previous_space = tf.concat([first, is_space[:-1]], axis=0)[:tf.size(out)]
        row_start = tf.concat([first, tf.not_equal(out_rows[1:], out_rows[:-1])], 0)[:tf.size(out)]
        word_start = tf.logical_not(is_space) & (previous_space | row_start)
        char_positions = tf.where(tf.logical_not(is_space))[:, 0]
        chars = tf.gather(out, char_positions)                                      # [c]
        char_words = tf.gather(tf.cumsum(tf.cast(word_start, tf.int64)) - 1, char_positions)
        num_words = tf.reduce_sum(tf.cast(word_start, tf.int64))
        word_chars = tf.RaggedTensor.from_value_rowids(chars, char_words, nrows=num_words,
                                                       validate=False)
        too_long = word_chars.row_lengths() > self.max_chars_per_word
        words = tf.where(too_long, UNKNOWN_TOKEN, tf.strings.unicode_encode(word_chars, "UTF-8"))
        pieces, piece_starts, _ = self._wordpiece.tokenize_with_offsets(words)

        # WordPiece offsets are bytes of the normalized word: find each piece's first character.
        # The pieces of all words partition the characters; a piece spans its characters'
        # sources (which canonical reordering may have put out of order).
        char_bytes = tf.cumsum(_utf8_length(chars), exclusive=True)               # [c]
        word_first = word_chars.row_starts()
        piece_words = pieces.value_rowids()
        base = tf.gather(tf.gather(char_bytes, word_first), piece_words)
        first_char = tf.searchsorted(char_bytes, base + piece_starts.flat_values,
                                     side="right", out_type=tf.int64) - 1
        first_char = tf.where(tf.gather(too_long, piece_words),
                              tf.gather(word_first, piece_words), first_char)
        num_pieces = tf.size(first_char, out_type=tf.int64)
        is_first = tf.scatter_nd(first_char[:, tf.newaxis], tf.ones_like(first_char),
                                 tf.size(chars, out_type=tf.int64)[tf.newaxis])
        char_pieces = tf.cumsum(is_first) - 1
        starts = tf.math.unsorted_segment_min(tf.gather(source_starts, char_positions),
                                              char_pieces, num_pieces)
        ends = tf.math.unsorted_segment_max(tf.gather(source_ends, char_positions),
                                            char_pieces, num_pieces)

        word_rows = tf.boolean_mask(out_rows, word_start)
        ids = tf.RaggedTensor.from_value_rowids(pieces, word_rows, nrows=codepoints.nrows(),
                                                validate=False)
        return ids, ids.with_flat_values(starts), ids.with_flat_values(ends)
