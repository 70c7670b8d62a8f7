"""End-to-end CoNLL-2003 NER fine-tuning (and the paper's feature-based variant) in the
official four-column layout: the model learns (dev scores, on sentences it did not train on,
above tagging every word "O"), and the written predictions are the scored ones."""

import json
import os

import numpy as np
import pytest

from bert_keras.finetuning.run import run_finetuning
from bert_keras.finetuning.task import FinetuningOptions, get_task
from bert_keras.finetuning.tasks.common import DataFormatError
from bert_keras.metrics import conll_eval
from bert_keras.model import checkpoint_names
from bert_keras.modeldir import model_dir
from helpers.finetuning_fixtures import (data_dir, fixture, read_lines, tagged_conll,
                                         tiny_model_dir)

QUICK = dict(learning_rate=1e-3, train_batch_size=1, num_train_epochs=10, max_seq_length=32,
             eval_batch_size=4, save_checkpoints=False)


def _learnable_data(tmp_path, test=None):
    """A data folder with 24 training and 16 dev sentences whose entities a word tells
    (tests/helpers), and `test` (a fixture) as eng.testb: {split: path} and the folder."""
    data = data_dir(tmp_path, {"eng.testb": test} if test else {})
    paths = {"train": tagged_conll(os.path.join(data, "eng.train"), 24, seed=1),
             "dev": tagged_conll(os.path.join(data, "eng.testa"), 16, seed=2)}
    if test:
        paths["test"] = os.path.join(data, "eng.testb")
    return data, paths


def _all_o_scores(path):
    """Entity F1 and word accuracy (in points) of tagging every word "O": no entity found."""
    tags = [tag for sentence in _gold(path) for _, tag in sentence]
    return 0.0, 100.0 * tags.count("O") / len(tags)


def _gold(path):
    """[(word, tag), ...] per sentence, read here from the four columns."""
    sentences, current = [], []
    for line in read_lines(path):
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":
            if current:
                sentences.append(current)
            current = []
            continue
        current.append((fields[0], fields[3]))
    if current:
        sentences.append(current)
    return sentences


def _written(path):
    """The conlleval input written by fine-tuning: [(word, gold, predicted), ...] per sentence."""
    sentences, current = [], []
    for line in read_lines(path):
        if not line:
            sentences.append(current)
            current = []
        else:
            current.append(tuple(line.split(" ")))
    assert not current, "the file ends with a blank line after the last sentence"
    return sentences


def _check_outputs(out, sources, result):
    for split in ("dev", "test"):
        gold = _gold(sources[split])
        written = _written(os.path.join(out, "predictions", split, "predictions.txt"))
        assert [[(w, g) for w, g, _ in s] for s in written] == gold
        tags = [[p for _, _, p in s] for s in written]
        assert all(tag in result.results["task_config"]["label_names"] for s in tags for tag in s)
        # The reported entity-level scores are those of the written file.
        scores = conll_eval.evaluate([[g for _, g in s] for s in gold], tags)
        for key in ("precision", "recall", "f1"):
            assert result.metrics[split][key] == pytest.approx(scores[key])


def test_conll_fine_tuning_predicts_on_first_wordpieces(tmp_path):
    data, paths = _learnable_data(tmp_path, test=fixture("conll", "eng.testa"))
    init = tiny_model_dir(tmp_path, list(paths.values()))
    out = str(tmp_path / "out")

    result = run_finetuning("conll2003", data, init, out,
                            **dict(QUICK, learning_rate=2e-3, train_batch_size=4,
                                   num_train_epochs=6, eval_batch_size=16))

    assert result.train_loss[-1] < 0.7 * result.train_loss[0], result.train_loss
    _check_outputs(out, paths, result)
    # Learnt, on sentences it never saw: entities found, where tagging all "O" finds none.
    baseline_f1, _ = _all_o_scores(paths["dev"])
    assert result.metrics["dev"]["f1"] >= baseline_f1 + 50, result.metrics["dev"]
    task_config = json.load(open(os.path.join(out, "task_config.json")))
    assert task_config["head"] == "token_tagging"
    assert task_config["label_names"][0] == "O" and len(task_config["label_names"]) == 9


def test_conll_feature_based_bilstm_keeps_bert_frozen(tmp_path):
    data, paths = _learnable_data(tmp_path)
    init = tiny_model_dir(tmp_path, list(paths.values()))
    out = str(tmp_path / "out")

    # Without a learning rate the BiLSTM trained from scratch gets 1e-3, not BERT's 5e-5.
    assert get_task("conll2003", data, init, FinetuningOptions(
        feature_based=True)).options.learning_rate == 1e-3
    result = run_finetuning("conll2003", data, init, out, feature_based=True, feature_layers=2,
                            lstm_units=64, **dict(QUICK, learning_rate=1e-2, train_batch_size=2,
                                                  num_train_epochs=8, eval_batch_size=16))

    assert result.train_loss[-1] < 0.7 * result.train_loss[0], result.train_loss
    # Learnt, on sentences it never saw: more words tagged right than by tagging all "O" (the
    # BiLSTM over frozen random features learns slowly: about 80 against 66 here).
    _, baseline_accuracy = _all_o_scores(paths["dev"])
    assert result.metrics["dev"]["accuracy"] >= baseline_accuracy + 5, result.metrics["dev"]
    before = model_dir.read_weights(init)
    after = model_dir.read_weights(out)
    for name in checkpoint_names.encoder_weight_shapes(model_dir.read_config(init)):
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    lstm = [name for name in after if name.startswith("task/bilstm_tagger/lstm_1/backward/")]
    assert len(lstm) == 3
    task_config = json.load(open(os.path.join(out, "task_config.json")))
    assert task_config["head"] == "feature_based_bilstm" and task_config["feature_layers"] == 2
    assert "test" not in result.metrics  # no eng.testb here: only dev is scored


def test_conll_bad_line_is_named(tmp_path):
    source = fixture("conll", "eng.testa")
    bad = tmp_path / "data"
    bad.mkdir()
    lines = read_lines(source)
    (bad / "eng.train").write_text("\n".join(lines[:3] + ["Robotics NNPS I-NP"]) + "\n")
    init = tiny_model_dir(tmp_path, [source])
    with pytest.raises(DataFormatError, match=r"eng.train: line 4: expected 4"):
        run_finetuning("conll2003", str(bad), init, str(tmp_path / "out"), **QUICK)
