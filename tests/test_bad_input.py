"""Bad input, across the text tools: each case exits with status 2 and one line
`tool: error: ...` that names the file, line or flag, without a traceback, writes nothing and
leaves the inputs as they were.

Each tool's own tests hold its other cases (tests/test_tools.py: a missing input for every tool;
tests/text/test_vocab_builder.py, tests/data/test_create_pretraining_data.py,
tests/pretraining/test_run_pretraining_cli.py, tests/modeldir/test_convert.py,
tests/test_main_job.py, tests/export/test_encoder_export.py and test_task_export.py). The cases
here are those the error policy adds: compressed and UTF-16 files, impossible encodings and
ranges, broken vocabularies.

The first case of each tool runs the tool's script in a child process: the exit status and the
message as a user gets them. The others run the same sub-command in this process (its flags
defined on a fresh absl FlagValues, parsed and run under the tools' error policy, as
`bert_keras.commands.run` does), each with the assertions of a child's run, without a
TensorFlow start-up each.
"""

import bz2
import hashlib
import logging
import lzma
import os
import subprocess
import sys
import zipfile

import pytest

from helpers.support import REPO_ROOT, TESTS_DIR

CORPUS = os.path.join(TESTS_DIR, "fixtures", "pretraining_wikitext.txt")
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _inputs(root):
    """The files the cases read, written into `root`: {name: path}."""
    text = open(CORPUS, encoding="utf-8").read()
    words = sorted(set(text.lower().split()))[:300]
    files = {"corpus": CORPUS}

    def write(name, data):
        path = os.path.join(root, name)
        with open(path, "wb") as f:
            f.write(data)
        files[name] = path

    write("vocab.txt", "\n".join(SPECIAL + words).encode() + b"\n")
    write("vocab_duplicate.txt", "\n".join(SPECIAL + words + [words[3]]).encode() + b"\n")
    write("vocab_empty.txt", b"")
    write("vocab_bom.txt", b"\xef\xbb\xbf" + "\n".join(SPECIAL + words).encode() + b"\n")
    write("vocab_no_mask.txt", "\n".join(SPECIAL[:4] + words).encode() + b"\n")
    write("corpus.txt.bz2", bz2.compress(text.encode()))
    write("corpus.txt.xz", lzma.compress(text.encode()))
    write("utf16.txt", text.encode("utf-16"))
    # build_vocab reads one sentence per line (a blank line between documents): the same
    # text in that format, so that the cases about its flags meet no warning about the format.
    sentences = []
    for line in text.split("\n"):
        if line.strip().startswith("= "):
            sentences.append("")
        else:
            sentences += [part.strip() + " ." for part in line.split(" . ") if part.strip(" .")]
    write("sentences.txt", "\n".join(sentences).encode() + b"\n")
    write("one_document.txt", "\n".join(line for line in text.split("\n")
                                        if not line.startswith(" = ")).encode())
    zipped = os.path.join(root, "corpus.zip")
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.write(CORPUS, "corpus.txt")
    files["corpus.zip"] = zipped
    return files


VOCAB = [sys.executable, os.path.join(REPO_ROOT, "tools", "build_vocab.py"), "--noprogress"]
DATA = [sys.executable, os.path.join(REPO_ROOT, "tools", "create_pretraining_data.py"),
        "--noprogress", "--input_format=paragraphs", "--max_seq_length=64",
        "--max_predictions_per_seq=10"]

# (name, tool, arguments ({name} = an input file, {out} = the output), what the message says)
CASES = [
    ("vocab: bzip2 input", VOCAB, ["--input_files={corpus.txt.bz2}"],
     "{corpus.txt.bz2}: bzip2-compressed, not text; decompress it first"),
    ("vocab: xz input", VOCAB, ["--input_files={corpus.txt.xz}"],
     "{corpus.txt.xz}: xz-compressed, not text"),
    ("vocab: zip archive", VOCAB, ["--input_files={corpus.zip}"],
     "{corpus.zip}: a zip archive, not text"),
    ("vocab: UTF-16 input", VOCAB, ["--input_files={utf16.txt}"],
     "{utf16.txt}: UTF-16 text (it starts with a UTF-16 byte-order mark); convert it to UTF-8"),
    ("vocab: an encoding without byte line breaks", VOCAB,
     ["--input_files={sentences.txt}", "--input_encoding=utf-16"],
     "--input_encoding=utf-16: lines are not split"),
    ("vocab: unknown encoding", VOCAB, ["--input_files={sentences.txt}", "--input_encoding=ebcdic-x"],
     "--input_encoding: no such encoding 'ebcdic-x'"),
    ("vocab: negative size", VOCAB, ["--input_files={sentences.txt}", "--vocab_size=-5"],
     "vocab_size=-5"),
    ("vocab: negative unused", VOCAB, ["--input_files={sentences.txt}", "--num_unused=-1"],
     "num_unused must be >= 0, got -1"),
    ("vocab: an absurd size", VOCAB, ["--input_files={sentences.txt}", "--vocab_size=1000000000"],
     "vocab_size=1,000,000,000 is larger than 1,000,000"),
    ("vocab: size not a number", VOCAB, ["--input_files={sentences.txt}", "--vocab_size=many"],
     "vocab_size"),
    ("data: bzip2 input", DATA, ["--input_files={corpus.txt.bz2}", "--vocab_file={vocab.txt}"],
     "{corpus.txt.bz2}: bzip2-compressed, not text"),
    ("data: UTF-16 input", DATA, ["--input_files={utf16.txt}", "--vocab_file={vocab.txt}"],
     "{utf16.txt}: UTF-16 text"),
    ("data: one document", DATA, ["--input_files={one_document.txt}", "--vocab_file={vocab.txt}"],
     "one document in all, with no document breaks"),
    ("data: duplicate vocabulary token", DATA,
     ["--input_files={corpus}", "--vocab_file={vocab_duplicate.txt}"], "already appears on line"),
    ("data: empty vocabulary", DATA, ["--input_files={corpus}", "--vocab_file={vocab_empty.txt}"],
     "{vocab_empty.txt}: vocabulary file is empty"),
    ("data: vocabulary with a byte-order mark", DATA,
     ["--input_files={corpus}", "--vocab_file={vocab_bom.txt}"],
     "line 1 starts with a byte-order mark"),
    ("data: vocabulary without [MASK]", DATA,
     ["--input_files={corpus}", "--vocab_file={vocab_no_mask.txt}"], "[MASK]"),
    ("data: a directory as vocabulary", DATA,
     ["--input_files={corpus}", "--vocab_file={root}"], "a directory, not a vocabulary file"),
    ("data: dupe factor 0", DATA, ["--input_files={corpus}", "--vocab_file={vocab.txt}",
                                   "--dupe_factor=0"], "dupe_factor must be at least 1, got 0"),
    ("data: masking share above 1", DATA, ["--input_files={corpus}", "--vocab_file={vocab.txt}",
                                           "--masked_lm_prob=1.5"],
     "masked_lm_prob must be in [0, 1], got 1.5"),
    ("data: short-sequence share above 1", DATA,
     ["--input_files={corpus}", "--vocab_file={vocab.txt}", "--short_seq_prob=2"],
     "short_seq_prob must be in [0, 1], got 2.0"),
    ("data: no predictions", DATA, ["--input_files={corpus}", "--vocab_file={vocab.txt}",
                                    "--max_predictions_per_seq=0"],
     "max_predictions_per_seq must be at least 1, got 0"),
    ("data: negative block size", DATA, ["--input_files={corpus}", "--vocab_file={vocab.txt}",
                                         "--block_size_kib=-1"],
     "--block_size_kib must be positive (or 0: automatic), got -1"),
    ("data: unknown input format", DATA, ["--input_files={corpus}", "--vocab_file={vocab.txt}",
                                          "--input_format=markdown"], "input_format"),
    ("data: zero shards", DATA, ["--input_files={corpus}", "--vocab_file={vocab.txt}",
                                 "--num_output_shards=0"],
     "--num_output_shards must be at least 1, got 0"),
]


def _filled(text, inputs):
    """`text` with each {name} replaced by the path of that input."""
    for key, path in inputs.items():
        text = text.replace("{" + key + "}", path)
    return text


def _digests(root):
    return {name: hashlib.sha256(open(os.path.join(root, name), "rb").read()).hexdigest()
            for name in sorted(os.listdir(root))}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("inputs")
    files = _inputs(str(root))
    files["root"] = str(root)
    return files


# The first case of each tool runs in a child process; the rest in this one.
IN_A_CHILD = {next(case[0] for case in CASES if case[1] is tool) for tool in (VOCAB, DATA)}


def _run_in_this_process(tool, arguments, cwd, capsys):
    """(exit status, stderr) of `tool`'s sub-command on `arguments`, run here as
    `bert_keras.commands.run` runs it: the sub-command's flags on a fresh FlagValues (absl's
    global one, swapped for the call), parsed by the tools' parser (a bad flag: status 2), then
    `main` under `report_errors`."""
    import importlib

    from absl import flags

    from bert_keras import commands
    from bert_keras.common import cli

    program = os.path.basename(tool[1]).removesuffix(".py")
    command = commands.COMMANDS[{"build_vocab": "vocab", "create_pretraining_data": "data"}[program]]
    module = importlib.import_module(command.module)
    # A child prints logged warnings on stderr before the error line: so does this process.
    warnings = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: warnings.append(f"{record.levelname}: {record.getMessage()}\n")
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        patch.setattr(flags, "FLAGS", flags.FlagValues())
        patch.setattr(sys, "argv", [program, *arguments])
        for options in command.options:
            cli.define_flags(options)
        logging.getLogger().addHandler(handler)
        try:
            cli._parse_flags(program)([program, *arguments])  # pylint: disable=protected-access
            status = cli.report_errors(program, module.main)
        except SystemExit as exit:
            status = exit.code
        finally:
            logging.getLogger().removeHandler(handler)
    return status, "".join(warnings) + capsys.readouterr().err


@pytest.mark.parametrize("name,tool,arguments,message", CASES, ids=[case[0] for case in CASES])
def test_bad_input_is_refused_by_name_and_writes_nothing(name, tool, arguments, message, inputs,
                                                        tmp_path, capsys):
    out = tmp_path / "out"
    output = ([f"--output={out / 'vocab.txt'}", "--vocab_size=200"] if tool is VOCAB
              else [f"--output_dir={out}"])
    if tool is VOCAB:
        out.mkdir()
    arguments = [_filled(argument, inputs) for argument in arguments]
    before = _digests(inputs["root"])
    if name in IN_A_CHILD:
        completed = subprocess.run([*tool, *output, *arguments], capture_output=True, text=True,
                                   timeout=300, cwd=tmp_path,
                                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        status, stderr = completed.returncode, completed.stderr
    else:
        status, stderr = _run_in_this_process(tool, [*tool[2:], *output, *arguments], tmp_path,
                                              capsys)
    tool_name = os.path.basename(tool[1]).removesuffix(".py")
    lines = stderr.strip().splitlines()
    assert status == 2, stderr[-3000:]
    assert lines and lines[0].startswith(f"{tool_name}: error: "), stderr[-3000:]
    assert _filled(message, inputs) in stderr, (message, stderr[-3000:])
    assert "Traceback" not in stderr
    assert not out.exists() or os.listdir(out) == [], sorted(os.listdir(out))
    assert _digests(inputs["root"]) == before, "an input was changed"
