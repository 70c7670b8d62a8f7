"""Every export gives the same answers on every CPU: oneDNN on and off.

TensorFlow turns oneDNN on by itself on CPUs with AVX-512 VNNI/bf16 or AMX, and Grappler's
oneDNN fusions then change the graph that runs (docs/export.md, "Same answers on every CPU").
For each setting, `TF_ENABLE_ONEDNN_OPTS=1` and `=0`, one child process exports every kind from
the same model directories (preprocessor, encoder with `.mlm`, raw-text classifier, lite) and
serves the lite export; a fresh child without bert_keras loads and serves the SavedModels,
also through `keras.layers.TFSMLayer` as fine-tuning from an export does. Each text's outputs,
alone, in a batch of two and in a batch of mixed lengths, must equal the Keras model's on that
text alone within 1e-5. The suite's header names the CPU's flags and what this machine cannot
exercise (tests/conftest.py).
"""

import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from helpers.export_helpers import (REPO_ROOT, WORDS, finetuning_tokenizer, run_fresh, tiny_config,
                            word_vocab, write_pretrained_dir)

SETTINGS = ("1", "0")  # TF_ENABLE_ONEDNN_OPTS
TOLERANCE = 1e-5
SEQ_LENGTH = 32  # the classifier's window (the preprocessor packs 64)
LABELS = ["contradiction", "entailment", "neutral"]


def _texts(seed, lengths):
    rng = np.random.default_rng(seed)
    words = [w for w in WORDS if not w.startswith("##")]
    return [" ".join(rng.choice(words, size=length)).capitalize() + "." for length in lengths]


# Mixed lengths: a batch of them has padding in every row but the longest.
TEXT_A = _texts(0, (3, 17, 1, 9, 24, 6))
TEXT_B = _texts(1, (5, 2, 11, 1, 4, 8))


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    import keras

    from bert_keras.finetuning import task_models
    from bert_keras.text.vocab import Vocabulary

    root = tmp_path_factory.mktemp("every_cpu")
    tokens = word_vocab()
    dirs = {"root": root, "tokens": tokens, "pretrained": str(root / "pretrained"),
            "classifier": str(root / "classifier")}
    config = write_pretrained_dir(dirs["pretrained"], tokens, seed=5)
    keras.utils.set_random_seed(6)
    model = task_models.build_classifier(tiny_config(len(tokens)), num_labels=3)
    rng = np.random.default_rng(6)
    for variable in model.weights:  # weights large enough that texts get different answers
        if len(variable.shape) > 1:
            variable.assign(rng.normal(0, 0.2, variable.shape).astype("float32"))
    for variable in model.head.weights:
        scale = 0.0 if len(variable.shape) == 1 else 2.0
        variable.assign(rng.normal(0, scale, variable.shape).astype("float32"))
    task_models.save_task_model_dir(model, dirs["classifier"], config, Vocabulary(tokens), True,
                                    {"task": "glue/mnli", "max_seq_length": SEQ_LENGTH,
                                     "label_names": LABELS})
    return dirs


def _encoder_inputs(tokens, texts):
    """[CLS] text [SEP] ids of each text alone, from the original tokenizer's Python twin."""
    import tempfile

    from bert_keras.text.python_tokenizer import PythonBertTokenizer

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")
    try:
        tokenizer = PythonBertTokenizer(f.name, lower_case=True)
    finally:
        os.unlink(f.name)
    cls_id, sep_id = tokens.index("[CLS]"), tokens.index("[SEP]")
    return [[cls_id] + tokenizer.tokenize(text) + [sep_id] for text in texts]


def _positions(length):
    return [1, length - 2]


@pytest.fixture(scope="module")
def reference(model_dirs):
    """The Keras models' outputs on each text alone, at its own length, in this process."""
    from bert_keras.export.encoder_export import build_keras_models
    from bert_keras.finetuning.task_models import load_task_model
    from bert_keras.finetuning.tasks import encoding
    from bert_keras.modeldir import model_dir as model_dir_lib

    config = model_dir_lib.read_config(model_dirs["pretrained"])
    encoder, mlm_head = build_keras_models(config, model_dir_lib.read_weights(
        model_dirs["pretrained"]), with_mlm=True)
    result = {"ids": _encoder_inputs(model_dirs["tokens"], TEXT_A), "encoder": []}
    for ids in result["ids"]:
        features = {"input_word_ids": np.array([ids], np.int32),
                    "input_mask": np.ones((1, len(ids)), np.int32),
                    "input_type_ids": np.zeros((1, len(ids)), np.int32)}
        outputs = encoder(features, training=False)
        logits = mlm_head(outputs["sequence_output"], np.array([_positions(len(ids))], np.int32))
        result["encoder"].append({"pooled_output": np.asarray(outputs["pooled_output"])[0],
                                  "sequence_output": np.asarray(outputs["sequence_output"])[0],
                                  "mlm_logits": np.asarray(logits)[0]})
    model, _ = load_task_model(model_dirs["classifier"])
    tokenizer = finetuning_tokenizer(model_dirs["tokens"], model_dirs["root"])
    tokenizer.prepare(TEXT_A + TEXT_B)
    probabilities = []
    for a, b in zip(TEXT_A, TEXT_B):
        features = encoding.encode_texts([a], [b], tokenizer.tokenize_word, model_dirs["tokens"],
                                         max_seq_length=SEQ_LENGTH)
        length = int(features["input_mask"].sum())
        logits = np.asarray(model({k: v[:, :length] for k, v in features.items()},
                                  training=False))[0]
        probabilities.append(np.exp(logits) / np.exp(logits).sum())
    result["probabilities"] = np.array(probabilities)
    assert np.ptp(result["probabilities"].argmax(-1)) > 0, "degenerate: one label for every pair"
    return result


_EXPORT_CHILD = textwrap.dedent('''
    import os, pickle, sys
    from bert_keras.export import export_from_model_dir
    from bert_keras.export.lite import LiteModel

    root, pretrained, classifier, text_a, text_b = pickle.loads(bytes.fromhex(sys.argv[1]))
    export_from_model_dir("preprocessor", pretrained, f"{root}/preprocessor", seq_length=64)
    export_from_model_dir("encoder", pretrained, f"{root}/encoder")
    export_from_model_dir("task", classifier, f"{root}/classifier_task")
    export_from_model_dir("lite", classifier, f"{root}/classifier_lite")
    lite = LiteModel(f"{root}/classifier_lite")
    results = {"batch": lite(text_a, text_b)["probabilities"],
               "two": lite(text_a[:2], text_b[:2])["probabilities"],
               "alone": [lite([a], [b])["probabilities"][0] for a, b in zip(text_a, text_b)]}
    sys.stdout.write(pickle.dumps(results).hex())
''')

_SERVE_CHILD = '''
import keras

preprocessor = tf.saved_model.load(ROOT + "/preprocessor")
encoder = tf.saved_model.load(ROOT + "/encoder")
features = {k: v.numpy() for k, v in preprocessor(tf.constant(TEXT_A)).items()}
results["features"] = features

def encoder_outputs(rows):
    inputs = {k: tf.constant(v[rows]) for k, v in features.items()}
    lengths = features["input_mask"][rows].sum(1)
    positions = tf.constant([[1, n - 2] for n in lengths], tf.int32)
    call = encoder(inputs, training=False)
    signature = encoder.signatures["serving_default"](**inputs)
    mlm = encoder.mlm(dict(inputs, masked_lm_positions=positions), training=False)
    served = encoder.serve(inputs)
    layer = keras.layers.TFSMLayer(ROOT + "/encoder", call_endpoint="serve")(inputs)
    out = {}
    for name, outputs in (("call", call), ("serving_default", signature), ("serve", served),
                          ("mlm", mlm), ("tfsm_layer", layer)):
        out[name] = {k: outputs[k].numpy() for k in ("pooled_output", "sequence_output")}
    out["mlm"]["mlm_logits"] = mlm["mlm_logits"].numpy()
    return out

count = len(TEXT_A)
results["encoder"] = {"batch": encoder_outputs(list(range(count))),
                      "two": encoder_outputs([0, 1]),
                      "alone": [encoder_outputs([i]) for i in range(count)]}
task = tf.saved_model.load(ROOT + "/classifier_task").signatures["serving_default"]
def probabilities(a, b):
    return task(text_a=tf.constant(a), text_b=tf.constant(b))["probabilities"].numpy()
results["task"] = {"batch": probabilities(TEXT_A, TEXT_B),
                   "two": probabilities(TEXT_A[:2], TEXT_B[:2]),
                   "alone": [probabilities([a], [b])[0] for a, b in zip(TEXT_A, TEXT_B)]}
'''


@pytest.fixture(scope="module", params=SETTINGS, ids=lambda value: f"onednn={value}")
def served(request, model_dirs, tmp_path_factory):
    """{"setting", "lite", and the fresh process's results} for one oneDNN setting."""
    root = tmp_path_factory.mktemp(f"onednn_{request.param}")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS=request.param)
    argument = pickle.dumps((str(root), model_dirs["pretrained"], model_dirs["classifier"],
                             TEXT_A, TEXT_B)).hex()
    process = subprocess.run([sys.executable, "-c", _EXPORT_CHILD, argument], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=900, env=env)
    assert process.returncode == 0, process.stderr[-6000:]
    result = run_fresh(_SERVE_CHILD, timeout=900,
                       extra_env={"TF_ENABLE_ONEDNN_OPTS": request.param},
                       ROOT=str(root), TEXT_A=TEXT_A, TEXT_B=TEXT_B)
    result["lite"] = pickle.loads(bytes.fromhex(process.stdout))
    result["setting"] = request.param
    return result


def _close(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    difference = np.abs(got - want).max(initial=0.0)
    assert difference <= TOLERANCE * max(1.0, np.abs(want).max()), f"{what}: differs by {difference}"


def test_the_preprocessor_gives_the_original_ids(served, reference):
    features = served["features"]
    for row, ids in enumerate(reference["ids"]):
        length = int(features["input_mask"][row].sum())
        assert features["input_word_ids"][row, :length].tolist() == ids, TEXT_A[row]
        assert not features["input_word_ids"][row, length:].any()


def test_the_encoder_savedmodel_equals_keras_alone_in_pairs_and_in_mixed_batches(served, reference):
    setting = f"TF_ENABLE_ONEDNN_OPTS={served['setting']}"
    count = len(TEXT_A)
    encoder = served["encoder"]
    for batch_name, rows, outputs in [("batch", range(count), encoder["batch"]),
                                      ("two", range(2), encoder["two"])] + [
            ("alone", [row], encoder["alone"][row]) for row in range(count)]:
        for endpoint, values in outputs.items():
            assert values["pooled_output"].shape[0] == len(rows), (
                f"{setting}, {endpoint}, {batch_name}: pooled_output has shape "
                f"{values['pooled_output'].shape} for {len(rows)} texts")
            for index, row in enumerate(rows):
                want = reference["encoder"][row]
                length = len(reference["ids"][row])
                what = f"{setting}, {endpoint}, {batch_name}, text {row}"
                _close(values["pooled_output"][index], want["pooled_output"], what + " pooled")
                sequence = values["sequence_output"][index]
                _close(sequence[:length], want["sequence_output"], what + " sequence")
                assert not sequence[length:].any(), what + ": padding positions are not zero"
                if endpoint == "mlm":
                    _close(values["mlm_logits"][index], want["mlm_logits"], what + " mlm_logits")


def test_the_raw_text_classifier_and_the_lite_export_equal_keras(served, reference):
    setting = f"TF_ENABLE_ONEDNN_OPTS={served['setting']}"
    want = reference["probabilities"]
    for name in ("task", "lite"):
        outputs = served[name]
        _close(outputs["batch"], want, f"{setting}, {name}, batch")
        _close(outputs["two"], want[:2], f"{setting}, {name}, two")
        _close(np.array(outputs["alone"]), want, f"{setting}, {name}, alone")
