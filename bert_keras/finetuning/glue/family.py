"""The glue family: what it trains and serves (`bert_keras.finetuning.tasks.family`)."""

from bert_keras.finetuning.glue.head import CLASSIFICATION, REGRESSION
from bert_keras.finetuning.glue.serving import ClassificationServing, lite_fields
from bert_keras.finetuning.glue.task import GlueFinetuning
from bert_keras.finetuning.tasks.family import Family

GLUE = Family("glue", task=GlueFinetuning, heads=(CLASSIFICATION, REGRESSION),
              serving={"classification": ClassificationServing,
                       "regression": ClassificationServing},
              lite={"classification": lite_fields, "regression": lite_fields})

__all__ = ["GLUE"]
