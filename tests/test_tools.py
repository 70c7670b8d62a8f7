"""Every command-line tool takes its flags from the options it sets and reports bad input the
same way: `tool: error: message` on stderr, exit status 2, no traceback."""

import os
import re
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS_DIR = os.path.join(REPO_ROOT, "tools")
# Flags a tool still declares itself, each with its reason.
TOOL_ONLY_FLAGS = {
    "run_pretraining.py": {"no_nsp",            # the earlier spelling of --nonext_sentence
                           "num_cpu_devices"},  # a device set-up, not a setting of the run
}
MISSING = "/nonexistent/bert_keras_input"
BAD_INPUT = {
    "build_vocab.py": ["--input_files=" + MISSING, "--vocab_size=100", "--output=vocab.txt"],
    "create_pretraining_data.py": ["--input_files=" + MISSING, "--vocab_file=vocab.txt",
                                   "--output_dir=out"],
    "run_pretraining.py": ["--input_files=" + MISSING + "/*.tfrecord", "--output_dir=out",
                           "--preset=tiny", "--vocab_file=" + MISSING],
    "run_finetuning.py": ["--task=glue/mrpc", "--data_dir=" + MISSING, "--init_model_dir=" + MISSING,
                          "--output_dir=out"],
    "export_savedmodel.py": ["--kind=encoder", "--model_dir=" + MISSING, "--export_dir=out"],
    "convert_checkpoint.py": ["--input=" + MISSING, "--output_dir=out"],
    "run_main_job.py": ["--input_files=" + MISSING, "--work_dir=out"],
}


def test_every_tool_is_covered():
    tools = {name for name in os.listdir(TOOLS_DIR) if name.endswith(".py")}
    assert tools == set(BAD_INPUT)


@pytest.mark.parametrize("tool", sorted(BAD_INPUT))
def test_flags_come_from_the_options(tool):
    with open(os.path.join(TOOLS_DIR, tool), encoding="utf-8") as f:
        declared = set(re.findall(r"DEFINE_[a-z]+\(\s*\"([a-z_0-9]+)\"", f.read()))
    assert declared == TOOL_ONLY_FLAGS.get(tool, set())


@pytest.mark.parametrize("tool", sorted(BAD_INPUT))
def test_bad_input_is_one_line_and_exit_2(tool, tmp_path):
    completed = subprocess.run(
        [sys.executable, os.path.join(TOOLS_DIR, tool), *BAD_INPUT[tool]], cwd=tmp_path,
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    name = "bert-keras-main" if tool == "run_main_job.py" else tool.removesuffix(".py")
    last = completed.stderr.strip().splitlines()[-1]
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert last.startswith(f"{name}: error: ") and "bert_keras_input" in last, last
    assert "Traceback" not in completed.stderr, completed.stderr[-2000:]
    assert os.listdir(tmp_path) == [], "nothing is written for bad input"


@pytest.mark.parametrize("argv", [["--no_such_flag"], ["--vocab_size=many"]])
def test_a_bad_flag_is_bad_input_too(argv, tmp_path):
    completed = subprocess.run(
        [sys.executable, os.path.join(TOOLS_DIR, "build_vocab.py"), *argv], cwd=tmp_path,
        capture_output=True, text=True, timeout=300)
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert completed.stderr.startswith("build_vocab: error: "), completed.stderr[-2000:]
    assert argv[0].split("=")[0].lstrip("-") in completed.stderr
    assert "Traceback" not in completed.stderr and os.listdir(tmp_path) == []


def test_help_lists_the_flags_and_exits_0(tmp_path):
    completed = subprocess.run(
        [sys.executable, os.path.join(TOOLS_DIR, "build_vocab.py"), "--help"], cwd=tmp_path,
        capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-2000:]
    listed = completed.stdout + completed.stderr
    assert all(f"--{flag}" in listed for flag in ("input_files", "vocab_size", "input_encoding"))
