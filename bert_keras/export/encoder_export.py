"""Exports the BERT encoder as a TF Hub-style reusable SavedModel ("BERT encoder" API).

The SavedModel is a hand-built `tf.Module`-like object saved with `tf.saved_model.save` (a Keras 3
`model.export()` has no callable root, no `training` argument and no `regularization_losses`).
What a consumer finds after `obj = tf.saved_model.load(export_dir)`:

- `obj(inputs, training=False)`: `inputs` is a dict of int32 [batch, seq_length] tensors
  `input_word_ids`, `input_mask`, `input_type_ids`; returns a dict with float32
  `pooled_output` [batch, hidden], `sequence_output` [batch, seq_length, hidden],
  `encoder_outputs` (list of every layer's [batch, seq_length, hidden], the last one equal to
  `sequence_output`) and `default` (= `pooled_output`). Dropout is active only with
  `training=True`.
- `obj.mlm(inputs, training=False)`: the same plus `masked_lm_positions` int32
  [batch, num_predictions] in `inputs`; returns also `mlm_logits` float32
  [batch, num_predictions, vocab_size]. Present when the model directory holds the masked LM
  head (`cls/predictions/...`).
- `obj.variables`, `obj.trainable_variables`, `obj.regularization_losses` (empty).
- `obj.serve(inputs)` and `obj.call_training(inputs)`: single-argument endpoints for
  `keras.layers.TFSMLayer(export_dir, call_endpoint="serve",
  call_training_endpoint="call_training", trainable=True)`; see `savedmodel_layer`.
- `obj.signatures["serving_default"]`: keyword inputs `input_word_ids`, `input_mask`,
  `input_type_ids` (int32 [batch, seq_length]), outputs `pooled_output`, `sequence_output`,
  `default` (float32), for TF Serving and `saved_model_cli`.

Weights are always rebuilt from {original checkpoint name: array} in the export dtype: a model
trained under `mixed_bfloat16` exports a float32 graph by default (its float32 master weights are
copied, no bf16 op remains), and `dtype="bfloat16"` exports a `mixed_bfloat16` graph (float32
variables, bf16 matmuls, float32 outputs) for accelerators and AMX-capable CPUs.

Example:

>>> from bert_keras.export import export_encoder_from_model_dir
>>> export_encoder_from_model_dir("models/minilm", "exports/minilm_encoder")  # doctest: +SKIP
>>> import tensorflow as tf, tensorflow_text  # doctest: +SKIP
>>> encoder = tf.saved_model.load("exports/minilm_encoder")  # doctest: +SKIP
>>> encoder(preprocessor(tf.constant(["hello"])))["pooled_output"].shape  # doctest: +SKIP
TensorShape([1, 384])
"""

import contextlib
import logging

import tensorflow as tf

from bert_keras.export.raw_text import cut_to_longest, pad_positions
from bert_keras.model import checkpoint_names
from bert_keras.model.encoder import INPUT_NAMES, build_encoder
from bert_keras.model.layers.unpadding import functional_cond, unpadded_inference
from bert_keras.modeldir.model_dir import ModelDir

logger = logging.getLogger("bert_keras.export")

# Export dtypes and the Keras dtype policy each is built under.
DTYPE_POLICIES = {"float32": "float32", "bfloat16": "mixed_bfloat16"}


def dtype_policy(dtype):
    """The Keras dtype policy of an export dtype name ("float32" or "bfloat16")."""
    if dtype not in DTYPE_POLICIES:
        raise ValueError(f"export dtype must be one of {sorted(DTYPE_POLICIES)}, got {dtype!r}")
    return DTYPE_POLICIES[dtype]


def encoder_input_spec(with_positions=False, dtype=tf.int32):
    """The dict of `tf.TensorSpec`s of the encoder inputs, int32 (or `dtype`) [batch, seq_length]."""
    spec = {name: tf.TensorSpec([None, None], dtype, name=name) for name in INPUT_NAMES}
    if with_positions:
        spec["masked_lm_positions"] = tf.TensorSpec([None, None], dtype, name="masked_lm_positions")
    return spec


def _int64_inputs(inputs):
    """Whether a call's inputs are int64: NumPy's and tf.data's default integers, which the
    exported `__call__` and `.mlm` take too (traced for them) and run as int32."""
    return any(value.dtype == tf.int64 for value in tf.nest.flatten(inputs))


def _as_int32(inputs):
    """int64 inputs as int32, asserting they fit (ids beyond int32 are out of every table)."""
    def cast(name, value):
        check = tf.debugging.assert_less_equal(
            tf.reduce_max(tf.abs(value)),  # the smallest int64 when empty
            tf.constant(2 ** 31 - 1, tf.int64),
            message=f"{name} holds values beyond int32")
        with tf.control_dependencies([check]):
            return tf.cast(value, tf.int32)

    return {name: cast(name, value) for name, value in inputs.items()}


def build_keras_models(config, weights, dtype="float32", with_mlm=None, source="weights"):
    """Builds the encoder (and the masked LM head) in the export dtype and loads `weights`.

    Args:
      config: a `BertConfig`.
      weights: {original checkpoint name: array}, e.g. `ModelDir(path).weights` or
        `checkpoint_names.collect_weights(pretraining_weight_map(model))`.
      dtype: "float32" or "bfloat16".
      with_mlm: build the masked LM head; None = when `weights` hold it.
      source: the name used in error messages.
    Returns:
      (encoder keras.Model, mlm_head layer or None).
    """
    from bert_keras.model.pretraining_model import build_pretraining_model

    policy = dtype_policy(dtype)
    head_names = checkpoint_names.pretraining_head_shapes(config)
    has_mlm = any(name.startswith("cls/predictions/") and name in weights for name in head_names)
    if with_mlm is None:
        with_mlm = has_mlm
    if with_mlm:
        model = build_pretraining_model(config, next_sentence=False, dtype=policy)
        encoder, mlm_head = model.encoder, model.get_layer("masked_lm")
        variable_map = checkpoint_names.encoder_weight_map(encoder)
        variable_map.update(checkpoint_names.masked_lm_weight_map(mlm_head))
    else:
        encoder, mlm_head = build_encoder(config, dtype=policy), None
        variable_map = checkpoint_names.encoder_weight_map(encoder)
    checkpoint_names.assign_weights(variable_map, weights, source=source)
    return encoder, mlm_head


def _float32(outputs):
    return tf.nest.map_structure(lambda x: tf.cast(x, tf.float32), outputs)


class Exportable(tf.__internal__.tracking.AutoTrackable):
    """A plain trackable object: attributes set on it are what `tf.saved_model.save` writes."""


# What `save_module` writes with: `tracing_as_saved` traces under the same options.
SAVE_OPTIONS = tf.saved_model.SaveOptions()


@contextlib.contextmanager
def tracing_as_saved():
    """Functions traced in this scope are the traces `save_module` writes, not traced again.

    `tf.saved_model.save` looks up every traced signature of an exportable's functions once
    more inside its save context, and TensorFlow keys a trace by that context (the save
    options' variable policy): a trace made outside it is made a second time while saving,
    which doubled an export's time. The exportables trace their signatures in this scope. A
    call in memory, outside it, traces on first use as any `tf.function` does. Nests.
    """
    from tensorflow.python.saved_model import save_context  # the context save() enters

    if save_context.in_save_context():
        yield
        return
    with save_context.save_context(SAVE_OPTIONS):
        yield


def _track_variables(obj, layers):
    """Sets `variables`, `trainable_variables` and `regularization_losses` of the TF Hub API."""
    variables, trainable, seen = [], [], set()
    for layer in layers:
        for variable in layer.variables:
            if id(variable) in seen:
                continue
            seen.add(id(variable))
            variables.append(variable)
            if variable.trainable:
                trainable.append(variable)
    obj.variables = variables
    obj.trainable_variables = trainable
    obj.regularization_losses = []


def _embedding_rows(encoder):
    """{input name: number of rows of the embedding table it indexes}, and "seq_length": the
    position table's rows."""
    rows = {}
    for variable in encoder.variables:
        for suffix, name in (("word_embeddings", "input_word_ids"),
                             ("token_type_embeddings", "input_type_ids"),
                             ("position_embeddings", "seq_length")):
            if variable.path.endswith("embeddings/" + suffix):
                rows[name] = int(variable.shape[0])
    return rows


def _check_inputs(encoder, features):
    """Asserts in the graph that name the input and its limit, instead of a gather error deep
    inside (or, on some devices, a silent zero row): the three inputs of one shape, at most
    max_position_embeddings long, ids and type ids inside their tables, a mask of 0 and 1."""
    rows = _embedding_rows(encoder)
    # At run time, not only when tracing: a signature (`signatures["serving_default"]`, TF
    # Serving) passes tensors of any shape to its [batch, seq_length] inputs, and a 1-D input
    # then failed in a slice deep inside, a [batch, 0] one in the pooler.
    features = {name: tf.ensure_shape(value, [None, None], name=f"{name}_must_be_batch_by_seq_length")
                for name, value in features.items()}
    ids = features["input_word_ids"]
    checks = [tf.debugging.assert_rank(ids, 2, message="input_word_ids must be [batch, seq_length]"),
              tf.debugging.assert_positive(
                  tf.shape(ids)[1], message="input_word_ids must be [batch, seq_length] with "
                  "seq_length at least 1 ([CLS] is the pooled output's token)")]
    for name in ("input_mask", "input_type_ids"):
        checks.append(tf.debugging.assert_equal(
            tf.shape(features[name]), tf.shape(ids),
            message=f"{name} must have the shape of input_word_ids [batch, seq_length]"))
    if "seq_length" in rows:
        checks.append(tf.debugging.assert_less_equal(
            tf.shape(ids)[1], rows["seq_length"],
            message=f"seq_length must be at most {rows['seq_length']} (max_position_embeddings)"))
    for name in ("input_word_ids", "input_type_ids"):
        if name in rows:
            value = features[name]
            checks.append(tf.debugging.assert_non_negative(
                value, message=f"{name} must be in [0, {rows[name]})"))
            checks.append(tf.debugging.assert_less(
                value, tf.cast(rows[name], value.dtype),
                message=f"{name} must be in [0, {rows[name]})"))
    mask = features["input_mask"]
    checks.append(tf.debugging.assert_equal(
        tf.reduce_all((mask == 0) | (mask == 1)), True, message="input_mask must hold 0 and 1 only"))
    with tf.control_dependencies(checks):
        return {name: tf.identity(value) for name, value in features.items()}


def xla_inference(model, enabled=True):
    """`model`'s inference call XLA-compiled (`jit_compile=True`), or None when not `enabled`:
    the copy `run_inference` takes for a batch of one (`ExportOptions.xla_batch_1`). On a CPU
    its fused kernels cost less than the plain graph's hundreds of ops at a few rows; larger
    batches gain nothing from it, and each new shape compiles. It computes every position
    (`unpadding` needs shapes known only when it runs)."""
    if not enabled:
        return None

    def call(features):
        with unpadded_inference(False):
            return model(features, training=False)

    return tf.function(call, jit_compile=True, autograph=False)


def plain_inference(model, features):
    """`model(features, training=False)` in the plain graph, its Transformer blocks computing
    the real tokens only (`bert_keras.model.layers.unpadding`): zeros at padding positions."""
    with unpadded_inference():
        return model(features, training=False)


def run_inference(model, features, compiled=None):
    """`plain_inference(model, features)`, or `compiled` (`xla_inference`) when given and the
    batch (the first dimension of input_word_ids) holds one row.

    >>> import keras, numpy as np
    >>> ids = keras.Input([None], dtype="int32", name="input_word_ids")
    >>> model = keras.Model({"input_word_ids": ids}, keras.ops.cast(ids, "float32") * 2)
    >>> one, two = np.array([[1, 2, 3]], "int32"), np.array([[1, 2], [3, 4]], "int32")
    >>> compiled = xla_inference(model)
    >>> run_inference(model, {"input_word_ids": one}, compiled).numpy().tolist()  # compiled
    [[2.0, 4.0, 6.0]]
    >>> run_inference(model, {"input_word_ids": two}, compiled).numpy().tolist()  # plain graph
    [[2.0, 4.0], [6.0, 8.0]]
    >>> xla_inference(model, enabled=False) is None
    True
    """
    if compiled is None:
        return plain_inference(model, features)
    return functional_cond(tf.equal(tf.shape(features["input_word_ids"])[0], 1),
                           lambda: compiled(features), lambda: plain_inference(model, features))


def _encode(encoder, inputs, training, xla_encoder=None):
    """The encoder's float32 outputs; inference on a batch of one runs `xla_encoder` when
    given (`xla_inference`). The input checks stay outside it. Inference computes the batch
    cut to its longest sequence (rounded up to 16) and the real tokens only, and returns zeros
    at the padding positions beyond."""
    features = _check_inputs(encoder, {name: inputs[name] for name in INPUT_NAMES})
    if training:
        outputs = encoder(features, training=True)
        sequence_output, encoder_outputs = outputs["sequence_output"], outputs["encoder_outputs"]
    else:
        seq_length = tf.shape(features["input_word_ids"])[1]
        features, _ = cut_to_longest(features, seq_length)
        outputs = run_inference(encoder, features, xla_encoder)
        # Back to the input's length, zeros beyond the cut.
        sequence_output = pad_positions(outputs["sequence_output"], seq_length)
        encoder_outputs = [pad_positions(output, seq_length) for output in outputs["encoder_outputs"]]
    outputs = _float32({"pooled_output": outputs["pooled_output"],
                        "sequence_output": sequence_output, "encoder_outputs": encoder_outputs})
    outputs["default"] = outputs["pooled_output"]
    return outputs


class _ZeroPaddingEncoder:
    """The encoder computing every position, its per-position outputs zero at padding, as
    `plain_inference` returns them: what the XLA-compiled copy runs (the product fuses)."""

    def __init__(self, encoder):
        self._encoder = encoder

    def __call__(self, features, training=False):
        outputs = dict(self._encoder(features, training=training))
        real = tf.cast(features["input_mask"], outputs["sequence_output"].dtype)[:, :, None]
        outputs["sequence_output"] = outputs["sequence_output"] * real
        outputs["encoder_outputs"] = [output * real for output in outputs["encoder_outputs"]]
        return outputs


class MaskedLMModule(Exportable):
    """The `.mlm` sub-object: the encoder outputs (`encode`: the encoder module's `__call__`)
    plus `mlm_logits` at `masked_lm_positions`."""

    def __init__(self, encoder, mlm_head, encode):
        super().__init__()
        # Set without tracking: only the variables and functions are saved, not Keras objects.
        object.__setattr__(self, "_mlm_head", mlm_head)
        object.__setattr__(self, "_encode", encode)
        with tracing_as_saved():
            for training in (False, True):
                for dtype in (tf.int32, tf.int64):
                    self.__call__.get_concrete_function(encoder_input_spec(True, dtype),
                                                        training=training)
        _track_variables(self, [encoder, mlm_head])

    @tf.function
    def __call__(self, inputs, training=False):
        if _int64_inputs(inputs):
            return self.__call__(_as_int32(inputs), training=training)
        # The encoder module's own traces, called: the encoder is traced once per `training`.
        outputs = dict(self._encode({name: inputs[name] for name in INPUT_NAMES},
                                    training=training))
        # The head works in its compute dtype; feed it the float32 output as exported.
        sequence = tf.cast(outputs["sequence_output"], self._mlm_head.compute_dtype)
        outputs["mlm_logits"] = tf.cast(
            self._mlm_head(sequence, inputs["masked_lm_positions"]), tf.float32)
        return outputs


class EncoderModule(Exportable):
    """The object written by `export_encoder`, callable in memory as after loading."""

    def __init__(self, encoder, mlm_head=None, xla_batch_1=False):
        super().__init__()
        object.__setattr__(self, "_encoder", encoder)
        object.__setattr__(self, "_mlm_head", mlm_head)
        object.__setattr__(self, "_xla_encoder",
                           xla_inference(_ZeroPaddingEncoder(encoder), xla_batch_1))
        with tracing_as_saved():
            for training in (False, True):
                for dtype in (tf.int32, tf.int64):
                    self.__call__.get_concrete_function(encoder_input_spec(dtype=dtype),
                                                        training=training)
            self.serve.get_concrete_function()
            self.call_training.get_concrete_function()
        if mlm_head is not None:
            self.mlm = MaskedLMModule(encoder, mlm_head, self.__call__)
        _track_variables(self, [encoder] + ([mlm_head] if mlm_head is not None else []))

    @tf.function
    def __call__(self, inputs, training=False):
        if _int64_inputs(inputs):  # the int32 trace, called: the encoder's graph is not copied
            return self.__call__(_as_int32(inputs), training=training)
        return _encode(self._encoder, inputs, training, self._xla_encoder)

    # The endpoints below call the two traces of `__call__` (traced above, in the saving
    # context): the encoder's graph is built and written twice, not once per endpoint.

    # Single-argument endpoints for keras.layers.TFSMLayer, which passes no `training`.
    @tf.function(input_signature=[encoder_input_spec()])
    def serve(self, inputs):
        return self.__call__(inputs, training=False)

    @tf.function(input_signature=[encoder_input_spec()])
    def call_training(self, inputs):
        return self.__call__(inputs, training=True)

    @tf.function(input_signature=[encoder_input_spec()[name] for name in INPUT_NAMES])
    def serving_default(self, input_word_ids, input_mask, input_type_ids):
        outputs = self.__call__({"input_word_ids": input_word_ids, "input_mask": input_mask,
                                 "input_type_ids": input_type_ids}, training=False)
        return {name: outputs[name] for name in ("pooled_output", "sequence_output", "default")}

    def signatures(self):
        return {"serving_default": self.serving_default.get_concrete_function()}


def build_encoder_module(config, weights, dtype="float32", with_mlm=None, source="weights",
                         xla_batch_1=False):
    """The exportable encoder object for a config and {original name: array} weights
    (`xla_batch_1`: float32 inference on a batch of one runs XLA-compiled)."""
    encoder, mlm_head = build_keras_models(config, weights, dtype, with_mlm, source)
    return EncoderModule(encoder, mlm_head, xla_batch_1=xla_batch_1 and dtype == "float32")


def save_module(module, export_dir):
    """Writes `module` (an exportable whose `signatures()` gives {name: concrete function}) as
    a SavedModel; returns `export_dir`. The one writer of every export's SavedModel; it first
    removes what killed exports into the same place left (`leftovers`)."""
    from bert_keras.export.leftovers import remove_stale_temporaries

    remove_stale_temporaries(export_dir)
    with tracing_as_saved():
        signatures = module.signatures()
    tf.saved_model.save(module, export_dir, signatures=signatures, options=SAVE_OPTIONS)
    return export_dir


def export_encoder(export_dir, config, weights, dtype="float32", with_mlm=None, source="weights",
                   xla_batch_1=False):
    """Writes the TF Hub-style encoder SavedModel of `config` and `weights` to `export_dir`.

    See the module docstring for what the SavedModel offers. Returns `export_dir`.
    """
    module = build_encoder_module(config, weights, dtype, with_mlm, source, xla_batch_1)
    if module._mlm_head is None:
        logger.info("no masked LM head weights: the export has no .mlm")
    return save_module(module, export_dir)


def export_encoder_from_model_dir(model_dir, export_dir, dtype="float32", with_mlm=None,
                                  xla_batch_1=False):
    """Exports the encoder of a model directory, a path or a `ModelDir` (see `export_encoder`)."""
    model_dir = ModelDir.of(model_dir)
    return export_encoder(export_dir, model_dir.config, model_dir.weights, dtype, with_mlm,
                          source=model_dir.weights_file, xla_batch_1=xla_batch_1)
