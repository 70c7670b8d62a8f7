"""The words of a text and their wordpieces, for fine-tuning features, from the in-graph tokenizer.

Fine-tuning features need the wordpieces of each whitespace-separated word of a text, so that
every wordpiece can be mapped back to its word (SQuAD answers, NER tags). The feature builders
take any callable

    tokenize_word(word: str) -> Sequence[int]

that returns the wordpiece ids of the full BERT tokenization of one word without whitespace.

`WordTokenizer` is that callable built on `bert_keras.text.tokenizer.BertTokenizer`, the same
in-graph tokenizer that the exported preprocessor and raw-text task models run, so the features a
model is fine-tuned on and the inputs it is served come from one implementation. It tokenizes
every distinct word of the texts given to `prepare` in batches, then answers from that table.

`basic_tokenize` is the original `BasicTokenizer` in Python (`bert_keras.text.python_tokenizer`):
SQuAD post-processing aligns predicted wordpieces with the context's own text through it, as the
original `run_squad.py` does.

Example:

>>> tokenizer = WordTokenizer("models/minilm/vocab.txt", do_lower_case=True)  # doctest: +SKIP
>>> tokenizer.prepare(["Unaffable, hello!"])  # doctest: +SKIP
>>> tokenizer.tokenize_word("hello!")  # doctest: +SKIP
[7592, 999]
>>> basic_tokenize("Héllo, World!")
['hello', ',', 'world', '!']
"""

import re

from bert_keras.text.python_tokenizer import split_words
from bert_keras.text.vocab import Vocabulary


def as_vocabulary(vocab):
    """A `Vocabulary` from a Vocabulary, a path to vocab.txt, or a list of token strings."""
    if isinstance(vocab, Vocabulary):
        return vocab
    if isinstance(vocab, (str, bytes)) or hasattr(vocab, "__fspath__"):
        return Vocabulary.from_file(vocab)
    return Vocabulary(list(vocab))


def is_squad_whitespace(char):
    """Whitespace as the original SQuAD reader defines it."""
    return char in (" ", "\t", "\r", "\n") or ord(char) == 0x202F


_SQUAD_WHITESPACE = re.compile("[ \t\r\n\u202f]+")


def whitespace_words(text):
    """Splits on the whitespace the SQuAD reader uses (space, tab, CR, LF, U+202F)."""
    return [word for word in _SQUAD_WHITESPACE.split(text) if word]


class WordTokenizer:
    """`tokenize_word(word) -> list[int]` from the in-graph `BertTokenizer`, batched.

    Args:
      vocab_file: the model directory's `vocab.txt`.
      do_lower_case: the model directory's casing.
      batch_size: distinct words per call of the in-graph tokenizer.
    """

    def __init__(self, vocab_file, do_lower_case, batch_size=8192):
        from bert_keras.text.tokenizer import BertTokenizer

        self._tokenizer = BertTokenizer(vocab_file, lower_case=do_lower_case)
        self.vocab = self._tokenizer.vocab
        self.do_lower_case = bool(do_lower_case)
        self.batch_size = int(batch_size)
        self._table = {}

    def prepare(self, texts):
        """Tokenizes, in batches, every whitespace-separated word of `texts` not seen before."""
        new = set()
        split = _SQUAD_WHITESPACE.split
        for text in texts:
            new.update(split(text))
        new.discard("")
        table = self._table
        words = sorted(word for word in new if word not in table)
        for begin in range(0, len(words), self.batch_size):
            chunk = words[begin:begin + self.batch_size]
            for word, ids in zip(chunk, self._tokenizer.tokenize_merged(chunk).to_list()):
                table[word] = tuple(ids)

    def tokenize_word(self, word):
        """The wordpiece ids of one whitespace-free word (tokenized now if `prepare` missed it)."""
        ids = self._table.get(word)
        if ids is None:
            self.prepare([word])
            ids = self._table[word]
        return list(ids)

    __call__ = tokenize_word


def basic_tokenize(text, do_lower_case=True):
    """The original `BasicTokenizer`: a list of words and single punctuation characters
    (`bert_keras.text.python_tokenizer.split_words`)."""
    return split_words(text, do_lower_case)


__all__ = ["WordTokenizer", "as_vocabulary", "whitespace_words", "is_squad_whitespace",
           "basic_tokenize"]
