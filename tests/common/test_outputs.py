"""The shared policy of every writer (`bert_keras.common.outputs`): an output never over an
input, one lock per output directory with the holder's pid, a manifest that `--start_over`
removes and nothing else; exit status 3 for a failure of the machine; preset names before
paths. Every case checks that the files that were there are unchanged, byte for byte."""

import errno
import json
import logging
import os
import subprocess
import sys
import time

import pytest

from bert_keras.common import cli, outputs
from bert_keras.common.outputs import OutputInUseError, OutputOverInputError
from bert_keras.model.config import BertConfig, ConfigError, config_from_size, resolve_model_size

from helpers.support import file_hashes


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


@pytest.fixture
def model_dir(tmp_path):
    """A directory with a model's files in it (another tool's, or a download)."""
    directory = tmp_path / "model"
    for name, text in (("bert_config.json", "{}"), ("vocab.txt", "[PAD]\n"),
                       ("model.safetensors", "weights")):
        write(str(directory / name), text)
    return str(directory)


# ----------------------------------------------------------------------------- over inputs
def test_an_output_that_is_an_input_is_refused_naming_both_flags(tmp_path, model_dir):
    before = file_hashes(tmp_path)
    with pytest.raises(OutputOverInputError, match=r"--output_dir=.*model is --init_model_dir="):
        outputs.check_not_over_inputs(model_dir, "output_dir", [("init_model_dir", model_dir)])
    # Through another spelling of the same folder: a trailing separator, a symbolic link.
    os.symlink(model_dir, tmp_path / "link")
    for spelling in (model_dir + os.sep, str(tmp_path / "link")):
        with pytest.raises(OutputOverInputError, match="is --input="):
            outputs.check_not_over_inputs(spelling, "output_dir", [("input", model_dir)])
    # A file output that is one of the input files, or a hard link to one.
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("text\n")
    os.link(corpus, tmp_path / "same.txt")
    for output in (corpus, tmp_path / "same.txt"):
        with pytest.raises(OutputOverInputError, match="is --input_files="):
            outputs.check_not_over_inputs(str(output), "output", [("input_files", [str(corpus)])])
    assert {name: digest for name, digest in file_hashes(tmp_path).items()
            if name in before} == before


def test_an_output_directory_holding_an_input_is_refused_where_the_tool_writes(tmp_path,
                                                                              model_dir):
    out = str(tmp_path)
    before = file_hashes(tmp_path)
    with pytest.raises(OutputOverInputError, match="holds --init_model_dir="):
        outputs.check_not_over_inputs(out, "output_dir", [("init_model_dir", model_dir)])
    # A tool that writes only some names there: an input elsewhere in the folder is safe.
    outputs.check_not_over_inputs(out, "output_dir", [("init_model_dir", model_dir)],
                                  writes=("checkpoints", "logs"))
    with pytest.raises(OutputOverInputError, match="holds --vocab_file="):
        outputs.check_not_over_inputs(out, "output_dir", [("vocab_file", model_dir + "/vocab.txt")],
                                      writes=("model",))
    # A new folder inside an input, and scheme:// paths, are not refused.
    outputs.check_not_over_inputs(os.path.join(model_dir, "export"), "export_dir",
                                  [("model_dir", model_dir)])
    outputs.check_not_over_inputs("gs://bucket/out", "output_dir", [("input", "gs://bucket/out")])
    assert file_hashes(tmp_path) == before


def test_an_output_directory_holding_a_model_the_tool_did_not_write_is_refused(tmp_path,
                                                                              model_dir):
    before = file_hashes(tmp_path)
    with pytest.raises(OutputOverInputError, match=r"holds bert_config.json that tool_a did not"):
        outputs.check_no_foreign_files(model_dir, "output_dir", "tool_a")
    user_checkpoints = tmp_path / "run" / "checkpoints" / "ckpt-1.index"
    write(str(user_checkpoints), "theirs")
    with pytest.raises(OutputOverInputError, match="holds checkpoints/ckpt-1.index"):
        outputs.check_no_foreign_files(str(tmp_path / "run"), "output_dir", "tool_a")
    # What the tool wrote itself is its own; another tool's outputs are not.
    fresh = str(tmp_path / "fresh")
    with outputs.output_lock(fresh), outputs.recording_outputs(fresh, "tool_a"):
        write(os.path.join(fresh, "bert_config.json"), "{}")
    outputs.check_no_foreign_files(fresh, "output_dir", "tool_a")
    with pytest.raises(OutputOverInputError, match="holds the outputs of tool_a"):
        outputs.check_no_foreign_files(fresh, "output_dir", "tool_b")
    assert {name: digest for name, digest in file_hashes(tmp_path).items() if name in before} == before


# ------------------------------------------------------------------------------ the manifest
def test_start_over_removes_what_the_tool_wrote_and_nothing_else(tmp_path):
    out = str(tmp_path / "out")
    mine = {"notes.txt": "top", "checkpoints/notes.txt": "in checkpoints",
            "logs/train/notes.txt": "in logs", "export/encoder/notes.txt": "in export"}
    for name, text in mine.items():
        write(os.path.join(out, name), text)
    before = file_hashes(out)
    with outputs.output_lock(out), outputs.recording_outputs(out, "tool_a"):
        for name in ("checkpoints/ckpt-1.index", "logs/train/events.out", "model.safetensors",
                     "export/encoder/saved_model.pb", "new/deep/file.txt"):
            write(os.path.join(out, name), "written by the tool")
    assert outputs.recorded_outputs(out) == [
        "checkpoints/ckpt-1.index", "export/encoder/saved_model.pb", "logs/train/events.out",
        "model.safetensors", "new/deep/file.txt"]
    removed = outputs.remove_recorded_outputs(out, "tool_a")
    assert len(removed) == 5
    assert file_hashes(out) == before  # the user's four files, unchanged; the tool's folder "new" gone
    assert not os.path.exists(os.path.join(out, "new"))
    # Another tool's --start_over removes nothing here.
    with outputs.recording_outputs(out, "tool_a"):
        write(os.path.join(out, "model.safetensors"), "again")
    with pytest.raises(OutputOverInputError, match="outputs of tool_a"):
        outputs.remove_recorded_outputs(out, "tool_b")
    assert os.path.exists(os.path.join(out, "model.safetensors"))


def test_on_a_bucket_the_manifest_is_kept_and_start_over_removes_only_it_but_nothing_is_locked(
        tmp_path, monkeypatch, caplog):
    # TensorFlow's in-memory ram:// file system stands in for a bucket (gs://): tf.io.gfile.
    import tensorflow as tf

    from bert_keras.common.files import write_text_atomic

    monkeypatch.chdir(tmp_path)
    out = "ram://bucket/test_outputs/out"
    write_text_atomic(f"{out}/notes.txt", "mine")
    with caplog.at_level(logging.WARNING), outputs.output_lock(out), \
            outputs.recording_outputs(out, "tool_a"):
        assert not tf.io.gfile.exists(f"{out}/{outputs.LOCK_NAME}")
        for name in ("checkpoints/ckpt-1.index", "model.safetensors"):
            write_text_atomic(f"{out}/{name}", "written by the tool")
    assert f"{out} is not locked (an object store has no atomic create)" in caplog.text
    assert outputs.recorded_outputs(out) == ["checkpoints/ckpt-1.index", "model.safetensors"]
    assert outputs.remove_recorded_outputs(out, "tool_a") == ["checkpoints/ckpt-1.index",
                                                               "model.safetensors"]
    assert tf.io.gfile.listdir(out) == ["notes.txt"] and os.listdir(tmp_path) == []


def test_the_files_of_a_killed_run_are_listed_by_the_next(tmp_path):
    out = str(tmp_path / "out")
    write(os.path.join(out, "notes.txt"), "mine")
    before = file_hashes(out)
    # A run killed while writing: its manifest says which files were there when it started.
    script = ("import os, sys, time; from bert_keras.common import outputs\n"
              "out = sys.argv[1]\n"
              "with outputs.output_lock(out), outputs.recording_outputs(out, 'tool_a'):\n"
              "    open(os.path.join(out, 'checkpoint.bin'), 'w').write('half')\n"
              "    print('written', flush=True); time.sleep(60)\n")
    process = subprocess.Popen([sys.executable, "-c", script, out], stdout=subprocess.PIPE,
                               text=True)
    try:
        assert process.stdout.readline().strip() == "written"
        # While it lives, a second writer is refused, naming the lock and the holder's pid.
        with pytest.raises(OutputInUseError, match=rf"pid {process.pid} .*lock file "
                                                   rf".*{outputs.LOCK_NAME}"):
            with outputs.output_lock(out):
                pass
    finally:
        process.kill()
        process.wait()
        process.stdout.close()
    assert not os.path.exists(os.path.join(out, outputs.MANIFEST_NAME))  # killed before it
    outputs.check_no_foreign_files(out, "output_dir", "tool_a", names=["checkpoint.bin"])
    with outputs.output_lock(out):  # the lock of a run that is gone is taken over
        assert outputs.remove_recorded_outputs(out, "tool_a") == ["checkpoint.bin"]
    assert file_hashes(out) == before and not os.path.exists(os.path.join(out, outputs.LOCK_NAME))


def test_a_lock_is_released_after_an_error_and_can_be_held_again_inside(tmp_path):
    out = str(tmp_path)
    with pytest.raises(RuntimeError):
        with outputs.output_lock(out):
            with outputs.output_lock(out):  # a tool run inside another (the main job's stages)
                raise RuntimeError("stop")
    assert os.listdir(out) == []
    with outputs.lock_beside(os.path.join(out, "export")):
        assert os.listdir(out) == ["export.lock"]
        lock = json.loads((tmp_path / "export.lock").read_text())
        assert lock["pid"] == os.getpid()
    assert os.listdir(out) == []


# ----------------------------------------------------------------------------- exit status
@pytest.mark.parametrize("number", [errno.ENOSPC, errno.EACCES, errno.EROFS])
def test_a_failure_of_the_machine_exits_3_and_bad_input_2(capsys, tmp_path, number):
    target = tmp_path / "out.txt"

    def main():
        raise OSError(number, os.strerror(number), str(target))

    assert cli.report_errors("tool", main) == cli.ENVIRONMENT_FAILURE == 3
    err = capsys.readouterr().err
    assert err.startswith(f"tool: error: {target}: {os.strerror(number)} (") and "\n" == err[-1]
    assert cli.report_errors("tool", lambda: (_ for _ in ()).throw(
        FileNotFoundError(errno.ENOENT, "No such file or directory", "x.txt"))) == cli.BAD_INPUT
    assert cli.report_errors("tool", lambda: (_ for _ in ()).throw(
        OutputOverInputError("--output is --input"))) == cli.BAD_INPUT


def test_a_permission_denied_while_writing_exits_3(capsys, tmp_path):
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        pytest.skip("root may write to any directory")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        status = cli.report_errors("tool", lambda: outputs.write_text_atomic(
            str(locked / "out.txt"), "text"))
    finally:
        locked.chmod(0o700)
    assert status == 3 and "permission" in capsys.readouterr().err.lower()


# -------------------------------------------------------------------------- names, paths
def test_a_preset_name_is_the_preset_even_beside_a_file_or_folder_of_that_name(
        tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny").mkdir()
    (tmp_path / "mini").write_text(json.dumps(BertConfig.from_preset("base").to_dict()))
    (tmp_path / "my_config").write_text("{}")
    before = file_hashes(tmp_path)
    with caplog.at_level(logging.WARNING, logger="bert_keras"):
        assert resolve_model_size("tiny") == ("preset", "tiny")
        config = config_from_size("mini", vocab_size=99)
    assert (config.num_hidden_layers, config.hidden_size, config.vocab_size) == (4, 256, 99)
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 2
    assert "--preset=tiny is the tiny preset; the folder" in warnings[0]
    assert str(tmp_path / "tiny") in warnings[0] and "--preset=./tiny" in warnings[0]
    assert "the file" in warnings[1] and str(tmp_path / "mini") in warnings[1]
    # A value that looks like a path is a path; a bare name of a file (no preset) too.
    assert config_from_size("./mini").hidden_size == 768
    assert resolve_model_size("config.json") == ("file", "config.json")
    assert resolve_model_size("my_config") == ("file", "my_config")
    with pytest.raises(ConfigError, match="unknown preset 'huge'.*or a path"):
        config_from_size("huge")
    assert file_hashes(tmp_path) == before
