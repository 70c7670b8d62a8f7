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


__all__ = ["MASK_PROBABILITY", "KEEP_PROBABILITY", "num_to_predict", "replacement"]
