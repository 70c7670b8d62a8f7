"""The pre-training input pipeline: deterministic, resumable, distributed, with checks up front.

Records are the original BERT pre-training `tf.train.Example`s (see
`bert_keras.data.records`) or unmasked records (see `bert_keras.pretraining.dynamic_masking`).

Order and resumption: with a seed, the order of records is a fixed function of the seed (files
are shuffled per epoch, read round-robin `cycle_length` at a time, then shuffled in a buffer; all
of it deterministic). A run resumed at step `s` skips the first `s * global_batch_size` records
of that stream (per input pipeline: its share), so it sees exactly the batches an uninterrupted
run would have seen. Skipping reads and discards the records without parsing them; on a large
corpus far into training that costs minutes of I/O at start-up, not hours.

This is the one reader of pre-training records: training reads through `make_dataset_fn`, and
`read_records` reads every record once, in batches, to inspect or evaluate them.

Bad input:
- a record file whose first record does not have the features and lengths of the flags
  (`max_seq_length`, `max_predictions_per_seq`) is reported before training, by name;
- a corrupt or truncated file fails with its name (`raise_corrupt_files` runs
  `find_corrupt_files` after the reader's unnamed `DataLossError`), or with
  `skip_corrupt_records=True` its unreadable tail is skipped and the files and records are
  counted first (`scan_record_files`, one pass over the data).

Example:

>>> files = expand_file_pattern("data/part-*.tfrecord")  # doctest: +SKIP
>>> kind = check_record_files(files, max_seq_length=128, max_predictions_per_seq=20)  # doctest: +SKIP
>>> dataset_fn = make_dataset_fn(files, kind, 128, 20, global_batch_size=256)  # doctest: +SKIP
>>> dataset = strategy.distribute_datasets_from_function(dataset_fn)  # doctest: +SKIP
"""

import dataclasses

import tensorflow as tf
from absl import logging

from bert_keras.data import manifest
from bert_keras.pretraining import dynamic_masking
from bert_keras.data.records import (RecordsError, expand_file_pattern, feature_lengths,
                                     feature_spec)

MASKED = "masked"
UNMASKED = "unmasked"


@dataclasses.dataclass(frozen=True)
class TargetOptions:
    """How the prediction targets are made.

    dynamic_masking: mask anew on the fly (needs the vocabulary's special ids and size).
    left_to_right: next-token targets for a causal model (the paper's LTR ablation).
    """

    dynamic_masking: bool = False
    left_to_right: bool = False
    masked_lm_prob: float = 0.15
    vocab_size: int = 0
    cls_id: int = 2
    sep_id: int = 3
    mask_id: int = 4


def _first_record(path):
    dataset = tf.data.TFRecordDataset(path).take(1)
    try:
        for record in dataset:
            return record.numpy()
    except tf.errors.DataLossError as error:
        raise RecordsError(f"{path}: corrupt or truncated TFRecord file ({error.message.strip()})") from error
    return None


def _feature_sizes(record):
    example = tf.train.Example.FromString(record)
    sizes = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        sizes[name] = len(getattr(feature, kind).value) if kind else 0
    return sizes


def check_record_files(files, max_seq_length, max_predictions_per_seq):
    """Checks the first record of every file against the flags; returns MASKED or UNMASKED.

    Raises:
      RecordsError naming the file, the feature and both lengths, when a record was made with
      another `max_seq_length` or `max_predictions_per_seq`, lacks features, or when files mix
      masked and unmasked records.
    """
    expected = feature_lengths(max_seq_length, max_predictions_per_seq)
    kinds = {}
    for path in files:
        record = _first_record(path)
        if record is None:
            continue  # an empty file holds nothing to check
        sizes = _feature_sizes(record)
        kind = MASKED if "masked_lm_positions" in sizes else UNMASKED
        names = list(expected) if kind == MASKED else list(dynamic_masking.UNMASKED_FEATURES)
        missing = [name for name in names if name not in sizes]
        if missing:
            raise RecordsError(f"{path}: records lack feature(s) {missing}; expected the features "
                               f"of pre-training records {names}")
        for name in names:
            if sizes[name] != expected[name]:
                flag = ("max_seq_length" if name in ("input_ids", "input_mask", "segment_ids")
                        else "max_predictions_per_seq" if name != "next_sentence_labels" else None)
                hint = (f"; the records were made with {flag}={sizes[name]} but --{flag}="
                        f"{expected[name]}" if flag else "")
                raise RecordsError(f"{path}: feature {name} has {sizes[name]} values per record, "
                                   f"expected {expected[name]}{hint}")
        kinds.setdefault(kind, path)
    if not kinds:
        raise RecordsError(f"no records in {len(files)} file(s) starting with {files[0]}")
    if len(kinds) > 1:
        raise RecordsError(f"record files mix masked ({kinds[MASKED]}) and unmasked "
                           f"({kinds[UNMASKED]}) records")
    return next(iter(kinds))


def scan_record_files(files):
    """Reads every file once: [(path, readable records, whole file readable?)].

    A TFRecord reader cannot resynchronize after a corrupt length or checksum, so a corrupt file
    is readable up to its first bad record. Files are read in parallel.
    """
    sizes = [tf.io.gfile.stat(path).length for path in files]

    def count(path):
        records = tf.data.TFRecordDataset(path).ignore_errors()
        # Each record takes its length plus 16 bytes of framing (length, two CRCs).
        return records.reduce((tf.constant(0, tf.int64), tf.constant(0, tf.int64)),
                              lambda state, record: (state[0] + 1,
                                                     state[1] + tf.cast(tf.strings.length(record), tf.int64) + 16))

    counts = tf.data.Dataset.from_tensor_slices(files).map(
        count, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    results = []
    for path, size, (records, consumed) in zip(files, sizes, counts.as_numpy_iterator()):
        results.append((path, int(records), int(consumed) == size))
    return results


def find_corrupt_files(files):
    """[(path, readable records)] of the files that cannot be read to their end."""
    return [(path, records) for path, records, whole in scan_record_files(files) if not whole]


def corrupt_files_message(corrupt):
    lines = [f"{path}: corrupt or truncated TFRecord file (readable up to record {records})"
             for path, records in corrupt]
    return "\n".join(lines)


def raise_corrupt_files(files, error):
    """Re-raises a reader's `DataLossError` as a `RecordsError` naming the corrupt files."""
    corrupt = find_corrupt_files(files)
    if not corrupt:
        raise error
    raise RecordsError(corrupt_files_message(corrupt)
                       + "\nrerun with skip_corrupt_records (--skip_corrupt_records) to skip the "
                         "unreadable rest of these files") from error


def _parse(records, kind, max_seq_length, max_predictions_per_seq):
    spec = (feature_spec(max_seq_length, max_predictions_per_seq) if kind == MASKED
            else dynamic_masking.unmasked_feature_spec(max_seq_length))
    parsed = tf.io.parse_example(records, spec)
    features = {}
    for name, value in parsed.items():
        # TPUs want int32; ids and positions fit.
        features[name] = tf.cast(value, tf.int32) if value.dtype == tf.int64 else value
    features["next_sentence_labels"] = tf.reshape(features["next_sentence_labels"], [-1])
    return features


def make_targets(features, kind, targets, max_predictions_per_seq, seed):
    """Applies dynamic masking / left-to-right targets to a parsed batch (see `TargetOptions`)."""
    if not (targets.dynamic_masking or targets.left_to_right):
        if kind != MASKED:
            raise RecordsError("unmasked records need dynamic masking or left-to-right targets")
        return features
    if kind == MASKED:
        features = dict(features, input_ids=dynamic_masking.restore_masked_tokens(features))
    if targets.left_to_right:
        return dynamic_masking.next_token_targets(features)
    return dynamic_masking.mask_tokens(
        features, seed, max_predictions_per_seq=max_predictions_per_seq,
        vocab_size=targets.vocab_size, cls_id=targets.cls_id, sep_id=targets.sep_id,
        mask_id=targets.mask_id, masked_lm_prob=targets.masked_lm_prob)


def make_dataset_fn(files, kind, max_seq_length, max_predictions_per_seq, global_batch_size,
                    targets=TargetOptions(), start_step=0, shuffle=True, repeat=True, seed=12345,
                    shuffle_buffer_size=10000, cycle_length=16, drop_remainder=True,
                    skip_corrupt_records=False):
    """A `dataset_fn(input_context)` for `strategy.distribute_datasets_from_function`.

    Each input pipeline reads its share of the files (or, with fewer files than pipelines, its
    share of the records), batches `global_batch_size / num_replicas` records per replica and
    starts `start_step` global batches into the record stream (see the module docstring).

    Elements: dict of `input_ids`, `input_mask`, `segment_ids` int32 [batch, max_seq_length];
    `masked_lm_positions`, `masked_lm_ids` int32 and `masked_lm_weights` float32
    [batch, predictions] (predictions = max_seq_length - 1 for left-to-right targets);
    `next_sentence_labels` int32 [batch].
    """
    files = list(files)

    def dataset_fn(input_context=None):
        num_pipelines = input_context.num_input_pipelines if input_context else 1
        pipeline_id = input_context.input_pipeline_id if input_context else 0
        batch_size = (input_context.get_per_replica_batch_size(global_batch_size)
                      if input_context else global_batch_size)
        pipeline_files = files
        shard_records = num_pipelines > 1 and len(files) < num_pipelines
        if num_pipelines > 1 and not shard_records:
            pipeline_files = files[pipeline_id::num_pipelines]

        def read(path):
            records = tf.data.TFRecordDataset(path)
            return records.ignore_errors() if skip_corrupt_records else records

        dataset = tf.data.Dataset.from_tensor_slices(pipeline_files)
        if shuffle:
            dataset = dataset.shuffle(len(pipeline_files), seed=seed, reshuffle_each_iteration=True)
        if repeat:
            dataset = dataset.repeat()
        dataset = dataset.interleave(read, cycle_length=min(len(pipeline_files), cycle_length),
                                     block_length=1, num_parallel_calls=tf.data.AUTOTUNE,
                                     deterministic=True)
        if shard_records:
            dataset = dataset.shard(num_pipelines, pipeline_id)
        if shuffle:
            dataset = dataset.shuffle(shuffle_buffer_size, seed=seed + 1, reshuffle_each_iteration=True)
        # The index of each record in this pipeline's stream seeds its dynamic mask.
        dataset = dataset.enumerate()
        skip = start_step * global_batch_size // num_pipelines
        if skip:
            dataset = dataset.skip(skip)
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)

        def parse(indices, records):
            features = _parse(records, kind, max_seq_length, max_predictions_per_seq)
            batch_seed = tf.stack([tf.constant(seed + 1000003 * pipeline_id, tf.int64), indices[0]])
            return make_targets(features, kind, targets, max_predictions_per_seq, batch_seed)

        dataset = dataset.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return dataset.prefetch(tf.data.AUTOTUNE)

    return dataset_fn


def check_files_divide(files, num_processes):
    """Refuses record files whose number does not divide by the processes of a multi-process
    run: each process reads its own files (`make_dataset_fn` with one input pipeline a process),
    and uneven shares would give the processes different amounts of data, so that one runs out
    or waits for the others.

    >>> check_files_divide(["a", "b", "c", "d"], 2)
    >>> try:
    ...     check_files_divide(["a", "b", "c"], 2)
    ... except RecordsError as error:
    ...     print(str(error)[:60])
    3 record files (a, b, c) do not divide among 2 processes: ea
    """
    if num_processes > 1 and len(files) % num_processes:
        shown = ", ".join(files[:4]) + (", ..." if len(files) > 4 else "")
        raise RecordsError(
            f"{len(files)} record files ({shown}) do not divide among {num_processes} "
            f"processes: each process reads its own files, so their number must be a multiple "
            f"of {num_processes}; write the records as a multiple of {num_processes} shards "
            "(create_pretraining_data --num_output_shards) or run as many processes as divide "
            f"{len(files)}")


def process_input_context(num_processes, process_id):
    """The `tf.distribute.InputContext` of one process of a multi-process run (None for one
    process): one input pipeline a process, reading every `num_processes`-th file from
    `process_id` and batching its share of the global batch."""
    if num_processes <= 1:
        return None
    return tf.distribute.InputContext(num_input_pipelines=num_processes,
                                      input_pipeline_id=process_id,
                                      num_replicas_in_sync=num_processes)


def read_records(file_pattern, batch_size, max_seq_length, max_predictions_per_seq,
                 targets=TargetOptions()):
    """Every record of `file_pattern` once, as dicts of NumPy arrays of up to `batch_size` rows.

    The training reader with its checks (lengths against the flags, corrupt files by name), not
    shuffled: files are read round-robin. Keys and dtypes as `make_dataset_fn`'s elements.

    Raises:
      RecordsError: no files, records of other lengths, or a corrupt or truncated file.
    """
    files = expand_file_pattern(file_pattern)
    kind = check_record_files(files, max_seq_length, max_predictions_per_seq)
    dataset = make_dataset_fn(files, kind, max_seq_length, max_predictions_per_seq, batch_size,
                              targets=targets, shuffle=False, repeat=False, drop_remainder=False)()
    try:
        yield from dataset.as_numpy_iterator()
    except tf.errors.DataLossError as error:
        raise_corrupt_files(files, error)


def target_options(options, vocab):
    """The `TargetOptions` of a run's `PretrainingOptions` and vocabulary."""
    special = vocab.special_ids()
    return TargetOptions(
        dynamic_masking=options.dynamic_masking, left_to_right=options.left_to_right,
        masked_lm_prob=options.masked_lm_prob, vocab_size=len(vocab),
        cls_id=special["start_of_sequence_id"], sep_id=special["end_of_segment_id"],
        mask_id=special["mask_id"])


def prepare_records(options):
    """The record files of `options.input_files` and their kind (`MASKED` or `UNMASKED`),
    checked before training: every task of a data run split over several copies
    (`manifest.check_all_tasks`), the first record's features and lengths, masking for unmasked
    records, and with `skip_corrupt_records` a count of the readable records."""
    files = expand_file_pattern(options.input_files)
    manifest.check_all_tasks(files)
    kind = check_record_files(files, options.max_seq_length, options.max_predictions_per_seq)
    if kind == UNMASKED and not (options.dynamic_masking or options.left_to_right):
        raise RecordsError(f"{files[0]}: unmasked records need dynamic_masking (or left_to_right)")
    if options.skip_corrupt_records:
        scan = scan_record_files(files)
        corrupt = [(path, records) for path, records, whole in scan if not whole]
        total = sum(records for _, records, _ in scan)
        if corrupt:
            logging.warning("skipping the unreadable rest of %d corrupt file(s) (%d readable records "
                            "in %d files):\n%s", len(corrupt), total, len(files),
                            corrupt_files_message(corrupt))
        if total == 0:
            raise RecordsError(f"no readable records in {len(files)} file(s)")
    return files, kind


__all__ = ["MASKED", "UNMASKED", "TargetOptions", "target_options", "prepare_records", "RecordsError", "expand_file_pattern",
           "check_record_files", "scan_record_files", "find_corrupt_files", "corrupt_files_message",
           "raise_corrupt_files", "make_targets", "make_dataset_fn", "read_records",
           "check_files_divide", "process_input_context"]
