"""Dynamic masking and left-to-right targets against the paper's masking rule."""

import numpy as np
import pytest

from bert_keras.pretraining import dynamic_masking

CLS, SEP, MASK, VOCAB = 2, 3, 4, 1000


def _sequences(count=3000, seq=64, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(4, seq + 1, count)
    ids = rng.integers(5, VOCAB, (count, seq))
    position = np.arange(seq)[None, :]
    mask = (position < lengths[:, None]).astype(np.int32)
    ids = ids * mask
    ids[:, 0] = CLS
    ids[np.arange(count), lengths - 1] = SEP
    middle = lengths // 2
    ids[np.arange(count), middle] = SEP  # [CLS] A [SEP] B [SEP]
    return ids.astype(np.int32), mask, lengths


def _mask(ids, mask, seed=(1, 2), predictions=20):
    out = dynamic_masking.mask_tokens({"input_ids": ids, "input_mask": mask}, seed, predictions,
                                      VOCAB, CLS, SEP, MASK)
    return {name: np.asarray(value) for name, value in out.items()}


def test_masking_follows_the_paper_rule():
    ids, mask, lengths = _sequences()
    out = _mask(ids, mask)
    weights = out["masked_lm_weights"]
    candidates = ((mask > 0) & (ids != CLS) & (ids != SEP)).sum(1)
    # Python's round (half to even), as the original tool.
    expected = np.array([min(20, max(1, round(n * 0.15)), c) for n, c in zip(lengths, candidates)])
    np.testing.assert_array_equal(weights.sum(1), expected)
    replaced = {"mask": 0, "same": 0, "random": 0}
    for row in range(len(ids)):
        count = int(weights[row].sum())
        positions = out["masked_lm_positions"][row]
        chosen = positions[:count]
        assert np.all(np.diff(chosen) > 0)  # sorted, distinct
        assert np.all(positions[count:] == 0) and np.all(weights[row, count:] == 0)
        assert np.all(chosen < lengths[row])
        assert not np.any(np.isin(ids[row, chosen], [CLS, SEP]))
        np.testing.assert_array_equal(out["masked_lm_ids"][row, :count], ids[row, chosen])
        new = out["input_ids"][row]
        unchosen = np.setdiff1d(np.arange(ids.shape[1]), chosen)
        np.testing.assert_array_equal(new[unchosen], ids[row, unchosen])
        for before, after in zip(ids[row, chosen], new[chosen]):
            if after == MASK:
                replaced["mask"] += 1
            elif after == before:
                replaced["same"] += 1
            else:
                replaced["random"] += 1
    total = sum(replaced.values())
    # 80/10/10, within 4 standard deviations (a random id may equal the original: ~0.1%).
    assert replaced["mask"] / total == pytest.approx(0.8, abs=4 * np.sqrt(0.16 / total))
    assert replaced["same"] / total == pytest.approx(0.1, abs=4 * np.sqrt(0.09 / total) + 0.001)
    assert replaced["random"] / total == pytest.approx(0.1, abs=4 * np.sqrt(0.09 / total))


def test_masks_are_uniform_over_candidates_and_depend_only_on_the_seed():
    ids, mask, _ = _sequences(count=1, seq=16)
    ids = np.repeat(ids, 4000, axis=0)
    mask = np.repeat(mask, 4000, axis=0)
    out = _mask(ids, mask, predictions=3)
    counts = np.zeros(16)
    for row in range(len(ids)):
        count = int(out["masked_lm_weights"][row].sum())
        counts[out["masked_lm_positions"][row, :count]] += 1
    candidates = (mask[0] > 0) & (ids[0] != CLS) & (ids[0] != SEP)
    share = counts[candidates] / counts.sum()
    assert np.all(np.abs(share - 1 / candidates.sum()) < 0.02)
    assert counts[~candidates].sum() == 0
    again = _mask(ids[:50], mask[:50], predictions=3)
    np.testing.assert_array_equal(again["input_ids"], _mask(ids[:50], mask[:50], predictions=3)["input_ids"])
    other = _mask(ids[:50], mask[:50], seed=(1, 3), predictions=3)
    assert not np.array_equal(other["masked_lm_positions"], again["masked_lm_positions"])


def test_restore_puts_the_original_tokens_back():
    ids, mask, _ = _sequences(count=200)
    masked = _mask(ids, mask)
    np.testing.assert_array_equal(dynamic_masking.restore_masked_tokens(masked).numpy(), ids)


def test_next_token_targets():
    ids = np.array([[2, 7, 8, 3, 0, 0]], np.int32)
    out = dynamic_masking.next_token_targets({"input_ids": ids, "input_mask": (ids > 0).astype(np.int32)})
    np.testing.assert_array_equal(out["masked_lm_positions"], [[0, 1, 2, 3, 4]])
    np.testing.assert_array_equal(out["masked_lm_ids"], [[7, 8, 3, 0, 0]])
    np.testing.assert_array_equal(out["masked_lm_weights"], [[1, 1, 1, 0, 0]])
