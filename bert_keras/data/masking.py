"""The masked-LM rule of the paper, stated once for the static and the dynamic masking.

- `num_to_predict`: each sequence predicts `min(max_predictions_per_seq, max(1,
  round(num_tokens * masked_lm_prob)))` tokens, `num_tokens` counting [CLS] and [SEP], rounding
  half to even as the original's Python 3 `round`; never more than its candidates (real tokens
  other than [CLS] and [SEP]);
- `replacement`: a chosen token becomes [MASK] with probability 0.8, stays itself with 0.1 and
  becomes a uniformly random vocabulary token with 0.1, drawn as the original draws it: first
  [MASK] or not, then keep or random with even odds.

Static masking (`bert_keras.data.instances`, NumPy, when the records are written) and dynamic
masking (`bert_keras.pretraining.dynamic_masking`, TensorFlow, as training reads) both call
these, written against the functions NumPy and TensorFlow share (`round`, `minimum`,
`maximum`, `where`); pass `xp=tf` in a graph.

Example:

>>> import numpy as np
>>> num_to_predict(np.array([4.0, 10.0, 30.0, 200.0]), 0.15, 20).tolist()
[1.0, 2.0, 4.0, 20.0]
"""

import numpy as np

MASK_PROBABILITY = 0.8   # a chosen token becomes [MASK] ...
KEEP_PROBABILITY = 0.5   # ... else it stays itself with these odds, or becomes a random token


def num_to_predict(num_tokens, masked_lm_prob, max_predictions_per_seq, xp=np):
    """How many tokens each sequence predicts, as floats. `num_tokens`: float [batch]."""
    wanted = xp.round(num_tokens * masked_lm_prob)  # half to even, as Python 3's round
    return xp.minimum(float(max_predictions_per_seq), xp.maximum(1.0, wanted))


def replacement(labels, mask_id, random_ids, mask_draw, keep_draw, xp=np):
    """The tokens that replace the chosen ones.

    Args:
      labels: the chosen tokens; random_ids: uniformly random vocabulary ids, same shape;
      mask_draw, keep_draw: independent uniform [0, 1) draws, same shape.
    Returns:
      (replacement ids, is_mask, is_keep): [MASK] where mask_draw < 0.8, else the token itself
      where keep_draw < 0.5, else the random id.
    """
    is_mask = mask_draw < MASK_PROBABILITY
    is_keep = ~is_mask & (keep_draw < KEEP_PROBABILITY)
    ids = xp.where(is_mask, mask_id, xp.where(is_keep, labels, random_ids))
    return ids, is_mask, is_keep


# ------------------------------------------------------------- static masking (NumPy)
def masking_candidates(input_ids, lengths, length_a):
    """Positions that may be masked: real tokens except [CLS] and the two [SEP]. bool [n, L]."""
    position = np.arange(input_ids.shape[1])[None, :]
    return ((position >= 1) & (position < lengths[:, None] - 1)
            & (position != length_a[:, None] + 1))


def choose_masked_positions(input_ids, lengths, length_a, options, special, np_rng):
    """Which positions step 7 predicts. Returns bool [n, L].

    Taking the candidates in a uniformly random order while they fit is done by giving each
    candidate (a token, or a whole word) a uniform random key and visiting candidates by key.
    """
    candidates = masking_candidates(input_ids, lengths, length_a)
    wanted = num_to_predict(np.asarray(lengths, np.float64), options.masked_lm_prob,
                                    options.max_predictions_per_seq).astype(np.int64)
    n, seq_length = input_ids.shape
    if not options.do_whole_word_mask:
        # Every candidate has size 1, so the greedy fill takes the `wanted` smallest keys.
        keys = np_rng.random((n, seq_length))
        keys[~candidates] = 2.0
        width = min(options.max_predictions_per_seq, seq_length)
        order = np.argsort(keys, axis=1)[:, :width]
        row_index = np.arange(n)[:, None]
        take = (np.arange(width)[None, :] < wanted[:, None]) & (keys[row_index, order] < 2.0)
        chosen = np.zeros((n, seq_length), bool)
        chosen[np.broadcast_to(row_index, order.shape)[take], order[take]] = True
        return chosen
    # Whole words: a candidate that is a `##` continuation joins the previous candidate's word.
    if special.is_continuation is None:
        raise ValueError("whole-word masking needs SpecialTokenIds.is_continuation")
    continuation = special.is_continuation[input_ids] & candidates
    starts = candidates & ~continuation
    # A leading continuation (after [CLS]) starts a word of its own, as in the original.
    first_candidate = np.argmax(candidates, axis=1)
    starts[np.arange(n), first_candidate] |= candidates[np.arange(n), first_candidate]
    word = np.cumsum(starts, axis=1) - 1  # [n, L], meaningful where candidates
    num_words = starts.sum(axis=1)
    max_words = int(num_words.max()) if n else 0
    word_sizes = np.zeros((n, max_words + 1), np.int64)
    rows = np.repeat(np.arange(n), seq_length).reshape(n, seq_length)
    np.add.at(word_sizes, (rows[candidates], word[candidates]), 1)
    keys = np_rng.random((n, max_words + 1))
    keys[np.arange(max_words + 1)[None, :] >= num_words[:, None]] = 2.0
    order = np.argsort(keys, axis=1, kind="stable")
    taken = np.zeros((n, max_words + 1), bool)
    filled = np.zeros([n], np.int64)
    row_index = np.arange(n)
    for rank in range(max_words):
        word_at_rank = order[:, rank]
        size = word_sizes[row_index, word_at_rank]
        fits = (rank < num_words) & (filled + size <= wanted)
        taken[row_index, word_at_rank] = fits
        filled += np.where(fits, size, 0)
        if np.all((filled >= wanted) | (rank + 1 >= num_words)):
            break
    return candidates & taken[rows, np.maximum(word, 0)]


def mask_instances(input_ids, lengths, length_a, options, special, np_rng):
    """Step 7 for all instances at once.

    Returns:
      (masked input_ids int32 [n, L], masked_lm_positions int32 [n, P], masked_lm_ids int32
      [n, P], masked_lm_weights float32 [n, P], replacement_counts int64 [3]).
    """
    n = len(input_ids)
    max_predictions = options.max_predictions_per_seq
    chosen = choose_masked_positions(input_ids, lengths, length_a, options, special, np_rng)
    rows, positions = np.nonzero(chosen)  # row-major: positions sorted within each row
    slot = np.cumsum(chosen, axis=1)[rows, positions] - 1
    labels = input_ids[rows, positions]
    draw = np_rng.random(len(rows))
    keep_draw = np_rng.random(len(rows))
    random_tokens = np_rng.integers(0, special.vocab_size, len(rows))
    replaced, to_mask, to_keep = replacement(labels, special.mask_id, random_tokens, draw,
                                             keep_draw)
    to_random = ~to_mask & ~to_keep
    masked_ids = input_ids.copy()
    masked_ids[rows, positions] = replaced
    masked_lm_positions = np.zeros((n, max_predictions), np.int32)
    masked_lm_ids = np.zeros((n, max_predictions), np.int32)
    masked_lm_weights = np.zeros((n, max_predictions), np.float32)
    masked_lm_positions[rows, slot] = positions
    masked_lm_ids[rows, slot] = labels
    masked_lm_weights[rows, slot] = 1.0
    counts = np.array([to_mask.sum(), to_keep.sum(), to_random.sum()], np.int64)
    return masked_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights, counts


__all__ = ["MASK_PROBABILITY", "KEEP_PROBABILITY", "num_to_predict", "replacement",
           "masking_candidates", "choose_masked_positions", "mask_instances"]
