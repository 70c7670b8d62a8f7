import doctest
import os

import pytest

from bert_keras.common import files


def test_docstring_examples():
    assert doctest.testmod(files).failed == 0


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "vocab.txt"
    files.write_text_atomic(path, "old\n")
    with pytest.raises(RuntimeError):
        with files.atomic_output(path) as f:
            f.write(b"new, half")
            raise RuntimeError("disk full")
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["vocab.txt"]


def test_atomic_path_keeps_the_suffix_for_writers_that_go_by_it(tmp_path):
    path = tmp_path / "sub" / "curve.png"
    with files.atomic_path(path, ".png") as temporary:
        assert temporary.endswith(".png") and os.path.dirname(temporary) == str(path.parent)
        open(temporary, "wb").write(b"\x89PNG")
    assert path.read_bytes() == b"\x89PNG"
    assert os.listdir(path.parent) == ["curve.png"]


def test_write_atomic_joins_parts_and_json_ends_with_a_newline(tmp_path):
    files.write_atomic(tmp_path / "a.bin", [b"ab", b"cd"])
    assert (tmp_path / "a.bin").read_bytes() == b"abcd"
    files.write_json_atomic(tmp_path / "b.json", {"b": 1, "a": "é"}, sort_keys=True,
                            ensure_ascii=False)
    assert (tmp_path / "b.json").read_text(encoding="utf-8") == '{\n  "a": "é",\n  "b": 1\n}\n'
    with pytest.raises(ValueError, match="mode"):
        with files.atomic_output(tmp_path / "c", "a"):
            pass


# A path with a scheme goes through tf.io.gfile: TensorFlow's in-memory ram:// file system
# stands in for a bucket (gs://), as in tests/pretraining/test_cloud_storage.py.
def test_a_bucket_path_is_written_whole_through_tf_io_gfile(tmp_path, monkeypatch):
    import tensorflow as tf

    monkeypatch.chdir(tmp_path)  # nothing may land on the local disk under a "ram:" folder
    folder = "ram://bucket/test_files/out"
    files.write_text_atomic(f"{folder}/vocab.txt", "old\n")
    with pytest.raises(RuntimeError):
        with files.atomic_output(f"{folder}/vocab.txt") as f:
            f.write(b"new, half")
            raise RuntimeError("connection lost")
    with tf.io.gfile.GFile(f"{folder}/vocab.txt") as f:
        assert f.read() == "old\n"
    files.write_json_atomic(f"{folder}/sub/results.json", {"accuracy": 0.5})
    with tf.io.gfile.GFile(f"{folder}/sub/results.json") as f:
        assert f.read() == '{\n  "accuracy": 0.5\n}\n'
    with files.atomic_path(f"{folder}/curve.png", ".png") as temporary:
        assert temporary.endswith(".png") and "://" not in temporary  # local, for any writer
        open(temporary, "wb").write(b"\x89PNG")
    assert sorted(tf.io.gfile.listdir(folder)) == ["curve.png", "sub", "vocab.txt"]
    assert os.listdir(tmp_path) == []
    copy = files.local_copy(f"{folder}/vocab.txt")
    assert open(copy).read() == "old\n" and os.path.basename(copy) == "vocab.txt"
    fs = files.file_system(folder)
    assert fs.isfile(f"{folder}/vocab.txt") and not fs.isfile(f"{folder}/sub")
    with pytest.raises(FileNotFoundError):
        fs.remove(f"{folder}/missing.txt")
    with pytest.raises(FileNotFoundError):
        fs.open(f"{folder}/missing.txt")
    assert files.remove_entries(folder, ["sub", "curve.png", "missing"]) == ["sub", "curve.png"]
    assert tf.io.gfile.listdir(folder) == ["vocab.txt"]
    assert files.file_system(str(tmp_path)).isdir is os.path.isdir  # local: the os functions
