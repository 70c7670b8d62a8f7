"""CoNLL-2003 reader, first-wordpiece features, per-word predictions and entity scores."""

import os

import numpy as np
import pytest

from bert_keras.finetuning.conll import data as conll
from bert_keras.finetuning.tasks.common import IGNORE_LABEL_ID, DataFormatError
from bert_keras.metrics.conll_eval import evaluate
from helpers.reference_tokenization import ReferenceWordTokenizer
from helpers.support import TESTS_DIR

CONLL_DIR = os.path.join(TESTS_DIR, "fixtures", "conll")
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "acme", "robot", "##ics", "opens",
         "office", "in", "lisbon", ".", "maria", "silva", "said", ":", "fans", "cheered", "for",
         "spain", "portugal", "and", "french", "teams"]
TOKENIZER = ReferenceWordTokenizer(VOCAB)
# Label ids in CONLL2003_LABELS order.
O, B_PER, I_PER, B_ORG, I_ORG, B_LOC, I_LOC, B_MISC, I_MISC = range(9)
X = IGNORE_LABEL_ID


def _sentences():
    return conll.read_conll_split(CONLL_DIR, "dev")


def test_read_fixture():
    sentences = _sentences()
    assert [s.words for s in sentences] == [
        ["Acme", "Robotics", "opens", "office", "in", "Lisbon", "."],
        ["Maria", "Silva", "said", ":"],
        ["Fans", "cheered", "for", "Spain", "Portugal", "and", "French", "teams", "."]]
    assert sentences[0].tags == ["I-ORG", "I-ORG", "O", "O", "O", "I-LOC", "O"]
    assert sentences[2].tags[3:5] == ["I-LOC", "B-LOC"]  # IOB1: B- between two LOCs
    assert [s.document for s in sentences] == [1, 1, 2]
    assert [s.line for s in sentences] == [3, 11, 18]


def test_features_label_the_first_wordpiece():
    features = conll.create_conll_features(_sentences()[:1], TOKENIZER, VOCAB, max_seq_length=12)
    (feature,) = features
    # [CLS] acme robot ##ics opens office in lisbon . [SEP] [PAD] [PAD]
    assert [VOCAB[i] for i in feature.input_ids] == [
        "[CLS]", "acme", "robot", "##ics", "opens", "office", "in", "lisbon", ".", "[SEP]",
        "[PAD]", "[PAD]"]
    assert feature.label_ids == [X, I_ORG, I_ORG, X, O, O, O, I_LOC, O, X, X, X]
    assert feature.word_ids == [-1, 0, 1, -1, 2, 3, 4, 5, 6, -1, -1, -1]
    assert feature.input_mask == [1] * 10 + [0] * 2
    arrays = conll.features_to_arrays(features)
    assert arrays["label_weights"][0].tolist() == [0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 0, 0]
    assert arrays["input_word_ids"].dtype == np.int32 and arrays["input_word_ids"].shape == (1, 12)


def test_long_sentences_are_split_at_word_boundaries():
    sentences = _sentences()
    # Room for 6 - 2 = 4 wordpieces: sentence 0 (8 pieces) -> "acme robot ##ics opens" +
    # "office in lisbon ."; sentence 1 (4) -> 1; sentence 2 (9) -> 4 + 4 + 1.
    features = conll.create_conll_features(sentences, TOKENIZER, VOCAB, max_seq_length=6)
    assert [f.sentence_index for f in features] == [0, 0, 1, 2, 2, 2]
    assert features[1].word_ids == [-1, 3, 4, 5, 6, -1]
    assert features[5].word_ids == [-1, 8, -1, -1, -1, -1]


def test_predictions_back_to_words_and_scores():
    sentences = _sentences()
    features = conll.create_conll_features(sentences, TOKENIZER, VOCAB, max_seq_length=6)
    arrays = conll.features_to_arrays(features)
    predicted = np.where(arrays["label_ids"] == X, O, arrays["label_ids"])
    # A different prediction on "##ics" (not a first wordpiece) is ignored.
    predicted[0, 3] = B_MISC
    tags = conll.predictions_to_tags(features, predicted, sentences)
    gold = [s.tags for s in sentences]
    assert tags == gold
    assert evaluate(gold, tags)["f1"] == 100.0
    # Predict "Portugal" as I-LOC: "Spain Portugal" becomes one LOC chunk.
    # Gold chunks 6 (ORG, LOC | PER | LOC, LOC, MISC), predicted 5, correct 4:
    # P = 80%, R = 66.67%, F1 = 2 * 0.8 * (2/3) / (0.8 + 2/3) = 8/11.
    row, position = 4, features[4].word_ids.index(4)
    predicted[row, position] = I_LOC
    tags = conll.predictions_to_tags(features, predicted, sentences)
    assert tags[2][4] == "I-LOC"
    scores = evaluate(gold, tags)
    assert scores["precision"] == pytest.approx(80.0)
    assert scores["recall"] == pytest.approx(200 / 3)
    assert scores["f1"] == pytest.approx(800 / 11)


def test_word_the_tokenizer_drops_still_gets_a_position():
    sentence = conll.Sentence(["Maria", "\u200b"], ["B-PER", "O"])
    (feature,) = conll.create_conll_features([sentence], TOKENIZER, VOCAB, max_seq_length=5)
    assert [VOCAB[i] for i in feature.input_ids] == ["[CLS]", "maria", "[UNK]", "[SEP]", "[PAD]"]
    assert feature.label_ids == [X, B_PER, O, X, X]


def test_malformed_line_names_file_and_line(tmp_path):
    path = tmp_path / "eng.train"
    path.write_text("-DOCSTART- -X- -X- O\n\nEU NNP I-NP I-ORG\nrejects VBZ O\n")
    with pytest.raises(DataFormatError, match=f"{path}: line 4: expected 4 space-separated"):
        conll.read_conll_file(str(path))


def test_unknown_tag_names_file_and_line(tmp_path):
    path = tmp_path / "eng.train"
    path.write_text("Paris NNP I-NP I-CITY\n")
    with pytest.raises(DataFormatError, match=f"{path}: line 1: tag 'I-CITY' is not one of"):
        conll.read_conll_file(str(path))
    # Another tag set is fine when given.
    assert conll.read_conll_file(str(path), label_list=["O", "I-CITY"])[0].tags == ["I-CITY"]


def test_missing_split():
    with pytest.raises(DataFormatError, match=r"CoNLL-2003 train split not found: no eng\.train "
                       r"or train\.txt in .*conll"):
        conll.read_conll_split(CONLL_DIR, "train")
    with pytest.raises(ValueError, match="unknown CoNLL-2003 split 'validation'"):
        conll.read_conll_split(CONLL_DIR, "validation")


def test_the_train_dev_test_txt_layout_reads_the_same(tmp_path):
    with open(os.path.join(CONLL_DIR, "eng.testa"), encoding="utf-8") as f:
        text = f.read()
    (tmp_path / "valid.txt").write_text(text, encoding="utf-8")
    assert conll.read_conll_split(str(tmp_path), "dev") == _sentences()
    assert conll.split_path(str(tmp_path), "test") is None
    (tmp_path / "eng.testa").write_text(text, encoding="utf-8")  # two candidates: ambiguous
    with pytest.raises(DataFormatError, match=r"dev split: .*eng\.testa and .*valid\.txt are both"):
        conll.read_conll_split(str(tmp_path), "dev")


def test_prediction_shape_is_checked():
    sentences = _sentences()
    features = conll.create_conll_features(sentences, TOKENIZER, VOCAB, max_seq_length=16)
    with pytest.raises(ValueError, match="expected predicted ids of shape"):
        conll.predictions_to_tags(features, np.zeros((1, 16), np.int32), sentences)
