"""Task models against the NumPy BERT, and fine-tuned model directories round trips."""

import json
import os

import numpy as np
import pytest

from bert_keras.model import checkpoint_names
from bert_keras.modeldir import model_dir
from bert_keras.model.config import BertConfig
from bert_keras.modeldir.loading import load_encoder
from bert_keras.finetuning.task_models import (TaskModelError, build_classifier, build_multiple_choice_model,
                                               build_span_model, build_token_tagger, load_task_model,
                                               save_task_model_dir, task_weight_map)
from bert_keras.text.vocab import Vocabulary
from helpers.model_fixtures import numpy_bert, random_weights, tiny_vocab_tokens
from helpers.support import required_module

CONFIG = BertConfig.from_preset("tiny", vocab_size=40, max_position_embeddings=16)
RNG = np.random.default_rng(3)


def _inputs(batch=2, seq=9):
    ids = RNG.integers(5, CONFIG.vocab_size, (batch, seq)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    types = np.zeros_like(ids)
    types[:, 4:] = 1
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def _assign_random(model, seed=5):
    variables = task_weight_map(model)
    arrays = random_weights({name: tuple(v.shape) for name, v in variables.items()}, seed=seed,
                            scale=0.2)
    checkpoint_names.assign_weights(variables, arrays)
    return arrays


def test_classifier_is_pooled_output_times_kernel():
    model = build_classifier(CONFIG, num_labels=3)
    arrays = _assign_random(model)
    inputs = _inputs()
    _, pooled, _ = numpy_bert(arrays, CONFIG, inputs["input_word_ids"], inputs["input_mask"],
                              inputs["input_type_ids"])
    expected = pooled @ arrays["task/classifier/kernel"] + arrays["task/classifier/bias"]
    np.testing.assert_allclose(np.asarray(model(inputs, training=False)), expected, atol=1e-4)
    assert sorted(n for n in task_weight_map(model) if n.startswith("task/")) == [
        "task/classifier/bias", "task/classifier/kernel"]
    assert build_classifier(CONFIG, regression=True).output.shape == (None, 1)
    with pytest.raises(TaskModelError, match="at least 2 labels"):
        build_classifier(CONFIG, num_labels=1)


def test_mean_pooled_classifier_reads_the_mean_of_the_real_tokens():
    model = build_classifier(CONFIG, num_labels=3, pooling="mean")
    arrays = _assign_random(model)
    inputs = _inputs()
    sequence, _, _ = numpy_bert(arrays, CONFIG, inputs["input_word_ids"], inputs["input_mask"],
                                inputs["input_type_ids"])
    mask = inputs["input_mask"][..., None].astype(np.float32)
    mean = (sequence * mask).sum(1) / mask.sum(1)  # padding left out
    expected = mean @ arrays["task/classifier/kernel"] + arrays["task/classifier/bias"]
    np.testing.assert_allclose(np.asarray(model(inputs, training=False)), expected, atol=1e-4)
    assert model.head_spec["pooling"] == "mean"
    # Unlike the [CLS] classifier, it does not read the pooler: changing it changes nothing.
    changed = dict(arrays, **{"bert/pooler/dense/kernel": arrays["bert/pooler/dense/kernel"] * 0})
    checkpoint_names.assign_weights(task_weight_map(model), changed)
    np.testing.assert_allclose(np.asarray(model(inputs, training=False)), expected, atol=1e-4)
    with pytest.raises(TaskModelError, match="unknown pooling 'max'"):
        build_classifier(CONFIG, pooling="max")


def test_span_model_scores_every_token():
    model = build_span_model(CONFIG)
    arrays = _assign_random(model)
    inputs = _inputs()
    sequence, _, _ = numpy_bert(arrays, CONFIG, inputs["input_word_ids"], inputs["input_mask"],
                                inputs["input_type_ids"])
    both = sequence @ arrays["task/span/kernel"] + arrays["task/span/bias"]
    outputs = model(inputs, training=False)
    np.testing.assert_allclose(np.asarray(outputs["start_logits"]), both[..., 0], atol=1e-4)
    np.testing.assert_allclose(np.asarray(outputs["end_logits"]), both[..., 1], atol=1e-4)


def test_multiple_choice_model_encodes_each_pair_separately():
    model = build_multiple_choice_model(CONFIG, num_choices=4)
    arrays = _assign_random(model)
    flat = _inputs(batch=8)
    inputs = {name: value.reshape(2, 4, -1) for name, value in flat.items()}
    _, pooled, _ = numpy_bert(arrays, CONFIG, flat["input_word_ids"], flat["input_mask"],
                              flat["input_type_ids"])
    scores = pooled @ arrays["task/multiple_choice/kernel"][:, 0] + \
        arrays["task/multiple_choice/bias"][0]
    np.testing.assert_allclose(np.asarray(model(inputs, training=False)), scores.reshape(2, 4),
                               atol=1e-4)


def test_feature_based_tagger_freezes_bert_and_reads_its_last_layers():
    model = build_token_tagger(CONFIG, num_labels=9, feature_based=True, feature_layers=2,
                               lstm_units=8)
    assert all(not v.trainable for v in model.encoder.weights)
    assert {id(v) for v in model.trainable_weights} == {id(v) for v in model.head.weights}
    # BERT runs without dropout even in training: only the head's dropout differs.
    inputs = _inputs()
    features = model.encoder(inputs, training=False)["encoder_outputs"]
    np.testing.assert_allclose(
        np.asarray(model.head(features[-2:], inputs["input_mask"], training=False)),
        np.asarray(model(inputs, training=False)), atol=1e-5)
    with pytest.raises(TaskModelError, match="only 2 layers"):
        build_token_tagger(CONFIG, num_labels=9, feature_based=True, feature_layers=4)
    tagger = build_token_tagger(CONFIG, num_labels=9)
    assert tagger.output.shape == (None, None, 9)
    assert all(v.trainable for v in tagger.encoder.weights)


@pytest.mark.parametrize("build", [
    lambda: build_classifier(CONFIG, num_labels=3),
    lambda: build_classifier(CONFIG, num_labels=3, pooling="mean"),
    lambda: build_span_model(CONFIG),
    lambda: build_multiple_choice_model(CONFIG, num_choices=4),
    lambda: build_token_tagger(CONFIG, num_labels=5, feature_based=True, feature_layers=2,
                               lstm_units=8),
])
def test_fine_tuned_model_directory_round_trip(tmp_path, build):
    model = build()
    arrays = _assign_random(model)
    out = str(tmp_path / "fine_tuned")
    vocab = Vocabulary(tiny_vocab_tokens(CONFIG.vocab_size))
    save_task_model_dir(model, out, CONFIG, vocab, True,
                        {"task": "test", "label_names": None, "max_seq_length": 9})

    task_config = json.load(open(os.path.join(out, "task_config.json")))
    assert task_config["task"] == "test" and task_config["head"] == model.head_spec["head"]
    stored = model_dir.read_weights(out)
    assert set(stored) == set(arrays)  # original BERT names + task/<head>/<var>
    assert "bert/encoder/layer_1/output/LayerNorm/gamma" in stored

    reloaded, reloaded_config = load_task_model(out)
    assert reloaded_config == task_config
    inputs = _inputs(batch=8)
    if model.head_spec["head"] == "multiple_choice":
        inputs = {name: value.reshape(2, 4, -1) for name, value in inputs.items()}
    expected, actual = model(inputs, training=False), reloaded(inputs, training=False)
    for name in (expected if isinstance(expected, dict) else [None]):
        e = expected[name] if name else expected
        a = actual[name] if name else actual
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), atol=1e-6)
    # A pre-trained-only reader still finds the encoder.
    assert len(load_encoder(out).weights) == len(model.encoder.weights)


def test_bad_fine_tuned_directories_are_named(tmp_path):
    model = build_classifier(CONFIG, num_labels=2)
    out = str(tmp_path / "fine_tuned")
    vocab = Vocabulary(tiny_vocab_tokens(CONFIG.vocab_size))
    save_task_model_dir(model, out, CONFIG, vocab, True, {"task": "t"})
    weights = model_dir.read_weights(out)
    del weights["task/classifier/bias"]
    model_dir.write_model_dir(out, CONFIG, vocab, True, weights,
                              task_config=model_dir.read_task_config(out))
    with pytest.raises(checkpoint_names.WeightsError, match="task/classifier/bias"):
        load_task_model(out)
    os.remove(os.path.join(out, "task_config.json"))
    with pytest.raises(TaskModelError, match="no task_config.json"):
        load_task_model(out)


def test_classifier_builds_and_trains_on_jax_without_tensorflow():
    """Where Keras runs on JAX alone (an accelerator machine without TensorFlow, as for
    `benchmarks/bench_transfer_device.py`), the task models, their weight map and the
    fine-tuning update still build and take a step: TensorFlow is only needed to read a model
    directory's vocabulary (`load_task_model`)."""
    import subprocess
    import sys
    import textwrap

    required_module("jax", 'pip install -e ".[test]"')
    code = textwrap.dedent("""
        import sys
        sys.modules["tensorflow"] = None  # any import of TensorFlow now fails
        import numpy as np
        from bert_keras import optimization
        from bert_keras.finetuning.task_models import build_classifier, task_weight_map
        from bert_keras.model.config import BertConfig
        model = build_classifier(BertConfig.from_preset("tiny", vocab_size=40), pooling="mean")
        variables = task_weight_map(model)
        optimizer = optimization.AdamWeightDecay(learning_rate=1e-2, summed_gradients=False)
        optimizer.exclude_from_weight_decay(var_list=optimization.no_decay_variables(variables))
        model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
        ids = np.arange(5, 13, dtype="int32").reshape(2, 4)
        inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
                  "input_type_ids": np.zeros_like(ids)}
        before = variables["bert/embeddings/word_embeddings"].numpy().copy()
        model.fit(inputs, np.array([0, 1]), epochs=1, verbose=0)
        moved = float(np.abs(variables["bert/embeddings/word_embeddings"].numpy() - before).max())
        print(len(variables), moved > 0, "tensorflow" in sys.modules and sys.modules["tensorflow"] is not None)
    """)
    env = dict(os.environ, KERAS_BACKEND="jax")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    count, moved, tensorflow_loaded = result.stdout.split()[-3:]
    assert int(count) == len(task_weight_map(build_classifier(CONFIG, pooling="mean")))
    assert moved == "True" and tensorflow_loaded == "False"
