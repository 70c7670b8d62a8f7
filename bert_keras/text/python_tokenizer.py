"""BERT's tokenization in plain Python: the ids of the original `tokenization.py`, no TensorFlow.

The pre-training data tool tokenizes with it (`bert_keras.data`): its worker processes start in a
fraction of a second and tokenize in parallel, where the in-graph tokenizer
(`bert_keras.text.tokenizer.BertTokenizer`, the one exported with models) needs TensorFlow in the
process. Both give the same ids (`tests/text/test_python_tokenizer.py` checks them against each
other and against the original on real text).

Two steps, as in the original:

1. Basic tokenization (`split_words`): the original `BasicTokenizer`'s rules on the character
   classes of `bert_keras.text.unicode_tables`. NUL, U+FFFD and Cc/Cf characters are removed;
   Zs, tab, LF and CR split words; CJK ideographs are spaced out; uncased models lower-case and
   strip accents (NFD, then drop the Mn marks) word by word; punctuation (Unicode P* and the
   ASCII symbols) is split off. The vocabulary builder counts these words too.
2. WordPiece: greedy longest match first with "##" continuations; a word of more than 200
   characters, or one with a part that no token covers, is a single [UNK].

A text is cut into whitespace-free chunks, and every distinct chunk is tokenized once and
remembered: most chunks of a corpus recur.

Example:

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
>>> tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", ",", "world", "##s", "!"]
>>> _ = open(path, "w", encoding="utf-8").write("\\n".join(tokens) + "\\n")
>>> tokenizer = PythonBertTokenizer(path, lower_case=True)
>>> tokenizer.tokenize("Héllo, WORLDS! Ciao")
[5, 6, 7, 8, 9, 1]
>>> ids, lengths = tokenizer.tokenize_batch(["hello world", "", "hello"])
>>> ids.tolist(), lengths.tolist()
([5, 7, 5], [2, 0, 1])
>>> split_words("Héllo, WORLD!\\u00a0中文", lower_case=True)
['hello', ',', 'world', '!', '中', '文']
"""

import functools
import re
import sys
import unicodedata

import numpy as np

from bert_keras.text import unicode_tables as ut
from bert_keras.text.vocab import Vocabulary

# A longer word becomes a single [UNK] (the original's max_input_chars_per_word).
MAX_CHARS_PER_WORD = 200
SUFFIX_INDICATOR = "##"

# ---------------------------------------------------------------------------------------------
# Basic tokenization, on whitespace-free chunks of text.
#
# `str.split()` cuts a text at every character the original splits on (tab, LF, CR, the Zs
# spaces, and U+2028/U+2029, which its cleaning keeps and its `split()` then splits on), and
# also at a few control characters that the original removes instead, joining their two sides
# (vertical tab, form feed, U+001C-U+001F, U+0085): those are deleted first. A chunk between two
# cuts then holds no split point but the CJK spaces and the punctuation, and the original's
# steps give the same words for the chunk alone as for the whole text (it lower-cases and strips
# accents word by word). Most chunks recur, so each distinct chunk goes through those steps once.


class _CharMap(dict):
    """A `str.translate` table filled on first use of a codepoint by `value(char)`."""

    def __init__(self, value):
        super().__init__()
        self._value = value

    def __missing__(self, cp):
        value = self[cp] = self._value(chr(cp))
        return value


def _cleaned(char):
    """The original's `_clean_text` and `_tokenize_chinese_chars` for one character."""
    if ut.is_removed(char):
        return None
    if ut.is_whitespace(char):
        return " "
    if ut.is_cjk_codepoint(ord(char)):
        return f" {char} "
    return ord(char)


def _punctuation_split(char):
    return f" {char} " if ut.is_punctuation(char) else ord(char)


def _accent_removed(char):
    return None if unicodedata.category(char) == "Mn" else ord(char)


@functools.lru_cache(maxsize=None)
def _removed_split_points():
    """A regex of the characters `str.split()` splits on that the original removes."""
    # Every codepoint but the surrogates, as one string; `re`'s \s is `str.isspace()`.
    codepoints = np.arange(sys.maxunicode + 1, dtype="<u4")
    codepoints = codepoints[(codepoints < 0xD800) | (codepoints > 0xDFFF)]
    every_char = codepoints.tobytes().decode("utf-32-le")
    chars = [char for char in re.findall(r"\s", every_char) if ut.is_removed(char)]
    return re.compile("[" + "".join(re.escape(char) for char in chars) + "]")


_CLEAN = _CharMap(_cleaned)
_PUNCTUATION = _CharMap(_punctuation_split)
_ACCENTS = _CharMap(_accent_removed)
# An ASCII chunk without control characters: all of its characters are letters, digits or
# (BERT's) punctuation, and lower-casing it needs no accent stripping.
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f]")
_ASCII_WORDS = re.compile(r"[A-Za-z0-9]+|[!-/:-@\[-`{-~]")


def chunk_words(chunk, lower_case):
    """The words of the original's basic tokenization of a chunk of text without whitespace."""
    if chunk.isascii() and not _ASCII_CONTROL.search(chunk):
        if lower_case:
            chunk = chunk.lower()
        return [chunk] if chunk.isalnum() else _ASCII_WORDS.findall(chunk)
    words = []
    for token in chunk.translate(_CLEAN).split():
        if lower_case:
            token = token.lower()
            if not token.isascii():
                token = unicodedata.normalize("NFD", token).translate(_ACCENTS)
        words.extend(token.translate(_PUNCTUATION).split())
    return words


def chunks(text):
    """The whitespace-free chunks of `text` (see above)."""
    removed = _removed_split_points()
    if removed.search(text):
        text = removed.sub("", text)
    return text.split()


def split_words(text, lower_case):
    """The words of BERT's basic tokenization of `text`, in order (the words the builder counts).

    >>> split_words("Crème\\u2009brûlée,\\x0cformfeed\\u200a—\\u3000東京", lower_case=True)
    ['creme', 'brulee', ',', 'formfeed', '—', '東', '京']
    """
    return [word for chunk in chunks(text) for word in chunk_words(chunk, lower_case)]


# ---------------------------------------------------------------------------------------------
# WordPiece.


class PythonBertTokenizer:
    """The original `FullTokenizer`'s ids for a `vocab.txt`, in plain Python.

    Args:
      vocab_file: the WordPiece vocabulary, one token per line.
      lower_case: lower-case and strip accents (an uncased model).
      max_cached_chunks: distinct chunks remembered (the memory is cleared when full).
    """

    def __init__(self, vocab_file, lower_case, max_cached_chunks=1 << 19):
        vocabulary = Vocabulary.from_file(vocab_file)
        self.token_to_id = vocabulary.token_to_id
        self.unknown_id = vocabulary.special_ids()["unknown_id"]
        self.lower_case = bool(lower_case)
        self.max_cached_chunks = int(max_cached_chunks)
        self._chunk_ids = {}

    def wordpieces(self, word):
        """The ids of one word of the basic tokenization (greedy longest match first)."""
        if len(word) > MAX_CHARS_PER_WORD:
            return [self.unknown_id]
        token_to_id, ids, start, end = self.token_to_id, [], 0, len(word)
        while start < end:
            stop, found = end, None
            while start < stop:
                piece = word[start:stop] if start == 0 else SUFFIX_INDICATOR + word[start:stop]
                found = token_to_id.get(piece)
                if found is not None:
                    break
                stop -= 1
            if found is None:
                return [self.unknown_id]
            ids.append(found)
            start = stop
        return ids

    def _chunk(self, chunk):
        ids = []
        for word in chunk_words(chunk, self.lower_case):
            ids.extend(self.wordpieces(word))
        if len(self._chunk_ids) >= self.max_cached_chunks:
            self._chunk_ids.clear()
        self._chunk_ids[chunk] = ids
        return ids

    def tokenize(self, text):
        """The wordpiece ids of `text`, a list of int (str, or UTF-8 bytes whose invalid
        sequences are dropped, as the original's `convert_to_unicode` does)."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", "ignore")
        cached, ids = self._chunk_ids, []
        for chunk in chunks(text):
            chunk_ids = cached.get(chunk)
            ids.extend(self._chunk(chunk) if chunk_ids is None else chunk_ids)
        return ids

    def tokenize_batch(self, texts):
        """(ids int32 [total], ids per text int64 [len(texts)]) of a list of texts."""
        ids, lengths = [], np.zeros([len(texts)], np.int64)
        for index, text in enumerate(texts):
            row = self.tokenize(text)
            ids.extend(row)
            lengths[index] = len(row)
        return np.array(ids, np.int32), lengths


__all__ = ["MAX_CHARS_PER_WORD", "PythonBertTokenizer", "chunk_words", "chunks", "split_words"]
