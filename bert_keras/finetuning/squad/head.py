"""The squad family's head: start and end logits of an answer span over the sequence output.

Example:

>>> import numpy as np
>>> outputs = SpanHead()(np.ones((2, 5, 8), "float32"))
>>> outputs["start_logits"].shape, SPAN.outputs
(TensorShape([2, 5]), ('start_logits', 'end_logits'))
"""

import keras
from keras import ops

from bert_keras.finetuning.tasks.family import Head
from bert_keras.finetuning.tasks.models import (dense_weights, encoder_and_range, initializer,
                                                task_model)
from bert_keras.model.encoder import encoder_inputs


class SpanHead(keras.layers.Layer):
    """Start and end logits of an answer span, one dense layer of 2 outputs per token.

    As in the original `run_squad.py` (no dropout in the head). The softmax over positions is
    left to the loss and to post-processing.

    Call arguments:
      sequence_output: float [batch, seq_length, hidden_size].
    Returns:
      dict of float32 [batch, seq_length]: "start_logits", "end_logits".
    Weights: "kernel" [hidden_size, 2] (column 0 start, column 1 end), "bias" [2].

    Example:

    >>> import numpy as np
    >>> outputs = SpanHead()(np.ones((2, 5, 8), "float32"))
    >>> outputs["start_logits"].shape, outputs["end_logits"].shape
    (TensorShape([2, 5]), TensorShape([2, 5]))
    """

    def __init__(self, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.initializer_range = initializer_range
        self.dense = keras.layers.Dense(2, kernel_initializer=initializer(initializer_range),
                                        name="dense", dtype=self.dtype_policy)

    def build(self, sequence_output_shape):
        self.dense.build(sequence_output_shape)
        self.built = True

    def call(self, sequence_output):
        logits = ops.cast(self.dense(sequence_output), "float32")  # [b, s, 2]
        return {"start_logits": logits[..., 0], "end_logits": logits[..., 1]}

    def compute_output_shape(self, sequence_output_shape):
        shape = tuple(sequence_output_shape[:2])
        return {"start_logits": shape, "end_logits": shape}

    def weight_map(self):
        return dense_weights("", self.dense)

    def get_config(self):
        config = super().get_config()
        config.update(initializer_range=self.initializer_range)
        return config


def build_span_model(encoder_or_config, dtype=None):
    """Extractive question answering (SQuAD): start and end logits over the sequence.

    Outputs: dict `start_logits`, `end_logits`, float32 [batch, seq_length].
    """
    encoder, initializer_range = encoder_and_range(encoder_or_config, dtype)
    inputs = encoder_inputs()
    sequence_output = encoder(inputs)["sequence_output"]  # [b, s, hidden]
    head = SpanHead(initializer_range=initializer_range, name=SPAN.layer_name, dtype=dtype)
    return task_model(inputs, head(sequence_output), encoder, head, SPAN)


SPAN = Head("span", layer_name="span", outputs=("start_logits", "end_logits"),
            rebuild=lambda encoder_or_config, task_config, dtype: build_span_model(
                encoder_or_config, dtype=dtype))


__all__ = ["SpanHead", "build_span_model", "SPAN"]
