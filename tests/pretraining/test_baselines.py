"""`pretraining.baselines`: what a model that learned nothing scores, against counts made here
by hand from records written here (`tf.train.Example`s, not the package's writer), and its
docstring examples run (tests/test_docstrings.py does not reach `pretraining/`)."""

import doctest
import os
import tempfile

import pytest
import tensorflow as tf

from bert_keras.pretraining import baselines
from bert_keras.pretraining.baselines import compute_baselines

SEQ, PREDICTIONS = 8, 4


def _ints(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def _record(masked_lm_ids, masked_lm_weights, next_sentence_label):
    features = {"input_ids": _ints([2] + [5] * (SEQ - 2) + [3]), "input_mask": _ints([1] * SEQ),
                "segment_ids": _ints([0] * SEQ), "masked_lm_positions": _ints([1, 2, 3, 4]),
                "masked_lm_ids": _ints(masked_lm_ids),
                "masked_lm_weights": tf.train.Feature(
                    float_list=tf.train.FloatList(value=masked_lm_weights)),
                "next_sentence_labels": _ints([next_sentence_label])}
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def _write(path, rows):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for row in rows:
            writer.write(_record(*row))
    return str(path)


# Padding slots carry id 5 with weight 0: counted, 5 would be the most frequent token (6 times).
TRAIN = [([7, 7, 9, 5], [1, 1, 1, 0], 0),
         ([7, 8, 5, 5], [1, 1, 0, 0], 1),
         ([9, 5, 5, 5], [1, 0, 0, 0], 0)]
# The held-out records' own most frequent token is 9 (6 of 9), not the training records' 7.
HELDOUT = [([7, 9, 9, 5], [1, 1, 1, 0], 1),
           ([8, 7, 5, 5], [1, 1, 0, 0], 0),
           ([9, 9, 9, 9], [1, 1, 1, 1], 1)]


def test_the_baselines_are_the_hand_counts(tmp_path):
    # By hand: training masked tokens 7, 7, 9, 7, 8, 9 -> 7 (3 times). Held-out masked tokens
    # 7, 9, 9, 8, 7, 9, 9, 9, 9: 9 in all, 2 of them 7. Next-sentence labels 1, 0, 1: 2 of 3.
    train = _write(tmp_path / "train.tfrecord", TRAIN)
    heldout = _write(tmp_path / "heldout.tfrecord", HELDOUT)
    expected = {"unigram_mlm_accuracy": 2 / 9, "nsp_majority_share": 2 / 3,
                "most_frequent_token_id": 7, "eval_masked_tokens": 9, "eval_instances": 3}
    for batch_size in (1024, 2):  # one batch, or batches that split the records
        got = compute_baselines(train, heldout, SEQ, PREDICTIONS, batch_size=batch_size)
        assert got == pytest.approx(expected), batch_size


def test_files_are_globs_or_lists_and_all_are_counted(tmp_path):
    # The training records split over two files: the same counts as one file.
    first = _write(tmp_path / "train-0.tfrecord", TRAIN[:1])
    second = _write(tmp_path / "train-1.tfrecord", TRAIN[1:])
    heldout = _write(tmp_path / "heldout.tfrecord", HELDOUT)
    by_glob = compute_baselines(str(tmp_path / "train-*.tfrecord"), heldout, SEQ, PREDICTIONS)
    by_list = compute_baselines([first, second], [heldout], SEQ, PREDICTIONS)
    assert by_glob == by_list
    assert by_glob["most_frequent_token_id"] == 7 and by_glob["eval_masked_tokens"] == 9


def test_the_majority_label_is_either_label(tmp_path):
    # Held-out labels 0, 0, 1: the majority is "is the next" (0), 2 of 3.
    train = _write(tmp_path / "train.tfrecord", TRAIN)
    rows = [(ids, weights, label) for (ids, weights, _), label in zip(HELDOUT, (0, 0, 1))]
    heldout = _write(tmp_path / "heldout.tfrecord", rows)
    assert compute_baselines(train, heldout, SEQ, PREDICTIONS)["nsp_majority_share"] == \
        pytest.approx(2 / 3)


def test_records_without_masked_positions_are_refused(tmp_path):
    train = _write(tmp_path / "train.tfrecord", TRAIN)
    empty = _write(tmp_path / "empty.tfrecord", [([5, 5, 5, 5], [0, 0, 0, 0], 0)])
    with pytest.raises(ValueError, match="no masked positions"):
        compute_baselines(train, empty, SEQ, PREDICTIONS)
    with pytest.raises(ValueError, match="no masked positions"):
        compute_baselines(empty, train, SEQ, PREDICTIONS)


def test_the_docstring_examples_run(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    results = doctest.testmod(baselines, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert results.failed == 0 and results.attempted > 0, results
    assert os.listdir(tmp_path)  # the example wrote its records where it was told
