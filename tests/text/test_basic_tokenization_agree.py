"""Every copy of BERT's basic tokenization gives the same words as the original.

The original `BasicTokenizer` (google-research/bert `tokenization.py`: clean the text, space out
CJK ideographs, split on whitespace, lower-case and strip accents for uncased models, split off
punctuation) is written more than once in the package. Each copy here gets the same texts and
must give the words of `tests/helpers/reference_tokenization.py` (the published algorithm step by step),
cased and uncased:

    original               bert-tensorflow's `bert.tokenization.BasicTokenizer` (an anchor
                           itself: skipped locally when not installed, failed in CI)
    words                  `bert_keras.finetuning.tasks.words.basic_tokenize`, which is
                           `bert_keras.text.python_tokenizer.split_words` (Python on the
                           character classes of `bert_keras.text.unicode_tables`; SQuAD
                           post-processing, the data tool's tokenizer)
    tokenizer.basic        `BertTokenizer.basic_tokenize` (in graph: the exact path's tables)
    tokenizer.tokenize     `BertTokenizer.tokenize` (in graph: tf-text's FastBertNormalizer and
                           end-to-end FastWordpieceTokenizer, rows it could get wrong sent to
                           the exact path); words are the wordpieces of a word joined
    tokenizer.offsets      `BertTokenizer.tokenize_with_offsets` (in graph: the exact path with
                           its own word splitting of the normalized codepoints); words joined
    vocab_builder          `bert_keras.text.vocab_builder.make_word_splitter` (the same
                           chunk rules, counted); it returns the distinct words of a batch
                           with their counts, so it is compared as a multiset

For the wordpiece copies the vocabulary holds every character of the expected words alone and
as "##" continuation, so that every word is covered and joining its pieces gives the word back
(a word of more than 200 characters is "[UNK]", as in the original).

Texts: every sentence of the real GLUE MRPC dev set, the probe texts of `test_tokenizer.py`
(each its own case), and hand-written strings for Zs spaces, tabs, control and format
characters, CJK and accents. Known disagreements are strict xfails naming the copy and the
character (`KNOWN_DIFFERENCES`), so the test fails once one is fixed.
"""

import collections
import functools
import importlib.util
import os

import pytest
import tensorflow as tf

from bert_keras.finetuning.tasks import words as words_module
from bert_keras.text import tokenizer as tokenizer_module
from bert_keras.text import vocab_builder
from helpers.reference_tokenization import basic_tokenize as reference_words
from helpers.support import TESTS_DIR, original_module

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
MAX_CHARS = tokenizer_module.MAX_CHARS_PER_WORD


def _probe_texts():
    """The probe texts of the in-graph tokenizer's own tests: {list name: texts}."""
    spec = importlib.util.spec_from_file_location(
        "_tokenizer_probe_texts", os.path.join(TESTS_DIR, "text", "test_tokenizer.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name.lower(): list(getattr(module, name))
            for name in ("ADVERSARIAL", "GREEK", "REORDERING")}


def _mrpc_dev_sentences():
    """Both sentences of every row of the real MRPC dev set (official TSV, with its BOM)."""
    path = os.path.join(TESTS_DIR, "fixtures", "mrpc_dev", "dev.tsv")
    with open(path, encoding="utf-8-sig") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    assert len(rows) == 408 and all(len(row) == 5 for row in rows)
    return [sentence for row in rows for sentence in row[3:5]]


HAND_WRITTEN = {
    "nbsp": "no-break\u00a0space between\u00a0words",
    "thin-space": "thin\u2009space 5\u2009000",
    "hair-space": "hair\u200aspace",
    "ideographic-space": "ideographic\u3000space 東京\u3000大阪",
    "tabs-and-newlines": "tab\tseparated\tvalues\r\nand CRLF\nlines \t\t trailing\t",
    "zero-width-space": "zero\u200bwidth\u200b space",
    "soft-hyphen": "soft\u00adhyphen Hyphen\u00adATION",
    "format-and-control": "bom\ufeffmark joiner\u200dhere bell\x07ring nul\x00byte \ufffd lone",
    "form-feed": "form\x0cfeed",
    "vertical-tab-and-nel": "vertical\x0btab next\x85line",
    "line-separator": "line\u2028separator",
    "cjk": "東京大学で日本語を勉強した。中文，标点！한국어 カタカナ",
    "accents": "Crème brûlée à la façon d'Ångström: NAÏVE Ünïcödé e\u0301 ñ",
    "punctuation": "Hello, World! It's $5.00 (approx.) -- \"quoted\" [x] {y} a/b #1 @me ~ ^ _ |",
    "mixed": "  Ça coûte 10 € —\tnon\u2011breaking「引用」\u200b… ΟΔΟΣ  ",
}

PROBES = _probe_texts()
MRPC_DEV = _mrpc_dev_sentences()
ALL_TEXTS = MRPC_DEV + [text for texts in PROBES.values() for text in texts] + list(
    HAND_WRITTEN.values())

COPIES = ["original", "words", "tokenizer.basic", "tokenizer.tokenize", "tokenizer.offsets",
          "vocab_builder"]

# {copy: {character: why it differs}}: a case of that copy whose texts hold one of these
# characters is a strict xfail.
KNOWN_DIFFERENCES = {}


@functools.lru_cache(maxsize=None)
def _cases(copy):
    """{case: (texts, known differences)} for one copy.

    The MRPC sentences and each list of probe texts are one case, each hand-written string is
    one; a probe text holding a character on which `copy` is known to differ is a case of its
    own, so that the xfail covers that text alone.
    """
    known = KNOWN_DIFFERENCES.get(copy, {})

    def differences(text):
        return [why for char, why in known.items() if char in text]

    cases = {"mrpc_dev": (MRPC_DEV, [why for text in MRPC_DEV for why in differences(text)])}
    for name, texts in PROBES.items():
        cases[name] = ([text for text in texts if not differences(text)], [])
        cases.update({f"{name}[{index}]": ([text], differences(text))
                      for index, text in enumerate(texts) if differences(text)})
    cases.update({name: ([text], differences(text)) for name, text in HAND_WRITTEN.items()})
    return cases


def _params():
    params = []
    for copy in COPIES:
        for lower_case in (True, False):
            for case, (_, differences) in _cases(copy).items():
                marks = ([pytest.mark.xfail(strict=True, reason=f"{copy}: " + "; ".join(
                    dict.fromkeys(differences)))] if differences else [])
                casing = "uncased" if lower_case else "cased"
                params.append(pytest.param(copy, lower_case, case, marks=marks,
                                           id=f"{copy}-{casing}-{case}"))
    return params


@functools.lru_cache(maxsize=None)
def _reference(text, lower_case):
    return reference_words(text, lower_case)


def _pieces_to_words(ids, tokens):
    """[batch, (words), (pieces)] ids -> the words, each its pieces joined without "##"."""
    values = ids.flat_values.numpy().tolist()
    inner = ids.values.row_splits.numpy().tolist()
    outer = ids.row_splits.numpy().tolist()
    words = ["".join(tokens[i][2:] if tokens[i].startswith("##") else tokens[i]
                     for i in values[inner[w]:inner[w + 1]]) for w in range(len(inner) - 1)]
    return [words[outer[r]:outer[r + 1]] for r in range(len(outer) - 1)]


@pytest.fixture(scope="module")
def vocab_tokens():
    chars = sorted({char for text in ALL_TEXTS for lower_case in (True, False)
                    for word in _reference(text, lower_case) for char in word})
    return SPECIAL_TOKENS + chars + ["##" + char for char in chars]


@pytest.fixture(scope="module")
def tokenizers(vocab_tokens, tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join(vocab_tokens) + "\n", encoding="utf-8")
    return {lower_case: tokenizer_module.BertTokenizer(str(path), lower_case=lower_case)
            for lower_case in (True, False)}


@pytest.fixture(scope="module")
def outputs(tokenizers, vocab_tokens):
    """`get(copy, lower_case)` -> {text: that copy's words} (vocab_builder: `split(texts)` ->
    Counter of the words), each copy run once on all texts."""
    cache = {}

    def run(copy, lower_case):
        if copy == "original":
            tokenization = original_module("tokenization")
            if not tokenization.FLAGS.is_parsed():
                tokenization.FLAGS.mark_as_parsed()
            basic = tokenization.BasicTokenizer(do_lower_case=lower_case)
            return {text: basic.tokenize(text) for text in ALL_TEXTS}
        if copy == "words":
            return {text: words_module.basic_tokenize(text, lower_case) for text in ALL_TEXTS}
        if copy == "vocab_builder":
            split = vocab_builder.make_word_splitter(lower_case)

            def counts(texts):
                unique, numbers = split(texts)
                return collections.Counter(
                    dict(zip([word.decode("utf-8") for word in unique.tolist()], numbers.tolist())))
            return counts
        tokenizer = tokenizers[lower_case]
        batch = tf.constant(ALL_TEXTS)
        if copy == "tokenizer.basic":
            rows = [[word.decode("utf-8") for word in row]
                    for row in tokenizer.basic_tokenize(batch).to_list()]
        elif copy == "tokenizer.tokenize":
            rows = _pieces_to_words(tokenizer.tokenize(batch), vocab_tokens)
        else:
            rows = _pieces_to_words(tokenizer.tokenize_with_offsets(batch)[0], vocab_tokens)
        return dict(zip(ALL_TEXTS, rows))

    def get(copy, lower_case):
        if (copy, lower_case) not in cache:
            cache[copy, lower_case] = run(copy, lower_case)
        return cache[copy, lower_case]

    return get


@pytest.mark.parametrize("copy,lower_case,case", _params())
def test_same_words_as_the_original(copy, lower_case, case, outputs):
    texts, _ = _cases(copy)[case]
    assert texts
    expected = [_reference(text, lower_case) for text in texts]
    if copy == "vocab_builder":
        got = outputs(copy, lower_case)(texts)
        expected = collections.Counter(word for row in expected for word in row)
        assert got == expected, {"missing": dict(expected - got), "extra": dict(got - expected)}
        return
    if copy in ("tokenizer.tokenize", "tokenizer.offsets"):
        expected = [["[UNK]" if len(word) > MAX_CHARS else word for word in row]
                    for row in expected]
    got = [outputs(copy, lower_case)[text] for text in texts]
    mismatches = [(text, row, want) for text, row, want in zip(texts, got, expected) if row != want]
    assert not mismatches, mismatches[:3]


def test_the_fast_path_is_exercised(tokenizers):
    """`tokenizer.tokenize` is tf-text's tokenization for the rows its pattern lets through: most
    of MRPC, so that the comparison above is one of tf-text's words too."""
    for lower_case in (True, False):
        pattern = tokenizer_module.fast_path_pattern(lower_case)
        fast = tf.strings.regex_full_match(tf.constant(MRPC_DEV), pattern).numpy()
        assert fast.mean() > 0.9, (lower_case, fast.mean())
