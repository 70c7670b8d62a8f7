"""bert_keras.data.token_store: what is appended block by block reads back, document by document."""

import doctest
import os

import numpy as np

from bert_keras.data import token_store
from bert_keras.data.instances import TokenizedDocuments


def random_blocks(rng, num_blocks, vocab_size):
    blocks = []
    for _ in range(num_blocks):
        documents = [[rng.integers(0, vocab_size, rng.integers(1, 9)).tolist()
                      for _ in range(rng.integers(1, 6))] for _ in range(rng.integers(0, 5))]
        blocks.append(documents)
    return blocks


def test_blocks_read_back(tmp_path):
    rng = np.random.default_rng(0)
    for vocab_size in (30522, 250002):  # uint16 on disk, then int32
        directory = tmp_path / str(vocab_size)
        directory.mkdir()
        prefix = str(directory / "tokens-00000")
        writer = token_store.TokenStoreWriter(prefix, vocab_size)
        blocks = random_blocks(rng, 12, vocab_size)
        ranges = [writer.append(k, TokenizedDocuments.from_lists(b), {"block": k})
                  for k, b in enumerate(blocks)]
        assert not token_store.is_complete(prefix)
        writer.close()
        assert token_store.is_complete(prefix)
        assert sorted(os.listdir(directory)) == sorted(
            "tokens-00000" + s for s in (".ids", ".sentences", ".documents", ".json"))
        store = token_store.TokenStore(prefix)
        assert store.dtype == (np.uint16 if vocab_size <= 65536 else np.int32)
        everything = [d for b in blocks for d in b]
        assert store.num_documents == len(everything)
        for k, (first, end) in enumerate(ranges):
            assert store.blocks[k] == {"documents": [first, end], "counts": {"block": k}}
            read = store.documents(first, end)
            assert [read.document(i) for i in range(read.num_documents)] == blocks[k]
        for d, document in enumerate(everything):
            assert store.sentence_lengths(d).tolist() == [len(s) for s in document]
            first = int(rng.integers(0, len(document)))
            end = int(rng.integers(first + 1, len(document) + 1))
            expected = [t for s in document[first:end] for t in s]
            assert store.token_ids(d, first, end).tolist() == expected
        store.close()


def test_an_abandoned_store_leaves_nothing(tmp_path):
    prefix = str(tmp_path / "tokens-00000")
    writer = token_store.TokenStoreWriter(prefix, 100)
    writer.append(0, TokenizedDocuments.from_lists([[[5, 6]]]), {})
    writer.abandon()
    assert os.listdir(tmp_path) == [] and not token_store.is_complete(prefix)


def test_docstring_example():
    assert doctest.testmod(token_store).failed == 0
