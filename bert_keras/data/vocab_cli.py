r"""`bert-keras vocab`: learns a BERT WordPiece vocabulary (vocab.txt) from raw text.

  bert-keras vocab --input_files='corpus/*.txt' --vocab_size=30522 --output=vocab.txt \
      --do_lower_case --num_unused=994

`--num_unused=994` gives the special tokens the ids of Google's released vocabularies ([PAD] 0,
[UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103); the default puts them at 0-4. The words are those
of BERT's basic tokenization, as the tokenizer splits them; the result is deterministic for the
same input. The input is UTF-8 text unless `--input_encoding` names another encoding (e.g.
latin-1); a binary or compressed file, or one not in that encoding, is refused with an error
naming it. The builder is `bert_keras.text.vocab_builder`; the command lives here, beside the
corpus reader whose checks it applies to the input.
"""

import dataclasses
import os

from bert_keras.common import cli
from bert_keras.common.cli import option
from bert_keras.common import outputs
from bert_keras.common.errors import BertKerasError


@dataclasses.dataclass
class BuildVocabOptions:
    input_files: str = option(None, "Raw text: a comma-separated list of files or globs.",
                              required=True)
    input_encoding: str = cli.input_encoding_option()
    vocab_size: int = option(None, "Number of tokens in the vocabulary.", required=True)
    output: str = option(None, "The vocab.txt to write.", required=True)
    do_lower_case: bool = cli.do_lower_case_option()
    num_unused: int = option(0, "Number of [unusedK] tokens to reserve.")
    max_unique_chars: int = option(1000, "Most frequent characters kept as tokens; words with "
                                   "rarer ones become [UNK].")
    progress: bool = option(True, "Show progress.")


def check_output(path):
    """Raises unless `path` can be written as a file (before hours of work, not after)."""
    if os.path.isdir(path):
        raise BertKerasError(f"--output: {path} is a directory, not the vocab.txt to write")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
        raise BertKerasError(f"--output: cannot write to the directory {directory}")


def check_text_files(files, encoding="utf-8"):
    """Raises, naming the file, unless every file is text in `encoding` (not empty, binary or
    compressed): the corpus reader's check."""
    from bert_keras.data.corpus import check_corpus_files

    check_corpus_files(files, "sentences", min_documents=1, encoding=encoding)


def main():
    options = cli.options_from_flags(BuildVocabOptions)
    files = cli.expand_files(options.input_files)
    check_output(options.output)
    outputs.check_not_over_inputs(options.output, "output", [("input_files", files)])
    check_text_files(files, options.input_encoding)

    from bert_keras.text import vocab_builder

    tokens = vocab_builder.build_vocabulary(
        files, options.vocab_size, lower_case=options.do_lower_case,
        num_unused=options.num_unused, max_unique_chars=options.max_unique_chars,
        progress=options.progress, encoding=options.input_encoding)
    vocab_builder.write_vocabulary(tokens, options.output)
    print(f"wrote {len(tokens):,} tokens to {options.output}")
    return 0
