"""CoNLL-2003 NER: the reader, first-wordpiece features and per-word predictions (`data`) and the
fine-tuning task (`task`). Serving: `bert_keras.export.ner_serving`.
"""
