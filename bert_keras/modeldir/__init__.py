"""The model directory, the currency between the pipeline's steps, as one layer above `text/`
and `model/`: `ModelDir` (read once) and `write_model_dir` (its only writer), the loaders of
Keras models and the preprocessor built on it, and the converters of published weights.
"""

from bert_keras import lazy_exports

__getattr__, __all__ = lazy_exports("bert_keras.modeldir", {
    "ModelDir": "bert_keras.modeldir.model_dir",
    "ModelDirError": "bert_keras.modeldir.model_dir",
    "write_model_dir": "bert_keras.modeldir.model_dir",
    "load_encoder": "bert_keras.modeldir.loading",
    "load_pretraining_model": "bert_keras.modeldir.loading",
    "load_preprocessor": "bert_keras.modeldir.loading",
    "convert_hf_checkpoint": "bert_keras.modeldir.convert",
    "convert_tf1_checkpoint": "bert_keras.modeldir.convert",
})
