"""The settings of one export (`ExportOptions`), declared once; `tools/export_savedmodel.py`'s
flags come from them.

A SavedModel is float32 unless bfloat16 is asked for: an export must not depend on the CPU
that wrote it (`dtype="auto"` picks bfloat16 only where the exporting machine computes it
natively, for a model served on that same kind of machine).
"""

import dataclasses

from bert_keras.common import outputs
from bert_keras.common.cli import option

KINDS = ("preprocessor", "encoder", "task", "lite")
EXPORT_DTYPES = ("float32", "bfloat16", "auto", "int8")


@dataclasses.dataclass
class ExportOptions:
    kind: str = option(None, "What to export: preprocessor (TF Hub's BERT preprocessor API), "
                       "encoder (TF Hub's BERT encoder API) or task (raw text in, predictions "
                       "out, for a fine-tuned directory) SavedModels, or lite (a TensorFlow Lite model "
                       "and its vocabulary, float32, for serving one text at a time on a CPU "
                       "without TensorFlow: the encoder, or a fine-tuned classifier or "
                       "regressor; bert_keras.export.lite.LiteModel serves it).",
                       choices=KINDS, required=True)
    model_dir: str = option(None, "The model directory to export.", required=True)
    export_dir: str = option(None, "Where the export goes (a directory).", required=True)
    seq_length: int = option(None, "Preprocessor: the default packed length (128). Task: the "
                             "window length (default: max_seq_length of task_config.json).")
    dtype: str = option("float32", "Encoder and task: float32 (the default: exact, and the same "
                        "on every machine) or bfloat16 (mixed_bfloat16 compute, for "
                        "accelerators and CPUs with bf16 units); outputs are float32 either "
                        "way. auto: bfloat16 where this machine computes it natively (a TPU, a "
                        "GPU of compute capability 8.0+, a CPU with avx512_bf16 or AMX), else "
                        "float32. Lite: float32 (the default) or int8 (weights stored as int8 with "
                        "a scale per output channel, activations quantized on the fly: a model "
                        "4x smaller and faster at batch 1, predictions slightly different; "
                        "docs/export.md gives its accuracy on MRPC and SST-2).",
                        choices=EXPORT_DTYPES)
    max_windows: int = option(None, "Task (SQuAD, NER): read at most this many windows of a "
                              "text (default 32); the rest is ignored.")
    xla_batch_1: bool = option(False, "Encoder and task, float32: inference on a batch of one "
                               "(one text, pair or question) runs an XLA-compiled copy of the "
                               "model: less time a call once warm, but each new length (a step "
                               "of 16 tokens) compiles on its first request, seconds on a 2-core "
                               "CPU, inside that request (docs/export.md). Off, every length "
                               "runs the plain graph at once. For batch-1 serving on a CPU the "
                               "lite export (--kind=lite) is faster than either. Larger batches "
                               "and training run the plain graph either way.")

    def export(self):
        """Writes the SavedModel (`export_from_model_dir`)."""
        from bert_keras.export import export_from_model_dir
        from bert_keras.optimization import resolve_dtype

        # The export replaces --export_dir whole: never the model directory, nor a folder
        # holding it; one export at a time (a lock beside it).
        outputs.check_not_over_inputs(self.export_dir, "export_dir",
                                      [("model_dir", self.model_dir)])
        with outputs.lock_beside(self.export_dir):
            return export_from_model_dir(
                self.kind, self.model_dir, self.export_dir, seq_length=self.seq_length,
                # A lite export is float32 unless int8 is asked for.
                dtype="float32" if self.kind == "lite" and self.dtype == "auto"
                else resolve_dtype(self.dtype),
                max_windows=self.max_windows, xla_batch_1=self.xla_batch_1)


__all__ = ["ExportOptions", "KINDS", "EXPORT_DTYPES"]
