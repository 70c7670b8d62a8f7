"""Pre-training with `keras.Model.fit`, for Keras backends other than TensorFlow (JAX: the
backend of today's Colab TPU).

`bert_keras.pretraining.run.train` comes here when Keras runs on another backend than
TensorFlow (`KERAS_BACKEND=jax`): the same options (`PretrainingOptions`), the same records read
on the host by the same `tf.data` pipeline (`inputs.make_dataset_fn`), the same model, loss
(MLM loss over the batch's prediction weight + NSP loss over the batch size), optimizer,
schedule and clipping (`optimization.create_optimizer`), and the same model directory at the
end. What differs is only the loop: `fit` on the backend's compiled step instead of the
`tf.function` + `tf.distribute` step of `pretraining.step`.

Not here yet: checkpoints and resuming (a run starts from `init_model_dir` or from scratch and
writes the model directory when it ends), gradient accumulation, float16 loss scaling, and
data parallelism over several devices (`keras.distribution`).

`tests/pretraining/test_backends.py` checks that a run on JAX takes the TensorFlow trainer's
steps (dropout off, the same records and initial weights).
"""

import os
import types

import keras
from absl import logging
from keras import ops

from bert_keras import optimization
from bert_keras.common.files import write_json_atomic
from bert_keras.model.pretraining_model import build_pretraining_model, pretraining_weight_map
from bert_keras.modeldir import model_dir as model_dir_lib
from bert_keras.pretraining import losses


def pretraining_loss(outputs, batch):
    """BERT's objective on one batch, with the sums of `pretraining.losses` (the TensorFlow
    trainer's code): the masked-LM loss over the batch's prediction weight plus the
    next-sentence loss over the batch size. Returns (loss, {"masked_lm_loss",
    "masked_lm_accuracy"[, "next_sentence_loss", "next_sentence_accuracy"]}).

    >>> import numpy as np
    >>> logits = np.log(np.array([[[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]]], "float32"))
    >>> loss, parts = pretraining_loss({"mlm_logits": logits}, {
    ...     "masked_lm_ids": np.array([[0, 1]]), "masked_lm_weights": np.ones([1, 2], "float32")})
    >>> round(float(loss), 3), float(parts["masked_lm_accuracy"])  # (-log 0.7 - log 0.1) / 2
    (1.33, 0.5)
    """
    sums = losses.pretraining_sums(outputs, batch)
    weight, count = sums["masked_lm_weight_sum"], sums["next_sentence_count"]
    loss = losses.pretraining_loss(sums, weight, count)
    parts = {"masked_lm_loss": losses.pretraining_loss(sums, weight, 0.0),
             "masked_lm_accuracy": sums["masked_lm_correct"] / ops.maximum(weight, 1e-12)}
    if "next_sentence_logits" in outputs:
        parts["next_sentence_loss"] = sums["next_sentence_loss_sum"] / count
        parts["next_sentence_accuracy"] = sums["next_sentence_correct"] / count
    return loss, parts


class PretrainingTrainer(keras.Model):
    """The pre-training model (`build_pretraining_model`) with BERT's loss, for `fit` on the
    batches of `inputs.make_dataset_fn` (dicts of `input_ids`, `input_mask`, `segment_ids`,
    `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`)."""

    def __init__(self, pretraining_model, **kwargs):
        super().__init__(**kwargs)
        self.pretraining_model = pretraining_model
        self.trackers = {name: keras.metrics.Mean(name=name) for name in (
            "masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss",
            "next_sentence_accuracy")}

    def call(self, batch, training=False):
        return self.pretraining_model(
            {"input_word_ids": batch["input_ids"], "input_mask": batch["input_mask"],
             "input_type_ids": batch["segment_ids"],
             "masked_lm_positions": batch["masked_lm_positions"]}, training=training)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        loss, parts = pretraining_loss(y_pred, x)
        for name, value in parts.items():
            self.trackers[name].update_state(value)
        return loss

    @property
    def metrics(self):
        return [*super().metrics, *self.trackers.values()]


def train(options):
    """`run.train` on a backend other than TensorFlow: trains from `init_model_dir` (or from
    scratch) for `num_train_steps` and writes the model directory; returns the last metrics."""
    from bert_keras.pretraining import inputs as pretraining_input
    from bert_keras.pretraining import run as tf_run
    from bert_keras.pretraining.options import PretrainingError
    from bert_keras.pretraining.output_dir import resolve_model_setup
    from bert_keras.pretraining.step import assign_initial_weights

    options.validate()
    backend = keras.backend.backend()
    unsupported = {"gradient_accumulation_steps": options.gradient_accumulation_steps != 1,
                   "mode": options.mode != "train"}
    for name, used in unsupported.items():
        if used:
            raise PretrainingError(f"--{name}={getattr(options, name)}: not on the Keras "
                                   f"{backend} backend yet (pre-training there trains, without "
                                   f"gradient accumulation); TensorFlow's trainer has it")
    if options.start_over:
        tf_run.remove_earlier_run(options.output_dir)
    earlier = [name for name in (model_dir_lib.WEIGHTS_NAME, "checkpoints")
               if os.path.exists(os.path.join(options.output_dir, name))]
    if earlier:
        raise PretrainingError(
            f"{options.output_dir} holds an earlier run ({', '.join(earlier)}); on the Keras "
            f"{backend} backend a run cannot resume it (TensorFlow's trainer can): pass "
            f"--start_over to replace it, or another --output_dir")
    options.mixed_precision = optimization.mixed_precision_policy(
        "float32" if options.mixed_precision == "auto" else options.mixed_precision)
    if options.mixed_precision == "mixed_float16":
        raise PretrainingError(f"--mixed_precision=float16 needs loss scaling, which pre-training "
                               f"on the Keras {backend} backend does not have; use bfloat16")
    setup = resolve_model_setup(options)
    files, kind = tf_run._prepare_records(options)  # pylint: disable=protected-access
    keras.utils.set_random_seed(options.seed)
    model = build_pretraining_model(
        setup.config, causal=options.left_to_right, next_sentence=options.uses_next_sentence,
        dtype=None if options.mixed_precision == "float32" else options.mixed_precision)
    holder = types.SimpleNamespace(variable_map=pretraining_weight_map(model))
    if setup.init_weights is not None:
        assign_initial_weights(holder, setup.init_weights,
                               f"{options.init_model_dir}/{model_dir_lib.WEIGHTS_NAME}")
    optimizer = optimization.create_optimizer(
        holder.variable_map, options.learning_rate, options.num_train_steps,
        options.num_warmup_steps, optimizer=options.optimizer, weight_decay=options.weight_decay,
        epsilon=options.adam_epsilon, clip_norm=options.clip_norm,
        mixed_precision=options.mixed_precision, bias_correction=options.adam_bias_correction,
        build=False)  # fit builds it in the trainer's order of variables
    optimizer.summed_gradients = False  # fit's gradients
    trainer = PretrainingTrainer(model)
    trainer.compile(optimizer=optimizer)
    dataset = pretraining_input.make_dataset_fn(
        files, kind, options.max_seq_length, options.max_predictions_per_seq,
        options.train_batch_size, targets=tf_run._target_options(options, setup.vocab),
        shuffle=True, repeat=True, seed=options.seed,
        shuffle_buffer_size=options.shuffle_buffer_size,
        skip_corrupt_records=options.skip_corrupt_records)(None)
    logging.info("pre-training on the Keras %s backend with fit: %d steps of %d",
                 backend, options.num_train_steps, options.train_batch_size)
    # One iterator of the records, as the TensorFlow trainer has: given the dataset itself, Keras
    # on JAX makes a first iterator to build the model, and the shuffle of the next one moves on.
    stream = dataset.as_numpy_iterator()
    history = trainer.fit(((batch,) for batch in stream), epochs=1, shuffle=False,
                          steps_per_epoch=options.num_train_steps, verbose=options.verbose)
    tf_run._write_model_files(options, setup, holder)  # pylint: disable=protected-access
    write_json_atomic(f"{options.output_dir}/{model_dir_lib.PRETRAINING_OPTIONS_NAME}",
                      options.to_json_dict())
    metrics = {name: float(values[-1]) for name, values in history.history.items()}
    metrics["step"] = options.num_train_steps
    return metrics


__all__ = ["PretrainingTrainer", "pretraining_loss", "train"]
