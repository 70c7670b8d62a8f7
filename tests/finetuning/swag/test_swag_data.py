"""SWAG CSV reader, its errors, the 4-choice arrays and pair packing."""

import os

import numpy as np
import pytest

from bert_keras.finetuning.swag import data as swag
from bert_keras.finetuning.tasks.common import DataFormatError
from bert_keras.finetuning.tasks.encoding import encode_texts
from bert_keras.metrics.classification import accuracy
from helpers.reference_tokenization import ReferenceWordTokenizer
from helpers.support import TESTS_DIR

SWAG_DIR = os.path.join(TESTS_DIR, "fixtures", "swag")
HEADER = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label"


def _write(tmp_path, text, name="val.csv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_read_validation_file():
    examples = swag.read_swag_examples(os.path.join(SWAG_DIR, "val.csv"))
    assert [e.label for e in examples] == [0, 1, 2]
    first = examples[0]
    assert first.example_id == "0"
    assert first.context == "The chef cracks an egg into the pan."
    # Candidate k = sent2 + " " + ending k; quoted fields keep their commas.
    assert first.endings == ["He stirs it slowly, then adds salt.", "He jumps over the moon.",
                             "He sings to the audience.", "He closes the window."]
    assert examples[2].context == "Someone opens the door, smiling."
    assert examples[2].endings[2] == "The dog runs out, barking happily."


def test_test_file_has_no_labels():
    examples = swag.read_swag_examples(os.path.join(SWAG_DIR, "test.csv"))
    assert len(examples) == 1 and examples[0].label is None
    assert examples[0].endings[0] == "It rolls into the goal."
    assert "label" not in swag.examples_to_arrays(examples)


def test_arrays_and_accuracy():
    examples = swag.read_swag_examples(os.path.join(SWAG_DIR, "val.csv"))
    arrays = swag.examples_to_arrays(examples)
    assert arrays["text_a"].shape == (3, 4) and arrays["text_b"].shape == (3, 4)
    assert list(arrays["text_a"][1]) == ["A girl ties her skates at the rink."] * 4
    assert arrays["text_b"][1, 1] == "She steps onto the ice and glides away."
    np.testing.assert_array_equal(arrays["label"], [0, 1, 2])
    # Scores [3, 4]: argmax picks choices 0, 3, 2 -> 2 of 3 right.
    scores = np.array([[5, 1, 0, 0], [0, 1, 2, 3], [0, 0, 9, 1]])
    assert accuracy(scores.argmax(-1), arrays["label"]) == pytest.approx(2 / 3)


def test_encode_choice_pairs():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d", "."]
    text_a = np.array([["a b", "a b"]], dtype=object)
    text_b = np.array([["c .", "d d d d"]], dtype=object)
    arrays = encode_texts(text_a, text_b, ReferenceWordTokenizer(vocab), vocab, max_seq_length=8)
    assert arrays["input_word_ids"].shape == (1, 2, 8)
    # [CLS] a b [SEP] c . [SEP] [PAD]
    assert arrays["input_word_ids"][0, 0].tolist() == [2, 5, 6, 3, 7, 9, 3, 0]
    assert arrays["input_type_ids"][0, 0].tolist() == [0, 0, 0, 0, 1, 1, 1, 0]
    assert arrays["input_mask"][0, 0].tolist() == [1, 1, 1, 1, 1, 1, 1, 0]
    # 2 + 4 wordpieces > 8 - 3 = 5: the longer text (B) loses one -> [CLS] a b [SEP] d d d [SEP]
    assert arrays["input_word_ids"][0, 1].tolist() == [2, 5, 6, 3, 8, 8, 8, 3]


def test_pair_truncation_takes_from_the_longer_text():
    text_a, text_b = np.array([["a b c a b"]]), np.array([["c c"]])
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"]
    arrays = encode_texts(text_a, text_b, lambda word: [vocab.index(word)], vocab, max_seq_length=7)
    # 7 -> 4 wordpieces: A is longer three times (5>2, 4>2, 3>2) -> A keeps "a b".
    assert arrays["input_word_ids"][0, 0].tolist() == [2, 5, 6, 3, 7, 7, 3]
    arrays = encode_texts(np.array([["a b"]]), np.array([["c a"]]), lambda word: [vocab.index(word)],
                          vocab, max_seq_length=6)
    # Equal lengths: B loses first.
    assert arrays["input_word_ids"][0, 0].tolist() == [2, 5, 6, 3, 7, 3]


def test_bad_label_names_file_and_line(tmp_path):
    path = _write(tmp_path, HEADER + "\n0,v,1,s,Ctx.,He,gold,a,b,c,d,0\n1,v,1,s,Ctx.,He,gold,a,b,c,d,4\n")
    with pytest.raises(DataFormatError, match=f"{path}: line 3: label '4' is not 0, 1, 2 or 3"):
        swag.read_swag_examples(path)


def test_wrong_field_count_names_file_and_line(tmp_path):
    path = _write(tmp_path, HEADER + "\n0,v,1,s,Ctx.,He,gold,a,b,c,0\n")
    with pytest.raises(DataFormatError, match=f"{path}: line 2: expected 12 fields, found 11"):
        swag.read_swag_examples(path)


def test_line_numbers_count_quoted_line_breaks(tmp_path):
    # A quoted field spanning two lines: the bad row is on physical line 4.
    path = _write(tmp_path, HEADER + '\n0,v,1,s,"Ctx\nmore.",He,gold,a,b,c,d,0\n1,v,1,s,C,He,gold,a,b,c,d,x\n')
    with pytest.raises(DataFormatError, match=f"{path}: line 4: label 'x'"):
        swag.read_swag_examples(path)


def test_bad_header_and_missing_file(tmp_path):
    path = _write(tmp_path, "a,b,c\n1,2,3\n")
    with pytest.raises(DataFormatError, match="header lacks column"):
        swag.read_swag_examples(path)
    with pytest.raises(DataFormatError, match="SWAG CSV file not found"):
        swag.read_swag_examples(str(tmp_path / "train.csv"))
    with pytest.raises(DataFormatError, match="the file is empty"):
        swag.read_swag_examples(_write(tmp_path, "", "empty.csv"))
