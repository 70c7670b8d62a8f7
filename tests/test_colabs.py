"""The Colab notebooks of colabs/, executed end to end in their smoke-test mode on the CPU.

Each notebook runs in a fresh `python3` kernel (nbclient) in a temporary working directory with
BERT_KERAS_SMOKE=1 (tiny model, a few steps, bundled data, no network), and must finish
without an error. Its `summary.json` and output files are then checked against figures the
test computes itself: record counts from the TFRecord framing, GLUE accuracy and F1 from the
written predictions and labels, SQuAD exact match and F1 from the official definitions.
"""

import collections
import csv
import importlib.util
import json
import math
import os
import re
import string
import struct

import pytest
from helpers.support import required_module

nbformat = required_module("nbformat", 'pip install -e ".[test]"')
nbclient = required_module("nbclient", 'pip install -e ".[test]"')
required_module("ipykernel", 'pip install -e ".[test]"')

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLABS_DIR = os.path.join(REPO_DIR, "colabs")
CELL_TIMEOUT_SECONDS = 300
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _make_notebooks():
    spec = importlib.util.spec_from_file_location(
        "make_notebooks", os.path.join(COLABS_DIR, "make_notebooks.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def execute_notebook(name, working_dir, monkeypatch, parameters=None, backend="tensorflow"):
    """Runs colabs/<name>.ipynb in `working_dir` with Keras on `backend` (the install cell
    takes KERAS_BACKEND from the environment); `parameters` are assigned in a cell put right
    after the one tagged "parameters" (what papermill does)."""
    notebook = nbformat.read(os.path.join(COLABS_DIR, f"{name}.ipynb"), as_version=4)
    if parameters:
        index = next(i for i, cell in enumerate(notebook.cells)
                     if "parameters" in cell.metadata.get("tags", []))
        source = "\n".join(f"{key} = {value!r}" for key, value in parameters.items())
        notebook.cells.insert(index + 1, nbformat.v4.new_code_cell(source))
    monkeypatch.setenv("BERT_KERAS_SMOKE", "1")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    monkeypatch.setenv("KERAS_BACKEND", backend)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    client = nbclient.NotebookClient(
        notebook, timeout=CELL_TIMEOUT_SECONDS, kernel_name="python3",
        resources={"metadata": {"path": str(working_dir)}})
    client.execute()
    return notebook


def printed_text(notebook):
    return "".join(output.get("text", "") for cell in notebook.cells
                   if cell.cell_type == "code" for output in cell.get("outputs", []))


def count_tfrecords(path):
    """Records in a TFRecord file, from its framing: length (8 bytes), CRC (4), data, CRC (4)."""
    count = 0
    with open(path, "rb") as f:
        while True:
            header = f.read(8)
            if not header:
                return count
            (length,) = struct.unpack("<Q", header)
            f.seek(4 + length + 4, os.SEEK_CUR)
            count += 1


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# ------------------------------------------------------------------ the notebooks themselves
def test_notebooks_match_their_sources_and_have_the_common_cells():
    make_notebooks = _make_notebooks()
    for name in make_notebooks.NOTEBOOKS:
        path = make_notebooks.notebook_path(name)
        with open(path, encoding="utf-8") as f:
            committed = f.read()
        assert committed == make_notebooks.render(make_notebooks.build_notebook(name)), (
            f"{path} is out of date: run python colabs/make_notebooks.py")
        notebook = nbformat.reads(committed, as_version=4)
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        assert code[0].metadata.get("tags") == ["install"], f"{name}: install cell first"
        # No address a user must edit: a checkout, an uploaded wheel, or BERT_KERAS_SOURCE.
        assert 'BERT_KERAS_SOURCE = ""' in code[0].source and "<your-org>" not in committed
        assert 'KERAS_BACKEND = "auto"' in code[0].source
        parameters = [cell for cell in code if "parameters" in cell.metadata.get("tags", [])]
        assert len(parameters) == 1 and "SMOKE = False" in parameters[0].source, name
        assert all(not cell.get("outputs") and cell.get("execution_count") is None
                   for cell in code), f"{name}: committed with outputs"
        assert notebook.metadata["kernelspec"]["name"] == "python3"


def test_parse_cells_reports_bad_markers():
    make_notebooks = _make_notebooks()
    cells = make_notebooks.parse_cells(
        '# %% [markdown]\n# # Title\n#\n# text\n\n'
        '# %% tags=["parameters"]\nA = 1\n\n# %%\nprint(A)\n')
    assert cells == [("markdown", "# Title\n\ntext", []), ("code", "A = 1", ["parameters"]),
                     ("code", "print(A)", [])]
    with pytest.raises(ValueError, match="source:3: unknown cell marker"):
        make_notebooks.parse_cells("# %%\nA = 1\n# %% [raw]\n")
    with pytest.raises(ValueError, match="text before the first"):
        make_notebooks.parse_cells("A = 1\n# %%\n")


# ------------------------------------------------------------------------------ pre-training
BACKENDS = ["tensorflow", "jax"]


def read_tfrecords(pattern_dir):
    """Every tf.train.Example of the *.tfrecord files in `pattern_dir`, as {feature: list},
    read from the framing of `count_tfrecords`."""
    from tensorflow.core.example import example_pb2

    rows = []
    for path in sorted(pattern_dir.glob("*.tfrecord")):
        with open(path, "rb") as f:
            while header := f.read(8):
                (length,) = struct.unpack("<Q", header)
                f.seek(4, os.SEEK_CUR)
                features = example_pb2.Example.FromString(f.read(length)).features.feature
                f.seek(4, os.SEEK_CUR)
                rows.append({name: list(value.int64_list.value or value.float_list.value)
                             for name, value in features.items()})
    return rows


# Once, on JAX: what the notebook does on TensorFlow (run_pretraining on a tf.distribute
# strategy, evaluation, exports) is what the main job's and pretraining/test_run.py's tests run,
# and pretraining/test_backends.py matches JAX's training steps and evaluation with TensorFlow's;
# the notebook's own JAX path (the devices from jax, Model.fit, the exports from a JAX process
# through a TensorFlow child) is run nowhere else.
def test_pretraining_notebook_runs_every_stage(tmp_path, monkeypatch):
    backend = "jax"
    notebook = execute_notebook("pretraining_tpu", tmp_path, monkeypatch, backend=backend)
    assert "smoke test" in printed_text(notebook)
    assert f"Keras backend: {backend}" in printed_text(notebook)
    work_dir = tmp_path / "bert_keras_work"
    summary = read_json(work_dir / "summary.json")
    assert summary["smoke"] is True and summary["accelerator"] == "CPU"
    assert summary["backend"] == backend and summary["devices"] == 1

    with open(work_dir / "vocab.txt", encoding="utf-8") as f:
        vocab = [line.rstrip("\n") for line in f]
    assert len(vocab) == summary["vocab_size"] and vocab[:5] == SPECIAL_TOKENS
    assert len(set(vocab)) == len(vocab)

    for split in ("train", "heldout"):
        files = sorted((work_dir / "data" / split).glob("*.tfrecord"))
        assert files, split
        assert sum(count_tfrecords(path) for path in files) == summary["instances"][split]

    model = work_dir / "model"
    config = read_json(model / "bert_config.json")
    assert (config["num_hidden_layers"], config["hidden_size"]) == (2, 128)  # "tiny"
    assert config["vocab_size"] == len(vocab)
    assert (model / "model.safetensors").stat().st_size > 4 * len(vocab) * 128

    train, evaluation = summary["train"], summary["eval"]
    assert train["step"] == evaluation["global_step"] > 0
    # Evaluation reads every held-out record once (dropout off).
    assert evaluation["examples"] == summary["instances"]["heldout"]
    # Against baselines counted here from the records: 20 steps of a tiny model learn the
    # frequent tokens (a random model scores about 1 / vocabulary size), so the masked LM gets at
    # least half of always answering the training records' most frequent masked token, with a
    # loss below a uniform guess's; the next-sentence head, not learnt in 20 steps, answers about
    # the label frequencies: within 0.1 of always answering the majority label (a head with the
    # labels swapped or counted over the wrong records falls below).
    train_rows = read_tfrecords(work_dir / "data" / "train")
    heldout_rows = read_tfrecords(work_dir / "data" / "heldout")

    def masked_tokens(rows):
        return [int(token) for row in rows
                for token, weight in zip(row["masked_lm_ids"], row["masked_lm_weights"]) if weight]

    most_frequent = collections.Counter(masked_tokens(train_rows)).most_common(1)[0][0]
    heldout_tokens = masked_tokens(heldout_rows)
    unigram = heldout_tokens.count(most_frequent) / len(heldout_tokens)
    labels = [int(row["next_sentence_labels"][0]) for row in heldout_rows]
    majority_share = max(labels.count(0), labels.count(1)) / len(labels)
    print(f"\nheld out: masked LM {evaluation['masked_lm_accuracy']:.4f} (most frequent token "
          f"{unigram:.4f}, loss {evaluation['masked_lm_loss']:.3f} vs uniform "
          f"{math.log(len(vocab)):.3f}); NSP {evaluation['next_sentence_accuracy']:.4f} "
          f"(majority {majority_share:.4f})")
    assert len(heldout_rows) == evaluation["examples"]
    assert evaluation["masked_lm_accuracy"] >= 0.5 * unigram > 20 / len(vocab), (evaluation, unigram)
    assert evaluation["masked_lm_loss"] < math.log(len(vocab)) - 0.3, evaluation
    assert evaluation["next_sentence_accuracy"] >= majority_share - 0.1, (evaluation, majority_share)
    for name, count in (("masked_lm_accuracy", len(heldout_tokens)),
                        ("next_sentence_accuracy", len(labels))):
        correct = evaluation[name] * count  # counted once over every held-out prediction
        assert correct == pytest.approx(round(correct), abs=1e-3), (name, correct)
    assert math.isfinite(evaluation["next_sentence_loss"]) and evaluation["next_sentence_loss"] > 0
    with open(model / "eval_results.txt", encoding="utf-8") as f:
        written = dict(line.strip().split(" = ", 1) for line in f if " = " in line)
    assert float(written["masked_lm_accuracy"]) == pytest.approx(evaluation["masked_lm_accuracy"])

    for kind in ("preprocessor", "encoder"):
        assert (work_dir / "export" / kind / "saved_model.pb").exists()
    from bert_keras.main_job import DEFAULT_SENTENCES  # the demo sentences the notebook uses

    predictions = summary["masked_word_predictions"]
    frequent_tokens = [vocab[token] for token, _ in
                       collections.Counter(masked_tokens(train_rows)).most_common(10)]
    print("first guesses:", [per_mask[0][0] for sentence in predictions for per_mask in sentence],
          "most frequent:", frequent_tokens)
    assert len(predictions) == len(DEFAULT_SENTENCES)
    for sentence, per_mask in zip(DEFAULT_SENTENCES, predictions):
        assert len(per_mask) == sentence.count("[MASK]")
        for candidates in per_mask:  # the top 5, most probable first
            probabilities = [p for _, p in candidates]
            assert len(candidates) == 5 and all(token in vocab for token, _ in candidates)
            assert probabilities == sorted(probabilities, reverse=True)
            assert 0.0 < sum(probabilities) <= 1.0 + 1e-5
            # Served from the exported SavedModels, the trained model's first guess is one of
            # the training records' ten most frequent masked tokens, above 3 times a uniform
            # guess (exports with other weights or another vocabulary answer at random).
            assert candidates[0][0] in frequent_tokens, (sentence, candidates, frequent_tokens)
            assert probabilities[0] > 3 / len(vocab), (sentence, candidates)


# ---------------------------------------------------------------------------------- GLUE
@pytest.mark.parametrize("backend", BACKENDS)
def test_glue_notebook_fine_tunes_exports_and_calls_the_classifier(tmp_path, monkeypatch,
                                                                   backend):
    execute_notebook("finetuning_glue", tmp_path, monkeypatch, backend=backend)
    work_dir = tmp_path / "bert_keras_glue"
    summary = read_json(work_dir / "summary.json")
    assert summary["smoke"] is True and summary["task"] == "glue/mrpc"
    assert summary["backend"] == backend

    # Accuracy and F1 from the written predictions and the dev labels, by hand.
    with open(os.path.join(summary["data_dir"], "dev.tsv"), encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert rows[0] == ["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
    labels = [row[0] for row in rows[1:]]
    with open(work_dir / "run" / "predictions" / "dev" / "MRPC.tsv", encoding="utf-8") as f:
        predicted_rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert predicted_rows[0] == ["index", "prediction"]
    predicted = [row[1] for row in predicted_rows[1:]]
    assert len(predicted) == len(labels) == 32
    true_positive = sum(p == t == "1" for p, t in zip(predicted, labels))
    false_positive = sum(p == "1" and t == "0" for p, t in zip(predicted, labels))
    false_negative = sum(p == "0" and t == "1" for p, t in zip(predicted, labels))
    f1 = (2 * true_positive / (2 * true_positive + false_positive + false_negative)
          if true_positive else 0.0)
    dev = summary["metrics"]["dev"]
    assert dev["accuracy"] == pytest.approx(sum(p == t for p, t in zip(predicted, labels)) / 32)
    assert dev["f1"] == pytest.approx(f1)
    assert len(summary["train_loss"]) == 2 and all(map(math.isfinite, summary["train_loss"]))

    task_config = read_json(work_dir / "run" / "task_config.json")
    assert task_config["task"] == "glue/mrpc" and task_config["label_names"] == ["0", "1"]

    exported = summary["exported"]
    assert len(exported["probabilities"]) == 32
    for row in exported["probabilities"]:
        assert sum(row) == pytest.approx(1.0, abs=1e-5)
    # The raw-text SavedModel labels each pair with its most probable label...
    assert exported["label_names"] == [str(max(range(2), key=row.__getitem__))
                                       for row in exported["probabilities"]]
    # ... and computes what the Keras model computes (float32 on the CPU).
    assert exported["largest_logit_difference"] < 1e-4
    assert exported["same_label_fraction"] == 1.0
    assert (work_dir / "export" / "classifier" / "saved_model.pb").exists()

    from_export = summary["from_exported_encoder"]
    if backend != "tensorflow":  # TFSMLayer runs on the TensorFlow backend only
        assert from_export is None
        return
    assert len(from_export["loss_per_epoch"]) == 2
    assert all(map(math.isfinite, from_export["loss_per_epoch"]))
    correct = from_export["dev_accuracy"] * 32  # all 32 dev pairs: two whole batches of 16
    assert correct == pytest.approx(round(correct))


# --------------------------------------------------------------------------------- SQuAD
def normalize_answer(text):
    """The official SQuAD scripts' normalization: lower case, no punctuation, no articles."""
    text = "".join(c for c in text.lower() if c not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def token_f1(prediction, gold, version):
    """Token-overlap F1; v2.0 scores an empty answer against an empty gold as 1."""
    prediction_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if version == "v2.0" and (not prediction_tokens or not gold_tokens):
        return float(prediction_tokens == gold_tokens)
    overlap = collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)
    common = sum(overlap.values())
    if common == 0:
        return 0.0
    precision, recall = common / len(prediction_tokens), common / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


# Each version once and each backend once: the answer-writing code is the same on both backends.
@pytest.mark.parametrize("version,backend", [("v1.1", "tensorflow"), ("v2.0", "jax")])
def test_squad_notebook_fine_tunes_predicts_and_scores(tmp_path, monkeypatch, version, backend):
    notebook = execute_notebook("squad", tmp_path, monkeypatch, parameters={"SQUAD_VERSION": version},
                                backend=backend)
    work_dir = tmp_path / "bert_keras_squad"
    summary = read_json(work_dir / "summary.json")
    assert summary["smoke"] is True and summary["squad_version"] == version

    dev = read_json(work_dir / "data" / f"dev-{version}.json")
    assert dev["version"] == version.lstrip("v")
    predictions = read_json(work_dir / "run" / "predictions" / "dev" / "predictions.json")
    questions = [(qa, paragraph["context"]) for article in dev["data"]
                 for paragraph in article["paragraphs"] for qa in paragraph["qas"]]
    assert {qa["id"] for qa, _ in questions} == set(predictions)
    exact, f1 = [], []
    for qa, context in questions:
        golds = [a["text"] for a in qa["answers"]]
        for answer in qa["answers"]:  # the generated answers point into their context
            assert context[answer["answer_start"]:][:len(answer["text"])] == answer["text"]
        if version == "v2.0" and not golds:
            golds = [""]
        prediction = predictions[qa["id"]]
        exact.append(max(float(normalize_answer(prediction) == normalize_answer(g)) for g in golds))
        f1.append(max(token_f1(prediction, g, version) for g in golds))
    scores = summary["scores"]
    exact_key = "exact_match" if version == "v1.1" else "exact"
    assert scores[exact_key] == pytest.approx(100 * sum(exact) / len(exact))
    assert scores["f1"] == pytest.approx(100 * sum(f1) / len(f1))
    assert summary["reported_metrics"]["dev"][exact_key] == pytest.approx(scores[exact_key])

    if version == "v2.0":
        assert any(not qa["answers"] for qa, _ in questions)
        null_odds = read_json(work_dir / "run" / "predictions" / "dev" / "null_odds.json")
        assert set(null_odds) == set(predictions)
        # predictions.json answers "" exactly where null_odds is above threshold 0.
        for qid, odds in null_odds.items():
            assert (predictions[qid] == "") == (odds > 0.0), qid
        assert "best_f1_thresh" in summary["reported_metrics"]["dev"]

    # The raw-text SavedModel gives the Python post-processing's answers on each question it
    # answers, and it answers those predictions.json answers: on v1.1 every dev question, so
    # the fraction of 1.0 is over all of them, not over none (v2.0's smoke model, 20 steps,
    # may answer none: then the export must answer none either).
    assert summary["exported_same_answer_fraction"] == 1.0
    compared = re.findall(r"same answer for (\d+)% of (\d+) answered dev questions",
                          printed_text(notebook))
    answered = sum(1 for qa, _ in questions if predictions[qa["id"]])
    print(f"\n{version}: exported answers compared on {compared}, {answered} of {len(questions)} "
          f"answered in predictions.json; example {summary['example']}")
    assert compared == [("100", str(answered))]
    if version == "v1.1":
        assert answered == len(questions) > 0
    # Asked about a paragraph of its own, it answers with a span of that paragraph's text (from
    # its first wordpiece's start to its last one's end, as the export documents: "part" of
    # "parts" is such a span), not empty on v1.1 (which has no "no answer").
    context = ("Homarus gammarus , known as the European lobster or common lobster , is a species "
               "of clawed lobster from the eastern Atlantic Ocean , Mediterranean Sea and parts of "
               "the Black Sea .")
    example = summary["example"]["answer"]
    assert example.strip() == example and example in context if example else version == "v2.0", example
    assert (work_dir / "export" / "question_answering" / "saved_model.pb").exists()
