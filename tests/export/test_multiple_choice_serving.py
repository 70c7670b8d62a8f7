"""The raw-text SWAG export: a fine-tuned multiple-choice model served from the fields of SWAG
CSV rows, reloaded in a process that cannot import bert_keras, checked against the SWAG task's own
features (`bert_keras.finetuning.task.SwagFinetuning`) and the fine-tuned Keras model."""

import csv

import numpy as np
import pytest

from helpers.export_helpers import run_fresh
from helpers.finetuning_fixtures import fixture, read_lines, tiny_model_dir

SEQ = 20  # short enough that some (context, ending) pairs of the fixture must be truncated
FEATURES = ("input_word_ids", "input_mask", "input_type_ids")
# A row with an empty sent2 and an empty ending: sentence B is then the other one alone.
EXTRA_TEST_ROW = "1,lsmdc_fixture_05,1,The boy sits.,The boy sits.,,gen,He sings.,,eats the cake.,runs.\n"
BAD = [b"", b"?!...,;", "\u2603\u2604 \U0001F600".encode(), b"bob \xff\xfe sits\xe2\x82",
       (" ".join(["the boy kicks the ball"] * 100)).encode(), b"\x00\x01 \t\n the"]


def _csv_fields(paths):
    """sent1, sent2 [rows] and endings [rows, 4] of SWAG CSV files, read with `csv` alone."""
    rows = []
    for path in paths:
        with open(path, newline="", encoding="utf-8") as f:
            rows += list(csv.DictReader(f))
    return {"sent1": [row["sent1"] for row in rows], "sent2": [row["sent2"] for row in rows],
            "endings": [[row[f"ending{k}"] for k in range(4)] for row in rows]}


def _task_features(data, model_dir, max_seq_length):
    """The SWAG task's own features of dev then test: int32 [rows, 4, max_seq_length]."""
    from bert_keras.finetuning.task import FinetuningOptions, get_task

    task = get_task("swag", data, model_dir, FinetuningOptions(max_seq_length=max_seq_length))
    splits = [task.load("dev"), task.load("test")]
    return {name: np.concatenate([split.inputs[name] for split in splits]) for name in FEATURES}


@pytest.fixture(scope="module")
def swag(tmp_path_factory):
    from bert_keras.export import task_export
    from bert_keras.finetuning.run import run_finetuning
    from bert_keras.finetuning.task_models import load_task_model

    root = tmp_path_factory.mktemp("swag_export")
    data = root / "data"
    data.mkdir()
    val = fixture("swag", "val.csv")
    (data / "train.csv").write_text("\n".join(read_lines(val)) + "\n", encoding="utf-8")
    (data / "val.csv").write_text("\n".join(read_lines(val)) + "\n", encoding="utf-8")
    test_lines = read_lines(fixture("swag", "test.csv"))
    (data / "test.csv").write_text("\n".join(test_lines) + "\n" + EXTRA_TEST_ROW, encoding="utf-8")
    init = tiny_model_dir(root, [str(data / "val.csv"), str(data / "test.csv")])
    finetuned = str(root / "finetuned")
    run_finetuning("swag", str(data), init, finetuned, learning_rate=1e-3, train_batch_size=1,
                   num_train_epochs=4, max_seq_length=SEQ, verbose=0, save_checkpoints=False)

    module = task_export.build_task_module(finetuned)
    export_dir = task_export.save_task_module(module, str(root / "export"))
    fields = _csv_fields([str(data / "val.csv"), str(data / "test.csv")])
    model, task_config = load_task_model(finetuned)
    return {"module": module, "export_dir": export_dir, "fields": fields, "model": model,
            "task_config": task_config, "features": _task_features(str(data), finetuned, SEQ),
            "untruncated": _task_features(str(data), finetuned, 64)}


_CHILD = '''
obj = tf.saved_model.load(EXPORT_DIR)
serve = obj.signatures["serving_default"]

def run(sent1, sent2, endings):
    endings = tf.reshape(tf.constant(endings, tf.string), [-1, 4])
    out = serve(sent1=tf.constant(sent1, tf.string), sent2=tf.constant(sent2, tf.string),
                endings=endings)
    return {k: v.numpy() for k, v in out.items()}

results["rows"] = run(**FIELDS)
results["bad"] = run(BAD, BAD[::-1], [[text, b"", text, b"?"] for text in BAD])
results["empty"] = run([], [], [])
try:
    run(BAD[:2], BAD[:1], [[text, b"", text, b"?"] for text in BAD[:2]])
    results["mismatch"] = None
except Exception as error:
    results["mismatch"] = f"{type(error).__name__}: {error}"
results["specs"] = (
    sorted((k, s.dtype.name, s.shape.as_list())
           for k, s in serve.structured_input_signature[1].items()),
    sorted((k, s.dtype.name, s.shape.as_list()) for k, s in serve.structured_outputs.items()))
results["op_types"] = graph_op_types(serve)
results["seq_length"] = int(obj.seq_length.numpy())
'''


@pytest.fixture(scope="module")
def loaded(swag):
    return run_fresh(_CHILD, EXPORT_DIR=swag["export_dir"], FIELDS=swag["fields"], BAD=BAD)


def test_features_are_the_swag_tasks_own_including_truncated_pairs(swag):
    import tensorflow as tf

    fields = swag["fields"]
    encoded = swag["module"].encode(tf.constant(fields["sent1"]), tf.constant(fields["sent2"]),
                                    tf.constant(fields["endings"]))
    for name in FEATURES:
        np.testing.assert_array_equal(encoded[name].numpy(), swag["features"][name], err_msg=name)
    # Some pairs need truncation at SEQ (they are longer at 64), others fit.
    lengths = swag["untruncated"]["input_mask"].sum(-1)  # [rows, 4]
    assert (lengths > SEQ).any() and (lengths <= SEQ).any()
    assert (swag["features"]["input_mask"].sum(-1)[lengths > SEQ] == SEQ).all()


def test_scores_equal_the_keras_model_on_the_tasks_features(swag, loaded):
    logits = swag["model"](swag["features"]).numpy()  # [rows, 4]
    got = loaded["rows"]
    assert got["logits"].shape == logits.shape == (len(swag["fields"]["sent1"]), 4)
    assert np.abs(got["logits"] - logits).max() <= 1e-5
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    assert np.abs(got["probabilities"] - probabilities).max() <= 1e-5
    np.testing.assert_array_equal(got["label_id"], logits.argmax(-1))
    # Not a degenerate check: the endings of a row get clearly different scores.
    assert (logits.max(-1) - logits.min(-1)).min() > 1e-3
    # The in-memory module is the exported one.
    import tensorflow as tf

    fields = swag["fields"]
    in_memory = swag["module"].serving_default(
        sent1=tf.constant(fields["sent1"]), sent2=tf.constant(fields["sent2"]),
        endings=tf.constant(fields["endings"]))
    for name, value in in_memory.items():
        assert np.abs(value.numpy() - got[name]).max() <= 1e-5, name


def test_signature_names_dtypes_and_graph(loaded):
    inputs, outputs = loaded["specs"]
    assert inputs == [("endings", "string", [None, 4]), ("sent1", "string", [None]),
                      ("sent2", "string", [None])]
    assert outputs == [("label_id", "int32", [None]), ("logits", "float32", [None, 4]),
                       ("probabilities", "float32", [None, 4])]
    assert loaded["seq_length"] == SEQ
    types = set(loaded["op_types"])
    assert not {"PyFunc", "EagerPyFunc", "PyFuncStateless"} & types
    assert any("Wordpiece" in op for op in types)  # the tokenizer is inside


def test_bad_input_gives_valid_outputs(loaded):
    bad = loaded["bad"]
    assert bad["logits"].shape == bad["probabilities"].shape == (len(BAD), 4)
    assert np.isfinite(bad["logits"]).all()
    np.testing.assert_allclose(bad["probabilities"].sum(-1), 1.0, atol=1e-5)
    assert set(bad["label_id"].tolist()) <= {0, 1, 2, 3}
    empty = loaded["empty"]
    assert empty["logits"].shape == (0, 4) and empty["label_id"].shape == (0,)


def test_inputs_of_different_batch_sizes_are_refused_by_name(loaded):
    message = loaded["mismatch"]
    assert message and message.startswith("InvalidArgumentError"), message
    assert "sent1 and sent2 must have the same batch size (one sent2 per sent1)" in message
