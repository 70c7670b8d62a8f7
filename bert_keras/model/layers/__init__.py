"""Keras layers of the BERT encoder, one concept per file."""

from bert_keras.model.layers.attention import SelfAttention, attention_mask_from_input_mask
from bert_keras.model.layers.embeddings import BertEmbeddings
from bert_keras.model.layers.pooler import Pooler
from bert_keras.model.layers.transformer_block import TransformerBlock, get_activation

__all__ = ["BertEmbeddings", "SelfAttention", "TransformerBlock", "Pooler", "get_activation",
           "attention_mask_from_input_mask"]
