"""No cold-start cliff: a raw-text task SavedModel loaded in a fresh process serves the first
request of each new length about as fast as the next one (no per-length compilation), and
gives the outputs of the previous export (weights folded into the graph as constants)."""

import numpy as np
import pytest

from helpers.export_helpers import WORDS, run_fresh, tiny_config, word_vocab

SEQ_LENGTH = 128
# Pairs of growing length: their packed lengths fall in 7 buckets of 16 (cut_to_longest).
WORD_COUNTS = (2, 9, 16, 24, 32, 40, 52)


def _pairs():
    words = [w for w in WORDS if not w.startswith("##")]
    rng = np.random.default_rng(0)
    pairs = []
    for count in WORD_COUNTS:
        first = " ".join(rng.choice(words, size=count))
        second = " ".join(rng.choice(words, size=count))
        pairs.append((first, second))
    return pairs


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    import keras

    from bert_keras.export import task_export
    from bert_keras.finetuning import task_models
    from bert_keras.text.vocab import Vocabulary

    root = tmp_path_factory.mktemp("first_request")
    vocab = Vocabulary(word_vocab())
    config = tiny_config(len(vocab))
    keras.utils.set_random_seed(0)
    model = task_models.build_classifier(config, num_labels=2)
    rng = np.random.default_rng(0)
    for variable in model.head.weights:
        variable.assign(rng.normal(0, 1.0, variable.shape).astype("float32"))
    model_dir = str(root / "model")
    task_models.save_task_model_dir(model, model_dir, config, vocab, True,
                                    {"task": "glue/mrpc", "max_seq_length": SEQ_LENGTH,
                                     "label_names": ["0", "1"]})
    paths = {"default": str(root / "default"), "constants": str(root / "constants"),
             "xla_batch_1": str(root / "xla_batch_1")}
    task_export.export_task_from_model_dir(model_dir, paths["default"])
    task_export.export_task_from_model_dir(model_dir, paths["constants"], constant_weights=True)
    task_export.export_task_from_model_dir(model_dir, paths["xla_batch_1"], xla_batch_1=True)
    return paths


# The child cannot import the test helpers (nor bert_keras): its own copy of
# helpers.export_helpers.xla_compiled_calls.
_PRELUDE_CHILD = '''
import numpy as np

def xla_compiled_calls(concrete):
    graph_def = concrete.graph.as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    return sum(1 for node in nodes
               if "_XlaMustCompile" in node.attr and node.attr["_XlaMustCompile"].b)
'''


_CHILD = '''
import time

serve = tf.saved_model.load(PATH).signatures["serving_default"]
results["xla_calls"] = xla_compiled_calls(serve)

def call(a, b):
    start = time.perf_counter()
    out = serve(text_a=tf.constant([a]), text_b=tf.constant([b]))["logits"].numpy()
    return time.perf_counter() - start, out[0]

# The first request of the process (TensorFlow prepares the graph once), then the first
# request of each new length, then the same requests again: steady state.
first = [call(a, b) for a, b in PAIRS]
steady = [[call(a, b)[0] for a, b in PAIRS] for _ in range(5)]
results["first_s"] = [seconds for seconds, _ in first]
results["steady_s"] = [float(np.median(column)) for column in zip(*steady)]
results["logits"] = np.array([logits for _, logits in first])
'''


@pytest.fixture(scope="module")
def served(exports):
    return {name: run_fresh(_PRELUDE_CHILD + _CHILD, PATH=path, PAIRS=_pairs())
            for name, path in exports.items()}


def test_pairs_cover_several_lengths():
    from bert_keras.export.raw_text import LENGTH_MULTIPLE

    lengths = [min(SEQ_LENGTH, -(-(len(a.split()) + len(b.split()) + 3) // LENGTH_MULTIPLE)
                   * LENGTH_MULTIPLE) for a, b in _pairs()]
    assert len(set(lengths)) >= 5, lengths


def test_first_request_of_each_new_length_is_not_a_compilation(served):
    got = served["default"]
    assert got["xla_calls"] == 0
    # Every request after the process's first meets a length not seen before; a compilation
    # (XLA: seconds for MiniLM, tenths of a second for this tiny model) would be far beyond.
    for index in range(1, len(WORD_COUNTS)):
        first, steady = got["first_s"][index], got["steady_s"][index]
        assert first <= 5 * steady + 0.25, (index, got["first_s"], got["steady_s"])


def test_the_opt_in_xla_copy_compiles_each_new_length(served):
    """The control: what the check above catches. `--xla_batch_1` compiles each new length
    inside its first request."""
    got = served["xla_batch_1"]
    assert got["xla_calls"] >= 1
    ratios = [got["first_s"][i] / got["steady_s"][i] for i in range(1, len(WORD_COUNTS))]
    assert max(ratios) > 20, (got["first_s"], got["steady_s"])


def test_outputs_equal_the_constant_weights_export(served):
    np.testing.assert_allclose(served["default"]["logits"], served["constants"]["logits"],
                               atol=1e-5)
    np.testing.assert_allclose(served["default"]["logits"], served["xla_batch_1"]["logits"],
                               atol=1e-5)
    assert np.abs(served["default"]["logits"]).max() > 1e-3, "degenerate test: zero logits"

