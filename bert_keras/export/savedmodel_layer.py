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


# ------------------------------------------------------------------ checked calls of exports
class SavedModelInputError(ValueError):
    """Inputs an exported function has no trace for, named with what it expects."""


def _spec_words(spec):
    """"an int32 tensor [batch, n]"-like words for a spec."""
    if isinstance(spec, tf.RaggedTensorSpec):
        dims = ["batch"] + ["(n)" if index <= spec.ragged_rank else str(size)
                            for index, size in enumerate(spec.shape[1:], start=1)]
        return f"a RaggedTensor of {spec.dtype.name} [{', '.join(dims)}]"
    dims = ["batch" if index == 0 else ("n" if size is None else str(size))
            for index, size in enumerate(spec.shape)]
    article = "an" if spec.dtype.name[0] in "aeiou" else "a"
    return (f"{article} {spec.dtype.name} tensor [{', '.join(dims)}]" if dims else
            f"{article} {spec.dtype.name} scalar")


def _value_words(value):
    kind = "RaggedTensor" if isinstance(value, tf.RaggedTensor) else "tensor"
    article = "an" if value.dtype.name[0] in "aeiou" else "a"
    return f"{article} {value.dtype.name} {kind} of shape {list(value.shape)}"


def _first_mismatch(value, specs, path, keyword_arguments=False):
    """What is wrong with `value` for every one of `specs` (the same place in each traced
    signature), or None when one of them takes it."""
    first = specs[0]
    if isinstance(first, dict):
        if not isinstance(value, dict):
            return (f"{path}: got {type(value).__name__}; expected a dict of "
                    f"{', '.join(sorted(first))}")
        missing, extra = sorted(set(first) - set(value)), sorted(set(value) - set(first))
        if missing or extra:
            return (f"{path}: " + "; ".join(
                part for part in (missing and f"missing {', '.join(missing)}",
                                  extra and f"unexpected {', '.join(map(str, extra))}") if part)
                    + f"; expected exactly {', '.join(sorted(first))}, each "
                    + _spec_words(next(iter(first.values()))))
        for key in sorted(first):
            problem = _first_mismatch(value[key], [spec[key] for spec in specs],
                                      key if keyword_arguments else f"{path}[{key!r}]")
            if problem:
                return problem
        return None
    if isinstance(first, (list, tuple)):
        if not isinstance(value, (list, tuple)):
            return f"{path}: got {type(value).__name__}; expected a list"
        lengths = sorted({len(spec) for spec in specs})
        fitting = [spec for spec in specs if len(spec) == len(value)]
        if not fitting:
            return f"{path}: {len(value)} items; expected {' or '.join(map(str, lengths))}"
        problems = [next((problem for problem in (
            _first_mismatch(item, [spec[index]], f"{path}[{index}]")
            for index, item in enumerate(value)) if problem), None) for spec in fitting]
        return None if None in problems else problems[0]
    if not isinstance(first, tf.TypeSpec):
        return None  # a Python value (e.g. `training`): the function's own binding checks it
    expected = " or ".join(sorted({_spec_words(spec) for spec in specs}))
    if isinstance(value, tf.SparseTensor):
        return f"{path}: a SparseTensor; expected {expected}"
    if isinstance(value, tf.RaggedTensor) and not isinstance(first, tf.RaggedTensorSpec):
        return f"{path}: a RaggedTensor; expected {expected} (pad it with .to_tensor())"
    if isinstance(first, tf.RaggedTensorSpec) and not isinstance(value, tf.RaggedTensor):
        return (f"{path}: a dense {getattr(value, 'dtype', tf.int32).name if hasattr(value, 'dtype') else type(value).__name__} value; "
                f"expected {expected} (the preprocessor's tokenize gives one)")
    if not isinstance(value, tf.RaggedTensor):
        try:
            value = tf.convert_to_tensor(value)
        except (TypeError, ValueError) as error:
            return f"{path}: not a tensor ({error}); expected {expected}"
    for spec in specs:
        if spec.dtype == value.dtype and spec.shape.rank == value.shape.rank and \
                spec.shape.is_compatible_with(value.shape):
            return None
    return f"{path}: got {_value_words(value)}; expected {expected}"


def check_call(function, args, kwargs, name="inputs"):
    """`SavedModelInputError` naming the input and what `function` (a restored `tf.function`
    or a signature) expects when none of its traces takes `args` and `kwargs`; else nothing."""
    if hasattr(function, "concrete_functions"):
        signatures = [concrete.structured_input_signature
                      for concrete in function.concrete_functions]
    else:
        signatures = [function.structured_input_signature]
    if not signatures:
        return
    if args and all(len(positional) >= 1 for positional, _ in signatures):
        problem = _first_mismatch(args[0], [positional[0] for positional, _ in signatures], name)
    else:
        problem = _first_mismatch(dict(kwargs), [dict(named) for _, named in signatures], name,
                                  keyword_arguments=True)
    if problem:
        raise SavedModelInputError(problem)


class CheckedSavedModel:
    """A loaded export whose calls check their inputs first (`load_checked`).

    `obj(inputs)`, `obj.mlm(inputs)`, `obj.tokenize(strings)`, `obj.bert_pack_inputs(segments)`,
    `obj.signatures[name](**inputs)` run as on the loaded object, but inputs none of the
    functions' traces take (a missing or unexpected key, a RaggedTensor for a dense input or
    the reverse, another dtype, another rank) raise `SavedModelInputError` naming the input and
    what is expected, instead of TensorFlow's "Could not find matching concrete function"
    listing of every trace. Any other attribute is the loaded object's.
    """

    def __init__(self, loaded, name="inputs"):
        object.__setattr__(self, "_loaded", loaded)
        object.__setattr__(self, "_name", name)

    def __call__(self, *args, **kwargs):
        function = self._loaded
        if not hasattr(function, "concrete_functions") and not hasattr(
                function, "structured_input_signature"):
            function = function.__call__
        check_call(function, args, kwargs, self._name)
        return self._loaded(*args, **kwargs)

    def __getattr__(self, name):
        value = getattr(self._loaded, name)
        if name == "signatures":
            return {key: CheckedSavedModel(function, key) for key, function in value.items()}
        if hasattr(value, "concrete_functions") or (
                hasattr(value, "__call__") and hasattr(value.__call__, "concrete_functions")):
            return CheckedSavedModel(value, name)
        return value

    def __getitem__(self, key):
        return self._loaded[key]


def load_checked(export_dir):
    """`tf.saved_model.load(export_dir)` (tensorflow-text imported first) as a
    `CheckedSavedModel`: its calls name a bad input and what is expected.

    >>> encoder = load_checked("exports/encoder")  # doctest: +SKIP
    >>> encoder({"input_word_ids": ids, "input_mask": mask})  # doctest: +SKIP
    Traceback (most recent call last):
    SavedModelInputError: inputs: missing input_type_ids; expected exactly input_mask, input_type_ids, input_word_ids, each a int32 tensor [batch, n]
    """
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops before the load)

    return CheckedSavedModel(tf.saved_model.load(export_dir))


__all__ = ["SavedModelLayer", "SavedModelInputError", "CheckedSavedModel", "load_checked",
           "check_call", "load_encoder_layer", "build_classifier_from_export", "preprocess_dataset",
           "INFERENCE_ENDPOINT", "TRAINING_ENDPOINT"]
