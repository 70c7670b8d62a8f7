"""Masked-LM and next-sentence pre-training instances, as in BERT's `create_pretraining_data.py`.

The algorithm is the original one, step for step (Devlin et al., 2019, and the reference tool):

1. For every pass (`dupe_factor` of them) over every document, draw a target length: the full
   `max_seq_length - 3` tokens, or with probability `short_seq_prob` a length drawn uniformly from
   `[2, max_seq_length - 3]`.
2. Collect whole sentences into a chunk until it reaches the target length or the document ends.
3. Segment A is a random prefix of the chunk (1 to n-1 sentences, or the only one).
4. With probability 1/2, or always when the chunk has one sentence, segment B is a "random next":
   sentences of another document (up to 10 tries to draw a different one), from a random start
   sentence until B reaches `target - len(A)`; the chunk's unused sentences are put back and start
   the next chunk. Otherwise B is the rest of the chunk.
5. `truncate_seq_pair`: while the pair is longer than `max_seq_length - 3`, drop one token from the
   longer segment (B on ties), at the front or at the back with equal probability.
6. `[CLS] A [SEP] B [SEP]`, segment ids 0 for `[CLS] A [SEP]` and 1 for `B [SEP]`.
7. Masking: `num_to_predict = min(max_predictions_per_seq, max(1, round(len(tokens) *
   masked_lm_prob)))` (Python 3 rounding, half to even); the candidates are all positions but
   [CLS]/[SEP], single tokens or, with whole-word masking, a word with its `##` continuations
   (a `##` token right after a [SEP] joins the last word before it, as in the original); candidates
   are taken in random order while they fit; each chosen token becomes [MASK] (80%), stays (10%) or
   becomes a token drawn uniformly from the whole vocabulary (10%); positions are sorted.

What differs from the reference code is only how the random numbers are drawn: the sequential
decisions of steps 1-4 use Python's `random.Random` as the original does, while truncation (step 5:
the number of tokens cut from the front is Binomial(cut, 1/2), exactly the law of the repeated coin
flips) and masking (step 7) are drawn for many instances at once with NumPy. Distributions are
identical; individual draws are not (they could not be: the original's stream depends on the order
of the whole corpus).

Example:

>>> docs = TokenizedDocuments.from_lists([[[5, 6, 7], [8, 9]], [[10, 11], [12]]])
>>> special = SpecialTokenIds(pad_id=0, unknown_id=1, cls_id=2, sep_id=3, mask_id=4, vocab_size=20)
>>> batch = create_instances(docs, InstanceOptions(max_seq_length=16, dupe_factor=1), special, seed=1)
>>> batch.input_ids.shape[1], batch.masked_lm_positions.shape[1], batch.input_ids[:, 0].tolist() == [2] * len(batch)
(16, 20, True)
"""

import dataclasses

import numpy as np

from bert_keras.common import cli
from bert_keras.common.cli import option
# The static masking lives with the masked-LM rule; its names stay importable from here.
from bert_keras.data.masking import (choose_masked_positions, mask_instances,  # noqa: F401
                                    masking_candidates)
from bert_keras.data.random_draws import FastRandom, make_generators  # noqa: F401
from bert_keras.text.truncation import truncated_pair_lengths


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """The original tool's instance flags, with its defaults."""

    max_seq_length: int = cli.max_seq_length_option(128, "Maximum sequence length.")
    max_predictions_per_seq: int = option(20, "Maximum number of masked LM predictions per "
                                          "sequence.")
    masked_lm_prob: float = option(0.15, "Masked LM probability.")
    short_seq_prob: float = option(0.1, "Probability of creating sequences shorter than the "
                                   "maximum length.")
    dupe_factor: int = option(10, "Number of times to duplicate the input data (with different "
                              "masks).")
    do_whole_word_mask: bool = option(False, "Mask whole words (a word and its ## pieces) "
                                      "instead of single WordPieces.")

    def validate(self):
        # [CLS] a [SEP] b [SEP] needs at least one token on each side.
        if self.max_seq_length < 5:
            raise ValueError(f"max_seq_length must be at least 5, got {self.max_seq_length}")
        if self.max_predictions_per_seq < 1:
            raise ValueError(
                f"max_predictions_per_seq must be at least 1, got {self.max_predictions_per_seq}")
        if not 0.0 <= self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must be in [0, 1], got {self.masked_lm_prob}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise ValueError(f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}")
        if self.dupe_factor < 1:
            raise ValueError(f"dupe_factor must be at least 1, got {self.dupe_factor}")
        return self


@dataclasses.dataclass(frozen=True)
class SpecialTokenIds:
    """Ids the instance builder needs from the vocabulary.

    `is_continuation` is a bool array [vocab_size], True for `##` tokens; only whole-word masking
    uses it. Padding uses id 0 whatever `pad_id` is, like the original writer.
    """

    pad_id: int
    unknown_id: int
    cls_id: int
    sep_id: int
    mask_id: int
    vocab_size: int
    is_continuation: np.ndarray = None

    @classmethod
    def from_vocabulary(cls, vocabulary):
        """From a `bert_keras.text.vocab.Vocabulary` (which already checked the special tokens)."""
        ids = vocabulary.special_ids()
        is_continuation = np.array([token.startswith("##") for token in vocabulary.tokens], bool)
        return cls(pad_id=ids["padding_id"], unknown_id=ids["unknown_id"],
                   cls_id=ids["start_of_sequence_id"], sep_id=ids["end_of_segment_id"],
                   mask_id=ids["mask_id"], vocab_size=len(vocabulary),
                   is_continuation=is_continuation)


@dataclasses.dataclass
class TokenizedDocuments:
    """Documents of sentences of token ids, flattened.

    token_ids: int32 [num_tokens], all sentences one after the other.
    sentence_offsets: int64 [num_sentences + 1], sentence s is token_ids[offsets[s]:offsets[s+1]].
    document_offsets: int64 [num_documents + 1], in sentences.
    Every sentence and every document is non-empty (use `from_lists` or `drop_empty`).
    """

    token_ids: np.ndarray
    sentence_offsets: np.ndarray
    document_offsets: np.ndarray

    @property
    def num_documents(self):
        return len(self.document_offsets) - 1

    @property
    def num_sentences(self):
        return len(self.sentence_offsets) - 1

    @property
    def num_tokens(self):
        return len(self.token_ids)

    @classmethod
    def from_lists(cls, documents):
        """From `[[sentence_ids, ...], ...]`; drops empty sentences, then empty documents."""
        sentence_lengths, document_sizes, pieces = [], [], []
        for document in documents:
            size = 0
            for sentence in document:
                if len(sentence):
                    pieces.append(np.asarray(sentence, np.int32))
                    sentence_lengths.append(len(sentence))
                    size += 1
            if size:
                document_sizes.append(size)
        token_ids = np.concatenate(pieces) if pieces else np.zeros([0], np.int32)
        return cls(token_ids=token_ids,
                   sentence_offsets=_offsets(sentence_lengths),
                   document_offsets=_offsets(document_sizes))

    @classmethod
    def drop_empty(cls, token_ids, sentence_lengths, document_sizes):
        """From flat ids, tokens per sentence and sentences per document, dropping empty ones.

        As in the original, a sentence whose tokenization is empty does not count, and a document
        left without sentences is removed.
        """
        sentence_lengths = np.asarray(sentence_lengths, np.int64)
        document_sizes = np.asarray(document_sizes, np.int64)
        keep = sentence_lengths > 0
        sentence_document = np.repeat(np.arange(len(document_sizes)), document_sizes)
        kept_per_document = np.bincount(sentence_document[keep], minlength=len(document_sizes))
        return cls(token_ids=np.asarray(token_ids, np.int32),
                   sentence_offsets=_offsets(sentence_lengths[keep]),
                   document_offsets=_offsets(kept_per_document[kept_per_document > 0]))

    def document(self, index):
        """Document `index` as a list of sentence id lists (for tests and debugging)."""
        first, last = self.document_offsets[index], self.document_offsets[index + 1]
        return [self.token_ids[self.sentence_offsets[s]:self.sentence_offsets[s + 1]].tolist()
                for s in range(first, last)]


def _offsets(sizes):
    offsets = np.zeros([len(sizes) + 1], np.int64)
    np.cumsum(np.asarray(sizes, np.int64), out=offsets[1:])
    return offsets


@dataclasses.dataclass
class InstanceSpans:
    """Segments A and B of each instance as token ranges into `TokenizedDocuments.token_ids`.

    All fields are int64 [num_instances] except `is_random_next` (bool).
    """

    a_start: np.ndarray
    a_end: np.ndarray
    b_start: np.ndarray
    b_end: np.ndarray
    is_random_next: np.ndarray

    def __len__(self):
        return len(self.a_start)


@dataclasses.dataclass
class InstanceBatch:
    """Pre-training instances as padded arrays, the TFRecord features of the original tool.

    input_ids, input_mask, segment_ids: int32 [n, max_seq_length] (input_ids already masked).
    masked_lm_positions, masked_lm_ids: int32 [n, max_predictions_per_seq], 0-padded.
    masked_lm_weights: float32 [n, max_predictions_per_seq], 1.0 for real predictions.
    next_sentence_labels: int32 [n], 1 when B is a random next.
    lengths: int32 [n], real tokens including [CLS] and the two [SEP].
    replacement_counts: int64 [3], masked positions that became [MASK], kept their token, got a
      random token.
    """

    input_ids: np.ndarray
    input_mask: np.ndarray
    segment_ids: np.ndarray
    masked_lm_positions: np.ndarray
    masked_lm_ids: np.ndarray
    masked_lm_weights: np.ndarray
    next_sentence_labels: np.ndarray
    lengths: np.ndarray
    replacement_counts: np.ndarray

    def __len__(self):
        return len(self.input_ids)

    def take(self, indices):
        """The instances at `indices`, in that order."""
        fields = {f.name: getattr(self, f.name)[indices] for f in dataclasses.fields(self)
                  if f.name != "replacement_counts"}
        return InstanceBatch(replacement_counts=self.replacement_counts, **fields)


def create_instance_spans(documents, max_seq_length, short_seq_prob, dupe_factor, rng):
    """Steps 1-4: chunks of whole sentences and their A/B split, for `dupe_factor` passes.

    Args:
      documents: `TokenizedDocuments`; random-next segments come from these documents.
      rng: a `random.Random` (or anything with its `random()` and `randint(a, b)`), drawn from
        in the original's order.

    Returns:
      `InstanceSpans` before truncation, in creation order.
    """
    spans, _ = _instance_spans(documents, max_seq_length, short_seq_prob, dupe_factor, rng)
    return spans


def _instance_spans(documents, max_seq_length, short_seq_prob, dupe_factor, rng, pool=None,
                    first_document=0):
    """`create_instance_spans`, with random nexts drawn from `pool` when given.

    `pool` (e.g. a `bert_keras.data.token_store.TokenStore`) holds `documents` as its documents
    [first_document, first_document + documents.num_documents) among others; it has
    `num_documents`, `sentence_lengths(d)` and `token_ids(d, first_sentence, end_sentence)`.

    Returns (spans, extra token ids int32): the random nexts taken from pool documents outside
    `documents` are copied to the extra ids, which the spans address after
    `documents.token_ids` (the spans index `concatenate([documents.token_ids, extra])`).
    """
    max_num_tokens = max_seq_length - 3
    sentence_offsets = documents.sentence_offsets.tolist()
    document_offsets = documents.document_offsets.tolist()
    lengths = np.diff(documents.sentence_offsets).tolist()
    num_documents = len(document_offsets) - 1
    pool_size = pool.num_documents if pool is not None else num_documents
    extra, extra_start = [], documents.num_tokens
    uniform, randint = rng.random, rng.randint
    a_start, a_end, b_start, b_end, random_next = [], [], [], [], []
    for _ in range(dupe_factor):
        for document in range(num_documents):
            first, stop = document_offsets[document], document_offsets[document + 1]
            target_length = max_num_tokens
            if uniform() < short_seq_prob:
                target_length = randint(2, max_num_tokens)
            chunk_first = first
            chunk_length = 0
            i = first
            while i < stop:
                chunk_length += lengths[i]
                if i == stop - 1 or chunk_length >= target_length:
                    num_sentences = i - chunk_first + 1
                    num_a = randint(1, num_sentences - 1) if num_sentences >= 2 else 1
                    start_a = sentence_offsets[chunk_first]
                    end_a = sentence_offsets[chunk_first + num_a]
                    if num_sentences == 1 or uniform() < 0.5:
                        target_b_length = target_length - (end_a - start_a)
                        for _ in range(10):
                            other = randint(0, pool_size - 1) - first_document
                            if other != document:
                                break
                        if 0 <= other < num_documents:
                            other_first = document_offsets[other]
                            other_stop = document_offsets[other + 1]
                            j = other_first + randint(0, other_stop - other_first - 1)
                            start_b = sentence_offsets[j]
                            length_b = 0
                            while j < other_stop:
                                length_b += lengths[j]
                                j += 1
                                if length_b >= target_b_length:
                                    break
                            end_b = sentence_offsets[j]
                        else:  # a document of the pool outside this block: copy what B takes
                            other += first_document
                            other_lengths = pool.sentence_lengths(other).tolist()
                            j = first_j = randint(0, len(other_lengths) - 1)
                            length_b = 0
                            while j < len(other_lengths):
                                length_b += other_lengths[j]
                                j += 1
                                if length_b >= target_b_length:
                                    break
                            extra.append(pool.token_ids(other, first_j, j))
                            start_b, end_b = extra_start, extra_start + length_b
                            extra_start = end_b
                        random_next.append(True)
                        # The sentences of the chunk that B did not use start the next chunk.
                        i -= num_sentences - num_a
                    else:
                        start_b, end_b = end_a, sentence_offsets[i + 1]
                        random_next.append(False)
                    a_start.append(start_a)
                    a_end.append(end_a)
                    b_start.append(start_b)
                    b_end.append(end_b)
                    chunk_first = i + 1
                    chunk_length = 0
                i += 1
    as_array = lambda values: np.array(values, np.int64)
    spans = InstanceSpans(as_array(a_start), as_array(a_end), as_array(b_start), as_array(b_end),
                          np.array(random_next, bool))
    return spans, (np.concatenate(extra).astype(np.int32) if extra else np.zeros([0], np.int32))


def truncate_spans(spans, max_num_tokens, np_rng):
    """Step 5, for all instances at once; each cut is at the front with probability 1/2."""
    length_a, length_b = spans.a_end - spans.a_start, spans.b_end - spans.b_start
    keep_a, keep_b = truncated_pair_lengths(length_a, length_b, max_num_tokens)
    cut_a, cut_b = length_a - keep_a, length_b - keep_b
    front_a = np_rng.binomial(cut_a, 0.5)
    front_b = np_rng.binomial(cut_b, 0.5)
    return InstanceSpans(a_start=spans.a_start + front_a, a_end=spans.a_end - (cut_a - front_a),
                         b_start=spans.b_start + front_b, b_end=spans.b_end - (cut_b - front_b),
                         is_random_next=spans.is_random_next)


def pack_spans(token_ids, spans, max_seq_length, special):
    """Step 6: `[CLS] A [SEP] B [SEP]` padded with 0.

    Returns:
      input_ids int32 [n, max_seq_length], segment_ids int32 [n, max_seq_length],
      lengths int32 [n], lengths of A int32 [n].
    """
    length_a = (spans.a_end - spans.a_start).astype(np.int32)
    lengths = length_a + (spans.b_end - spans.b_start).astype(np.int32) + 3
    position = np.arange(max_seq_length, dtype=np.int32)[None, :]
    in_b = position >= (length_a + 2)[:, None]
    # Position p reads token a_start + p - 1 in A and b_start + p - len(A) - 2 in B.
    source = np.where(in_b, (spans.b_start - length_a - 2)[:, None],
                      (spans.a_start - 1)[:, None]) + position
    real = ((position > 0) & (position < (lengths - 1)[:, None])
            & (position != (length_a + 1)[:, None]))
    if len(token_ids):
        np.clip(source, 0, len(token_ids) - 1, out=source)
        input_ids = np.take(np.asarray(token_ids, np.int32), source)
        input_ids *= real
    else:
        input_ids = np.zeros(source.shape, np.int32)
    rows = np.arange(len(spans))
    input_ids[:, 0] = special.cls_id
    input_ids[rows, length_a + 1] = special.sep_id
    input_ids[rows, lengths - 1] = special.sep_id
    segment_ids = (in_b & (position < lengths[:, None])).astype(np.int32)
    return input_ids, segment_ids, lengths, length_a


def instances_from_spans(token_ids, spans, options, special, np_rng):
    """Steps 5-7 for spans made by `create_instance_spans`. Returns an `InstanceBatch`."""
    spans = truncate_spans(spans, options.max_seq_length - 3, np_rng)
    input_ids, segment_ids, lengths, length_a = pack_spans(
        token_ids, spans, options.max_seq_length, special)
    masked_ids, positions, labels, weights, counts = mask_instances(
        input_ids, lengths, length_a, options, special, np_rng)
    input_mask = (np.arange(options.max_seq_length)[None, :] < lengths[:, None]).astype(np.int32)
    return InstanceBatch(
        input_ids=masked_ids, input_mask=input_mask, segment_ids=segment_ids,
        masked_lm_positions=positions, masked_lm_ids=labels, masked_lm_weights=weights,
        next_sentence_labels=spans.is_random_next.astype(np.int32), lengths=lengths,
        replacement_counts=counts)


def create_instances(documents, options, special, seed, batch_size=8192, pool=None,
                     first_document=0):
    """All instances of `documents`, for `options.dupe_factor` passes, in creation order.

    Args:
      documents: `TokenizedDocuments`.
      options: `InstanceOptions`.
      special: `SpecialTokenIds`.
      seed: int or sequence of ints; the same seed gives the same instances.
      batch_size: instances truncated and masked per NumPy call; the draws depend on it, so
        output is reproducible for a fixed value.
      pool: where random nexts come from (default: `documents`): documents [first_document,
        first_document + documents.num_documents) of `pool` are `documents`; see
        `bert_keras.data.token_store.TokenStore`.

    Returns:
      `InstanceBatch`.
    """
    options.validate()
    if documents.num_documents == 0:
        return empty_batch(options)
    rng, np_rng = make_generators(seed)
    spans, extra = _instance_spans(documents, options.max_seq_length, options.short_seq_prob,
                                   options.dupe_factor, rng, pool, first_document)
    token_ids = np.concatenate([documents.token_ids, extra]) if len(extra) else documents.token_ids
    pieces = []
    for start in range(0, len(spans), batch_size):
        part = InstanceSpans(*(getattr(spans, f.name)[start:start + batch_size]
                               for f in dataclasses.fields(spans)))
        pieces.append(instances_from_spans(token_ids, part, options, special, np_rng))
    return concatenate_batches(pieces)


def empty_batch(options):
    seq, pred = options.max_seq_length, options.max_predictions_per_seq
    return InstanceBatch(
        input_ids=np.zeros((0, seq), np.int32), input_mask=np.zeros((0, seq), np.int32),
        segment_ids=np.zeros((0, seq), np.int32),
        masked_lm_positions=np.zeros((0, pred), np.int32),
        masked_lm_ids=np.zeros((0, pred), np.int32),
        masked_lm_weights=np.zeros((0, pred), np.float32),
        next_sentence_labels=np.zeros([0], np.int32), lengths=np.zeros([0], np.int32),
        replacement_counts=np.zeros([3], np.int64))


def concatenate_batches(batches):
    batches = list(batches)
    if len(batches) == 1:
        return batches[0]
    fields = {f.name: np.concatenate([getattr(b, f.name) for b in batches])
              for f in dataclasses.fields(InstanceBatch) if f.name != "replacement_counts"}
    counts = np.sum([b.replacement_counts for b in batches], axis=0)
    return InstanceBatch(replacement_counts=counts, **fields)
