"""The conll family's heads: a tag for every position of the sequence output, or the paper's
feature-based BiLSTM over the last hidden layers of a frozen BERT.

Example:

>>> import numpy as np
>>> TokenTaggingHead(num_classes=9)(np.ones((2, 5, 8), "float32")).shape
TensorShape([2, 5, 9])
"""

import keras
from keras import ops

from bert_keras.finetuning.glue.head import ClassificationHead
from bert_keras.finetuning.tasks.family import Head
from bert_keras.finetuning.tasks.models import (TaskModelError, dense_weights, encoder_and_range,
                                                initializer, task_model)
from bert_keras.model.encoder import encoder_inputs
from bert_keras.model.layers.dropout import Dropout


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
            num_classes, kernel_initializer=initializer(initializer_range), name="output",
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
            for direction, layer in (("forward", lstm.forward_layer),
                                     ("backward", lstm.backward_layer)):
                cell = layer.cell
                prefix = f"lstm_{index}/{direction}/"
                names[prefix + "kernel"] = cell.kernel
                names[prefix + "recurrent_kernel"] = cell.recurrent_kernel
                names[prefix + "bias"] = cell.bias
        names.update(dense_weights("output/", self.output_dense))
        return names

    def get_config(self):
        config = super().get_config()
        config.update(num_classes=self.num_classes, lstm_units=self.lstm_units,
                      num_lstm_layers=self.num_lstm_layers, dropout_rate=self.dropout_rate,
                      initializer_range=self.initializer_range)
        return config


def build_token_tagger(encoder_or_config, num_labels, dropout_rate=0.1, feature_based=False,
                       feature_layers=4, lstm_units=768, num_lstm_layers=2, dtype=None):
    """Token classification (CoNLL-2003 NER): logits for every position.

    With `feature_based=True` (the paper's Section 5.3), the encoder is frozen and run without
    dropout; the concatenation of its last `feature_layers` hidden layers goes through a
    `num_lstm_layers`-layer BiLSTM of `lstm_units` units before the classifier.

    Outputs: `logits` float32 [batch, seq_length, num_labels].
    """
    encoder, initializer_range = encoder_and_range(encoder_or_config, dtype)
    inputs = encoder_inputs()
    if not feature_based:
        sequence_output = encoder(inputs)["sequence_output"]  # [b, s, hidden]
        head = TokenTaggingHead(num_labels, dropout_rate=dropout_rate,
                                initializer_range=initializer_range,
                                name=TOKEN_TAGGING.layer_name, dtype=dtype)
        return task_model(inputs, head(sequence_output), encoder, head, TOKEN_TAGGING)

    encoder.trainable = False
    layers = encoder(inputs, training=False)["encoder_outputs"]
    if feature_layers > len(layers):
        raise TaskModelError(f"feature_layers={feature_layers} but the encoder has only "
                             f"{len(layers)} layers")
    head = FeatureBasedBiLSTMHead(num_labels, lstm_units=lstm_units,
                                  num_lstm_layers=num_lstm_layers, dropout_rate=dropout_rate,
                                  initializer_range=initializer_range,
                                  name=FEATURE_BASED_BILSTM.layer_name, dtype=dtype)
    logits = head(layers[-feature_layers:], inputs["input_mask"])
    return task_model(inputs, logits, encoder, head, FEATURE_BASED_BILSTM,
                   {"feature_layers": feature_layers})


def _rebuild_tagger(encoder_or_config, task_config, dtype):
    head_config = dict(task_config.get("head_config") or {})
    return build_token_tagger(encoder_or_config, head_config["num_classes"],
                              dropout_rate=head_config.get("dropout_rate", 0.1), dtype=dtype)


def _rebuild_feature_based(encoder_or_config, task_config, dtype):
    head_config = dict(task_config.get("head_config") or {})
    return build_token_tagger(encoder_or_config, head_config["num_classes"],
                              dropout_rate=head_config.get("dropout_rate", 0.1),
                              feature_based=True,
                              feature_layers=task_config.get("feature_layers", 4),
                              lstm_units=head_config.get("lstm_units", 768),
                              num_lstm_layers=head_config.get("num_lstm_layers", 2), dtype=dtype)


TOKEN_TAGGING = Head("token_tagging", layer_name="tagger", outputs=("logits",),
                     rebuild=_rebuild_tagger)
FEATURE_BASED_BILSTM = Head("feature_based_bilstm", layer_name="bilstm_tagger",
                            outputs=("logits",), rebuild=_rebuild_feature_based)


__all__ = ["TokenTaggingHead", "FeatureBasedBiLSTMHead", "build_token_tagger", "TOKEN_TAGGING",
           "FEATURE_BASED_BILSTM"]
