"""What every task family shares (the families themselves are `finetuning/glue/`, `squad/`,
`swag/` and `conll/`, each with its data reader, task, heads and serving):

- `common`: `DataFormatError`, `IGNORE_LABEL_ID`, `to_tf_dataset`, file checks.
- `encoding`: texts to wordpiece ids and packed model inputs.
- `family`: what a family declares (`Family`, `Head`).
- `models`: what every family's model builder shares (the encoder, `head_spec`).
- `serving`: the `Serving` base of the families' raw-text serving, and its in-graph helpers.
- `words`: the `tokenize_word(word) -> list[int]` interface from the in-graph tokenizer, and
  the word splitting of the official evaluation scripts.
"""

from bert_keras.finetuning.tasks.common import IGNORE_LABEL_ID, DataFormatError, to_tf_dataset

__all__ = ["DataFormatError", "IGNORE_LABEL_ID", "to_tf_dataset"]
