"""The glue family's heads: a label (or STS-B's score) from the pooled output.

- `ClassificationHead`: dropout + dense on `pooled_output` (one output for STS-B's regression),
  or on the `MeanPooling` of `sequence_output` (`pooling="mean"`).
- `build_classifier`: the encoder and the head as one `keras.Model`; `CLASSIFICATION` and
  `REGRESSION` declare the heads (`bert_keras.finetuning.tasks.family.Head`).

Every head returns float32 logits whatever the compute dtype, so the losses and the metrics
never run in half precision, and names its weights in `weight_map()` ({"<var>": variable},
stored as "task/<head name>/<var>").

Example:

>>> import numpy as np
>>> head = ClassificationHead(num_classes=3)
>>> head(np.zeros((2, 16), "float32")).shape
TensorShape([2, 3])
>>> sorted(head.weight_map())
['bias', 'kernel']
"""

import keras
from keras import ops

from bert_keras.finetuning.tasks.family import Head
from bert_keras.finetuning.tasks.models import (TaskModelError, dense_weights, encoder_and_range,
                                                initializer, task_model)
from bert_keras.model.encoder import encoder_inputs
from bert_keras.model.layers.dropout import Dropout

# What a sentence(-pair) classifier reads: the pooled [CLS] output (the paper) or the mean of the
# last layer over the real tokens.
POOLINGS = ("cls", "mean")
POOLING_DESCRIPTIONS = {"cls": "the pooled [CLS] output", "mean": "the mean of the last layer"}


class MeanPooling(keras.layers.Layer):
    """The mean of `sequence_output` over the real tokens (`input_mask` 1), in float32: what a
    classifier reads with `pooling="mean"` instead of the [CLS] summary `pooled_output`.

    Call arguments:
      sequence_output: float [batch, seq_length, hidden_size].
      input_mask: int [batch, seq_length], 1 for real tokens, 0 for padding.
    Returns:
      float32 [batch, hidden_size]. No weights.

    Example:

    >>> import numpy as np
    >>> sequence = np.arange(12, dtype="float32").reshape(1, 3, 4)
    >>> MeanPooling()(sequence, np.array([[1, 1, 0]])).numpy().tolist()
    [[2.0, 3.0, 4.0, 5.0]]
    """

    def call(self, sequence_output, input_mask):
        mask = ops.expand_dims(ops.cast(input_mask, "float32"), -1)  # [b, s, 1]
        total = ops.sum(ops.cast(sequence_output, "float32") * mask, axis=1)  # [b, h]
        return total / ops.maximum(ops.sum(mask, axis=1), 1.0)

    def compute_output_shape(self, sequence_output_shape, input_mask_shape=None):
        return (sequence_output_shape[0], sequence_output_shape[2])


class ClassificationHead(keras.layers.Layer):
    """Sentence(-pair) classification or regression on `pooled_output` (the [CLS] summary).

    As in the original `run_classifier.py`: dropout on the pooled output, then one dense layer.
    Use `num_classes=1` for regression (STS-B); the output keeps its last axis of 1.

    Call arguments:
      pooled_output: float [batch, hidden_size].
    Returns:
      logits: float32 [batch, num_classes].
    Weights (`weight_map`): "kernel" [hidden_size, num_classes], "bias" [num_classes].

    Example:

    >>> import numpy as np
    >>> ClassificationHead(num_classes=2, dropout_rate=0.1)(np.ones((4, 8), "float32")).shape
    TensorShape([4, 2])
    """

    def __init__(self, num_classes, dropout_rate=0.1, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy)
        self.dense = keras.layers.Dense(num_classes,
                                        kernel_initializer=initializer(initializer_range),
                                        name="dense", dtype=self.dtype_policy)

    def build(self, pooled_output_shape):
        self.dense.build(pooled_output_shape)
        self.built = True

    def call(self, pooled_output, training=None):
        logits = self.dense(self.dropout(pooled_output, training=training))  # [..., classes]
        return ops.cast(logits, "float32")

    def compute_output_shape(self, pooled_output_shape):
        return (pooled_output_shape[0], self.num_classes)

    def weight_map(self):
        return dense_weights("", self.dense)

    def get_config(self):
        config = super().get_config()
        config.update(num_classes=self.num_classes, dropout_rate=self.dropout_rate,
                      initializer_range=self.initializer_range)
        return config


def build_classifier(encoder_or_config, num_labels=2, regression=False, dropout_rate=0.1,
                     dtype=None, pooling="cls"):
    """Sentence(-pair) classification (or regression) on the pooled output.

    Outputs: `logits` float32 [batch, num_labels] ([batch, 1] scores when `regression=True`).
    `pooling`: "cls" reads the pooled [CLS] output, as the paper; "mean" the mean of
    `sequence_output` over the real tokens (`MeanPooling`; the pooler is then
    unused). `task_config.json` records it as "pooling".

    Example:

    >>> import bert_keras
    >>> config = bert_keras.BertConfig.from_preset("tiny", vocab_size=50)
    >>> build_classifier(config, regression=True).output.shape
    (None, 1)
    """
    encoder, initializer_range = encoder_and_range(encoder_or_config, dtype)
    if regression:
        num_labels = 1
    elif num_labels < 2:
        raise TaskModelError(f"a classifier needs at least 2 labels, got {num_labels}; use "
                             "regression=True for a single score")
    if pooling not in POOLINGS:
        raise TaskModelError(f"unknown pooling {pooling!r}; known: {', '.join(POOLINGS)}")
    declared = REGRESSION if regression else CLASSIFICATION
    inputs = encoder_inputs()
    outputs = encoder(inputs)
    if pooling == "mean":
        encoder.get_layer("pooler").trainable = False  # unused: no gradient reaches it
        pooled_output = MeanPooling(name="mean_pooling")(outputs["sequence_output"],
                                                         inputs["input_mask"])  # [b, hidden]
    else:
        pooled_output = outputs["pooled_output"]  # [b, hidden]
    head = ClassificationHead(num_labels, dropout_rate=dropout_rate,
                              initializer_range=initializer_range, name=declared.layer_name,
                              dtype=dtype)
    return task_model(inputs, head(pooled_output), encoder, head, declared, {"pooling": pooling})


def _rebuild(encoder_or_config, task_config, dtype):
    head_config = dict(task_config.get("head_config") or {})
    return build_classifier(encoder_or_config, head_config.get("num_classes", 2),
                            regression=task_config["head"] == "regression",
                            dropout_rate=head_config.get("dropout_rate", 0.1), dtype=dtype,
                            pooling=task_config.get("pooling", "cls"))


CLASSIFICATION = Head("classification", layer_name="classifier", outputs=("logits",),
                      rebuild=_rebuild)
REGRESSION = Head("regression", layer_name="regressor", outputs=("logits",), rebuild=_rebuild)


__all__ = ["POOLINGS", "POOLING_DESCRIPTIONS", "MeanPooling", "ClassificationHead",
           "build_classifier", "CLASSIFICATION", "REGRESSION"]
