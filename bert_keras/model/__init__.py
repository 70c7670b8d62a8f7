"""The BERT model: config, layers, the encoder, the pre-training heads and model, the original
checkpoint names. Reading and writing model directories is `bert_keras.modeldir`.
"""

from bert_keras import lazy_exports

__getattr__, __all__ = lazy_exports("bert_keras.model", {
    "BertConfig": "bert_keras.model.config",
    "ConfigError": "bert_keras.model.config",
    "build_encoder": "bert_keras.model.encoder",
    "build_pretraining_model": "bert_keras.model.pretraining_model",
})
