"""Pair truncation: how many wordpieces each text of a pair keeps when the pair is too long.

The one statement of the original's `truncate_seq_pair` / `_truncate_seq_pair` rule, used by the
pre-training data (with random front/back cuts), by fine-tuning features and by the in-graph
packing of the exported preprocessor and task models: while the pair is longer than the budget,
the longer text loses a wordpiece (B on ties). The loop's outcome has a closed form: the longer
text is cut down to the shorter, then the cuts alternate, B first.

Written against the functions NumPy and TensorFlow share (`maximum`, `minimum`, `abs`, `where`):
NumPy by default, so that the pre-training data workers need no TensorFlow; `xp=tf` in a graph.

Example:

>>> [int(n) for n in truncated_pair_lengths(10, 3, 8)]
[5, 3]
>>> [int(n) for n in truncated_pair_lengths(6, 6, 9)]
[5, 4]
"""

import numpy as np


def truncated_pair_lengths(length_a, length_b, budget, xp=np):
    """(kept of A, kept of B) after truncating the pair to `budget` wordpieces.

    Args:
      length_a, length_b: int scalars or arrays of the same shape (NumPy, or tensors with
        `xp=tf`).
      budget: the wordpieces the two texts may hold together (e.g. max_seq_length - 3).
    """
    excess = xp.maximum(length_a + length_b - budget, 0)
    to_equal = xp.minimum(excess, xp.abs(length_a - length_b))
    rest = excess - to_equal
    a_longer = length_a > length_b
    cut_a = xp.where(a_longer, to_equal, 0) + rest // 2
    cut_b = xp.where(a_longer, 0, to_equal) + (rest + 1) // 2
    return length_a - cut_a, length_b - cut_b


__all__ = ["truncated_pair_lengths"]
