"""bert_keras: BERT (Devlin et al., 2019) in Keras 3 on TensorFlow.

Example:

>>> import bert_keras  # doctest: +SKIP
>>> encoder = bert_keras.load_encoder("models/minilm")  # doctest: +SKIP
>>> preprocessor = bert_keras.load_preprocessor("models/minilm", seq_length=128)  # doctest: +SKIP
>>> outputs = encoder(preprocessor(tf.constant(["Hello world!"])))  # doctest: +SKIP
"""

import importlib

__version__ = "0.1.0"

# Public names, imported on first use so that `import bert_keras` stays light.
_EXPORTS = {
    "BertConfig": "bert_keras.config",
    "build_encoder": "bert_keras.encoder",
    "load_encoder": "bert_keras.encoder",
    "build_pretraining_model": "bert_keras.pretraining_model",
    "load_pretraining_model": "bert_keras.pretraining_model",
    "load_preprocessor": "bert_keras.preprocessor",
    "BertPreprocessor": "bert_keras.preprocessor",
    "BertTokenizer": "bert_keras.tokenizer",
    "bert_pack_inputs": "bert_keras.packing",
    "Vocabulary": "bert_keras.vocab",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'bert_keras' has no attribute {name!r}")
