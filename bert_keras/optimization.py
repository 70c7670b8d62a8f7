"""BERT's optimization: Adam with decoupled weight decay (or LAMB), warm-up then linear decay.

As in the paper and its released `optimization.py`:

- learning rate `peak * step / warmup_steps` for `step < warmup_steps`, then
  `peak * (1 - step / total_steps)` (the decay runs over all steps, warm-up included, and
  reaches zero at `total_steps`);
- Adam with beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-6, plus weight decay 0.01 added to the
  update, except for variables whose original name contains "LayerNorm", "layer_norm" or "bias";
- gradients clipped to a global norm of 1.0.

One departure, on by default: Adam's moments are *bias-corrected* (divided by 1 - beta^t), as in
Adam itself, TF Model Garden, Keras' `AdamW` and PyTorch's `AdamW`. The released
`AdamWeightDecayOptimizer` has no bias correction; with it, the first updates are about
sqrt(1 - beta_2^t) / (1 - beta_1^t) times too small in scale and pointed by a near-zero momentum,
which at short budgets costs a lot: on the same records (BERT-Tiny, seq 128, batch 32, lr 1e-3,
800 steps) the uncorrected update stays at the unigram baseline (held-out MLM accuracy 0.05) where
the corrected one learns about three times more (see `docs/pretraining.md`).
`bias_correction=False` gives the released update exactly.

LAMB (You et al., 2019) is the large-batch alternative: the same Adam direction with bias
correction plus weight decay, scaled per variable by the trust ratio ||w|| / ||update||; the
excluded variables get neither decay nor the ratio.

The training step of `bert_keras.pretraining.run` sums the gradients over replicas itself (once,
before clipping, so that clipping sees the global gradient); the optimizers here therefore skip
Keras' own cross-replica sum.

The schedule is in `bert_keras.learning_rate` (its names stay importable from here).

Example:

>>> gamma, kernel = keras.Variable([1.0]), keras.Variable([[1.0]])
>>> variable_map = {"bert/embeddings/LayerNorm/gamma": gamma, "bert/pooler/dense/kernel": kernel}
>>> [variable is gamma for variable in no_decay_variables(variable_map)]
[True]
"""

import math

import keras
from keras import ops

from bert_keras.common.xla import xla_function
from bert_keras.learning_rate import WarmupLinearDecay, warmup_linear_decay  # noqa: F401
# The compute dtype is decided in `bert_keras.precision`; its names stay importable from here.
from bert_keras.precision import (AUTO_DTYPE, DTYPE_FLAG_VALUES, DTYPES,  # noqa: F401
                                  MIXED_PRECISION_POLICIES, cpu_has_bfloat16_units,
                                  dtype_option, mixed_precision_policy, native_bfloat16,
                                  resolve_dtype)

# Original names whose variables get no weight decay (and no LAMB trust ratio).
NO_DECAY_NAME_PARTS = ("LayerNorm", "layer_norm", "bias")
OPTIMIZER_NAMES = ("adamw", "lamb")

class _SummedGradients:
    """Mix-in: with `summed_gradients=True`, gradients reach `apply` already summed over
    replicas (see the module docstring).

    Keras' TensorFlow optimizer sums gradients over replicas inside `apply`, after clipping;
    the pre-training step sums them first so that clipping and the loss-scale check see the global
    gradient, and this turns the second sum off. With `summed_gradients=False` Keras sums them,
    as `model.fit` needs (fine-tuning).
    """

    summed_gradients = True

    def _get_current_learning_rate(self):
        # The schedule counts updates: with Keras' `gradient_accumulation_steps` (pre-training
        # on JAX) `iterations` is the updates made, `_iterations` the micro-batches seen.
        if isinstance(self._learning_rate, keras.optimizers.schedules.LearningRateSchedule):
            return self._learning_rate(self.iterations)
        return super()._get_current_learning_rate()

    def _clip_gradients(self, grads):
        if self.global_clipnorm and keras.backend.backend() == "tensorflow":
            return _clip_by_global_norm_tf(grads, self.global_clipnorm)
        return super()._clip_gradients(grads)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if self.summed_gradients:
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)


def _slots(optimizer, var_list, names):
    """One zero-initialized optimizer variable per (name, model variable)."""
    return [[optimizer.add_variable_from_reference(variable, name=name) for variable in var_list]
            for name in names]


def _adam_math(gradient, variable, m, v, lr, one_minus_beta_1, one_minus_beta_2, epsilon,
               correction_1, correction_2, weight_decay):
    """(variable, m, v) after decoupled weight decay and one Adam step; `correction_i` is
    1 - beta_i^t, or 1 (uncorrected); `weight_decay` 0 for the excluded variables.

    The decay is Keras' own arithmetic (`w - w * weight_decay * lr`, before the Adam step).
    1 - beta comes in computed in double precision: 1 - 0.999 in float32 is 1.3e-5 off.
    """
    variable = variable - variable * weight_decay * lr
    m = m + (gradient - m) * one_minus_beta_1
    v = v + (gradient * gradient - v) * one_minus_beta_2
    update = (m / correction_1) / (ops.sqrt(v / correction_2) + epsilon)
    return variable - lr * update, m, v


# Variables this large (the word embeddings, the feed-forward kernels of BERT-small and up) get
# the one-loop update; for smaller ones the ten ops cost less than compiling the loop.
_FUSED_MIN_SIZE = 1 << 20


def _dense(gradient):
    """A gathered embedding's gradient as a dense tensor, repeated rows summed. On TensorFlow it
    arrives as IndexedSlices, a row per occurrence, when nothing (clipping) densified it before;
    squared slice by slice, a repeated row's second moment would be wrong."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        if isinstance(gradient, tf.IndexedSlices):
            return tf.convert_to_tensor(gradient)
    return gradient


def _clip_by_global_norm_tf(grads, clip_norm):
    """Keras' `clip_by_global_norm` (the same scale, NaN for a non-finite norm) with each
    gradient's squared norm taken in one pass (`tf.nn.l2_loss`) instead of a square and a sum.

    As Keras and the released `tf.clip_by_global_norm`, a gathered embedding's gradient
    (IndexedSlices) counts each occurrence's row on its own (repeated rows are not summed first),
    and is scaled row by row.
    """
    import tensorflow as tf

    def values(g):
        return g.values if isinstance(g, tf.IndexedSlices) else g

    def scaled(g, scale):
        if isinstance(g, tf.IndexedSlices):
            return tf.IndexedSlices(g.values * tf.cast(scale, g.values.dtype), g.indices,
                                    g.dense_shape)
        return g * tf.cast(scale, g.dtype)

    norm = tf.sqrt(tf.add_n([2.0 * tf.nn.l2_loss(tf.cast(values(g), tf.float32))
                             for g in grads if g is not None]))
    scale = clip_norm * tf.minimum(1.0 / norm, 1.0 / clip_norm)
    scale = scale + (norm - norm)  # NaN when the norm is not finite
    return [None if g is None else scaled(g, scale) for g in grads]


# `_adam_math` compiled by XLA into one loop (TensorFlow only).
_adam_update = xla_function(_adam_math)


@keras.saving.register_keras_serializable(package="bert_keras")
class AdamWeightDecay(_SummedGradients, keras.optimizers.Optimizer):
    """Adam with decoupled weight decay as in BERT's released `AdamWeightDecayOptimizer`.

        m = beta_1 m + (1 - beta_1) g;   v = beta_2 v + (1 - beta_2) g^2
        w = w - lr (m / (sqrt(v) + epsilon) + weight_decay w)

    With `bias_correction=True` (the default) m and v are divided by 1 - beta_1^t and
    1 - beta_2^t before the update, epsilon being added after the correction: this is PyTorch's
    `AdamW` (Loshchilov & Hutter) to float32 rounding. Keras' own `AdamW` adds epsilon to the
    *uncorrected* sqrt(v), an effective epsilon 1 / sqrt(1 - beta_2^t) times larger (32x at the
    first step, still 2.4x after 188 steps), which damps the small gradients of a clipped
    regression fine-tuning (see `docs/finetuning.md`). `bias_correction=False` is the released
    BERT update, to the digit. Weight decay is applied by Keras' base optimizer
    (`w -= lr * weight_decay * w`) to every variable not passed to `exclude_from_weight_decay`.

    `summed_gradients=True` (pre-training's own step) expects gradients already summed over
    replicas; False lets Keras sum them, for `model.fit`.
    """

    def __init__(self, learning_rate=1e-4, weight_decay=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 bias_correction=True, summed_gradients=True, name="adam_weight_decay", **kwargs):
        super().__init__(learning_rate=learning_rate, weight_decay=weight_decay, name=name, **kwargs)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.bias_correction = bias_correction
        self.summed_gradients = summed_gradients

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._momentums, self._velocities = _slots(self, var_list, ("momentum", "velocity"))

    def _one_loop(self, variable):
        """Whether `variable` takes the one-loop update of `_fused_tf_update`."""
        return keras.backend.backend() == "tensorflow" and math.prod(variable.shape) >= _FUSED_MIN_SIZE

    def _apply_weight_decay(self, variables):
        # The one-loop update decays its variables itself: one pass over them less.
        super()._apply_weight_decay([v for v in variables if not self._one_loop(v)])

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(_dense(gradient), variable.dtype)
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        if self._one_loop(variable):
            self._fused_tf_update(gradient, variable, lr, m, v)
            return
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1.0 - self.beta_1))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1.0 - self.beta_2))
        m_hat, v_hat = m, v
        if self.bias_correction:
            step = ops.cast(self.iterations + 1, variable.dtype)
            m_hat = ops.divide(m, 1.0 - ops.power(ops.cast(self.beta_1, variable.dtype), step))
            v_hat = ops.divide(v, 1.0 - ops.power(ops.cast(self.beta_2, variable.dtype), step))
        self.assign_sub(variable, ops.multiply(lr, ops.divide(m_hat, ops.add(ops.sqrt(v_hat), self.epsilon))))

    def _fused_tf_update(self, gradient, variable, lr, m, v):
        """The same update as one XLA-compiled loop over the variable and its moments, weight
        decay included (about twelve elementwise ops otherwise, each a pass over memory: most of
        the update's time for the 30k x H word embeddings). Same formula in float32; used for
        variables of `_FUSED_MIN_SIZE` elements or more."""
        dtype = variable.dtype
        one = ops.ones((), dtype)
        decays = self.weight_decay is not None and self._use_weight_decay(variable)
        weight_decay = ops.cast(self.weight_decay if decays else 0.0, dtype)
        if self.bias_correction:
            step = ops.cast(self.iterations + 1, dtype)
            correction_1 = one - ops.power(ops.cast(self.beta_1, dtype), step)
            correction_2 = one - ops.power(ops.cast(self.beta_2, dtype), step)
        else:
            correction_1 = correction_2 = one
        import tensorflow as tf

        def read(x):  # the value on this device (a variable would be traced as a Python value)
            return tf.convert_to_tensor(x.value if isinstance(x, keras.Variable) else x)

        new_variable, new_m, new_v = _adam_update(
            gradient, read(variable), read(m), read(v), lr, ops.cast(1.0 - self.beta_1, dtype),
            ops.cast(1.0 - self.beta_2, dtype), ops.cast(self.epsilon, dtype), correction_1,
            correction_2, weight_decay)
        self.assign(m, new_m)
        self.assign(v, new_v)
        self.assign(variable, new_variable)

    def get_config(self):
        config = super().get_config()
        config.update(beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon,
                      bias_correction=self.bias_correction,
                      summed_gradients=self.summed_gradients)
        return config


@keras.saving.register_keras_serializable(package="bert_keras")
class Lamb(_SummedGradients, keras.optimizers.Optimizer):
    """LAMB: layer-wise adaptive moments for large batches (You et al., 2019, Algorithm 2).

        r = m_hat / (sqrt(v_hat) + epsilon) + weight_decay w
        w = w - lr * (||w|| / ||r||) * r

    Variables passed to `exclude_from_weight_decay` get no decay and a trust ratio of 1, as
    in the reference BERT-LAMB recipe. The ratio is 1 when either norm is 0.
    """

    def __init__(self, learning_rate=1e-3, weight_decay=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 name="lamb", **kwargs):
        # The decay is part of the update here (it enters the trust ratio), so the base
        # optimizer's decoupled decay stays off.
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.decay_rate = weight_decay
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._momentums, self._velocities = _slots(self, var_list, ("momentum", "velocity"))

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        lr = ops.cast(learning_rate, dtype)
        gradient = ops.cast(_dense(gradient), dtype)
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1.0 - self.beta_1))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1.0 - self.beta_2))
        step = ops.cast(self.iterations + 1, dtype)
        m_hat = ops.divide(m, 1.0 - ops.power(ops.cast(self.beta_1, dtype), step))
        v_hat = ops.divide(v, 1.0 - ops.power(ops.cast(self.beta_2, dtype), step))
        update = ops.divide(m_hat, ops.add(ops.sqrt(v_hat), self.epsilon))
        if self._use_weight_decay(variable):
            if self.decay_rate:
                update = ops.add(update, ops.multiply(ops.cast(self.decay_rate, dtype), variable))
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            ratio = ops.where(ops.logical_and(w_norm > 0, u_norm > 0),
                              w_norm / ops.maximum(u_norm, 1e-30), 1.0)
            update = ops.multiply(ratio, update)
        self.assign_sub(variable, ops.multiply(lr, update))

    def get_config(self):
        config = super().get_config()
        config.update(weight_decay=self.decay_rate, beta_1=self.beta_1, beta_2=self.beta_2,
                      epsilon=self.epsilon)
        return config


def no_decay_variables(variable_map):
    """The variables of {original name: variable} that get no weight decay (LayerNorm, biases)."""
    return [variable for name, variable in variable_map.items()
            if any(part in name for part in NO_DECAY_NAME_PARTS)]


def create_optimizer(variable_map, learning_rate, num_train_steps, num_warmup_steps,
                     optimizer="adamw", weight_decay=0.01, epsilon=1e-6, clip_norm=1.0,
                     mixed_precision="float32", bias_correction=True, build=True):
    """The pre-training optimizer, built for the variables of `variable_map`.

    Call under the strategy's scope.

    Args:
      variable_map: {original BERT name: variable}, e.g. `pretraining_weight_map(model)`; the
        names decide which variables get weight decay.
      learning_rate: the peak learning rate.
      num_train_steps, num_warmup_steps: the schedule, see `WarmupLinearDecay`.
      optimizer: "adamw" (the paper's) or "lamb".
      clip_norm: global-norm clipping of the (replica-summed) gradient; 0 turns it off.
      bias_correction: Adam's bias correction of the moments (AdamW only; LAMB always has it).
        False is the released BERT update, which learns far less at short budgets.
      mixed_precision: with "mixed_float16" the optimizer is wrapped in Keras'
        `LossScaleOptimizer` (dynamic loss scaling); the training step must multiply the loss by
        `optimizer.scale_loss`.

      build: build it for `variable_map`'s trainable variables, in that order (False: `fit`
        builds it for the model's own order).

    Returns:
      A built Keras optimizer whose `apply(grads)` expects gradients already summed over replicas.
    """
    if optimizer not in OPTIMIZER_NAMES:
        raise ValueError(f"unknown optimizer {optimizer!r}; use one of {OPTIMIZER_NAMES}")
    if mixed_precision not in MIXED_PRECISION_POLICIES:
        raise ValueError(f"unknown mixed_precision {mixed_precision!r}; use one of {MIXED_PRECISION_POLICIES}")
    schedule = WarmupLinearDecay(learning_rate, num_warmup_steps, num_train_steps)
    clip = {"global_clipnorm": clip_norm} if clip_norm else {}
    if optimizer == "adamw":
        inner = AdamWeightDecay(schedule, weight_decay=weight_decay, epsilon=epsilon,
                                bias_correction=bias_correction, **clip)
    else:
        inner = Lamb(schedule, weight_decay=weight_decay, epsilon=epsilon, **clip)
    inner.exclude_from_weight_decay(var_list=no_decay_variables(variable_map))
    variables = [variable for variable in variable_map.values() if variable.trainable]
    result = inner
    if mixed_precision == "mixed_float16":
        result = keras.optimizers.LossScaleOptimizer(inner)
    if build:
        result.build(variables)
    return result


def inner_optimizer(optimizer):
    """The optimizer under a `LossScaleOptimizer`, or `optimizer` itself."""
    return getattr(optimizer, "inner_optimizer", optimizer)


def accumulate_gradients(compute_loss, batch, variables, num_micro_batches=1, jit_compile=False):
    """Gradients of `compute_loss` summed over equal slices of `batch`, one slice at a time.

    Lets a batch too large for the device's memory be processed as `num_micro_batches` smaller
    ones: only one slice's activations exist at a time. `compute_loss` must normalize by the
    whole batch (e.g. divide by the batch's total MLM weight, computed beforehand), so that the
    summed gradient equals the gradient of the whole batch.

    Args:
      compute_loss: fn(micro_batch) -> (loss scalar to differentiate, {name: scalar} to sum).
      batch: dict of tensors [batch, ...], batch divisible by `num_micro_batches`.
      variables: the trainable variables.
      jit_compile: compile each micro-batch's forward and backward pass with XLA (GPUs; TPUs
        compile everything anyway, and on CPUs it is usually slower).
    Returns:
      (list of gradients, {name: summed scalar}).
    """
    import tensorflow as tf

    def grads_of(micro_batch):
        with tf.GradientTape() as tape:
            loss, stats = compute_loss(micro_batch)
        grads = tape.gradient(loss, variables)
        grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                 for g, v in zip(grads, variables)]
        return grads, stats

    if jit_compile:
        grads_of = tf.function(grads_of, jit_compile=True)
    if num_micro_batches == 1:
        return grads_of(batch)

    def split(tensor):
        # [batch, ...] -> [num_micro_batches, batch / num_micro_batches, ...]
        shape = tf.shape(tensor)
        micro = shape[0] // num_micro_batches
        return tf.reshape(tensor, tf.concat([[num_micro_batches, micro], shape[1:]], 0))

    slices = {name: split(tensor) for name, tensor in batch.items()}
    first_grads, first_stats = grads_of({name: tensor[0] for name, tensor in slices.items()})

    def body(index, grads, stats):
        more_grads, more_stats = grads_of({name: tf.gather(tensor, index) for name, tensor in slices.items()})
        return (index + 1, [a + b for a, b in zip(grads, more_grads)],
                {name: stats[name] + more_stats[name] for name in stats})

    _, grads, stats = tf.while_loop(lambda index, *_: index < num_micro_batches, body,
                                    (tf.constant(1), first_grads, first_stats))
    return grads, stats


__all__ = ["WarmupLinearDecay", "AdamWeightDecay", "Lamb", "create_optimizer", "no_decay_variables",
           "accumulate_gradients", "inner_optimizer",
           "NO_DECAY_NAME_PARTS", "OPTIMIZER_NAMES", "MIXED_PRECISION_POLICIES", "DTYPES",
           "DTYPE_FLAG_VALUES", "AUTO_DTYPE", "mixed_precision_policy", "resolve_dtype",
           "native_bfloat16", "cpu_has_bfloat16_units"]
