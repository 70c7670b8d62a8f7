"""SQuAD reader and windowed features on hand-worked examples."""

import json
import logging
import os

import numpy as np
import pytest

from bert_keras.finetuning.squad import data as squad
from bert_keras.finetuning.tasks.common import DataFormatError
from helpers.reference_tokenization import ReferenceWordTokenizer
from helpers.support import TESTS_DIR

SQUAD_DIR = os.path.join(TESTS_DIR, "fixtures", "squad")
V2_SAMPLE = os.path.join(SQUAD_DIR, "squad_v2_dev_sample.json")
V1_SMALL = os.path.join(SQUAD_DIR, "train_v1_small.json")
GREEK = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
VOCAB = (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "which", "when", "was", "born", "?",
          "nikola", "tesla", "(", "1856", "-", "1943", ")", "an", "inventor", "."] + GREEK)
TOKENIZER = ReferenceWordTokenizer(VOCAB)
CONTEXT = "Alpha Beta Gamma Delta Epsilon Zeta Eta Theta Iota Kappa"


def _data(context, qas, is_training=True, version_2_with_negative=False):
    return squad.squad_data_from_json(
        {"version": "x", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]},
        is_training, version_2_with_negative)


def _question(qid, question, answer=None, start=None, impossible=False):
    answers = [] if answer is None else [{"text": answer, "answer_start": start}]
    return {"id": qid, "question": question, "answers": answers, "is_impossible": impossible}


def test_split_context_like_the_original_reader():
    tokens, offsets = squad.split_context(" ab  c\u202fd\n")
    assert tokens == ["ab", "c", "d"]
    # Whitespace belongs to the word before it (-1 before the first word).
    assert offsets == [-1, 0, 0, 0, 0, 1, 1, 2, 2]


def test_read_v2_dev_sample():
    data = squad.read_squad(V2_SAMPLE, is_training=False, version_2_with_negative=True)
    assert len(data.examples) == 14 and not data.skipped and data.version == "v2.0"
    assert sum(e.is_impossible for e in data.examples) == 6
    first = data.examples[0]
    assert first.qas_id == "56ddde6b9a695914005b9628"
    assert first.answers == ["France"]
    # Gold answers kept for evaluation; the raw "data" list is kept for the official metric.
    assert data.dataset[0]["title"] == "Normans"
    training = squad.read_squad(V2_SAMPLE, is_training=True, version_2_with_negative=True)
    assert len(training.examples) == 14 and not training.skipped
    france = training.examples[0]
    assert france.doc_tokens[france.start_position] == "France."
    assert training.examples[3].start_position == -1 and training.examples[3].is_impossible


def test_training_skips_answers_that_do_not_match_the_context(caplog):
    with caplog.at_level(logging.WARNING):
        data = squad.read_squad(V1_SMALL, is_training=True)
    assert [e.qas_id for e in data.examples] == ["letters-1", "letters-4", "tesla-1"]
    assert [s.qas_id for s in data.skipped] == ["letters-2", "letters-3"]
    assert "answer_start does not match the context" in data.skipped[0].reason
    assert "outside the context" in data.skipped[1].reason
    assert "skipping question letters-2" in caplog.text
    assert "2 training question(s) skipped" in caplog.text
    two = data.examples[1]
    assert (two.start_position, two.end_position, two.orig_answer_text) == (4, 5, "Epsilon Zeta")
    # Evaluation keeps every question.
    assert len(squad.read_squad(V1_SMALL, is_training=False).examples) == 5


def test_windows_max_context_and_positions():
    # 10 one-wordpiece words, question "which" (1 wordpiece): room for 9 - 1 - 3 = 5 document
    # tokens per window, windows 2 apart: doc tokens 0-4, 2-6, 4-8, 6-9.
    data = _data(CONTEXT, [_question("q", "which", "Zeta Eta", CONTEXT.index("Zeta"))])
    features = squad.create_squad_features(data.examples, TOKENIZER, VOCAB, max_seq_length=9,
                                           doc_stride=2, max_query_length=4, is_training=True)
    assert [f.doc_span_index for f in features] == [0, 1, 2, 3]
    assert features[1].tokens == ["[CLS]", "which", "[SEP]", "gamma", "delta", "epsilon",
                                  "zeta", "eta", "[SEP]"]
    assert features[3].tokens[-2:] == ["kappa", "[SEP]"] and features[3].input_ids[-1] == 0
    assert features[3].input_mask == [1] * 8 + [0]
    assert features[1].segment_ids == [0, 0, 0, 1, 1, 1, 1, 1, 1]
    # Document tokens start at position 3 (after [CLS] which [SEP]).
    assert features[2].token_to_orig_map == {3: 4, 4: 5, 5: 6, 6: 7, 7: 8}
    # Max context, score = min(left, right) + 0.01 * window length:
    #   token 3 (delta): window 0 min(3,1)+.05 = 1.05, window 1 min(1,3)+.05 = 1.05 -> first: 0
    #   token 4 (epsilon): 0.05 / 2.05 / 0.05 -> window 1
    #   token 5 (zeta): window 1 min(3,1) + .05 = 1.05, window 2 min(1,3) + .05 = 1.05 -> 1
    #   token 7 (theta): window 2 min(3,1) + .05 = 1.05, window 3 min(1,2) + .04 = 1.04 -> 2
    #   token 8 (iota): window 2 0.05, window 3 min(2,1) + .04 = 1.04 -> 3
    # so windows own words 0-3, 4-5, 6-7 and 8-9.
    owned = [[f.token_to_orig_map[p] for p, best in sorted(f.token_is_max_context.items()) if best]
             for f in features]
    assert owned == [[0, 1, 2, 3], [4, 5], [6, 7], [8, 9]]
    # Answer = doc tokens 5-6. Window 0 (0-4) and window 3 (6-9) miss part of it -> [CLS].
    # Window 1 (from 2): 3 + 5 - 2 = 6, 7. Window 2 (from 4): 4, 5.
    assert [(f.start_position, f.end_position) for f in features] == [(0, 0), (6, 7), (4, 5), (0, 0)]
    arrays = squad.features_to_arrays(features)
    assert arrays["input_word_ids"].shape == (4, 9) and arrays["input_word_ids"].dtype == np.int32
    np.testing.assert_array_equal(arrays["start_positions"], [0, 6, 4, 0])
    np.testing.assert_array_equal(arrays["feature_index"], [0, 1, 2, 3])
    assert [f.unique_id for f in features] == [1000000000, 1000000001, 1000000002, 1000000003]


def test_answer_span_is_tightened_to_the_answer_wordpieces():
    data = squad.read_squad(V1_SMALL, is_training=True)
    tesla = [e for e in data.examples if e.qas_id == "tesla-1"]
    (feature,) = squad.create_squad_features(tesla, TOKENIZER, VOCAB, max_seq_length=24,
                                             doc_stride=8, max_query_length=8, is_training=True)
    # The answer word is "(1856-1943)" = ( 1856 - 1943 ); the span shrinks to "1856" alone.
    assert feature.tokens[feature.start_position:feature.end_position + 1] == ["1856"]
    # [CLS] when was tesla born ? [SEP] nikola tesla ( 1856 ...: 1856 at 7 + 3 = 10.
    assert feature.start_position == 10


def test_unanswerable_questions_point_at_cls():
    data = _data(CONTEXT, [_question("q", "which", impossible=True)], version_2_with_negative=True)
    assert data.examples[0].start_position == -1
    features = squad.create_squad_features(data.examples, TOKENIZER, VOCAB, max_seq_length=9,
                                           doc_stride=2, max_query_length=4, is_training=True)
    assert {(f.start_position, f.end_position) for f in features} == {(0, 0)}
    assert all(f.is_impossible for f in features)


def test_impossible_training_question_needs_version_2():
    with pytest.raises(DataFormatError, match="is_impossible is true but version_2_with_negative"):
        _data(CONTEXT, [_question("q", "which", impossible=True)])


def test_query_truncation():
    data = _data(CONTEXT, [_question("q", "which which which which which")], is_training=False)
    (feature,) = squad.create_squad_features(data.examples, TOKENIZER, VOCAB, max_seq_length=20,
                                             doc_stride=4, max_query_length=2)
    assert feature.tokens[:4] == ["[CLS]", "which", "which", "[SEP]"]
    assert feature.start_position is None
    assert "start_positions" not in squad.features_to_arrays([feature])


def test_question_longer_than_the_sequence():
    data = _data(CONTEXT, [_question("q", "which " * 30)], is_training=False)
    with pytest.raises(ValueError, match=r"max_seq_length \(8\) must be larger than "
                                         r"max_query_length \(5\) \+ 3"):
        squad.create_squad_features(data.examples, TOKENIZER, VOCAB, max_seq_length=8,
                                    doc_stride=1, max_query_length=5)
    # A question cut to 4 wordpieces leaves 9 - 4 - 3 = 2 document tokens a window.
    features = squad.create_squad_features(data.examples, TOKENIZER, VOCAB, max_seq_length=9,
                                           doc_stride=2, max_query_length=4)
    assert len(features) == 5 and features[0].tokens[6:] == ["alpha", "beta", "[SEP]"]


def test_empty_context(caplog):
    qas = [_question("no", "which", impossible=True), _question("yes", "which", "x", 0)]
    with caplog.at_level(logging.WARNING):
        data = _data("", qas, version_2_with_negative=True)
    assert "empty context" in data.warnings[0] and "empty context" in caplog.text
    # The answerable question cannot be located in an empty context: skipped in training.
    assert [e.qas_id for e in data.examples] == ["no"]
    assert [s.qas_id for s in data.skipped] == ["yes"]
    (feature,) = squad.create_squad_features(data.examples, TOKENIZER, VOCAB, max_seq_length=8,
                                             doc_stride=2, max_query_length=3, is_training=True)
    assert feature.tokens == ["[CLS]", "which", "[SEP]", "[SEP]"]
    assert (feature.start_position, feature.end_position) == (0, 0)
    evaluation = _data("", qas, is_training=False, version_2_with_negative=True)
    assert len(evaluation.examples) == 2


def test_bad_json(tmp_path):
    path = tmp_path / "train.json"
    path.write_text('{"data": [}')
    with pytest.raises(DataFormatError, match=f"{path}: line 1 column 11: not valid JSON"):
        squad.read_squad(str(path), is_training=True)
    path.write_text(json.dumps({"data": [{"paragraphs": [{"context": "a", "qas": [{"id": "x"}]}]}]}))
    with pytest.raises(DataFormatError, match=r"data\[0\]\.paragraphs\[0\]\.qas\[0\]: missing "
                                              r"field 'question'"):
        squad.read_squad(str(path), is_training=False)
    with pytest.raises(DataFormatError, match="SQuAD JSON file not found"):
        squad.read_squad(str(tmp_path / "dev-v1.1.json"), is_training=False)


def test_training_question_with_two_answers_is_an_error():
    qa = {"id": "q", "question": "which", "answers": [{"text": "Beta", "answer_start": 6},
                                                      {"text": "Beta", "answer_start": 6}]}
    with pytest.raises(DataFormatError, match="needs exactly 1 answer, found 2"):
        _data(CONTEXT, [qa])


# Word tokenization used by the SQuAD and CoNLL features.

def test_word_tokenizer_is_the_in_graph_tokenizer_with_the_original_rules(tmp_path):
    from bert_keras.finetuning.tasks.words import WordTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "cafe", ",",
             "東", "京", "a", "##b"]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = WordTokenizer(str(path), do_lower_case=True)
    texts = ["UnAffable, Café東京", "unx", "a" + "b" * 200, "a" + "b" * 199]
    tokenizer.prepare(texts)
    # Lower-casing, accent stripping, punctuation split, CJK characters as words.
    assert tokenizer.tokenize_word("UnAffable,") == [5, 6, 7, 9]
    assert tokenizer.tokenize_word("Café東京") == [8, 10, 11]
    # A word with an unknown piece is [UNK] as a whole; so is a word over 200 characters.
    assert tokenizer.tokenize_word("unx") == [1]
    assert tokenizer.tokenize_word("a" + "b" * 200) == [1]
    assert tokenizer.tokenize_word("a" + "b" * 199) == [12] + [13] * 199
    # A word `prepare` did not see is tokenized on demand.
    assert tokenizer.tokenize_word("cafe,un") == [8, 9, 5]
    reference = ReferenceWordTokenizer(vocab)
    for word in ("UnAffable,", "Café東京", "unx", "cafe,un"):
        assert tokenizer.tokenize_word(word) == reference.tokenize_word(word)
    cased = WordTokenizer(str(path), do_lower_case=False)
    assert cased.tokenize_word("Cafe") == [1]
