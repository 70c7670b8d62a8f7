"""Raw-text task models for production: the tokenizer, the encoder and the fine-tuned head in one
SavedModel with a `serving_default` signature that takes strings.

The model directory is a fine-tuned one (`bert_keras.finetuning.task_models.save_task_model_dir`): its
`task_config.json` names the head and the task, and its `model.safetensors` holds the head's
weights under "task/<head name>/...". The family that declares the head
(`bert_keras.finetuning.catalog.family_of_head`) serves it: its `serving.py` builds the
signature, which depends on the head:

classification (GLUE classification tasks)
    inputs `text_a` string [batch] (and `text_b` [batch] for sentence-pair tasks);
    outputs `probabilities` float32 [batch, num_labels], `logits` float32 [batch, num_labels],
    `label_id` int32 [batch], `label_name` string [batch].
regression (STS-B)
    inputs as above; output `score` float32 [batch].
span (SQuAD v1.1 / v2.0)
    inputs `question`, `context` string [batch]; outputs `answer_text` string [batch],
    `answer_start`, `answer_end` int32 [batch] (character offsets into the context, end
    exclusive, -1 when there is no answer), `score` float32 [batch] (start + end logit of the
    answer; for an empty v2.0 answer the null score), `null_odds` float32 [batch] (v2.0: null
    score minus the best non-null score, the quantity compared with
    `null_score_diff_threshold`; 1e6 when no span is possible), `has_answer` bool [batch].
multiple_choice (SWAG)
    inputs `sent1`, `sent2` string [batch] and `endings` string [batch, num_choices], the
    fields of a SWAG CSV row; outputs `logits`, `probabilities` float32 [batch, num_choices]
    (one score per ending; softmax over the endings), `label_id` int32 [batch] (the index of
    the best ending).
token_tagging, feature_based_bilstm (CoNLL-2003 NER)
    input `text` string [batch]; outputs `entity_text`, `entity_label` string
    [batch, max_entities] ("" as padding), `entity_start`, `entity_end` int32
    [batch, max_entities] (character offsets, end exclusive, -1 as padding),
    `entity_score` float32 [batch, max_entities] (the mean probability of the entity's word
    tags, 0 as padding), `num_entities` int32 [batch].

The fine-tuned weights are variables of the SavedModel (in `variables/`), read by the serving
graph. Folding them into the graph as constants (`constant_weights=True`, `ConstantWeightsModel`)
gives the same outputs and, measured again on a 2-core AVX2 EPYC, the same time per call at
batch 1 and 32, but a graph of the weights' size that TensorFlow copies and optimizes on the
first request of every fresh process: 6.4-8.3 s against 1.7-2.1 s (MiniLM pair classifier;
`benchmarks/bench_first_request.py`, `docs/export.md`).

Padding costs nothing: the packed windows of a batch are cut to its longest sequence (rounded
up to a multiple of 16) before the model runs, and per-position outputs are padded back, so a
batch of short texts runs at the cost of its length, not of `seq_length`; the outputs equal those
of the full-length computation.

How text becomes windows, exactly as fine-tuning saw it:

- Classification packs `[CLS] A [SEP] (B [SEP])`; a pair too long loses wordpieces from the
  end of the currently longer text (the second when equal), as the original
  `_truncate_seq_pair` (`bert_keras.text.truncation`).
- Multiple choice pairs `sent1` with `sent2 + " " + ending<k>` as SWAG fine-tuning does
  (`bert_keras.finetuning.swag.data.choice_texts`), each pair packed and truncated as
  classification's.
- SQuAD follows the original `run_squad.py`: the question cut to `max_query_length`
  wordpieces, windows over the context wordpieces `doc_stride` apart, each start token
  considered only in the window where it has the most context, start and end among the
  `n_best_size` largest logits of the window, at most `max_answer_length` wordpieces long. The
  answer is the context's own text between the first wordpiece's start and the last
  wordpiece's end (original casing, accents and punctuation). At most `max_windows` windows per
  context are run; the rest of a longer context is ignored.
- NER labels each word (a word as the tokenizer's basic tokenization splits it: whitespace,
  then punctuation) from its first wordpiece; long texts are cut into consecutive runs of
  whole words of at most seq_length - 2 wordpieces (as `bert_keras.finetuning.conll.data`), at most
  `max_windows` per text. Entities are chunks of the BIO/IOB1 tags as conlleval reads them.

Character offsets count Unicode code points (Python `str` indices) of the input after invalid
UTF-8 bytes were replaced by U+FFFD; for valid UTF-8 input they index the input itself.

Example:

>>> export_task_from_model_dir("runs/mrpc", "exports/mrpc")  # doctest: +SKIP
>>> import tensorflow as tf, tensorflow_text  # doctest: +SKIP
>>> serve = tf.saved_model.load("exports/mrpc").signatures["serving_default"]  # doctest: +SKIP
>>> serve(text_a=tf.constant(["He left."]), text_b=tf.constant(["He went."]))["label_name"]  # doctest: +SKIP
"""

import json
import logging
import math
import os

import tensorflow as tf

from bert_keras.export.encoder_export import (Exportable, dtype_policy, plain_inference,
                                             run_inference, save_module, tracing_as_saved,
                                             xla_inference)
from bert_keras.export.raw_text import cut_to_longest, pad_positions
from bert_keras.finetuning import catalog
from bert_keras.finetuning.tasks.serving import TaskExportError
from bert_keras.modeldir.model_dir import TASK_CONFIG_NAME, ModelDir

logger = logging.getLogger("bert_keras.export")

DEFAULT_MAX_WINDOWS = 32


# Above this many bytes of weights, the SavedModel keeps them as variables: a graph of
# constants must fit in one 2 GB protocol buffer.
MAX_CONSTANT_BYTES = 1_500_000_000


class ConstantWeightsModel:
    """A Keras model's inference call (`plain_inference`: `training=False`, the real tokens
    only) with its weights folded into the graph as constants, and the model's `head`; what
    `TaskModule` runs when exported with `constant_weights=True`.

    Called like the model on a dict of its inputs; returns the model's outputs.

    >>> import bert_keras, numpy as np
    >>> from bert_keras.finetuning.task_models import build_classifier
    >>> model = build_classifier(bert_keras.BertConfig.from_preset("tiny", vocab_size=50))
    >>> features = {"input_word_ids": np.array([[2, 7, 3, 0]], "int32"),
    ...             "input_mask": np.array([[1, 1, 1, 0]], "int32"),
    ...             "input_type_ids": np.zeros([1, 4], "int32")}
    >>> frozen = ConstantWeightsModel(model)
    >>> bool(np.allclose(frozen(features), model(features), atol=1e-6)), frozen.variables
    (True, [])
    """

    def __init__(self, model):
        from tensorflow.python.framework.convert_to_constants import (
            convert_variables_to_constants_v2)

        self.head = getattr(model, "head", None)
        self.variables, self.trainable_variables = [], []
        self._names = sorted(model.input)
        specs = [tf.TensorSpec(model.input[name].shape, model.input[name].dtype, name=name)
                 for name in self._names]
        call = tf.function(lambda *inputs: plain_inference(model, dict(zip(self._names, inputs))),
                           input_signature=specs)
        concrete = call.get_concrete_function()
        self._structure = concrete.structured_outputs
        # Functional `If`s kept (not lowered to Switch and Merge): the XLA copy compiles them.
        self._frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=False)

    def __call__(self, features, training=False):
        del training  # inference only
        outputs = self._frozen(*[tf.convert_to_tensor(features[name]) for name in self._names])
        outputs = tf.nest.pack_sequence_as(self._structure, outputs)
        # The model's static shapes (e.g. [batch, num_choices] logits), which folding drops.
        for output, spec in zip(tf.nest.flatten(outputs), tf.nest.flatten(self._structure)):
            output.set_shape(spec.shape)
        return outputs


# ------------------------------------------------------------------------------ the module
class TaskModule(Exportable):
    """The raw-text task model: tokenizer + fine-tuned Keras model + post-processing, the last
    from the `Serving` its head's family declares.

    Callable in memory through `serving_default(...)` (keyword string tensors) exactly as after
    loading; `signatures()` gives what `tf.saved_model.save` writes.

    Args:
      tokenizer: an in-graph tokenizer with `tokenize_with_offsets(strings)` returning
        (ids, start_bytes, end_bytes), each ragged [batch, (words), (wordpieces)].
      model: the fine-tuned `keras.Model` (from `bert_keras.finetuning.task_models.load_task_model`).
      task_config: the dict of `task_config.json`.
      special_ids: {"start_of_sequence_id", "end_of_segment_id", "padding_id", ...}.
      seq_length: the window length.
      max_windows: SQuAD and NER: at most this many windows per text.
      xla_batch_1: a batch of one runs an XLA-compiled copy of the model (`xla_inference`).
    """

    def __init__(self, tokenizer, model, task_config, special_ids, seq_length, max_windows=None,
                 xla_batch_1=False):
        super().__init__()
        self.tokenizer = tokenizer
        object.__setattr__(self, "_model", model)
        object.__setattr__(self, "_xla_model", xla_inference(model, xla_batch_1))
        self._task_config = dict(task_config)
        serving = _serving(task_config.get("head"))(self)
        object.__setattr__(self, "_serving", serving)
        self._seq_length = int(seq_length)
        self._max_windows = int(max_windows or DEFAULT_MAX_WINDOWS)
        self._cls = int(special_ids["start_of_sequence_id"])
        self._sep = int(special_ids["end_of_segment_id"])
        self._pad = int(special_ids["padding_id"])
        if self._seq_length < serving.min_seq_length:
            raise TaskExportError(f"seq_length {seq_length} is too short for the "
                                  f"{task_config['head']} head")

        self.variables = list(model.variables)
        self.trainable_variables = list(model.trainable_variables)
        # Trackable so that `loaded.seq_length.numpy()` tells a client the window length.
        self.seq_length = tf.Variable(self._seq_length, trainable=False, name="seq_length")

        serving.build()
        self.serving_default = checked_shapes(self.serving_default)
        with tracing_as_saved():
            self.serving_default.get_concrete_function()

    def signatures(self):
        return {"serving_default": self.serving_default.get_concrete_function()}

    def _tokenize(self, text):
        """(ids, start_bytes, end_bytes), ragged int [batch, (words), (wordpieces)]."""
        ids, starts, ends = self.tokenizer.tokenize_with_offsets(text)
        return (tf.cast(ids, tf.int32), tf.cast(starts, tf.int32), tf.cast(ends, tf.int32))

    def _run_model(self, features):
        """The model on `features` cut to the batch's longest sequence (`cut_to_longest`);
        per-position outputs [windows, length, ...] are padded back to seq_length."""
        features, length = cut_to_longest(features, self._seq_length)
        outputs = run_inference(self._model, features, self._xla_model)
        padding = self._serving.position_padding
        if padding is None:
            return outputs
        return tf.nest.map_structure(
            lambda value: pad_positions(value, self._seq_length, padding), outputs)


def _shape_words(shape):
    return "_by_".join("batch" if index == 0 else str(size) if size is not None else "n"
                       for index, size in enumerate(shape)) or "scalar"


def checked_shapes(function):
    """`function` (a `tf.function` with an input signature) checking at run time that each
    input has its spec's rank and sizes, under the same argument names.

    A signature (`signatures["serving_default"]`, TF Serving) passes tensors of any shape to
    its inputs: a [1, 2] batch of strings into a [batch] input was read as 2 texts (2 results),
    a scalar failed in a slice. `tf.ensure_shape` refuses them in the graph, naming the input
    and the shape expected: "Shape of tensor text_a [1,2] is not compatible with expected shape
    [?]". The inputs are checked in order, so that of several bad ones the first is named.
    Its cost is a shape comparison per input.
    """
    import inspect

    specs = list(function.input_signature)
    names = [spec.name for spec in specs]

    def call(*args, **kwargs):
        inputs = dict(zip(names, args), **kwargs)
        checked = []
        for spec in specs:  # in order: of several bad inputs, the first is the one named
            with tf.control_dependencies(checked[-1:]):
                checked.append(tf.ensure_shape(
                    inputs[spec.name], spec.shape,
                    name=f"{spec.name}_must_be_{_shape_words(spec.shape)}"))
        return function(*checked)

    call.__signature__ = inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in names])
    call.__name__ = getattr(function, "__name__", "serving_default")
    return tf.function(call, input_signature=specs, autograph=False)


def _serving(head):
    """The `Serving` class of a head; TaskExportError naming the heads served from raw text."""
    served = catalog.served_heads()
    if head not in served:
        raise TaskExportError(f"head {head!r} of task_config.json cannot be served from raw "
                              f"text; supported: {', '.join(served)}")
    return catalog.family_of_head(head).serving[head]


# ------------------------------------------------------------------------------- exporting
def build_task_module(model_dir, seq_length=None, dtype="float32", max_windows=None,
                      tokenizer=None, xla_batch_1=False, constant_weights=False):
    """The exportable raw-text task model of a fine-tuned model directory (`xla_batch_1`:
    float32 models run a batch of one through an XLA-compiled copy; see `ExportOptions`).

    `constant_weights`: fold the weights into the serving graph (`ConstantWeightsModel`, up to
    `MAX_CONSTANT_BYTES`) instead of keeping them as variables: the same outputs, no faster on
    the CPUs measured, and a first request seconds slower in every fresh process."""
    from bert_keras.finetuning.task_models import load_task_model

    model_dir = ModelDir.of(model_dir)
    task_config = model_dir.task_config
    if task_config is None:
        raise TaskExportError(f"{model_dir.path}: no {TASK_CONFIG_NAME}; --kind=task needs "
                              "a fine-tuned model directory (tools/run_finetuning.py writes one)")
    head = task_config.get("head")
    if head not in catalog.served_heads():
        raise TaskExportError(f"{model_dir.path}: head {head!r} cannot be served from raw text; "
                              f"supported heads: {', '.join(catalog.served_heads())}")
    seq_length = int(seq_length or task_config.get("max_seq_length") or 128)
    model_dir.check_seq_length(seq_length, "--seq_length", TaskExportError)
    model, task_config = load_task_model(model_dir, dtype=dtype_policy(dtype))
    weight_bytes = sum(math.prod(v.shape) * 4 for v in model.weights)
    if constant_weights and weight_bytes <= MAX_CONSTANT_BYTES:
        model = ConstantWeightsModel(model)
    elif constant_weights:
        logger.info("%s: %.1f GB of weights: kept as variables (a graph of constants must fit "
                    "in 2 GB)", model_dir.path, weight_bytes / 1e9)
    if tokenizer is None:
        from bert_keras.export.preprocessor_export import build_tokenizer

        tokenizer = build_tokenizer(model_dir)
    special_ids = model_dir.vocab.special_ids()
    return TaskModule(tokenizer, model, task_config, special_ids, seq_length, max_windows,
                      xla_batch_1=xla_batch_1 and dtype == "float32")


def save_task_module(module, export_dir):
    """Writes a `TaskModule` as a SavedModel, with its task_config.json in assets.extra/."""
    save_module(module, export_dir)
    extra = os.path.join(export_dir, "assets.extra")
    os.makedirs(extra, exist_ok=True)
    with open(os.path.join(extra, TASK_CONFIG_NAME), "w", encoding="utf-8") as f:
        json.dump(module._task_config, f, indent=2, sort_keys=True)
    return export_dir


def export_task_from_model_dir(model_dir, export_dir, seq_length=None, dtype="float32",
                               max_windows=None, xla_batch_1=False, constant_weights=False):
    """Writes the raw-text task SavedModel of a fine-tuned model directory; returns export_dir."""
    return save_task_module(build_task_module(model_dir, seq_length, dtype, max_windows,
                                              xla_batch_1=xla_batch_1,
                                              constant_weights=constant_weights), export_dir)


__all__ = ["TaskModule", "ConstantWeightsModel", "TaskExportError", "build_task_module",
           "save_task_module", "export_task_from_model_dir"]
