"""The swag family's head: one score per choice from the pooled output of each (context,
choice) pair, and the model that encodes every pair of a row.

Example:

>>> import numpy as np
>>> MultipleChoiceHead()(np.ones((2, 4, 8), "float32")).shape
TensorShape([2, 4])
"""

import keras
from keras import ops

from bert_keras.finetuning.tasks.family import Head
from bert_keras.finetuning.tasks.models import (dense_weights, encoder_and_range, initializer,
                                                task_model)
from bert_keras.model.encoder import INPUT_NAMES
from bert_keras.model.layers.dropout import Dropout


class MultipleChoiceHead(keras.layers.Layer):
    """One score per choice from the `pooled_output` of each (context, choice) pair.

    As in the paper's SWAG setup: a vector whose dot product with each choice's [CLS]
    representation is that choice's score; the softmax over the choices is left to the loss.

    Call arguments:
      pooled_output: float [batch, num_choices, hidden_size].
    Returns:
      logits: float32 [batch, num_choices].
    Weights: "kernel" [hidden_size, 1], "bias" [1].

    Example:

    >>> import numpy as np
    >>> MultipleChoiceHead()(np.ones((2, 4, 8), "float32")).shape
    TensorShape([2, 4])
    """

    def __init__(self, dropout_rate=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy)
        self.dense = keras.layers.Dense(1, kernel_initializer=initializer(initializer_range),
                                        name="dense", dtype=self.dtype_policy)

    def build(self, pooled_output_shape):
        self.dense.build(pooled_output_shape)
        self.built = True

    def call(self, pooled_output, training=None):
        scores = self.dense(self.dropout(pooled_output, training=training))  # [b, choices, 1]
        return ops.cast(ops.squeeze(scores, axis=-1), "float32")

    def compute_output_shape(self, pooled_output_shape):
        return tuple(pooled_output_shape[:2])

    def weight_map(self):
        return dense_weights("", self.dense)

    def get_config(self):
        config = super().get_config()
        config.update(dropout_rate=self.dropout_rate, initializer_range=self.initializer_range)
        return config


class _MergeChoices(keras.layers.Layer):
    """int [batch, num_choices, seq_length] -> [batch * num_choices, seq_length]."""

    def call(self, inputs):
        return ops.reshape(inputs, (-1, ops.shape(inputs)[-1]))

    def compute_output_shape(self, input_shape):
        batch = None if input_shape[0] is None or input_shape[1] is None else \
            input_shape[0] * input_shape[1]
        return (batch, input_shape[-1])


class _SplitChoices(keras.layers.Layer):
    """float [batch * num_choices, hidden] -> [batch, num_choices, hidden]."""

    def __init__(self, num_choices, **kwargs):
        super().__init__(**kwargs)
        self.num_choices = num_choices

    def call(self, inputs):
        return ops.reshape(inputs, (-1, self.num_choices, ops.shape(inputs)[-1]))

    def compute_output_shape(self, input_shape):
        return (None, self.num_choices, input_shape[-1])

    def get_config(self):
        config = super().get_config()
        config.update(num_choices=self.num_choices)
        return config


def build_multiple_choice_model(encoder_or_config, num_choices=4, dropout_rate=0.1, dtype=None):
    """Multiple choice (SWAG): each (context, choice) pair is encoded, its [CLS] scored.

    Inputs: the encoder's three names, each int32 [batch, num_choices, seq_length].
    Outputs: `logits` float32 [batch, num_choices] (softmax over the choices in the loss).
    """
    encoder, initializer_range = encoder_and_range(encoder_or_config, dtype)
    inputs = {name: keras.Input(shape=(num_choices, None), dtype="int32", name=name)
              for name in INPUT_NAMES}
    flat = {name: _MergeChoices(name=f"merge_choices_{name}")(tensor)
            for name, tensor in inputs.items()}  # [b * choices, s]
    pooled_output = encoder(flat)["pooled_output"]  # [b * choices, hidden]
    pooled_output = _SplitChoices(num_choices, name="split_choices")(pooled_output)
    head = MultipleChoiceHead(dropout_rate=dropout_rate, initializer_range=initializer_range,
                              name=MULTIPLE_CHOICE.layer_name, dtype=dtype)
    return task_model(inputs, head(pooled_output), encoder, head, MULTIPLE_CHOICE,
                   {"num_choices": num_choices})


def _rebuild(encoder_or_config, task_config, dtype):
    head_config = dict(task_config.get("head_config") or {})
    return build_multiple_choice_model(encoder_or_config, task_config.get("num_choices", 4),
                                       dropout_rate=head_config.get("dropout_rate", 0.1),
                                       dtype=dtype)


MULTIPLE_CHOICE = Head("multiple_choice", layer_name="multiple_choice", outputs=("logits",),
                       rebuild=_rebuild)


__all__ = ["MultipleChoiceHead", "build_multiple_choice_model", "MULTIPLE_CHOICE"]
