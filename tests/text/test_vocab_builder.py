"""The WordPiece vocabulary builder: layout of special tokens, exact size, determinism."""

import os
import subprocess
import sys

import pytest

from bert_keras.text import vocab_builder
from reference_tokenization import ReferenceWordTokenizer
from bert_keras.text.vocab import Vocabulary
from pretraining_data_fixtures import fixture_path, minilm_vocab_path
from support import REPO_ROOT as ROOT



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


def test_cli_builds_a_vocabulary(tmp_path):
    output = tmp_path / "vocab.txt"
    result = run_tool(f"--input_files={fixture_path('sample_text.txt')}", "--vocab_size=300",
                      f"--output={output}", "--lower_case", "--noprogress")
    assert result.returncode == 0, result.stderr
    tokens = output.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(tokens) == 300 and tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_cli_errors(tmp_path):
    result = run_tool(f"--input_files={tmp_path}/missing-*.txt", "--vocab_size=100",
                      f"--output={tmp_path}/vocab.txt")
    assert result.returncode == 1 and "nothing matches" in result.stderr
    result = run_tool(f"--input_files={fixture_path('sample_text.txt')}", "--vocab_size=100",
                      f"--output={tmp_path}/no/such/dir/vocab.txt")
    assert result.returncode == 1 and "cannot write" in result.stderr
    assert not os.path.exists(tmp_path / "vocab.txt")
