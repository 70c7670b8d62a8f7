"""Evaluation metrics of the BERT paper's tasks, in NumPy / pure Python.

- `classification`: accuracy, F1, Matthews correlation, Pearson, Spearman (GLUE, SWAG).
- `squad_eval`: exact match / F1 of the official SQuAD v1.1 and v2.0 scripts.
- `conll_eval`: entity-level precision / recall / F1 of conlleval.
"""

from bert_keras.metrics.classification import (accuracy, f1_score, matthews_corrcoef,
                                               pearson_corrcoef, spearman_corrcoef)

__all__ = ["accuracy", "f1_score", "matthews_corrcoef", "pearson_corrcoef", "spearman_corrcoef"]
