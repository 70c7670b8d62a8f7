"""The WordPiece vocabulary builder: layout of special tokens, exact size, determinism, words
as BERT's basic tokenization splits them (Unicode spaces, control and format characters, CJK),
and the command line's errors on input that is not text."""

import collections
import gzip
import os
import re
import subprocess
import sys

import pytest

from bert_keras.text import unicode_tables, vocab_builder
from helpers.reference_tokenization import ReferenceWordTokenizer
from helpers.reference_tokenization import basic_tokenize as reference_words
from bert_keras.text.vocab import Vocabulary
from helpers.pretraining_data_fixtures import fixture_path, minilm_vocab_path
from helpers.support import REPO_ROOT as ROOT, TESTS_DIR



def test_unused_layout_matches_the_released_vocabulary():
    released = open(minilm_vocab_path(), encoding="utf-8").read().split("\n")
    reserved = vocab_builder.reserved_tokens(994)
    assert reserved == released[:len(reserved)]
    assert [reserved.index(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [
        0, 100, 101, 102, 103]
    assert vocab_builder.reserved_tokens(0) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert vocab_builder.reserved_tokens(2) == ["[PAD]", "[unused0]", "[unused1]", "[UNK]",
                                                "[CLS]", "[SEP]", "[MASK]"]


def test_basic_tokenization_of_word_counts(tmp_path):
    path = tmp_path / "text.txt"
    path.write_bytes("Héllo, WORLD! 中文 $5+3\x00 hello\n".encode() + b"bad \xff byte\n")
    lower = vocab_builder.count_words([str(path)], lower_case=True, progress=False)
    assert lower == {"hello": 2, ",": 1, "world": 1, "!": 1, "中": 1, "文": 1, "$": 1, "5": 1,
                     "+": 1, "3": 1, "bad": 1, "byte": 1}
    cased = vocab_builder.count_words([str(path)], lower_case=False, progress=False)
    assert cased["Héllo"] == 1 and cased["WORLD"] == 1 and cased["hello"] == 1


def test_words_are_the_original_basic_tokenization_of_real_text():
    """Real WikiText lines with non-ASCII characters and the real MRPC dev set (with its BOM),
    word for word as the original algorithm splits them, cased and uncased."""
    texts = [open(os.path.join(TESTS_DIR, "fixtures", name), encoding="utf-8").read()
             for name in ("wikitext_sample.txt", os.path.join("mrpc_dev", "dev.tsv"))]
    for text in texts:
        for lower_case in (True, False):
            assert vocab_builder.split_words(text, lower_case) == reference_words(text, lower_case)


def test_counting_in_bounded_memory_gives_the_same_counts():
    text = open(fixture_path("wikitext.txt"), encoding="utf-8").read()
    whole = vocab_builder.WordCounter(lower_case=True)
    whole.add(text)
    folded = vocab_builder.WordCounter(lower_case=True, max_chunks=50)
    for line in text.splitlines(keepends=True):
        folded.add(line)
    assert folded.counts() == whole.counts() == collections.Counter(
        reference_words(text, lower_case=True))


def test_counts_of_other_strings_are_split_as_the_tokenizer_splits_them():
    """Counts from elsewhere may hold spaces, punctuation or control characters inside a
    "word"; no token may keep them."""
    counts = {"hair\u200aspace": 7, "tab\tbed": 5, "don't": 6, "soft\u00adhyphen": 4,
              "form\x0cfeed": 3, "plain": 9, " ": 8}
    vocabulary = vocab_builder.learn_vocabulary(counts, 120)
    assert len(vocabulary) == 120
    learned = [token for token in vocabulary if not token.startswith("[")]
    assert {"hair", "space", "tab", "bed", "don", "'", "t", "softhyphen", "formfeed",
            "plain"} <= set(learned)
    assert not [token for token in learned if any(
        char.isspace() or unicode_tables.is_removed(char) for char in token)
        or (len(token.removeprefix("##")) > 1 and "'" in token)]
    with pytest.raises(vocab_builder.VocabularyBuildError, match="no words"):
        vocab_builder.learn_vocabulary({" \u3000\x0c": 3}, 100)


@pytest.fixture(scope="module")
def fixture_counts():
    return vocab_builder.count_words([fixture_path("sample_text.txt")], lower_case=True,
                                     progress=False)


def test_learned_vocabulary_is_exact_deterministic_and_covers_the_text():
    counts = vocab_builder.count_words([fixture_path("wikitext.txt")], lower_case=True,
                                       progress=False)
    first = vocab_builder.learn_vocabulary(counts, 1500)
    second = vocab_builder.learn_vocabulary(dict(reversed(list(counts.items()))), 1500)
    assert first == second
    assert len(first) == 1500 and len(set(first)) == 1500
    assert first[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    characters = [token for token in first[5:] if len(token) == 1]
    assert first[5:5 + len(characters)] == sorted(characters), "the characters come first"
    vocabulary = Vocabulary(first)  # checks the special tokens and duplicates
    tokenizer = ReferenceWordTokenizer(vocabulary.tokens, do_lower_case=True)
    text = open(fixture_path("wikitext.txt"), encoding="utf-8").read()
    pieces = tokenizer.tokenize(text)
    assert pieces.count("[UNK]") == 0
    # Frequent words are whole tokens.
    assert {"the", "lobster", "of"} <= set(first)


def test_size_is_met_by_trimming_or_padding(fixture_counts):
    small = vocab_builder.learn_vocabulary(fixture_counts, 200, num_unused=10)
    assert len(small) == 200
    assert small[:1] == ["[PAD]"] and small[11:15] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    characters = {t for t in vocab_builder.learn_vocabulary(fixture_counts, 1000)
                  if vocab_builder._is_character_token(t)}
    assert characters <= set(small), "trimming never drops a character"
    large = vocab_builder.learn_vocabulary({"ab": 5, "cd": 5}, 30)
    assert len(large) == 30 and large[-1].startswith("[unused")
    with pytest.raises(vocab_builder.VocabularyBuildError, match="too small"):
        vocab_builder.learn_vocabulary(fixture_counts, 40)
    with pytest.raises(vocab_builder.VocabularyBuildError, match="no words"):
        vocab_builder.learn_vocabulary({}, 100)


def run_tool(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "tools", "build_vocab.py"), *args],
                          capture_output=True, text=True, timeout=300)


def test_cli_builds_a_vocabulary_the_same_in_every_run(tmp_path):
    outputs = [tmp_path / "vocab.txt", tmp_path / "again.txt"]
    for output in outputs:
        result = run_tool(f"--input_files={fixture_path('sample_text.txt')}", "--vocab_size=300",
                          f"--output={output}", "--lower_case", "--noprogress")
        assert result.returncode == 0, result.stderr
    tokens = outputs[0].read_text(encoding="utf-8").split("\n")[:-1]
    assert len(tokens) == 300 and tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert outputs[1].read_bytes() == outputs[0].read_bytes(), "another process, the same file"


def _text_with_unicode_spaces():
    """Real text (WikiText lines, the original BERT sample corpus with its CJK words) set the way
    typography and file formats use Unicode spaces and control and format characters: thin
    spaces around en dashes, hair spaces around em dashes, no-break spaces between numbers and
    units, ideographic spaces between Japanese phrases, a byte-order mark, form feeds between
    pages, soft hyphens, zero-width and line separators, a bell and a unit separator."""
    wikitext = open(os.path.join(TESTS_DIR, "fixtures", "wikitext_sample.txt"),
                    encoding="utf-8").read().splitlines()
    lines = []
    for line in wikitext[:200]:
        line = line.replace(" – ", "\u2009–\u2009").replace(" — ", "\u200a—\u200a")
        lines.append(re.sub(r"(\d) (cm|km|kg|lb|in|m|%)\b", "\\1\u00a0\\2", line))
    sample = open(fixture_path("sample_text.txt"), encoding="utf-8").read()
    japanese = ["東京\u3000大阪\u3000京都\u3000名古屋", "第一章\u3000雨の日に図書館で古い本を読んだ。",
                "日本語の文では全角の空白\u3000（U+3000）で語句を区切ることがある。"]
    extra = ["Section\u00a07 of the report: 5\u00a0% growth, 3\u2009000\u2009km of road.",
             "com\u00adpu\u00adta\u00adtion and zero\u200bwidth\u200bspaces and a\u200djoiner",
             "the end of one page.\x0cThe start of the next\x0cpage",
             "line\u2028separator and paragraph\u2029separator, a bell\x07 and a unit\x1fseparator"]
    return "\ufeff" + "\n".join(lines + japanese + extra) + "\n\n" + sample


@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_vocabulary_of_text_with_unicode_spaces_loads_in_the_tokenizer(tmp_path, lower_case):
    """The builder never writes a token that the vocabulary reader or the tokenizer cannot take:
    none is empty or holds whitespace or a character the tokenizer removes, every learned token
    is a piece of a word of the tokenizer's own split, and the tokenizer covers the text."""
    from bert_keras.text.tokenizer import BertTokenizer

    text = _text_with_unicode_spaces()
    for char in "\u00a0\u2009\u200a\u3000\ufeff\u00ad\u200b\x0c\x07\u2028東":
        assert char in text
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text, encoding="utf-8")
    output = tmp_path / "vocab.txt"
    result = run_tool(f"--input_files={corpus}", "--vocab_size=1200", f"--output={output}",
                      f"--{'' if lower_case else 'no'}do_lower_case", "--noprogress")
    assert result.returncode == 0, result.stderr

    tokens = output.read_text(encoding="utf-8").split("\n")
    assert tokens[-1] == "" and len(tokens) == 1201
    for token in tokens[:-1]:
        assert token and token == token.strip()
        bad = [char for char in token if char.isspace() or unicode_tables.is_whitespace(char)
               or unicode_tables.is_removed(char)]
        assert not bad, (token, bad)
    vocabulary = Vocabulary.from_file(output)
    assert vocabulary.tokens == tokens[:-1]

    words = reference_words(text, lower_case)
    assert collections.Counter(vocab_builder.split_words(text, lower_case)) == (
        collections.Counter(words))
    learned = [token.removeprefix("##") for token in vocabulary.tokens
               if not re.fullmatch(r"\[(PAD|UNK|CLS|SEP|MASK|unused\d+)\]", token)]
    distinct = set(words)
    assert not [piece for piece in learned if not any(piece in word for word in distinct)]

    tokenizer = BertTokenizer(str(output), lower_case=lower_case)
    ids = tokenizer.tokenize([line for line in text.split("\n") if line])
    unknown = vocabulary.token_to_id["[UNK]"]
    pieces = ids.flat_values.numpy().tolist()
    assert ids.values.nrows() == len(words) and unknown not in pieces
    assert len(pieces) < 1.6 * len(words)


def _assert_one_line_error(result, *needles):
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().split("\n")
    assert lines[-1].startswith("build_vocab: error: ") and "Traceback" not in result.stderr, (
        result.stderr)
    for needle in needles:
        assert needle in lines[-1], (needle, lines[-1])


def test_cli_errors(tmp_path):
    sample = fixture_path("sample_text.txt")
    result = run_tool(f"--input_files={tmp_path}/missing-*.txt", "--vocab_size=100",
                      f"--output={tmp_path}/vocab.txt")
    _assert_one_line_error(result, "nothing matches")
    result = run_tool(f"--input_files={sample}", "--vocab_size=100",
                      f"--output={tmp_path}/no/such/dir/vocab.txt")
    _assert_one_line_error(result, "cannot write")
    result = run_tool(f"--input_files={sample}", "--vocab_size=100", f"--output={tmp_path}")
    _assert_one_line_error(result, str(tmp_path), "is a directory")
    result = run_tool(f"--input_files={sample}", "--vocab_size=10", f"--output={tmp_path}/v.txt")
    _assert_one_line_error(result, "vocab_size=10")

    # Not text: a gzipped copy of the corpus, a Latin-1 file, an empty one; each is named.
    text = open(sample, encoding="utf-8").read()
    packed = tmp_path / "corpus.txt.gz"
    packed.write_bytes(gzip.compress(text.encode("utf-8")))
    latin1 = tmp_path / "latin1.txt"
    french = ["Le garçon a mangé une crème brûlée à la fenêtre.",
              "Où est la bibliothèque ? Près de l'église."] * 20
    latin1.write_bytes("\n".join(french).encode("latin-1"))
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    for bad, needle in [(packed, "gzip-compressed, not text; decompress it first"),
                        (latin1, "not UTF-8 (line 1 is the first)"), (latin1, "--input_encoding"),
                        (empty, "empty"), (tmp_path, "a directory")]:
        result = run_tool(f"--input_files={sample},{bad}", "--vocab_size=300",
                          f"--output={tmp_path}/vocab.txt")
        _assert_one_line_error(result, str(bad), needle)
    result = run_tool(f"--input_files={latin1}", "--vocab_size=300", "--input_encoding=klingon",
                      f"--output={tmp_path}/vocab.txt")
    _assert_one_line_error(result, "--input_encoding", "klingon")
    assert not os.path.exists(tmp_path / "vocab.txt") and not os.path.exists(tmp_path / "v.txt")


def test_input_encoding_reads_latin1_text(tmp_path):
    """A Latin-1 corpus with --input_encoding=latin-1: its accented letters are learnt, as from
    the same text in UTF-8 (the vocabulary is the same)."""
    french = ["Le garçon a mangé une crème brûlée à la fenêtre.",
              "Où est la bibliothèque ? Près de l'église, déjà."] * 30
    vocabularies = []
    for encoding in ("latin-1", "utf-8"):
        corpus = tmp_path / f"{encoding}.txt"
        corpus.write_bytes("\n".join(french).encode(encoding))
        output = tmp_path / f"vocab-{encoding}.txt"
        result = run_tool(f"--input_files={corpus}", "--vocab_size=120", "--nodo_lower_case",
                          f"--input_encoding={encoding}", f"--output={output}", "--noprogress")
        assert result.returncode == 0, result.stderr
        vocabularies.append(output.read_text(encoding="utf-8").split("\n"))
    assert vocabularies[0] == vocabularies[1]
    assert {"ç", "é", "è", "û", "à", "ê"} <= {token.removeprefix("##") for token in vocabularies[0]}


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root may write to any directory")
def test_cli_refuses_an_unwritable_output_directory(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = run_tool(f"--input_files={fixture_path('sample_text.txt')}", "--vocab_size=300",
                          f"--output={locked}/vocab.txt")
    finally:
        locked.chmod(0o700)
    _assert_one_line_error(result, "cannot write", str(locked))


def test_a_vocab_size_beyond_the_input_is_filled_with_placeholders_and_said(capsys):
    counts = {"low": 5, "lower": 2, "newest": 6, "widest": 3}
    tokens = vocab_builder.learn_vocabulary(counts, 200)
    assert len(tokens) == 200 and tokens[-1].startswith("[unused")
    placeholders = sum(token.startswith("[unused") for token in tokens)
    err = capsys.readouterr().err
    assert f"the other {placeholders:,} of vocab_size=200 are [unusedK] placeholders" in err, err
    with pytest.raises(vocab_builder.VocabularyBuildError, match="larger than 1,000,000"):
        vocab_builder.learn_vocabulary(counts, 10**9)
