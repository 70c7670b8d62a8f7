"""A rule-based English sentence splitter for paragraph-per-line corpora.

BERT's pre-training data wants one sentence per line; corpora such as WikiText and Wikipedia
dumps come as one paragraph per line. A sentence ends at `.`, `!` or `?` (possibly repeated and
followed by closing quotes or brackets) when whitespace and then an upper-case letter, a digit or
an opening quote or bracket follow, unless the word before a `.` is a known abbreviation
(`Mr.`, `Dr.`, `St.`, `e.g.` ...), a single letter (an initial: `J. R. R. Tolkien`) or a
month abbreviation followed by a number. It also works on text whose punctuation is already
separated by spaces, like WikiText's `... Royal Court Theatre . He had ...`.

The next-sentence task only needs sensible boundaries most of the time; this is not a
linguistically complete splitter.

Example:

>>> split_sentences("Mr. Smith went to Washington. He met Dr. J. Doe there! Was it 5 p.m.? Yes.")
['Mr. Smith went to Washington.', 'He met Dr. J. Doe there!', 'Was it 5 p.m.?', 'Yes.']
>>> split_sentences("It was built in 1901 . In 1950 it burned .")
['It was built in 1901 .', 'In 1950 it burned .']
"""

import re

ABBREVIATIONS = frozenset("""
mr mrs ms dr prof sr jr st mt ft vs etc e.g i.e cf al inc ltd co corp gen col lt sgt capt cmdr
adm maj rev gov sen rep pres hon messrs mme mlle no nos vol vols pp fig figs eq approx dept univ
est ca c op ed eds jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k u.n a.m p.m
""".split())

# Terminal punctuation, optional closing quotes/brackets, whitespace, then what may start a
# sentence.
_BOUNDARY = re.compile(
    r"""([.!?]+)(["'\u201d\u2019)\]]*)(\s+)(?=(?:["'\u201c\u2018(\[]\s?)*[A-Z0-9\u00c0-\u00de])""")
_WORD_BEFORE = re.compile(r"""(\S+?)\s*$""")


def _is_abbreviation(text_before):
    match = _WORD_BEFORE.search(text_before)
    if not match:
        return False
    word = match.group(1).lstrip("\"'(\u201c\u2018[")
    if not word:
        return False
    lowered = word.lower().rstrip(".")
    if lowered in ABBREVIATIONS:
        return True
    # A single letter is an initial ("J. R. R. Tolkien"); so is an all-initials word ("U.S").
    return len(word) == 1 and word.isalpha() or bool(re.fullmatch(r"(?:[A-Za-z]\.)+[A-Za-z]", word))


def split_sentences(paragraph):
    """Sentences of one paragraph, stripped, in order; `[]` for blank text."""
    paragraph = paragraph.strip()
    if not paragraph:
        return []
    sentences = []
    start = 0
    for match in _BOUNDARY.finditer(paragraph):
        end_of_sentence = match.end(2)
        if match.group(1) == "." and _is_abbreviation(paragraph[start:match.start(1)]):
            continue
        sentence = paragraph[start:end_of_sentence].strip()
        if sentence:
            sentences.append(sentence)
        start = match.end(3)
    rest = paragraph[start:].strip()
    if rest:
        sentences.append(rest)
    return sentences
