"""BERT's learning-rate schedule: linear warm-up, then linear decay to zero.

As in the paper and its released `optimization.py`: the learning rate is
`peak * step / warmup_steps` for `step < warmup_steps`, then `peak * (1 - step / total_steps)`
(the decay runs over all steps, warm-up included, and reaches zero at `total_steps`). Pre-training
(`bert_keras.optimization.create_optimizer`) and fine-tuning use it alike.

Example:

>>> schedule = WarmupLinearDecay(1e-4, warmup_steps=10, total_steps=100)
>>> [round(float(schedule(step)), 7) for step in (0, 5, 10, 55, 100)]
[0.0, 5e-05, 9e-05, 4.5e-05, 0.0]
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bert_keras")
def warmup_linear_decay(step, peak_learning_rate, warmup_steps, total_steps):
    """The learning rate after `step` updates: linear warm-up from 0 to `peak_learning_rate` over
    `warmup_steps` (0: none), then linear decay to 0 at `total_steps`, and 0 after.

    The arguments may be numbers or (float32) variables, so that one traced training step can
    serve runs of different lengths (`bert_keras.finetuning.sweep`).
    """
    step = ops.cast(step, "float32")
    peak = ops.cast(peak_learning_rate, "float32")
    warmup = ops.cast(warmup_steps, "float32")
    total = ops.cast(total_steps, "float32")
    decayed = peak * (1.0 - ops.minimum(step, total) / total)
    warming = peak * step / ops.maximum(warmup, 1.0)
    return ops.where(step < warmup, warming, decayed)


class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up from 0 to `peak_learning_rate`, then linear decay to 0 at `total_steps`.

    `step` is the number of updates already applied (0 for the first update), as the optimizer's
    `iterations`; past `total_steps` the rate stays 0.
    """

    def __init__(self, peak_learning_rate, warmup_steps, total_steps):
        if total_steps <= 0:
            raise ValueError(f"total_steps must be positive, got {total_steps}")
        if not 0 <= warmup_steps <= total_steps:
            raise ValueError(f"warmup_steps must be in [0, total_steps={total_steps}], got {warmup_steps}")
        self.peak_learning_rate = float(peak_learning_rate)
        self.warmup_steps = int(warmup_steps)
        self.total_steps = int(total_steps)

    def __call__(self, step):
        return warmup_linear_decay(step, self.peak_learning_rate, self.warmup_steps,
                                   self.total_steps)

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate, "warmup_steps": self.warmup_steps,
                "total_steps": self.total_steps}
