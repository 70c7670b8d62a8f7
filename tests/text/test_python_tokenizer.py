"""The plain-Python tokenizer (the data tool's) gives the ids of the original and of the in-graph
tokenizer, on the in-graph tokenizer's own probe texts, every codepoint and real text."""

import importlib.util
import os
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.text.python_tokenizer import MAX_CHARS_PER_WORD, PythonBertTokenizer
from bert_keras.text.tokenizer import BertTokenizer
from helpers.model_fixtures import minilm_hf_dir
from helpers.reference_tokenization import ReferenceTokenizer
from helpers.support import REPO_ROOT, TESTS_DIR, original_module


def _probe_module():
    spec = importlib.util.spec_from_file_location(
        "_tokenizer_probes", os.path.join(TESTS_DIR, "text", "test_tokenizer.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PROBES = _probe_module()


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def _real_lines():
    fixtures = os.path.join(TESTS_DIR, "fixtures")
    books = _lines(os.path.join(REPO_ROOT, "bert_keras", "data", "books_heldout.txt"))
    return (_lines(os.path.join(fixtures, "wikitext_sample.txt"))
            + _lines(os.path.join(fixtures, "tokenizer_wikitext_test.txt"))
            + [line for line in books if not line.isascii()] + books[:300])


def _vocabularies(tmp_path):
    """{name: (vocab file, lower_case)}: the real uncased vocabulary, a cased one and a small one
    (its first 3,000 tokens: mostly characters and continuations, so most words are pieces)."""
    uncased = os.path.join(minilm_hf_dir(), "vocab.txt")
    tokens = _lines(uncased)
    small = tmp_path / "small_vocab.txt"
    small.write_text("\n".join(tokens[:3000]) + "\n", encoding="utf-8")
    cased = tmp_path / "cased_vocab.txt"
    extra = [token.capitalize() for token in tokens[2000:6000] if token.isalpha()]
    extra += ["Café", "naïve", "Ελληνικά", "ΟΔΟΣ", "İstanbul", "é", "##é"]
    seen = set(tokens)
    cased.write_text("\n".join(tokens + [t for t in extra if not (t in seen or seen.add(t))])
                     + "\n", encoding="utf-8")
    return {"uncased": (uncased, True), "cased": (str(cased), False),
            "small-uncased": (str(small), True), "small-cased": (str(small), False)}


@pytest.fixture(scope="module")
def vocabularies(tmp_path_factory):
    return _vocabularies(tmp_path_factory.mktemp("vocab"))


def _flat(nested_ids):
    return [piece for word in nested_ids for piece in word]


def _mismatches(tokenizer, expected_of, texts):
    return [(text, got, want) for text in texts
            for got, want in [(tokenizer.tokenize(text), expected_of(text))] if got != want]


@pytest.mark.parametrize("name", ["uncased", "cased", "small-uncased", "small-cased"])
def test_same_ids_as_the_reference_statement(name, vocabularies):
    vocab_file, lower_case = vocabularies[name]
    ours = PythonBertTokenizer(vocab_file, lower_case)
    reference = ReferenceTokenizer.from_file(vocab_file, lower_case=lower_case)
    texts = (PROBES.ADVERSARIAL + PROBES.GREEK + PROBES.REORDERING
             + [" ".join(PROBES.GREEK + PROBES.REORDERING)] + _real_lines()
             + ["a" * MAX_CHARS_PER_WORD, "a" * (MAX_CHARS_PER_WORD + 1), b"\xff\xfeab\xc3"])
    mismatches = _mismatches(ours, lambda text: _flat(reference.tokenize(text)), texts)
    assert not mismatches, mismatches[:3]


@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_every_codepoint(lower_case):
    """Each assigned codepoint alone, inside a word and after a cased letter."""
    vocab_file = os.path.join(minilm_hf_dir(), "vocab.txt")
    ours = PythonBertTokenizer(vocab_file, lower_case)
    reference = ReferenceTokenizer.from_file(vocab_file, lower_case=lower_case)
    codepoints = [cp for cp in range(0x110000)
                  if unicodedata.category(chr(cp)) not in ("Cn", "Co", "Cs")]
    texts = [chr(cp) for cp in codepoints] + ["ab" + chr(cp) + "cd" for cp in codepoints]
    texts += ["A" + chr(cp) + "Σ x" for cp in codepoints[::5]]
    mismatches = _mismatches(ours, lambda text: _flat(reference.tokenize(text)), texts)
    assert not mismatches, mismatches[:5]


@pytest.mark.parametrize("name", ["uncased", "cased", "small-uncased"])
def test_same_ids_as_the_in_graph_tokenizer_in_batches(name, vocabularies):
    vocab_file, lower_case = vocabularies[name]
    texts = PROBES.ADVERSARIAL + PROBES.GREEK + PROBES.REORDERING + _real_lines()
    ids, lengths = PythonBertTokenizer(vocab_file, lower_case).tokenize_batch(texts)
    in_graph = BertTokenizer(vocab_file, lower_case=lower_case).tokenize_merged(tf.constant(texts))
    assert ids.dtype == np.int32 and lengths.dtype == np.int64 and lengths.shape == (len(texts),)
    np.testing.assert_array_equal(lengths, in_graph.row_lengths().numpy())
    np.testing.assert_array_equal(ids, in_graph.flat_values.numpy())


def test_a_full_chunk_memory_gives_the_same_ids(vocabularies):
    vocab_file, lower_case = vocabularies["uncased"]
    texts = _real_lines()
    remembering = PythonBertTokenizer(vocab_file, lower_case)
    forgetting = PythonBertTokenizer(vocab_file, lower_case, max_cached_chunks=3)
    assert [forgetting.tokenize(t) for t in texts] == [remembering.tokenize(t) for t in texts]
    assert len(forgetting._chunk_ids) <= 3


def test_matches_the_original_package(vocabularies):
    """Cross-check with google-research/bert's tokenization.py (pip bert-tensorflow==1.0.4)."""
    original = original_module("tokenization")
    original.FLAGS.mark_as_parsed()
    texts = (PROBES.ADVERSARIAL + PROBES.GREEK + PROBES.REORDERING + _real_lines()
             + ["\u0378x\ue000", b"\xff\xfeab\xc3"])
    for name in ("uncased", "cased", "small-uncased"):
        vocab_file, lower_case = vocabularies[name]
        full = original.FullTokenizer(vocab_file, do_lower_case=lower_case)
        ours = PythonBertTokenizer(vocab_file, lower_case)
        mismatches = _mismatches(
            ours, lambda text: full.convert_tokens_to_ids(full.tokenize(text)), texts)
        assert not mismatches, (name, mismatches[:3])
