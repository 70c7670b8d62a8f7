"""The in-graph tokenizer against the pure-Python statement of the original algorithm."""

import os
import random
import unicodedata

import pytest
import tensorflow as tf

from bert_keras.text.tokenizer import BertTokenizer
from helpers.model_fixtures import minilm_hf_dir
from helpers.reference_tokenization import ReferenceTokenizer
from helpers.support import TESTS_DIR, original_module

FIXTURES = os.path.join(TESTS_DIR, "fixtures")

# Characters where tf-text's own normalizers differ from the original, and other traps.
ADVERSARIAL = [
    "",
    "   \t\n  ",
    "!!!...???",
    "non\u2011breaking hyphen and 5\u2033 double prime",
    "Café naïve résumé Ångström Ελληνικά ΟΔΟΣ ΣΑΣ Σ",
    "İstanbul ǅemal ﬁne ligature ½ ² ㎏",
    "東京大学 and 北京 mixed 한국어 텍스트 ひらがな カタカナ",
    "emoji 😀👍🏽 flags 🇫🇷 zero\u200bwidth join\u200d bom\ufeff",
    "control \x00 nul \ufffd replacement \x07 bell \x1f unit",
    "line\u2028separator paragraph\u2029separator nbsp\u00a0space ideographic\u3000space",
    "combining e\u0301 a\u0300 n\u0303 q\u0307\u0323",
    "$5 + 3 = 8 < 9 > 7 ^ ` | ~ @ # % & * ( ) [ ] { }",
    "a" * 199 + " " + "b" * 201,
    "supercalifragilisticexpialidocious" * 4,
    "Mixed CASE Words With Capitals",
    "tab\tseparated\tvalues and CRLF\r\nlines",
]


@pytest.fixture(scope="module")
def uncased():
    vocab = os.path.join(minilm_hf_dir(), "vocab.txt")
    return BertTokenizer(vocab, lower_case=True), ReferenceTokenizer.from_file(vocab, lower_case=True)


@pytest.fixture(scope="module")
def cased(tmp_path_factory):
    # A cased vocabulary: the uncased one plus capitalized and accented forms of common words.
    with open(os.path.join(minilm_hf_dir(), "vocab.txt"), encoding="utf-8") as f:
        tokens = [line.rstrip("\n") for line in f]
    extra = [token.capitalize() for token in tokens[2000:6000] if token.isalpha()]
    extra += ["Café", "naïve", "résumé", "Ångström", "Ελληνικά", "ΟΔΟΣ", "İstanbul", "é", "##é", "##ï"]
    seen = set(tokens)
    tokens += [token for token in extra if not (token in seen or seen.add(token))]
    path = str(tmp_path_factory.mktemp("cased") / "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")
    return BertTokenizer(path, lower_case=False), ReferenceTokenizer.from_file(path, lower_case=False)


def _assert_same(pair, lines):
    ours, reference = pair
    ids = _nested(ours.tokenize(tf.constant(lines)))
    expected = [reference.tokenize(line) for line in lines]
    mismatches = [(line, got, want) for line, got, want in zip(lines, ids, expected) if got != want]
    assert not mismatches, mismatches[:3]


def _lines(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


@pytest.mark.parametrize("mode", ["uncased", "cased"])
def test_real_corpus_lines(mode, request):
    lines = _lines("tokenizer_wikitext_test.txt") + _lines("pretraining_sample_text.txt")
    _assert_same(request.getfixturevalue(mode), lines)


@pytest.mark.parametrize("mode", ["uncased", "cased"])
def test_adversarial_unicode(mode, request):
    _assert_same(request.getfixturevalue(mode), ADVERSARIAL)


def test_invalid_utf8_bytes_are_dropped(uncased):
    ours, reference = uncased
    raw = [b"valid \xff\xfe bytes \xc3( here", b"\xe2\x82 truncated", b"ok"]
    got = ours.tokenize(tf.constant(raw)).to_list()
    assert got == [reference.tokenize(text) for text in raw]


def test_long_words_become_unknown(uncased):
    ours, reference = uncased
    unknown = reference.token_to_id["[UNK]"]
    got = ours.tokenize(tf.constant(["a" * 201, "a" * 200])).to_list()
    assert got[0] == [[unknown]]
    assert got[1] != [[unknown]] and len(got[1][0]) > 1


def test_offsets_point_into_the_original_text(uncased):
    ours, reference = uncased
    text = "Ünïcödé café, 東京 reads!"
    ids, starts, ends = ours.tokenize_with_offsets(tf.constant([text]))
    data = text.encode("utf-8")
    words = [data[s[0]:e[-1]].decode("utf-8") for s, e in zip(starts.to_list()[0], ends.to_list()[0])]
    assert words == ["Ünïcödé", "café", ",", "東", "京", "reads", "!"]
    assert ids.to_list()[0] == reference.tokenize(text)


def test_works_inside_tf_data(uncased):
    ours, reference = uncased
    lines = _lines("tokenizer_wikitext_test.txt")[:64]
    dataset = tf.data.Dataset.from_tensor_slices(lines).batch(16).map(ours.tokenize)
    got = [row for batch in dataset for row in batch.to_list()]
    assert got == [reference.tokenize(line) for line in lines]


# Deeper checks: every codepoint, the context rules, both paths, offsets ----------------------

def _nested(ragged):
    """[batch, (words), (pieces)] RaggedTensor -> nested lists (much faster than to_list())."""
    values = ragged.flat_values.numpy().tolist()
    inner = ragged.values.row_splits.numpy().tolist()
    outer = ragged.row_splits.numpy().tolist()
    words = [values[inner[i]:inner[i + 1]] for i in range(len(inner) - 1)]
    return [words[outer[i]:outer[i + 1]] for i in range(len(outer) - 1)]


def _mismatches(tokenizer, reference, texts, batch_size=8192):
    got = []
    for start in range(0, len(texts), batch_size):
        got += _nested(tokenizer.tokenize(tf.constant(texts[start:start + batch_size])))
    return [(text, ids, reference.tokenize(text)) for text, ids in zip(texts, got)
            if ids != reference.tokenize(text)]


@pytest.fixture(scope="module")
def exact_paths(uncased, cased):
    """The same tokenizers without the fast path."""
    return {"uncased": (BertTokenizer(uncased[0].vocab_file, True, fast_path=False), uncased[1]),
            "cased": (BertTokenizer(cased[0].vocab_file, False, fast_path=False), cased[1])}


GREEK = ["ΣΑΣ", "ΟΔΟΣ", "Σ", "ΑΣ", "ΑΣ.", "Α.Σ", "ΑΣ'Α", "ΑΣ\u0301", "Α\u0301Σ", "ΑΣ\u200bΑ",
         "ΑΣ1", "1Σ", "ΑΣΣ", "ΑΣ中", "中Σ", "ΑΣ Α", "Α\u00adΣ", "ΑΣ\u0345", "ΑΣ-Α", "ΌΣΟΣ ΚΑΙ ΣΑΣ",
         "Ὀδυσσεύς ΟΔΥΣΣΕΥΣ", "ᾼΣ", "ǅΣ", "ΑΣ\U0001d16d", "aΣ_b", "x\u0378Σ", "Σ\u0378"]
# Spacing (Mc) non-starters that NFD reorders, with and without a blocking starter between.
REORDERING = ["\U0001d16d\U0001d165", "a\U0001d16d\u0301\U0001d165", "a\U0001d16d\u034f\U0001d165",
              "\u302f\u1b44", "\u302e\u16ff0", "\U00016ff0\u1b44", "\u1b44\U00016ff0x\u302f\u302e",
              "\U0001d160\U0001d16d\U0001d165", "\u1b44 \U00016ff0", "\U0001d16d\U0001d165" * 3]


@pytest.mark.parametrize("mode", ["uncased", "cased"])
def test_context_rules(mode, request, exact_paths):
    texts = GREEK + REORDERING + [" ".join(GREEK + REORDERING)]
    assert not _mismatches(*request.getfixturevalue(mode), texts)
    assert not _mismatches(*exact_paths[mode], texts)


@pytest.mark.parametrize("mode", ["uncased", "cased"])
def test_every_codepoint(mode, request):
    """Each assigned codepoint alone, inside a word and after a cased letter."""
    codepoints = [cp for cp in range(0x110000)
                  if unicodedata.category(chr(cp)) not in ("Cn", "Co", "Cs")]
    texts = [chr(cp) for cp in codepoints] + ["ab" + chr(cp) + "cd" for cp in codepoints]
    texts += ["A" + chr(cp) + "Σ x" for cp in codepoints[::5]]
    texts += ["\u0378", "\ue000x", "a\U000f0000\U0010fffd b"]  # unassigned, private use: kept
    mismatches = _mismatches(*request.getfixturevalue(mode), texts)
    assert not mismatches, mismatches[:5]


@pytest.mark.parametrize("mode", ["uncased", "cased"])
def test_random_text_and_bytes_on_both_paths(mode, request, exact_paths):
    rng = random.Random(1)
    pool = [chr(cp) for cp in (0x300, 0x301, 0x345, 0x3a3, 0x3c3, 0x130, 0x2011, 0x2033, 0xad,
                               0x200b, 0xfb01, 0xac00, 0xd55c, 0x4e2d, 0xf900, 0x378, 0xe000,
                               0x1d16d, 0x1d165, 0x34f, 0x2028, 0xa0, 0x3000, 0xfffd, 0x0)]
    pool += list("aAbZé ,.'#$-\t\n")
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 30))) for _ in range(3000)]
    raw = [bytes(rng.randrange(256) for _ in range(rng.randint(0, 24))) for _ in range(2000)]
    for pair in (request.getfixturevalue(mode), exact_paths[mode]):
        mismatches = _mismatches(*pair, texts + raw)
        assert not mismatches, mismatches[:3]


def test_invalid_utf8_is_decoded_like_python():
    rng = random.Random(2)
    raw = [bytes(rng.randrange(256) for _ in range(rng.randint(0, 16))) for _ in range(3000)]
    raw += [b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\x80", b"\xe0\x80\xaf", b"\xe4\xb8a",
            b"\xf0\x9f\x98", b"\xf8\x88\x80\x80\x80"]
    got = tf.strings.unicode_decode(tf.constant(raw), "UTF-8", errors="ignore").to_list()
    assert got == [[ord(char) for char in text.decode("utf-8", "ignore")] for text in raw]


@pytest.mark.parametrize("mode", ["uncased", "cased"])
def test_wikitext_valid_unicode_lines(mode, request, exact_paths):
    lines = _lines("wikitext_sample.txt")
    assert not _mismatches(*request.getfixturevalue(mode), lines)
    assert not _mismatches(*exact_paths[mode], lines)


def test_word_length_limit_counts_characters(uncased):
    ours, reference = uncased
    unknown = reference.token_to_id["[UNK]"]
    texts = ["é" * 200, "é" * 201, "中" + "x" * 200, "한" * 66, "한" * 67, "İ" * 201, "a\u0301" * 200]
    got = _nested(ours.tokenize(tf.constant(texts)))
    assert got == [reference.tokenize(text) for text in texts]
    # 67 Hangul syllables decompose into 201 jamo: too long once lower-cased and NFD'd.
    assert got[4] == [[unknown]] and got[3] != [[unknown]]


def test_merged_pieces_and_basic_words(uncased):
    ours, reference = uncased
    texts = ADVERSARIAL + _lines("wikitext_sample.txt")[:50]
    merged = ours.tokenize_merged(tf.constant(texts))
    assert merged.ragged_rank == 1 and merged.dtype == tf.int32
    assert merged.to_list() == [[i for word in reference.tokenize(t) for i in word] for t in texts]
    words = ours.basic_tokenize(tf.constant(texts)).to_list()
    assert [[w.decode("utf-8") for w in row] for row in words] == [reference.words(t) for t in texts]


def test_shapes_scalar_and_empty_batch(uncased):
    ours, reference = uncased
    assert ours.tokenize("Hello world!").to_list() == reference.tokenize("Hello world!")
    empty = ours.tokenize(tf.constant([], tf.string))
    assert empty.shape[0] == 0 and empty.dtype == tf.int32
    with pytest.raises(ValueError, match="shape"):
        ours.tokenize(tf.constant([["a"]]))


def _check_offsets(tokenizer, reference, texts):
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(texts))
    assert _nested(ids) == [reference.tokenize(text) for text in texts]
    inverse = {index: token for token, index in reference.token_to_id.items()}
    for text, row_ids, row_starts, row_ends in zip(texts, _nested(ids), _nested(starts),
                                                   _nested(ends)):
        data = text.encode("utf-8") if isinstance(text, str) else text
        for word_ids, word_starts, word_ends in zip(row_ids, row_starts, row_ends):
            assert all(0 <= s < e <= len(data) for s, e in zip(word_starts, word_ends))
            assert word_starts == sorted(word_starts) and word_ends == sorted(word_ends)
            # The word's span of the original text normalizes to exactly that word (up to the
            # form of sigma, which depends on the text around the span).
            span = data[word_starts[0]:word_ends[-1]]
            pieces = [inverse[i] for i in word_ids]
            if pieces != ["[UNK]"]:
                word = "".join(p[2:] if p.startswith("##") else p for p in pieces)
                assert [w.replace("ς", "σ") for w in reference.words(span)] == [
                    word.replace("ς", "σ")], (text, span)
            # Each piece's own span holds the piece (context rules aside: a lone capital
            # sigma is not final, and reordered marks may come from the next character).
            for piece, s, e in zip(pieces, word_starts, word_ends):
                piece_text = data[s:e].decode("utf-8", "ignore")
                if piece == "[UNK]" or "\u03a3" in piece_text or any(
                        unicodedata.category(c) == "Mc" and unicodedata.combining(c)
                        for c in piece_text):
                    continue
                piece_words = reference.words(piece_text)
                assert len(piece_words) == 1 and piece.lstrip("#") in piece_words[0]


def test_offsets_on_hard_text(uncased, cased):
    texts = ADVERSARIAL + GREEK + REORDERING + [
        "Ünïcödé 한국어 İstanbul ﬁne ½", "a\u200bb\u00adc", "x" * 250 + " ok", "", "\U0001f600!",
        b"bad\xffbytes \xc3\xa9t\xc3\xa9", "café\u0301 ΟΔΟΣ"] + _lines("wikitext_sample.txt")[:40]
    _check_offsets(*uncased, texts)
    _check_offsets(*cased, texts)


def test_offsets_hand_worked(uncased):
    ours, _ = uncased
    # "Ü" is 2 bytes, "한" 3 bytes (three jamo after NFD share its span), "!" 1.
    text = "Ü 한!"
    ids, starts, ends = ours.tokenize_with_offsets(tf.constant([text]))
    flat = list(zip(starts.flat_values.numpy().tolist(), ends.flat_values.numpy().tolist()))
    assert flat[0] == (0, 2)
    assert all(span == (3, 6) for span in flat[1:-1])
    assert flat[-1] == (6, 7)


def test_vocab_without_special_tokens_names_the_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\nhello\n", encoding="utf-8")
    with pytest.raises(ValueError, match="vocab.txt.*missing special token"):
        BertTokenizer(str(path), lower_case=True)


def test_matches_the_original_package_when_installed(uncased, cased):
    """Cross-check with google-research/bert's tokenization.py (pip bert-tensorflow==1.0.4)."""
    original = original_module("tokenization")
    original.FLAGS.mark_as_parsed()
    texts = (ADVERSARIAL + GREEK + REORDERING + _lines("wikitext_sample.txt")
             + ["\u0378x\ue000", b"\xff\xfeab\xc3"])
    for ours, reference in (uncased, cased):
        full = original.FullTokenizer(ours.vocab_file, do_lower_case=ours.lower_case)
        expected = [[full.convert_tokens_to_ids(full.wordpiece_tokenizer.tokenize(word))
                     for word in full.basic_tokenizer.tokenize(text)] for text in texts]
        assert [reference.tokenize(text) for text in texts] == expected
        assert _nested(ours.tokenize(tf.constant(texts))) == expected


@pytest.mark.parametrize("lower_case", [True, False], ids=["uncased", "cased"])
def test_stored_fast_path_pattern_equals_the_computed_one(lower_case):
    """The package's precomputed fast-path pattern (when of this tf-text and Unicode version)."""
    from bert_keras.text import fast_path
    from bert_keras.text import tokenizer as tokenizer_module
    from bert_keras.text import unicode_tables

    path = os.path.join(unicode_tables.TABLES_DIR,
                        fast_path.fast_path_pattern_file_name(lower_case))
    if not os.path.exists(path):
        pytest.skip(f"no precomputed pattern for this tf-text/Unicode version ({path})")
    with open(path, encoding="utf-8") as f:
        assert f.read() == fast_path.compute_fast_path_pattern(lower_case)
