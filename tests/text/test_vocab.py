"""Vocabulary files: special ids, sizes and the casing check shared by the tools."""

import pytest

from bert_keras.text.vocab import Vocabulary, VocabularyError

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]"]


def test_casing_is_read_from_the_tokens():
    assert Vocabulary(SPECIAL + ["hello", "##s", "é"]).is_uncased()
    assert not Vocabulary(SPECIAL + ["hello", "Hello"]).is_uncased()


def test_casing_that_cannot_be_the_vocabularys_is_refused():
    cased = Vocabulary(SPECIAL + ["hello", "Hello"], path="cased/vocab.txt")
    uncased = Vocabulary(SPECIAL + ["hello"], path="uncased/vocab.txt")
    cased.check_casing(False)
    uncased.check_casing(True)
    with pytest.raises(VocabularyError, match=r"cased/vocab.txt is a cased vocabulary.*--nodo_lower_case"):
        cased.check_casing(True)
    with pytest.raises(VocabularyError, match=r"uncased/vocab.txt is an uncased vocabulary.*--do_lower_case"):
        uncased.check_casing(False)


def test_special_ids():
    assert Vocabulary(SPECIAL).special_ids() == {
        "padding_id": 0, "unknown_id": 1, "start_of_sequence_id": 2, "end_of_segment_id": 3,
        "mask_id": 4}


def test_a_byte_order_mark_or_a_directory_is_named_not_misread(tmp_path):
    """A vocab.txt saved with a byte-order mark was reported as "missing [PAD]"."""
    from bert_keras.text.vocab import Vocabulary, VocabularyError

    path = tmp_path / "vocab.txt"
    path.write_bytes("\ufeff[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n".encode("utf-8"))
    with pytest.raises(VocabularyError, match="line 1 starts with a byte-order mark"):
        Vocabulary.from_file(path)
    with pytest.raises(VocabularyError, match="a directory, not a vocabulary file"):
        Vocabulary.from_file(tmp_path)
