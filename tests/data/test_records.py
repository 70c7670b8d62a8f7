"""Pre-training TFRecords: the vectorized encoder, the tf.data reader, and its error messages."""

import os

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.data import instances as pd
from bert_keras.data import records as pr
from bert_keras.pretraining.inputs import MASKED, make_dataset_fn, read_records
from helpers.pretraining_data_fixtures import encode_instance_batch, example_proto, write_tfrecords

SEQ, PRED = 16, 4


def random_batch(n, seed=0, vocab_size=30522):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5, SEQ + 1, n).astype(np.int32)
    position = np.arange(SEQ)[None, :]
    input_mask = (position < lengths[:, None]).astype(np.int32)
    input_ids = rng.integers(0, vocab_size, (n, SEQ)).astype(np.int32) * input_mask
    segment_ids = ((position >= 3) & (input_mask == 1)).astype(np.int32)
    count = rng.integers(1, PRED + 1, n)
    weights = (np.arange(PRED)[None, :] < count[:, None]).astype(np.float32)
    positions = (rng.integers(1, 5, (n, PRED)) * weights).astype(np.int32)
    labels = (rng.integers(0, vocab_size, (n, PRED)) * weights).astype(np.int32)
    return pd.InstanceBatch(input_ids=input_ids, input_mask=input_mask, segment_ids=segment_ids,
                            masked_lm_positions=positions, masked_lm_ids=labels,
                            masked_lm_weights=weights,
                            next_sentence_labels=rng.integers(0, 2, n).astype(np.int32),
                            lengths=lengths, replacement_counts=np.zeros([3], np.int64))


def test_instance_records_parse_with_the_original_spec():
    batch = random_batch(50)
    records = encode_instance_batch(batch)
    # name_to_features as in the original run_pretraining.py, written out here.
    spec = {
        "input_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
        "input_mask": tf.io.FixedLenFeature([SEQ], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([SEQ], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([PRED], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([PRED], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([PRED], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }
    parsed = tf.io.parse_example(tf.constant(records), spec)
    for name, values in pr.instance_features(batch).items():
        np.testing.assert_array_equal(parsed[name].numpy(), values)
    for record, row in zip(records[:5], range(5)):
        expected = example_proto({k: v[row] for k, v in pr.instance_features(batch).items()})
        assert tf.train.Example.FromString(record) == expected


def write_split(tmp_path, batch, parts=3, name="part"):
    records = encode_instance_batch(batch)
    paths = []
    for i in range(parts):
        path = str(tmp_path / f"{name}-{i}.tfrecord")
        write_tfrecords(path, records[i::parts])
        paths.append(path)
    return paths


def rows(features):
    """Rows of a batch dict as sortable tuples (the reader interleaves files)."""
    names = sorted(features)
    columns = [np.asarray(features[n]).reshape(len(features[n]), -1) for n in names]
    return sorted(tuple(np.concatenate([c[i].astype(np.float64) for c in columns]))
                  for i in range(len(columns[0])))


def test_round_trip_through_the_reader(tmp_path):
    batch = random_batch(37)
    write_split(tmp_path, batch)
    batches = list(read_records(str(tmp_path / "part-*.tfrecord"), 8, SEQ, PRED))
    assert [len(b["input_ids"]) for b in batches] == [8, 8, 8, 8, 5]
    got = {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}
    for name in pr.FEATURE_NAMES:
        expected_dtype = np.float32 if name == "masked_lm_weights" else np.int32
        assert batches[0][name].dtype == expected_dtype
    expected = pr.instance_features(batch)
    expected["next_sentence_labels"] = expected["next_sentence_labels"].reshape(-1)
    assert rows(got) == rows(expected)


def test_shuffled_repeated_batches_have_static_shapes(tmp_path):
    files = write_split(tmp_path, random_batch(40))
    dataset = make_dataset_fn(files, MASKED, SEQ, PRED, 16, shuffle=True, repeat=True, seed=1)()
    spec = dataset.element_spec
    assert spec["input_ids"].shape.as_list() == [16, SEQ]
    assert spec["masked_lm_weights"].shape.as_list() == [16, PRED]
    assert spec["next_sentence_labels"].shape.as_list() == [16]
    assert len(list(dataset.take(7))) == 7  # more than one epoch


def test_records_written_with_protobuf_are_read(tmp_path):
    batch = random_batch(10, seed=3)
    features = pr.instance_features(batch)
    path = str(tmp_path / "proto.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for row in range(10):
            writer.write(example_proto({k: v[row] for k, v in features.items()})
                         .SerializeToString())
    got = next(read_records(path, 10, SEQ, PRED))
    np.testing.assert_array_equal(got["input_ids"], batch.input_ids)
    np.testing.assert_array_equal(got["masked_lm_weights"], batch.masked_lm_weights)


def read_all(pattern, **kwargs):
    return sum(len(b["input_ids"]) for b in read_records(pattern, 4, SEQ, PRED, **kwargs))


def test_corrupted_and_truncated_files_are_named(tmp_path):
    good, other = write_split(tmp_path, random_batch(30), parts=2)
    data = open(good, "rb").read()
    truncated = str(tmp_path / "truncated.tfrecord")
    open(truncated, "wb").write(data[:-40])
    corrupted = str(tmp_path / "corrupted.tfrecord")
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    open(corrupted, "wb").write(bytes(flipped))
    assert read_all(f"{good},{other}") == 30
    for bad in (truncated, corrupted):
        with pytest.raises(pr.RecordsError, match=os.path.basename(bad) + ": corrupt or truncated"):
            read_all(f"{other},{bad}")


def test_records_with_other_lengths_are_named(tmp_path):
    batch = random_batch(12)
    path = str(tmp_path / "long.tfrecord")
    write_tfrecords(path, encode_instance_batch(batch))
    with pytest.raises(pr.RecordsError,
                       match=r"long\.tfrecord: feature input_ids [\s\S]*max_seq_length=32"):
        list(read_records(path, 4, SEQ * 2, PRED))


def test_no_files_is_a_clear_error(tmp_path):
    with pytest.raises(pr.RecordsError, match="no pre-training record files"):
        list(read_records(str(tmp_path / "nothing-*.tfrecord"), 4, SEQ, PRED))


def test_records_of_the_original_tool_are_read(tmp_path):
    from helpers.pretraining_data_fixtures import fixture_path, minilm_vocab_path, run_original_tool

    output = str(tmp_path / "original.tfrecord")
    run_original_tool(tmp_path, f"--input_file={fixture_path('sample_text.txt')}",
                      f"--output_file={output}", f"--vocab_file={minilm_vocab_path()}",
                      "--do_lower_case=True", "--max_seq_length=64", "--max_predictions_per_seq=10",
                      "--dupe_factor=2", "--random_seed=1")
    count = 0
    for features in read_records(output, 8, 64, 10):
        ids = features["input_ids"]
        assert np.all(ids[:, 0] == 101)  # [CLS]
        assert np.all((ids == 102).sum(axis=1) == 2)  # two [SEP]
        weights = features["masked_lm_weights"]
        assert np.all(weights.sum(axis=1) >= 1)
        count += len(ids)
    assert count > 10


def test_shards_of_an_unfinished_or_incomplete_run_are_refused(tmp_path):
    """Training must not quietly use part of the data: a data run killed before its stats.json,
    or a folder missing some of its shard-K-of-N files, is refused naming the folder."""
    from bert_keras.data.records import RecordsError, expand_file_pattern

    folder = tmp_path / "data"
    folder.mkdir()
    for index in range(4):
        (folder / f"shard-{index:05d}-of-00004.tfrecord").write_bytes(b"")
    (folder / "manifest.json").write_text("{}")
    with pytest.raises(RecordsError, match="did not finish"):
        expand_file_pattern(str(folder / "*.tfrecord"))
    (folder / "stats.json").write_text("{}")
    assert len(expand_file_pattern(str(folder / "*.tfrecord"))) == 4
    # A subset named on purpose is fine while the folder holds the whole run ...
    assert len(expand_file_pattern(str(folder / "shard-00000-of-00004.tfrecord"))) == 1
    # ... but not when shards are gone.
    (folder / "shard-00002-of-00004.tfrecord").unlink()
    with pytest.raises(RecordsError, match="1 of the 4 shards .* missing .*shard-00002-of-00004"):
        expand_file_pattern(str(folder / "*.tfrecord"))
