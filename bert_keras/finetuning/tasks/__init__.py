"""Fine-tuning data: readers, features and answer post-processing for the paper's tasks.

Modules (none imports the Keras model code, TensorFlow only where a function needs it):

- `glue`: GLUE TSV / tfds readers, label lists, per-task metrics (`compute_metrics`).
- `squad`: SQuAD v1.1/v2.0 reader and windowed features; `squad_postprocess`: logits to answers,
  predictions.json / null_odds.json.
- `swag`: SWAG CSV reader and 4-choice inputs.
- `conll`: CoNLL-2003 reader, first-wordpiece features and per-word predictions.
- `words`: the `tokenize_word(word) -> list[int]` interface from the in-graph tokenizer.
- `common`: `DataFormatError`, `IGNORE_LABEL_ID`, `to_tf_dataset`.
"""

from bert_keras.finetuning.tasks.common import IGNORE_LABEL_ID, DataFormatError, to_tf_dataset

__all__ = ["DataFormatError", "IGNORE_LABEL_ID", "to_tf_dataset"]
