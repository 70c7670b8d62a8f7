"""The seeded random draws of one unit of work of the data tool: a Python generator for the
sentence loop (the original's `random.Random` calls, with a faster `randint`) and a NumPy one
for the vectorized masking, both from one seed, so that a block's instances depend only on its
seed.

Example:

>>> rng, np_rng = make_generators([12345, 7, 0])
>>> 0 <= rng.randint(0, 9) <= 9, bool(np_rng.integers(0, 10) < 10)
(True, True)
"""

import random

import numpy as np


class FastRandom(random.Random):
    """`random.Random` with a `randint` drawn from one `random()` call.

    `random.Random.randint` goes through `randrange` and rejection sampling (about 0.3 us a
    call here, against 0.15 us), and the sentence loop makes two or three calls per instance.
    `a + floor(u * (b - a + 1))` with a 53-bit uniform `u` is uniform on [a, b] to within
    2**-53 * (b - a + 1), far below anything measurable.
    """

    def randint(self, a, b):
        return a + int(self.random() * (b - a + 1))


def make_generators(seed):
    """The two random generators for one unit of work, from an int or a sequence of ints."""
    sequence = np.random.SeedSequence(seed)
    python_seed, numpy_seed = sequence.spawn(2)
    return (FastRandom(int(python_seed.generate_state(2, np.uint64)[0])),
            np.random.default_rng(numpy_seed))


__all__ = ["FastRandom", "make_generators"]
