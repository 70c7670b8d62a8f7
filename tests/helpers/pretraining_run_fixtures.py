"""Small real pre-training data for the pre-training tests: the bundled WikiText sample.

A word-level vocabulary (the most frequent lower-cased words of the sample plus the special
tokens; other words become [UNK]) keeps the test model small; the instances are made by the
project's own `pretraining_data.create_instances` and written with TensorFlow's TFRecord writer, so the
records are the project's own pre-training TFRecords.
"""

import collections
import os

import numpy as np

import bert_keras
from bert_keras.data import instances as pretraining_data
from bert_keras.text.vocab import SPECIAL_TOKENS, Vocabulary
from helpers.pretraining_data_fixtures import encode_instance_batch, encoded_records, write_tfrecords

DATA_DIR = os.path.join(os.path.dirname(bert_keras.__file__), "data")
TRAIN_TEXT = os.path.join(DATA_DIR, "wikitext_train.txt")
HELDOUT_TEXT = os.path.join(DATA_DIR, "wikitext_heldout.txt")


def read_documents(path):
    """[[sentence words, ...] per article] of a WikiText file (lower-cased, split at " . ")."""
    documents, current = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            if line.startswith("= ") and not line.startswith("= ="):
                if current:
                    documents.append(current)
                current = []
                continue
            if line.startswith("="):
                continue  # sub-headings
            words = line.lower().split()
            sentence = []
            for word in words:
                sentence.append(word)
                if word in (".", "?", "!"):
                    current.append(sentence)
                    sentence = []
            if sentence:
                current.append(sentence)
    if current:
        documents.append(current)
    return documents


def word_vocab_tokens(path=TRAIN_TEXT, size=2000):
    counts = collections.Counter(word for document in read_documents(path)
                                 for sentence in document for word in sentence if word != "<unk>")
    words = [word for word, _ in counts.most_common(size - len(SPECIAL_TOKENS))]
    return list(SPECIAL_TOKENS) + words


def write_vocab(directory, size=2000):
    tokens = word_vocab_tokens(size=size)
    path = os.path.join(directory, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in tokens))
    return path


def tokenized_documents(path, vocab):
    unknown = vocab.token_to_id["[UNK]"]
    return pretraining_data.TokenizedDocuments.from_lists(
        [[[vocab.token_to_id.get(word, unknown) for word in sentence] for sentence in document]
         for document in read_documents(path)])


def make_instances(text_path, vocab_path, max_seq_length=64, max_predictions_per_seq=10,
                   dupe_factor=1, seed=0):
    vocab = Vocabulary.from_file(vocab_path)
    options = pretraining_data.InstanceOptions(
        max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq,
        dupe_factor=dupe_factor)
    special = pretraining_data.SpecialTokenIds.from_vocabulary(vocab)
    return pretraining_data.create_instances(tokenized_documents(text_path, vocab), options, special, seed)


def write_shards(directory, batch, num_shards=2, prefix="part"):
    """Writes an `InstanceBatch` round-robin into `num_shards` TFRecord files; returns the paths."""
    records = encode_instance_batch(batch)
    os.makedirs(directory, exist_ok=True)
    paths = []
    for shard in range(num_shards):
        path = os.path.join(directory, f"{prefix}-{shard:05d}.tfrecord")
        write_tfrecords(path, records[shard::num_shards])
        paths.append(path)
    return paths


def write_feature_records(path, features):
    """Writes {feature name: array [n, k]} as tf.train.Examples (ints as Int64List, floats as FloatList)."""
    write_tfrecords(path, encoded_records(features))
    return path


def random_features(n, max_seq_length, max_predictions_per_seq, vocab_size, seed=0):
    """Masked-record features of random tokens (for input checks, not for learning)."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab_size, (n, max_seq_length))
    ids[:, 0] = 2
    ids[:, -1] = 3
    positions = np.sort(rng.choice(np.arange(1, max_seq_length - 1), (n, max_predictions_per_seq)), axis=1)
    return {
        "input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids),
        "masked_lm_positions": positions, "masked_lm_ids": np.take_along_axis(ids, positions, 1),
        "masked_lm_weights": np.ones((n, max_predictions_per_seq), np.float32),
        "next_sentence_labels": rng.integers(0, 2, (n, 1)),
    }
