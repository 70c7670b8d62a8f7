"""Pre-training: the record input pipeline, dynamic masking, the MLM and NSP losses, the recipe
`run_pretraining` (`run`) and its two engines, TensorFlow's `tf.distribute` step loop
(`tensorflow_engine`, `step`) and Keras `fit` on JAX (`keras_engine`).
"""

from bert_keras import lazy_exports

__getattr__, __all__ = lazy_exports("bert_keras.pretraining", {
    "PretrainingOptions": "bert_keras.pretraining.options",
    "PretrainingError": "bert_keras.pretraining.options",
    "NonFiniteLossError": "bert_keras.pretraining.options",
    "run_pretraining": "bert_keras.pretraining.run",
    "train": "bert_keras.pretraining.run",
    "evaluate": "bert_keras.pretraining.run",
    "export_model_dir": "bert_keras.pretraining.run",
})
