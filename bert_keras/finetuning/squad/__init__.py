"""SQuAD v1.1/v2.0: the reader and windowed features (`data`), logits to answers and the official
prediction files (`postprocess`), the fine-tuning task (`task`), the span head (`head`), its
raw-text serving with windows and answer text in-graph (`serving`), and what the family declares
(`family.SQUAD`).
"""
