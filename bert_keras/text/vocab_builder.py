"""Learning a BERT WordPiece vocabulary from raw text.

Two steps:

1. Count words. Text goes through BERT's basic tokenization in-graph, in large batches: invalid
   and control characters removed, optional lower-casing with accents stripped (NFD, then drop
   the combining marks), spaces around CJK ideographs, split on whitespace and around
   punctuation (Unicode P* and the ASCII symbols BERT treats as punctuation).
2. Learn the wordpieces with tensorflow-text's BERT vocabulary learner (the algorithm of
   `bert_vocab_from_dataset`: a binary search on a count threshold for the number of tokens,
   deterministic for the same counts), then trim or pad the list to exactly `vocab_size`.

The special tokens take BERT's usual places. With `num_unused=0`: `[PAD] [UNK] [CLS] [SEP]
[MASK]` are ids 0-4. With `num_unused=K`, the layout of Google's released vocabularies: `[PAD]`
at 0, `[unused0]`..`[unused98]` at 1-99, `[UNK] [CLS] [SEP] [MASK]` at 100-103, then the other
unused slots (`num_unused=994` gives exactly the ids of the released `vocab.txt`).

Example:

>>> counts = {"hello": 10, "world": 8, "worlds": 3, ",": 5}
>>> vocab = learn_vocabulary(counts, vocab_size=40)
>>> vocab[:5], len(vocab)
(['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'], 40)
"""

import collections
import os
import sys
import time

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

# BERT's basic tokenizer: ASCII symbols count as punctuation even where Unicode says "symbol".
_PUNCTUATION = r"[\p{P}!-/:-@\[-`{-~]"
_CJK = (r"[\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}"
        r"\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}]")


class VocabularyBuildError(ValueError):
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


def make_word_splitter(lower_case):
    """A function: list of str -> (unique words, counts), BERT's basic tokenization in-graph."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def split(texts):
        # Whitespace becomes a space; then NUL, U+FFFD and control characters are dropped.
        texts = tf.strings.regex_replace(texts, r"\s", " ")
        texts = tf.strings.regex_replace(texts, r"[\x{0}\x{FFFD}\p{Cc}\p{Cf}]", "")
        if lower_case:
            texts = tf.strings.lower(texts, encoding="utf-8")
            texts = tf_text.normalize_utf8(texts, "NFD")
            texts = tf.strings.regex_replace(texts, r"\p{Mn}", "")
        texts = tf.strings.regex_replace(texts, f"({_CJK})", r" \1 ")
        words = tf_text.regex_split(texts, delim_regex_pattern=rf"\s+|{_PUNCTUATION}",
                                    keep_delim_regex_pattern=_PUNCTUATION)
        words = words.flat_values
        words = tf.boolean_mask(words, tf.strings.length(words) > 0)
        unique, _, counts = tf.unique_with_counts(words, out_idx=tf.int64)
        return unique, counts

    def run(lines):
        unique, counts = split(tf.constant(lines, tf.string))
        return unique.numpy(), counts.numpy()

    return run


def count_words(files, lower_case, batch_lines=4096, progress=True):
    """{word: count} over all lines of `files` (decoded as UTF-8 with replacement)."""
    split = make_word_splitter(lower_case)
    counts = collections.Counter()
    total = sum(os.path.getsize(f) for f in files) or 1
    done, start, last = 0, time.time(), 0.0

    def add(lines):
        words, numbers = split(lines)
        for word, number in zip(words.tolist(), numbers.tolist()):
            counts[word] += number

    for path in files:
        lines = []
        with open(path, "rb") as f:
            for raw in f:
                done += len(raw)
                lines.append(raw.decode("utf-8", errors="replace"))
                if len(lines) >= batch_lines:
                    add(lines)
                    lines = []
                    if progress and time.time() - last > 1.0:
                        last = time.time()
                        sys.stderr.write(f"\rcounting words: {100 * done / total:5.1f}% "
                                         f"{len(counts):,} distinct  {last - start:.0f}s")
                        sys.stderr.flush()
        if lines:
            add(lines)
    if progress:
        sys.stderr.write(f"\rcounting words: 100.0% {len(counts):,} distinct  "
                         f"{time.time() - start:.0f}s\n")
    return {word.decode("utf-8", errors="replace"): count for word, count in counts.items()}


def _is_character_token(token):
    return len(token) == 1 or (token.startswith("##") and len(token) == 3)


def learn_vocabulary(word_counts, vocab_size, num_unused=0, max_unique_chars=1000,
                     lower_thresh=2, num_iterations=4, max_input_tokens=5000000,
                     max_token_length=50, progress=False):
    """A list of exactly `vocab_size` tokens learned from `word_counts` ({word: count}).

    The learner aims at `vocab_size` within a few percent; extra tokens are dropped from the
    end (the rarest wordpieces, never a single character or its `##` form) and missing ones are
    filled with further `[unusedK]` tokens.
    """
    from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner
    reserved = reserved_tokens(num_unused)
    if not word_counts:
        raise VocabularyBuildError("no words in the input: nothing to learn a vocabulary from")
    if vocab_size <= len(reserved):
        raise VocabularyBuildError(f"vocab_size={vocab_size} leaves no room after the "
                                   f"{len(reserved)} special and unused tokens")
    # Sorted, so that the learner sees the same order for the same counts.
    ordered = sorted(word_counts.items(), key=lambda item: (-item[1], item[0]))
    start = time.time()
    if progress:
        sys.stderr.write(f"learning wordpieces from {len(ordered):,} distinct words...\n")
    tokens = learner.learn(ordered, vocab_size, reserved, lower_thresh=lower_thresh,
                           num_iterations=num_iterations, max_input_tokens=max_input_tokens,
                           max_token_length=max_token_length, max_unique_chars=max_unique_chars)
    if progress:
        sys.stderr.write(f"learned {len(tokens):,} tokens in {time.time() - start:.0f}s\n")
    assert tokens[:len(reserved)] == reserved
    learned = tokens[len(reserved):]
    excess = len(reserved) + len(learned) - vocab_size
    if excess > 0:
        kept = []
        for token in reversed(learned):
            if excess > 0 and not _is_character_token(token):
                excess -= 1
                continue
            kept.append(token)
        if excess > 0:
            raise VocabularyBuildError(
                f"vocab_size={vocab_size} is too small for the {len(kept)} single characters of "
                "the input; raise vocab_size or lower max_unique_chars")
        learned = kept[::-1]
    vocabulary = reserved + learned
    next_unused = num_unused
    while len(vocabulary) < vocab_size:
        vocabulary.append(f"[unused{next_unused}]")
        next_unused += 1
    return vocabulary


def build_vocabulary(files, vocab_size, lower_case=True, num_unused=0, progress=True, **kwargs):
    """Counts the words of `files` and learns a vocabulary of exactly `vocab_size` tokens."""
    if not files:
        raise VocabularyBuildError("no input files")
    counts = count_words(files, lower_case, progress=progress)
    return learn_vocabulary(counts, vocab_size, num_unused=num_unused, progress=progress,
                            **kwargs)


def write_vocabulary(tokens, path):
    """Writes one token per line (atomically)."""
    from bert_keras.text.vocab import Vocabulary
    Vocabulary(tokens, path).write(path)
