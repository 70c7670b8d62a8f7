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
