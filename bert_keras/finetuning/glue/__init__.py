"""GLUE: the TSV and tensorflow-datasets readers, label lists and metrics (`data`) and the fine-
tuning task (`task`). Serving: `bert_keras.export.classification_serving`.
"""
