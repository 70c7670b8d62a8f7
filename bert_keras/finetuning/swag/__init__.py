"""SWAG: the CSV reader and four-choice inputs (`data`) and the fine-tuning task (`task`).
Serving: `bert_keras.export.multiple_choice_serving`.
"""
