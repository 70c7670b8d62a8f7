"""Units of work of `create_pretraining_data`: block work files and shard merges.

Worker processes run `tokenize_block` (a block of raw text -> wordpiece ids, with the plain
Python tokenizer `bert_keras.text.python_tokenizer` by default), `process_block` (a block's
documents, read from its input file's token store (`bert_keras.data.token_store`) -> instances,
with random nexts from any document of that file -> serialized, framed TFRecords, dealt to shards
and shuffled, in one work file) and `merge_shard` (one output shard as a uniformly random
interleaving of its records from all block files). They
need NumPy only, not TensorFlow. `bert_keras.data.pipeline` drives them.

A block work file is: magic, (records, shards, statistics length) as int64, record and byte
start of each shard (int64 [shards + 1] each), the length of every framed record (uint32),
the block's statistics as JSON, then the framed records grouped by shard.
"""

import json
import os
import struct

import numpy as np

from bert_keras.common.errors import BertKerasError
from bert_keras.common.files import write_atomic
from bert_keras.data import instances
from bert_keras.data import records
from bert_keras.data import token_store
from bert_keras.data.example_encoding import encode_framed_examples
from bert_keras.text.sentence_splitting import split_sentences
from bert_keras.text.vocab import Vocabulary

_BLOCK_MAGIC = b"BKPTBLK1"
_MERGE_BUFFER_BYTES = 32 << 20
_TOKENIZE_BATCH = 8192
_ENCODE_BATCH = 4096


class WorkFileError(BertKerasError, RuntimeError):
    """A block work file is damaged."""


def task_prefix(config):
    if config.num_tasks == 1:
        return ""
    return f"task-{config.task_index:05d}-of-{config.num_tasks:05d}-"


def shard_path(config, shard):
    return os.path.join(config.output_dir, f"{task_prefix(config)}shard-{shard:05d}-of-"
                                           f"{config.num_output_shards:05d}.tfrecord")


def stats_path(config):
    return os.path.join(config.output_dir, f"{task_prefix(config)}stats.json")


def manifest_path(config):
    return os.path.join(config.output_dir, f"{task_prefix(config)}manifest.json")


def work_dir(config):
    return os.path.join(config.output_dir, f".work-{task_prefix(config)}incomplete")


def block_path(config, index):
    return os.path.join(work_dir(config), f"block-{index:07d}.bin")


# ---------------------------------------------------------------------------------------------
# Worker processes.

_WORKER = {}


def python_tokenizer(vocab_file, do_lower_case):
    """The default tokenizer: `PythonBertTokenizer.tokenize_batch`, no TensorFlow.

    Returns a function giving (ids int32 [total], tokens per text int64 [n]).
    """
    from bert_keras.text.python_tokenizer import PythonBertTokenizer
    return PythonBertTokenizer(vocab_file, lower_case=do_lower_case).tokenize_batch


def bert_tokenizer(vocab_file, do_lower_case):
    """The in-graph `bert_keras.text.tokenizer.BertTokenizer`, the same interface (each worker
    then loads TensorFlow; the ids are those of `python_tokenizer`)."""
    from bert_keras.text.tokenizer import BertTokenizer
    tokenizer = BertTokenizer(vocab_file, lower_case=do_lower_case)

    def run(texts):
        ids = tokenizer.tokenize_merged(texts)
        return (ids.flat_values.numpy().astype(np.int32),
                ids.row_lengths().numpy().astype(np.int64))

    return run


def tokenizer_factory(config):
    return config.tokenizer or python_tokenizer


def init_worker(config):
    """Worker processes need no TensorFlow: they tokenize in Python, get token ids and write
    framed records. Called again for every run in one process (`--num_workers=1` runs the
    work in the caller's process): nothing of an earlier run (its tokenizer, its open token
    stores) is kept."""
    for store in _WORKER.get("stores", {}).values():
        store.close()
    _WORKER.clear()
    vocabulary = Vocabulary.from_file(config.vocab_file)
    _WORKER["config"] = config
    _WORKER["special"] = instances.SpecialTokenIds.from_vocabulary(vocabulary)


def tokenize_block(block):
    """TokenizedDocuments and counts of one block of raw text (the worker's tokenizer is built
    on its first block)."""
    config = _WORKER["config"]
    if "tokenize" not in _WORKER:
        _WORKER["tokenize"] = tokenizer_factory(config)(config.vocab_file, config.do_lower_case)
    tokenize = _WORKER["tokenize"]
    sentences, document_sizes = [], []
    for document in block.documents:
        if config.input_format == "paragraphs":
            document = [s for paragraph in document for s in split_sentences(paragraph)]
        sentences.extend(document)
        document_sizes.append(len(document))
    ids, lengths = [], []
    for start in range(0, len(sentences), _TOKENIZE_BATCH):
        batch_ids, batch_lengths = tokenize(sentences[start:start + _TOKENIZE_BATCH])
        ids.append(batch_ids)
        lengths.append(batch_lengths)
    ids = np.concatenate(ids) if ids else np.zeros([0], np.int32)
    lengths = np.concatenate(lengths) if lengths else np.zeros([0], np.int64)
    documents = instances.TokenizedDocuments.drop_empty(ids, lengths, document_sizes)
    counts = {
        "documents": documents.num_documents,
        "empty_documents": len(document_sizes) - documents.num_documents,
        "sentences": documents.num_sentences,
        "empty_sentences": int(np.sum(lengths == 0)),
        "long_sentences": int(np.sum(lengths > config.options.max_seq_length - 3)),
        "one_sentence_documents": int(np.sum(np.diff(documents.document_offsets) == 1)),
        "tokens": documents.num_tokens,
    }
    return documents, counts


def _token_store(file_number):
    """The worker's reader of an input file's token store (the last one opened is kept)."""
    stores = _WORKER.setdefault("stores", {})
    if file_number not in stores:
        for store in stores.values():
            store.close()
        stores.clear()
        stores[file_number] = token_store.TokenStore(
            token_store.store_prefix(work_dir(_WORKER["config"]), file_number))
    return stores[file_number]


def process_block(index, key, first_document, end_document, counts):
    """Phase 1 for one block (in a worker). Returns (index, the block's statistics).

    The block is documents [first_document, end_document) of its input file's token store
    (`key[0]`); random nexts come from any document of that file. The block's draws are seeded
    from `key` (file number, block within the file), not from the task, so that the tasks of a
    cluster together write the instances one task would.
    """
    config = _WORKER["config"]
    options = config.options
    store = _token_store(key[0])
    documents = store.documents(first_document, end_document)
    # (7, 7) can be no (task, num_tasks) pair of the shard seeds below: the streams stay apart.
    seed = [config.seed, 7, 7, *key]
    batch = instances.create_instances(documents, options, _WORKER["special"], seed,
                                              pool=store, first_document=first_document)
    n = len(batch)
    stats = dict(counts)
    stats.update(instance_stats(batch, options))
    rng = np.random.default_rng(np.random.SeedSequence(seed + [1]))
    shard = rng.integers(0, config.num_output_shards, n)
    permutation = rng.permutation(n)
    order = permutation[np.argsort(shard[permutation], kind="stable")]
    # Framed records, grouped by shard and shuffled within each group, encoded a slice of
    # `order` at a time (the encoder's slot matrices take a few KB per record).
    features = records.instance_features(batch)
    pieces, lengths = [], [np.zeros([0], np.int64)]
    for start in range(0, n, _ENCODE_BATCH):
        rows = order[start:start + _ENCODE_BATCH]
        data, offsets = encode_framed_examples({k: v[rows] for k, v in features.items()})
        pieces.append(data)
        lengths.append(np.diff(offsets))
    lengths = np.concatenate(lengths)
    shard_counts = np.bincount(shard, minlength=config.num_output_shards)
    record_starts = np.zeros([config.num_output_shards + 1], np.int64)
    np.cumsum(shard_counts, out=record_starts[1:])
    all_starts = np.zeros([n + 1], np.int64)
    np.cumsum(lengths, out=all_starts[1:])
    byte_starts = all_starts[record_starts]
    stats_bytes = json.dumps(stats, sort_keys=True).encode()
    header = (_BLOCK_MAGIC + struct.pack("<qqq", n, config.num_output_shards, len(stats_bytes))
              + record_starts.astype("<i8").tobytes() + byte_starts.astype("<i8").tobytes())
    write_atomic(block_path(config, index),
                 [header, lengths.astype("<u4").tobytes(), stats_bytes] + pieces)
    return index, stats


def instance_stats(batch, options):
    lengths = batch.lengths
    return {
        "instances": len(batch),
        "instance_tokens": int(lengths.sum()),
        "masked_tokens": int(batch.masked_lm_weights.sum()),
        "random_next": int(batch.next_sentence_labels.sum()),
        "replaced_by_mask": int(batch.replacement_counts[0]),
        "kept_original": int(batch.replacement_counts[1]),
        "replaced_by_random": int(batch.replacement_counts[2]),
        "length_histogram": np.bincount(lengths, minlength=options.max_seq_length + 1).tolist(),
    }


class BlockFile:
    """Header of a block work file: record and byte ranges of each shard, statistics."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            head = f.read(8 + 24)
            if len(head) < 32 or head[:8] != _BLOCK_MAGIC:
                raise WorkFileError(f"{path}: not a block work file; delete the work directory")
            self.num_records, num_shards, stats_length = struct.unpack("<qqq", head[8:])
            tables = np.frombuffer(f.read(16 * (num_shards + 1)), "<i8")
            self.record_starts = tables[:num_shards + 1]
            self.byte_starts = tables[num_shards + 1:]
            self.lengths_offset = 32 + 16 * (num_shards + 1)
            self.stats_offset = self.lengths_offset + 4 * self.num_records
            f.seek(self.stats_offset)
            self.stats = json.loads(f.read(stats_length))
            self.data_offset = self.stats_offset + stats_length


class _ShardPart:
    """The records of one shard in one block file, read a chunk at a time."""

    def __init__(self, block, shard, chunk_bytes):
        self.path = block.path
        self.next_record = int(block.record_starts[shard])
        self.end_record = int(block.record_starts[shard + 1])
        self.next_byte = block.data_offset + int(block.byte_starts[shard])
        self.lengths_offset = block.lengths_offset
        self.chunk_bytes = chunk_bytes
        self.records = []

    def __len__(self):
        return self.end_record - self.next_record + len(self.records)

    def pop(self):
        if not self.records:
            self._refill()
        return self.records.pop()

    def _refill(self):
        with open(self.path, "rb") as f:
            count = min(self.end_record - self.next_record, 4096)
            f.seek(self.lengths_offset + 4 * self.next_record)
            lengths = np.frombuffer(f.read(4 * count), "<u4").astype(np.int64)
            ends = np.cumsum(lengths)
            take = max(1, int(np.searchsorted(ends, self.chunk_bytes, side="right")))
            f.seek(self.next_byte)
            data = f.read(int(ends[take - 1]))
        bounds = [0] + ends[:take].tolist()
        # Reversed, so that pop() gives them in file order.
        self.records = [data[bounds[i]:bounds[i + 1]] for i in range(take - 1, -1, -1)]
        self.next_record += take
        self.next_byte += len(data)


def merge_shard(shard, block_paths):
    """Phase 2 for one output shard (in a worker). Returns the number of records written."""
    config = _WORKER["config"]
    blocks = [BlockFile(path) for path in block_paths]
    chunk_bytes = max(8192, _MERGE_BUFFER_BYTES // max(1, len(blocks)))
    parts = [_ShardPart(block, shard, chunk_bytes) for block in blocks]
    remaining = np.array([len(part) for part in parts], np.int64)
    rng = np.random.default_rng(np.random.SeedSequence(
        [config.seed, config.task_index, config.num_tasks, 1, shard]))
    final = shard_path(config, shard)
    temporary = os.path.join(work_dir(config), os.path.basename(final) + ".incomplete")
    written = 0
    with open(temporary, "wb") as writer:
        while remaining.sum():
            # The next records' blocks: a multivariate hypergeometric draw of a chunk, in random
            # order, is exactly a uniformly random interleaving of the parts.
            take = int(min(remaining.sum(), 4096))
            counts = rng.multivariate_hypergeometric(remaining, take)
            sources = np.repeat(np.arange(len(parts)), counts)
            rng.shuffle(sources)
            remaining -= counts
            # Records are already framed (length, CRCs): the shard is their concatenation.
            writer.write(b"".join([parts[source].pop() for source in sources.tolist()]))
            written += take
    os.replace(temporary, final)
    return written
