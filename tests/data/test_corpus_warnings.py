"""Warnings that save a pre-training data run: the corpus is read as asked, and the log says when
what was asked looks wrong (a declared encoding over UTF-8 text, one file matched twice, a line
of a megabyte, WikiText under the sentences format, held-out text that is training text). Each
warning names the file; no input file is changed."""

import hashlib
import logging
import os
import types

import pytest

from bert_keras.data import corpus, pipeline
from helpers.pretraining_data_fixtures import fixture_path

UTF8_TEXT = "Un café noir.\nIl est très chaud.\n\nDeux crêpes.\nÇa suffit.\n"


def _hashes(*paths):
    return {str(path): hashlib.sha256(open(path, "rb").read()).hexdigest() for path in paths}


def _warnings(caplog):
    return [record.getMessage() for record in caplog.records
            if record.name == "bert_keras.data" and record.levelno == logging.WARNING]


@pytest.fixture
def caplog_data(caplog):
    caplog.set_level(logging.WARNING, logger="bert_keras.data")
    return caplog


def test_a_declared_encoding_that_contradicts_valid_utf8_is_named(tmp_path, caplog_data):
    path = tmp_path / "french.txt"
    path.write_text(UTF8_TEXT, encoding="utf-8")
    before = _hashes(path)
    corpus.check_corpus_files([str(path)], "sentences", encoding="latin-1")
    (message,) = _warnings(caplog_data)
    # The mojibake the declared encoding would give, shown to the user: "café" read as latin-1.
    assert str(path) in message and "--input_encoding=" in message
    assert repr("café") in message and repr("café".encode("utf-8").decode("latin-1")) in message
    caplog_data.clear()
    # The right declaration, and a real latin-1 file declared as such: no warning.
    corpus.check_corpus_files([str(path)], "sentences")
    latin = tmp_path / "latin.txt"
    latin.write_bytes(UTF8_TEXT.encode("latin-1"))
    corpus.check_corpus_files([str(latin)], "sentences", encoding="latin-1")
    ascii_only = tmp_path / "ascii.txt"
    ascii_only.write_text("One.\nTwo.\n\nThree.\n")
    corpus.check_corpus_files([str(ascii_only)], "sentences", encoding="cp1252")
    assert _warnings(caplog_data) == []
    assert _hashes(path) == before


def test_the_same_file_matched_twice_is_read_once(tmp_path, caplog_data, monkeypatch):
    a, b = tmp_path / "a.txt", tmp_path / "a_more.txt"
    a.write_text("A one.\nA two.\n\nA three.\n")
    b.write_text("B one.\n\nB two.\n")
    before = _hashes(a, b)
    monkeypatch.chdir(tmp_path)
    # --input_files='a.txt,a*.txt' expands to a.txt, a.txt, a_more.txt.
    from bert_keras.common.cli import expand_files

    files = expand_files("a.txt,a*.txt")
    assert files.count("a.txt") == 2
    config = types.SimpleNamespace(input_files=files, task_index=0, num_tasks=1)
    assert pipeline.task_files(config) == ["a.txt", "a_more.txt"]
    (message,) = _warnings(caplog_data)
    assert message.startswith("a.txt ") and "read once" in message
    caplog_data.clear()
    # Two spellings of one file count once too.
    assert corpus.unique_files(["a.txt", os.path.join(".", "a.txt")]) == ["a.txt"]
    assert "the same file as a.txt" in _warnings(caplog_data)[0]
    documents = list(corpus.iter_documents(pipeline.task_files(config), "sentences"))
    assert len(documents) == 4  # not 6
    assert _hashes(a, b) == before


def test_a_line_of_a_megabyte_is_named_with_its_line(tmp_path, caplog_data):
    path = tmp_path / "one_line.txt"
    path.write_text("First document.\n\n" + "word " * 220_000 + "\n")
    before = _hashes(path)
    corpus.check_corpus_files([str(path)], "sentences")
    (message,) = _warnings(caplog_data)
    assert message.startswith(f"{path}, line 3: 1,100,000 bytes on one line")
    assert "--input_format=sentences" in message
    assert _hashes(path) == before


def test_wikitext_under_the_sentences_format_is_named(caplog_data):
    wikitext = fixture_path("wikitext.txt")
    corpus.check_corpus_files([wikitext], "sentences")
    (message,) = _warnings(caplog_data)
    assert message.startswith(f"{wikitext}: looks like one paragraph per line")
    assert "--input_format=paragraphs" in message
    caplog_data.clear()
    # Read as paragraphs, and a real one-sentence-per-line corpus: no warning.
    corpus.check_corpus_files([wikitext], "paragraphs")
    corpus.check_corpus_files([fixture_path("sample_text.txt")], "sentences")
    assert _warnings(caplog_data) == []


def test_held_out_files_that_are_training_files_are_named(tmp_path, caplog_data):
    train, heldout = tmp_path / "train.txt", tmp_path / "heldout.txt"
    train.write_text("A.\n\nB.\n")
    heldout.write_text("C.\n\nD.\n")
    before = _hashes(train, heldout)
    assert corpus.check_heldout_files([str(heldout)], [str(train)]) == []
    assert _warnings(caplog_data) == []
    # --heldout_files equal to --input_files, spelled differently.
    same = os.path.join(str(tmp_path), ".", "train.txt")
    assert corpus.check_heldout_files([same], [str(train), str(heldout)]) == [same]
    (message,) = _warnings(caplog_data)
    assert message.startswith(f"--heldout_files: {same} is also in --input_files")
    assert _hashes(train, heldout) == before
