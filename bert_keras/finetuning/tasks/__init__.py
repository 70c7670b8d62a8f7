"""What every task family shares (the families themselves are `finetuning/glue/`, `squad/`,
`swag/` and `conll/`, each with its data reader and its task):

- `common`: `DataFormatError`, `IGNORE_LABEL_ID`, `to_tf_dataset`, file checks.
- `encoding`: texts to wordpiece ids and packed model inputs.
- `words`: the `tokenize_word(word) -> list[int]` interface from the in-graph tokenizer, and
  the word splitting of the official evaluation scripts.
"""

from bert_keras.finetuning.tasks.common import IGNORE_LABEL_ID, DataFormatError, to_tf_dataset

__all__ = ["DataFormatError", "IGNORE_LABEL_ID", "to_tf_dataset"]
