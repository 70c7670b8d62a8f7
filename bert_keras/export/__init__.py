"""SavedModel export: TF Hub-style encoder and preprocessor, raw-text task models.

Every export loads with only TensorFlow and tensorflow-text:

    import tensorflow as tf
    import tensorflow_text  # registers the tokenizer ops; must come before the load
    obj = tf.saved_model.load(export_dir)

See docs/export.md.
"""

from bert_keras.export.encoder_export import (
    EncoderModule, build_encoder_module, export_encoder, export_encoder_from_model_dir)
from bert_keras.export.options import KINDS, ExportOptions


def export_from_model_dir(kind, model_dir, export_dir, seq_length=None, dtype="float32",
                          max_windows=None):
    """Exports `model_dir` as a SavedModel of one kind ("preprocessor", "encoder" or "task").

    `seq_length`: the preprocessor's default packed length (128 when None) or the task model's
    window length (task_config.json's max_seq_length when None); unused by the encoder.
    `dtype`: "float32" or "bfloat16" for the encoder and task graphs.
    `max_windows`: task models for SQuAD and NER read at most this many windows of a text
    (default 32).
    """
    if kind == "encoder":
        return export_encoder_from_model_dir(model_dir, export_dir, dtype=dtype)
    if kind == "preprocessor":
        from bert_keras.export.preprocessor_export import export_preprocessor_from_model_dir
        return export_preprocessor_from_model_dir(model_dir, export_dir,
                                                  seq_length=seq_length or 128)
    if kind == "task":
        from bert_keras.export.task_export import export_task_from_model_dir
        return export_task_from_model_dir(model_dir, export_dir, seq_length=seq_length,
                                          dtype=dtype, max_windows=max_windows)
    raise ValueError(f"unknown export kind {kind!r}; use one of {KINDS}")


__all__ = ["ExportOptions", "EncoderModule", "build_encoder_module", "export_encoder",
           "export_encoder_from_model_dir", "export_from_model_dir", "KINDS"]
