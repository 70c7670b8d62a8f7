"""SWAG: the CSV reader and four-choice inputs (`data`), the fine-tuning task (`task`), the
multiple-choice head (`head`), its raw-text serving (`serving`), and what the family declares
(`family.SWAG`).
"""
