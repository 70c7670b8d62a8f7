"""SQuAD v1.1/v2.0: the reader and windowed features (`data`), logits to answers and the official
prediction files (`postprocess`), the fine-tuning task (`task`). Serving:
`bert_keras.export.squad_serving`.
"""
