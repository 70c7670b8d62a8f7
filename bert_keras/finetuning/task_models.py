"""Fine-tuning models (encoder + task head), and fine-tuned model directories.

Each builder takes a `BertConfig` (a fresh encoder is built) or an encoder from
`build_encoder` / `load_encoder`, and returns a functional `keras.Model` whose inputs are the
encoder's (`input_word_ids`, `input_mask`, `input_type_ids`, int32) and whose outputs are
float32 logits. The model carries `model.encoder`, `model.head` and `model.head_spec` (what
`task_config.json` records to rebuild it).

A fine-tuned model directory is an ordinary model directory (see `bert_keras.modeldir.model_dir`) whose
`model.safetensors` also holds the head's weights under "task/<head name>/<var>" and whose
`task_config.json` says how to rebuild the head:

    {"task": "glue/mrpc", "head": "classification", "head_name": "classifier",
     "head_config": {"num_classes": 2, "dropout_rate": 0.1, "initializer_range": 0.02},
     "label_names": ["0", "1"], "max_seq_length": 128, "outputs": ["logits"], ...}

`docs/finetuning.md` lists every head's variables and outputs.

Example:

>>> import bert_keras
>>> from bert_keras.finetuning.task_models import build_classifier, task_weight_map
>>> model = build_classifier(bert_keras.BertConfig.from_preset("tiny", vocab_size=50), num_labels=3)
>>> model.output.shape
(None, 3)
>>> [name for name in task_weight_map(model) if name.startswith("task/")]
['task/classifier/kernel', 'task/classifier/bias']
"""

import keras
from keras import ops

from bert_keras.common.errors import BertKerasError
from bert_keras.model import checkpoint_names
from bert_keras.model.config import BertConfig
from bert_keras.model.encoder import build_encoder, encoder_inputs, INPUT_NAMES
from bert_keras.modeldir import model_dir as model_dir_lib
from bert_keras.finetuning.task_heads import (ClassificationHead, FeatureBasedBiLSTMHead, MeanPooling,
                                              MultipleChoiceHead, SpanHead, TokenTaggingHead)

TASK_PREFIX = "task/"
# What a sentence(-pair) classifier reads: the pooled [CLS] output (the paper) or the mean of the
# last layer over the real tokens.
POOLINGS = ("cls", "mean")
POOLING_DESCRIPTIONS = {"cls": "the pooled [CLS] output", "mean": "the mean of the last layer"}

# head kind -> (layer name, head class, output names)
HEADS = {
    "classification": ("classifier", ClassificationHead, ("logits",)),
    "regression": ("regressor", ClassificationHead, ("logits",)),
    "span": ("span", SpanHead, ("start_logits", "end_logits")),
    "multiple_choice": ("multiple_choice", MultipleChoiceHead, ("logits",)),
    "token_tagging": ("tagger", TokenTaggingHead, ("logits",)),
    "feature_based_bilstm": ("bilstm_tagger", FeatureBasedBiLSTMHead, ("logits",)),
}


class TaskModelError(BertKerasError):
    """A fine-tuned model directory or a model request is inconsistent."""


def _encoder_and_range(encoder_or_config, dtype):
    """(encoder, initializer_range) from a BertConfig or an already built encoder."""
    if isinstance(encoder_or_config, BertConfig):
        return build_encoder(encoder_or_config, dtype=dtype), encoder_or_config.initializer_range
    if isinstance(encoder_or_config, keras.Model):
        return encoder_or_config, encoder_or_config.get_layer("embeddings").initializer_range
    raise TypeError(f"expected a BertConfig or an encoder keras.Model, got "
                    f"{type(encoder_or_config).__name__}")


def _finish(inputs, outputs, encoder, head, kind, extra=None, name=None):
    model = keras.Model(inputs, outputs, name=name or f"bert_{kind}")
    model.encoder = encoder
    model.head = head
    spec = {"head": kind, "head_name": head.name, "outputs": list(HEADS[kind][2]),
            "head_config": {key: value for key, value in head.get_config().items()
                            if key not in ("name", "trainable", "dtype")}}
    spec.update(extra or {})
    model.head_spec = spec
    return model


def build_classifier(encoder_or_config, num_labels=2, regression=False, dropout_rate=0.1,
                     dtype=None, pooling="cls"):
    """Sentence(-pair) classification (or regression) on the pooled output.

    Outputs: `logits` float32 [batch, num_labels] ([batch, 1] scores when `regression=True`).
    `pooling`: "cls" reads the pooled [CLS] output, as the paper; "mean" the mean of
    `sequence_output` over the real tokens (`task_heads.MeanPooling`; the pooler is then
    unused). `task_config.json` records it as "pooling".

    Example:

    >>> import bert_keras
    >>> config = bert_keras.BertConfig.from_preset("tiny", vocab_size=50)
    >>> build_classifier(config, regression=True).output.shape
    (None, 1)
    """
    encoder, initializer_range = _encoder_and_range(encoder_or_config, dtype)
    if regression:
        num_labels = 1
    elif num_labels < 2:
        raise TaskModelError(f"a classifier needs at least 2 labels, got {num_labels}; use "
                             "regression=True for a single score")
    if pooling not in POOLINGS:
        raise TaskModelError(f"unknown pooling {pooling!r}; known: {', '.join(POOLINGS)}")
    kind = "regression" if regression else "classification"
    inputs = encoder_inputs()
    outputs = encoder(inputs)
    if pooling == "mean":
        encoder.get_layer("pooler").trainable = False  # unused: no gradient reaches it
        pooled_output = MeanPooling(name="mean_pooling")(outputs["sequence_output"],
                                                         inputs["input_mask"])  # [b, hidden]
    else:
        pooled_output = outputs["pooled_output"]  # [b, hidden]
    head = ClassificationHead(num_labels, dropout_rate=dropout_rate,
                              initializer_range=initializer_range, name=HEADS[kind][0], dtype=dtype)
    return _finish(inputs, head(pooled_output), encoder, head, kind, {"pooling": pooling})


def build_span_model(encoder_or_config, dtype=None):
    """Extractive question answering (SQuAD): start and end logits over the sequence.

    Outputs: dict `start_logits`, `end_logits`, float32 [batch, seq_length].
    """
    encoder, initializer_range = _encoder_and_range(encoder_or_config, dtype)
    inputs = encoder_inputs()
    sequence_output = encoder(inputs)["sequence_output"]  # [b, s, hidden]
    head = SpanHead(initializer_range=initializer_range, name=HEADS["span"][0], dtype=dtype)
    return _finish(inputs, head(sequence_output), encoder, head, "span")


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
    encoder, initializer_range = _encoder_and_range(encoder_or_config, dtype)
    inputs = {name: keras.Input(shape=(num_choices, None), dtype="int32", name=name)
              for name in INPUT_NAMES}
    flat = {name: _MergeChoices(name=f"merge_choices_{name}")(tensor)
            for name, tensor in inputs.items()}  # [b * choices, s]
    pooled_output = encoder(flat)["pooled_output"]  # [b * choices, hidden]
    pooled_output = _SplitChoices(num_choices, name="split_choices")(pooled_output)
    head = MultipleChoiceHead(dropout_rate=dropout_rate, initializer_range=initializer_range,
                              name=HEADS["multiple_choice"][0], dtype=dtype)
    return _finish(inputs, head(pooled_output), encoder, head, "multiple_choice",
                   {"num_choices": num_choices})


def build_token_tagger(encoder_or_config, num_labels, dropout_rate=0.1, feature_based=False,
                       feature_layers=4, lstm_units=768, num_lstm_layers=2, dtype=None):
    """Token classification (CoNLL-2003 NER): logits for every position.

    With `feature_based=True` (the paper's Section 5.3), the encoder is frozen and run without
    dropout; the concatenation of its last `feature_layers` hidden layers goes through a
    `num_lstm_layers`-layer BiLSTM of `lstm_units` units before the classifier.

    Outputs: `logits` float32 [batch, seq_length, num_labels].
    """
    encoder, initializer_range = _encoder_and_range(encoder_or_config, dtype)
    inputs = encoder_inputs()
    if not feature_based:
        sequence_output = encoder(inputs)["sequence_output"]  # [b, s, hidden]
        head = TokenTaggingHead(num_labels, dropout_rate=dropout_rate,
                                initializer_range=initializer_range,
                                name=HEADS["token_tagging"][0], dtype=dtype)
        return _finish(inputs, head(sequence_output), encoder, head, "token_tagging")

    encoder.trainable = False
    layers = encoder(inputs, training=False)["encoder_outputs"]
    if feature_layers > len(layers):
        raise TaskModelError(f"feature_layers={feature_layers} but the encoder has only "
                             f"{len(layers)} layers")
    head = FeatureBasedBiLSTMHead(num_labels, lstm_units=lstm_units,
                                  num_lstm_layers=num_lstm_layers, dropout_rate=dropout_rate,
                                  initializer_range=initializer_range,
                                  name=HEADS["feature_based_bilstm"][0], dtype=dtype)
    logits = head(layers[-feature_layers:], inputs["input_mask"])
    return _finish(inputs, logits, encoder, head, "feature_based_bilstm",
                   {"feature_layers": feature_layers})


def build_task_model(encoder_or_config, head_spec, dtype=None):
    """Rebuilds a model from a `head_spec` (the head fields of `task_config.json`)."""
    kind = head_spec.get("head")
    if kind not in HEADS:
        raise TaskModelError(f"unknown head {kind!r}; known: {', '.join(HEADS)}")
    head_config = dict(head_spec.get("head_config") or {})
    if kind in ("classification", "regression"):
        return build_classifier(encoder_or_config, head_config.get("num_classes", 2),
                                regression=kind == "regression",
                                dropout_rate=head_config.get("dropout_rate", 0.1), dtype=dtype,
                                pooling=head_spec.get("pooling", "cls"))
    if kind == "span":
        return build_span_model(encoder_or_config, dtype=dtype)
    if kind == "multiple_choice":
        return build_multiple_choice_model(encoder_or_config, head_spec.get("num_choices", 4),
                                           dropout_rate=head_config.get("dropout_rate", 0.1),
                                           dtype=dtype)
    if kind == "token_tagging":
        return build_token_tagger(encoder_or_config, head_config["num_classes"],
                                  dropout_rate=head_config.get("dropout_rate", 0.1), dtype=dtype)
    return build_token_tagger(encoder_or_config, head_config["num_classes"],
                              dropout_rate=head_config.get("dropout_rate", 0.1),
                              feature_based=True,
                              feature_layers=head_spec.get("feature_layers", 4),
                              lstm_units=head_config.get("lstm_units", 768),
                              num_lstm_layers=head_config.get("num_lstm_layers", 2), dtype=dtype)


def task_weight_map(model):
    """{name: variable}: the encoder under its original BERT names, the head under task/<head>/."""
    names = checkpoint_names.encoder_weight_map(model.encoder)
    prefix = f"{TASK_PREFIX}{model.head.name}/"
    names.update({prefix + name: variable for name, variable in model.head.weight_map().items()})
    return names


def random_encoder_weights(config, seed):
    """{original BERT name: array} of a freshly initialized encoder for `config` (BERT's
    truncated normal with standard deviation `initializer_range`, zero biases, unit LayerNorm
    gains), drawn from `seed`: what "no pre-training" starts from."""
    keras.utils.set_random_seed(seed)
    encoder = build_encoder(config)
    return checkpoint_names.collect_weights(checkpoint_names.encoder_weight_map(encoder))


def initial_head_weights(variable_map, initializer_range, seed):
    """{name: array} of a fresh task head for the `task/...` entries of `variable_map`
    (`task_weight_map`): kernels from BERT's normal truncated at two standard deviations of
    `initializer_range`, biases zero, drawn in the map's order from `seed`.

    >>> import bert_keras
    >>> model = build_classifier(bert_keras.BertConfig.from_preset("tiny", vocab_size=50))
    >>> {k: v.shape for k, v in initial_head_weights(task_weight_map(model), 0.02, 1).items()}
    {'task/classifier/kernel': (128, 2), 'task/classifier/bias': (2,)}
    """
    import numpy as np  # pylint: disable=import-outside-toplevel

    rng = np.random.RandomState(seed)
    arrays = {}
    for name, variable in variable_map.items():
        if not name.startswith(TASK_PREFIX):
            continue
        shape = tuple(variable.shape)
        if name.endswith("kernel"):
            values = rng.standard_normal(shape)
            while np.any(np.abs(values) > 2):  # truncated at two standard deviations
                outside = np.abs(values) > 2
                values[outside] = rng.standard_normal(int(outside.sum()))
            arrays[name] = (values * initializer_range).astype("float32")
        else:
            arrays[name] = np.zeros(shape, "float32")
    return arrays


def save_task_model_dir(model, output_dir, config, vocab, do_lower_case, task_config):
    """Writes a fine-tuned model directory: encoder + head weights and `task_config.json`.

    `task_config` holds the task's own fields ("task", "label_names", "max_seq_length", ...);
    the head fields of `model.head_spec` are added to it.
    """
    full_config = dict(task_config)
    full_config.update(model.head_spec)
    full_config.setdefault("format_version", 1)
    model_dir_lib.write_model_dir(output_dir, config, vocab, do_lower_case,
                                  checkpoint_names.collect_weights(task_weight_map(model)),
                                  task_config=full_config)
    return full_config


def load_task_model(model_dir, dtype=None):
    """The fine-tuned model of a directory written by `save_task_model_dir`.

    Returns (model, task_config). Raises TaskModelError when the directory has no
    task_config.json, and WeightsError naming the variable when a weight is missing.
    """
    task_config = model_dir_lib.read_task_config(model_dir)
    if task_config is None:
        raise TaskModelError(f"{model_dir}: no {model_dir_lib.TASK_CONFIG_NAME}; this is not a "
                             "fine-tuned model directory (load_encoder reads pre-trained ones)")
    from bert_keras.modeldir.loading import load_encoder  # reads the vocabulary: TensorFlow

    encoder = load_encoder(model_dir, dtype=dtype)
    model = build_task_model(encoder, task_config, dtype=dtype)
    arrays = model_dir_lib.read_weights(model_dir)
    checkpoint_names.assign_weights(task_weight_map(model), arrays,
                                    source=f"{model_dir}/{model_dir_lib.WEIGHTS_NAME}")
    return model, task_config


__all__ = ["POOLINGS", "POOLING_DESCRIPTIONS", "build_classifier", "build_span_model", "build_multiple_choice_model",
           "build_token_tagger", "build_task_model", "task_weight_map", "save_task_model_dir",
           "load_task_model", "TaskModelError", "HEADS", "TASK_PREFIX", "random_encoder_weights",
           "initial_head_weights"]
