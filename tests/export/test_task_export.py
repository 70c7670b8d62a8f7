"""Raw-text task SavedModels: classification, regression, SQuAD v2.0 and NER, reloaded in a
process that cannot import bert_keras, checked against the project's pure-Python fine-tuning
pipeline (tokenizer, packing, windows, post-processing) and against bad input."""

import numpy as np
import pytest

from helpers.export_helpers import WORDS, run_fresh, tiny_config, word_vocab

NER_LABELS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def _sentence(rng, low, high):
    words = [w for w in WORDS if not w.startswith("##")]
    text = " ".join(rng.choice(words, size=int(rng.integers(low, high))))
    return text.replace(" .", ".").replace(" ,", ",").capitalize()


def _texts(seed, count, low, high):
    rng = np.random.default_rng(seed)
    return [_sentence(rng, low, high) for _ in range(count)]


# Bad input for every kind: empty, only punctuation, only unknown characters, invalid UTF-8,
# far longer than a window, control characters.
BAD = [b"", b"?!...,;", "\u2603\u2604 \U0001F600".encode(), b"bob \xff\xfe lives\xe2\x82",
       (" ".join(["paris is the capital of france"] * 400)).encode(), b"\x00\x01 \t\n bob"]

CLASSIFY_A = _texts(1, 6, 2, 14) + ["Unaffable CAFÉ naïve über!", "the the the the the the"]
CLASSIFY_B = _texts(2, 6, 2, 14) + ["", "a " * 40]
CONTEXTS = _texts(3, 4, 20, 60) + ["Bob lives in Paris, the capital of France.", ""]
QUESTIONS = _texts(4, 4, 2, 8) + ["Who lives in Paris?", "Who?"]
NER_TEXTS = [t.title() for t in _texts(5, 5, 3, 30)] + ["John lives in New York and works at Google."]


def _randomize_head(model, seed):
    """Large random head weights, so that predictions differ from row to row."""
    from helpers.export_helpers import _perturb_zero_weights

    from bert_keras.finetuning.task_models import task_weight_map

    _perturb_zero_weights(task_weight_map(model), seed)
    rng = np.random.default_rng(seed)
    # Larger encoder weights than the 0.02 initializer, so that [CLS] depends on the text.
    for name, variable in task_weight_map(model).items():
        if name.endswith(("/kernel", "_embeddings")) and name.startswith("bert/"):
            variable.assign(rng.normal(0, 0.2, variable.shape).astype("float32"))
    for variable in model.head.weights:
        scale = 0.0 if len(variable.shape) == 1 else 1.0  # biases 0
        variable.assign(rng.normal(0, scale, variable.shape).astype("float32"))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    import keras

    from bert_keras.export import task_export
    from bert_keras.finetuning import task_models
    from bert_keras.text.vocab import Vocabulary

    root = tmp_path_factory.mktemp("task_export")
    vocab = Vocabulary(word_vocab())
    config = tiny_config(len(vocab))
    specs = {
        "classification": (lambda: task_models.build_classifier(config, num_labels=3),
                           {"task": "glue/mnli", "max_seq_length": 16,
                            "label_names": ["contradiction", "entailment", "neutral"]}),
        "regression": (lambda: task_models.build_classifier(config, regression=True),
                       {"task": "glue/stsb", "max_seq_length": 16, "label_names": None}),
        "squad": (lambda: task_models.build_span_model(config),
                  {"task": "squad_v2", "max_seq_length": 32, "doc_stride": 8,
                   "max_query_length": 8, "max_answer_length": 6, "n_best_size": 20,
                   "version_2_with_negative": True, "null_score_diff_threshold": 0.5,
                   "label_names": None}),
        "ner": (lambda: task_models.build_token_tagger(config, num_labels=len(NER_LABELS)),
                {"task": "conll2003", "max_seq_length": 12, "label_names": NER_LABELS,
                 "tagging_scheme": "first_wordpiece"}),
    }
    result = {"root": root, "vocab": vocab, "modules": {}, "models": {}, "task_configs": {}}
    for seed, (name, (build, task_config)) in enumerate(specs.items()):
        keras.utils.set_random_seed(seed)
        model = build()
        _randomize_head(model, seed)
        model_dir = str(root / f"{name}_model")
        full_config = task_models.save_task_model_dir(model, model_dir, config, vocab, True,
                                                      task_config)
        # Enough windows for the reference texts; the long bad input is cut.
        module = task_export.build_task_module(model_dir, max_windows=16 if name == "squad" else 8,
                                               xla_batch_1=True)
        task_export.save_task_module(module, str(root / name))
        result["modules"][name] = module
        result["models"][name] = model
        result["task_configs"][name] = full_config
    return result


_CHILD = '''
import time

def run(name, **inputs):
    fn = SIGNATURES[name]
    out = fn(**{k: tf.constant(v, tf.string) for k, v in inputs.items()})
    return {k: v.numpy() for k, v in out.items()}

SIGNATURES, results["load_seconds"], results["specs"] = {}, {}, {}
for name in NAMES:
    start = time.perf_counter()
    obj = tf.saved_model.load(ROOT + "/" + name)
    results["load_seconds"][name] = time.perf_counter() - start
    SIGNATURES[name] = obj.signatures["serving_default"]
    signature = SIGNATURES[name]
    results.setdefault("op_types", {})[name] = graph_op_types(signature)
    results.setdefault("xla_calls", {})[name] = xla_compiled_calls(signature)
    results.setdefault("weight_variables", {})[name] = [
        v.name for v in obj.variables if v.dtype.is_floating and v.shape.num_elements() > 1]
    results.setdefault("constant_bytes", {})[name] = sum(
        op.get_attr("value").ByteSize() for op in signature.graph.get_operations()
        if op.type == "Const") + sum(
        node.attr["value"].tensor.ByteSize() for function in signature.graph.as_graph_def().library.function
        for node in function.node_def if node.op == "Const")
    results["specs"][name] = (
        sorted((k, s.dtype.name) for k, s in signature.structured_input_signature[1].items()),
        sorted((k, s.dtype.name) for k, s in signature.structured_outputs.items()))
    if name == "classification":
        results["label_names"] = [x.decode() for x in obj.label_names.numpy()]

for name in ("classification", "regression"):
    results[name] = run(name, text_a=CLASSIFY_A, text_b=CLASSIFY_B)
    results[name + "_bad"] = run(name, text_a=BAD, text_b=BAD[::-1])
    results[name + "_empty"] = run(name, text_a=[], text_b=[])
results["squad"] = run("squad", question=QUESTIONS, context=CONTEXTS)
results["squad_bad"] = run("squad", question=BAD, context=BAD[::-1])
results["squad_bad_context"] = run("squad", question=["who"] * len(BAD), context=BAD)
results["squad_empty"] = run("squad", question=[], context=[])
results["ner"] = run("ner", text=NER_TEXTS)
# Batches of one run the XLA-compiled copy of the model.
results["classification_one_by_one"] = [run("classification", text_a=[a], text_b=[b])
                                        for a, b in zip(CLASSIFY_A, CLASSIFY_B)]
results["squad_paris_alone"] = run("squad", question=QUESTIONS[4:5], context=CONTEXTS[4:5])  # one window


def error_of(name, **inputs):
    try:
        run(name, **inputs)
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None


results["classification_one_b_for_two_a"] = error_of(
    "classification", text_a=CLASSIFY_A[:2], text_b=CLASSIFY_B[:1])
results["squad_one_context_for_two_questions"] = error_of(
    "squad", question=QUESTIONS[:2], context=CONTEXTS[:1])
results["ner_bad"] = run("ner", text=BAD)
results["ner_empty"] = run("ner", text=[])
'''


@pytest.fixture(scope="module")
def loaded(exported):
    return run_fresh(_CHILD, ROOT=str(exported["root"]), NAMES=sorted(exported["modules"]),
                     CLASSIFY_A=CLASSIFY_A, CLASSIFY_B=CLASSIFY_B, QUESTIONS=QUESTIONS,
                     CONTEXTS=CONTEXTS, NER_TEXTS=NER_TEXTS, BAD=BAD)


def _in_memory(module, **inputs):
    import tensorflow as tf

    out = module.serving_default(**{k: tf.constant(v, tf.string) for k, v in inputs.items()})
    return {k: v.numpy() for k, v in out.items()}


def _assert_same(got, want):
    assert sorted(got) == sorted(want)
    for key in want:
        if want[key].dtype.kind in "fc":
            assert np.abs(got[key] - want[key]).max(initial=0.0) <= 1e-5, key
        else:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)


def _finetuning_tokenizer(exported, texts):
    """The fine-tuning path's (in-graph) word tokenizer, prepared for `texts`."""
    from helpers.export_helpers import finetuning_tokenizer

    tokenizer = finetuning_tokenizer(exported["vocab"], exported["root"])
    tokenizer.prepare(texts)
    return tokenizer


def _python_pipeline_inputs(exported, text_a, text_b, seq_length):
    from bert_keras.finetuning.tasks import encoding

    tokenizer = _finetuning_tokenizer(exported, list(text_a) + list(text_b or []))
    return encoding.encode_texts(text_a, text_b, tokenizer.tokenize_word, exported["vocab"],
                                 max_seq_length=seq_length)


# ------------------------------------------------------------------------ classification
def test_classification_matches_in_memory_and_python_pipeline(exported, loaded):
    module = exported["modules"]["classification"]
    _assert_same(loaded["classification"],
                 _in_memory(module, text_a=CLASSIFY_A, text_b=CLASSIFY_B))
    # The same ids as fine-tuning's pure-Python packing (original truncation of pairs) ...
    expected = _python_pipeline_inputs(exported, CLASSIFY_A, CLASSIFY_B, 16)
    import tensorflow as tf

    ids = module.encode(tf.constant(CLASSIFY_A), tf.constant(CLASSIFY_B))
    for name in expected:
        np.testing.assert_array_equal(ids[name].numpy(), expected[name], err_msg=name)
    # ... and the fine-tuned Keras model's probabilities on them.
    logits = exported["models"]["classification"](expected).numpy()
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    got = loaded["classification"]
    assert np.abs(got["probabilities"] - probabilities).max() <= 1e-5
    np.testing.assert_array_equal(got["label_id"], logits.argmax(-1))
    names = exported["task_configs"]["classification"]["label_names"]
    assert [x.decode() for x in got["label_name"]] == [names[i] for i in logits.argmax(-1)]
    assert len(set(got["label_id"].tolist())) > 1, "degenerate test: one label for every row"


def test_a_batch_of_short_texts_runs_at_its_own_length(exported):
    import tensorflow as tf

    from bert_keras.export import task_export
    from bert_keras.export.raw_text import cut_to_longest

    root = exported["root"]
    # The classifier's directory exported with windows of 64: these pairs need at most 32.
    module = task_export.build_task_module(str(root / "classification_model"), seq_length=64)
    text_a, text_b = _texts(11, 8, 1, 6), _texts(12, 8, 1, 6)
    features = module.encode(tf.constant(text_a), tf.constant(text_b))
    assert features["input_word_ids"].shape[1] == 64
    longest = int(features["input_mask"].numpy().sum(1).max())
    cut, length = cut_to_longest(features, 64)
    assert 8 < longest <= int(length) < 64 and int(length) % 16 == 0
    assert cut["input_word_ids"].shape[1] == int(length)
    # The outputs are those of the full-length computation.
    full = exported["models"]["classification"](features).numpy()
    got = module.serving_default(text_a=tf.constant(text_a), text_b=tf.constant(text_b))
    assert np.abs(got["logits"].numpy() - full).max() <= 1e-5
    assert len(set(full.argmax(-1).tolist())) > 1, "degenerate test: one label for every row"
    # Whatever the batch, the length stays within the window and covers every real token.
    for texts in ([""], [" ".join(["word"] * 200)]):
        features = module.encode(tf.constant(texts), tf.constant(texts))
        _, length = cut_to_longest(features, 64)
        assert int(features["input_mask"].numpy().sum(1).max()) <= int(length) <= 64


def test_weights_are_variables_and_constants_on_request(exported, loaded):
    """By default the fine-tuned weights are variables of the SavedModel, not constants of its
    graph (a graph of the weights' size made every fresh process's first request seconds
    slower, `test_first_request.py`); `constant_weights=True` folds them into the graph
    (`ConstantWeightsModel`) with the same outputs."""
    import tensorflow as tf

    from bert_keras.export.task_export import build_task_module

    for name, model in exported["models"].items():
        weight_bytes = sum(int(np.prod(v.shape)) * 4 for v in model.weights)
        assert len(loaded["weight_variables"][name]) >= len(model.head.weights), name
        assert loaded["constant_bytes"][name] < weight_bytes / 2, name
    model = exported["models"]["classification"]
    weight_bytes = sum(int(np.prod(v.shape)) * 4 for v in model.weights)
    folded = build_task_module(str(exported["root"] / "classification_model"),
                               constant_weights=True)
    assert [v for v in folded.variables if v.dtype.is_floating] == []
    graph_def = folded.serving_default.get_concrete_function().graph.as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    assert sum(n.attr["value"].tensor.ByteSize() for n in nodes if n.op == "Const") >= weight_bytes
    got = folded.serving_default(text_a=tf.constant(CLASSIFY_A), text_b=tf.constant(CLASSIFY_B))
    _assert_same({k: v.numpy() for k, v in got.items()}, loaded["classification"])


def test_a_batch_of_one_runs_the_xla_compiled_model(exported, loaded):
    """Asked for (`xla_batch_1`), float32 task exports run a batch of one through an
    XLA-compiled copy of the model: the same predictions as in a batch, in a fresh process. By
    default they do not (each new length would compile inside its first request)."""
    from helpers.export_helpers import xla_compiled_calls

    from bert_keras.export.task_export import build_task_module

    assert all(loaded["xla_calls"][name] >= 1 for name in exported["modules"]), loaded["xla_calls"]
    batch = loaded["classification"]
    for row, alone in enumerate(loaded["classification_one_by_one"]):
        assert np.abs(alone["probabilities"][0] - batch["probabilities"][row]).max() <= 1e-5
        assert alone["label_id"][0] == batch["label_id"][row]
    alone, batch = loaded["squad_paris_alone"], loaded["squad"]
    for key in ("answer_text", "answer_start", "answer_end", "has_answer"):
        assert alone[key][0] == batch[key][4], key
    assert np.abs(alone["score"][0] - batch["score"][4]) <= 1e-4
    # Off by request, and never in bfloat16 (XLA's CPU backend has no fast bf16 kernels).
    model_dir = str(exported["root"] / "classification_model")
    for module in (build_task_module(model_dir),
                   build_task_module(model_dir, dtype="bfloat16", xla_batch_1=True)):
        assert xla_compiled_calls(module.serving_default.get_concrete_function()) == 0


def test_regression_score(exported, loaded):
    _assert_same(loaded["regression"], _in_memory(exported["modules"]["regression"],
                                                  text_a=CLASSIFY_A, text_b=CLASSIFY_B))
    expected = _python_pipeline_inputs(exported, CLASSIFY_A, CLASSIFY_B, 16)
    scores = exported["models"]["regression"](expected).numpy()[:, 0]
    assert np.abs(loaded["regression"]["score"] - scores).max() <= 1e-5


# ---------------------------------------------------------------------------------- SQuAD
def _python_squad(exported, version_2, threshold):
    """The fine-tuning path's SQuAD pipeline: features, the Keras model, post-processing."""
    from bert_keras.finetuning.squad import data as squad
    from bert_keras.finetuning.squad import postprocess as squad_postprocess

    config = exported["task_configs"]["squad"]
    articles = [{"title": "t", "paragraphs": [
        {"context": context, "qas": [{"id": str(i), "question": question, "answers": [],
                                       "is_impossible": True}]}]}
        for i, (question, context) in enumerate(zip(QUESTIONS, CONTEXTS)) if context]
    data = squad.squad_data_from_json({"version": "v2.0", "data": articles}, is_training=False,
                                      version_2_with_negative=True)
    tokenizer = _finetuning_tokenizer(exported, list(QUESTIONS) + list(CONTEXTS))
    features = squad.create_squad_features(
        data.examples, tokenizer.tokenize_word, exported["vocab"], max_seq_length=32,
        doc_stride=config["doc_stride"], max_query_length=config["max_query_length"])
    assert len(features) > len(data.examples) + 3, "want contexts of several windows"
    arrays = squad.features_to_arrays(features)
    outputs = exported["models"]["squad"]({k: arrays[k] for k in
                                           ("input_word_ids", "input_mask", "input_type_ids")})
    result = squad_postprocess.postprocess_predictions(
        data.examples, features, outputs["start_logits"].numpy(), outputs["end_logits"].numpy(),
        n_best_size=20, max_answer_length=config["max_answer_length"], do_lower_case=True,
        version_2_with_negative=version_2, null_score_diff_threshold=threshold)
    return data.examples, result


def _check_squad(got, examples, result, version_2):
    answered = 0
    for example in examples:
        i = int(example.qas_id)
        text = got["answer_text"][i].decode()
        assert text == result.predictions[example.qas_id], (i, text)
        if version_2:
            assert abs(got["null_odds"][i] - result.null_odds[example.qas_id]) <= 1e-4
        assert got["has_answer"][i] == bool(text)
        if text:
            answered += 1
            assert CONTEXTS[i][got["answer_start"][i]:got["answer_end"][i]] == text
        else:
            assert got["answer_start"][i] == got["answer_end"][i] == -1
    # An empty context has no answer.
    assert got["answer_text"][-1] == b"" and not got["has_answer"][-1]
    return answered


def test_squad_matches_in_memory_and_original_post_processing(exported, loaded):
    got = loaded["squad"]
    _assert_same(got, _in_memory(exported["modules"]["squad"], question=QUESTIONS,
                                 context=CONTEXTS))
    examples, result = _python_squad(exported, True, 0.5)
    assert _check_squad(got, examples, result, True) > 0


def test_squad_v2_no_answer_wins_and_v1(exported):
    """v2.0 with a threshold below every null odds answers "", v1.1 always answers."""
    from bert_keras.export.task_export import TaskModule

    exported_module = exported["modules"]["squad"]
    special = exported["vocab"].special_ids()
    for version_2, threshold in ((True, -100.0), (False, 0.0)):
        task_config = dict(exported["task_configs"]["squad"], version_2_with_negative=version_2,
                           null_score_diff_threshold=threshold)
        module = TaskModule(exported_module.tokenizer, exported_module._model, task_config,
                            special, 32, max_windows=16)
        got = _in_memory(module, question=QUESTIONS, context=CONTEXTS)
        examples, result = _python_squad(exported, version_2, threshold)
        answered = _check_squad(got, examples, result, version_2)
        assert answered == (0 if version_2 else len(examples))


# ------------------------------------------------------------------------------------ NER
def test_ner_matches_in_memory_and_first_wordpiece_tags(exported, loaded):
    from bert_keras.finetuning.conll import data as conll
    from bert_keras.finetuning.tasks.words import basic_tokenize
    from bert_keras.metrics.conll_eval import extract_chunks

    got = loaded["ner"]
    _assert_same(got, _in_memory(exported["modules"]["ner"], text=NER_TEXTS))
    sentences = [conll.Sentence(basic_tokenize(text, True), []) for text in NER_TEXTS]
    tokenizer = _finetuning_tokenizer(exported, [word for s in sentences for word in s.words])
    features = conll.create_conll_features(sentences, tokenizer.tokenize_word, exported["vocab"],
                                           label_list=NER_LABELS, max_seq_length=12)
    arrays = conll.features_to_arrays(features)
    logits = exported["models"]["ner"]({k: arrays[k] for k in
                                        ("input_word_ids", "input_mask", "input_type_ids")})
    tags = conll.predictions_to_tags(features, logits.numpy().argmax(-1), sentences,
                                     label_list=NER_LABELS)
    total = 0
    for i, (text, sentence, sentence_tags) in enumerate(zip(NER_TEXTS, sentences, tags)):
        chunks = sorted(extract_chunks(sentence_tags), key=lambda chunk: chunk[1])
        count = got["num_entities"][i]
        assert count == len(chunks), (i, chunks)
        total += count
        for k, (kind, first, last) in enumerate(chunks):
            assert got["entity_label"][i, k].decode() == kind
            entity = got["entity_text"][i, k].decode()
            assert entity.lower().replace(" ", "") == "".join(sentence.words[first:last + 1])
            assert text[got["entity_start"][i, k]:got["entity_end"][i, k]] == entity
            assert 0 < got["entity_score"][i, k] <= 1
        assert (got["entity_start"][i, count:] == -1).all()
        assert (got["entity_text"][i, count:] == b"").all()
    assert total > 3


# ------------------------------------------------------------------------ names and bad input
def test_signatures_have_named_inputs_and_fixed_dtypes(loaded):
    specs = loaded["specs"]
    assert specs["classification"] == (
        [("text_a", "string"), ("text_b", "string")],
        [("label_id", "int32"), ("label_name", "string"), ("logits", "float32"),
         ("probabilities", "float32")])
    assert specs["regression"] == ([("text_a", "string"), ("text_b", "string")],
                                   [("score", "float32")])
    assert specs["squad"] == (
        [("context", "string"), ("question", "string")],
        [("answer_end", "int32"), ("answer_start", "int32"), ("answer_text", "string"),
         ("has_answer", "bool"), ("null_odds", "float32"), ("score", "float32")])
    assert specs["ner"] == (
        [("text", "string")],
        [("entity_end", "int32"), ("entity_label", "string"), ("entity_score", "float32"),
         ("entity_start", "int32"), ("entity_text", "string"), ("num_entities", "int32")])
    assert loaded["label_names"] == ["contradiction", "entailment", "neutral"]
    # Serving-ready: no Python code in the graphs.
    for name, types in loaded["op_types"].items():
        assert not {"PyFunc", "EagerPyFunc", "PyFuncStateless"} & set(types), name
        assert any("Wordpiece" in op for op in types), name  # the tokenizer is inside


def _decoded(raw):
    return raw.decode("utf-8", errors="replace")


def test_bad_input_gives_valid_outputs(exported, loaded):
    n = len(BAD)
    for name in ("classification", "regression"):
        out = loaded[name + "_bad"]
        for value in out.values():
            assert len(value) == n
            if value.dtype.kind == "f":
                assert np.isfinite(value).all()
        assert all(len(v) == 0 for v in loaded[name + "_empty"].values())
    assert loaded["classification_empty"]["probabilities"].shape == (0, 3)

    for key in ("squad_bad", "squad_bad_context"):
        out = loaded[key]
        contexts = BAD[::-1] if key == "squad_bad" else BAD
        assert out["answer_text"].shape == (n,)
        assert np.isfinite(out["score"]).all() and np.isfinite(out["null_odds"]).all()
        for i, raw in enumerate(contexts):
            text = out["answer_text"][i].decode()
            if out["has_answer"][i]:
                assert _decoded(raw)[out["answer_start"][i]:out["answer_end"][i]] == text
            else:
                assert text == "" and out["answer_start"][i] == -1
    assert all(len(v) == 0 for v in loaded["squad_empty"].values())

    out = loaded["ner_bad"]
    assert out["num_entities"].shape == (n,)
    for i, raw in enumerate(BAD):
        for k in range(out["num_entities"][i]):
            entity = out["entity_text"][i, k].decode()
            assert _decoded(raw)[out["entity_start"][i, k]:out["entity_end"][i, k]] == entity
    assert out["num_entities"][0] == 0  # empty text
    assert loaded["ner_empty"]["entity_text"].shape[0] == 0
    assert loaded["ner_empty"]["num_entities"].shape == (0,)
    # Long text: at most max_windows (8) windows of 10 wordpieces are labelled.
    long_text = _decoded(BAD[4])
    assert out["entity_end"][4].max() <= len(long_text)


def test_inputs_of_different_batch_sizes_are_refused_by_name(loaded):
    """One text_b per text_a, one context per question: a mismatch is an error that says so,
    not an internal gather error or answers paired with the wrong context."""
    for key, names in (("classification_one_b_for_two_a", ("text_a", "text_b")),
                       ("squad_one_context_for_two_questions", ("question", "context"))):
        message = loaded[key]
        assert message and message.startswith("InvalidArgumentError"), (key, message)
        first, second = names
        assert (f"{first} and {second} must have the same batch size (one {second} per {first})"
                in message), message


def test_long_context_uses_several_windows(exported):
    """An answer far into a context is found: windows cover the context beyond the first."""
    import tensorflow as tf

    module = exported["modules"]["squad"]
    context = " ".join(["the city"] * 20) + " bob lives in paris"
    out = module.serving_default(question=tf.constant(["who lives in paris?"]),
                                 context=tf.constant([context]))
    if out["has_answer"].numpy()[0]:
        assert out["answer_start"].numpy()[0] >= 0
    assert out["answer_text"].shape == (1,)


def test_bfloat16_task_export_is_close_to_float32(exported):
    from bert_keras.export.task_export import build_task_module

    model_dir = str(exported["root"] / "classification_model")
    module = build_task_module(model_dir, dtype="bfloat16")
    got = _in_memory(module, text_a=CLASSIFY_A, text_b=CLASSIFY_B)
    want = _in_memory(exported["modules"]["classification"], text_a=CLASSIFY_A, text_b=CLASSIFY_B)
    assert got["probabilities"].dtype == np.float32
    assert np.abs(got["probabilities"] - want["probabilities"]).max() < 0.05


def test_unsupported_head_and_plain_directory_are_clear_errors(exported, tmp_path):
    from helpers.export_helpers import write_pretrained_dir

    from bert_keras.export.task_export import TaskExportError, build_task_module

    plain = str(tmp_path / "plain")
    write_pretrained_dir(plain, word_vocab())
    with pytest.raises(TaskExportError, match="task_config.json"):
        build_task_module(plain)
