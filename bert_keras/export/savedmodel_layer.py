"""Fine-tuning from exported SavedModels in Keras 3: the encoder as a trainable layer.

`hub.KerasLayer` does not work with Keras 3; `keras.layers.TFSMLayer` does, and its weights train
when `trainable=True`. A TFSMLayer calls a single-argument endpoint and cannot pass `training`,
so the encoder export carries two: `serve` (inference, no dropout) and `call_training`
(dropout on), which Keras picks according to the `training` flag of the call.

One trap (Keras 3.15): TFSMLayer names its weights after the restored variables,
`"embeddings/word_embeddings:0"` with only the "/" replaced, and the ":" then makes optimizers
with slots (Adam, SGD with momentum) fail in `fit` with "... is not a valid scope name".
`SavedModelLayer` below is TFSMLayer with clean weight names; copy its ten lines if you do
not want to depend on bert_keras:

    import keras, tensorflow as tf, tensorflow_text
    encoder = SavedModelLayer(encoder_dir, call_endpoint="serve",
                              call_training_endpoint="call_training", trainable=True)
    inputs = {name: keras.Input((None,), dtype="int32", name=name)
              for name in ("input_word_ids", "input_mask", "input_type_ids")}
    pooled = encoder(inputs)["pooled_output"]
    logits = keras.layers.Dense(2)(keras.layers.Dropout(0.1)(pooled))
    model = keras.Model(inputs, logits)

    preprocessor = tf.saved_model.load(preprocessor_dir)
    # In tf.data, not in Keras; the preprocessor takes string vectors, so batch first.
    train = dataset.batch(32).map(lambda text, label: (preprocessor(text), label))
    model.compile(keras.optimizers.Adam(2e-5),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(train, epochs=3)

The preprocessor stays in `tf.data` (tokenization is not trainable and runs on the CPU next to
the input pipeline). The functions here do exactly that and need nothing of bert_keras but this
file; the exports themselves load with TensorFlow and tensorflow-text alone.

Example:

>>> model = build_classifier_from_export("exports/encoder", num_classes=2)  # doctest: +SKIP
>>> train = preprocess_dataset(texts_and_labels, "exports/preprocessor")  # doctest: +SKIP
>>> model.fit(train.batch(32), epochs=3)  # doctest: +SKIP
"""

import keras
import tensorflow as tf

INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
INFERENCE_ENDPOINT = "serve"
TRAINING_ENDPOINT = "call_training"


class SavedModelLayer(keras.layers.TFSMLayer):
    """`keras.layers.TFSMLayer` whose weights have names optimizers accept.

    The weights are the SavedModel's own variables (wrapped, not copied), so training the layer
    updates the loaded object and `tf.saved_model.save` of it writes the fine-tuned values.
    """

    def _add_existing_weight(self, weight):
        name = weight.name.split(":")[0].replace("/", "_")
        variable = keras.Variable(initializer=weight, trainable=weight.trainable,
                                  dtype=weight.dtype, shape=weight.shape, name=name)
        self._track_variable(variable)


def load_encoder_layer(encoder_dir, trainable=True, name="bert_encoder"):
    """The exported encoder as a `SavedModelLayer` (a TFSMLayer; dropout only when training).

    Called on the dict of the three int32 [batch, seq_length] inputs, it returns the dict of
    `pooled_output`, `sequence_output`, `encoder_outputs` and `default` (float32).
    """
    import tensorflow_text  # noqa: F401  (harmless for the encoder; needed by any tf-text op)

    return SavedModelLayer(encoder_dir, call_endpoint=INFERENCE_ENDPOINT,
                           call_training_endpoint=TRAINING_ENDPOINT, trainable=trainable, name=name)


def build_classifier_from_export(encoder_dir, num_classes, seq_length=None, dropout_rate=0.1,
                                 trainable=True):
    """A `keras.Model`: the exported encoder + dropout + dense on `pooled_output`.

    Inputs: the three int32 encoder inputs [batch, seq_length] (what the exported preprocessor
    returns). Outputs: float32 logits [batch, num_classes]. `model.encoder_layer` is the
    TFSMLayer, whose `trainable_weights` are the encoder's.
    """
    inputs = {name: keras.Input((seq_length,), dtype="int32", name=name) for name in INPUT_NAMES}
    encoder = load_encoder_layer(encoder_dir, trainable=trainable)
    pooled_output = encoder(inputs)["pooled_output"]  # [batch, hidden]
    pooled_output = keras.layers.Dropout(dropout_rate, name="classifier_dropout")(pooled_output)
    logits = keras.layers.Dense(num_classes, name="classifier",
                                kernel_initializer=keras.initializers.TruncatedNormal(
                                    stddev=0.02))(pooled_output)
    model = keras.Model(inputs, logits, name="classifier_from_export")
    model.encoder_layer = encoder
    return model


def preprocess_dataset(dataset, preprocessor_dir, seq_length=None):
    """Maps a `tf.data.Dataset` of (text, label) or ((text_a, text_b), label) to encoder inputs.

    Texts are string scalars (map before `batch`) or [batch] vectors (map after). With
    `seq_length` the pairs are packed by the preprocessor's `bert_pack_inputs` to that length;
    otherwise its default length is used.
    """
    import tensorflow_text  # noqa: F401  (the preprocessor holds tf-text ops)

    preprocessor = tf.saved_model.load(preprocessor_dir)
    default_length = int(preprocessor.seq_length.numpy())

    def encode(texts, label):
        segments = texts if isinstance(texts, (tuple, list)) else (texts,)
        scalar = segments[0].shape.rank == 0
        if scalar:
            segments = [tf.reshape(text, [1]) for text in segments]
        if seq_length is None and len(segments) == 1:
            features = preprocessor(segments[0])
        else:
            tokens = [preprocessor.tokenize(text) for text in segments]
            length = seq_length or default_length
            features = preprocessor.bert_pack_inputs(tokens, seq_length=length)
        if scalar:
            features = {name: value[0] for name, value in features.items()}
        return features, label

    return dataset.map(encode, num_parallel_calls=tf.data.AUTOTUNE)


__all__ = ["SavedModelLayer", "load_encoder_layer", "build_classifier_from_export", "preprocess_dataset",
           "INFERENCE_ENDPOINT", "TRAINING_ENDPOINT"]
