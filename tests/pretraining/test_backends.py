"""Pre-training on the Keras JAX backend (`pretraining.keras_fit`, `keras.Model.fit`) takes the
steps of the TensorFlow trainer (`pretraining.step`).

`run_pretraining` in one process per backend (`KERAS_BACKEND`), from the same model directory
(encoder and heads, dropout off) on the same masked records, 6 steps of AdamW with warm-up and
clipping: the model directories they write hold the same weights within 1e-4 (about 1e-6
measured), the weights having moved by far more. Before the JAX path read the records through
one iterator, Keras on JAX drew another shuffle than TensorFlow (it makes an extra iterator of
a dataset to build the model) and the weights parted completely.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pretraining_run_fixtures as fx

_CHILD = textwrap.dedent('''
    import json, sys
    import keras
    from bert_keras.pretraining.run import PretrainingOptions, run_pretraining

    records, init, output = sys.argv[1:4]
    metrics = run_pretraining(PretrainingOptions(
        input_files=records, output_dir=output, init_model_dir=init, train_batch_size=8,
        num_train_steps=6, num_warmup_steps=2, learning_rate=1e-3, max_seq_length=32,
        max_predictions_per_seq=5, save_checkpoints_steps=6, mixed_precision="float32",
        verbose=0))
    with open(output + ".json", "w") as f:
        json.dump({"backend": keras.backend.backend(),
                   "metrics": {name: float(value) for name, value in metrics.items()}}, f)
''')


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    import keras

    import bert_keras
    from bert_keras.model import checkpoint_names
    from bert_keras.model.pretraining_model import (build_pretraining_model,
                                                    pretraining_weight_map)
    from bert_keras.modeldir import model_dir

    root = tmp_path_factory.mktemp("pretraining_backends")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(95)]
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n")
    config = bert_keras.BertConfig.from_preset("tiny", vocab_size=len(vocab),
                                               hidden_dropout_prob=0.0,
                                               attention_probs_dropout_prob=0.0)
    keras.utils.set_random_seed(1)
    weights = checkpoint_names.collect_weights(pretraining_weight_map(
        build_pretraining_model(config)))
    model_dir.write_model_dir(str(root / "init"), config, str(root / "vocab.txt"), True, weights)
    fx.write_feature_records(str(root / "data.tfrecord"),
                             fx.random_features(64, 32, 5, len(vocab)))
    return root


def _pretrain(root, backend, expect_error=False):
    output = str(root / f"out_{backend}")
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES="", JAX_PLATFORMS="cpu")
    process = subprocess.run([sys.executable, "-c", _CHILD, str(root / "data.tfrecord"),
                              str(root / "init"), output], env=env, capture_output=True,
                             text=True, timeout=600)
    if expect_error:
        assert process.returncode != 0
        return process.stderr
    assert process.returncode == 0, process.stderr[-6000:]
    with open(output + ".json", encoding="utf-8") as f:
        return output, json.load(f)


def test_pretraining_takes_the_same_steps_on_jax_and_tensorflow(start):
    from bert_keras.modeldir import model_dir

    tf_dir, tf_run = _pretrain(start, "tensorflow")
    jax_dir, jax_run = _pretrain(start, "jax")
    assert (tf_run["backend"], jax_run["backend"]) == ("tensorflow", "jax")
    assert tf_run["metrics"]["step"] == jax_run["metrics"]["step"] == 6
    assert np.isfinite(jax_run["metrics"]["loss"])
    initial = model_dir.read_weights(str(start / "init"))
    ours, theirs = model_dir.read_weights(tf_dir), model_dir.read_weights(jax_dir)
    assert sorted(ours) == sorted(theirs) == sorted(initial)
    moved = 0
    for name, value in ours.items():
        assert np.abs(value - theirs[name]).max() <= 1e-4, name
        moved += np.abs(value - initial[name]).max() > 1e-3
    assert moved > 30, "degenerate test: the weights hardly moved"
    # The JAX run's directory is a whole model directory (config, vocabulary, casing).
    assert model_dir.read_config(jax_dir) == model_dir.read_config(tf_dir)
    assert model_dir.read_do_lower_case(jax_dir) is True


def test_a_jax_run_does_not_overwrite_an_earlier_one(start):
    """No resuming on JAX yet: a second run into the same directory stops and says so, and the
    first run's weights stay."""
    from bert_keras.modeldir import model_dir

    if not (start / "out_jax" / "model.safetensors").exists():
        _pretrain(start, "jax")
    before = model_dir.read_weights(str(start / "out_jax"))
    message = _pretrain(start, "jax", expect_error=True)
    assert "holds an earlier run (model.safetensors)" in message and "--start_over" in message
    after = model_dir.read_weights(str(start / "out_jax"))
    assert all(np.array_equal(before[name], after[name]) for name in before)
