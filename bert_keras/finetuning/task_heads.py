"""Fine-tuning heads: the small layers the paper puts on top of BERT for each task family.

Every head returns float32 logits whatever the compute dtype, so the losses and the metrics
never run in half precision. Each head names its weights in `weight_map()`
({"<var>": variable}); `bert_keras.finetuning.task_models` stores them as "task/<head name>/<var>"
next to the encoder's original BERT names.

- `ClassificationHead`: dropout + dense on `pooled_output` (GLUE; one output for STS-B's
  regression), or on the `MeanPooling` of `sequence_output` (`pooling="mean"`).
- `SpanHead`: start and end logits from `sequence_output` (SQuAD).
- `MultipleChoiceHead`: one score per choice from its `pooled_output` (SWAG).
- `TokenTaggingHead`: dropout + dense on every position of `sequence_output` (CoNLL-2003 NER).
- `FeatureBasedBiLSTMHead`: the paper's feature-based NER: the concatenation of the last four
  hidden layers of a frozen BERT, a two-layer BiLSTM, then a dense classifier.

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

from bert_keras.model.layers.dropout import Dropout


def _initializer(initializer_range):
    return keras.initializers.TruncatedNormal(stddev=initializer_range)


def _dense_weights(prefix, layer):
    return {f"{prefix}kernel": layer.kernel, f"{prefix}bias": layer.bias}


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
        self.dense = keras.layers.Dense(num_classes, kernel_initializer=_initializer(initializer_range),
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
        return _dense_weights("", self.dense)

    def get_config(self):
        config = super().get_config()
        config.update(num_classes=self.num_classes, dropout_rate=self.dropout_rate,
                      initializer_range=self.initializer_range)
        return config


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
        self.dense = keras.layers.Dense(2, kernel_initializer=_initializer(initializer_range),
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
        return _dense_weights("", self.dense)

    def get_config(self):
        config = super().get_config()
        config.update(initializer_range=self.initializer_range)
        return config


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
        self.dense = keras.layers.Dense(1, kernel_initializer=_initializer(initializer_range),
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
        return _dense_weights("", self.dense)

    def get_config(self):
        config = super().get_config()
        config.update(dropout_rate=self.dropout_rate, initializer_range=self.initializer_range)
        return config


class TokenTaggingHead(ClassificationHead):
    """A label per token: dropout + dense on every position of `sequence_output`.

    For NER the paper predicts each word's tag from its first WordPiece only; which positions
    count is decided by the labels (the others carry the ignore id) and by post-processing.

    Call arguments:
      sequence_output: float [batch, seq_length, hidden_size].
    Returns:
      logits: float32 [batch, seq_length, num_classes].
    Weights: "kernel" [hidden_size, num_classes], "bias" [num_classes].

    Example:

    >>> import numpy as np
    >>> TokenTaggingHead(num_classes=9)(np.ones((2, 5, 8), "float32")).shape
    TensorShape([2, 5, 9])
    """

    # The classification head's layers: its dense layer acts on the last axis, here every
    # position's hidden state.

    def compute_output_shape(self, sequence_output_shape):
        return tuple(sequence_output_shape[:2]) + (self.num_classes,)


class FeatureBasedBiLSTMHead(keras.layers.Layer):
    """The paper's feature-based NER head (Section 5.3): BiLSTM over concatenated BERT layers.

    The given hidden layers (the paper: the last four of a frozen BERT) are concatenated on the
    feature axis, run through `num_lstm_layers` bidirectional LSTMs of `lstm_units` units per
    direction (the paper: two layers, 768 units) with padding masked out, then classified per
    token by a dense layer.

    Call arguments:
      hidden_layers: list of float [batch, seq_length, hidden_size] (e.g. `encoder_outputs[-4:]`).
      input_mask: int [batch, seq_length], 1 for real tokens.
    Returns:
      logits: float32 [batch, seq_length, num_classes].
    Weights: "lstm_{i}/{forward,backward}/{kernel,recurrent_kernel,bias}" (Keras LSTM layouts,
    gates i, f, c, o), "output/kernel" [2 * lstm_units, num_classes], "output/bias".

    Example:

    >>> import numpy as np
    >>> head = FeatureBasedBiLSTMHead(num_classes=5, lstm_units=4)
    >>> layers = [np.ones((2, 6, 8), "float32")] * 4
    >>> head(layers, np.ones((2, 6), "int32")).shape
    TensorShape([2, 6, 5])
    """

    def __init__(self, num_classes, lstm_units=768, num_lstm_layers=2, dropout_rate=0.1,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.lstm_units = lstm_units
        self.num_lstm_layers = num_lstm_layers
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        # LSTMs keep float32 state: recurrent sums over long sequences drift in half precision.
        self.lstms = [
            keras.layers.Bidirectional(
                keras.layers.LSTM(lstm_units, return_sequences=True, name=f"lstm_{index}"),
                name=f"bilstm_{index}", dtype="float32")
            for index in range(num_lstm_layers)]
        self.dropout = Dropout(dropout_rate, dtype="float32")
        self.output_dense = keras.layers.Dense(
            num_classes, kernel_initializer=_initializer(initializer_range), name="output",
            dtype="float32")

    def build(self, hidden_layers_shape, input_mask_shape=None):
        features = sum(shape[-1] for shape in hidden_layers_shape)
        shape = tuple(hidden_layers_shape[0][:2]) + (features,)
        for lstm in self.lstms:
            lstm.build(shape)
            shape = shape[:2] + (2 * self.lstm_units,)
        self.output_dense.build(shape)
        self.built = True

    def call(self, hidden_layers, input_mask, training=None):
        features = ops.concatenate([ops.cast(layer, "float32") for layer in hidden_layers],
                                   axis=-1)  # [b, s, layers * hidden]
        mask = ops.cast(input_mask, "bool")
        for lstm in self.lstms:
            features = lstm(self.dropout(features, training=training), mask=mask,
                            training=training)  # [b, s, 2 * units]
        logits = self.output_dense(self.dropout(features, training=training))
        return ops.cast(logits, "float32")

    def compute_output_shape(self, hidden_layers_shape, input_mask_shape=None):
        return tuple(hidden_layers_shape[0][:2]) + (self.num_classes,)

    def weight_map(self):
        names = {}
        for index, lstm in enumerate(self.lstms):
            for direction, layer in (("forward", lstm.forward_layer), ("backward", lstm.backward_layer)):
                cell = layer.cell
                prefix = f"lstm_{index}/{direction}/"
                names[prefix + "kernel"] = cell.kernel
                names[prefix + "recurrent_kernel"] = cell.recurrent_kernel
                names[prefix + "bias"] = cell.bias
        names.update(_dense_weights("output/", self.output_dense))
        return names

    def get_config(self):
        config = super().get_config()
        config.update(num_classes=self.num_classes, lstm_units=self.lstm_units,
                      num_lstm_layers=self.num_lstm_layers, dropout_rate=self.dropout_rate,
                      initializer_range=self.initializer_range)
        return config


__all__ = ["ClassificationHead", "MeanPooling", "SpanHead", "MultipleChoiceHead", "TokenTaggingHead",
           "FeatureBasedBiLSTMHead"]
