"""Writes BERT pre-training TFRecords (masked LM + next sentence) from raw text.

The original `create_pretraining_data.py` flags keep their meaning; the output is sharded:

  python tools/create_pretraining_data.py --input_file='corpus/*.txt' --vocab_file=vocab.txt \
      --output_dir=data/pretraining --do_lower_case --max_seq_length=128 \
      --max_predictions_per_seq=20 --masked_lm_prob=0.15 --dupe_factor=10

  # WikiText-style text, one paragraph per line, " = Title = " lines between articles:
  python tools/create_pretraining_data.py --input_format=paragraphs ...

  # On a cluster: N copies, each with its own --task_index, write disjoint parts.
  python tools/create_pretraining_data.py --num_tasks=N --task_index=$I ...

A rerun with the same flags continues an interrupted run. See docs/pretraining_data.md.
"""

import glob
import os
import sys

from absl import app, flags

from bert_keras.data import instances as pretraining_data
from bert_keras.data import pipeline as pretraining_pipeline

INPUT_FILES = flags.DEFINE_string(
    "input_files", None, "Input raw text file(s): a comma-separated list of files or globs.",
    required=True)
# The original tool's spelling, so that its command lines run unchanged.
flags.DEFINE_alias("input_file", "input_files")
VOCAB_FILE = flags.DEFINE_string("vocab_file", None, "The WordPiece vocabulary (vocab.txt).",
                                 required=True)
OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Directory for the TFRecord shards, "
                                 "stats.json and manifest.json.", required=True)
DO_LOWER_CASE = flags.DEFINE_bool("do_lower_case", True, "Lower-case and strip accents "
                                  "(uncased models).")
DO_WHOLE_WORD_MASK = flags.DEFINE_bool("do_whole_word_mask", False, "Mask whole words (a word "
                                       "and its ## pieces) instead of single WordPieces.")
MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
MAX_PREDICTIONS = flags.DEFINE_integer("max_predictions_per_seq", 20,
                                       "Maximum number of masked LM predictions per sequence.")
RANDOM_SEED = flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
DUPE_FACTOR = flags.DEFINE_integer("dupe_factor", 10, "Number of times to duplicate the input "
                                   "data (with different masks).")
MASKED_LM_PROB = flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
SHORT_SEQ_PROB = flags.DEFINE_float("short_seq_prob", 0.1, "Probability of creating sequences "
                                    "shorter than the maximum length.")
NUM_OUTPUT_SHARDS = flags.DEFINE_integer("num_output_shards", 16, "TFRecord files to write "
                                         "(per task).")
NUM_WORKERS = flags.DEFINE_integer("num_workers", 0, "Worker processes; 0 = one per CPU core. "
                                   "The output does not depend on it.")
INPUT_FORMAT = flags.DEFINE_enum(
    "input_format", "sentences", ["sentences", "paragraphs"],
    "sentences: one sentence per line, blank line between documents (the original format). "
    "paragraphs: one paragraph per line, sentences split by the tool; ' = Title = ' lines start "
    "a new document.")
TASK_INDEX = flags.DEFINE_integer("task_index", 0, "This copy's index among --num_tasks.")
NUM_TASKS = flags.DEFINE_integer("num_tasks", 1, "Copies of this tool sharing the input files "
                                 "(each takes every num_tasks-th file).")
BLOCK_SIZE_KIB = flags.DEFINE_integer(
    "block_size_kib", 0, "Text per unit of work, in KiB (whole documents; only a document this "
    "large is cut). 0: about 1/100 of the input, between 256 KiB and 1 MiB. Random-next "
    "segments come from any document of the same input file, whatever the block.")
UTF8_ERRORS = flags.DEFINE_enum("utf8_errors", "replace", ["replace", "skip"],
                                "Lines that are not valid UTF-8: decode with U+FFFD, or skip.")
PROGRESS = flags.DEFINE_bool("progress", True, "Show a progress bar and the statistics.")


def expand_inputs(spec):
    files = []
    for pattern in spec.split(","):
        pattern = pattern.strip()
        if not pattern:
            continue
        matched = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else (
            [pattern] if os.path.exists(pattern) else [])
        if not matched:
            raise pretraining_pipeline.PipelineError(f"--input_files: nothing matches {pattern!r}")
        files.extend(matched)
    return files


def main(argv):
    del argv
    try:
        options = pretraining_data.InstanceOptions(
            max_seq_length=MAX_SEQ_LENGTH.value,
            max_predictions_per_seq=MAX_PREDICTIONS.value,
            masked_lm_prob=MASKED_LM_PROB.value,
            short_seq_prob=SHORT_SEQ_PROB.value,
            dupe_factor=DUPE_FACTOR.value,
            do_whole_word_mask=DO_WHOLE_WORD_MASK.value)
        try:
            options.validate()
        except ValueError as error:
            raise pretraining_pipeline.PipelineError(str(error)) from error
        config = pretraining_pipeline.PipelineConfig(
            input_files=expand_inputs(INPUT_FILES.value),
            vocab_file=VOCAB_FILE.value,
            output_dir=OUTPUT_DIR.value,
            do_lower_case=DO_LOWER_CASE.value,
            options=options,
            random_seed=RANDOM_SEED.value,
            num_output_shards=NUM_OUTPUT_SHARDS.value,
            num_workers=NUM_WORKERS.value,
            input_format=INPUT_FORMAT.value,
            task_index=TASK_INDEX.value,
            num_tasks=NUM_TASKS.value,
            block_bytes=BLOCK_SIZE_KIB.value * 1024,
            utf8_errors=UTF8_ERRORS.value,
            tokenizer=os.environ.get("BERT_KERAS_PRETRAINING_TOKENIZER",
                                     pretraining_pipeline.DEFAULT_TOKENIZER),
            progress=PROGRESS.value)
        stats = pretraining_pipeline.run(config)
    except pretraining_pipeline.PipelineError as error:
        print(f"create_pretraining_data: error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {stats['instances']:,} instances to {OUTPUT_DIR.value}")
    return 0


if __name__ == "__main__":
    app.run(lambda argv: sys.exit(main(argv)))
