"""Pre-training records, the data tool's manifests, checkpoints and whole output directories on
a file system other than the local one, as `gs://` is on a cloud: TensorFlow's in-memory `ram://`
file system, which `tf.io.gfile` and `tf.data` reach the way they reach `gs://`.

Both engines read records through the same `tf.data` pipeline (`inputs.make_dataset_fn`, on the
CPU: on the JAX backend too), so one training run here covers the reading. A run whose
`--output_dir` is on `ram://` writes everything there (run files, options, checkpoints, the
model directory, the manifest; no lock: `outputs.output_lock`) and trains to the weights of the
same run written locally: on the TensorFlow engine (`tf.train.Checkpoint`) in this process, on
the Keras engine in a child process on the JAX backend, which copies what it wrote out of its
`ram://` (the memory of that process) onto the local disk for the comparison. The model
directory is read back from `ram://` as fine-tuning's `--init_model_dir` reads one.
"""

import json
import os
import subprocess
import sys
import time

import keras

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.data import manifest
from bert_keras.data.records import RecordsError
from bert_keras.model.config import BertConfig
from bert_keras.pretraining import keras_engine
from bert_keras.pretraining.run import PretrainingOptions, run_pretraining

from helpers import pretraining_run_fixtures as fx
from helpers.support import backend_env

CONFIG = BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0)


def options(input_files, output_dir, vocab, **overrides):
    values = dict(input_files=input_files, output_dir=str(output_dir), config=CONFIG,
                  vocab_file=vocab, max_seq_length=32, max_predictions_per_seq=5,
                  train_batch_size=8, num_train_steps=2, num_warmup_steps=1,
                  learning_rate=1e-3, save_checkpoints_steps=2, mixed_precision="float32",
                  strategy="cpu", verbose=0)
    values.update(overrides)
    return PretrainingOptions(**values)


def test_training_reads_records_from_the_stand_in_of_a_bucket(tmp_path):
    from bert_keras.modeldir import model_dir

    vocab = fx.write_vocab(str(tmp_path), size=200)
    for index in range(2):
        local = str(tmp_path / f"part-{index:05d}.tfrecord")
        fx.write_feature_records(local, fx.random_features(16, 32, 5, 200, seed=index))
        tf.io.gfile.copy(local, f"ram://bucket/records/part-{index:05d}.tfrecord", overwrite=True)
    from_bucket = run_pretraining(options("ram://bucket/records/*.tfrecord", tmp_path / "bucket",
                                          vocab))
    from_disk = run_pretraining(options(f"{tmp_path}/part-*.tfrecord", tmp_path / "disk", vocab))
    assert from_bucket["step"] == from_disk["step"] == 2
    got = model_dir.read_weights(str(tmp_path / "bucket"))
    expected = model_dir.read_weights(str(tmp_path / "disk"))
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def test_a_missing_task_is_found_on_the_stand_in_of_a_bucket():
    folder = "ram://bucket/split"
    for task in (0, 2):
        tf.io.gfile.makedirs(folder)
        with tf.io.gfile.GFile(f"{folder}/{manifest.manifest_name(task, 3)}", "w") as f:
            f.write(json.dumps({"num_tasks": 3, "task_index": task}))
    files = [f"{folder}/task-0000{task}-of-00003-shard-00000-of-00001.tfrecord"
             for task in (0, 2)]
    with pytest.raises(RecordsError, match=r"ram://bucket/split: the data run was split into 3 "
                                           r"tasks \(task-00000-of-00003-manifest.json records "
                                           r"num_tasks 3\), but no records of task\(s\) 1 "):
        manifest.check_all_tasks(files)


def test_the_keras_engine_keeps_its_checkpoints_on_the_stand_in_of_a_bucket():
    output_dir = "ram://bucket/run"
    trainer, _ = keras_engine.compile_trainer(
        options("unused", output_dir, None), CONFIG)
    path = keras_engine.checkpoint_path(output_dir, 3)
    keras_engine.save_checkpoint(trainer, path)
    assert keras_engine.checkpoints(output_dir) == [(3, path)]
    assert keras_engine.KerasEngine.latest_checkpoint(output_dir) == path
    saved = [keras.ops.convert_to_numpy(v.value) for v in trainer.pretraining_model.variables]
    for variable in trainer.pretraining_model.trainable_variables:
        variable.assign(np.zeros(variable.shape, variable.dtype))
    keras_engine.restore_checkpoint(trainer, path)
    for variable, value in zip(trainer.pretraining_model.variables, saved):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable.value), value)


def _bucket_files(folder):
    """The files under `folder` (relative paths), through tf.io.gfile."""
    return sorted(os.path.relpath(os.path.join(root, name), folder)
                  for root, _, names in tf.io.gfile.walk(folder) for name in names)


def _check_same_weights(got, expected):
    assert sorted(got) == sorted(expected)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def _records(tmp_path):
    vocab = fx.write_vocab(str(tmp_path), size=200)
    fx.write_feature_records(str(tmp_path / "part-00000.tfrecord"),
                             fx.random_features(16, 32, 5, 200, seed=0))
    return f"{tmp_path}/part-*.tfrecord", vocab


def test_a_run_writes_its_output_dir_on_the_stand_in_of_a_bucket(tmp_path, monkeypatch):
    from bert_keras.common import outputs
    from bert_keras.modeldir import loading, model_dir
    from bert_keras.pretraining.run import engine_class

    monkeypatch.chdir(tmp_path)  # a local folder "ram:" would be a path taken for a bucket's
    records, vocab = _records(tmp_path)
    bucket = "ram://bucket/output_dir"
    began = time.time()
    assert run_pretraining(options(records, bucket, vocab))["step"] == 2
    assert run_pretraining(options(records, tmp_path / "disk", vocab))["step"] == 2
    local = str(tmp_path / "disk")
    # The same files as on the local disk (the TensorBoard events are named by time and host),
    # and nothing written locally outside --output_dir.
    events = lambda names: [name for name in names if ".tfevents." not in name]  # noqa: E731
    written = _bucket_files(bucket)
    assert events(written) == events(_bucket_files(local))
    assert {"checkpoints/run.json", "pretraining_options.json", "bert_config.json", "vocab.txt",
            "model.safetensors", outputs.MANIFEST_NAME} <= set(written)
    assert outputs.LOCK_NAME not in written and outputs.RUNNING_NAME not in written
    assert sorted(os.listdir(tmp_path)) == ["disk", "part-00000.tfrecord", "vocab.txt"]
    assert events(outputs.recorded_outputs(bucket)) == events(outputs.recorded_outputs(local))
    assert engine_class().latest_checkpoint(bucket).startswith(f"{bucket}/checkpoints/ckpt-2")
    _check_same_weights(model_dir.read_weights(bucket), model_dir.read_weights(local))
    for name in ("bert_config.json", "vocab.txt", "tokenizer_config.json"):
        with tf.io.gfile.GFile(f"{bucket}/{name}", "rb") as f:
            assert f.read() == open(os.path.join(local, name), "rb").read(), name

    # Read back from the bucket, as fine-tuning's --init_model_dir reads a model directory.
    read = model_dir.ModelDir(bucket)
    assert read.config == model_dir.ModelDir(local).config and len(read.vocab) == 200
    assert read.vocab.path == f"{bucket}/vocab.txt" and read.pretraining_options["num_train_steps"] == 2
    assert "://" not in read.vocab_file  # the tokenizers read a local copy
    assert open(read.vocab_file, "rb").read() == open(os.path.join(local, "vocab.txt"), "rb").read()
    encoder = loading.load_encoder(bucket)
    assert any(np.any(variable.numpy()) for variable in encoder.weights)

    # A rerun finds the run's checkpoint on the bucket: the step is reached, nothing trains;
    # evaluation and export read it there.
    assert run_pretraining(options(records, bucket, vocab))["step"] == 2
    evaluation = dict(mode="eval", max_eval_steps=1, eval_batch_size=8)
    evaluated = run_pretraining(options(records, bucket, vocab, **evaluation))
    assert evaluated == run_pretraining(options(records, local, vocab, **evaluation))
    with tf.io.gfile.GFile(f"{bucket}/eval_results.txt") as f:
        assert f"weights = {bucket}/checkpoints/ckpt-2" in f.read()
    exported = run_pretraining(options(records, bucket, vocab, mode="export"))
    assert exported["step"] == 2 and exported["checkpoint"].startswith(f"{bucket}/checkpoints/")
    # --start_over removes the run's outputs there (a file of the user's stays) and trains again.
    with tf.io.gfile.GFile(f"{bucket}/notes.txt", "w") as f:
        f.write("mine")
    again = run_pretraining(options(records, bucket, vocab, start_over=True))
    assert again["step"] == 2 and "notes.txt" in _bucket_files(bucket)
    _check_same_weights(model_dir.read_weights(bucket), model_dir.read_weights(local))
    print(f"ram:// and local runs on the {keras.backend.backend()} engine: "
          f"{time.time() - began:.1f} s")


# Run in a child process on the JAX backend: the Keras engine's run to ram:// and the same run to
# the local disk, then the ram:// tree copied out (ram:// is this process's memory) and the model
# directory read back from it.
_KERAS_ENGINE_RUN = r"""
import json, os, sys
import keras
import tensorflow as tf
from bert_keras.model.config import BertConfig
from bert_keras.modeldir.model_dir import ModelDir
from bert_keras.pretraining.keras_engine import KerasEngine
from bert_keras.pretraining.run import PretrainingOptions, engine_class, run_pretraining

values, bucket, local, copied = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
values["config"] = BertConfig.from_dict(values["config"])
steps = {out: run_pretraining(PretrainingOptions(**dict(values, output_dir=out)))["step"]
         for out in (bucket, local)}
for root, _, names in tf.io.gfile.walk(bucket):
    for name in names:
        target = os.path.join(copied, os.path.relpath(os.path.join(root, name), bucket))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tf.io.gfile.copy(os.path.join(root, name), target, overwrite=True)
read = ModelDir(bucket)
print("RESULT " + json.dumps({
    "backend": keras.backend.backend(), "engine": engine_class().__name__,
    "steps": list(steps.values()), "latest": KerasEngine.latest_checkpoint(bucket),
    "config": read.config.to_dict(), "vocab": len(read.vocab), "weights": sorted(read.weights),
    "rerun": run_pretraining(PretrainingOptions(**dict(values, output_dir=bucket)))["step"]}))
"""


def test_the_keras_engine_writes_its_output_dir_on_the_stand_in_of_a_bucket(tmp_path):
    from bert_keras.modeldir import model_dir

    records, vocab = _records(tmp_path)
    values = dict(input_files=records, config=CONFIG.to_dict(), vocab_file=vocab,
                  max_seq_length=32, max_predictions_per_seq=5, train_batch_size=8,
                  num_train_steps=2, num_warmup_steps=1, learning_rate=1e-3,
                  save_checkpoints_steps=2, mixed_precision="float32", verbose=0)
    bucket, local, copied = "ram://bucket/keras_engine", tmp_path / "disk", tmp_path / "copied"
    began = time.time()
    child = subprocess.run(
        [sys.executable, "-c", _KERAS_ENGINE_RUN, json.dumps(values), bucket, str(local),
         str(copied)], capture_output=True, text=True, timeout=600, env=backend_env("jax"),
        cwd=tmp_path, check=False)
    lines = [line for line in child.stdout.splitlines() if line.startswith("RESULT ")]
    assert child.returncode == 0 and lines, child.stdout[-3000:] + child.stderr[-5000:]
    result = json.loads(lines[-1][len("RESULT "):])
    assert (result["backend"], result["engine"]) == ("jax", "KerasEngine")
    assert result["steps"] == [2, 2] and result["rerun"] == 2
    assert result["latest"] == f"{bucket}/checkpoints/ckpt-2.npz"
    assert result["config"] == CONFIG.to_dict() and result["vocab"] == 200
    expected = model_dir.read_weights(str(local))
    assert result["weights"] == sorted(expected)
    _check_same_weights(model_dir.read_weights(str(copied)), expected)
    assert not os.path.exists(tmp_path / "ram:")
    events = lambda names: [name for name in names if ".tfevents." not in name]  # noqa: E731
    assert events(_bucket_files(str(copied))) == events(_bucket_files(str(local)))
    assert "checkpoints/ckpt-2.npz" in _bucket_files(str(copied))
    # The checkpoint too: model and optimizer (the variables' paths aside: Keras numbers the
    # names of a second model built in one process).
    with np.load(copied / "checkpoints" / "ckpt-2.npz") as got, \
            np.load(local / "checkpoints" / "ckpt-2.npz") as saved:
        arrays = [name for name in saved.files if not name.endswith("/paths")]
        assert sorted(got.files) == sorted(saved.files) and arrays
        for name in arrays:
            np.testing.assert_array_equal(got[name], saved[name], err_msg=name)
    print(f"ram:// and local runs on the Keras engine (JAX, a child process): "
          f"{time.time() - began:.1f} s")
