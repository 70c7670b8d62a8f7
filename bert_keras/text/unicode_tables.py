"""Per-codepoint tables that reproduce the text normalization of BERT's `BasicTokenizer`.

The original tokenizer (google-research/bert `tokenization.py`) cleans the text, puts spaces
around CJK ideographs, splits on whitespace, lower-cases each word and strips its accents
(uncased models only), then splits every punctuation character off as its own word. Apart from
two context rules, each input codepoint contributes a fixed string to the result, so the whole
step is a table lookup: codepoint -> up to `width` output codepoints, where a single ASCII space
marks every split point.

The two context rules, both uncased only and both rare, are data here and code in the graph:

- Python's `str.lower()` maps GREEK CAPITAL LETTER SIGMA to the final form when a cased letter
  precedes it and none follows (case-ignorable characters skipped): `case_class_*`.
- NFD reorders runs of combining characters by canonical combining class. After the Mn marks
  are stripped, this can only swap the 25 spacing (Mc) non-starters: `mc_nonstarters`,
  `mc_combining_classes` and `reorder_blockers` (codepoints whose output is empty but whose NFD
  holds a starter that ends a run).

Everything is computed from Python's own `unicodedata` and `str.lower()`, the same source the
original uses, so the tables follow the Unicode version of the running Python
(`unicodedata.unidata_version`). Building takes about a second and is cached per process.

Example:

>>> tables = normalization_tables(lower_case=True)
>>> codepoint_output(ord("É"), lower_case=True), codepoint_output(ord(","), lower_case=True)
('e', ' , ')
>>> tables.lookup(ord("É")), tables.width
([101], 3)
"""

import dataclasses
import functools
import os
import unicodedata

import numpy as np

from bert_keras.common.files import atomic_output

MAX_CODEPOINT = 0x10FFFF
BLOCK_BITS = 8
BLOCK_SIZE = 1 << BLOCK_BITS
NUM_BLOCKS = (MAX_CODEPOINT + 1) // BLOCK_SIZE

# Values in `rows` other than codepoints.
PAD = -1    # no output
SAME = -2   # the input codepoint itself (lets all unchanged codepoints share one row)

GREEK_CAPITAL_SIGMA = 0x3A3
GREEK_SMALL_SIGMA = 0x3C3
GREEK_SMALL_FINAL_SIGMA = 0x3C2

# Values of `case_class_values`.
CASE_OTHER, CASE_IGNORABLE, CASE_CASED = 0, 1, 2

def is_cjk_codepoint(cp):
    """The original's CJK Unified Ideographs ranges (not all of CJK: no kana, no Hangul)."""
    return ((0x4E00 <= cp <= 0x9FFF) or (0x3400 <= cp <= 0x4DBF) or (0x20000 <= cp <= 0x2A6DF)
            or (0x2A700 <= cp <= 0x2B73F) or (0x2B740 <= cp <= 0x2B81F)
            or (0x2B820 <= cp <= 0x2CEAF) or (0xF900 <= cp <= 0xFAFF)
            or (0x2F800 <= cp <= 0x2FA1F))


def is_punctuation(char):
    """ASCII symbols count as punctuation even when Unicode calls them S* (`$`, `+`, `^`, ...)."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_removed(char):
    """Dropped by the original's `_clean_text`: NUL, U+FFFD and categories Cc and Cf.

    Tab, LF and CR are whitespace instead. Unassigned (Cn) and private-use (Co) codepoints
    are kept as ordinary characters, as the original keeps them.
    """
    cp = ord(char)
    if cp == 0 or cp == 0xFFFD:
        return True
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def is_whitespace(char):
    """Mapped to a space by `_clean_text`."""
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def _lower_strip_accents(text):
    text = unicodedata.normalize("NFD", text.lower())
    return "".join(char for char in text if unicodedata.category(char) != "Mn")


# Items of `codepoint_stream`: how the word splitter sees each output character.
SPLIT = "split"   # a word boundary (whitespace), dropped
ALONE = "alone"   # a character that forms a word of its own (punctuation, CJK ideograph)
JOIN = "join"     # a character that joins the word around it


def codepoint_stream(cp, lower_case, _text=None):
    """What codepoint `cp` becomes: a tuple of (SPLIT, " "), (ALONE, char) or (JOIN, char).

    Does not apply the two context rules (final sigma, canonical reordering).
    """
    char = chr(cp)
    if is_removed(char):
        return ()
    if is_whitespace(char):
        return ((SPLIT, " "),)
    if _text is None:
        _text = _lower_strip_accents(char) if lower_case else char
    stream = []
    for out in _text:
        if is_punctuation(out):
            stream.append((ALONE, out))
        elif out.isspace():
            # str.split() also splits on U+2028, U+2029 and the like, which `_clean_text` keeps.
            stream.append((SPLIT, " "))
        else:
            stream.append((JOIN, out))
    if is_cjk_codepoint(cp):
        # Spaced before lower-casing (a compatibility ideograph's NFD is another ideograph).
        stream = [(SPLIT, " ")] + stream + [(SPLIT, " ")]
    return tuple(stream)


def _stream_text(stream):
    return "".join(f" {char} " if kind == ALONE else char for kind, char in stream)


def codepoint_output(cp, lower_case):
    """The text that codepoint `cp` contributes to the normalized string.

    A single ASCII space separates words; the surrounding spaces of punctuation and CJK
    ideographs make them words of their own. Does not apply the two context rules.
    """
    return _stream_text(codepoint_stream(cp, lower_case))


def canonical_stream(stream):
    """The words-relevant content of a stream: JOIN characters and collapsed SPLITs.

    Two streams with equal canonical forms give the same words in every context.
    """
    out = []
    for kind, char in stream:
        if kind == JOIN:
            out.append(char)
        elif kind == ALONE:
            if not out or out[-1] is not None:
                out.append(None)
            out.extend([char, None])
        elif not out or out[-1] is not None:
            out.append(None)
    return tuple(out)


def case_class(cp):
    """CASE_IGNORABLE, CASE_CASED or CASE_OTHER as Python's `str.lower()` sees `cp`.

    Read off `str.lower()` itself, so that it agrees with the original by construction:
    `x + SIGMA` gives the final form only after a cased, non-ignorable `x`, and
    `"A" + x + SIGMA` also after an ignorable `x`. Characters that `_clean_text` removes never
    reach `lower()`; skipping them is what CASE_IGNORABLE does.
    """
    char = chr(cp)
    if is_removed(char):
        return CASE_IGNORABLE
    final = chr(GREEK_SMALL_FINAL_SIGMA)
    if (char + "\u03a3").lower()[-1] == final:
        return CASE_CASED
    if ("A" + char + "\u03a3").lower()[-1] == final:
        return CASE_IGNORABLE
    return CASE_OTHER


@dataclasses.dataclass(frozen=True)
class NormalizationTables:
    """NumPy arrays (all int32) that become graph constants.

    Lookup of codepoint `cp`: `block = block_index[cp >> BLOCK_BITS]`,
    `row = block_rows[block * BLOCK_SIZE + (cp & (BLOCK_SIZE - 1))]`, output `rows[row]`
    with PAD dropped and SAME replaced by `cp`. Every codepoint that a context rule can
    involve (GREEK CAPITAL SIGMA, the Mc non-starters and their sources) has a row of its own
    numbered from `first_context_row` on, so one comparison of the row ids tells whether a
    batch needs the fix-ups. GREEK CAPITAL SIGMA's row is SAME: the fix-up picks its form.
    """

    lower_case: bool
    block_index: np.ndarray           # [NUM_BLOCKS]
    block_rows: np.ndarray            # [num_blocks * BLOCK_SIZE]
    rows: np.ndarray                  # [num_rows, width]
    first_context_row: int
    case_class_starts: np.ndarray     # [num_ranges], sorted range starts covering 0..MAX
    case_class_values: np.ndarray     # [num_ranges]
    mc_nonstarters: np.ndarray        # [25], sorted
    mc_combining_classes: np.ndarray  # [25]
    reorder_blockers: np.ndarray      # [n], sorted
    context_codepoints: np.ndarray    # sigma, Mc non-starters and their sources, sorted

    @property
    def width(self):
        return self.rows.shape[1]

    @property
    def nbytes(self):
        return sum(value.nbytes for value in dataclasses.asdict(self).values()
                   if isinstance(value, np.ndarray))

    def lookup(self, cp):
        """Output codepoints of `cp` (the NumPy twin of the graph lookup, for checks)."""
        block = self.block_index[cp >> BLOCK_BITS]
        row = self.rows[self.block_rows[block * BLOCK_SIZE + (cp & (BLOCK_SIZE - 1))]]
        return [cp if value == SAME else int(value) for value in row if value != PAD]


@functools.lru_cache(maxsize=None)
def assigned_codepoints():
    """All codepoints that are not unassigned (Cn), private-use (Co) or surrogates (Cs).

    The others all become themselves (one shared table row): `str.lower()` and NFD leave
    them alone, and they are neither whitespace, punctuation nor removed.
    """
    return tuple(cp for cp in range(MAX_CODEPOINT + 1)
                 if unicodedata.category(chr(cp)) not in ("Cn", "Co", "Cs"))


@functools.lru_cache(maxsize=None)
def uncased_texts():
    """{cp: lower-cased, NFD, Mn-stripped text} for the assigned codepoints `_clean_text` keeps."""
    return {cp: _lower_strip_accents(chr(cp)) for cp in assigned_codepoints()
            if not is_removed(chr(cp))}


def _context_codepoints():
    """(Mc non-starters, codepoints whose uncased output holds one) for the reorder fix-up."""
    mc = [cp for cp in assigned_codepoints()
          if unicodedata.combining(chr(cp)) and unicodedata.category(chr(cp)) != "Mn"]
    mc_set = {chr(cp) for cp in mc}
    sources = [cp for cp, text in uncased_texts().items() if mc_set.intersection(text)]
    return mc, sources


def _reorder_blockers():
    """Codepoints with an empty uncased output whose NFD still holds a starter (ccc 0).

    Such a character (e.g. COMBINING GRAPHEME JOINER) stops NFD's reordering of the
    combining characters around it even though the Mn stripping removes it afterwards.
    """
    return [cp for cp, text in uncased_texts().items()
            if not text and any(unicodedata.combining(c) == 0
                                for c in unicodedata.normalize("NFD", chr(cp).lower()))]


def _case_class_ranges():
    classes = np.full(MAX_CODEPOINT + 1, CASE_OTHER, np.int32)  # unassigned, private use
    for cp in assigned_codepoints():
        classes[cp] = case_class(cp)
    starts = np.concatenate([[0], np.flatnonzero(np.diff(classes)) + 1]).astype(np.int32)
    return starts, classes[starts]


# Bump when the tables' layout or the rules that fill them change: files of another format are
# not read.
TABLES_FORMAT = 1
TABLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tables")


def tables_file_name(lower_case, unidata_version=None):
    """The file name of the tables for a casing and a Unicode version (this Python's by default)."""
    version = unidata_version or unicodedata.unidata_version
    return f"normalization-{'uncased' if lower_case else 'cased'}-unicode{version}-v{TABLES_FORMAT}.npz"


def _cache_dir():
    return os.environ.get("BERT_KERAS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "bert_keras")


def save_tables(tables, path):
    """Writes `tables` to an .npz file atomically."""
    arrays = {field.name: np.asarray(getattr(tables, field.name))
              for field in dataclasses.fields(tables)}
    with atomic_output(path) as f:
        np.savez_compressed(f, **arrays)


def load_tables(path):
    with np.load(path) as data:
        values = {name: data[name] for name in data.files}
    values["lower_case"] = bool(values["lower_case"])
    values["first_context_row"] = int(values["first_context_row"])
    return NormalizationTables(**values)


def stored(name, compute, save, load):
    """`load(path)` of the package's precomputed file `name` or of the user's cached one, else
    `compute()`, cached with `save(value, path)` for the next time.

    The cache is `$BERT_KERAS_CACHE` (default `~/.cache/bert_keras`); a file that cannot be read
    is computed again, and a cache that cannot be written is left alone.
    """
    for directory in (TABLES_DIR, _cache_dir()):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            try:
                return load(path)
            except (OSError, ValueError, KeyError, TypeError):
                pass
    value = compute()
    try:
        save(value, os.path.join(_cache_dir(), name))
    except OSError:
        pass
    return value


@functools.lru_cache(maxsize=None)
def normalization_tables(lower_case):
    """The `NormalizationTables` for uncased (`lower_case=True`) or cased vocabularies.

    The tables depend on the Unicode version of Python's `unicodedata`, as the original
    tokenizer's behaviour does. They are read from the package's precomputed files when those
    are of this Python's Unicode version, else from the user's cache, else computed (seconds)
    and cached (see `stored`).
    """
    lower_case = bool(lower_case)
    return stored(tables_file_name(lower_case), lambda: compute_normalization_tables(lower_case),
                  save_tables, load_tables)


def compute_normalization_tables(lower_case):
    """The `NormalizationTables` for uncased (`lower_case=True`) or cased vocabularies, computed
    from this Python's `unicodedata` (seconds; `normalization_tables` reads them from a file)."""
    lower_case = bool(lower_case)
    if lower_case:
        mc, sources = _context_codepoints()
        context = sorted(set(mc + sources + [GREEK_CAPITAL_SIGMA]))
    else:
        mc, sources, context = [], [], []
    row_ids = {(SAME,): 0}
    codepoint_rows = np.zeros(MAX_CODEPOINT + 1, np.int32)  # row 0: unassigned, private use
    texts = uncased_texts() if lower_case else {}
    context_keys = []
    for cp in assigned_codepoints():
        text = _stream_text(codepoint_stream(cp, lower_case, texts.get(cp, chr(cp))))
        key = tuple(SAME if ord(out) == cp else ord(out) for out in text)
        if cp in context:
            context_keys.append((SAME,) if cp == GREEK_CAPITAL_SIGMA else key)
        else:
            codepoint_rows[cp] = row_ids.setdefault(key, len(row_ids))
    first_context_row = len(row_ids)
    keys = list(row_ids) + context_keys
    codepoint_rows[context] = np.arange(first_context_row, len(keys))
    width = max(len(key) for key in keys)
    rows = np.full((len(keys), width), PAD, np.int32)
    for index, key in enumerate(keys):
        rows[index, :len(key)] = key

    blocks = {}
    block_index = np.empty(NUM_BLOCKS, np.int32)
    for block, contents in enumerate(codepoint_rows.reshape(NUM_BLOCKS, BLOCK_SIZE)):
        block_index[block] = blocks.setdefault(contents.tobytes(), len(blocks))
    block_rows = np.frombuffer(b"".join(blocks), np.int32).copy()

    if lower_case:
        starts, values = _case_class_ranges()
        combining = [unicodedata.combining(chr(cp)) for cp in mc]
        blockers = _reorder_blockers()
    else:
        starts, values = np.zeros([1], np.int32), np.full([1], CASE_OTHER, np.int32)
        combining, blockers = [], []
    return NormalizationTables(
        lower_case=lower_case,
        block_index=block_index,
        block_rows=block_rows,
        rows=rows,
        first_context_row=first_context_row,
        case_class_starts=starts,
        case_class_values=values.astype(np.int32),
        mc_nonstarters=np.array(mc, np.int32),
        mc_combining_classes=np.array(combining, np.int32),
        reorder_blockers=np.array(blockers, np.int32),
        context_codepoints=np.array(context, np.int32),
    )
