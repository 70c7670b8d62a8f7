"""Reading raw text as documents and blocks; splitting paragraphs into sentences."""

from bert_keras.data import corpus as pc
from bert_keras.text.sentence_splitting import split_sentences
from helpers.pretraining_data_fixtures import fixture_path


def documents_of(tmp_path, data, input_format, **kwargs):
    path = tmp_path / "corpus.txt"
    path.write_bytes(data)
    stats = pc.CorpusStats()
    return list(pc.iter_documents([str(path)], input_format, stats=stats, **kwargs)), stats


def test_sentence_format_documents_and_invalid_utf8(tmp_path):
    data = b"One.\nTwo \xff.\n\n\n  \nThree.\n"
    documents, stats = documents_of(tmp_path, data, "sentences")
    assert documents == [["One.", "Two \ufffd."], ["Three."]]
    assert stats.invalid_utf8_lines == 1 and stats.skipped_lines == 0 and stats.documents == 2
    documents, stats = documents_of(tmp_path, data, "sentences", utf8_errors="skip")
    assert documents == [["One."], ["Three."]] and stats.skipped_lines == 1


def test_paragraph_format_titles_and_headings(tmp_path):
    data = (" = First = \n \n Para one . \n = = Section = = \n Para two . \n"
            " = = = Sub = = = \n = Second = \n Para three . \n").encode()
    documents, stats = documents_of(tmp_path, data, "paragraphs")
    assert documents == [["Para one .", "Para two ."], ["Para three ."]]
    assert stats.headings == 4


def test_every_file_starts_a_document(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("A1.\nA2.\n")
    b.write_text("B1.\n")
    assert list(pc.iter_documents([str(a), str(b)], "sentences")) == [["A1.", "A2."], ["B1."]]


def test_blocks_are_bounded_and_cut_long_documents():
    stats = pc.CorpusStats()
    blocks = list(pc.iter_blocks([fixture_path("wikitext.txt")], "paragraphs", 4096, stats=stats))
    assert [b.index for b in blocks] == list(range(len(blocks)))
    # A block passes the size by at most its last paragraph (pieces of a long document) or
    # stays under twice the size (whole documents).
    longest_line = max(len(line) for line in open(fixture_path("wikitext.txt"), encoding="utf-8"))
    assert all(b.num_bytes < 2 * 4096 + longest_line for b in blocks)
    lines = [line for b in blocks for d in b.documents for line in d]
    documents = list(pc.iter_documents([fixture_path("wikitext.txt")], "paragraphs"))
    assert lines == [line for d in documents for line in d]  # nothing lost or repeated
    assert stats.documents == 4 and stats.split_documents > 0


def test_only_documents_as_large_as_a_block_are_cut(tmp_path):
    path = tmp_path / "corpus.txt"
    small = ["s" * 9] * 3              # 30 bytes with the newlines
    large = ["L" * 19] * 6             # 120 bytes
    path.write_text("\n\n".join("\n".join(d) for d in [small, small, large, small]) + "\n")
    stats = pc.CorpusStats()
    blocks = list(pc.iter_blocks([str(path)], "sentences", 50, stats=stats))
    # Two small documents reach 50 bytes together and close a block; the large one is cut
    # into pieces of its own; the last small one ends the file.
    assert [b.documents for b in blocks] == [[small, small], [large[:3]], [large[3:]], [small]]
    assert stats.split_documents == 1
    assert [b.key for b in blocks] == [(0, 0), (0, 1), (0, 2), (0, 3)]


def test_sentence_splitting():
    assert split_sentences("The U.S. Army left. Then Mr. J. Smith arrived at 5 p.m. today.") == [
        "The U.S. Army left.", "Then Mr. J. Smith arrived at 5 p.m. today."]
    assert split_sentences('He said " Stop ! " and left . " Why ? " she asked .') == [
        'He said " Stop ! " and left .', '" Why ? " she asked .']
    assert split_sentences("Pi is 3.14 and e is 2.72. Both are irrational.") == [
        "Pi is 3.14 and e is 2.72.", "Both are irrational."]
    assert split_sentences("   ") == []
    assert split_sentences("no final stop") == ["no final stop"]
