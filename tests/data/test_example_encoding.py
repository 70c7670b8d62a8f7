"""The NumPy tf.train.Example encoder and TFRecord framing against protobuf and TensorFlow."""

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.data import example_encoding as ee
from helpers.pretraining_data_fixtures import example_proto


def tensorflow_file(tmp_path, records):
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    with open(path, "rb") as f:
        return f.read()


# Values at every varint width boundary, through the lookup tables (< 2**16) and beyond.
BOUNDARIES = [0, 1, 127, 128, 16383, 16384, 65535, 65536, 2 ** 21 - 1, 2 ** 21, 2 ** 28,
              2 ** 35 - 1, 2 ** 40, 2 ** 62]


@pytest.mark.parametrize("top", [127, 16383, 65535, 2 ** 62])
def test_encoder_matches_protobuf(top):
    rng = np.random.default_rng(top % 1000)
    values = np.array([v for v in BOUNDARIES if v <= top], np.int64)
    features = {"a": np.stack([rng.permutation(values) for _ in range(6)]),
                "b": rng.random((6, 5)).astype(np.float32),
                "c": np.array([[1], [0], [300], [5], [0], [2 ** 20]]),
                "input_ids": rng.integers(0, top + 1, (6, 40)) * (rng.random((6, 40)) < 0.7)}
    buffer, offsets = ee.encode_examples(features)
    for row in range(6):
        expected = example_proto({name: values[row] for name, values in features.items()})
        record = buffer[offsets[row]:offsets[row + 1]]
        assert tf.train.Example.FromString(record) == expected
        # Byte for byte too: minimal varints, and map entries in the given order (sorted here,
        # as protobuf's deterministic serializer writes them).
        assert record == expected.SerializeToString(deterministic=True)


@pytest.mark.parametrize("use_c", [True, False])
def test_framed_examples_in_any_order_match_the_tensorflow_writer(tmp_path, monkeypatch, use_c):
    if not use_c:  # as on a machine without google-crc32c's C code
        monkeypatch.setattr(ee, "_google_crc32c", None)
    rng = np.random.default_rng(1)
    n = 300
    features = {"input_ids": rng.integers(0, 30522, (n, 24)) * (rng.random((n, 24)) < 0.8),
                "input_mask": rng.integers(0, 2, (n, 24)),
                "masked_lm_weights": rng.random((n, 3)).astype(np.float32),
                "next_sentence_labels": rng.integers(0, 2, (n, 1))}
    order = rng.permutation(n)
    framed, offsets = ee.encode_framed_examples({k: v[order] for k, v in features.items()})
    protos = [example_proto({k: v[i] for k, v in features.items()}).SerializeToString(
        deterministic=True) for i in order]
    assert framed == tensorflow_file(tmp_path, protos)
    assert np.array_equal(np.diff(offsets), [len(p) + 16 for p in protos])
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(tmp_path / "tf.tfrecord"))]
    assert records == protos


@pytest.mark.parametrize("use_c", [True, False])
def test_framing_matches_the_tensorflow_writer(tmp_path, use_c):
    rng = np.random.default_rng(5)
    # Lengths 0 to 300 cover every tail length of the four-bytes-per-step NumPy CRC.
    records = [rng.integers(0, 256, int(n)).astype(np.uint8).tobytes()
               for n in rng.integers(0, 300, 200)] + [b"", b"a", b"ab", b"abc"]
    offsets = np.zeros([len(records) + 1], np.int64)
    np.cumsum([len(r) for r in records], out=offsets[1:])
    framed, framed_offsets = ee.frame_records(b"".join(records), offsets, use_c=use_c)
    assert framed == tensorflow_file(tmp_path, records)
    assert np.array_equal(np.diff(framed_offsets), np.diff(offsets) + 16)


def test_crc32c_check_value():
    # The standard check value of CRC-32C: the CRC of the ASCII digits "123456789".
    assert ee.crc32c_rows(np.frombuffer(b"123456789", np.uint8)[None, :], [9])[0] == 0xE3069283


def test_negative_values_are_refused():
    with pytest.raises(ValueError, match="ids: negative"):
        ee.encode_examples({"ids": np.array([[1, -1]])})
