"""One tokenizer from fine-tuning to serving: the features a model is fine-tuned on equal the
inputs its exported SavedModels build from raw text, loaded in a fresh process.

Real data and the real vocabulary: every row of GLUE MRPC dev (408 pairs) and the windows of
real SQuAD 2.0 dev questions, tokenized with the standard uncased 30,522-token BERT vocabulary.
"""

import os

import numpy as np
import pytest

from helpers.export_helpers import run_fresh, tiny_config
from helpers.pretraining_data_fixtures import minilm_vocab_path
from helpers.support import TESTS_DIR

MRPC_DIR = os.path.join(TESTS_DIR, "fixtures", "mrpc_dev")
SQUAD_SAMPLE = os.path.join(TESTS_DIR, "fixtures", "squad", "squad_v2_dev_sample.json")
FEATURES = ("input_word_ids", "input_mask", "input_type_ids")


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    """Fine-tuned model directories (tiny random weights, the real vocabulary) and their exports."""
    import keras

    from bert_keras.export import task_export
    from bert_keras.finetuning import task_models
    from bert_keras.text.vocab import Vocabulary

    root = tmp_path_factory.mktemp("train_serve")
    vocab = Vocabulary.from_file(minilm_vocab_path())
    config = tiny_config(len(vocab))
    specs = {
        "mrpc": (lambda: task_models.build_classifier(config, num_labels=2),
                 {"task": "glue/mrpc", "max_seq_length": 128, "label_names": ["0", "1"]}),
        "squad": (lambda: task_models.build_span_model(config),
                  {"task": "squad_v2", "max_seq_length": 64, "doc_stride": 16,
                   "max_query_length": 12, "max_answer_length": 30, "n_best_size": 20,
                   "version_2_with_negative": True, "label_names": None}),
    }
    dirs = {}
    for name, (build, task_config) in specs.items():
        keras.utils.set_random_seed(0)
        model_dir = str(root / f"{name}_model")
        task_models.save_task_model_dir(build(), model_dir, config, vocab, True, task_config)
        task_export.save_task_module(task_export.build_task_module(model_dir, max_windows=64),
                                     str(root / f"{name}_export"))
        dirs[name] = model_dir
        dirs[name + "_export"] = str(root / f"{name}_export")
    squad_dir = root / "squad_data"
    squad_dir.mkdir()
    with open(SQUAD_SAMPLE, encoding="utf-8") as f:
        (squad_dir / "dev-v2.0.json").write_text(f.read(), encoding="utf-8")
    dirs["squad_data"] = str(squad_dir)
    return dirs


def _finetuning_features(model_dirs):
    from bert_keras.finetuning.task import FinetuningOptions, get_task
    from bert_keras.finetuning.glue import data as glue

    mrpc = get_task("glue/mrpc", MRPC_DIR, model_dirs["mrpc"]).load("dev")
    examples = glue.read_glue_examples("mrpc", MRPC_DIR, "dev")
    options = FinetuningOptions(max_seq_length=64, doc_stride=16, max_query_length=12)
    squad = get_task("squad_v2", model_dirs["squad_data"], model_dirs["squad"], options).load("dev")
    squad_examples, squad_features, _ = squad.context
    max_context = np.zeros(squad.inputs["input_word_ids"].shape, bool)
    for row, feature in enumerate(squad_features):
        for position, is_max in feature.token_is_max_context.items():
            max_context[row, position] = is_max
    return {"mrpc": mrpc.inputs, "mrpc_a": [e.text_a for e in examples],
            "mrpc_b": [e.text_b for e in examples], "squad": squad.inputs,
            "squad_example_index": [f.example_index for f in squad_features],
            "squad_max_context": max_context,
            "questions": [e.question_text for e in squad_examples],
            "contexts": [e.context_text for e in squad_examples]}


_CHILD = '''
mrpc = tf.saved_model.load(MRPC_EXPORT)
out = mrpc.encode(tf.constant(TEXT_A), tf.constant(TEXT_B))
results["mrpc"] = {k: v.numpy() for k, v in out.items()}
squad = tf.saved_model.load(SQUAD_EXPORT)
out = squad.encode(tf.constant(QUESTIONS), tf.constant(CONTEXTS))
results["squad"] = {k: v.numpy() for k, v in out.items()}
'''


def test_finetuning_features_equal_the_exported_models_inputs(model_dirs):
    expected = _finetuning_features(model_dirs)
    assert len(expected["mrpc_a"]) == 408
    served = run_fresh(_CHILD, MRPC_EXPORT=model_dirs["mrpc_export"],
                       SQUAD_EXPORT=model_dirs["squad_export"], TEXT_A=expected["mrpc_a"],
                       TEXT_B=expected["mrpc_b"], QUESTIONS=expected["questions"],
                       CONTEXTS=expected["contexts"])
    for name in FEATURES:
        np.testing.assert_array_equal(served["mrpc"][name], expected["mrpc"][name], err_msg=name)
    # SQuAD: the same windows, in the same order, of the same questions.
    assert len(expected["squad_example_index"]) > len(expected["questions"]) + 5, "want long contexts"
    np.testing.assert_array_equal(served["squad"]["example_index"], expected["squad_example_index"])
    for name in FEATURES:
        np.testing.assert_array_equal(served["squad"][name], expected["squad"][name], err_msg=name)
    # ... and the same "max context" window for every document token (the original's rule).
    np.testing.assert_array_equal(served["squad"]["token_is_max_context"], expected["squad_max_context"])
    # Real text reaches the vocabulary: few unknown wordpieces.
    ids = expected["mrpc"]["input_word_ids"]
    assert np.mean(ids[ids > 0] == 100) < 0.01
