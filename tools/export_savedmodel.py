"""Exports a model directory as a SavedModel that needs only TensorFlow and tensorflow-text.

  python tools/export_savedmodel.py --model_dir=models/minilm --export_dir=exports/preprocessor \
      --kind=preprocessor --seq_length=128
  python tools/export_savedmodel.py --model_dir=models/minilm --export_dir=exports/encoder \
      --kind=encoder
  python tools/export_savedmodel.py --model_dir=runs/mrpc --export_dir=exports/mrpc --kind=task

Kinds: `preprocessor` (TF Hub "BERT preprocessor" API), `encoder` (TF Hub "BERT encoder" API,
with `.mlm` when the directory holds the masked LM head), `task` (raw text in, predictions out,
for a fine-tuned directory with task_config.json). See docs/export.md.
"""

import os
import sys
import time

from absl import app, flags

KIND = flags.DEFINE_enum("kind", None, ["preprocessor", "encoder", "task"], "What to export.",
                         required=True)
MODEL_DIR = flags.DEFINE_string("model_dir", None, "The model directory to export.",
                                required=True)
EXPORT_DIR = flags.DEFINE_string("export_dir", None, "Where the SavedModel goes.", required=True)
SEQ_LENGTH = flags.DEFINE_integer("seq_length", None, "Preprocessor: the default packed length "
                                  "(128). Task: the window length (default: max_seq_length of "
                                  "task_config.json).")
DTYPE = flags.DEFINE_enum("dtype", "auto", ["auto", "float32", "bfloat16"], "Encoder and task: "
                          "float32 (exact) or bfloat16 (mixed_bfloat16 compute, for accelerators "
                          "and CPUs with bf16 units); outputs are float32 either way. auto: "
                          "bfloat16 where this machine computes it natively (a TPU, a GPU of "
                          "compute capability 8.0+, a CPU with avx512_bf16 or AMX), else float32.")
MAX_WINDOWS = flags.DEFINE_integer("max_windows", None, "Task (SQuAD, NER): read at most this "
                                   "many windows of a text (default 32); the rest is ignored.")


def main(argv):
    del argv
    from bert_keras.export import export_from_model_dir
    from bert_keras.optimization import resolve_dtype

    start = time.perf_counter()
    try:
        export_from_model_dir(KIND.value, MODEL_DIR.value, EXPORT_DIR.value,
                              seq_length=SEQ_LENGTH.value, dtype=resolve_dtype(DTYPE.value),
                              max_windows=MAX_WINDOWS.value)
    except ValueError as error:  # a bad model directory: ModelDirError, WeightsError, ...
        print(f"export_savedmodel: error: {error}", file=sys.stderr)
        sys.exit(1)
    size = sum(os.path.getsize(os.path.join(folder, name))
               for folder, _, names in os.walk(EXPORT_DIR.value) for name in names)
    print(f"wrote {KIND.value} SavedModel {EXPORT_DIR.value} ({size / 1e6:.1f} MB, "
          f"{time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    app.run(main)
