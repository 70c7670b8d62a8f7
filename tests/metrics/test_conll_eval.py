"""conlleval-style entity scores on hand-worked tag sequences."""

import pytest

from bert_keras.metrics import conll_eval as ce


def test_split_tag():
    assert ce.split_tag("B-PER") == ("B", "PER")
    assert ce.split_tag("I-B-X") == ("I", "B-X")
    assert ce.split_tag("O") == ("O", "")


def test_iob2_chunks():
    assert ce.extract_chunks(["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC"]) == {
        ("PER", 0, 1), ("LOC", 3, 3), ("LOC", 4, 5)}


def test_iob1_chunks():
    # I- after O starts an entity; B- separates two adjacent entities of one type.
    assert ce.extract_chunks(["I-PER", "I-PER", "B-PER", "O", "I-LOC"]) == {
        ("PER", 0, 1), ("PER", 2, 2), ("LOC", 4, 4)}


def test_type_change_ends_and_starts_a_chunk():
    assert ce.extract_chunks(["I-PER", "I-LOC"]) == {("PER", 0, 0), ("LOC", 1, 1)}
    assert ce.extract_chunks(["B-PER", "I-ORG", "I-ORG"]) == {("PER", 0, 0), ("ORG", 1, 2)}


def test_iobes_chunks():
    assert ce.extract_chunks(["S-PER", "B-LOC", "E-LOC", "S-LOC"]) == {
        ("PER", 0, 0), ("LOC", 1, 2), ("LOC", 3, 3)}


def test_scores_iob2():
    gold = [["B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG", "I-ORG"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG", "O", "B-ORG", "O"]]
    # gold chunks: PER 0-1, LOC 3-3, ORG 5-6; predicted: PER 0-1, ORG 3-3, ORG 5-5.
    # Only PER 0-1 matches (ORG 5-5 ends too early): P = R = F1 = 1/3 = 33.33%.
    # Token accuracy: equal at 0, 1, 2, 4, 5 -> 5/7.
    scores = ce.evaluate(gold, pred)
    assert scores["precision"] == pytest.approx(100 / 3)
    assert scores["recall"] == pytest.approx(100 / 3)
    assert scores["f1"] == pytest.approx(100 / 3)
    assert scores["accuracy"] == pytest.approx(500 / 7)
    assert (scores["num_gold"], scores["num_predicted"], scores["num_correct"]) == (3, 3, 1)
    per_type = scores["per_type"]
    assert per_type["PER"]["f1"] == pytest.approx(100.0)
    # LOC: 1 gold, 0 predicted -> precision 0 (undefined), recall 0, F1 0.
    assert (per_type["LOC"]["precision"], per_type["LOC"]["recall"], per_type["LOC"]["f1"]) == \
        (0.0, 0.0, 0.0)
    # ORG: 2 predicted, 1 gold, 0 correct.
    assert (per_type["ORG"]["num_predicted"], per_type["ORG"]["num_gold"]) == (2, 1)


def test_scores_over_several_sentences():
    gold = [["I-ORG", "I-ORG", "O", "I-PER"],        # ORG 0-1, PER 3-3
            ["I-LOC", "B-LOC", "O"],                 # LOC 0-0, LOC 1-1
            ["O", "O"]]
    pred = [["B-ORG", "I-ORG", "O", "B-PER"],        # ORG 0-1 ok, PER 3-3 ok (IOB2 = IOB1 here)
            ["B-LOC", "I-LOC", "B-MISC"],            # LOC 0-1 wrong, MISC 2-2 wrong
            ["B-PER", "O"]]                          # PER 0-0 wrong
    # gold 4, predicted 5, correct 2: P = 40%, R = 50%, F1 = 2 * 40 * 50 / 90 = 44.44%.
    scores = ce.evaluate(gold, pred)
    assert scores["precision"] == pytest.approx(40.0)
    assert scores["recall"] == pytest.approx(50.0)
    assert scores["f1"] == pytest.approx(4000 / 90)


def test_entities_do_not_run_across_sentences():
    # Each sentence ends as if followed by "O": two one-word entities, not one.
    scores = ce.evaluate([["I-PER"], ["I-PER"]], [["I-PER"], ["I-PER"]])
    assert scores["num_gold"] == 2 and scores["f1"] == 100.0


def test_no_predicted_entities():
    scores = ce.evaluate([["B-PER", "O"]], [["O", "O"]])
    assert (scores["precision"], scores["recall"], scores["f1"]) == (0.0, 0.0, 0.0)
    assert scores["accuracy"] == 50.0


def test_length_mismatch_raises():
    with pytest.raises(ValueError, match="sentence 0: 2 gold tags but 1 predicted"):
        ce.evaluate([["O", "O"]], [["O"]])
    with pytest.raises(ValueError, match="1 gold sentences but 2 predicted"):
        ce.evaluate([["O"]], [["O"], ["O"]])
