"""Pre-training records, the data tool's manifests and the Keras engine's checkpoints on a file
system other than the local one, as `gs://` is on a cloud: TensorFlow's in-memory `ram://`
file system, which `tf.io.gfile` and `tf.data` reach the way they reach `gs://`.

Both engines read records through the same `tf.data` pipeline (`inputs.make_dataset_fn`, on the
CPU: on the JAX backend too), so one training run here covers the reading; the Keras (JAX)
engine's checkpoint files are written, listed and restored through its own functions.
Not covered: an output directory (model directory, run files, logs) on such a path, which the
package still writes with local file operations (docs/scaling.md says so).
"""

import json

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
