"""Learns a BERT WordPiece vocabulary (vocab.txt) from raw text.

  python tools/build_vocab.py --input_files='corpus/*.txt' --vocab_size=30522 \
      --output=vocab.txt --do_lower_case --num_unused=994

`--num_unused=994` gives the special tokens the ids of Google's released vocabularies ([PAD] 0,
[UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103); the default puts them at 0-4. The result is
deterministic for the same input. See bert_keras/text/vocab_builder.py.
"""

import glob
import os
import sys

from absl import app, flags

from bert_keras.text import vocab_builder

INPUT_FILES = flags.DEFINE_string("input_files", None, "Raw text: a comma-separated list of files "
                                  "or globs.", required=True)
VOCAB_SIZE = flags.DEFINE_integer("vocab_size", None, "Number of tokens in the vocabulary.",
                                  required=True)
OUTPUT = flags.DEFINE_string("output", None, "The vocab.txt to write.", required=True)
DO_LOWER_CASE = flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents (an uncased "
                                  "vocabulary), as the other tools' default; --nodo_lower_case "
                                  "for a cased one.")
flags.DEFINE_alias("lower_case", "do_lower_case")  # the earlier spelling
NUM_UNUSED = flags.DEFINE_integer("num_unused", 0, "Number of [unusedK] tokens to reserve.")
MAX_UNIQUE_CHARS = flags.DEFINE_integer("max_unique_chars", 1000, "Most frequent characters "
                                        "kept as tokens; rarer ones become [UNK].")
PROGRESS = flags.DEFINE_bool("progress", True, "Show progress.")


def main(argv):
    del argv
    try:
        files = []
        for pattern in INPUT_FILES.value.split(","):
            pattern = pattern.strip()
            if not pattern:
                continue
            matched = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else (
                [pattern] if os.path.isfile(pattern) else [])
            if not matched:
                raise vocab_builder.VocabularyBuildError(
                    f"--input_files: nothing matches {pattern!r}")
            files.extend(matched)
        output_dir = os.path.dirname(os.path.abspath(OUTPUT.value))
        if not os.path.isdir(output_dir) or not os.access(output_dir, os.W_OK):
            raise vocab_builder.VocabularyBuildError(
                f"--output: cannot write to the directory {output_dir}")
        tokens = vocab_builder.build_vocabulary(
            files, VOCAB_SIZE.value, lower_case=DO_LOWER_CASE.value, num_unused=NUM_UNUSED.value,
            max_unique_chars=MAX_UNIQUE_CHARS.value, progress=PROGRESS.value)
        vocab_builder.write_vocabulary(tokens, OUTPUT.value)
    except vocab_builder.VocabularyBuildError as error:
        print(f"build_vocab: error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {len(tokens):,} tokens to {OUTPUT.value}")
    return 0


if __name__ == "__main__":
    app.run(lambda argv: sys.exit(main(argv)))
