"""WordPiece vocabulary files: one token per line, the line number is the id.

Example:

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
>>> _ = open(path, "w").write("[PAD]\\n[UNK]\\n[CLS]\\n[SEP]\\n[MASK]\\nhello\\n##s\\n")
>>> vocab = Vocabulary.from_file(path)
>>> vocab.special_ids()
{'padding_id': 0, 'unknown_id': 1, 'start_of_sequence_id': 2, 'end_of_segment_id': 3, 'mask_id': 4}
"""

import os
import re

from bert_keras.common.errors import BertKerasError

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_UNUSED = re.compile(r"\[unused\d+\]")


class VocabularyError(BertKerasError):
    """A vocabulary file is missing, malformed or does not fit the model."""


class Vocabulary:
    """An ordered list of WordPiece tokens read from a `vocab.txt` file."""

    def __init__(self, tokens, path="<memory>"):
        self.tokens = list(tokens)
        self.path = os.fspath(path)
        self.token_to_id = {}
        for index, token in enumerate(self.tokens):
            if token in self.token_to_id:
                raise VocabularyError(
                    f"{self.path}: line {index + 1}: token {token!r} already appears on line "
                    f"{self.token_to_id[token] + 1}")
            self.token_to_id[token] = index
        missing = [token for token in SPECIAL_TOKENS if token not in self.token_to_id]
        if missing:
            raise VocabularyError(f"{self.path}: missing special token(s) {missing}")

    @classmethod
    def from_file(cls, path):
        path = os.fspath(path)
        if not os.path.exists(path):
            raise VocabularyError(f"{path}: vocabulary file not found")
        if os.path.isdir(path):
            raise VocabularyError(f"{path}: a directory, not a vocabulary file (vocab.txt)")
        tokens = []
        with open(path, "rb") as f:
            for line_number, raw in enumerate(f, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as error:
                    raise VocabularyError(f"{path}: line {line_number}: not valid UTF-8 ({error})") from error
                if line_number == 1 and line.startswith("\ufeff"):
                    raise VocabularyError(f"{path}: line 1 starts with a byte-order mark (U+FEFF); "
                                          "save the file as UTF-8 without it")
                token = line.rstrip("\n").rstrip("\r")
                # The original reader strips each line; a token with inner or edge spaces
                # would never be produced by the tokenizer.
                token = token.strip()
                if not token:
                    raise VocabularyError(f"{path}: line {line_number}: empty token")
                tokens.append(token)
        if not tokens:
            raise VocabularyError(f"{path}: vocabulary file is empty")
        return cls(tokens, path)

    def __len__(self):
        return len(self.tokens)

    def special_ids(self):
        """The ids of the special tokens, named as in the TF Hub preprocessor API."""
        ids = [self.token_to_id[token] for token in SPECIAL_TOKENS]
        return dict(zip(("padding_id", "unknown_id", "start_of_sequence_id", "end_of_segment_id",
                         "mask_id"), ids))

    def check_size(self, vocab_size, config_source="config"):
        """Raises when the number of tokens differs from the model's `vocab_size`."""
        if len(self.tokens) != vocab_size:
            raise VocabularyError(
                f"{self.path} has {len(self.tokens)} tokens but {config_source} says "
                f"vocab_size={vocab_size}")

    def is_uncased(self):
        """An uncased vocabulary holds no upper-case letters (besides its special tokens)."""
        return not any(token not in SPECIAL_TOKENS and not _UNUSED.fullmatch(token)
                       and token != token.lower() for token in self.tokens)

    def check_casing(self, do_lower_case, flag="--do_lower_case"):
        """Raises when the casing asked for cannot be this vocabulary's.

        A cased vocabulary used with lower-casing never sees its capitalized tokens; an uncased
        one used without lower-casing turns every capitalized word into pieces or [UNK].
        """
        uncased = self.is_uncased()
        if do_lower_case and not uncased:
            raise VocabularyError(f"{self.path} is a cased vocabulary (it holds upper-case tokens) "
                                  f"but {flag} is set: pass --nodo_lower_case")
        if not do_lower_case and uncased:
            raise VocabularyError(f"{self.path} is an uncased vocabulary (no upper-case tokens) "
                                  f"but {flag} is off: pass --do_lower_case")

    def write(self, path):
        from bert_keras.common.files import write_text_atomic
        write_text_atomic(path, "".join(token + "\n" for token in self.tokens))
