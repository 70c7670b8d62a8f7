"""GLUE: the TSV and tensorflow-datasets readers, label lists and metrics (`data`), the fine-
tuning task (`task`), the classification and regression heads (`head`), their raw-text serving
and lite mapping (`serving`), and what the family declares (`family.GLUE`).
"""
