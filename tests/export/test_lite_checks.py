"""A lite export checked when it is loaded and called (issue 64): damaged files named, a
vocabulary of the wrong size refused, texts of the wrong type refused, empty batches of the
right shape, one `LiteModel` shared by 20 threads, and the leftovers of killed exports removed
by the next export into the same place (only those of processes no longer running). Every file
that was there before is unchanged (SHA-256)."""

import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

from helpers.export_helpers import tiny_config, word_vocab, write_pretrained_dir
from helpers.support import file_hashes

LABELS = ["contradiction", "entailment", "neutral"]
TEXTS = ["Bob lives in Paris.", "Alice", "The city of London is the capital.", "Hello world!",
         "Who was born in 1895?"]


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    import keras

    from bert_keras.export import export_from_model_dir
    from bert_keras.finetuning import task_models
    from bert_keras.text.vocab import Vocabulary

    root = tmp_path_factory.mktemp("lite_checks")
    tokens = word_vocab()
    write_pretrained_dir(str(root / "pretrained"), tokens, seed=3)
    config = tiny_config(len(tokens))
    keras.utils.set_random_seed(0)
    model = task_models.build_classifier(config, num_labels=3)
    task_models.save_task_model_dir(model, str(root / "classifier"), config, Vocabulary(tokens),
                                    True, {"task": "glue/mnli", "max_seq_length": 16,
                                           "label_names": LABELS})
    keras.utils.set_random_seed(1)
    model = task_models.build_classifier(config, regression=True)
    task_models.save_task_model_dir(model, str(root / "regressor"), config, Vocabulary(tokens),
                                    True, {"task": "glue/stsb", "max_seq_length": 16,
                                           "label_names": None})
    for name, model_dir in (("encoder", "pretrained"), ("classifier", "classifier"),
                            ("regressor", "regressor")):
        export_from_model_dir("lite", str(root / model_dir), str(root / f"{name}_lite"))
    return {"root": root, "hidden": config.hidden_size, "vocab_size": len(tokens)}


def _copy(exports, name, tmp_path):
    target = tmp_path / name
    shutil.copytree(exports["root"] / name, target)
    return target


def _refused(path, error_type=None):
    from bert_keras.export.lite import LiteExportError, LiteModel

    with pytest.raises(error_type or LiteExportError) as raised:
        LiteModel(path)
    return str(raised.value)


def test_damaged_files_are_refused_naming_the_file(exports, tmp_path):
    cases = {}
    # vocab.txt of another vocabulary (3 tokens fewer): ids would be served wrong, silently.
    target = _copy(exports, "encoder_lite", tmp_path / "short_vocab")
    lines = (target / "vocab.txt").read_text(encoding="utf-8").splitlines()
    (target / "vocab.txt").write_text("\n".join(lines[:-3]) + "\n", encoding="utf-8")
    cases["vocab.txt"] = target
    # lite_config.json and model.tflite cut in half, as a copy interrupted.
    for name in ("lite_config.json", "model.tflite"):
        target = _copy(exports, "encoder_lite", tmp_path / name.replace(".", "_"))
        data = (target / name).read_bytes()
        (target / name).write_bytes(data[:len(data) // 2])
        cases[name] = target
    target = _copy(exports, "encoder_lite", tmp_path / "no_model")
    os.remove(target / "model.tflite")
    cases["missing model.tflite"] = target
    refused = 0
    for name, target in cases.items():
        before = file_hashes(target)
        message = _refused(target)
        assert os.path.join(str(target), name.split()[-1]) in message, (name, message)
        assert file_hashes(target) == before
        refused += 1
    short = _refused(cases["vocab.txt"])
    assert f"{exports['vocab_size'] - 3} tokens" in short and str(exports["vocab_size"]) in short
    assert refused == 4


def test_texts_of_the_wrong_type_are_refused(exports):
    from bert_keras.export.lite import LiteModel

    encoder = LiteModel(exports["root"] / "encoder_lite")
    classifier = LiteModel(exports["root"] / "classifier_lite")
    refused = 0
    for call, expected in (
            (lambda: encoder({"Bob lives in Paris.": 1}), "text_a: expected a str or a list of str"
             " (one text per row), got dict"),
            (lambda: classifier({"a": "b"}, {"a": "b"}), "got dict"),
            (lambda: encoder(5), "got int"),
            (lambda: encoder([["Bob", "Alice"]]), "text_a[0]: expected a str"),
            (lambda: classifier(["Bob"], [None]), "text_b[0]: expected a str"),
            (lambda: encoder(None), "got NoneType")):
        with pytest.raises(TypeError) as raised:
            call()
        assert expected in str(raised.value)
        refused += 1
    assert refused == 6
    # What is accepted: a str, a list, a tuple, a 1-D NumPy array of str.
    want = encoder(["Bob lives in Paris."])["pooled_output"]
    for texts in ("Bob lives in Paris.", ("Bob lives in Paris.",), np.array(["Bob lives in Paris."])):
        np.testing.assert_allclose(encoder(texts)["pooled_output"], want, rtol=0, atol=0)


def test_an_empty_batch_has_the_shape_of_a_full_one(exports):
    from bert_keras.export.lite import LiteModel

    hidden = exports["hidden"]
    encoder = LiteModel(exports["root"] / "encoder_lite")
    empty, one = encoder([]), encoder(["Bob"])
    assert empty["pooled_output"].shape == (0, hidden) == (0,) + one["pooled_output"].shape[1:]
    assert empty["sequence_output"].shape == (0, 0, hidden)
    assert empty["input_mask"].shape == (0, 0)
    classifier = LiteModel(exports["root"] / "classifier_lite")
    empty = classifier([], [])
    assert empty["logits"].shape == empty["probabilities"].shape == (0, len(LABELS))
    assert empty["label_id"].shape == empty["label_name"].shape == (0,)
    assert {key: value.dtype for key, value in empty.items()} == {
        key: value.dtype for key, value in classifier(["a"], ["b"]).items()}
    assert LiteModel(exports["root"] / "regressor_lite")([], [])["score"].shape == (0,)


def test_one_lite_model_shared_by_20_threads_answers_all_600_calls(exports):
    from bert_keras.export.lite import LiteModel

    classifier = LiteModel(exports["root"] / "classifier_lite", num_threads=1)
    # References computed one at a time, for batches of 1 to 5 rows (different shapes).
    expected = [classifier(TEXTS[:size], TEXTS[::-1][:size])["logits"] for size in range(1, 6)]
    results, errors = [], []

    def serve(thread):
        for call in range(30):
            size = 1 + (thread + call) % 5
            try:
                results.append((size, classifier(TEXTS[:size], TEXTS[::-1][:size])["logits"]))
            except Exception as error:  # noqa: BLE001  (counted, then asserted none)
                errors.append(repr(error))

    threads = [threading.Thread(target=serve, args=(index,)) for index in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    right = sum(np.allclose(logits, expected[size - 1], rtol=0, atol=1e-6)
                for size, logits in results)
    assert (len(results), right) == (600, 600)


def _dead_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.mark.parametrize("kind", ["lite", "encoder"])
def test_leftovers_of_killed_exports_are_removed_by_the_next_export(exports, tmp_path, kind):
    from bert_keras.export import export_from_model_dir

    export_dir = tmp_path / "export"
    dead = _dead_pid()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        leftover, running = tmp_path / f"export.tmp-{dead}", tmp_path / f"export.tmp-{live.pid}"
        for folder in (leftover, running):
            folder.mkdir()
            (folder / "model.tflite").write_bytes(b"\0" * 1000)
        (tmp_path / f"export.tmp-{dead}.json").write_text("{}")  # atomic_path's, with a suffix
        # The user's own files with similar names are not ours.
        (tmp_path / "export.tmp-notes").write_text("mine")
        (tmp_path / f"exports.tmp-{dead}").write_text("another export's name")
        kept = file_hashes(tmp_path)
        export_from_model_dir(kind, str(exports["root"] / "pretrained"), str(export_dir))
        names = sorted(os.listdir(tmp_path))
        assert names == sorted(["export", f"export.tmp-{live.pid}", "export.tmp-notes",
                                f"exports.tmp-{dead}"])
        after = file_hashes(tmp_path)
        assert {name: digest for name, digest in kept.items() if name in after} == {
            name: digest for name, digest in kept.items()
            if not name.startswith((f"export.tmp-{dead}",))}
    finally:
        live.kill()
        live.wait()
