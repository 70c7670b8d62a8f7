"""GLUE readers on small files in the official TSV layouts, their errors and per-task metrics."""

import os

import numpy as np
import pytest

from bert_keras.finetuning.glue import data as glue
from bert_keras.finetuning.tasks.common import DataFormatError
from helpers.support import TESTS_DIR, required_module

GLUE_DIR = os.path.join(TESTS_DIR, "fixtures", "glue")


def _write(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    return path


def test_label_lists():
    assert glue.get_labels("cola") == ["0", "1"]
    assert glue.get_labels("mnli") == ["contradiction", "entailment", "neutral"]
    assert glue.get_labels("QNLI") == ["entailment", "not_entailment"]
    assert glue.get_labels("rte") == ["entailment", "not_entailment"]
    assert glue.get_labels("sts-b") is None
    assert glue.task_spec("stsb").is_regression and glue.task_spec("stsb").num_labels == 1
    assert glue.task_spec("SST-2").name == "sst2"
    with pytest.raises(ValueError, match="unknown GLUE task 'squad'"):
        glue.task_spec("squad")


def test_paper_metrics():
    # Table 1 of the paper: F1 for QQP and MRPC, Spearman for STS-B, MCC for CoLA, else accuracy.
    paper = {name: task.paper_metric for name, task in glue.TASKS.items()}
    assert paper == {"cola": "matthews_corrcoef", "sst2": "accuracy", "mrpc": "f1",
                     "stsb": "spearman", "qqp": "f1", "mnli": "accuracy", "qnli": "accuracy",
                     "rte": "accuracy", "wnli": "accuracy"}
    assert glue.task_spec("mnli").eval_splits == ("dev_matched", "dev_mismatched")


def test_cola_has_no_header_in_train_and_dev():
    train = glue.read_glue_examples("cola", GLUE_DIR, "train")
    assert [(e.text_a, e.text_b, e.label) for e in train] == [
        ("The cat sat on the mat.", None, "1"), ("The cat sat the mat on.", None, "0"),
        ("Which book did you read?", None, "1")]
    assert train[0].guid == "train-1"
    test = glue.read_glue_examples("cola", GLUE_DIR, "test")
    assert [(e.text_a, e.label) for e in test] == [("Books were read by everyone.", None)]


def test_sst2():
    examples = glue.read_glue_examples("sst2", GLUE_DIR, "dev")
    assert [(e.text_a, e.label) for e in examples] == [("it 's a charming journey . ", "1"),
                                                       ("the plot is a mess . ", "0")]
    assert examples[0].guid == "dev-2"  # line 1 is the header


def test_mrpc_real_rows_keep_quotes():
    examples = glue.read_glue_examples("mrpc", GLUE_DIR, "dev")
    assert len(examples) == 6
    assert examples[0].label == "1"
    assert examples[0].text_a.startswith("He said the foodservice pie business")
    # The second sentence starts with a double quote, which is not a quoting character here.
    assert examples[0].text_b.startswith('" The foodservice pie business')
    assert examples[1].label == "0"
    test = glue.read_glue_examples("mrpc", GLUE_DIR, "test")
    assert test[0].text_b == "Forecasters expect rain today ." and test[0].label is None


def test_stsb_scores_are_floats():
    examples = glue.read_glue_examples("stsb", GLUE_DIR, "dev")
    assert [e.label for e in examples] == [5.0, 4.75, 5.0, 2.4, 2.75, 2.615, 5.0, 2.333, 3.75]
    assert examples[0].text_a == "A man with a hard hat is dancing."
    assert examples[0].text_b == "A man wearing a hard hat is dancing."
    arrays = glue.examples_to_arrays(examples, "stsb")
    assert arrays["label"].dtype == np.float32
    assert glue.read_glue_examples("stsb", GLUE_DIR, "test")[0].label is None


def test_mnli_splits():
    train = glue.read_glue_examples("mnli", GLUE_DIR, "train")
    assert [e.label for e in train] == ["entailment", "contradiction", "neutral"]
    assert train[0].text_a == "The man is sleeping on the couch."
    assert train[0].text_b == "A man is resting."
    matched = glue.read_glue_examples("mnli", GLUE_DIR, "dev_matched")
    # gold_label is the last column, not label1 ("contradiction" vs the others' vote).
    assert [e.label for e in matched] == ["entailment", "contradiction"]
    mismatched = glue.read_glue_examples("mnli", GLUE_DIR, "dev_mismatched")
    assert [e.label for e in mismatched] == ["contradiction", "neutral"]
    test = glue.read_glue_examples("mnli", GLUE_DIR, "test_matched")
    assert test[0].label is None and test[0].text_b == "A child is reading."
    with pytest.raises(ValueError, match="mnli has no split 'dev'.*dev_matched"):
        glue.read_glue_examples("mnli", GLUE_DIR, "dev")


@pytest.mark.parametrize("task,text_a,text_b,label", [
    ("qqp", "How can I sleep better?", "What helps me sleep better?", "1"),
    ("qnli", "What is the capital of France?",
     "Paris is the capital and largest city of France.", "entailment"),
    ("rte", "The company was founded in 1998 by two students.",
     "The company was founded in 1998.", "entailment"),
    ("wnli", "The trophy didn't fit in the suitcase because it was too big.",
     "The trophy was too big.", "1"),
])
def test_pair_tasks(task, text_a, text_b, label):
    first = glue.read_glue_examples(task, GLUE_DIR, "dev")[0]
    assert (first.text_a, first.text_b, first.label) == (text_a, text_b, label)


def test_task_folder_or_glue_folder(tmp_path):
    # --data_dir may be the GLUE folder (with MRPC/ inside) or the MRPC folder itself.
    from_root = glue.read_glue_examples("mrpc", GLUE_DIR, "train")
    from_task = glue.read_glue_examples("mrpc", os.path.join(GLUE_DIR, "MRPC"), "train")
    assert from_root == from_task and len(from_root) == 2


def test_examples_to_arrays():
    examples = glue.read_glue_examples("mnli", GLUE_DIR, "train")
    arrays = glue.examples_to_arrays(examples, "mnli")
    assert arrays["text_a"].shape == (3,) and arrays["text_b"].shape == (3,)
    # contradiction=0, entailment=1, neutral=2.
    np.testing.assert_array_equal(arrays["label"], [1, 0, 2])
    assert arrays["label"].dtype == np.int32
    single = glue.examples_to_arrays(glue.read_glue_examples("sst2", GLUE_DIR, "train"), "sst2")
    assert set(single) == {"text_a", "label"}
    unlabelled = glue.examples_to_arrays(glue.read_glue_examples("sst2", GLUE_DIR, "test"), "sst2")
    assert set(unlabelled) == {"text_a"}


def test_compute_metrics_per_task():
    # CoLA: labels 1,1,1,0,0; predictions 1,0,1,1,0 -> TP 2, FN 1, FP 1, TN 1:
    # MCC = (2 - 1) / sqrt(3 * 3 * 2 * 2) = 1/6; accuracy 3/5.
    cola = glue.compute_metrics("cola", [1, 0, 1, 1, 0], [1, 1, 1, 0, 0])
    assert cola == pytest.approx({"matthews_corrcoef": 1 / 6, "accuracy": 0.6})
    # QQP: same counts, F1 = 2/3.
    assert glue.compute_metrics("qqp", [1, 0, 1, 1, 0], [1, 1, 1, 0, 0]) == pytest.approx(
        {"accuracy": 0.6, "f1": 2 / 3})
    # STS-B: Pearson of (1,2,3,4) and (2,4,5,9) = 11 / sqrt(130); ranks equal -> Spearman 1.
    stsb = glue.compute_metrics("stsb", np.array([[1.0], [2.0], [3.0], [4.0]]), [2, 4, 5, 9])
    assert stsb == pytest.approx({"pearson": 11 / np.sqrt(130), "spearman": 1.0})
    assert glue.compute_metrics("mnli", [0, 1, 2], [0, 1, 1]) == pytest.approx(
        {"accuracy": 2 / 3})
    with pytest.raises(ValueError, match="argmax"):
        glue.compute_metrics("sst2", np.zeros((3, 2)), [0, 1, 1])


def test_missing_split_file_names_the_paths(tmp_path):
    with pytest.raises(DataFormatError, match=r"rte train split not found: tried .*train\.tsv"):
        glue.read_glue_examples("rte", str(tmp_path), "train")


def test_wrong_column_count_names_file_and_line(tmp_path):
    path = _write(str(tmp_path / "dev.tsv"), [
        "index\tsentence1\tsentence2\tlabel",
        "0\tA dog barks.\tAn animal makes noise.\tentailment",
        "1\tA dog barks.\tnot_entailment"])
    with pytest.raises(DataFormatError) as error:
        glue.read_glue_examples("rte", str(tmp_path), "dev")
    assert f"{path}: line 3: expected 4 tab-separated fields, found 3" in str(error.value)


def test_unknown_label_names_file_and_line(tmp_path):
    path = _write(str(tmp_path / "dev.tsv"), ["sentence\tlabel", "good\t1", "bad\tnegative"])
    with pytest.raises(DataFormatError) as error:
        glue.read_glue_examples("sst2", str(tmp_path), "dev")
    assert f"{path}: line 3: label 'negative' is not one of ['0', '1']" in str(error.value)


def test_headerless_cola_row_with_missing_field(tmp_path):
    path = _write(str(tmp_path / "train.tsv"), ["gj04\t1\t\tFine.", "gj04\t1\tNo mark field."])
    with pytest.raises(DataFormatError, match=f"{path}: line 2: expected 4"):
        glue.read_glue_examples("cola", str(tmp_path), "train")


def test_bad_stsb_score(tmp_path):
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
    path = _write(str(tmp_path / "dev.tsv"), [header, "0\tg\tf\ty\t1\tn\tn\tA.\tB.\tfive"])
    with pytest.raises(DataFormatError, match=f"{path}: line 2: score 'five' is not a number"):
        glue.read_glue_examples("stsb", str(tmp_path), "dev")


def test_skip_malformed_rows(tmp_path, caplog):
    _write(str(tmp_path / "dev.tsv"), ["sentence\tlabel", "good\t1", "broken", "bad\t0"])
    examples = glue.read_glue_examples("sst2", str(tmp_path), "dev", skip_malformed=True)
    assert [e.text_a for e in examples] == ["good", "bad"]
    assert "skipped 1 malformed row" in caplog.text


def test_missing_header_column_and_empty_file(tmp_path):
    path = _write(str(tmp_path / "dev.tsv"), ["text\tlabel", "good\t1"])
    with pytest.raises(DataFormatError, match=f"{path}: line 1: header has no column 'sentence'"):
        glue.read_glue_examples("sst2", str(tmp_path), "dev")
    _write(str(tmp_path / "train.tsv"), [])
    with pytest.raises(DataFormatError, match="the file is empty"):
        glue.read_glue_examples("sst2", str(tmp_path), "train")


def test_byte_order_mark_and_crlf(tmp_path):
    with open(tmp_path / "dev.tsv", "wb") as f:
        f.write("\ufeffsentence\tlabel\r\ngood\t1\r\n".encode("utf-8"))
    examples = glue.read_glue_examples("sst2", str(tmp_path), "dev")
    assert [(e.text_a, e.label) for e in examples] == [("good", "1")]


def test_tfds_path_without_the_package():
    try:
        import tensorflow_datasets  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
    except ImportError:
        with pytest.raises(ImportError, match="tensorflow-datasets"):
            glue.read_glue_tfds("mrpc", "dev")
    else:
        pytest.skip("tensorflow-datasets is installed")


def test_to_tf_dataset():
    tf = required_module("tensorflow", "pip install -e .")
    from bert_keras.finetuning.tasks import to_tf_dataset
    arrays = glue.examples_to_arrays(glue.read_glue_examples("mrpc", GLUE_DIR, "train"), "mrpc")
    labels = arrays.pop("label")
    dataset = to_tf_dataset(arrays, labels).batch(2)
    features, batch_labels = next(iter(dataset))
    assert features["text_a"].dtype == tf.string
    assert batch_labels.numpy().tolist() == [1, 0]
