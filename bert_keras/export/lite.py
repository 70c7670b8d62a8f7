"""TensorFlow Lite export for CPU serving of one text (or a few) at a time, without TensorFlow.

At a batch of one, a BERT encoder is its weight matmuls at a few rows. TensorFlow's and XLA's
CPU matmuls prepare ("pack") each weight matrix on every call, which at a few rows is most of
the work; TensorFlow Lite's XNNPACK kernels pack the weights once, when the model loads (as
ONNX Runtime does). On a 2-core CPU this serves a short sentence through MiniLM in about a
third of the SavedModel's time (`docs/benchmarks.md`). Large batches stay the SavedModel's
job: it computes the real tokens only, TensorFlow Lite every padded position.

`export_from_model_dir("lite", model_dir, export_dir)` (or `tools/export_savedmodel.py
--kind=lite`) writes a directory:

- `model.tflite`: float32 (or, with `dtype="int8"`, int8 weight matrices: dynamic-range
  quantization), the weights inside; its `serving_default` signature takes int32
  [batch, seq_length] `input_word_ids`, `input_mask`, `input_type_ids` and returns the
  encoder's `pooled_output` [batch, hidden] and `sequence_output` [batch, seq_length, hidden]
  (a pre-trained model directory) or the fine-tuned head's `logits` [batch, outputs] (a
  fine-tuned classification or regression directory, e.g. GLUE);
- `vocab.txt` and `lite_config.json` (casing, special ids, window length, labels);
- `assets.extra/export_info.json`, as every export (`read_export_info`).

`LiteModel` serves such a directory from raw text. It needs NumPy and a TensorFlow Lite
interpreter: `ai-edge-litert` (`pip install ai-edge-litert`, a 1-second start-up), else
TensorFlow's own `tf.lite.Interpreter`. Texts are tokenized in plain Python with the original
`tokenization.py` ids (`bert_keras.text.python_tokenizer`) and packed as fine-tuning packs them:
`[CLS] A [SEP] (B [SEP])`, a pair too long losing wordpieces from the end of the longer text
(`bert_keras.finetuning.tasks.encoding.pack`), the batch padded to its longest sequence. Its outputs equal
the SavedModel exports' (`task` for a fine-tuned directory: `logits`, `probabilities`,
`label_id`, `label_name`, or `score` for regression; `encoder`: `pooled_output`,
`sequence_output` with zeros at padding) within float32 rounding.

Example (a fine-tuned MRPC directory):

>>> from bert_keras.export import export_from_model_dir  # doctest: +SKIP
>>> export_from_model_dir("lite", "runs/mrpc", "exports/mrpc_lite")  # doctest: +SKIP
>>> from bert_keras.export.lite import LiteModel  # doctest: +SKIP
>>> LiteModel("exports/mrpc_lite")(["He left."], ["He went away."])["label_name"]  # doctest: +SKIP
array(['1'], dtype=object)
"""

import json
import os
import shutil
import threading

import numpy as np

from bert_keras.finetuning.tasks.encoding import pack
from bert_keras.text.python_tokenizer import PythonBertTokenizer

LITE_MODEL_NAME = "model.tflite"
LITE_CONFIG_NAME = "lite_config.json"
LITE_VOCAB_NAME = "vocab.txt"
# What a lite export directory holds (besides assets.extra/).
LITE_ENTRIES = (LITE_MODEL_NAME, LITE_CONFIG_NAME, LITE_VOCAB_NAME)
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")
LITE_DTYPES = ("float32", "int8")
# The largest difference allowed between the converted model and the Keras model on the
# export's check window: float32 (outputs of order 1), and int8 as a share of the outputs'
# largest magnitude, or of 1 when that is smaller (a broken quantization is off by about the
# magnitude itself).
CONVERSION_TOLERANCE = 1e-3
INT8_RELATIVE_TOLERANCE = 0.1


class LiteExportError(ValueError):
    """A model directory that cannot be exported as a lite model, or a bad lite export."""


# ---------------------------------------------------------------------------------- export
def export_lite_from_model_dir(model_dir, export_dir, seq_length=None, dtype="float32"):
    """Writes the lite export of `model_dir` into the existing directory `export_dir`.

    `seq_length`: the longest window a request is cut to (default: task_config.json's
    max_seq_length for a fine-tuned directory, else 128); at most max_position_embeddings.
    `dtype`: "float32", or "int8": TensorFlow Lite's dynamic-range quantization (the weight
    matrices stored as int8 with a scale per output channel, each layer's input quantized on
    the fly, everything else float32), a model about 4x smaller and faster at a batch of one.
    Raises `LiteExportError` for a head other than classification or regression, and when the
    converted model's outputs differ from the Keras model's on a check window (float32: by more
    than 1e-3; int8: by more than a tenth of the outputs' largest magnitude, or of 1 when that is
    smaller).
    """
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    from bert_keras.model.layers.unpadding import unpadded_inference
    from bert_keras.modeldir.model_dir import ModelDir

    from bert_keras.export.leftovers import remove_stale_temporaries

    remove_stale_temporaries(export_dir)
    model_dir = ModelDir.of(model_dir)
    task_config = model_dir.task_config
    if dtype not in LITE_DTYPES:
        raise LiteExportError(f"--dtype: a lite export is one of {LITE_DTYPES}, got {dtype!r}")
    lite_config = {"lower_case": model_dir.do_lower_case, "dtype": dtype,
                   "vocab_size": int(model_dir.config.vocab_size), **model_dir.vocab.special_ids()}
    if task_config is None:
        model, _ = _encoder(model_dir)
        lite_config.update(kind="encoder", outputs=["pooled_output", "sequence_output"],
                           text_pair=None)
        default_length = 128
    else:
        model, lite_fields = _task_model(model_dir, task_config)
        # The family's fields: the model's outputs, text_pair, label names.
        lite_config.update(kind=task_config["head"], task=task_config.get("task"),
                           **lite_fields(task_config, model))
        default_length = task_config.get("max_seq_length") or 128
    seq_length = int(seq_length or default_length)
    if seq_length < 3:  # [CLS], a token, [SEP]
        raise LiteExportError(f"--seq_length: {seq_length} must be at least 3")
    model_dir.check_seq_length(seq_length, "--seq_length", LiteExportError)
    lite_config["seq_length"] = seq_length

    specs = [tf.TensorSpec([None, None], tf.int32, name=name) for name in INPUT_NAMES]

    def call(input_word_ids, input_mask, input_type_ids):
        features = {"input_word_ids": input_word_ids, "input_mask": input_mask,
                    "input_type_ids": input_type_ids}
        # Every position computed (no data-dependent gathers): the request is cut to its
        # longest text already, and TensorFlow Lite runs static graphs best.
        with unpadded_inference(False):
            outputs = model(features, training=False)
        if not isinstance(outputs, dict):  # a head of one output
            outputs = {lite_config["outputs"][0]: outputs}
        return {name: tf.cast(outputs[name], tf.float32) for name in lite_config["outputs"]}

    concrete = tf.function(call, input_signature=specs, autograph=False).get_concrete_function()
    frozen = convert_variables_to_constants_v2(concrete)
    converter = tf.lite.TFLiteConverter.from_concrete_functions([frozen], tf.Module())
    if dtype == "int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]  # dynamic range: int8 weights
    try:
        flatbuffer = converter.convert()
    except Exception as error:  # the converter's errors are of several internal types
        message = next((line for line in str(error).splitlines() if "error:" in line), str(error))
        raise LiteExportError(f"{model_dir.path}: TensorFlow Lite cannot convert this model "
                              f"({message.strip()[:300]}); --kind=encoder and --kind=task "
                              "export it as a SavedModel") from error

    with open(os.path.join(export_dir, LITE_MODEL_NAME), "wb") as f:
        f.write(flatbuffer)
    shutil.copyfile(model_dir.vocab_file, os.path.join(export_dir, LITE_VOCAB_NAME))
    with open(os.path.join(export_dir, LITE_CONFIG_NAME), "w", encoding="utf-8") as f:
        json.dump(lite_config, f, indent=2, sort_keys=True)
        f.write("\n")
    _check_conversion(export_dir, concrete, lite_config)
    return export_dir


def _encoder(model_dir):
    from bert_keras.export.encoder_export import build_keras_models

    return build_keras_models(model_dir.config, model_dir.weights, "float32", with_mlm=False,
                              source=model_dir.weights_file)


def _task_model(model_dir, task_config):
    """(the fine-tuned model, the lite mapping its head's family declares)."""
    from bert_keras.finetuning import catalog
    from bert_keras.finetuning.task_models import load_task_model

    head = task_config.get("head")
    if head not in catalog.lite_heads():
        raise LiteExportError(
            f"{model_dir.path}: head {head!r} has no lite export; --kind=lite serves the encoder "
            f"of a pre-trained directory and the {' and '.join(catalog.lite_heads())} heads "
            "(--kind=task exports every head as a SavedModel)")
    model, _ = load_task_model(model_dir, dtype="float32")
    return model, catalog.family_of_head(head).lite[head]


def _check_conversion(export_dir, concrete, lite_config):
    """The converted model against the Keras model on a window of every token kind."""
    import tensorflow as tf

    ids = np.array([[lite_config["start_of_sequence_id"], lite_config["unknown_id"],
                     lite_config["mask_id"], lite_config["end_of_segment_id"],
                     lite_config["padding_id"]]], np.int32)
    features = {"input_word_ids": ids, "input_mask": np.array([[1, 1, 1, 1, 0]], np.int32),
                "input_type_ids": np.array([[0, 0, 1, 1, 0]], np.int32)}
    expected = concrete(**{name: tf.constant(value) for name, value in features.items()})
    served = _Runner(os.path.join(export_dir, LITE_MODEL_NAME), lite_config["outputs"], 1)
    got = served(features)
    for name in lite_config["outputs"]:
        difference = float(np.max(np.abs(got[name] - expected[name].numpy())))
        tolerance = CONVERSION_TOLERANCE
        if lite_config["dtype"] == "int8":
            tolerance = INT8_RELATIVE_TOLERANCE * max(
                1.0, float(np.max(np.abs(expected[name].numpy()))))
        if not difference <= tolerance:
            raise LiteExportError(f"{export_dir}: the TensorFlow Lite model's {name} differs from "
                                  f"the Keras model's by {difference:.3g} (allowed: "
                                  f"{tolerance:.3g})")


# --------------------------------------------------------------------------------- serving
def _interpreter_class():
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        try:
            import tensorflow as tf
        except ImportError:
            raise ImportError("serving a lite export needs a TensorFlow Lite interpreter: "
                              "pip install ai-edge-litert (or tensorflow)") from None
        Interpreter = tf.lite.Interpreter
    return Interpreter


class _Runner:
    """`model.tflite`'s `serving_default` on a dict of int32 inputs; outputs by name. The
    interpreter is resized only when the inputs' shape changes (its signature runner
    re-plans every call)."""

    def __init__(self, path, output_names, num_threads):
        if not os.path.isfile(path):
            raise LiteExportError(f"{path}: missing; a lite export holds {', '.join(LITE_ENTRIES)} "
                                  "(tools/export_savedmodel.py --kind=lite writes them)")
        try:
            self._interpreter = _interpreter_class()(model_path=path, num_threads=num_threads)
            signature = self._interpreter.get_signature_runner("serving_default")
        except (ValueError, RuntimeError) as error:  # the interpreter names no file
            raise LiteExportError(f"{path}: not a readable TensorFlow Lite model ({error}); the "
                                  "file is truncated or damaged: export it again") from error
        # The converter names the outputs output_0, output_1, ... in the order of their
        # sorted names (the order TensorFlow flattens a dict in).
        names = {f"output_{index}": name for index, name in enumerate(sorted(output_names))}
        inputs, outputs = signature.get_input_details(), signature.get_output_details()
        if sorted(inputs) != sorted(INPUT_NAMES) or sorted(outputs) != sorted(names):
            raise LiteExportError(f"{path}: its signature takes {sorted(inputs)} and gives "
                                  f"{len(outputs)} outputs; {LITE_CONFIG_NAME} beside it expects "
                                  f"{sorted(INPUT_NAMES)} and {sorted(output_names)}: the two "
                                  "files are of different exports")
        self._inputs = {name: detail["index"] for name, detail in inputs.items()}
        self._outputs = {names[key]: detail["index"] for key, detail in outputs.items()}
        # {output name: its shape, -1 where it varies (batch, length)}: an empty batch's shape.
        self.output_shapes = {names[key]: [int(size) for size in detail["shape_signature"]]
                              for key, detail in outputs.items()}
        self._shape = None

    def __call__(self, features):
        interpreter = self._interpreter
        shape = features["input_word_ids"].shape
        if shape != self._shape:
            for index in self._inputs.values():
                interpreter.resize_tensor_input(index, shape)
            interpreter.allocate_tensors()
            self._shape = shape
        for name, index in self._inputs.items():
            interpreter.set_tensor(index, np.ascontiguousarray(features[name], np.int32))
        interpreter.invoke()
        return {name: interpreter.get_tensor(index) for name, index in self._outputs.items()}


# The fields of lite_config.json a served export needs ("vocab_size" only from exports that
# record it), and the types of their values.
_CONFIG_FIELDS = {"kind": str, "seq_length": int, "lower_case": bool, "outputs": list,
                  "start_of_sequence_id": int, "end_of_segment_id": int, "padding_id": int}


def read_lite_config(export_dir):
    """The dict of `export_dir`'s lite_config.json; `LiteExportError` naming the file when it is
    missing, not JSON (a truncated copy) or lacks a field."""
    path = os.path.join(export_dir, LITE_CONFIG_NAME)
    if not os.path.isfile(path):
        raise LiteExportError(f"{export_dir}: no {LITE_CONFIG_NAME}; not a lite export "
                              "(tools/export_savedmodel.py --kind=lite writes one)")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (ValueError, UnicodeDecodeError) as error:
        raise LiteExportError(f"{path}: not valid JSON ({error}); the file is truncated or "
                              "damaged: export it again") from None
    if not isinstance(config, dict):
        raise LiteExportError(f"{path}: holds a {type(config).__name__}, not a JSON object")
    for name, kind in _CONFIG_FIELDS.items():
        if not isinstance(config.get(name), kind):
            raise LiteExportError(f"{path}: field {name!r} missing or not a "
                                  f"{kind.__name__} ({config.get(name)!r}); export it again")
    if config["kind"] == "classification" and not isinstance(config.get("label_names"), list):
        raise LiteExportError(f"{path}: a classifier's label_names are missing")
    return config


def _check_vocabulary(export_dir, config):
    """The vocabulary against the model: a vocab.txt of another size than the model's table
    would serve wrong ids without a word."""
    from bert_keras.text.vocab import Vocabulary

    path = os.path.join(export_dir, LITE_VOCAB_NAME)
    size = len(Vocabulary.from_file(path).tokens)
    expected = config.get("vocab_size")
    if expected is not None and size != expected:
        raise LiteExportError(f"{path}: {size} tokens, but the model was trained with a "
                              f"vocabulary of {expected} ({LITE_CONFIG_NAME}'s vocab_size); "
                              "this is not the export's vocab.txt")
    for name in ("start_of_sequence_id", "end_of_segment_id", "padding_id", "unknown_id"):
        if name in config and not 0 <= config[name] < size:
            raise LiteExportError(f"{path}: {size} tokens, but {LITE_CONFIG_NAME}'s {name} is "
                                  f"{config[name]}; this is not the export's vocab.txt")


def _texts(value, name):
    """A list of str from one text (str or UTF-8 bytes) or a sequence of them; `TypeError`
    for anything else (a dict would otherwise be read as its keys, a number as a text)."""
    if isinstance(value, (str, bytes)):
        return [value]
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name}: expected a str or a list of str (one text per row), got "
                        f"{type(value).__name__}")
    for index, text in enumerate(value):
        if not isinstance(text, (str, bytes)):
            raise TypeError(f"{name}[{index}]: expected a str (one text per row), got "
                            f"{type(text).__name__}")
    return list(value)


class LiteModel:
    """A lite export, served from raw text (see the module docstring).

    Args:
      export_dir: a directory written by `export_from_model_dir("lite", ...)`.
      num_threads: the interpreter's threads (default: the machine's cores).

    Loading checks the export: `LiteExportError` naming the file when lite_config.json or
    model.tflite is truncated or damaged, or when vocab.txt is not the model's vocabulary (its
    size against lite_config.json's `vocab_size`, recorded by exports since it was added, and
    the special ids).

    Call with `text_a` (a list of str, or one str) and, for sentence pairs, `text_b` of the
    same length; anything else (a dict, a number, nested lists) is a `TypeError`. Returns a
    dict of NumPy arrays with one row per text, an empty batch included:

    - a fine-tuned classifier: `logits`, `probabilities` float32 [batch, labels], `label_id`
      int32 [batch], `label_name` object (str) [batch]; regression: `score` float32 [batch];
    - an encoder: `pooled_output` float32 [batch, hidden], `sequence_output` float32
      [batch, longest, hidden] (zeros at padding), and the packed `input_mask`.

    `features(text_a, text_b)` gives the packed int32 inputs alone.

    Threads: one `LiteModel` may be shared by any number of threads. A TensorFlow Lite
    interpreter holds the tensors of the call it runs, so calls take turns on it (a lock);
    for calls in parallel, give each thread its own `LiteModel` (each holds a copy of the
    model, e.g. `num_threads=1` each).
    """

    def __init__(self, export_dir, num_threads=None):
        self.export_dir = os.fspath(export_dir)
        if not os.path.isdir(self.export_dir):
            raise LiteExportError(f"{self.export_dir}: no such directory")
        self.config = read_lite_config(self.export_dir)
        self.kind = self.config["kind"]
        self.seq_length = int(self.config["seq_length"])
        vocab_path = os.path.join(self.export_dir, LITE_VOCAB_NAME)
        if not os.path.isfile(vocab_path):
            raise LiteExportError(f"{vocab_path}: missing; a lite export holds "
                                  f"{', '.join(LITE_ENTRIES)}")
        try:
            self.tokenizer = PythonBertTokenizer(vocab_path, self.config["lower_case"])
        except (ValueError, UnicodeDecodeError) as error:
            raise LiteExportError(f"{vocab_path}: not a vocabulary ({error})") from None
        _check_vocabulary(self.export_dir, self.config)
        self._runner = _Runner(os.path.join(self.export_dir, LITE_MODEL_NAME),
                               self.config["outputs"], int(num_threads or os.cpu_count() or 1))
        self._lock = threading.Lock()

    def features(self, text_a, text_b=None):
        """The packed inputs: int32 [batch, longest] `input_word_ids`, `input_mask`,
        `input_type_ids`, as fine-tuning and the SavedModel exports pack them."""
        text_a = _texts(text_a, "text_a")
        pair = self.config.get("text_pair")
        if text_b is not None:
            text_b = _texts(text_b, "text_b")
            if pair is False:
                raise LiteExportError(f"{self.export_dir}: this task takes one text; got text_b")
            if len(text_b) != len(text_a):
                raise LiteExportError(f"text_b has {len(text_b)} texts, text_a {len(text_a)}")
        elif pair:
            raise LiteExportError(f"{self.export_dir}: this task takes text pairs; text_b missing")
        # Fine-tuning's packing and pair truncation, padded to seq_length, then cut to the
        # batch's longest sequence.
        rows = [pack(self.tokenizer.tokenize(text),
                     None if text_b is None else self.tokenizer.tokenize(text_b[index]),
                     self.config["start_of_sequence_id"], self.config["end_of_segment_id"],
                     self.config["padding_id"], self.seq_length)
                for index, text in enumerate(text_a)]
        ids, mask, types = (np.array([row[part] for row in rows], np.int32)
                            .reshape(len(rows), self.seq_length) for part in range(3))
        longest = int(mask.sum(axis=1).max(initial=2))
        return {"input_word_ids": ids[:, :longest], "input_mask": mask[:, :longest],
                "input_type_ids": types[:, :longest]}

    def __call__(self, text_a, text_b=None):
        features = self.features(text_a, text_b)
        if not len(features["input_word_ids"]):
            return self._empty()
        with self._lock:  # the interpreter's tensors belong to one call at a time
            outputs = self._runner(features)
        if self.kind == "encoder":
            return {"pooled_output": outputs["pooled_output"],
                    "sequence_output": outputs["sequence_output"] * features["input_mask"][:, :, None],
                    "input_mask": features["input_mask"]}
        logits = outputs["logits"]
        if self.kind == "regression":
            return {"score": logits[:, 0]}
        shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
        label_id = logits.argmax(axis=-1).astype(np.int32)
        return {"logits": logits, "probabilities": shifted / shifted.sum(axis=-1, keepdims=True),
                "label_id": label_id,
                "label_name": np.array(self.config["label_names"], object)[label_id]}

    def _empty(self):
        """The outputs of no text: each of its shape with 0 rows (and length 0)."""
        def zeros(name):
            return np.zeros([max(size, 0) for size in self._runner.output_shapes[name]],
                            np.float32)

        if self.kind == "encoder":
            return {"pooled_output": zeros("pooled_output"),
                    "sequence_output": zeros("sequence_output"),
                    "input_mask": np.zeros([0, 0], np.int32)}
        if self.kind == "regression":
            return {"score": np.zeros([0], np.float32)}
        return {"logits": zeros("logits"), "probabilities": zeros("logits"),
                "label_id": np.zeros([0], np.int32), "label_name": np.zeros([0], object)}


__all__ = ["LiteModel", "LiteExportError", "export_lite_from_model_dir", "read_lite_config", "LITE_DTYPES",
           "LITE_MODEL_NAME", "LITE_CONFIG_NAME"]
