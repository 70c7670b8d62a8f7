"""The BERT model: config, layers, the encoder, the pre-training heads and model, the original
checkpoint names, the model directory and the converters of published weights.
"""

from bert_keras import lazy_exports

__getattr__, __all__ = lazy_exports("bert_keras.model", {
    "BertConfig": "bert_keras.model.config",
    "ConfigError": "bert_keras.model.config",
    "build_encoder": "bert_keras.model.encoder",
    "load_encoder": "bert_keras.model.encoder",
    "build_pretraining_model": "bert_keras.model.pretraining_model",
    "load_pretraining_model": "bert_keras.model.pretraining_model",
    "convert_hf_checkpoint": "bert_keras.model.convert",
    "convert_tf1_checkpoint": "bert_keras.model.convert",
})
