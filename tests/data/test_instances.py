"""Instance creation and masking against hand-worked documents and the reference algorithm."""

import random

import numpy as np
import pytest

from bert_keras.data import instances as pd
from helpers.pretraining_data_fixtures import random_packed
from helpers.pretraining_reference import reference_instances

SPECIAL = pd.SpecialTokenIds(pad_id=0, unknown_id=1, cls_id=2, sep_id=3, mask_id=4,
                             vocab_size=1000, is_continuation=np.zeros([1000], bool))


class ScriptedRandom:
    """A `random.Random` stand-in that returns scripted values and records the calls."""

    def __init__(self, randoms, randints):
        self.randoms = list(randoms)
        self.randints = list(randints)
        self.calls = []

    def random(self):
        self.calls.append(("random",))
        return self.randoms.pop(0)

    def randint(self, low, high):
        value = self.randints.pop(0)
        self.calls.append(("randint", low, high))
        assert low <= value <= high, (low, high, value)
        return value


def documents_of_lengths(*documents):
    """Documents whose sentences have the given lengths; token ids count up from 10."""
    next_id = [10]

    def sentence(length):
        ids = list(range(next_id[0], next_id[0] + length))
        next_id[0] += length
        return ids

    return pd.TokenizedDocuments.from_lists([[sentence(n) for n in doc] for doc in documents])


def spans_as_tuples(spans):
    return list(zip(spans.a_start.tolist(), spans.a_end.tolist(), spans.b_start.tolist(),
                    spans.b_end.tolist(), spans.is_random_next.tolist()))


# --- Steps 1-4: chunks, segment A, random next --------------------------------------------------


def test_hand_worked_chunks_and_random_next():
    # doc 0: four sentences of 3 tokens (tokens 0-11), doc 1: two of 2 (tokens 12-15).
    documents = documents_of_lengths([3, 3, 3, 3], [2, 2])
    rng = ScriptedRandom(
        randoms=[0.5,    # doc 0: not a short sequence, target 7
                 0.9,    # chunk [s0 s1 s2]: actual next
                 0.05],  # doc 1: short sequence
        randints=[2,     # A = s0 s1
                  1, 0,  # chunk [s3] alone: random next from doc 1, from its sentence 0
                  2,     # doc 1 target length 2
                  0, 3,  # chunk [d1 s0]: random doc 0, start at its s3
                  1, 0, 0])  # chunk [d1 s1]: doc 1 again (retry), then doc 0, start at s0
    spans = pd.create_instance_spans(documents, max_seq_length=10, short_seq_prob=0.1,
                                     dupe_factor=1, rng=rng)
    assert spans_as_tuples(spans) == [
        (0, 6, 6, 9, False),     # A = s0 s1, B = s2: the rest of the chunk
        (9, 12, 12, 16, True),   # A = s3, B = doc 1 from s0 until B has >= 7 - 3 tokens
        (12, 14, 9, 12, True),   # A = d1 s0, B = d0 s3 (one sentence reaches target 2 - 2)
        (14, 16, 0, 3, True),
    ]
    assert ("randint", 2, 7) in rng.calls  # short length drawn from [2, max_seq_length - 3]
    assert not rng.randoms and not rng.randints


def test_unused_sentences_are_put_back():
    documents = documents_of_lengths([2, 2, 2, 2], [5])
    rng = ScriptedRandom(
        randoms=[0.5,   # target 7
                 0.1,   # chunk [s0 s1 s2 s3]: random next
                 0.9,   # chunk [s1 s2 s3]: actual next
                 0.5],  # doc 1: target 7
        randints=[1,    # A = s0 only
                  1, 0,  # B from doc 1
                  1,    # chunk [s1 s2 s3] (the three put back): A = s1
                  0, 2])  # doc 1 alone in its chunk: random doc 0 from s2
    spans = pd.create_instance_spans(documents, max_seq_length=10, short_seq_prob=0.1,
                                     dupe_factor=1, rng=rng)
    assert spans_as_tuples(spans) == [
        (0, 2, 8, 13, True),
        (2, 4, 4, 8, False),
        (8, 13, 4, 6, True),   # B = d0 s2: its 2 tokens reach 7 - 5
    ]


def test_one_sentence_chunks_always_take_a_random_next():
    documents = documents_of_lengths([50], [50], [50])
    spans = pd.create_instance_spans(documents, 32, 0.0, 20, random.Random(0))
    assert len(spans) == 60 and spans.is_random_next.all()


def test_a_random_next_from_a_single_document_uses_itself():
    documents = documents_of_lengths([4, 4, 4, 4, 4, 4])
    spans = pd.create_instance_spans(documents, 16, 0.1, 50, random.Random(3))
    assert spans.b_end.max() <= documents.num_tokens
    assert spans.is_random_next.any() and not spans.is_random_next.all()


# --- Step 5: truncation ---------------------------------------------------------------------


def test_truncation_cuts_each_end_with_probability_one_half():
    n = 20000
    spans = pd.InstanceSpans(a_start=np.full([n], 100), a_end=np.full([n], 140),
                             b_start=np.full([n], 0), b_end=np.full([n], 10),
                             is_random_next=np.zeros([n], bool))
    cut = pd.truncate_spans(spans, 30, np.random.default_rng(0))
    assert np.all(cut.a_end - cut.a_start == 20) and np.all(cut.b_end - cut.b_start == 10)
    front = cut.a_start - 100
    assert front.min() >= 0 and front.max() <= 20
    assert abs(front.mean() - 10) < 0.1  # Binomial(20, 1/2): mean 10, sd 2.2
    assert abs(front.var() - 5) < 0.3
    assert np.all(cut.a_end == cut.a_start + 20)


# --- Step 6: packing ------------------------------------------------------------------------


def test_packing_segments_and_padding():
    token_ids = np.arange(100, 120, dtype=np.int32)
    spans = pd.InstanceSpans(a_start=np.array([0]), a_end=np.array([3]),
                             b_start=np.array([10]), b_end=np.array([12]),
                             is_random_next=np.array([True]))
    input_ids, segment_ids, lengths, length_a = pd.pack_spans(token_ids, spans, 10, SPECIAL)
    assert input_ids.tolist() == [[2, 100, 101, 102, 3, 110, 111, 3, 0, 0]]
    assert segment_ids.tolist() == [[0, 0, 0, 0, 0, 1, 1, 1, 0, 0]]
    assert lengths.tolist() == [8] and length_a.tolist() == [3]


# --- Step 7: masking ------------------------------------------------------------------------


def test_masking_counts_positions_and_labels():
    rng = np.random.default_rng(0)
    ids, lengths, length_a = random_packed(3000, 64, rng, SPECIAL)
    options = pd.InstanceOptions(max_seq_length=64, max_predictions_per_seq=7)
    masked, positions, labels, weights, counts = pd.mask_instances(
        ids, lengths, length_a, options, SPECIAL, rng)
    wanted = np.minimum(7, np.maximum(1, np.rint(lengths * 0.15))).astype(int)
    real = weights.sum(axis=1).astype(int)
    np.testing.assert_array_equal(real, np.minimum(wanted, lengths - 3))
    for row in range(len(ids)):
        k = real[row]
        p = positions[row, :k]
        assert np.all(np.diff(p) > 0), "positions sorted"
        assert np.all(positions[row, k:] == 0) and np.all(labels[row, k:] == 0)
        assert 0 not in p and length_a[row] + 1 not in p and lengths[row] - 1 not in p
        np.testing.assert_array_equal(labels[row, :k], ids[row, p])
        unmasked = np.setdiff1d(np.arange(64), p)
        np.testing.assert_array_equal(masked[row, unmasked], ids[row, unmasked])
    assert counts.sum() == real.sum()


def test_replacement_proportions():
    rng = np.random.default_rng(1)
    ids, lengths, length_a = random_packed(20000, 128, rng, SPECIAL)
    options = pd.InstanceOptions(max_seq_length=128, max_predictions_per_seq=20)
    masked, positions, labels, weights, counts = pd.mask_instances(
        ids, lengths, length_a, options, SPECIAL, rng)
    shares = counts / counts.sum()  # ~250k predictions: sd of a share < 0.001
    np.testing.assert_allclose(shares, [0.8, 0.1, 0.1], atol=0.004)
    rows, slots = np.nonzero(weights)
    new = masked[rows, positions[rows, slots]]
    assert np.mean(new == SPECIAL.mask_id) == pytest.approx(0.8, abs=0.004)
    # Random replacements are uniform over the whole vocabulary, special tokens included.
    random_ones = new[(new != SPECIAL.mask_id) & (new != labels[rows, slots])]
    assert random_ones.min() < 10 and abs(random_ones.mean() - 499.5) < 5


def test_masked_fraction_is_about_masked_lm_prob():
    rng = np.random.default_rng(2)
    ids, lengths, length_a = random_packed(5000, 128, rng, SPECIAL)
    options = pd.InstanceOptions(max_seq_length=128, max_predictions_per_seq=1000,
                                 masked_lm_prob=0.15)
    *_, weights, _ = pd.mask_instances(ids, lengths, length_a, options, SPECIAL, rng)
    assert weights.sum() / lengths.sum() == pytest.approx(0.15, abs=0.003)


def whole_word_special(continuation_ids):
    is_continuation = np.zeros([1000], bool)
    is_continuation[list(continuation_ids)] = True
    return pd.SpecialTokenIds(0, 1, 2, 3, 4, 1000, is_continuation)


def test_whole_word_masking_keeps_words_together():
    # [CLS] a ##b ##c d [SEP] ##e f [SEP]: the words are {1,2,3}, {4,6} (##e joins the last word
    # before the [SEP], as in the original) and {7}.
    special = whole_word_special([21, 22, 24])
    n = 6000
    ids = np.tile(np.array([[2, 10, 21, 22, 11, 3, 24, 12, 3, 0]], np.int32), (n, 1))
    lengths = np.full([n], 9, np.int32)
    length_a = np.full([n], 4, np.int32)
    options = pd.InstanceOptions(max_seq_length=10, max_predictions_per_seq=20,
                                 masked_lm_prob=0.5, do_whole_word_mask=True)  # round(4.5) = 4
    rng = np.random.default_rng(3)
    chosen = pd.choose_masked_positions(ids, lengths, length_a, options, special, rng)
    sets = {tuple(np.nonzero(row)[0].tolist()) for row in chosen}
    # Worked by hand over the 6 orders of the words: a word that does not fit is skipped and
    # the next ones are still tried, so {1,2,3}+{7} or {4,6}+{7}, each in 3 orders of 6.
    assert sets == {(1, 2, 3, 7), (4, 6, 7)}
    assert np.mean(chosen[:, 1]) == pytest.approx(0.5, abs=0.03)


def test_whole_word_counts_match_reference():
    rng = np.random.default_rng(4)
    vocab = [f"w{i}" for i in range(1000)]
    continuation = set(range(500, 1000))
    for i in continuation:
        vocab[i] = f"##w{i}"
    vocab[:5] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    special = whole_word_special(continuation)
    ids, lengths, length_a = random_packed(3000, 40, rng, SPECIAL)
    options = pd.InstanceOptions(max_seq_length=40, max_predictions_per_seq=5,
                                 do_whole_word_mask=True)
    *_, weights, _ = pd.mask_instances(ids, lengths, length_a, options, special, rng)
    ours = weights.sum(axis=1)
    from helpers.pretraining_reference import mask_tokens
    python_rng = random.Random(0)
    theirs = []
    for row in range(len(ids)):
        tokens = [vocab[t] for t in ids[row, :lengths[row]]]
        _, chosen, _ = mask_tokens(tokens, 0.15, 5, vocab, python_rng, whole_word=True)
        theirs.append(len(chosen))
    assert abs(ours.mean() - np.mean(theirs)) < 0.05
    assert abs(np.mean(ours == 5) - np.mean(np.array(theirs) == 5)) < 0.03


# --- The whole algorithm against the reference ----------------------------------------------


def synthetic_corpus(seed, num_documents=150):
    """Documents like sentence-split Wikipedia: 1-30 sentences of 3-45 tokens, some 1-sentence."""
    rng = np.random.default_rng(seed)
    documents = []
    for _ in range(num_documents):
        count = 1 if rng.random() < 0.15 else int(rng.integers(2, 31))
        documents.append([rng.integers(5, 1000, int(rng.integers(3, 46))).tolist()
                          for _ in range(count)])
    return documents


def summarize(lengths, length_a, random_next, masked):
    return {
        "mean_length": float(np.mean(lengths)),
        "full_share": float(np.mean(np.asarray(lengths) == 128)),
        "mean_length_a": float(np.mean(length_a)),
        "random_next": float(np.mean(random_next)),
        "masked_per_instance": float(np.mean(masked)),
    }


def test_distributions_match_reference_algorithm():
    corpus = synthetic_corpus(0)
    documents = pd.TokenizedDocuments.from_lists(corpus)
    options = pd.InstanceOptions(max_seq_length=128, max_predictions_per_seq=20, dupe_factor=15)
    vocab = [f"w{i}" for i in range(1000)]
    words = [[[vocab[t] for t in s] for s in d] for d in corpus]
    ours, reference = [], []
    for seed in range(3):
        ours.append(pd.create_instances(documents, options, SPECIAL, seed=seed))
        reference.extend(reference_instances(words, 128, 0.1, 0.15, 20, 15, vocab, seed=seed))
    ours = pd.concatenate_batches(ours)
    length_b = ours.segment_ids.sum(axis=1) - 1
    a = summarize(ours.lengths, ours.lengths - length_b - 3, ours.next_sentence_labels,
                  ours.masked_lm_weights.sum(axis=1))
    b = summarize([len(r["original"]) for r in reference], [r["length_a"] for r in reference],
                  [r["is_random_next"] for r in reference], [len(r["positions"]) for r in reference])
    # ~28,000 instances each; the tolerances are about 3 standard errors.
    assert len(ours) == pytest.approx(len(reference), rel=0.015)
    assert a["mean_length"] == pytest.approx(b["mean_length"], rel=0.01)
    assert a["full_share"] == pytest.approx(b["full_share"], abs=0.012)
    assert a["mean_length_a"] == pytest.approx(b["mean_length_a"], rel=0.02)
    assert a["random_next"] == pytest.approx(b["random_next"], abs=0.012)
    assert a["masked_per_instance"] == pytest.approx(b["masked_per_instance"], rel=0.01)
    # One-sentence chunks always take a random next, so the share is above one half.
    assert 0.55 < a["random_next"] < 0.62


def test_instances_are_well_formed():
    documents = pd.TokenizedDocuments.from_lists(synthetic_corpus(1, 40))
    options = pd.InstanceOptions(max_seq_length=64, max_predictions_per_seq=10, dupe_factor=3)
    batch = pd.create_instances(documents, options, SPECIAL, seed=5)
    position = np.arange(64)[None, :]
    assert np.all(batch.input_ids[:, 0] == SPECIAL.cls_id)
    np.testing.assert_array_equal(batch.input_mask, position < batch.lengths[:, None])
    assert np.all(batch.input_ids[batch.input_mask == 0] == 0)
    assert np.all(batch.input_ids[np.arange(len(batch)), batch.lengths - 1] == SPECIAL.sep_id)
    # Segment B is [1, ...] up to the last [SEP]; both segments have at least one token.
    first_b = np.argmax(batch.segment_ids, axis=1)
    assert np.all(first_b >= 3)
    assert np.all(batch.segment_ids.sum(axis=1) >= 2)
    assert np.all(batch.input_ids[np.arange(len(batch)), first_b - 1] == SPECIAL.sep_id)
    assert set(np.unique(batch.masked_lm_weights)) <= {0.0, 1.0}


def test_same_seed_same_instances_other_seed_other_instances():
    documents = pd.TokenizedDocuments.from_lists(synthetic_corpus(2, 30))
    options = pd.InstanceOptions(max_seq_length=64, dupe_factor=2)
    a = pd.create_instances(documents, options, SPECIAL, seed=[1, 2])
    b = pd.create_instances(documents, options, SPECIAL, seed=[1, 2])
    c = pd.create_instances(documents, options, SPECIAL, seed=[1, 3])
    np.testing.assert_array_equal(a.input_ids, b.input_ids)
    assert len(a) != len(c) or not np.array_equal(a.input_ids, c.input_ids)


def test_empty_and_tiny_inputs():
    options = pd.InstanceOptions(max_seq_length=8, dupe_factor=2)
    empty = pd.TokenizedDocuments.from_lists([[], [[]]])
    assert empty.num_documents == 0 and len(pd.create_instances(empty, options, SPECIAL, 0)) == 0
    # One document of one sentence, longer than max_seq_length: B is the same sentence.
    one = pd.TokenizedDocuments.from_lists([[list(range(10, 40))]])
    batch = pd.create_instances(one, options, SPECIAL, seed=0)
    assert len(batch) == 2 and np.all(batch.lengths == 8) and np.all(batch.next_sentence_labels)


def test_drop_empty_sentences_and_documents():
    documents = pd.TokenizedDocuments.drop_empty(
        token_ids=[7, 8, 9], sentence_lengths=[0, 2, 0, 0, 1], document_sizes=[2, 2, 1])
    assert documents.num_documents == 2
    assert documents.document(0) == [[7, 8]] and documents.document(1) == [[9]]


def test_options_are_checked():
    with pytest.raises(ValueError, match="max_seq_length"):
        pd.InstanceOptions(max_seq_length=4).validate()
    with pytest.raises(ValueError, match="masked_lm_prob"):
        pd.InstanceOptions(masked_lm_prob=1.5).validate()
