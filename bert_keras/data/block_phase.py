"""Phase 1 of writing pre-training data (see `bert_keras.data.pipeline`): the corpus read in
blocks, tokenized into per-file token stores, and turned into instances by worker processes.
"""

import collections
import dataclasses
import json
import os
from concurrent import futures

from bert_keras.common.files import write_atomic
from bert_keras.data import corpus
from bert_keras.data import token_store
from bert_keras.data.workers import (BlockFile, block_path, process_block, tokenize_block,
                                     tokenizer_factory, work_dir)
from bert_keras.text.vocab import Vocabulary


def tokenizer_name(config):
    """The tokenizer as the manifest records it (a rerun with another one starts afresh)."""
    factory = tokenizer_factory(config)
    return f"{factory.__module__}:{factory.__qualname__}"


def blocks_done_path(config):
    return os.path.join(work_dir(config), "blocks-done.json")


def run_bounded(executor, calls, max_pending, on_result):
    """Submits `(function, args)` from an iterator, keeping at most `max_pending` running."""
    pending = set()
    for function, args in calls:
        pending.add(executor.submit(function, *args))
        while len(pending) >= max_pending:
            done, pending = futures.wait(pending, return_when=futures.FIRST_COMPLETED)
            for future in done:
                on_result(future.result())
    while pending:
        done, pending = futures.wait(pending, return_when=futures.FIRST_COMPLETED)
        for future in done:
            on_result(future.result())


class BlockPhase:
    """Phase 1 of a run: every block of the input read, tokenized into its file's token store
    (the worker processes tokenize the next blocks while this process stores them in order)
    and, once a file's store is complete, turned into instances by the worker processes. A rerun reuses the complete stores and the
    blocks already written. `run()` returns (per-block stats in block order, corpus reader
    stats as a dict)."""

    def __init__(self, config, executor, num_workers, block_bytes, files, total_bytes, progress):
        self.config, self.executor, self.num_workers = config, executor, num_workers
        self.block_bytes, self.files, self.total_bytes = block_bytes, files, total_bytes
        self.progress = progress
        self.corpus = corpus.CorpusStats()
        self.block_stats = {}
        self.bytes_read = 0
        self.instances = 0
        self.vocab_size = len(Vocabulary.from_file(config.vocab_file))
        # The token store of the file being read: {"file": number, "writer": ..., "calls": [...]}.
        self.current = {}
        self.stores = {}  # file number -> the block table of a store completed by an earlier run

    def run(self):
        config = self.config
        done_path = blocks_done_path(config)
        if os.path.exists(done_path):
            with open(done_path, encoding="utf-8") as f:
                done = json.load(f)
            block_stats = [BlockFile(block_path(config, i)).stats for i in range(done["blocks"])]
            return block_stats, done["corpus"]
        try:
            run_bounded(self.executor, self._calls(), 2 * self.num_workers, self._finished)
        finally:
            if self.current:
                self.current["writer"].abandon()
        corpus_stats = dataclasses.asdict(self.corpus)
        ordered = [self.block_stats[i] for i in range(len(self.block_stats))]
        write_atomic(done_path, json.dumps({"blocks": len(ordered),
                                            "corpus": corpus_stats}).encode())
        return ordered, corpus_stats

    def _close_store(self):
        """Completes the current file's store and yields its blocks' instance work."""
        if self.current:
            self.current["writer"].close()
            yield from self.current["calls"]
            self.current.clear()

    def _store_block(self, block, done, documents, counts):
        """Appends a tokenized block to its file's store; yields work of files completed."""
        file_number, in_file = block.key
        if self.current.get("file") != file_number:
            yield from self._close_store()
            self.current.update(file=file_number, calls=[], writer=token_store.TokenStoreWriter(
                token_store.store_prefix(work_dir(self.config), file_number), self.vocab_size))
        first, end = self.current["writer"].append(in_file, documents, counts)
        if done:
            self.block_stats[block.index] = BlockFile(block_path(self.config, block.index)).stats
        else:
            self.current["calls"].append(
                (process_block, (block.index, block.key, first, end, counts)))
        self.progress.update("tokens", self.bytes_read / max(1, self.total_bytes), self.instances)

    def _reused_store_call(self, block, file_number, in_file, prefix, done):
        """The instance work of a block whose file an earlier run tokenized whole (None when
        its instances are written already)."""
        if file_number not in self.stores:
            with open(prefix + ".json", encoding="utf-8") as f:
                self.stores[file_number] = json.load(f)["blocks"]
        if done:
            self.block_stats[block.index] = BlockFile(block_path(self.config, block.index)).stats
            return None
        entry = self.stores[file_number][str(in_file)]
        self.executor.start()
        return process_block, (block.index, block.key, *entry["documents"], entry["counts"])

    def _calls(self):
        config = self.config
        ahead = collections.deque()
        # `files` are every num_tasks-th of the sorted input from task_index (`task_files`).
        numbers = range(config.task_index, len(config.input_files), config.num_tasks)
        for block in corpus.iter_blocks(self.files, config.input_format,
                                                    self.block_bytes, config.utf8_errors,
                                                    self.corpus, numbers,
                                                    config.input_encoding):
            self.bytes_read = self.corpus.bytes
            file_number, in_file = block.key
            done = os.path.exists(block_path(config, block.index))
            prefix = token_store.store_prefix(work_dir(config), file_number)
            if file_number in self.stores or token_store.is_complete(prefix):
                call = self._reused_store_call(block, file_number, in_file, prefix, done)
                if call is not None:
                    yield call
                continue
            # Random nexts may come from anywhere in the file, so every block of a file whose
            # store is incomplete is tokenized again, also those whose instances are written.
            ahead.append((block, done, self.executor.submit(tokenize_block, block)))
            while len(ahead) > self.num_workers + 1:
                block, done, tokenized = ahead.popleft()
                yield from self._store_block(block, done, *tokenized.result())
        while ahead:
            block, done, tokenized = ahead.popleft()
            yield from self._store_block(block, done, *tokenized.result())
        yield from self._close_store()

    def _finished(self, result):
        index, stats = result
        self.block_stats[index] = stats
        self.instances += stats["instances"]
        self.progress.update("blocks", self.bytes_read / max(1, self.total_bytes), self.instances)


__all__ = ["BlockPhase", "tokenizer_name",
           "blocks_done_path", "run_bounded"]
