r"""`bert-keras export`: exports a model directory as a SavedModel that needs only TensorFlow and
tensorflow-text, or as a TensorFlow Lite model served without TensorFlow (`--kind=lite`).

  bert-keras export --model_dir=models/minilm --export_dir=exports/preprocessor \
      --kind=preprocessor --seq_length=128
  bert-keras export --model_dir=models/minilm --export_dir=exports/encoder --kind=encoder
  bert-keras export --model_dir=runs/mrpc --export_dir=exports/mrpc --kind=task
  bert-keras export --model_dir=runs/mrpc --export_dir=exports/mrpc_lite --kind=lite

Kinds: `preprocessor` (TF Hub "BERT preprocessor" API), `encoder` (TF Hub "BERT encoder" API,
with `.mlm` when the directory holds the masked LM head), `task` (raw text in, predictions out,
for a fine-tuned directory with task_config.json), `lite` (float32 TensorFlow Lite model and
vocabulary, for one text at a time on a CPU: the encoder, or a classification or regression
head; `bert_keras.export.lite.LiteModel` serves it). See docs/export.md.
"""

import os
import time

from bert_keras.common import cli
from bert_keras.export import read_export_info
from bert_keras.export.options import ExportOptions


def main():
    start = time.perf_counter()
    options = cli.options_from_flags(ExportOptions)
    options.export()
    size = sum(os.path.getsize(os.path.join(folder, name))
               for folder, _, names in os.walk(options.export_dir) for name in names)
    dtype = read_export_info(options.export_dir).get("dtype")
    what = "TensorFlow Lite export" if options.kind == "lite" else "SavedModel"
    print(f"wrote {options.kind} {what} {options.export_dir} ("
          + (f"{dtype}, " if dtype else "")
          + f"{size / 1e6:.1f} MB, {time.perf_counter() - start:.1f} s)")
    return 0
