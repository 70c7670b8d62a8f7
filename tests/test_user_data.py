"""Never lose a user's data, tool by tool: no output over an input (refused before any work,
naming both flags), `--start_over` that removes only what the tool wrote, one lock per output
directory (a second run is refused while the holder lives), a resume with other settings said
or refused. Each case checks every file that was there before by its SHA-256.

The tools run in this process through their library entry points (the command-line layer is
`bert_keras.common.cli`'s, tested on its own); the lock's holder and `build_vocab` are real
processes.
"""

import json
import logging
import os
import subprocess
import sys
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras.common import outputs
from bert_keras.common.outputs import OutputInUseError, OutputOverInputError
from bert_keras.export.options import ExportOptions
from bert_keras.finetuning.run import run_finetuning
from bert_keras.main_job import job as main_job
from bert_keras.main_job.options import BOOKS_TRAIN_FILE, MainJobOptions
from bert_keras.model import checkpoint_names
from bert_keras.model.config import BertConfig
from bert_keras.modeldir import convert
from bert_keras.pretraining.options import PretrainingError
from bert_keras.pretraining.run import PretrainingOptions, train
from helpers import pretraining_run_fixtures as fx
from helpers.finetuning_fixtures import data_dir, fixture, tiny_model_dir
from helpers.model_fixtures import random_weights, tiny_vocab_tokens
from helpers.support import REPO_ROOT, file_hashes

SEQ, PRED = 32, 5


def unchanged(before, root):
    """Every file of `before` (a `file_hashes` record) is still there, byte for byte."""
    now = file_hashes(root)
    return {name: now.get(name) for name in before} == before


def plant(root, names):
    """The user's own files under `root`; returns their hashes."""
    for name in names:
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(f"the user's {name}\n")
    return file_hashes(root)


class LockHolder:
    """A real process holding the lock of `directory` (`outputs.output_lock`, or
    `outputs.lock_beside` with `beside`) until it is stopped."""

    def __init__(self, directory, beside=False):
        lock = "lock_beside" if beside else "output_lock"
        script = ("import sys, time; from bert_keras.common import outputs\n"
                  f"with outputs.{lock}(sys.argv[1]):\n"
                  "    print('holding', flush=True); time.sleep(120)\n")
        self.process = subprocess.Popen([sys.executable, "-c", script, directory],
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout.readline().strip() == "holding"
        self.pid = self.process.pid

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.process.kill()
        self.process.wait()
        self.process.stdout.close()


# -------------------------------------------------------------------------- pre-training
@pytest.fixture(scope="module")
def records(tmp_path_factory):
    directory = tmp_path_factory.mktemp("records")
    vocab_path = fx.write_vocab(str(directory), size=500)
    batch = fx.make_instances(fx.TRAIN_TEXT, vocab_path, SEQ, PRED, dupe_factor=1, seed=1)
    fx.write_shards(str(directory / "train"), batch, num_shards=1)
    return types.SimpleNamespace(vocab=vocab_path, train=str(directory / "train" / "*.tfrecord"))


def pretraining_options(records, output_dir, **overrides):
    values = dict(input_files=records.train, output_dir=str(output_dir), config="tiny",
                  vocab_file=records.vocab, train_batch_size=8, max_seq_length=SEQ,
                  max_predictions_per_seq=PRED, num_train_steps=2, num_warmup_steps=0,
                  learning_rate=5e-4, steps_per_execution=1, save_checkpoints_steps=10,
                  strategy="cpu", verbose=0, shuffle_buffer_size=10)
    values.update(overrides)
    return PretrainingOptions(**values)


def test_pretraining_refuses_to_write_over_its_inputs(records, tmp_path):
    out = tmp_path / "out"
    before = plant(str(tmp_path), ["out/vocab.txt", "out/bert_config.json", "model/model.safetensors",
                                   "model/bert_config.json", "model/vocab.txt"])
    refusals = [
        (out, dict(vocab_file=str(out / "vocab.txt")), "holds --vocab_file="),
        (out, dict(config=str(out / "bert_config.json")), "holds --preset="),
        (tmp_path / "model", dict(config=None, vocab_file=None,
                                  init_model_dir=str(tmp_path / "model")),
         "output_dir must differ from init_model_dir"),
    ]
    for output_dir, overrides, message in refusals:
        with pytest.raises(ValueError, match=message):
            train(pretraining_options(records, output_dir, **overrides))
    assert file_hashes(str(tmp_path)) == before


def test_pretraining_start_over_and_a_resume_with_other_settings_keep_the_user_s_files(
        records, tmp_path, monkeypatch, caplog):
    # A folder named like the preset beside the run: --preset=tiny is still the preset.
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    before = plant(str(tmp_path), ["tiny/notes.txt", "out/notes.txt", "out/checkpoints/notes.txt",
                                   "out/logs/train/notes.txt"])
    with caplog.at_level(logging.WARNING):
        train(pretraining_options(records, out))
    assert any("--preset=tiny is the tiny preset; the folder" in record.getMessage()
               for record in caplog.records)
    assert json.loads((out / "bert_config.json").read_text())["num_hidden_layers"] == 2
    # A resume with another learning rate is said, and each stretch is recorded (here a
    # stretch of no steps: the run has reached num_train_steps).
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        metrics = train(pretraining_options(records, out, learning_rate=1e-3))
    assert metrics["step"] == 2
    said = [record.getMessage() for record in caplog.records if "other settings" in record.getMessage()]
    assert len(said) == 1 and "learning_rate: 0.0005 before, 0.001 now" in said[0], said
    recorded = json.loads((out / "pretraining_options.json").read_text())
    assert recorded["learning_rate"] == 1e-3
    assert [(stretch["from_step"], stretch["options"]["learning_rate"])
            for stretch in recorded["stretches"]] == [(0, 5e-4), (2, 1e-3)]
    assert unchanged(before, str(tmp_path))
    # --start_over removes the run's files, not the user's under checkpoints/ and logs/.
    train(pretraining_options(records, out, num_train_steps=1, start_over=True))
    recorded = json.loads((out / "pretraining_options.json").read_text())
    assert [stretch["from_step"] for stretch in recorded["stretches"]] == [0]
    assert sorted(os.listdir(out / "checkpoints")) == [
        "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index", "notes.txt", "run.json"]
    assert unchanged(before, str(tmp_path))


def test_a_second_pretraining_run_into_the_same_directory_is_refused(records, tmp_path):
    out = str(tmp_path / "out")
    before = plant(out, ["notes.txt"])
    with LockHolder(out) as holder:
        with pytest.raises(OutputInUseError,
                           match=rf"{out} is being written by another run \(pid {holder.pid} "
                                 rf".*lock file {out}/{outputs.LOCK_NAME}"):
            train(pretraining_options(records, out))
    assert unchanged(before, out) and sorted(os.listdir(out)) == [outputs.LOCK_NAME, "notes.txt"]


# --------------------------------------------------------------------------- fine-tuning
@pytest.fixture(scope="module")
def glue(tmp_path_factory):
    root = tmp_path_factory.mktemp("glue")
    dev = fixture("glue", "MRPC", "dev.tsv")
    return types.SimpleNamespace(data=data_dir(root, {"train.tsv": dev, "dev.tsv": dev}),
                                 init=tiny_model_dir(root, [dev]), root=root)


QUICK = dict(learning_rate=1e-3, train_batch_size=2, num_train_epochs=2, max_seq_length=32,
             eval_batch_size=4, verbose=0)


def test_finetuning_refuses_its_input_or_another_model_as_output(glue, tmp_path):
    other = tiny_model_dir(tmp_path, [fixture("glue", "MRPC", "dev.tsv")], name="pretrained")
    before_init, before_other = file_hashes(glue.init), file_hashes(other)
    with pytest.raises(OutputOverInputError, match=r"--output_dir=.* is --init_model_dir="):
        run_finetuning("glue/mrpc", glue.data, glue.init, glue.init, **QUICK)
    with pytest.raises(OutputOverInputError,
                       match=r"--output_dir=.*pretrained holds bert_config.json that "
                             r"run_finetuning did not write"):
        run_finetuning("glue/mrpc", glue.data, glue.init, other, **QUICK)
    # The task's files where the run writes its predictions.
    data = tmp_path / "run" / "predictions"
    data.mkdir(parents=True)
    for name in os.listdir(glue.data):
        (data / name).write_bytes(open(os.path.join(glue.data, name), "rb").read())
    before_run = file_hashes(str(tmp_path / "run"))
    with pytest.raises(OutputOverInputError, match=r"--output_dir=.*run holds --data_dir="):
        run_finetuning("glue/mrpc", str(data), glue.init, str(tmp_path / "run"), **QUICK)
    assert file_hashes(glue.init) == before_init and file_hashes(other) == before_other
    assert file_hashes(str(tmp_path / "run")) == before_run
    with LockHolder(str(tmp_path / "out")) as holder:
        with pytest.raises(OutputInUseError, match=rf"pid {holder.pid}"):
            run_finetuning("glue/mrpc", glue.data, glue.init, str(tmp_path / "out"), **QUICK)
    assert os.listdir(tmp_path / "out") == [outputs.LOCK_NAME]  # the killed holder's, stale


class StopAfterFirstEpoch(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        raise KeyboardInterrupt("stopped from outside")


def test_finetuning_resumes_only_its_own_settings_and_keeps_the_user_s_checkpoint_files(
        glue, tmp_path):
    out = str(tmp_path / "out")
    before = plant(out, ["notes.txt", "checkpoints/notes.txt", "logs/notes.txt"])
    quick = dict(QUICK, do_eval=False)
    with pytest.raises(KeyboardInterrupt):
        run_finetuning("glue/mrpc", glue.data, glue.init, out, callbacks=[StopAfterFirstEpoch()],
                       **quick)
    assert "latest.weights.h5" in os.listdir(os.path.join(out, "checkpoints"))
    with pytest.raises(ValueError, match=r"holds an interrupted run with other settings "
                                         r"\(options.learning_rate: 0.001 there, 0.002 now\)"):
        run_finetuning("glue/mrpc", glue.data, glue.init, out, **dict(quick, learning_rate=2e-3))
    result = run_finetuning("glue/mrpc", glue.data, glue.init, out, **quick)
    assert len(result.train_loss) == 1  # the second epoch only: resumed
    assert os.listdir(os.path.join(out, "checkpoints")) == ["notes.txt"]
    assert unchanged(before, out)
    assert "model.safetensors" in outputs.recorded_outputs(out)


# ------------------------------------------------------------------- convert, export, vocab
def _tf1_checkpoint(directory):
    config = BertConfig.from_preset("tiny", vocab_size=40, max_position_embeddings=24)
    shapes = dict(checkpoint_names.encoder_weight_shapes(config))
    arrays = random_weights(shapes)
    os.makedirs(directory, exist_ok=True)
    config.to_json_file(os.path.join(directory, "bert_config.json"))
    with open(os.path.join(directory, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(tiny_vocab_tokens(config.vocab_size)) + "\n")
    prefix = os.path.join(directory, "bert_model.ckpt")
    names = sorted(arrays)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                      tensors=[tf.constant(np.asarray(arrays[name], np.float32)) for name in names])
    return prefix


def test_convert_refuses_its_input_and_another_model_then_keeps_the_user_s_files(tmp_path):
    hf = tmp_path / "hf"
    prefix = _tf1_checkpoint(str(tmp_path / "tf1"))
    before = plant(str(tmp_path), ["hf/config.json", "hf/vocab.txt", "hf/model.safetensors",
                                   "other/model.safetensors", "out/notes.txt"])
    refusals = [
        (lambda: convert.convert_hf_checkpoint(str(hf), str(hf)), "is --input="),
        (lambda: convert.convert_hf_checkpoint(str(hf), str(tmp_path)), "holds --input="),
        (lambda: convert.convert_tf1_checkpoint(prefix, str(tmp_path / "tf1")), "holds --input="),
        (lambda: convert.convert_tf1_checkpoint(prefix, str(tmp_path / "other")),
         "holds model.safetensors that convert_checkpoint did not write"),
    ]
    for action, message in refusals:
        with pytest.raises(OutputOverInputError, match=message):
            action()
    assert unchanged(before, str(tmp_path))
    for _ in range(2):  # a rerun into its own output
        convert.convert_tf1_checkpoint(prefix, str(tmp_path / "out"))
    assert unchanged(before, str(tmp_path))
    assert "model.safetensors" in outputs.recorded_outputs(str(tmp_path / "out"))


def test_export_refuses_its_model_directory_and_a_second_export(glue, tmp_path):
    before = file_hashes(glue.init)
    parent = os.path.dirname(glue.init)
    for export_dir, message in ((glue.init, "--export_dir=.* is --model_dir="),
                                (parent, "--export_dir=.* holds --model_dir=")):
        with pytest.raises(OutputOverInputError, match=message):
            ExportOptions(kind="encoder", model_dir=glue.init, export_dir=export_dir).export()
    export_dir = str(tmp_path / "encoder")
    with LockHolder(export_dir, beside=True) as holder:
        with pytest.raises(OutputInUseError, match=rf"pid {holder.pid} .*{export_dir}.lock"):
            ExportOptions(kind="encoder", model_dir=glue.init, export_dir=export_dir).export()
    assert file_hashes(glue.init) == before and not os.path.exists(export_dir)


def test_build_vocab_refuses_to_replace_its_input_file(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("The cat sat on the mat.\nThe dog sat on the log.\n" * 20)
    before = file_hashes(str(tmp_path))
    result = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "tools", "build_vocab.py"), f"--input_files={corpus}",
         "--vocab_size=50", f"--output={corpus}"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert (f"error: --output={corpus} is --input_files={corpus}: writing there would replace "
            "the input") in result.stderr
    assert file_hashes(str(tmp_path)) == before


# ------------------------------------------------------------------------------ main job
def test_main_job_refuses_its_inputs_a_model_directory_and_a_second_run(glue, tmp_path):
    books = os.path.dirname(BOOKS_TRAIN_FILE)
    before_books = file_hashes(books)
    # A work directory whose data/ folder would hold the job's records over the input text.
    work = tmp_path / "work"
    plant(str(work), ["data/train.txt"])
    before = file_hashes(str(tmp_path))
    refusals = [
        (MainJobOptions(work_dir=str(work), input_files=str(work / "data" / "train.txt")),
         "--work_dir=.* holds --input_files="),
        (MainJobOptions(work_dir=os.path.dirname(books)), "holds --input_files="),
        (MainJobOptions(work_dir=glue.init), "holds bert_config.json that bert_keras_main"),
    ]
    for options, message in refusals:
        with pytest.raises(OutputOverInputError, match=message):
            main_job.run_main_job(options)
    other = tmp_path / "other"
    with LockHolder(str(other)) as holder:
        with pytest.raises(OutputInUseError, match=rf"pid {holder.pid}"):
            main_job.run_main_job(MainJobOptions(work_dir=str(other)))
    assert file_hashes(books) == before_books and unchanged(before, str(tmp_path))


def test_main_job_start_over_removes_what_the_job_wrote_and_nothing_else(tmp_path):
    options = MainJobOptions(work_dir=str(tmp_path / "work"), start_over=True)
    paths = options.paths()
    before = plant(paths["root"], ["notes.txt", "model/notes.txt", "model/checkpoints/notes.txt",
                                   "data/notes.txt", "data/train/notes.txt", "export/notes.txt"])
    # What a run of the job leaves: every stage's files, listed as it writes them.
    with outputs.output_lock(paths["root"]), outputs.recording_outputs(paths["root"],
                                                                      main_job.TOOL):
        written = ["model/checkpoints/ckpt-1.index"]
        for key, path in paths.items():
            if key in ("root", "train_data", "heldout_data", "model", "finetuned", "stages",
                       "preprocessor", "encoder", "classifier", "released_runs"):
                path = os.path.join(path, "written.bin")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(key)
            written.append(os.path.relpath(path, paths["root"]))
        os.makedirs(os.path.join(paths["model"], "checkpoints"), exist_ok=True)
        with open(os.path.join(paths["model"], "checkpoints", "ckpt-1.index"), "w") as f:
            f.write("checkpoint")
    removed = main_job.remove_outputs(options)
    assert sorted(removed) == sorted(written) and len(written) == len(paths) + 1
    assert file_hashes(paths["root"]) == before
    assert sorted(os.listdir(paths["root"])) == ["data", "export", "model", "notes.txt"]
