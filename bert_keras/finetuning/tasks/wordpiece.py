"""Word-level tokenization for the span and token tasks (SQuAD, CoNLL-2003).

SQuAD and NER features need the wordpieces of each whitespace-separated word of the text, so
that every wordpiece can be mapped back to its word. The feature builders take any callable

    tokenize_word(word: str) -> Sequence[int]

that returns the wordpiece ids of the full BERT tokenization (basic tokenization: cleaning,
optional lower-casing and accent stripping, punctuation splitting; then WordPiece) of one word
that contains no whitespace, together with the vocabulary (to turn ids back into token strings).

`WordPieceTokenizer` here is a pure-Python implementation of that pipeline, written from the
definitions in the BERT paper's release (greedy longest-match-first WordPiece, "##" continuation
prefix, words longer than 100 characters become [UNK]). `batch_word_tokenizer` turns a batch
tokenizer (for example the in-graph `bert_keras.text.tokenizer.BertTokenizer`) into the per-word
callable by tokenizing every distinct word once.

Example:

>>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
...                                 "un", "##aff", "##able", ",", "hello"])
>>> tokenizer.tokenize("Unaffable, hello!")
['un', '##aff', '##able', ',', 'hello', '[UNK]']
>>> tokenizer.tokenize_word("unaffable,")
[5, 6, 7, 8]
"""

import unicodedata

from bert_keras.text.vocab import Vocabulary

MAX_INPUT_CHARS_PER_WORD = 200  # the original BERT limit


def _is_whitespace(char):
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def _is_control(char):
    if char in ("\t", "\n", "\r"):
        return False
    # As the original: only Cc and Cf; unassigned (Cn) and private-use (Co) characters stay.
    return unicodedata.category(char) in ("Cc", "Cf")


def _is_punctuation(char):
    cp = ord(char)
    # All non-letter/number ASCII characters count as punctuation ("^", "$", "`" are not in the
    # Unicode P* categories).
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


_DROP, _SPACE, _CJK, _PUNCT, _PLAIN = range(5)
_CHAR_KIND = {}


def _char_kind(char):
    kind = _CHAR_KIND.get(char)
    if kind is None:
        cp = ord(char)
        if cp == 0 or cp == 0xFFFD or _is_control(char):
            kind = _DROP
        elif _is_whitespace(char):
            kind = _SPACE
        elif _is_cjk(cp):
            kind = _CJK
        elif _is_punctuation(char):
            kind = _PUNCT
        else:
            kind = _PLAIN
        if len(_CHAR_KIND) < 100000:
            _CHAR_KIND[char] = kind
    return kind


def _strip_accents(word):
    if word.isascii():
        return word
    return "".join(c for c in unicodedata.normalize("NFD", word)
                   if unicodedata.category(c) != "Mn")


def basic_tokenize(text, do_lower_case=True):
    """BERT's basic tokenization: a list of words and single punctuation characters.

    Drops NUL, U+FFFD and control characters, splits on whitespace, puts CJK ideographs and
    punctuation characters in tokens of their own, and with `do_lower_case` lower-cases and
    strips accents (NFD, combining marks removed) before splitting off punctuation.
    """
    chars = []
    for char in text:
        kind = _char_kind(char)
        if kind == _DROP:
            continue
        if kind == _SPACE:
            chars.append(" ")
        elif kind == _CJK:
            chars.extend((" ", char, " "))
        else:
            chars.append(char)
    tokens = []
    for word in "".join(chars).split():
        if do_lower_case:
            word = _strip_accents(word.lower())
        piece = []
        for char in word:
            if _char_kind(char) == _PUNCT:
                if piece:
                    tokens.append("".join(piece))
                    piece = []
                tokens.append(char)
            else:
                piece.append(char)
        if piece:
            tokens.append("".join(piece))
    return tokens


def wordpiece_split(word, token_to_id, unknown_token="[UNK]"):
    """Greedy longest-match-first WordPiece split of one basic token into token strings."""
    if len(word) > MAX_INPUT_CHARS_PER_WORD:
        return [unknown_token]
    pieces = []
    start = 0
    while start < len(word):
        end = len(word)
        match = None
        while start < end:
            candidate = word[start:end]
            if start > 0:
                candidate = "##" + candidate
            if candidate in token_to_id:
                match = candidate
                break
            end -= 1
        if match is None:
            return [unknown_token]
        pieces.append(match)
        start = end
    return pieces


def as_vocabulary(vocab):
    """A `Vocabulary` from a Vocabulary, a path to vocab.txt, or a list of token strings."""
    if isinstance(vocab, Vocabulary):
        return vocab
    if isinstance(vocab, (str, bytes)) or hasattr(vocab, "__fspath__"):
        return Vocabulary.from_file(vocab)
    return Vocabulary(list(vocab))


class WordPieceTokenizer:
    """Pure-Python BERT tokenization (basic tokenization then WordPiece)."""

    def __init__(self, vocab, do_lower_case=True):
        self.vocab = as_vocabulary(vocab)
        self.do_lower_case = do_lower_case
        self._cache = {}

    def tokenize(self, text):
        """The wordpiece strings of `text`."""
        pieces = []
        for word in basic_tokenize(text, self.do_lower_case):
            pieces.extend(wordpiece_split(word, self.vocab.token_to_id))
        return pieces

    def tokenize_word(self, word):
        """The wordpiece ids of one whitespace-free word (cached)."""
        ids = self._cache.get(word)
        if ids is None:
            ids = [self.vocab.token_to_id[piece] for piece in self.tokenize(word)]
            self._cache[word] = ids
        return list(ids)

    __call__ = tokenize_word


def batch_word_tokenizer(tokenize_batch, words, batch_size=4096):
    """A per-word `tokenize_word` callable from a batch tokenizer, for the given words.

    `tokenize_batch(list_of_words)` returns, for each word, its wordpiece ids (a list of lists,
    a `tf.RaggedTensor` or anything with `.to_list()`). Each distinct word is tokenized once;
    asking the returned callable for a word outside `words` raises KeyError.
    """
    distinct = sorted(set(words))
    table = {}
    for begin in range(0, len(distinct), batch_size):
        chunk = distinct[begin:begin + batch_size]
        result = tokenize_batch(chunk)
        if hasattr(result, "to_list"):
            result = result.to_list()
        if len(result) != len(chunk):
            raise ValueError(
                f"tokenize_batch returned {len(result)} results for {len(chunk)} words")
        for word, ids in zip(chunk, result):
            flat = _flatten_ids(ids)
            table[word] = flat

    def tokenize_word(word):
        return list(table[word])

    return tokenize_word


def _flatten_ids(ids):
    out = []
    for item in ids:
        if isinstance(item, (list, tuple)):
            out.extend(_flatten_ids(item))
        else:
            out.append(int(item))
    return out


def whitespace_words(text):
    """Splits on the whitespace the SQuAD reader uses (space, tab, CR, LF, U+202F)."""
    words = []
    current = []
    for char in text:
        if is_squad_whitespace(char):
            if current:
                words.append("".join(current))
                current = []
        else:
            current.append(char)
    if current:
        words.append("".join(current))
    return words


def is_squad_whitespace(char):
    """Whitespace as the original SQuAD reader defines it."""
    return char in (" ", "\t", "\r", "\n") or ord(char) == 0x202F


def tokenize_text(text, tokenize_word):
    """Wordpiece ids of a whole text: `tokenize_word` on each whitespace-separated word."""
    ids = []
    for word in whitespace_words(text):
        ids.extend(tokenize_word(word))
    return ids
