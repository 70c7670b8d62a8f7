"""The in-graph tokenizer against the pure-Python statement of the original algorithm."""

import os

import pytest
import tensorflow as tf

from bert_keras.tokenizer import BertTokenizer
from model_fixtures import minilm_hf_dir
from reference_tokenization import ReferenceTokenizer

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")

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
    ids = ours.tokenize(tf.constant(lines)).to_list()
    mismatches = [(line, got, reference.tokenize(line)) for line, got in zip(lines, ids)
                  if got != reference.tokenize(line)]
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
