"""Pure-Python packing of single texts and text pairs into encoder inputs.

For users who want NumPy features for the sentence(-pair) tasks (GLUE, SWAG) without the
in-graph preprocessor: [CLS] A [SEP] (B [SEP]), type ids 0 for A and 1 for B, padded to
`max_seq_length`. Pairs that do not fit are truncated as in the original BERT
(`_truncate_seq_pair`): one wordpiece at a time from the end of the currently longer text
(the second one when they are equally long).

Example:

>>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"]
>>> tokenize_word = lambda word: [vocab.index(word)]  # a WordTokenizer in real use
>>> arrays = encode_texts(["a b c"], ["c c"], tokenize_word, vocab, max_seq_length=7)
>>> arrays["input_word_ids"].tolist(), arrays["input_type_ids"].tolist()
([[2, 5, 6, 3, 7, 7, 3]], [[0, 0, 0, 0, 1, 1, 1]])
"""

import numpy as np

from bert_keras.finetuning.tasks.words import as_vocabulary, whitespace_words
from bert_keras.text.truncation import truncated_pair_lengths


def pack(ids_a, ids_b, cls_id, sep_id, pad_id, max_seq_length):
    """(input_ids, input_mask, type_ids) lists for one single text or pair, truncated + padded."""
    ids_a = list(ids_a)
    ids_b = None if ids_b is None else list(ids_b)
    if ids_b is None:
        ids_a = ids_a[:max_seq_length - 2]
        ids = [cls_id] + ids_a + [sep_id]
        types = [0] * len(ids)
    else:
        keep_a, keep_b = truncated_pair_lengths(len(ids_a), len(ids_b), max_seq_length - 3)
        ids_a, ids_b = ids_a[:int(keep_a)], ids_b[:int(keep_b)]
        ids = [cls_id] + ids_a + [sep_id] + ids_b + [sep_id]
        types = [0] * (len(ids_a) + 2) + [1] * (len(ids_b) + 1)
    padding = max_seq_length - len(ids)
    return ids + [pad_id] * padding, [1] * len(ids) + [0] * padding, types + [0] * padding


def encode_texts(text_a, text_b, tokenize_word, vocab, max_seq_length=128):
    """Encoder inputs for arrays of texts of any shape (e.g. [N] for GLUE, [N, 4] for SWAG).

    `text_b` is None for single-text tasks. Returns int32 arrays input_word_ids, input_mask,
    input_type_ids of shape text_a.shape + [max_seq_length].
    """
    minimum = 3 if text_b is None else 4
    if max_seq_length < minimum:
        raise ValueError(f"max_seq_length must be at least {minimum}, got {max_seq_length}")
    vocab = as_vocabulary(vocab)
    cls_id, sep_id, pad_id = (vocab.token_to_id[t] for t in ("[CLS]", "[SEP]", "[PAD]"))
    text_a = np.asarray(text_a, dtype=object)
    if text_b is not None:
        text_b = np.asarray(text_b, dtype=object)
        if text_b.shape != text_a.shape:
            raise ValueError(f"text_a has shape {text_a.shape} but text_b {text_b.shape}")
    cache = {}

    def ids_of(text):
        ids = []
        for word in whitespace_words(text):
            if word not in cache:
                cache[word] = [int(i) for i in tokenize_word(word)]
            ids.extend(cache[word])
        return ids

    flat_a = text_a.reshape(-1)
    flat_b = None if text_b is None else text_b.reshape(-1)
    names = ("input_word_ids", "input_mask", "input_type_ids")
    out = [np.empty((len(flat_a), max_seq_length), np.int32) for _ in names]
    for i, a in enumerate(flat_a):
        row = pack(ids_of(a), None if flat_b is None else ids_of(flat_b[i]), cls_id, sep_id, pad_id,
                   max_seq_length)
        for array, values in zip(out, row):
            array[i] = values
    shape = text_a.shape + (max_seq_length,)
    return {name: array.reshape(shape) for name, array in zip(names, out)}
