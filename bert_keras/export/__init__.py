"""SavedModel export: TF Hub-style encoder and preprocessor, raw-text task models; and a
TensorFlow Lite export for serving one text at a time on a CPU (`lite`).

Every SavedModel loads with only TensorFlow and tensorflow-text:

    import tensorflow as tf
    import tensorflow_text  # registers the tokenizer ops; must come before the load
    obj = tf.saved_model.load(export_dir)

A lite export is served by `bert_keras.export.lite.LiteModel`, without TensorFlow. Importing
this package does not import TensorFlow; exporting does. See docs/export.md.
"""

import json
import os

from bert_keras.common.files import DirectoryInUseError, atomic_directory, write_text_atomic
from bert_keras.export.options import KINDS, ExportOptions

# Imported on first use: `bert_keras.export.lite` serves without TensorFlow.
_ENCODER_EXPORTS = ("EncoderModule", "build_encoder_module", "export_encoder",
                    "export_encoder_from_model_dir")


def __getattr__(name):
    if name in _ENCODER_EXPORTS:
        from bert_keras.export import encoder_export

        return getattr(encoder_export, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


EXPORT_INFO_NAME = "export_info.json"


def export_from_model_dir(kind, model_dir, export_dir, seq_length=None, dtype="float32",
                          max_windows=None, xla_batch_1=False):
    """Exports `model_dir` as one kind: a SavedModel ("preprocessor", "encoder" or "task") or
    a TensorFlow Lite model with its vocabulary ("lite", float32; `bert_keras.export.lite`).

    `seq_length`: the preprocessor's default packed length (128 when None) or the task and
    lite models' window length (task_config.json's max_seq_length when None, else 128);
    unused by the encoder.
    `dtype`: "float32" or "bfloat16" for the encoder and task graphs; "float32" or "int8"
    (dynamic-range quantized weights) for a lite export.
    `max_windows`: task models for SQuAD and NER read at most this many windows of a text
    (default 32).
    `xla_batch_1`: float32 encoder and task graphs run inference on a batch of one through an
    XLA-compiled copy of the model (`ExportOptions.xla_batch_1`).
    What was exported is recorded in `assets.extra/export_info.json` (`read_export_info`):
    kind, dtype (None for the preprocessor, which has no weights) and the model directory.

    A SavedModel is a TensorFlow graph: in a process whose Keras runs on another backend (JAX
    on a Colab TPU), the export runs in a child process on the TensorFlow backend, on the CPU.
    """
    _check_request(kind, dtype)
    import keras

    if keras.backend.backend() != "tensorflow":
        return export_many([dict(
            kind=kind, model_dir=model_dir, export_dir=export_dir, seq_length=seq_length,
            dtype=dtype, max_windows=max_windows, xla_batch_1=xla_batch_1)])[0]
    # Written beside export_dir and renamed into place: a killed export leaves no half-written
    # SavedModel; an earlier export is replaced, any other non-empty directory refused.
    try:
        with atomic_directory(export_dir, replaceable=_is_export) as temporary:
            _export_into(kind, model_dir, temporary, seq_length, dtype, max_windows,
                         xla_batch_1)
    except DirectoryInUseError as error:
        raise ValueError(f"--export_dir: {error}") from None
    return export_dir


def export_many(exports):
    """Several exports: `exports` is a list of dicts of `export_from_model_dir`'s arguments.
    Returns their export directories.

    The same as one `export_from_model_dir` call each, except on a backend other than
    TensorFlow: there all of them run in one child process, which starts TensorFlow once.

    >>> export_many([dict(kind="preprocessor", model_dir="models/minilm",  # doctest: +SKIP
    ...                   export_dir="exports/preprocessor", seq_length=128),
    ...              dict(kind="encoder", model_dir="models/minilm",
    ...                   export_dir="exports/encoder")])
    ['exports/preprocessor', 'exports/encoder']
    """
    import keras

    exports = [dict(request) for request in exports]
    for request in exports:
        _check_request(request.get("kind"), request.get("dtype", "float32"))
    if exports and keras.backend.backend() != "tensorflow":
        return _export_in_tensorflow_process(exports)
    return [export_from_model_dir(**request) for request in exports]


def _check_request(kind, dtype):
    if kind not in KINDS:
        raise ValueError(f"unknown export kind {kind!r}; use one of {KINDS}")
    if kind == "lite" and dtype not in ("float32", "int8"):
        raise ValueError(f"--dtype: a lite export is float32 or int8, got {dtype!r}")
    if kind != "lite" and dtype == "int8":
        raise ValueError(f"--dtype: int8 is for --kind=lite only (the {kind} SavedModel is "
                         "float32 or bfloat16)")


def _export_in_tensorflow_process(exports):
    import subprocess
    import sys

    exports = [{name: os.fspath(value) if isinstance(value, os.PathLike) else value
                for name, value in request.items()} for request in exports]
    # CPU only: the accelerator stays with this process (JAX holds a TPU, or a GPU's memory).
    env = dict(os.environ, KERAS_BACKEND="tensorflow", CUDA_VISIBLE_DEVICES="",
               TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    code = ("import json, sys; from bert_keras.export import export_many; "
            "export_many(json.loads(sys.argv[1]))")
    process = subprocess.run([sys.executable, "-c", code, json.dumps(exports)], env=env,
                             capture_output=True, text=True)
    if process.returncode:
        what = ", ".join(f"{request['model_dir']} as a {request['kind']} SavedModel"
                         for request in exports)
        raise RuntimeError(f"exporting {what} on the TensorFlow backend failed:\n"
                           f"{process.stderr[-4000:]}")
    return [request["export_dir"] for request in exports]


# What a SavedModel directory holds; an export replaces an earlier one with nothing else in it.
_SAVEDMODEL_ENTRIES = {"saved_model.pb", "variables", "assets", "assets.extra", "fingerprint.pb"}


def _is_export(path):
    from bert_keras.export.lite import LITE_ENTRIES

    entries = _SAVEDMODEL_ENTRIES | set(LITE_ENTRIES)
    return bool(read_export_info(path)) and set(os.listdir(path)) <= entries


def _export_into(kind, model_dir, export_dir, seq_length, dtype, max_windows, xla_batch_1):
    if kind == "encoder":
        from bert_keras.export.encoder_export import export_encoder_from_model_dir

        export_encoder_from_model_dir(model_dir, export_dir, dtype=dtype, xla_batch_1=xla_batch_1)
    elif kind == "lite":
        from bert_keras.export.lite import export_lite_from_model_dir

        export_lite_from_model_dir(model_dir, export_dir, seq_length=seq_length, dtype=dtype)
    elif kind == "preprocessor":
        from bert_keras.export.preprocessor_export import export_preprocessor_from_model_dir
        export_preprocessor_from_model_dir(model_dir, export_dir, seq_length=seq_length or 128)
    else:
        from bert_keras.export.task_export import export_task_from_model_dir
        export_task_from_model_dir(model_dir, export_dir, seq_length=seq_length, dtype=dtype,
                                   max_windows=max_windows, xla_batch_1=xla_batch_1)
    info = {"kind": kind, "dtype": None if kind == "preprocessor" else dtype,
            "model_dir": os.path.abspath(os.fspath(model_dir))}
    if kind in ("encoder", "task"):
        info["xla_batch_1"] = bool(xla_batch_1 and dtype == "float32")
    write_text_atomic(os.path.join(export_dir, "assets.extra", EXPORT_INFO_NAME),
                      json.dumps(info, indent=2, sort_keys=True) + "\n")


def read_export_info(export_dir):
    """The `export_info.json` of a SavedModel written by `export_from_model_dir` ({} if none)."""
    path = os.path.join(os.fspath(export_dir), "assets.extra", EXPORT_INFO_NAME)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


__all__ = ["ExportOptions", "EncoderModule", "build_encoder_module", "export_encoder",
           "read_export_info", "EXPORT_INFO_NAME",
           "export_encoder_from_model_dir", "export_from_model_dir", "export_many", "KINDS"]
