"""The built wheel on its own: installed into a fresh virtual environment, away from the
checkout, its `bert-keras` command runs a miniature pipeline (vocabulary, pre-training data,
two pre-training steps, preprocessor and encoder exports) on text the wheel bundles, and the
exports serve in a process that imports only TensorFlow and tensorflow-text.

The environment sees the machine's packages (`--system-site-packages`: TensorFlow and the rest
come from there, nothing is downloaded); the wheel goes in with `--no-deps`, and its own copy
of bert_keras must shadow the editable install of the checkout.
"""

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

import bert_keras

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQ_LENGTH = 32
SHORT, LONG = "The lobster is blue.", ("The European lobster is a species of clawed lobster from "
                                       "the eastern Atlantic Ocean, the Mediterranean Sea and parts "
                                       "of the Black Sea.")


def _environment():
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("PYTHONPATH", "PYTHONHOME")}
    environment["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return environment


def _run(argv, cwd, timeout=300):
    """Runs `argv`; fails the test, with the end of its output, unless it exits 0."""
    completed = subprocess.run([str(arg) for arg in argv], cwd=cwd, capture_output=True,
                               text=True, timeout=timeout, env=_environment())
    assert completed.returncode == 0, (
        f"{' '.join(map(str, argv))} exited {completed.returncode}:\n"
        f"{completed.stdout[-2000:]}\n{completed.stderr[-4000:]}")
    return completed


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """{"python", "bin", "work"}: a fresh virtual environment with the wheel installed, and a
    working directory outside the checkout."""
    root = tmp_path_factory.mktemp("wheel")
    # The wheel is built from a copy of what it is made of, so that the build leaves nothing
    # (build/, *.egg-info) in the checkout.
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(REPO_ROOT, name), source / name)
    shutil.copytree(os.path.join(REPO_ROOT, "bert_keras"), source / "bert_keras",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    # No build isolation: the build uses the setuptools and wheel installed here (the test
    # extra), so that nothing is downloaded.
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
          "-w", root / "dist", source], cwd=root)
    wheels = glob.glob(str(root / "dist" / "*.whl"))
    assert [os.path.basename(path) for path in wheels] == [
        f"bert_keras-{bert_keras.__version__}-py3-none-any.whl"], wheels

    environment = root / "venv"
    _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", environment],
         cwd=root)
    python = environment / "bin" / "python"
    # pip comes from the machine's packages; --ignore-installed: the checkout's editable install
    # is visible from here and would otherwise count as the package being installed already.
    _run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed",
          wheels[0]], cwd=root)
    work = root / "work"
    work.mkdir()
    return {"python": python, "bin": environment / "bin", "work": work}


def test_the_wheel_is_what_runs(venv):
    where = _run([venv["python"], "-c", "import bert_keras; print(bert_keras.__file__); "
                  "print(bert_keras.__version__)"], cwd=venv["work"]).stdout.split()
    installed = os.path.realpath(where[0])
    assert installed.startswith(os.path.realpath(venv["bin"].parent) + os.sep), installed
    assert not installed.startswith(os.path.realpath(REPO_ROOT) + os.sep), installed
    assert where[1] == bert_keras.__version__

    listed = _run([venv["bin"] / "bert-keras", "--help"], cwd=venv["work"]).stdout
    for name in ("vocab", "data", "pretrain", "finetune", "export", "convert", "main"):
        assert f"\n  {name} " in listed, listed
    assert (venv["bin"] / "bert-keras-main").exists()


# Serves the exports in a process without bert_keras: only TensorFlow and tensorflow-text.
SERVE = r"""
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # registers the tokenizer's ops

preprocessor_dir, encoder_dir, short, long = sys.argv[1:]
preprocessor = tf.saved_model.load(preprocessor_dir)
encoder = tf.saved_model.load(encoder_dir)
inputs = preprocessor(tf.constant([short, long]))
outputs = encoder(inputs)
assert not any(name.startswith("bert_keras") for name in sys.modules), "bert_keras was imported"
print(json.dumps({
    "input_word_ids": inputs["input_word_ids"].shape.as_list(),
    "tokens": inputs["input_mask"].numpy().sum(axis=1).tolist(),
    "sequence_output": outputs["sequence_output"].shape.as_list(),
    "pooled_output": outputs["pooled_output"].shape.as_list(),
    "finite": bool(all(np.isfinite(outputs[name].numpy()).all()
                       for name in ("sequence_output", "pooled_output"))),
    "rows_differ": float(np.abs(outputs["pooled_output"].numpy()[0]
                                - outputs["pooled_output"].numpy()[1]).max()),
}))
"""


def test_a_pipeline_from_the_wheels_commands(venv):
    work, command = venv["work"], venv["bin"] / "bert-keras"
    # An excerpt of the WikiText sample the wheel bundles: a few articles, a paragraph a line.
    package = os.path.dirname(_run([venv["python"], "-c",
                                    "import bert_keras; print(bert_keras.__file__)"],
                                   cwd=work).stdout.strip())
    with open(os.path.join(package, "data", "wikitext_train.txt"), encoding="utf-8") as f:
        lines = f.read().splitlines()[:200]
    assert sum(line.startswith(" = ") and not line.startswith(" = = ") for line in lines) >= 2
    with open(work / "corpus.txt", "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")

    _run([command, "vocab", "--input_files=corpus.txt", "--vocab_size=800", "--output=vocab.txt",
          "--noprogress"], cwd=work)
    _run([command, "data", "--input_files=corpus.txt", "--input_format=paragraphs",
          "--vocab_file=vocab.txt", "--output_dir=records", f"--max_seq_length={SEQ_LENGTH}",
          "--max_predictions_per_seq=5", "--dupe_factor=1", "--num_output_shards=1",
          "--num_workers=1", "--noprogress"], cwd=work)
    assert glob.glob(str(work / "records" / "*.tfrecord"))
    trained = _run([command, "pretrain", "--input_files=records/*.tfrecord",
                    "--output_dir=model", "--preset=tiny", "--vocab_file=vocab.txt",
                    f"--max_seq_length={SEQ_LENGTH}", "--max_predictions_per_seq=5",
                    "--train_batch_size=8", "--num_train_steps=2", "--num_warmup_steps=1",
                    "--save_checkpoints_steps=2", "--strategy=cpu", "--dtype=float32"], cwd=work)
    assert "step=2" in trained.stdout, trained.stdout
    _run([command, "export", "--kind=preprocessor", "--model_dir=model",
          "--export_dir=preprocessor", f"--seq_length={SEQ_LENGTH}"], cwd=work)
    _run([command, "export", "--kind=encoder", "--model_dir=model", "--export_dir=encoder"],
         cwd=work)

    served = json.loads(_run([venv["python"], "-c", SERVE, "preprocessor", "encoder", SHORT, LONG],
                             cwd=work).stdout.strip().splitlines()[-1])
    with open(work / "model" / "bert_config.json", encoding="utf-8") as f:
        hidden = json.load(f)["hidden_size"]
    assert served["input_word_ids"] == [2, SEQ_LENGTH]
    assert served["sequence_output"] == [2, SEQ_LENGTH, hidden]
    assert served["pooled_output"] == [2, hidden]
    short_tokens, long_tokens = served["tokens"]
    # [CLS] and [SEP] around at least a word each; the long text fills more of the sequence.
    assert 3 <= short_tokens < long_tokens <= SEQ_LENGTH, served["tokens"]
    assert served["finite"] and served["rows_differ"] > 0, served
