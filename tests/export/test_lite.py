"""The TensorFlow Lite export (`--kind=lite`): served from raw text in a fresh process that may
not import TensorFlow or Keras, checked against the SavedModel exports of the same directories
(the raw-text task model, the encoder on the in-graph tokenizer's ids) and against bad input."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from helpers.export_helpers import WORDS, tiny_config, word_vocab, write_pretrained_dir

LABELS = ["contradiction", "entailment", "neutral"]


def _texts(seed, count, low, high):
    rng = np.random.default_rng(seed)
    words = [w for w in WORDS if not w.startswith("##")]
    return [" ".join(rng.choice(words, size=int(rng.integers(low, high)))).capitalize()
            for _ in range(count)]


# Bad input: empty, punctuation only, unknown characters only, invalid UTF-8, far longer
# than a window, control characters.
BAD = [b"", b"?!...,;", "\u2603\u2604 \U0001F600".encode(), b"bob \xff\xfe lives\xe2\x82",
       (" ".join(["paris is the capital of france"] * 40)).encode(), b"\x00\x01 \t\n bob"]
TEXT_A = _texts(1, 6, 1, 14) + ["Unaffable CAFÉ naïve über!", "the the the the the the"] + BAD
TEXT_B = _texts(2, 6, 1, 14) + ["", "a " * 40] + BAD[::-1]


def _randomize(model, seed):
    """Larger weights than the initializer's, so that predictions differ from text to text."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        if len(variable.shape) > 1:
            variable.assign(rng.normal(0, 0.2, variable.shape).astype("float32"))
    for variable in model.head.weights:
        scale = 0.0 if len(variable.shape) == 1 else 1.0
        variable.assign(rng.normal(0, scale, variable.shape).astype("float32"))


def _cli(*flags):
    return subprocess.run([sys.executable, os.path.join("tools", "export_savedmodel.py"), *flags],
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                              os.path.abspath(__file__)))),
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    import keras

    from bert_keras.export import export_from_model_dir
    from bert_keras.finetuning import task_models
    from bert_keras.text.vocab import Vocabulary

    root = tmp_path_factory.mktemp("lite")
    tokens = word_vocab()
    result = {"root": root, "pretrained": str(root / "pretrained")}
    write_pretrained_dir(result["pretrained"], tokens, seed=3)
    write_pretrained_dir(str(root / "left_to_right"), tokens, seed=4, causal_attention=True)
    config = tiny_config(len(tokens))
    specs = {"classification": (lambda: task_models.build_classifier(config, num_labels=3),
                                {"task": "glue/mnli", "max_seq_length": 16, "label_names": LABELS}),
             "regression": (lambda: task_models.build_classifier(config, regression=True),
                            {"task": "glue/stsb", "max_seq_length": 24, "label_names": None}),
             "sentence": (lambda: task_models.build_classifier(config, num_labels=2),
                          {"task": "glue/sst2", "max_seq_length": 12, "label_names": ["0", "1"]}),
             "squad": (lambda: task_models.build_span_model(config),
                       {"task": "squad_v1.1", "max_seq_length": 32, "doc_stride": 8,
                        "max_query_length": 8, "max_answer_length": 6, "n_best_size": 20,
                        "label_names": None})}
    for seed, (name, (build, task_config)) in enumerate(specs.items()):
        keras.utils.set_random_seed(seed)
        model = build()
        if name != "squad":
            _randomize(model, seed)
        result[name] = str(root / name)
        task_models.save_task_model_dir(model, result[name], config, Vocabulary(tokens), True,
                                        task_config)
    for name in ("classification", "regression", "sentence"):
        export_from_model_dir("lite", result[name], str(root / f"{name}_lite"))
    export_from_model_dir("lite", result["classification"], str(root / "classification_int8"),
                          dtype="int8")
    export_from_model_dir("lite", str(root / "left_to_right"), str(root / "left_to_right_lite"))
    # The encoder through the command line, at a window shorter than the default.
    result["cli"] = _cli(f"--model_dir={result['pretrained']}", "--kind=lite",
                         f"--export_dir={root / 'pretrained_lite'}", "--seq_length=20")
    return result


_CHILD = textwrap.dedent('''
    import importlib.abc, json, pickle, sys

    class _Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("tensorflow", "keras", "tensorflow_text", "jax", "torch"):
                raise ImportError(f"{name} may not be imported in this process")

    sys.meta_path.insert(0, _Refuse())
    from bert_keras.export.lite import LiteModel

    root, text_a, text_b = pickle.loads(bytes.fromhex(sys.argv[1]))
    results = {}
    for name in ("classification", "regression"):
        model = LiteModel(f"{root}/{name}_lite")
        results[name] = model(text_a, text_b)
        results[name + "_one_by_one"] = [model(a, b) for a, b in zip(text_a, text_b)]
        results[name + "_empty"] = model([], [])
    results["sentence"] = LiteModel(f"{root}/sentence_lite")(text_a)
    int8 = LiteModel(f"{root}/classification_int8")
    results["int8"] = int8(text_a, text_b)
    results["int8_tensor_dtypes"] = sorted({str(detail["dtype"].__name__) for detail in
                                            int8._runner._interpreter.get_tensor_details()})
    encoder = LiteModel(f"{root}/pretrained_lite", num_threads=1)
    results["encoder"] = encoder(text_a)
    results["encoder_pairs"] = encoder(text_a, text_b)
    results["encoder_features"] = encoder.features(text_a, text_b)
    results["encoder_single_features"] = encoder.features(text_a)
    causal = LiteModel(f"{root}/left_to_right_lite")
    results["left_to_right"] = [causal(["bob lives in " + city])["sequence_output"][0]
                                for city in ("paris", "london")]
    results["modules"] = sorted(name for name in sys.modules
                                if name.split(".")[0] in ("tensorflow", "keras"))
    sys.stdout.write(pickle.dumps(results).hex())
''')


@pytest.fixture(scope="module")
def served(dirs):
    import pickle

    assert dirs["cli"].returncode == 0, dirs["cli"].stderr[-3000:]
    argument = pickle.dumps((str(dirs["root"]), TEXT_A, TEXT_B)).hex()
    process = subprocess.run([sys.executable, "-c", _CHILD, argument], capture_output=True,
                             text=True, timeout=600, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert process.returncode == 0, process.stderr[-4000:]
    return pickle.loads(bytes.fromhex(process.stdout))


def _task_outputs(model_dir, text_a, text_b=None):
    import tensorflow as tf

    from bert_keras.export.task_export import build_task_module

    serve = build_task_module(model_dir, xla_batch_1=False).serving_default
    inputs = {"text_a": tf.constant(text_a, tf.string)}
    if text_b is not None:
        inputs["text_b"] = tf.constant(text_b, tf.string)
    return {name: value.numpy() for name, value in serve(**inputs).items()}


def test_lite_serves_without_tensorflow_and_the_command_line_says_what_it_wrote(dirs, served):
    assert served["modules"] == []
    assert "wrote lite TensorFlow Lite export" in dirs["cli"].stdout
    from bert_keras.export import read_export_info

    info = read_export_info(dirs["root"] / "pretrained_lite")
    assert info["kind"] == "lite" and info["dtype"] == "float32"
    assert info["model_dir"] == os.path.abspath(dirs["pretrained"])
    with open(dirs["root"] / "pretrained_lite" / "lite_config.json", encoding="utf-8") as f:
        assert json.load(f)["seq_length"] == 20


def test_classifier_and_regressor_match_the_raw_text_savedmodel(dirs, served):
    expected = _task_outputs(dirs["classification"], TEXT_A, TEXT_B)
    got = served["classification"]
    np.testing.assert_allclose(got["logits"], expected["logits"], atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(got["probabilities"], expected["probabilities"], atol=1e-5)
    assert got["label_id"].tolist() == expected["label_id"].tolist()
    assert got["label_name"].tolist() == [name.decode() for name in expected["label_name"]]
    # The texts are told apart: the comparison is not of one constant row.
    assert np.ptp(got["logits"], axis=0).max() > 1e-2
    for index, one in enumerate(served["classification_one_by_one"]):
        np.testing.assert_allclose(one["logits"][0], got["logits"][index], atol=1e-4)

    expected = _task_outputs(dirs["regression"], TEXT_A, TEXT_B)
    np.testing.assert_allclose(served["regression"]["score"], expected["score"], atol=1e-4,
                               rtol=1e-4)
    assert np.std(served["regression"]["score"]) > 1e-3
    expected = _task_outputs(dirs["sentence"], TEXT_A)
    np.testing.assert_allclose(served["sentence"]["logits"], expected["logits"], atol=1e-4,
                               rtol=1e-4)
    assert served["classification_empty"]["logits"].shape == (0, 3)
    assert served["regression_empty"]["score"].shape == (0,)


def test_int8_weights_stay_close_to_the_float32_model(dirs, served):
    from bert_keras.export import read_export_info

    assert read_export_info(dirs["root"] / "classification_int8")["dtype"] == "int8"
    assert "int8" in served["int8_tensor_dtypes"]  # quantized weights are stored
    float32, int8 = served["classification"]["logits"], served["int8"]["logits"]
    difference = np.abs(int8 - float32).max()
    assert 0 < difference <= 0.1 * np.abs(float32).max()
    agree = np.mean(served["int8"]["label_id"] == served["classification"]["label_id"])
    assert agree >= 0.8, agree


def test_encoder_reads_the_in_graph_tokenizers_ids_and_matches_the_encoder_export(dirs, served):
    import tensorflow as tf

    from bert_keras.export.encoder_export import build_encoder_module
    from bert_keras.export.preprocessor_export import build_tokenizer
    from bert_keras.modeldir import model_dir as model_dir_lib

    features = served["encoder_features"]
    ids = build_tokenizer(dirs["pretrained"]).tokenize(tf.constant(TEXT_A + TEXT_B))
    ids = ids.merge_dims(1, 2).to_list()
    for row, (a, b) in enumerate(zip(ids[:len(TEXT_A)], ids[len(TEXT_A):])):
        length = int(features["input_mask"][row].sum())
        packed = features["input_word_ids"][row, :length].tolist()
        types = features["input_type_ids"][row, :length].tolist()
        first = types.index(1) if 1 in types else length
        assert packed[0] == 2 and packed[first - 1] == 3 and packed[-1] == 3  # [CLS], [SEP]
        kept_a, kept_b = packed[1:first - 1], packed[first:-1]
        assert kept_a == a[:len(kept_a)] and kept_b == b[:len(kept_b)]
        # Cut only when the pair is too long (20 positions): the longer text loses its end.
        assert length <= 20
        if len(a) + len(b) + 3 <= 20:
            assert (kept_a, kept_b) == (a, b)

    config = model_dir_lib.read_config(dirs["pretrained"])
    module = build_encoder_module(config, model_dir_lib.read_weights(dirs["pretrained"]),
                                  with_mlm=False, xla_batch_1=False)
    for name, inputs in (("encoder", served["encoder_single_features"]),
                         ("encoder_pairs", served["encoder_features"])):
        got = served[name]
        expected = module({key: tf.constant(value) for key, value in inputs.items()})
        mask = inputs["input_mask"].astype(bool)
        assert got["input_mask"].tolist() == inputs["input_mask"].tolist()
        np.testing.assert_allclose(got["pooled_output"], expected["pooled_output"].numpy(),
                                   atol=1e-5)
        np.testing.assert_allclose(got["sequence_output"][mask],
                                   expected["sequence_output"].numpy()[mask], atol=1e-5)
        assert not got["sequence_output"][~mask].any()  # zeros at padding, as the export


def test_a_left_to_right_model_stays_left_to_right(served):
    paris, london = served["left_to_right"]  # [CLS] bob lives in <city> [SEP]
    assert np.abs(paris[:4] - london[:4]).max() < 1e-6
    assert np.abs(paris[4:] - london[4:]).max() > 1e-3


def test_heads_without_a_lite_export_and_other_dtypes_are_refused(dirs, tmp_path):
    from bert_keras.export import export_from_model_dir, export_many
    from bert_keras.export.lite import LiteExportError, LiteModel

    with pytest.raises(LiteExportError, match="head 'span' has no lite export"):
        export_from_model_dir("lite", dirs["squad"], str(tmp_path / "squad_lite"))
    assert not (tmp_path / "squad_lite").exists()
    with pytest.raises(ValueError, match="--dtype: int8 is for --kind=lite only"):
        export_from_model_dir("encoder", dirs["pretrained"], str(tmp_path / "e"), dtype="int8")
    with pytest.raises(ValueError, match="--dtype: a lite export is float32 or int8"):
        export_many([dict(kind="lite", model_dir=dirs["pretrained"],
                          export_dir=str(tmp_path / "x"), dtype="bfloat16")])
    with pytest.raises(LiteExportError, match="--seq_length: 500"):
        export_from_model_dir("lite", dirs["pretrained"], str(tmp_path / "y"), seq_length=500)
    with pytest.raises(LiteExportError, match="not a lite export"):
        LiteModel(dirs["pretrained"])
    classifier = LiteModel(dirs["root"] / "classification_lite")
    with pytest.raises(LiteExportError, match="takes text pairs; text_b missing"):
        classifier(["bob"])
    with pytest.raises(LiteExportError, match="text_b has 1 texts, text_a 2"):
        classifier(["bob", "alice"], ["paris"])
    with pytest.raises(LiteExportError, match="takes one text; got text_b"):
        LiteModel(dirs["root"] / "sentence_lite")(["bob"], ["alice"])
    # A lite export replaces an earlier one; any other non-empty directory is refused.
    export_from_model_dir("lite", dirs["sentence"], str(dirs["root"] / "sentence_lite"))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="--export_dir"):
        export_from_model_dir("lite", dirs["sentence"], str(tmp_path / "other"))
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"
