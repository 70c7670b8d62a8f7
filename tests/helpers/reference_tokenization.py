"""A small pure-Python BERT tokenizer written from the published algorithm, for the tests.

It follows the steps of the original google-research/bert `tokenization.py` (BasicTokenizer,
then WordpieceTokenizer) one by one on Python strings, with no tables and no shortcuts, so it
is an independent check of the in-graph tokenizer:

1. decode UTF-8, dropping invalid bytes;
2. drop NUL, U+FFFD and the characters of categories Cc and Cf other than tab, LF and CR
   (unassigned and private-use characters stay); turn those three, the space and category Zs
   into a space;
3. put spaces around the CJK Unified Ideographs;
4. split with `str.split()`;
5. uncased: `str.lower()` each word, NFD it and drop category Mn;
6. make every punctuation character (ASCII 33-47, 58-64, 91-96, 123-126, or category P*) a
   word of its own, then split on whitespace again;
7. WordPiece: greedy longest-match-first with "##" continuations; a word of more than 200
   characters, or one that cannot be covered, becomes a single [UNK].
"""

import unicodedata

CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
ASCII_PUNCTUATION = set(range(33, 48)) | set(range(58, 65)) | set(range(91, 97)) | set(range(123, 127))


def _punctuation(char):
    return ord(char) in ASCII_PUNCTUATION or unicodedata.category(char)[0] == "P"


def _cjk(char):
    return any(low <= ord(char) <= high for low, high in CJK_RANGES)


def basic_tokenize(text, lower_case):
    """The words of BasicTokenizer for `text` (bytes or str)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "ignore")
    cleaned = []
    for char in text:
        if char in "\t\n\r " or unicodedata.category(char) == "Zs":
            cleaned.append(" ")
        elif char == "\x00" or char == "\ufffd" or unicodedata.category(char) in ("Cc", "Cf"):
            continue
        elif _cjk(char):
            cleaned.append(" " + char + " ")
        else:
            cleaned.append(char)
    words = []
    for word in "".join(cleaned).split():
        if lower_case:
            word = unicodedata.normalize("NFD", word.lower())
            word = "".join(char for char in word if unicodedata.category(char) != "Mn")
        current = ""
        for char in word:
            if _punctuation(char):
                words.extend([current, char] if current else [char])
                current = ""
            else:
                current += char
        if current:
            words.append(current)
    return " ".join(words).split()


def wordpiece(word, vocab, max_chars=200, unknown="[UNK]"):
    """Greedy longest-match-first WordPiece pieces of one word (a list of strings)."""
    if len(word) > max_chars:
        return [unknown]
    pieces = []
    start = 0
    while start < len(word):
        for end in range(len(word), start, -1):
            candidate = word[start:end] if start == 0 else "##" + word[start:end]
            if candidate in vocab:
                pieces.append(candidate)
                start = end
                break
        else:
            return [unknown]
    return pieces


class ReferenceTokenizer:
    """`tokenize(text)` -> list of words, each a list of wordpiece ids."""

    def __init__(self, tokens, lower_case, max_chars=200):
        self.token_to_id = {token: index for index, token in enumerate(tokens)}
        self.lower_case = lower_case
        self.max_chars = max_chars

    @classmethod
    def from_file(cls, path, lower_case):
        with open(path, encoding="utf-8") as f:
            return cls([line.strip() for line in f if line.strip()], lower_case)

    def words(self, text):
        return basic_tokenize(text, self.lower_case)

    def tokenize(self, text):
        return [[self.token_to_id[piece] for piece in wordpiece(word, self.token_to_id, self.max_chars)]
                for word in self.words(text)]


class ReferenceWordTokenizer:
    """The reference with the fine-tuning feature builders' interface: `tokenize_word(word)`.

    `vocab`: a list of tokens, a `Vocabulary` or a vocab.txt path.
    """

    def __init__(self, vocab, do_lower_case=True):
        if isinstance(vocab, str) or hasattr(vocab, "__fspath__"):
            with open(vocab, encoding="utf-8") as f:
                tokens = [line.rstrip("\n") for line in f if line.strip()]
        else:
            tokens = list(getattr(vocab, "tokens", vocab))
        self.reference = ReferenceTokenizer(tokens, do_lower_case)

    def tokenize(self, text):
        """The wordpiece strings of `text`."""
        reference = self.reference
        return [piece for word in reference.words(text)
                for piece in wordpiece(word, reference.token_to_id, reference.max_chars)]

    def tokenize_word(self, word):
        return [piece for pieces in self.reference.tokenize(word) for piece in pieces]

    __call__ = tokenize_word
