"""Learning a BERT WordPiece vocabulary from raw text.

Two steps:

1. Count words. The text goes through BERT's basic tokenization, the rules of the original
   `BasicTokenizer` on the character classes of `bert_keras.text.unicode_tables` (the classes
   the in-graph tokenizer's tables are built from): NUL, U+FFFD and Cc/Cf characters removed,
   every Zs character, tab, LF and CR a word boundary (as are the other characters
   `str.split()` splits on that the cleaning keeps, U+2028 and U+2029), spaces around CJK
   ideographs, optional lower-casing with accents stripped (NFD, then drop the Mn marks), and
   punctuation (Unicode P* and the ASCII symbols BERT treats as punctuation) split off. So every
   counted word is one the tokenizer produces: no word holds whitespace, a control character or
   a character the tokenizer would have removed.
2. Learn the wordpieces from the word counts with the WordPiece trainer of Hugging Face's
   `tokenizers` (its pre-tokenizer only splits on whitespace, so the words are ours), asking it
   for a quarter more tokens than there are free slots, and keep the most used ones. The
   alphabet is the `max_unique_chars` most frequent characters (ties by codepoint); words
   holding another character (the tokenizer makes them `[UNK]`) or longer than
   `max_token_length` are left out. The trainer is made deterministic: the alphabet and the `##`
   form of every character that can continue a word are given to it in sorted order, so that
   all its ids, and with them its tie-breaks, are the same on every run.

The vocabulary's order: the special and unused tokens, then the single characters sorted by
codepoint, then every other token (the `##` forms of characters included) by how often it is
used when the training words are tokenized with the trainer's tokens, most used first (ties
sorted). The least used beyond `vocab_size` are dropped (never a single character or its `##`
form); when the trainer gives fewer tokens (a small corpus), further `[unusedK]` tokens fill the
list. The same word counts give the same list.

The special tokens take BERT's usual places. With `num_unused=0`: `[PAD] [UNK] [CLS] [SEP]
[MASK]` are ids 0-4. With `num_unused=K`, the layout of Google's released vocabularies: `[PAD]`
at 0, `[unused0]`..`[unused98]` at 1-99, `[UNK] [CLS] [SEP] [MASK]` at 100-103, then the other
unused slots (`num_unused=994` gives exactly the ids of the released `vocab.txt`).

Example:

>>> split_words("Héllo, WORLD!\\u00a0中文", lower_case=True)
['hello', ',', 'world', '!', '中', '文']
>>> counts = {"hello": 10, "world": 8, "worlds": 3, ",": 5}
>>> vocab = learn_vocabulary(counts, vocab_size=40)
>>> vocab[:5], len(vocab)
(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'], 40)
"""

import collections
import os
import sys
import time

from bert_keras.common.errors import BertKerasError
from bert_keras.text import unicode_tables
from bert_keras.text.python_tokenizer import (MAX_CHARS_PER_WORD, chunk_words, chunks,  # noqa: F401
                                              split_words)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class VocabularyBuildError(BertKerasError):
    """The input or the settings do not allow building the vocabulary."""


def reserved_tokens(num_unused=0):
    """The special and unused tokens at the start of the vocabulary, in order."""
    if num_unused < 0:
        raise VocabularyBuildError(f"num_unused must be >= 0, got {num_unused}")
    if num_unused == 0:
        return list(SPECIAL_TOKENS)
    before = min(num_unused, 99)
    return (["[PAD]"] + [f"[unused{i}]" for i in range(before)] + ["[UNK]", "[CLS]", "[SEP]",
                                                                   "[MASK]"]
            + [f"[unused{i}]" for i in range(before, num_unused)])


# ---------------------------------------------------------------------------------------------
# Step 1: the words, counted.


class WordCounter:
    """Counts the words of BERT's basic tokenization over many texts, memory bounded.

    `add(text)` counts the whitespace-free chunks of `text`; every `max_chunks` distinct chunks
    they are turned into words (each distinct chunk once) and added to `counts()`.
    """

    def __init__(self, lower_case, max_chunks=1 << 20):
        self.lower_case = bool(lower_case)
        self.max_chunks = int(max_chunks)
        self._chunks = collections.Counter()
        self._words = collections.Counter()

    def add(self, text):
        self._chunks.update(chunks(text))
        if len(self._chunks) >= self.max_chunks:
            self._fold()

    def _fold(self):
        words, lower_case = self._words, self.lower_case
        for chunk, count in self._chunks.items():
            for word in chunk_words(chunk, lower_case):
                words[word] += count
        self._chunks.clear()

    def counts(self):
        """{word: count} of everything added."""
        self._fold()
        return dict(self._words)


def make_word_splitter(lower_case):
    """A function: list of texts -> (distinct words as UTF-8 bytes, their counts), NumPy arrays.

    The batch interface of `WordCounter` (the words are those of `split_words`).
    """
    import numpy as np

    def run(texts):
        counter = WordCounter(lower_case)
        for text in texts:
            counter.add(text.decode("utf-8", errors="replace") if isinstance(text, bytes)
                        else text)
        counts = counter.counts()
        unique = np.empty(len(counts), dtype=object)
        unique[:] = [word.encode("utf-8") for word in counts]
        return unique, np.array(list(counts.values()), dtype=np.int64)

    return run


def _text_blocks(path, block_bytes, encoding="utf-8"):
    """Blocks of about `block_bytes` of whole lines of a file, decoded from `encoding` with
    U+FFFD replacing invalid bytes (which the tokenization then removes)."""
    with open(path, "rb") as f:
        while True:
            block = f.read(block_bytes)
            if not block:
                return
            if not block.endswith(b"\n"):
                block += f.readline()
            yield len(block), block.decode(encoding, errors="replace")


def count_words(files, lower_case, block_bytes=1 << 20, progress=True, encoding="utf-8"):
    """{word: count} over all `files` (decoded from `encoding`, UTF-8 by default, with
    replacement)."""
    counter = WordCounter(lower_case)
    total = sum(os.path.getsize(f) for f in files) or 1
    done, start, last = 0, time.time(), 0.0
    for path in files:
        for size, text in _text_blocks(path, block_bytes, encoding):
            counter.add(text)
            done += size
            if progress and time.time() - last > 1.0:
                last = time.time()
                sys.stderr.write(f"\rcounting words: {100 * done / total:5.1f}%  "
                                 f"{last - start:.0f}s")
                sys.stderr.flush()
    counts = counter.counts()
    if progress:
        sys.stderr.write(f"\rcounting words: 100.0% {len(counts):,} distinct  "
                         f"{time.time() - start:.1f}s\n")
    return counts


# ---------------------------------------------------------------------------------------------
# Step 2: the wordpieces.


def _is_character_token(token):
    return len(token) == 1 or (token.startswith("##") and len(token) == 3)


def _as_words(word_counts):
    """{word: count} with every key split as the basic tokenization splits text (casing left
    alone): counts of other strings (spaces, punctuation or control characters inside) go to
    the words the tokenizer would see instead, so no token can hold what it never produces."""
    words = collections.Counter()
    for word, count in word_counts.items():
        if count <= 0:
            continue
        if word.isascii() and word.isalnum():
            words[word] += count
            continue
        for piece in split_words(word, lower_case=False):
            words[piece] += count
    return words


def _alphabet(word_counts, max_unique_chars):
    """The `max_unique_chars` most frequent characters of the words (ties by codepoint)."""
    by_count = collections.defaultdict(list)
    for word, count in word_counts.items():
        by_count[count].append(word)
    chars = collections.Counter()
    for count, words in by_count.items():
        for char, number in collections.Counter("".join(words)).items():
            chars[char] += number * count
    ranked = sorted(chars.items(), key=lambda item: (-item[1], item[0]))
    return {char for char, _ in ranked[:max_unique_chars]}


def _import_tokenizers():
    try:
        import tokenizers
    except ImportError as error:
        raise VocabularyBuildError("the vocabulary builder needs Hugging Face's tokenizers "
                                   "package: pip install tokenizers") from error
    return tokenizers


def _train_wordpieces(words, size, alphabet, continuations, min_frequency):
    """Hugging Face's WordPiece trainer on `words`, (word, count) pairs: a set of at most `size`
    tokens (more when the alphabet and the `##` forms of `continuations` alone are more)."""
    tokenizers = _import_tokenizers()
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordPiece(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    # The `##` forms as its "special tokens" and the alphabet as its initial one, both sorted:
    # they take the first ids in this order instead of the order of its word table (a hash map),
    # so that equal pair counts are broken the same way on every run.
    trainer = tokenizers.trainers.WordPieceTrainer(
        vocab_size=size, min_frequency=min_frequency, show_progress=False,
        special_tokens=sorted("##" + char for char in continuations),
        initial_alphabet=sorted(alphabet), continuing_subword_prefix="##")

    def texts():
        # The trainer counts words itself: each word as often as it occurs, in bounded pieces.
        for word, count in words:
            while count > 0:
                repeat = min(count, 1 << 12)
                count -= repeat
                yield (word + " ") * repeat

    tokenizer.train_from_iterator(texts(), trainer, length=len(words))
    return set(tokenizer.get_vocab())


def _usage_counts(tokens, words):
    """{token: how often it is used in the WordPiece tokenization of `words`, (word, count)
    pairs, with `tokens` as the vocabulary}."""
    tokenizers = _import_tokenizers()
    ids = {token: index for index, token in enumerate(["[UNK]"] + sorted(tokens))}
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordPiece(
        ids, unk_token="[UNK]", max_input_chars_per_word=MAX_CHARS_PER_WORD))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    used = [0] * len(ids)
    for begin in range(0, len(words), 8192):
        batch = words[begin:begin + 8192]
        encodings = tokenizer.encode_batch([word for word, _ in batch], add_special_tokens=False)
        for encoding, (_, count) in zip(encodings, batch):
            for index in encoding.ids:
                used[index] += count
    return {token: used[index] for token, index in ids.items() if token in tokens}


# Larger than any BERT vocabulary; a bigger vocab_size is a typo (and would exhaust memory).
MAX_VOCAB_SIZE = 1_000_000


def learn_vocabulary(word_counts, vocab_size, num_unused=0, max_unique_chars=1000,
                     min_frequency=2, max_token_length=50, oversample=1.25, progress=False):
    """A list of exactly `vocab_size` tokens learned from `word_counts` ({word: count}).

    Args:
      word_counts: {word: count}, words of BERT's basic tokenization (as `count_words` gives;
        another string counts as the words the tokenization splits it into).
      vocab_size: the number of tokens, special and unused ones included.
      num_unused: `[unusedK]` tokens to reserve (see `reserved_tokens`).
      max_unique_chars: the most frequent characters kept as tokens; words with rarer ones are
        left out (the tokenizer makes them `[UNK]`).
      min_frequency: a pair of pieces seen fewer times is never merged.
      max_token_length: longer words are left out.
      oversample: the trainer learns this many times the free slots, and the most used of its
        tokens fill them (1.25 splits held-out words into fewer pieces than 1 or 2 do).
    """
    reserved = reserved_tokens(num_unused)
    start = time.time()
    word_counts = _as_words(word_counts)
    if not word_counts:
        raise VocabularyBuildError("no words in the input: nothing to learn a vocabulary from")
    if vocab_size <= len(reserved):
        raise VocabularyBuildError(f"vocab_size={vocab_size} leaves no room after the "
                                   f"{len(reserved)} special and unused tokens")
    if vocab_size > MAX_VOCAB_SIZE:
        raise VocabularyBuildError(f"vocab_size={vocab_size:,} is larger than {MAX_VOCAB_SIZE:,}, "
                                   "beyond any BERT vocabulary (30,522 for English BERT, "
                                   "119,547 for multilingual BERT)")
    alphabet = _alphabet(word_counts, max_unique_chars)
    # Sorted, so that the result does not depend on the order of `word_counts`.
    words = sorted(((word, count) for word, count in word_counts.items()
                    if len(word) <= max_token_length and alphabet.issuperset(word)),
                   key=lambda item: (-item[1], item[0]))
    if not words:
        raise VocabularyBuildError(f"no word of at most max_token_length={max_token_length} "
                                   "characters in the input")
    # `##c` for every character that can continue a word: not the ones that are always words of
    # their own (punctuation, CJK ideographs), but any seen continuing one.
    continuations = {char for char in alphabet if not unicode_tables.is_punctuation(char)
                     and not unicode_tables.is_cjk_codepoint(ord(char))}
    continuations.update(char for word, _ in words for char in word[1:])
    if progress:
        sys.stderr.write(f"learning wordpieces from {len(words):,} distinct words...\n")
    free = vocab_size - len(reserved)
    tokens = _train_wordpieces(words, max(free, int(free * oversample)), alphabet, continuations,
                               min_frequency)
    tokens.update(alphabet)
    tokens.update("##" + char for char in continuations)
    used = _usage_counts(tokens, words)
    characters = sorted(token for token in tokens if len(token) == 1)
    others = sorted((token for token in tokens if len(token) > 1),
                    key=lambda token: (-used[token], token))
    excess = len(reserved) + len(tokens) - vocab_size
    if excess > 0:
        kept = []
        for token in reversed(others):
            if excess > 0 and not _is_character_token(token):
                excess -= 1
                continue
            kept.append(token)
        if excess > 0:
            raise VocabularyBuildError(
                f"vocab_size={vocab_size} is too small for the {len(kept) + len(characters)} "
                "single characters of the input and their ## forms; raise vocab_size or lower "
                "max_unique_chars")
        others = kept[::-1]
    vocabulary = reserved + characters + others
    next_unused = num_unused
    if len(vocabulary) < vocab_size:
        sys.stderr.write(f"warning: the input yields {len(vocabulary) - len(reserved):,} tokens; "
                         f"the other {vocab_size - len(vocabulary):,} of vocab_size="
                         f"{vocab_size:,} are [unusedK] placeholders (a larger corpus or a "
                         "smaller vocab_size avoids them)\n")
    while len(vocabulary) < vocab_size:
        vocabulary.append(f"[unused{next_unused}]")
        next_unused += 1
    if progress:
        sys.stderr.write(f"learned {len(tokens):,} candidate tokens, kept "
                         f"{len(characters) + len(others):,}, in {time.time() - start:.1f}s\n")
    return vocabulary


def build_vocabulary(files, vocab_size, lower_case=True, num_unused=0, progress=True,
                     encoding="utf-8", **kwargs):
    """Counts the words of `files` (decoded from `encoding`) and learns a vocabulary of exactly
    `vocab_size` tokens (`kwargs`: those of `learn_vocabulary`)."""
    if not files:
        raise VocabularyBuildError("no input files")
    counts = count_words(files, lower_case, progress=progress, encoding=encoding)
    return learn_vocabulary(counts, vocab_size, num_unused=num_unused, progress=progress,
                            **kwargs)


def write_vocabulary(tokens, path):
    """Writes one token per line (atomically)."""
    from bert_keras.text.vocab import Vocabulary
    Vocabulary(tokens, path).write(path)
