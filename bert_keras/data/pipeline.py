"""Streaming, parallel, resumable writing of pre-training TFRecords from raw text.

The work is in two phases (the units of work are in `bert_keras.data.workers`, the statistics and
progress a run reports in `bert_keras.data.statistics`):

1. Blocks. The main process reads the corpus in order, cuts it into blocks of whole documents
   (see `bert_keras.data.corpus`); worker processes (plain Python and NumPy, no TensorFlow,
   so they start in a fraction of a second) tokenize the blocks in parallel with
   `bert_keras.text.python_tokenizer` (the original's ids), and the main process appends each
   block, in order, to its input file's token store on disk (`bert_keras.data.token_store`).
   Once a file is stored whole, the workers turn each of its blocks into instances
   (`bert_keras.data.instances`, all `dupe_factor` passes, random-next segments from any
   document of the file, read from the store), serialize and frame
   them as TFRecords (`bert_keras.data.records`), deal them at random to the output
   shards, shuffle them, and write one work file per block, records grouped by shard.
2. Shards. Each output shard is a uniformly random interleaving of its groups from all block
   files (at each step the next record comes from a block with probability proportional to
   what that block has left), read a few kilobytes at a time. Since each group is in random
   order too, every shard is a uniformly random permutation of its records, and since records
   were dealt to shards at random, the shards together are a uniform shuffle of the corpus,
   like the original's global shuffle, without holding the corpus in memory.

Memory is one block per worker (and at most two blocks per worker in flight) in phase 1 and a
bounded read buffer in phase 2, whatever the corpus size. Every random draw is seeded from
(`seed`, task, block or shard index), so the output is byte-identical for any number of
workers. Every file is written under a temporary name and renamed when complete, and a rerun
continues from the completed token stores, blocks and shards.
"""

import dataclasses
import hashlib
import json
import multiprocessing
import os
import shutil
import sys
import time
from concurrent import futures

from bert_keras.common.errors import BertKerasError
from bert_keras.common import cli
from bert_keras.common.cli import option
from bert_keras.common.files import describe_changes, write_atomic
from bert_keras.common.outputs import acquire_lock, release_lock
from bert_keras.data import corpus
from bert_keras.data import instances
from bert_keras.data.block_phase import BlockPhase, run_bounded, tokenizer_name
from bert_keras.data.corpus import INPUT_FORMATS, UTF8_ERRORS
from bert_keras.data.statistics import Progress, format_stats, sum_stats
from bert_keras.data.workers import (block_path, init_worker, manifest_path, merge_shard,
                                     shard_path, stats_path, task_prefix, work_dir)
from bert_keras.text.vocab import Vocabulary



class PipelineError(BertKerasError, RuntimeError):
    """The inputs, flags or output directory do not allow writing pre-training data."""


@dataclasses.dataclass
class PipelineConfig:
    """Settings of one `create_pretraining_data` run (flags of `tools/create_pretraining_data.py`).

    `block_bytes=0` picks the block size from the corpus size: about 1/100 of the task's input,
    between 256 KiB and 1 MiB.
    """

    input_files: list = option(None, "Input raw text file(s): a comma-separated list of files or "
                               "globs.", aliases=("input_file",), required=True,
                               from_flag=cli.expand_files)
    vocab_file: str = option(None, "The WordPiece vocabulary (vocab.txt).", required=True)
    output_dir: str = option(None, "Directory for the TFRecord shards, stats.json and "
                             "manifest.json.", required=True)
    do_lower_case: bool = cli.do_lower_case_option()
    options: instances.InstanceOptions = instances.InstanceOptions()
    seed: int = cli.seed_option(12345, "Random seed for data generation.")
    num_output_shards: int = option(16, "TFRecord files to write (per task).")
    num_workers: int = option(0, "Worker processes; 0 = one per CPU core. The output does not "
                              "depend on it.")
    input_format: str = option(
        "sentences", "sentences: one sentence per line, blank line between documents (the "
        "original format). paragraphs: one paragraph per line, sentences split by the tool; "
        "' = Title = ' lines start a new document.", choices=INPUT_FORMATS)
    task_index: int = option(0, "This copy's index among --num_tasks.")
    num_tasks: int = option(1, "Copies of this tool sharing the input files (each takes every "
                            "num_tasks-th file).")
    block_bytes: int = option(
        0, "Text per unit of work, in KiB (whole documents; only a document this large is cut). "
        "0: about 1/100 of the input, between 256 KiB and 1 MiB. Random-next segments come from "
        "any document of the same input file, whatever the block.", flag="block_size_kib",
        from_flag=lambda kib: kib * 1024)
    utf8_errors: str = option("replace", "Lines that are not valid UTF-8 (or not valid in "
                              "--input_encoding): decode with U+FFFD, or skip.",
                              choices=UTF8_ERRORS)
    input_encoding: str = cli.input_encoding_option()
    start_over: bool = cli.start_over_option("records, statistics and work files in --output_dir "
                                             "(of this task; nothing else there)")
    # (vocab_file, do_lower_case) -> tokenize(list of str) -> (ids, tokens per text), built and
    # run in each worker process (a module-level function, so that it pickles).
    tokenizer: object = None  # None: `workers.python_tokenizer`
    progress: bool = option(True, "Show a progress bar and the statistics.")


# ---------------------------------------------------------------------------------------------
# The run.


def _check_config(config):
    config.options.validate()
    if not config.input_files:
        raise PipelineError("no input files")
    missing = [f for f in config.input_files if not os.path.isfile(f)]
    if missing:
        raise PipelineError(f"input file(s) not found: {missing[:5]}")
    if config.input_format not in corpus.INPUT_FORMATS:
        raise PipelineError(f"--input_format must be one of {corpus.INPUT_FORMATS}, "
                            f"got {config.input_format!r}")
    if config.utf8_errors not in corpus.UTF8_ERRORS:
        raise PipelineError(f"--utf8_errors must be one of {corpus.UTF8_ERRORS}, "
                            f"got {config.utf8_errors!r}")
    if config.block_bytes < 0:
        raise PipelineError(f"--block_size_kib must be positive (or 0: automatic), got "
                            f"{config.block_bytes // 1024}")
    if config.num_output_shards < 1:
        raise PipelineError(f"--num_output_shards must be at least 1, got "
                            f"{config.num_output_shards}")
    if not 0 <= config.task_index < config.num_tasks:
        raise PipelineError(f"--task_index must be in [0, --num_tasks={config.num_tasks}), got "
                            f"{config.task_index}")
    if len(config.input_files) < config.num_tasks:
        raise PipelineError(f"{len(config.input_files)} input files for {config.num_tasks} "
                            "tasks: each task takes whole files, so split the input into at least "
                            "as many files as tasks")
    try:
        Vocabulary.from_file(config.vocab_file).check_casing(config.do_lower_case)
    except ValueError as error:
        raise PipelineError(f"bad --vocab_file: {error}") from error
    # Text a corpus can be made of (not binary, compressed or empty; two documents at least),
    # checked as the main job checks it, before anything is written.
    corpus.check_corpus_files(task_files(config), config.input_format,
                                          encoding=config.input_encoding)


def task_files(config):
    """This task's input files: every `num_tasks`-th of the sorted list, from `task_index`
    (a file matched twice counts once, with a warning)."""
    return corpus.unique_files(sorted(config.input_files))[config.task_index::config.num_tasks]


def _file_digest(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _manifest(config, files, block_bytes):
    """Everything the output depends on; a rerun must match it to reuse completed work."""
    return {
        "format": "bert_keras pretraining records v2",
        "input_files": [[os.path.abspath(f), os.path.getsize(f), os.path.getmtime(f)]
                        for f in files],
        "vocab_sha256": _file_digest(config.vocab_file),
        "do_lower_case": config.do_lower_case,
        "options": dataclasses.asdict(config.options),
        "random_seed": config.seed,
        "num_output_shards": config.num_output_shards,
        "input_format": config.input_format,
        "task_index": config.task_index,
        "num_tasks": config.num_tasks,
        "block_bytes": block_bytes,
        "utf8_errors": config.utf8_errors,
        "input_encoding": corpus.check_encoding(config.input_encoding),
        "tokenizer": tokenizer_name(config),
    }


def _prepare_output_dir(config, manifest):
    """Creates the output directory, or checks that it holds a run with the same settings."""
    try:
        os.makedirs(config.output_dir, exist_ok=True)
        probe = os.path.join(config.output_dir, f".write-test-{os.getpid()}")
        with open(probe, "wb"):
            pass
        os.remove(probe)
    except OSError as error:
        raise PipelineError(f"cannot write to --output_dir={config.output_dir}: {error}") from error
    path = manifest_path(config)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            previous = json.load(f)
        if previous != manifest:
            raise PipelineError(
                f"{config.output_dir} holds pre-training data made with other settings or inputs "
                f"({describe_changes(previous, manifest, 'there', 'now')}); use another "
                "--output_dir, or pass --start_over to replace that data")
    else:
        existing = [name for name in os.listdir(config.output_dir)
                    if name.startswith(task_prefix(config) + "shard-")]
        if existing:
            raise PipelineError(f"{config.output_dir} already holds shards ({existing[0]}, ...) "
                                "but no manifest; use another --output_dir, or pass --start_over "
                                "to replace them")
        write_atomic(path, json.dumps(manifest, indent=1, sort_keys=True).encode())
    _acquire_lock(config)
    os.makedirs(work_dir(config), exist_ok=True)


def lock_path(config):
    return os.path.join(config.output_dir, f"{task_prefix(config)}.lock")


def _acquire_lock(config):
    """Takes `<output_dir>/[task-...-].lock` (the shared lock of every writer,
    `bert_keras.common.outputs.acquire_lock`), so that a second run into the same directory
    stops with a message instead of deleting the first's work files; a lock left by a run that
    was killed (its process is gone) is taken over."""
    acquire_lock(lock_path(config), config.output_dir, PipelineError)


def _release_lock(config):
    release_lock(lock_path(config))


def _auto_block_bytes(files):
    total = sum(os.path.getsize(f) for f in files)
    return int(min(1 << 20, max(256 << 10, total // 100)))


class _InProcess:
    """The executor interface, running tasks in this process (one worker)."""

    def __init__(self, config):
        init_worker(config)

    def submit(self, function, *args):
        future = futures.Future()
        try:
            future.set_result(function(*args))
        except BaseException as error:  # handed to the caller like a worker's error
            future.set_exception(error)
        return future

    def shutdown(self, **kwargs):
        pass


class _LazyExecutor:
    """Starts the workers only when the first task is submitted."""

    def __init__(self, config, num_workers):
        self.config = config
        self.num_workers = num_workers
        self.executor = None

    def start(self):
        """Starts every worker now."""
        if self.executor is not None:
            return
        if self.num_workers == 1:
            self.executor = _InProcess(self.config)
            return
        # The calling process may run TensorFlow (the main job does), which does not survive
        # fork.
        context = multiprocessing.get_context("spawn")
        self.executor = futures.ProcessPoolExecutor(
            self.num_workers, mp_context=context, initializer=init_worker,
            initargs=(self.config,))
        # The pool starts a process per submitted task while none is idle: starting them all
        # while this process is still small keeps each start (a fork, then exec) cheap.
        for _ in range(self.num_workers):
            self.executor.submit(int)

    def submit(self, function, *args):
        self.start()
        return self.executor.submit(function, *args)

    def shutdown(self):
        if self.executor is not None:
            self.executor.shutdown(cancel_futures=True)


def run(config):
    """Writes this task's shards and statistics; returns the statistics (a dict)."""
    start = time.time()
    _check_config(config)
    files = task_files(config)
    # From all the input (not this task's share), so that every task cuts the same blocks.
    block_bytes = config.block_bytes or _auto_block_bytes(config.input_files)
    manifest = _manifest(config, files, block_bytes)
    shards = [shard_path(config, s) for s in range(config.num_output_shards)]
    created_output_dir = not os.path.exists(config.output_dir)
    if config.start_over and not created_output_dir:
        _remove_earlier_run(config)
    _prepare_output_dir(config, manifest)  # takes the lock
    try:
        if os.path.exists(stats_path(config)) and all(os.path.exists(p) for p in shards):
            with open(stats_path(config), encoding="utf-8") as f:
                stats = json.load(f)
            if config.progress:
                print(f"{config.output_dir}: already complete", file=sys.stderr)
            _remove_work_dir(config)
            return stats
        num_workers = config.num_workers or len(os.sched_getaffinity(0))
        total_bytes = sum(os.path.getsize(f) for f in files)
        progress = Progress(config.progress)
        executor = _LazyExecutor(config, num_workers)
        try:
            block_stats, corpus_stats = BlockPhase(config, executor, num_workers, block_bytes,
                                                      files, total_bytes, progress).run()
            total_instances = sum(s["instances"] for s in block_stats)
            if not block_stats or total_instances == 0:
                _remove_outputs(config, created_output_dir)
                raise PipelineError(
                    f"the input ({len(files)} file(s), {total_bytes:,} bytes) holds no document "
                    "with any token: nothing to write")
            block_paths = [block_path(config, i) for i in range(len(block_stats))]
            todo = [s for s in range(config.num_output_shards) if not os.path.exists(shards[s])]
            written = [0, 0]  # records, shards

            def merged(count):
                written[0] += count
                written[1] += 1
                progress.update("shards", written[0] / total_instances, total_instances)

            run_bounded(executor, ((merge_shard, (s, block_paths)) for s in todo),
                         2 * num_workers, merged)
        finally:
            executor.shutdown()
        stats = sum_stats(block_stats, corpus_stats, config, len(files), block_bytes,
                          time.time() - start)
        write_atomic(stats_path(config), json.dumps(stats, indent=1).encode())
        _remove_work_dir(config)
        if config.progress:
            progress.update("done", 1.0, stats["instances"], force=True)
            print(format_stats(stats), file=sys.stderr)
        return stats
    finally:
        _release_lock(config)


def _remove_work_dir(config):
    shutil.rmtree(work_dir(config), ignore_errors=True)


def _remove_earlier_run(config):
    """--start_over: removes this task's shards (of any shard count), statistics, manifest and
    work files from the output directory, under its lock; prints what it removed."""
    import glob

    _acquire_lock(config)
    try:
        shards = glob.glob(os.path.join(glob.escape(config.output_dir),
                                        f"{task_prefix(config)}shard-*-of-*.tfrecord"))
        paths = shards + [p for p in (manifest_path(config), stats_path(config))
                          if os.path.exists(p)]
        for path in paths:
            os.remove(path)
        had_work = os.path.exists(work_dir(config))
        _remove_work_dir(config)
    finally:
        _release_lock(config)
    if paths or had_work:
        print(f"--start_over: removed {len(shards)} shard(s), "
              f"{len(paths) - len(shards)} other file(s)"
              f"{' and the work files' if had_work else ''} from {config.output_dir}",
              file=sys.stderr)


def _remove_outputs(config, remove_output_dir):
    _remove_work_dir(config)
    for path in [manifest_path(config), stats_path(config)]:
        if os.path.exists(path):
            os.remove(path)
    _release_lock(config)
    if remove_output_dir and not os.listdir(config.output_dir):
        os.rmdir(config.output_dir)
