"""The squad family: what it trains and serves (`bert_keras.finetuning.tasks.family`)."""

from bert_keras.finetuning.squad.head import SPAN
from bert_keras.finetuning.squad.serving import SquadServing
from bert_keras.finetuning.squad.task import SquadFinetuning
from bert_keras.finetuning.tasks.family import Family

SQUAD = Family("squad", task=SquadFinetuning, heads=(SPAN,), serving={"span": SquadServing})

__all__ = ["SQUAD"]
