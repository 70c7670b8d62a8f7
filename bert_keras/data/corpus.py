"""Reading a raw-text corpus as documents, cut into blocks of bounded size.

Two input formats:

- `sentences`: the original `create_pretraining_data.py` format, one sentence per line and a
  blank line between documents.
- `paragraphs`: one paragraph per line (sentences are split later by
  `bert_keras.text.sentence_splitting`); blank lines are ignored; a WikiText-style title line
  ` = Title = ` starts a new document and sub-headings ` = = Section = = ` are dropped.

In both formats every input file starts a new document (the original tool lets the last document
of a file run on into the next file when the file does not end with a blank line).

Whole documents are grouped into blocks of about `block_bytes` of text; a block is the unit of
work (tokenization, instance creation). Only a document of `block_bytes` or more is cut, into
pieces at sentence (or paragraph) boundaries, so that memory stays bounded.

Lines that are not valid UTF-8 are decoded with U+FFFD replacement characters
(`utf8_errors="replace"`) or skipped (`"skip"`); either way they are counted.

Example:

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "corpus.txt")
>>> _ = open(path, "w").write("First doc.\\nIts second sentence.\\n\\nSecond doc.\\n")
>>> stats = CorpusStats()
>>> [block.documents for block in iter_blocks([path], "sentences", 1 << 20, stats=stats)]
[[['First doc.', 'Its second sentence.'], ['Second doc.']]]
>>> stats.lines, stats.documents
(4, 2)
"""

import dataclasses
import logging
import os
import re

from bert_keras.common.errors import BertKerasError

logger = logging.getLogger("bert_keras.data")

INPUT_FORMATS = ("sentences", "paragraphs")
UTF8_ERRORS = ("replace", "skip")

_TITLE = re.compile(r"^\s*=\s+(?!=)(.*?)(?<!=)\s+=\s*$")
# A line this long is not a sentence (nor a paragraph): a file without line breaks, or its
# breaks in another form. The original tool reads a 1 MB line as one sentence, and one
# document of one sentence gives almost no instances.
LONG_LINE_BYTES = 100_000
# Sentence ends inside a line: ". It", "? The" (what a paragraph per line shows).
_SENTENCE_END = re.compile(r"[.!?][\"')\]]?\s+[\"'(\[]?[A-Z]")
_HEADING = re.compile(r"^\s*=(\s+=)*\s+.*?\s+=(\s+=)*\s*$")


@dataclasses.dataclass
class Block:
    """Consecutive documents of one file; `documents` is a list of lists of text lines.

    `index` counts the blocks read; `key` = (file number, block number within the file) names
    the block independently of which other files are read with it, so that random draws seeded
    from it are the same whichever task of a cluster reads the file.
    """

    index: int
    documents: list
    num_bytes: int
    key: tuple = (0, 0)


@dataclasses.dataclass
class CorpusStats:
    """What the reader saw."""

    files: int = 0
    bytes: int = 0
    lines: int = 0
    invalid_utf8_lines: int = 0
    skipped_lines: int = 0
    headings: int = 0
    documents: int = 0
    split_documents: int = 0


def _physical_lines(f):
    """(line, its size in bytes) of a binary file, whatever the line endings: "\\n", "\\r\\n",
    or a lone "\\r" (old Mac files, which would otherwise be one line). Lines without their
    endings; the sizes add up to the file's."""
    for raw in f:
        if b"\r" not in raw:
            yield raw.rstrip(b"\n"), len(raw)
            continue
        parts = raw.rstrip(b"\r\n").split(b"\r")
        for part in parts[:-1]:
            yield part, len(part) + 1
        yield parts[-1], len(raw) - sum(len(part) + 1 for part in parts[:-1])


def _decoded_lines(path, utf8_errors, stats, encoding="utf-8"):
    encoding = check_encoding(encoding)
    with open(path, "rb") as f:
        first = True
        for raw, size in _physical_lines(f):
            stats.lines += 1
            stats.bytes += size
            try:
                line = raw.decode(encoding)
            except UnicodeDecodeError:
                stats.invalid_utf8_lines += 1
                if utf8_errors == "skip":
                    stats.skipped_lines += 1
                    continue
                line = raw.decode(encoding, errors="replace")
            if first:
                line, first = line.removeprefix("\ufeff"), False  # a byte-order mark
            yield line.strip()


def check_encoding(encoding):
    """The codec name of `--input_encoding` (e.g. "utf-8", "latin-1", "cp1252"); `CorpusError`
    naming the flag when Python has no such codec."""
    import codecs

    try:
        name = codecs.lookup(encoding or "utf-8").name
    except LookupError:
        raise CorpusError(f"--input_encoding: no such encoding {encoding!r} (e.g. utf-8, "
                          "latin-1, cp1252)") from None
    if not "a\n".encode(name).endswith(b"a\n"):  # e.g. UTF-16: "\n" is two bytes
        raise CorpusError(f"--input_encoding={encoding}: lines are not split by the byte \"\\n\" "
                          f"in {name}; convert the files to UTF-8 first (iconv -f {name} -t "
                          "UTF-8)")
    return name


def iter_documents(files, input_format, utf8_errors="replace", stats=None, encoding="utf-8"):
    """Yields documents (lists of non-empty text lines) of the files, in order; the files are
    decoded from `encoding` (lines that do not decode are counted as `invalid_utf8_lines`)."""
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"input_format must be one of {INPUT_FORMATS}, got {input_format!r}")
    if utf8_errors not in UTF8_ERRORS:
        raise ValueError(f"utf8_errors must be one of {UTF8_ERRORS}, got {utf8_errors!r}")
    stats = stats if stats is not None else CorpusStats()
    for path in files:
        stats.files += 1
        document = []
        for line in _decoded_lines(path, utf8_errors, stats, encoding):
            if input_format == "sentences":
                if not line:
                    if document:
                        stats.documents += 1
                        yield document
                    document = []
                else:
                    document.append(line)
                continue
            if not line:
                continue
            if line.startswith("=") and line.endswith("="):
                if _TITLE.match(line):
                    if document:
                        stats.documents += 1
                        yield document
                    document = []
                    stats.headings += 1
                    continue
                if _HEADING.match(line):
                    stats.headings += 1
                    continue
            document.append(line)
        if document:
            stats.documents += 1
            yield document


class CorpusError(BertKerasError):
    """An input file that cannot be a pre-training corpus (empty, binary, one document)."""


_DOCUMENT_BREAKS = {
    "sentences": "a blank line between documents",
    "paragraphs": "a ' = Title = ' line at the start of every document",
}


# The first bytes of files that are not line-by-line text, and what to do instead: compressed
# files and archives, and text in an encoding whose line break is not the byte "\n" (UTF-16 and
# UTF-32, recognized by their byte-order marks; UTF-32's before UTF-16's, which it starts with).
_NOT_TEXT = (
    (b"\x1f\x8b", "gzip-compressed, not text; decompress it first (gunzip {name})"),
    (b"BZh", "bzip2-compressed, not text; decompress it first (bunzip2 {name})"),
    (b"\xfd7zXZ\x00", "xz-compressed, not text; decompress it first (unxz {name})"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed, not text; decompress it first (unzstd {name})"),
    (b"PK\x03\x04", "a zip archive, not text; decompress it first (unzip {name})"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-zip archive, not text; decompress it first (7z x {name})"),
) + tuple((bom, f"{wide} text (it starts with a {wide} byte-order mark); convert it to UTF-8 "
                f"first (iconv -f {wide} -t UTF-8)")
          for bom, wide in ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
                            (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16")))


def _not_text(head, path):
    """What to say about a file whose first bytes are `head` when it is not text, else None."""
    for magic, message in _NOT_TEXT:
        if head.startswith(magic) and (magic != b"BZh" or head[3:4].isdigit()):
            return f"{path}: {message.format(name=os.path.basename(path))}"
    return None


def check_corpus_files(files, input_format, sniff_bytes=4 << 20, min_documents=2,
                       encoding="utf-8"):
    """Checks that `files` hold text a pre-training corpus can be made of; returns nothing.

    Raises `CorpusError` naming the file (and line) when a file is empty or blank, compressed
    (gzip, bzip2, xz, zstd, zip or 7-zip: decompress it first), looks binary (a NUL byte, or
    more than 1% of its lines not in `encoding`, in its first `sniff_bytes`), or when all the
    files together hold fewer than two documents: the next-sentence task draws its random
    second segments from other documents, so one long text without document breaks is rejected
    with the break its format expects (`min_documents=1`: text that no document is drawn from,
    such as a vocabulary's). Reads at most `sniff_bytes` of each file for the binary check and
    stops counting documents at `min_documents`.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "corpus.txt")
    >>> _ = open(path, "wb").write("Un café.\\n\\nDeux cafés.\\n".encode("latin-1"))
    >>> check_corpus_files([path], "sentences")
    Traceback (most recent call last):
    bert_keras.data.corpus.CorpusError: ...corpus.txt: 2 of its first 3 lines are not UTF-8 (line 1 is the first); if the file is in another encoding, pass it as --input_encoding (e.g. latin-1)
    >>> check_corpus_files([path], "sentences", encoding="latin-1")
    """
    if input_format not in INPUT_FORMATS:
        raise ValueError(f"input_format must be one of {INPUT_FORMATS}, got {input_format!r}")
    encoding = check_encoding(encoding)
    if not files:
        raise CorpusError("no input files")
    for path in unique_files(files):
        if os.path.isdir(path):
            raise CorpusError(f"{path}: a directory, not a text file")
        lines = invalid = text_lines = 0
        first_invalid = None
        read = 0
        shape = _Shape()
        with open(path, "rb") as f:
            problem = _not_text(f.read(8), path)
            if problem:
                raise CorpusError(problem)
            f.seek(0)
            for raw, size in _physical_lines(f):
                lines += 1
                read += size
                if b"\0" in raw:
                    raise CorpusError(f"{path}, line {lines}: a NUL byte; this looks like a binary "
                                      "file, not text")
                try:
                    text = raw.decode(encoding)
                except UnicodeDecodeError:
                    invalid += 1
                    first_invalid = first_invalid or lines
                    text = ""
                text_lines += bool(text.strip().removeprefix("\ufeff"))
                shape.add(raw, text.strip(), lines)
                if read >= sniff_bytes:
                    break
        if invalid > max(1, lines // 100):
            hint = ("if the file is in another encoding, pass it as --input_encoding (e.g. "
                    "latin-1)" if encoding == "utf-8" else "is it in another encoding?")
            raise CorpusError(f"{path}: {invalid} of its first {lines} lines are not "
                              f"{'UTF-8' if encoding == 'utf-8' else encoding} (line "
                              f"{first_invalid} is the first); {hint}")
        if not text_lines:
            raise CorpusError(f"{path}: empty (no text)")
        for message in shape.warnings(path, input_format, encoding):
            logger.warning("%s", message)
    if min_documents <= 1:
        return
    documents = 0
    for _ in iter_documents(files, input_format, encoding=encoding):
        documents += 1
        if documents >= min_documents:
            return
    raise CorpusError(
        f"{', '.join(files)}: one document in all, with no document breaks ({input_format} "
        f"input expects {_DOCUMENT_BREAKS[input_format]}); the next-sentence task needs at least "
        "two documents")


class _Shape:
    """What the first lines of a file show about its encoding and its format: the warnings of
    `check_corpus_files` (a file is read the way it was asked to be; these say when that way
    looks wrong)."""

    def __init__(self):
        self.non_ascii_utf8 = None  # (line number, text) of a valid UTF-8 line with non-ASCII
        self.not_utf8 = False
        self.long_line = None  # (line number, bytes)
        self.documents = self.paragraph_documents = self.titles = 0
        self._document_lines = 0
        self._document_sentences = 0

    def add(self, raw, text, number):
        if not raw.isascii():
            try:
                decoded = raw.decode("utf-8")
            except UnicodeDecodeError:
                self.not_utf8 = True
            else:
                self.non_ascii_utf8 = self.non_ascii_utf8 or (number, decoded.strip())
        if len(raw) >= LONG_LINE_BYTES and self.long_line is None:
            self.long_line = (number, len(raw))
        if not text:  # a blank line: the end of a document in the sentences format
            self._close()
            return
        if text.startswith("=") and _TITLE.match(text):
            self.titles += 1
        self._document_lines += 1
        self._document_sentences += len(_SENTENCE_END.findall(text)) + 1

    def _close(self):
        if self._document_lines:
            self.documents += 1
            # One line of several sentences between blank lines: a paragraph, not a sentence.
            self.paragraph_documents += (self._document_lines == 1
                                         and self._document_sentences >= 3)
        self._document_lines = self._document_sentences = 0

    def warnings(self, path, input_format, encoding):
        self._close()
        found = []
        if not encoding.startswith("utf-8") and self.non_ascii_utf8 and not self.not_utf8:
            number, text = self.non_ascii_utf8
            word = next((w for w in text.split() if not w.isascii()), text)[:40]
            found.append(
                f"{path}: --input_encoding={encoding}, but the file is valid UTF-8 with non-ASCII "
                f"text (line {number}: {word!r}, read as {encoding}: "
                f"{word.encode('utf-8').decode(encoding, errors='replace')!r}); if the file is "
                "UTF-8, drop --input_encoding")
        if self.long_line:
            number, size = self.long_line
            unit = "sentence" if input_format == "sentences" else "paragraph"
            found.append(
                f"{path}, line {number}: {size:,} bytes on one line; --input_format={input_format} "
                f"reads a line as one {unit}, so the text around it makes few instances (is the "
                "file without line breaks, or split some other way?)")
        if input_format == "sentences" and self.documents >= 5 and (
                self.paragraph_documents * 2 >= self.documents or self.titles >= 2):
            found.append(
                f"{path}: looks like one paragraph per line, not one sentence per line "
                f"({self.paragraph_documents} of its first {self.documents} documents are a single "
                f"line of several sentences, {self.titles} ' = Title = ' lines); "
                "--input_format=sentences reads each such line as one sentence and each as a "
                "document: pass --input_format=paragraphs (WikiText's format)")
        return found


def unique_files(files):
    """`files` without repeats of one file (the same path twice, or two paths of one file, as
    `--input_files='a.txt,a*.txt'` gives), each warned about; the order of first appearance."""
    unique, seen = [], {}
    for path in files:
        try:
            key = (os.stat(path).st_dev, os.stat(path).st_ino)
        except OSError:
            key = os.path.abspath(path)
        if key in seen:
            logger.warning("%s is %s, matched twice in the input files: read once",
                           path, "the same path" if path == seen[key] else f"the same file as {seen[key]}")
            continue
        seen[key] = path
        unique.append(path)
    return unique


def check_heldout_files(heldout_files, training_files):
    """Warns (and returns the names) when held-out files are training files: a held-out figure
    measured on the training text says nothing about held-out text."""
    training = {}
    for path in training_files:
        try:
            training[(os.stat(path).st_dev, os.stat(path).st_ino)] = path
        except OSError:
            continue
    shared = []
    for path in heldout_files:
        try:
            key = (os.stat(path).st_dev, os.stat(path).st_ino)
        except OSError:
            continue
        if key in training:
            shared.append(path)
    if shared:
        every = len(shared) == len(list(heldout_files))
        logger.warning("--heldout_files: %s %s also in --input_files: the held-out figures "
                       "would be measured on training text; give held-out text the model does "
                       "not train on", ", ".join(shared),
                       "are all" if every and len(shared) > 1 else "is" if len(shared) == 1
                       else "are")
    return shared


def iter_blocks(files, input_format, block_bytes, utf8_errors="replace", stats=None,
                file_numbers=None, encoding="utf-8"):
    """Yields `Block`s of whole documents, each block closed by the document that brings it to
    `block_bytes` of text (so a block holds less than `2 * block_bytes`).

    A block holds documents of one file only. A document of `block_bytes` or more is cut into
    blocks of its own of about `block_bytes` each, at line boundaries (counted in
    `stats.split_documents`); no other document is cut. `file_numbers`: each file's number for
    the blocks' `key` (default: its position in `files`).
    """
    if block_bytes < 1:
        raise ValueError(f"block_bytes must be positive, got {block_bytes}")
    stats = stats if stats is not None else CorpusStats()
    file_numbers = list(range(len(files))) if file_numbers is None else list(file_numbers)
    index = 0
    for path, file_number in zip(files, file_numbers):
        in_file = 0
        documents, size = [], 0

        def block(documents, size):
            nonlocal index, in_file
            made = Block(index, documents, size, (file_number, in_file))
            index += 1
            in_file += 1
            return made

        for document in iter_documents([path], input_format, utf8_errors, stats, encoding):
            document_size = sum(len(line) + 1 for line in document)
            if document_size < block_bytes:
                documents.append(document)
                size += document_size
                if size >= block_bytes:
                    yield block(documents, size)
                    documents, size = [], 0
                continue
            # A document as large as a block: the open block first, then the document's pieces.
            if documents:
                yield block(documents, size)
                documents, size = [], 0
            stats.split_documents += 1
            piece, piece_size = [], 0
            for line in document:
                piece.append(line)
                piece_size += len(line) + 1
                if piece_size >= block_bytes:
                    yield block([piece], piece_size)
                    piece, piece_size = [], 0
            if piece:
                documents, size = [piece], piece_size
        if documents:
            yield block(documents, size)
