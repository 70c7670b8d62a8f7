"""The main job end to end on the bundled corpus, with a few steps, and its resume."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_keras import main_job
from bert_keras.model.pretraining_model import load_pretraining_model


@pytest.fixture(scope="module")
def finished_job(tmp_path_factory):
    options = main_job.MainJobOptions(
        work_dir=str(tmp_path_factory.mktemp("main_job")), vocab_size=1200, dupe_factor=1,
        num_train_steps=300, save_checkpoints_steps=150, steps_per_execution=50, train_batch_size=32,
        num_workers=1)
    return options, main_job.run_main_job(options)


def test_every_stage_leaves_its_output(finished_job):
    options, results = finished_job
    paths = options.paths()
    assert sorted(results) == sorted(main_job.STAGES)
    for name in main_job.STAGES:
        assert os.path.exists(os.path.join(paths["stages"], f"{name}.json"))
    with open(paths["vocab"], encoding="utf-8") as f:
        assert sum(1 for _ in f) == 1200
    assert results["data"]["train"]["instances"] > 100
    assert results["data"]["heldout"]["instances"] > 10
    for name in ("bert_config.json", "vocab.txt", "tokenizer_config.json", "model.safetensors"):
        assert os.path.exists(os.path.join(paths["model"], name))
    # Learned, against baselines computed from the same records: always the most frequent token.
    evaluated, baselines = results["evaluate"]["results"], results["evaluate"]["baselines"]
    assert evaluated["masked_lm_accuracy"] >= 1.5 * baselines["unigram_mlm_accuracy"]
    assert 0.5 <= baselines["nsp_majority_share"] <= 1.0
    assert evaluated["global_step"] == 300
    for export in ("preprocessor", "encoder"):
        assert os.path.exists(os.path.join(paths[export], "saved_model.pb"))


def test_demo_predictions_match_the_in_memory_model(finished_job):
    options, _ = finished_job
    paths = options.paths()
    sentences = ["The lobster is a species of [MASK] from the [MASK] Atlantic Ocean ."]
    exported = main_job.masked_word_predictions(paths["preprocessor"], paths["encoder"],
                                                paths["vocab"], sentences, top_k=5)
    assert len(exported) == 1 and len(exported[0]) == 2

    # The same sentence through the Keras pre-training model of the model directory, built by
    # hand: [CLS] pieces [SEP] with the mask id at both markers.
    from bert_keras.text.tokenizer import BertTokenizer

    tokenizer = BertTokenizer(paths["vocab"], lower_case=True)
    vocab = [line.rstrip("\n") for line in open(paths["vocab"], encoding="utf-8")]
    ids = [vocab.index("[CLS]")]
    positions = []
    for index, part in enumerate(sentences[0].split("[MASK]")):
        if index:
            positions.append(len(ids))
            ids.append(vocab.index("[MASK]"))
        ids.extend(tokenizer.tokenize(tf.constant([part])).flat_values.numpy().tolist())
    ids.append(vocab.index("[SEP]"))
    model = load_pretraining_model(paths["model"])
    logits = model({"input_word_ids": np.array([ids], np.int32),
                    "input_mask": np.ones((1, len(ids)), np.int32),
                    "input_type_ids": np.zeros((1, len(ids)), np.int32),
                    "masked_lm_positions": np.array([positions], np.int32)})["mlm_logits"].numpy()
    probabilities = tf.nn.softmax(logits, axis=-1).numpy()
    for slot, candidates in enumerate(exported[0]):
        expected = np.argsort(-probabilities[0, slot])[:5]
        assert [token for token, _ in candidates] == [vocab[i] for i in expected]
        np.testing.assert_allclose([p for _, p in candidates], probabilities[0, slot, expected],
                                   atol=1e-5)


def test_a_rerun_resumes_instead_of_redoing(finished_job, capsys):
    options, results = finished_job
    stamps = {name: os.path.getmtime(os.path.join(options.paths()["stages"], f"{name}.json"))
              for name in main_job.STAGES}
    again = main_job.run_main_job(options)
    printed = capsys.readouterr().out
    assert printed.count("already done") == len(main_job.STAGES)
    assert again["demo"]["predictions"] == results["demo"]["predictions"]
    for name, stamp in stamps.items():
        assert os.path.getmtime(os.path.join(options.paths()["stages"], f"{name}.json")) == stamp


def test_an_interrupted_stage_is_redone(finished_job, tmp_path):
    options, _ = finished_job
    stages_dir = options.paths()["stages"]
    with open(os.path.join(stages_dir, "demo.json"), encoding="utf-8") as f:
        demo = json.load(f)
    os.remove(os.path.join(stages_dir, "demo.json"))
    again = main_job.run_main_job(options)
    assert again["demo"]["predictions"] == demo["predictions"]
    assert os.path.exists(os.path.join(stages_dir, "demo.json"))
