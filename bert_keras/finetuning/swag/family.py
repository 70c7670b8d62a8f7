"""The swag family: what it trains and serves (`bert_keras.finetuning.tasks.family`)."""

from bert_keras.finetuning.swag.head import MULTIPLE_CHOICE
from bert_keras.finetuning.swag.serving import MultipleChoiceServing
from bert_keras.finetuning.swag.task import SwagFinetuning
from bert_keras.finetuning.tasks.family import Family

SWAG = Family("swag", task=SwagFinetuning, heads=(MULTIPLE_CHOICE,),
              serving={"multiple_choice": MultipleChoiceServing})

__all__ = ["SWAG"]
