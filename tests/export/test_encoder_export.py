"""The TF Hub-style encoder export, reloaded in a process that cannot import bert_keras."""

import os

import numpy as np
import pytest

from helpers.export_helpers import run_fresh, tiny_config, write_pretrained_dir
from helpers.model_fixtures import numpy_bert, tiny_vocab_tokens

SEQ = 12


def _inputs():
    rng = np.random.default_rng(7)
    ids = rng.integers(5, 60, size=(3, SEQ)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 8:] = 0
    mask[2, 3:] = 0
    ids = ids * mask
    ids[:, 0] = 2
    types = np.zeros_like(ids)
    types[0, 6:] = 1
    positions = np.array([[1, 2, 5], [0, 3, 7], [1, 1, 2]], np.int32)
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}, positions


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """A tiny model directory and its float32 export, and a mixed-bf16 model's two exports."""
    import keras

    from bert_keras.export import encoder_export
    from bert_keras.model import checkpoint_names
    from bert_keras.model.pretraining_model import build_pretraining_model, pretraining_weight_map
    from bert_keras.modeldir import model_dir

    root = tmp_path_factory.mktemp("encoder_export")
    model_path = str(root / "model")
    write_pretrained_dir(model_path, tiny_vocab_tokens(64))
    # The float32 export goes through the command line tool.
    cli = _run_cli(model_path, root / "encoder")

    # A model "trained" under mixed_bfloat16: float32 master weights, bf16 compute.
    keras.utils.set_random_seed(3)
    config = tiny_config(64)
    bf16_model = build_pretraining_model(config, next_sentence=False, dtype="mixed_bfloat16")
    bf16_weights = checkpoint_names.collect_weights(pretraining_weight_map(bf16_model))
    encoder_export.export_encoder(str(root / "from_bf16"), config, bf16_weights, xla_batch_1=True)
    encoder_export.export_encoder(str(root / "bf16"), config, bf16_weights, dtype="bfloat16",
                                  with_mlm=False, xla_batch_1=True)
    return {"root": root, "model_dir": model_path, "bf16_config": config, "cli": cli,
            "bf16_weights": bf16_weights,
            "weights": model_dir.read_weights(model_path),
            "config": model_dir.read_config(model_path)}


_CHILD = '''
import time

def graph_dtypes(concrete):
    dtypes = set()
    for function in [concrete.graph.as_graph_def()] + [
            f for f in concrete.graph.as_graph_def().library.function]:
        nodes = function.node if hasattr(function, "node") else function.node_def
        for node in nodes:
            for key in ("T", "dtype", "DstT"):
                if key in node.attr and node.attr[key].type:
                    dtypes.add(tf.dtypes.as_dtype(node.attr[key].type).name)
    return sorted(dtypes)

feed = {k: tf.constant(v) for k, v in INPUTS.items()}

def describe(path):
    r = {}
    start = time.perf_counter()
    obj = tf.saved_model.load(path)
    r["load_seconds"] = time.perf_counter() - start
    out = obj(feed, training=False)
    r["default_call"] = {k: v.numpy() for k, v in obj(feed).items() if k != "encoder_outputs"}
    r["inference"] = {k: (v.numpy() if k != "encoder_outputs" else [x.numpy() for x in v])
                            for k, v in out.items()}
    r["output_keys"] = sorted(out)
    r["output_dtypes"] = sorted({v.dtype.name for v in tf.nest.flatten(out)})
    t1 = obj(feed, training=True)["sequence_output"].numpy()
    t2 = obj(feed, training=True)["sequence_output"].numpy()
    r["training_pair"] = (t1, t2)
    r["num_variables"] = len(obj.variables)
    r["num_trainable"] = len(obj.trainable_variables)
    r["regularization_losses"] = len(obj.regularization_losses)
    signature = obj.signatures["serving_default"]
    r["signature_inputs"] = sorted(
        (name, spec.dtype.name, spec.shape.as_list())
        for name, spec in signature.structured_input_signature[1].items())
    r["signature_outputs"] = sorted(
        (name, spec.dtype.name, spec.shape.as_list()) for name, spec in signature.structured_outputs.items())
    r["signature_values"] = {k: v.numpy() for k, v in signature(**feed).items()}
    r["graph_dtypes"] = graph_dtypes(signature)
    r["op_types"] = graph_op_types(signature)
    r["xla_calls"] = xla_compiled_calls(signature)
    rows = int(feed["input_word_ids"].shape[0])
    r["one_by_one"] = [signature(**{k: v[i:i + 1] for k, v in feed.items()})["sequence_output"].numpy()
                       for i in range(rows)]
    r["one_training"] = obj({k: v[:1] for k, v in feed.items()}, training=True)["sequence_output"].numpy()
    if hasattr(obj, "mlm"):
        mlm = obj.mlm(dict(feed, masked_lm_positions=tf.constant(POSITIONS)), training=False)
        r["mlm_logits"] = mlm["mlm_logits"].numpy()
        r["mlm_keys"] = sorted(mlm)
        r["mlm_variables"] = len(obj.mlm.variables)
    serve = obj.serve(feed)
    r["serve_pooled"] = serve["pooled_output"].numpy()
    bad = {"id_64": dict(feed, input_word_ids=feed["input_word_ids"] + 64),
           "type_2": dict(feed, input_type_ids=feed["input_type_ids"] + 2),
           "short_mask": dict(feed, input_mask=feed["input_mask"][:, :5]),
           "too_long": {k: tf.zeros([1, 600], tf.int32) for k in feed}}
    r["bad_inputs"] = {}
    for case, values in bad.items():
        try:
            signature(**values)
            r["bad_inputs"][case] = None
        except tf.errors.InvalidArgumentError as error:
            r["bad_inputs"][case] = str(error)
    return r

for name, path in EXPORT_DIRS.items():
    results[name] = describe(path)
'''


def _reference(config, weights, inputs, positions, dtype=None):
    from bert_keras.export.encoder_export import build_keras_models

    encoder, head = build_keras_models(config, weights, dtype="float32")
    outputs = encoder(inputs)
    mlm = head(outputs["sequence_output"], positions).numpy() if head is not None else None
    return {"pooled_output": outputs["pooled_output"].numpy(),
            "sequence_output": outputs["sequence_output"].numpy(),
            "encoder_outputs": [x.numpy() for x in outputs["encoder_outputs"]]}, mlm


@pytest.fixture(scope="module")
def loaded(exports):
    """One fresh process loads the three exports."""
    inputs, positions = _inputs()
    root = exports["root"]
    return run_fresh(_CHILD, INPUTS=inputs, POSITIONS=positions,
                     EXPORT_DIRS={name: str(root / name) for name in
                                  ("encoder", "from_bf16", "bf16")})


@pytest.fixture(scope="module")
def float32_results(loaded):
    return loaded["encoder"]


def test_encoder_matches_in_memory_model_and_numpy_bert(exports, float32_results):
    inputs, positions = _inputs()
    expected, expected_mlm = _reference(exports["config"], exports["weights"], inputs, positions)
    got = float32_results["inference"]
    real = inputs["input_mask"].astype(bool)  # inference computes the real tokens only
    assert np.abs(got["pooled_output"] - expected["pooled_output"]).max() <= 1e-5
    assert np.abs(got["sequence_output"][real] - expected["sequence_output"][real]).max() <= 1e-5
    assert len(got["encoder_outputs"]) == 2
    for layer, want in zip(got["encoder_outputs"], expected["encoder_outputs"]):
        assert np.abs(layer[real] - want[real]).max() <= 1e-5
        assert not layer[~real].any()  # zeros at padding positions
    np.testing.assert_array_equal(got["encoder_outputs"][-1], got["sequence_output"])
    np.testing.assert_array_equal(got["default"], got["pooled_output"])
    assert np.abs(float32_results["mlm_logits"] - expected_mlm).max() <= 1e-5
    # Independent reference: the paper's forward pass in float64 NumPy.
    sequence, pooled, _ = numpy_bert(exports["weights"], exports["config"], inputs["input_word_ids"],
                                     inputs["input_mask"], inputs["input_type_ids"])
    assert np.abs(got["sequence_output"][real] - sequence[real]).max() < 1e-4
    assert np.abs(got["pooled_output"] - pooled).max() < 1e-4
    # The default of `training` is False, and the serve endpoint is the inference function.
    np.testing.assert_array_equal(float32_results["default_call"]["pooled_output"],
                                  got["pooled_output"])
    np.testing.assert_allclose(float32_results["serve_pooled"], got["pooled_output"], atol=1e-6)


def test_a_batch_of_one_runs_the_xla_compiled_encoder(loaded):
    """Inference on a batch of one runs an XLA-compiled copy of the float32 encoder
    (`xla_batch_1`): each row alone gives its row of the batch; bfloat16 exports and training
    keep the plain graph (dropout at batch 1 still draws)."""
    r = loaded["encoder"]
    assert r["xla_calls"] >= 1 and loaded["from_bf16"]["xla_calls"] >= 1
    assert loaded["bf16"]["xla_calls"] == 0
    batch = r["signature_values"]["sequence_output"]
    assert len(r["one_by_one"]) == batch.shape[0] > 1
    for row, alone in enumerate(r["one_by_one"]):
        assert np.abs(alone[0] - batch[row]).max() <= 1e-5, row
    assert np.abs(r["one_training"][0] - batch[0]).max() > 1e-3


def test_tf_hub_names_and_dtypes(float32_results):
    r = float32_results
    assert r["output_keys"] == ["default", "encoder_outputs", "pooled_output", "sequence_output"]
    assert r["output_dtypes"] == ["float32"]
    assert r["mlm_keys"] == ["default", "encoder_outputs", "mlm_logits", "pooled_output",
                             "sequence_output"]
    assert r["mlm_logits"].shape == (3, 3, 64)
    # 5 embedding weights, 16 per layer, 2 pooler; the MLM head adds 5 (its projection is tied).
    assert r["num_trainable"] == 5 + 2 * 16 + 2 + 5
    assert r["num_variables"] >= r["num_trainable"]
    assert r["mlm_variables"] == r["num_variables"]
    assert r["regularization_losses"] == 0
    assert r["signature_inputs"] == [(n, "int32", [None, None]) for n in
                                     ("input_mask", "input_type_ids", "input_word_ids")]
    assert r["signature_outputs"] == [("default", "float32", [None, 32]),
                                      ("pooled_output", "float32", [None, 32]),
                                      ("sequence_output", "float32", [None, None, 32])]
    np.testing.assert_allclose(r["signature_values"]["pooled_output"],
                               r["inference"]["pooled_output"], atol=1e-6)
    assert "bfloat16" not in r["graph_dtypes"]
    assert not {"PyFunc", "EagerPyFunc", "PyFuncStateless"} & set(r["op_types"])


def test_bad_inputs_are_named_with_their_limit(float32_results):
    messages = float32_results["bad_inputs"]
    assert "input_word_ids must be in [0, 64)" in messages["id_64"]
    assert "input_type_ids must be in [0, 2)" in messages["type_2"]
    assert "input_mask must have the shape of input_word_ids" in messages["short_mask"]
    assert "seq_length must be at most 128 (max_position_embeddings)" in messages["too_long"]


def test_dropout_only_when_training(float32_results):
    first, second = float32_results["training_pair"]
    inference = float32_results["inference"]["sequence_output"]
    assert np.abs(first - inference).max() > 1e-2
    assert np.abs(first - second).max() > 1e-2


def test_mixed_bfloat16_model_exports_exact_float32_and_optional_bfloat16(exports, loaded):
    inputs, positions = _inputs()
    expected, _ = _reference(exports["bf16_config"], exports["bf16_weights"], inputs, positions)
    results = loaded["from_bf16"]
    real = inputs["input_mask"].astype(bool)
    for name in ("pooled_output", "sequence_output"):
        got, want = results["inference"][name], expected[name]
        if name == "sequence_output":
            got, want = got[real], want[real]
        assert np.abs(got - want).max() <= 1e-5
    assert "bfloat16" not in results["graph_dtypes"]
    bf16 = loaded["bf16"]
    assert bf16["output_dtypes"] == ["float32"]
    assert "bfloat16" in bf16["graph_dtypes"]
    assert "mlm_logits" not in bf16
    got = bf16["inference"]
    assert np.abs(got["sequence_output"][real] - expected["sequence_output"][real]).max() < 0.1
    assert np.abs(got["pooled_output"] - expected["pooled_output"]).max() < 0.05


def _run_cli(model_dir, export_dir):
    import subprocess
    import sys

    from helpers.export_helpers import REPO_ROOT

    return subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "tools", "export_savedmodel.py"),
         f"--model_dir={model_dir}", f"--export_dir={export_dir}", "--kind=encoder",
         "--dtype=float32", "--xla_batch_1"],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def test_cli_exports_encoder(exports):
    process = exports["cli"]
    assert process.returncode == 0, process.stderr[-3000:]
    out = exports["root"] / "encoder"
    assert (out / "saved_model.pb").exists() and (out / "variables").is_dir()
    assert "wrote encoder SavedModel" in process.stdout and "(float32, " in process.stdout
    from bert_keras.export import read_export_info

    info = read_export_info(str(out))
    assert info["kind"] == "encoder" and info["dtype"] == "float32"


def test_an_export_replaces_only_an_earlier_export(exports, tmp_path):
    """The SavedModel is written beside export_dir and renamed into place: an earlier export
    is replaced whole, a directory with anything else in it is refused and left as it was."""
    from bert_keras.export import export_from_model_dir, read_export_info

    out = tmp_path / "encoder"
    export_from_model_dir("encoder", exports["model_dir"], str(out))
    first = (out / "saved_model.pb").stat().st_mtime_ns
    export_from_model_dir("encoder", exports["model_dir"], str(out))
    assert (out / "saved_model.pb").stat().st_mtime_ns != first
    assert read_export_info(str(out))["kind"] == "encoder"
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="--export_dir: .*encoder already holds .*notes.txt"):
        export_from_model_dir("encoder", exports["model_dir"], str(out))
    assert (out / "notes.txt").read_text() == "mine" and (out / "saved_model.pb").exists()
    assert sorted(os.listdir(tmp_path)) == ["encoder"]  # no temporary left behind


def test_export_many_checks_every_kind_before_exporting_any(exports, tmp_path):
    from bert_keras.export import export_many

    with pytest.raises(ValueError, match="unknown export kind 'encodr'"):
        export_many([dict(kind="encoder", model_dir=exports["model_dir"],
                          export_dir=str(tmp_path / "encoder")),
                     dict(kind="encodr", model_dir=exports["model_dir"],
                          export_dir=str(tmp_path / "other"))])
    assert os.listdir(tmp_path) == []
    assert export_many([]) == []


def test_unknown_dtype_is_a_clear_error(exports):
    from bert_keras.export import encoder_export

    with pytest.raises(ValueError, match="float32"):
        encoder_export.dtype_policy("float16")


# ------------------------------------------------------------- a left-to-right model's exports
_CAUSAL_CHILD = '''
def feed(ids):
    return {"input_word_ids": tf.constant(ids), "input_mask": tf.ones_like(ids),
            "input_type_ids": tf.zeros_like(ids)}

changed = IDS.copy()
changed[0, 6] = 5 if IDS[0, 6] != 5 else 6
for name, path in ENCODERS.items():
    obj = tf.saved_model.load(path)
    before, after = (obj(feed(x))["sequence_output"].numpy() for x in (IDS, changed))
    results[name] = {"earlier": np.abs(before[0, :6] - after[0, :6]).max(),
                     "later": np.abs(before[0, 6:] - after[0, 6:]).max()}
    if hasattr(obj, "mlm"):
        positions = tf.constant([[1, 4, 7]])
        before, after = (obj.mlm(dict(feed(x), masked_lm_positions=positions))["mlm_logits"].numpy()
                         for x in (IDS, changed))
        results[name]["mlm_earlier"] = np.abs(before[0, :2] - after[0, :2]).max()
        results[name]["mlm_later"] = np.abs(before[0, 2] - after[0, 2]).max()
for name, path in TASKS.items():
    serve = tf.saved_model.load(path).signatures["serving_default"]
    probabilities = serve(text_a=tf.constant(TEXT_A), text_b=tf.constant(TEXT_B))["probabilities"]
    results[name] = np.abs(probabilities.numpy() - probabilities.numpy()[:1]).max()
'''


def _bidirectional_copy(source, destination):
    """The same directory (weights, vocabulary, head) with a bidirectional config."""
    import dataclasses
    import shutil

    from bert_keras.modeldir import model_dir

    shutil.copytree(source, destination)
    config = dataclasses.replace(model_dir.read_config(source), causal_attention=False)
    config.to_json_file(os.path.join(destination, model_dir.CONFIG_NAME))
    return str(destination)


@pytest.fixture(scope="module")
def causal_exports(tmp_path_factory):
    """A left-to-right pre-trained directory, fine-tuned on MRPC; their encoder and task exports,
    and those of bidirectional twins (the same weights without `causal_attention`)."""
    from bert_keras.export import encoder_export, task_export
    from bert_keras.finetuning.run import run_finetuning
    from bert_keras.model import checkpoint_names
    from bert_keras.modeldir import model_dir
    from bert_keras.text.vocab import Vocabulary
    from helpers.finetuning_fixtures import data_dir, fixture, read_lines, vocab_tokens
    from helpers.model_fixtures import random_weights

    root = tmp_path_factory.mktemp("causal_export")
    dev = fixture("glue", "MRPC", "dev.tsv")
    tokens = vocab_tokens([dev])
    config = tiny_config(len(tokens), causal_attention=True)
    shapes = dict(checkpoint_names.encoder_weight_shapes(config),
                  **checkpoint_names.pretraining_head_shapes(config))
    # Weights larger than the initializer's, so that [CLS] depends clearly on the other tokens.
    pretrained = str(root / "pretrained")
    model_dir.write_model_dir(pretrained, config, Vocabulary(tokens), True,
                              random_weights(shapes, seed=5, scale=0.2))
    finetuned = str(root / "finetuned")
    run_finetuning("glue/mrpc", data_dir(root, {"train.tsv": dev, "dev.tsv": dev}), pretrained,
                   finetuned, learning_rate=1e-3, train_batch_size=3, num_train_epochs=1,
                   max_seq_length=32, verbose=0, save_checkpoints=False)
    encoders = {"pretrained": pretrained, "finetuned": finetuned,
                "pretrained_bidirectional": _bidirectional_copy(pretrained, root / "pretrained_bi")}
    tasks = {"task": finetuned, "task_bidirectional": _bidirectional_copy(finetuned, root / "ft_bi")}
    paths = {}
    for name, source in encoders.items():
        paths[name] = encoder_export.export_encoder_from_model_dir(source, str(root / f"{name}_export"))
    for name, source in tasks.items():
        paths[name] = task_export.export_task_from_model_dir(source, str(root / f"{name}_export"))
    rows = [line.split("\t") for line in read_lines(dev)[1:]]
    ids = np.random.default_rng(0).integers(5, len(tokens), size=(1, 8)).astype(np.int32)
    return run_fresh(_CAUSAL_CHILD, IDS=ids, ENCODERS={name: paths[name] for name in encoders},
                     TASKS={name: paths[name] for name in tasks},
                     TEXT_A=[row[3] for row in rows], TEXT_B=[row[4] for row in rows])


def test_a_left_to_right_model_exports_causal_savedmodels(causal_exports):
    """A later token changes no earlier position in any export of a causal model directory."""
    for name in ("pretrained", "finetuned"):
        assert causal_exports[name]["earlier"] < 1e-6, name
        assert causal_exports[name]["later"] > 1e-4, name
    assert causal_exports["pretrained"]["mlm_earlier"] < 1e-6
    assert causal_exports["pretrained"]["mlm_later"] > 1e-4
    # The same weights exported bidirectionally: earlier positions see the change.
    assert causal_exports["pretrained_bidirectional"]["earlier"] > 1e-4
    # A raw-text classifier reads [CLS], the first position: causal, it sees only itself, so
    # every pair gets the same probabilities; the bidirectional twin's differ between pairs.
    assert causal_exports["task"] < 1e-6
    assert causal_exports["task_bidirectional"] > 1e-4
