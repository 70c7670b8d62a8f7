"""The pre-training step: model, optimizer and checkpoint under a strategy, and the step functions.

`make_train_function` returns a `tf.function` that runs up to N training steps per call: each
replica computes the gradients of its share of the global batch (optionally in micro-batches),
the gradients are summed over replicas once, clipped to a global norm and applied by the
optimizer (see `bert_keras.optimization`). The loss is normalized by the global batch, so a step
is the same whatever the number of replicas or micro-batches.

Example:

>>> state = build_training_state(config, strategy, options)  # doctest: +SKIP
>>> train_steps = make_train_function(state)  # doctest: +SKIP
>>> results = train_steps(iter(distributed_dataset), tf.constant(100))  # doctest: +SKIP
"""

import dataclasses

import keras
import tensorflow as tf

from bert_keras import optimization
from bert_keras.model import checkpoint_names
from bert_keras.model.pretraining_model import build_pretraining_model, pretraining_weight_map
from bert_keras.pretraining.losses import SUM_NAMES, pretraining_loss, pretraining_sums


def _dtype_policy(mixed_precision):
    """The Keras dtype policy of a `--mixed_precision` value (None: the global default)."""
    return None if mixed_precision == "float32" else mixed_precision


@dataclasses.dataclass
class TrainingState:
    """What a training step and a checkpoint need: built under the strategy's scope."""

    strategy: object
    model: keras.Model
    optimizer: object
    step: tf.Variable
    variable_map: dict
    checkpoint: tf.train.Checkpoint


def build_training_state(config, strategy, options, with_optimizer=True):
    """Builds the pre-training model, the optimizer and the step counter under `strategy.scope()`."""
    with strategy.scope():
        model = build_pretraining_model(config, causal=options.left_to_right,
                                        next_sentence=options.uses_next_sentence,
                                        dtype=_dtype_policy(options.mixed_precision),
                                        attention_implementation=options.attention_implementation)
        variable_map = pretraining_weight_map(model)
        mapped = {id(v) for v in variable_map.values()}
        for variable in model.trainable_variables:
            if id(variable) not in mapped:  # every trained weight must reach the model directory
                raise ValueError(f"variable {variable.path} has no original checkpoint name")
        optimizer = None
        if with_optimizer:
            optimizer = optimization.create_optimizer(
                variable_map, options.learning_rate, options.num_train_steps, options.num_warmup_steps,
                optimizer=options.optimizer, weight_decay=options.weight_decay,
                epsilon=options.adam_epsilon, clip_norm=options.clip_norm,
                mixed_precision=options.mixed_precision,
                bias_correction=options.adam_bias_correction)
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    # Dropout's random state, so that a resumed run draws the masks an uninterrupted one would.
    seeds = [v for v in model.non_trainable_variables if "seed_generator" in v.path]
    parts = dict(weights=dict(variable_map), step=step, dropout_seeds=seeds)
    if optimizer is not None:
        parts["optimizer"] = optimizer
    checkpoint = tf.train.Checkpoint(**parts)
    return TrainingState(strategy, model, optimizer, step, variable_map, checkpoint)


def assign_initial_weights(variable_map, arrays, source):
    """Loads {original name: array} into the variables of `variable_map` ({original name:
    variable}); absent heads stay freshly initialized."""
    heads = [name for name in variable_map if name.startswith("cls/")]
    has_heads = any(name in arrays for name in heads)
    allow_missing = () if has_heads else heads
    if has_heads and "cls/seq_relationship/output_weights" not in arrays:
        allow_missing = [name for name in heads if name.startswith("cls/seq_relationship/")]
    checkpoint_names.assign_weights(variable_map, arrays, source=source,
                                    allow_missing=allow_missing)


def _model_inputs(batch):
    return {"input_word_ids": batch["input_ids"], "input_mask": batch["input_mask"],
            "input_type_ids": batch["segment_ids"], "masked_lm_positions": batch["masked_lm_positions"]}


def make_train_function(state, gradient_accumulation_steps=1, jit_compile=False):
    """`train_steps(iterator, num_steps)`: runs up to `num_steps` steps in one `tf.function` call.

    Stops early at the first step whose loss is not finite. Returns a dict of tensors: the
    summed `SUM_NAMES` over the steps run, `tokens` and `examples`, `steps` (steps run),
    `first_bad_step` (the step number, counted from 1, whose loss was not finite, or -1),
    `loss` (the last step's) and `learning_rate`.
    """
    strategy, model, optimizer, step = state.strategy, state.model, state.optimizer, state.step
    variables = model.trainable_variables
    loss_scaling = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    with_next_sentence = "next_sentence_logits" in model.output

    def replica_step(batch):
        context = tf.distribute.get_replica_context()
        # The loss is normalized by the global batch, so per-replica gradients just add up.
        local = tf.stack([tf.reduce_sum(batch["masked_lm_weights"]),
                          tf.cast(tf.shape(batch["input_ids"])[0], tf.float32)])
        global_counts = context.all_reduce(tf.distribute.ReduceOp.SUM, local)
        mlm_denominator = global_counts[0]
        nsp_denominator = global_counts[1] if with_next_sentence else tf.constant(0.0)

        def compute_loss(micro_batch):
            outputs = model(_model_inputs(micro_batch), training=True)
            sums = pretraining_sums(outputs, micro_batch)
            loss = pretraining_loss(sums, mlm_denominator, nsp_denominator)
            if loss_scaling:
                loss = optimizer.scale_loss(loss)
            return loss, sums

        grads, sums = optimization.accumulate_gradients(
            compute_loss, batch, variables, gradient_accumulation_steps, jit_compile=jit_compile)
        grads = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        optimizer.apply(grads, variables)
        sums["tokens"] = tf.cast(tf.reduce_sum(batch["input_mask"]), tf.float32)
        sums["examples"] = tf.cast(tf.shape(batch["input_ids"])[0], tf.float32)
        return sums

    names = SUM_NAMES + ("tokens", "examples")

    @tf.function
    def train_steps(iterator, num_steps):
        def body(index, totals, first_bad, last_loss):
            per_replica = strategy.run(replica_step, args=(next(iterator),))
            sums = {name: strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica[name], axis=None)
                    for name in names}
            step.assign_add(1)
            loss = pretraining_loss(sums, sums["masked_lm_weight_sum"], sums["next_sentence_count"])
            bad = tf.logical_and(first_bad < 0, tf.logical_not(tf.math.is_finite(loss)))
            first_bad = tf.where(bad, step.read_value(), first_bad)
            totals = {name: totals[name] + sums[name] for name in names}
            return index + 1, totals, first_bad, loss

        totals = {name: tf.constant(0.0) for name in names}
        steps, totals, first_bad, loss = tf.while_loop(
            lambda index, totals, first_bad, loss: tf.logical_and(index < num_steps, first_bad < 0),
            body, (tf.constant(0), totals, tf.constant(-1, tf.int64), tf.constant(0.0)))
        result = dict(totals)
        result.update(steps=steps, first_bad_step=first_bad, loss=loss,
                      learning_rate=tf.cast(optimizer.learning_rate, tf.float32))
        return result

    return train_steps


def make_eval_function(state):
    """`eval_step(batch)`: the summed `SUM_NAMES` and `examples` of one distributed batch, dropout off."""
    strategy, model = state.strategy, state.model

    def replica_step(batch):
        outputs = model(_model_inputs(batch), training=False)
        sums = pretraining_sums(outputs, batch)
        sums["examples"] = tf.cast(tf.shape(batch["input_ids"])[0], tf.float32)
        return sums

    @tf.function
    def eval_step(batch):
        per_replica = strategy.run(replica_step, args=(batch,))
        return {name: strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)
                for name, value in per_replica.items()}

    return eval_step


__all__ = ["TrainingState", "build_training_state", "assign_initial_weights", "make_train_function",
           "make_eval_function"]
