"""The conll family: what it trains and serves (`bert_keras.finetuning.tasks.family`)."""

from bert_keras.finetuning.conll.head import FEATURE_BASED_BILSTM, TOKEN_TAGGING
from bert_keras.finetuning.conll.serving import NerServing
from bert_keras.finetuning.conll.task import ConllFinetuning
from bert_keras.finetuning.tasks.family import Family

CONLL = Family("conll", task=ConllFinetuning, heads=(TOKEN_TAGGING, FEATURE_BASED_BILSTM),
               serving={"token_tagging": NerServing, "feature_based_bilstm": NerServing})

__all__ = ["CONLL"]
