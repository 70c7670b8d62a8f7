"""Keras layers of the BERT encoder, one concept per file."""

from bert_keras.model.layers.activations import get_activation
from bert_keras.model.layers.attention import SelfAttention, attention_mask_from_input_mask
from bert_keras.model.layers.dense import Dense
from bert_keras.model.layers.dropout import Dropout
from bert_keras.model.layers.embeddings import BertEmbeddings
from bert_keras.model.layers.pooler import Pooler
from bert_keras.model.layers.transformer_block import TransformerBlock
from bert_keras.model.layers.unpadding import unpadded_inference

__all__ = ["BertEmbeddings", "Dense", "Dropout", "SelfAttention", "TransformerBlock", "Pooler",
           "get_activation", "attention_mask_from_input_mask", "unpadded_inference"]
