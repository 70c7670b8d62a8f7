"""The tokenizer's fast path: an RE2 pattern that fully matches the strings tf-text's
`FastBertNormalizer` + end-to-end `FastWordpieceTokenizer` tokenize exactly as the original
`tokenization.py` does; the rows it does not match take the exact path
(`bert_keras.text.tokenizer`). The pattern is computed once per tf-text and Unicode version and
stored (`unicode_tables.stored`).
"""

import functools
import unicodedata

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from bert_keras.common.files import write_atomic
from bert_keras.text import unicode_tables as ut


def _wordpiece_split_kinds(chars):
    """How tf-text's end-to-end WordPiece splits on each character: {char: kind or None}."""
    probe = tf_text.FastWordpieceTokenizer(["[UNK]", "b", "##b"], token_out_type=tf.int32,
                                           no_pretokenization=False)
    ids = probe.tokenize(tf.constant([("b" + char + "b").encode("utf-8") for char in chars]))
    kinds = {}
    for char, row in zip(chars, ids.to_list()):
        if char == "b" or row == [0]:
            kinds[char] = ut.JOIN
        elif row == [1, 1]:
            kinds[char] = ut.SPLIT
        elif row == [1, 0, 1]:
            kinds[char] = ut.ALONE
        else:
            kinds[char] = None
    return kinds


def fast_path_pattern_file_name(lower_case):
    """The pattern depends on tf-text's normalizer and on Python's Unicode version."""
    return (f"fast-path-{'uncased' if lower_case else 'cased'}-tftext{tf_text.__version__}"
            f"-unicode{unicodedata.unidata_version}-v{ut.TABLES_FORMAT}.txt")


@functools.lru_cache(maxsize=None)
def fast_path_pattern(lower_case):
    """`compute_fast_path_pattern(lower_case)`, read from the package's precomputed file or the
    user's cache when there is one for this tf-text and Unicode version (see
    `unicode_tables.stored`)."""
    lower_case = bool(lower_case)

    def save(pattern, path):
        write_atomic(path, pattern.encode("utf-8"))

    def load(path):
        with open(path, encoding="utf-8") as f:
            return f.read()

    return ut.stored(fast_path_pattern_file_name(lower_case),
                     lambda: compute_fast_path_pattern(lower_case), save, load)


def compute_fast_path_pattern(lower_case):
    """An RE2 pattern that fully matches the strings the fast path tokenizes exactly.

    A codepoint is safe when tf-text's `FastBertNormalizer` output, split the way its
    end-to-end `FastWordpieceTokenizer` splits, gives the same words as the original in every
    context (`unicode_tables.canonical_stream`). The codepoints of the context rules, the
    unassigned ones, surrogates (RE2 accepts encoded surrogates, Python drops them) and invalid
    UTF-8 (never matched by a class) all send a row to the exact path.
    """
    lower_case = bool(lower_case)
    codepoints = ut.assigned_codepoints()
    with tf.init_scope():  # eager even when a tokenizer is built inside a tf.function
        normalizer = tf_text.FastBertNormalizer(lower_case_nfd_strip_accents=lower_case)
        normalized = normalizer.normalize(
            tf.constant([chr(cp).encode("utf-8") for cp in codepoints])).numpy()
        texts = [value.decode("utf-8") for value in normalized]
        kinds = _wordpiece_split_kinds(sorted(set("".join(texts))))
    uncased = ut.uncased_texts() if lower_case else {}
    safe = np.zeros(ut.MAX_CODEPOINT + 1, bool)
    for cp, text in zip(codepoints, texts):
        if any(kinds[char] is None for char in text):
            continue
        ours = ut.canonical_stream(ut.codepoint_stream(cp, lower_case, uncased.get(cp)))
        theirs = ut.canonical_stream(tuple((kinds[char], char) for char in text))
        safe[cp] = ours == theirs
    if lower_case:
        safe[ut.normalization_tables(True).context_codepoints] = False
    unsafe = np.flatnonzero(~safe)
    breaks = np.flatnonzero(np.diff(unsafe) != 1)
    starts = np.concatenate([unsafe[:1], unsafe[breaks + 1]])
    ends = np.concatenate([unsafe[breaks], unsafe[-1:]])
    ranges = "".join(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}"
                     for a, b in zip(starts, ends))
    return f"[^{ranges}]*"


__all__ = ["fast_path_pattern", "compute_fast_path_pattern", "fast_path_pattern_file_name"]
