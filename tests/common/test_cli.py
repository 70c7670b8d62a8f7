"""The tools' error policy (`bert_keras.common.cli.report_errors`): bad input exits 2 with one
line, a failure of the tool itself exits 1 with its traceback kept in a log file."""

import errno

from bert_keras.common import cli
from bert_keras.common.errors import BertKerasError


def _raiser(error):
    def main():
        raise error
    return main


def test_bad_input_is_one_line_and_status_2(capsys):
    for error in (BertKerasError("--vocab_file: not a file"), ValueError("--steps must be > 0"),
                  FileNotFoundError(errno.ENOENT, "No such file or directory", "corpus.txt")):
        assert cli.report_errors("tool", _raiser(error)) == cli.BAD_INPUT == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("tool: error: "), err
    assert "corpus.txt: No such file or directory" in err


def test_an_internal_failure_is_status_1_with_its_traceback_in_a_log(capsys, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setenv("BERT_KERAS_LOG_DIR", str(tmp_path))

    def main():
        return {}["a key the tool forgot"]

    assert cli.report_errors("tool", main) == cli.INTERNAL_ERROR == 1
    err = capsys.readouterr().err
    (log,) = tmp_path.iterdir()
    assert err.startswith("tool: internal error: KeyError") and str(log) in err, err
    assert "Traceback" not in err
    text = log.read_text()
    assert text.startswith("Traceback") and "a key the tool forgot" in text


def test_success_passes_the_status_through():
    assert cli.report_errors("tool", lambda: 0) == 0


def test_a_full_disk_names_the_file_being_written(capsys, tmp_path):
    from bert_keras.common.files import atomic_output

    target = tmp_path / "vocab.txt"

    def main():
        with atomic_output(target, "w") as f:
            f.write("[PAD]\n")
            raise OSError(errno.ENOSPC, "No space left on device")  # as a failed write raises

    assert cli.report_errors("build_vocab", main) == cli.ENVIRONMENT_FAILURE == 3
    err = capsys.readouterr().err
    assert err == (f"build_vocab: error: {target}: No space left on device (the disk is full: "
                   "free some space and run again)\n")
    assert list(tmp_path.iterdir()) == []  # no temporary left behind
