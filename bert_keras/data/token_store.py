"""The token ids of one input file on disk, so that a random next can come from any of its documents.

The original tool holds the whole corpus in memory and draws each random-next segment from any
document. Here the main process appends each tokenized block of an input file to that file's
token store; once the file is complete, the workers make the instances of its blocks, reading
their own documents and the random documents they draw with positioned reads. Memory stays one
block per worker whatever the size of the file (the offsets, 8 bytes per sentence, are
memory-mapped: pages the operating system can drop); the store takes 2 bytes per token on disk
(4 with vocabularies of more than 65,536 tokens) until the run ends.

Files, under a prefix such as `<work dir>/tokens-00003` (input file number 3):

- `.ids`: the token ids of all sentences, one after the other (uint16, or int32);
- `.sentences`: int64, the end offset of every sentence in `.ids`;
- `.documents`: int64, the end offset of every document in `.sentences`;
- `.json`, written last and atomically (a store without it is incomplete and is rebuilt): the
  id dtype, the counts, and the documents of each block (first, end).

Example:

>>> import tempfile, os
>>> from bert_keras.data.instances import TokenizedDocuments
>>> prefix = os.path.join(tempfile.mkdtemp(), "tokens-00000")
>>> writer = TokenStoreWriter(prefix, vocab_size=100)
>>> writer.append(0, TokenizedDocuments.from_lists([[[5, 6], [7]], [[8]]]), {"tokens": 4})
(0, 2)
>>> writer.append(1, TokenizedDocuments.from_lists([[[9, 10, 11]]]), {"tokens": 3})
(2, 3)
>>> writer.close()
>>> store = TokenStore(prefix)
>>> store.num_documents, store.sentence_lengths(0).tolist(), store.token_ids(2, 0, 1).tolist()
(3, [2, 1], [9, 10, 11])
>>> store.documents(0, 2).document(1)
[[8]]
"""

import json
import os

import numpy as np

from bert_keras.data.instances import TokenizedDocuments

_SUFFIXES = (".ids", ".sentences", ".documents")


def store_prefix(directory, file_number):
    """The token store of input file `file_number` in `directory`."""
    return os.path.join(directory, f"tokens-{file_number:05d}")


def is_complete(prefix):
    return os.path.exists(prefix + ".json")


def id_dtype(vocab_size):
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<i4")


class TokenStoreWriter:
    """Appends tokenized blocks of one input file; `close()` makes the store complete."""

    def __init__(self, prefix, vocab_size):
        self.prefix = prefix
        self.dtype = id_dtype(vocab_size)
        self.temporary = f"{prefix}.incomplete-{os.getpid()}"
        self.files = [open(self.temporary + suffix, "wb") for suffix in _SUFFIXES]
        self.tokens = self.sentences = self.num_documents = 0
        self.blocks = {}

    def append(self, block_in_file, documents, counts):
        """Adds a block's `TokenizedDocuments`; returns its documents' (first, end) in the file."""
        ids, sentences, documents_file = self.files
        ids.write(documents.token_ids.astype(self.dtype).tobytes())
        sentences.write((documents.sentence_offsets[1:] + self.tokens).astype("<i8").tobytes())
        documents_file.write((documents.document_offsets[1:] + self.sentences).astype("<i8").tobytes())
        first = self.num_documents
        self.tokens += documents.num_tokens
        self.sentences += documents.num_sentences
        self.num_documents += documents.num_documents
        self.blocks[int(block_in_file)] = {"documents": [first, self.num_documents],
                                           "counts": counts}
        return first, self.num_documents

    def close(self):
        for f in self.files:
            f.close()
        for suffix in _SUFFIXES:
            os.replace(self.temporary + suffix, self.prefix + suffix)
        record = {"dtype": self.dtype.str, "tokens": self.tokens, "sentences": self.sentences,
                  "documents": self.num_documents, "blocks": self.blocks}
        temporary = f"{self.prefix}.json.incomplete-{os.getpid()}"
        with open(temporary, "w", encoding="utf-8") as f:
            json.dump(record, f)
        os.replace(temporary, self.prefix + ".json")

    def abandon(self):
        for f in self.files:
            f.close()
        for suffix in _SUFFIXES:
            if os.path.exists(self.temporary + suffix):
                os.remove(self.temporary + suffix)


def _map(path, count):
    """int64 [count] of a file, memory-mapped (an empty array for an empty file)."""
    if count == 0:
        return np.zeros([0], np.int64)
    # A plain ndarray view of the map (which it keeps open): slicing it skips np.memmap's
    # Python-level bookkeeping, which random nexts would pay on every look-up.
    return np.memmap(path, dtype="<i8", mode="r", shape=(count,)).view(np.ndarray)


class TokenStore:
    """Reads a complete store: offsets memory-mapped, token ids with positioned reads."""

    def __init__(self, prefix):
        with open(prefix + ".json", encoding="utf-8") as f:
            record = json.load(f)
        self.prefix = prefix
        self.dtype = np.dtype(record["dtype"])
        self.num_documents = record["documents"]
        self.blocks = {int(k): v for k, v in record["blocks"].items()}
        self._ids = os.open(prefix + ".ids", os.O_RDONLY)
        # The offsets (8 bytes per sentence) are mapped, not read: a random next looks them up
        # without a system call, and the pages are the operating system's to keep or drop.
        self._sentence_ends = _map(prefix + ".sentences", record["sentences"])
        self._document_ends = _map(prefix + ".documents", record["documents"])

    def close(self):
        if self._ids is not None:
            os.close(self._ids)
        self._ids = None
        self._sentence_ends = self._document_ends = None

    def _read_ids(self, start, end):
        """Token ids [start, end) of `.ids`, as int32."""
        size = self.dtype.itemsize
        data = os.pread(self._ids, (end - start) * size, start * size)
        if len(data) != (end - start) * size:
            raise OSError(f"{self.prefix}.ids: short read; the store is damaged")
        return np.frombuffer(data, self.dtype).astype(np.int32)

    @staticmethod
    def _bounds(ends, first, end):
        """The start and end offsets of items [first, end), from the items' `ends`."""
        if first == 0:
            return np.concatenate([[0], ends[:end]]).astype(np.int64)
        return np.asarray(ends[first - 1:end], np.int64)

    def sentence_lengths(self, document):
        """int64 [sentences of `document`]: the tokens of each of its sentences."""
        first, end = self._bounds(self._document_ends, document, document + 1)
        return np.diff(self._bounds(self._sentence_ends, int(first), int(end)))

    def token_ids(self, document, first_sentence, end_sentence):
        """int32: the tokens of sentences [first_sentence, end_sentence) of `document`."""
        start = int(self._bounds(self._document_ends, document, document + 1)[0])
        bounds = self._bounds(self._sentence_ends, start + first_sentence, start + end_sentence)
        return self._read_ids(int(bounds[0]), int(bounds[-1]))

    def documents(self, first, end):
        """Documents [first, end) as `TokenizedDocuments` (offsets from 0)."""
        document_bounds = self._bounds(self._document_ends, first, end)
        sentence_bounds = self._bounds(self._sentence_ends, int(document_bounds[0]),
                                       int(document_bounds[-1]))
        ids = self._read_ids(int(sentence_bounds[0]), int(sentence_bounds[-1]))
        return TokenizedDocuments(token_ids=ids,
                                  sentence_offsets=sentence_bounds - sentence_bounds[0],
                                  document_offsets=document_bounds - document_bounds[0])


__all__ = ["TokenStoreWriter", "TokenStore", "store_prefix", "is_complete", "id_dtype"]
