"""CoNLL-2003 NER: the reader, first-wordpiece features and per-word predictions (`data`), the
fine-tuning task (`task`), the token tagging and feature-based heads (`head`), their raw-text
serving with entities in-graph (`serving`), and what the family declares (`family.CONLL`).
"""
