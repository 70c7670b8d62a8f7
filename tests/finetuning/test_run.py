"""The fine-tuning runner: optimizer, data and prediction helpers, options, strategies."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from bert_keras.finetuning.run import create_finetuning_optimizer, make_dataset, predict, run_finetuning
from bert_keras.finetuning.task import TaskData
from bert_keras.finetuning.task_models import build_classifier, task_weight_map
from bert_keras.model.config import BertConfig
from helpers.finetuning_fixtures import data_dir, fixture, tiny_model_dir
from helpers.support import REPO_ROOT as REPO

CONFIG = BertConfig.from_preset("tiny", vocab_size=30, max_position_embeddings=16)


def test_adamw_decays_weights_but_not_layer_norms_and_biases():
    model = build_classifier(CONFIG, num_labels=2)
    optimizer = create_finetuning_optimizer(model, learning_rate=0.1, num_train_steps=10, num_warmup_steps=0,
                                 weight_decay=0.01)
    variables = task_weight_map(model)
    before = {name: np.array(v.numpy()) for name, v in variables.items()}
    # With a zero gradient Adam's step is zero, so only the decoupled decay moves a weight:
    # w <- w - lr * weight_decay * w, at the schedule's first rate (no warm-up: the peak).
    optimizer.apply([np.zeros(v.shape, "float32") for v in model.trainable_variables],
                    model.trainable_variables)
    for name, variable in variables.items():
        after = variable.numpy()
        if "LayerNorm" in name or "bias" in name:
            np.testing.assert_array_equal(after, before[name], err_msg=name)
        else:
            np.testing.assert_allclose(after, before[name] * (1 - 0.1 * 0.01), rtol=1e-6,
                                       err_msg=name)
    assert optimizer.global_clipnorm == 1.0 and optimizer.epsilon == 1e-6


def test_adam_adds_epsilon_after_the_bias_correction_as_pytorch_adamw():
    # PyTorch's AdamW (the Hugging Face recipes): w -= lr * m_hat / (sqrt(v_hat) + eps). For a
    # gradient of 1e-6 at the first step that is lr * 1e-6 / (1e-6 + 1e-6) = lr / 2; Keras' own
    # AdamW adds eps to the uncorrected sqrt(v) and moves the weight 16 times less (lr * 0.031).
    model = build_classifier(CONFIG, num_labels=2)
    optimizer = create_finetuning_optimizer(model, learning_rate=0.1, num_train_steps=10,
                                            num_warmup_steps=0, weight_decay=0.0)
    bias = model.head.dense.bias
    before = bias.numpy().copy()
    gradients = [np.zeros(v.shape, "float32") for v in model.trainable_variables]
    gradients[[v.path for v in model.trainable_variables].index(bias.path)][:] = 1e-6
    optimizer.apply(gradients, model.trainable_variables)
    np.testing.assert_allclose(before - bias.numpy(), 0.1 * 0.5, rtol=1e-4)


def test_learning_rate_warms_up_then_decays_linearly_to_zero():
    model = build_classifier(CONFIG, num_labels=2)
    optimizer = create_finetuning_optimizer(model, 2e-5, num_train_steps=100, num_warmup_steps=10)

    def rate_at(step):
        optimizer.iterations.assign(step)
        return float(optimizer.learning_rate)

    assert rate_at(0) == 0.0
    assert rate_at(5) == pytest.approx(1e-5)
    assert rate_at(10) == pytest.approx(2e-5 * 0.9)  # the decay counts the warm-up steps
    assert rate_at(55) == pytest.approx(2e-5 * 0.45)
    assert rate_at(100) == 0.0


def test_make_dataset_and_predict_keep_rows_aligned():
    inputs = {"input_word_ids": np.arange(10, dtype=np.int32)[:, None].repeat(3, 1)}
    data = TaskData(inputs, labels=np.arange(10), sample_weight=np.ones(10, np.float32))
    x, y, w = next(iter(make_dataset(data, 4)))
    assert x["input_word_ids"].shape == (4, 3) and y.shape == (4,) and w.shape == (4,)
    train = make_dataset(data, 4, training=True, seed=1)
    rows = [int(v) for batch in train.take(5) for v in batch[1].numpy()]  # repeats past 10
    assert len(rows) == 20 and sorted(rows[:10]) == list(range(10))

    class Echo:  # a stand-in model: returns the first column of its input
        def predict(self, dataset, verbose=0):
            batches = [batch["input_word_ids"].numpy()[:, 0] for batch in dataset]
            assert all(len(b) == 4 for b in batches)  # padded to full batches
            return np.concatenate(batches)

    np.testing.assert_array_equal(predict(Echo(), inputs, 4), np.arange(10))


def test_options_are_checked_before_anything_runs(tmp_path):
    dev = fixture("glue", "MRPC", "dev.tsv")
    init = tiny_model_dir(tmp_path, [dev])
    data = data_dir(tmp_path, {"train.tsv": dev, "dev.tsv": dev})
    with pytest.raises(TypeError, match="learning_rte"):
        run_finetuning("glue/mrpc", data, init, str(tmp_path / "o"), learning_rte=1e-3)
    with pytest.raises(ValueError, match="whole number"):
        run_finetuning("glue/mrpc", data, init, str(tmp_path / "o"), num_train_epochs=2.5)
    with pytest.raises(ValueError, match="unknown task"):
        run_finetuning("glue2/mrpc", data, init, str(tmp_path / "o"))
    with pytest.raises(ValueError, match="unknown GLUE task"):
        run_finetuning("glue/mrcp", data, init, str(tmp_path / "o"))
    with pytest.raises(ValueError, match="feature_based"):
        run_finetuning("glue/mrpc", data, init, str(tmp_path / "o"), feature_based=True)
    with pytest.raises(ValueError, match="max_position_embeddings 128"):
        run_finetuning("glue/mrpc", data, init, str(tmp_path / "o"), max_seq_length=512)


def test_fit_under_mirrored_strategy_then_evaluate_the_saved_directory(tmp_path):
    dev = fixture("glue", "MRPC", "dev.tsv")
    init = tiny_model_dir(tmp_path, [dev])
    data = data_dir(tmp_path, {"train.tsv": dev, "dev.tsv": dev})
    out = str(tmp_path / "mirrored")
    # Two logical CPUs must be made before TensorFlow starts, hence a fresh process.
    script = textwrap.dedent(f"""
        from bert_keras import distribution
        distribution.split_cpu(2)
        from bert_keras.finetuning.run import run_finetuning
        result = run_finetuning("glue/mrpc", {data!r}, {init!r}, {out!r}, strategy="mirrored",
                                learning_rate=1e-3, train_batch_size=4, num_train_epochs=2,
                                max_seq_length=32, verbose=0, save_checkpoints=False)
        print("replicas", result.results["train"]["replicas"])
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "replicas 2" in done.stdout

    # Evaluating the fine-tuned directory (its head loaded) reproduces the run's dev metrics.
    trained = json.load(open(os.path.join(out, "eval_results.json")))["metrics"]["dev"]
    again = run_finetuning("glue/mrpc", data, out, str(tmp_path / "eval_only"), do_train=False,
                           max_seq_length=32, verbose=0)
    assert again.metrics["dev"] == pytest.approx(trained)


def _earlier_positions_change(encoder, vocab_size):
    """Max change of sequence_output at positions 0-5 when only the token at position 6 changes."""
    ids = np.random.default_rng(0).integers(5, vocab_size, size=(1, 8)).astype(np.int32)
    changed = ids.copy()
    changed[0, 6] = 5 if ids[0, 6] != 5 else 6
    inputs = {"input_mask": np.ones_like(ids), "input_type_ids": np.zeros_like(ids)}
    before = encoder(dict(inputs, input_word_ids=ids))["sequence_output"].numpy()
    after = encoder(dict(inputs, input_word_ids=changed))["sequence_output"].numpy()
    assert np.abs(before[0, 6:] - after[0, 6:]).max() > 1e-4
    return np.abs(before[0, :6] - after[0, :6]).max()


def test_a_causal_model_is_fine_tuned_and_saved_causal(tmp_path):
    """A left-to-right model keeps its mask through fine-tuning and in the directory it writes."""
    from bert_keras import load_encoder
    from bert_keras.modeldir import model_dir

    dev = fixture("glue", "MRPC", "dev.tsv")
    init = tiny_model_dir(tmp_path, [dev], causal_attention=True)
    vocab_size = model_dir.read_config(init).vocab_size
    data = data_dir(tmp_path, {"train.tsv": dev, "dev.tsv": dev})
    out = str(tmp_path / "out")
    result = run_finetuning("glue/mrpc", data, init, out, learning_rate=1e-3, train_batch_size=3,
                            num_train_epochs=1, max_seq_length=32, verbose=0,
                            save_checkpoints=False)
    assert _earlier_positions_change(result.model.encoder, vocab_size) < 1e-6  # trained causal
    assert json.load(open(os.path.join(out, "bert_config.json")))["causal_attention"] is True
    assert _earlier_positions_change(load_encoder(out), vocab_size) < 1e-6
    # The check can fail: the same fine-tuned weights read bidirectionally see later tokens.
    assert _earlier_positions_change(load_encoder(out, causal=False), vocab_size) > 1e-4


def test_xla_compiled_fit_gives_the_plain_graph_s_losses(tmp_path):
    """`fit` compiled with XLA, several steps per call (the TPU path, checked on the CPU), trains
    as the plain graph does."""
    dev = fixture("glue", "MRPC", "dev.tsv")
    init = tiny_model_dir(tmp_path, [dev])
    config_path = os.path.join(init, "bert_config.json")
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    # Dropout draws different random numbers under XLA; without it both graphs compute the same.
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    data = data_dir(tmp_path, {"train.tsv": dev, "dev.tsv": dev})
    results = {}
    for jit_compile in (False, True):
        results[jit_compile] = run_finetuning(
            "glue/mrpc", data, init, str(tmp_path / f"xla_{jit_compile}"), jit_compile=jit_compile,
            steps_per_execution=3, learning_rate=1e-3, train_batch_size=4, num_train_epochs=2,
            max_seq_length=32, dropout_rate=0.0, verbose=0, save_checkpoints=False)
    plain, xla = results[False], results[True]
    assert xla.model.jit_compile and not plain.model.jit_compile
    assert plain.train_loss[0] != plain.train_loss[1]  # it trained
    np.testing.assert_allclose(xla.train_loss, plain.train_loss, rtol=1e-4, atol=1e-5)
    assert xla.metrics["dev"] == pytest.approx(plain.metrics["dev"], abs=1e-2)
