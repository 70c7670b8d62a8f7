"""The `bert-keras` command: every sub-command takes its flags from the options it sets, lists
them with `--help`, and reports bad input the same way: `tool: error: message` on stderr, exit
status 2, no traceback. The scripts in tools/ are aliases of the sub-commands."""

import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

from bert_keras.common import cli
from bert_keras.commands import COMMANDS

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS_DIR = os.path.join(REPO_ROOT, "tools")
# tools/ script -> the sub-command it runs.
ALIASES = {
    "build_vocab.py": "vocab",
    "create_pretraining_data.py": "data",
    "run_pretraining.py": "pretrain",
    "run_finetuning.py": "finetune",
    "export_savedmodel.py": "export",
    "convert_checkpoint.py": "convert",
    "run_main_job.py": "main",
}
MISSING = "/nonexistent/bert_keras_input"
BAD_INPUT = {
    "vocab": ["--input_files=" + MISSING, "--vocab_size=100", "--output=vocab.txt"],
    "data": ["--input_files=" + MISSING, "--vocab_file=vocab.txt", "--output_dir=out"],
    "pretrain": ["--input_files=" + MISSING + "/*.tfrecord", "--output_dir=out", "--preset=tiny",
                 "--vocab_file=" + MISSING],
    "finetune": ["--task=glue/mrpc", "--data_dir=" + MISSING, "--init_model_dir=" + MISSING,
                 "--output_dir=out"],
    "export": ["--kind=encoder", "--model_dir=" + MISSING, "--export_dir=out"],
    "convert": ["--input=" + MISSING, "--output_dir=out"],
    "main": ["--input_files=" + MISSING, "--work_dir=out"],
}


def bert_keras_command():
    """The installed `bert-keras` console script (README: `pip install -e ".[test]"`)."""
    beside = os.path.join(os.path.dirname(sys.executable), "bert-keras")
    path = beside if os.path.exists(beside) else shutil.which("bert-keras")
    assert path, "no bert-keras command: install the checkout (pip install -e \".[test]\")"
    return path


def run(argv, cwd):
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


def declared_flags(name):
    """The flags the options of the command `name` declare."""
    return {spec["flag"] or field.name for options in COMMANDS[name].options
            for field, spec in cli.options_of(options)}


def listed_flags(help_text, program):
    """The flags `--help` lists as the program's: absl lists them under its name."""
    section = help_text.split(f"\n{program}:\n", 1)[1].split("\n\n")[0]
    return set(re.findall(r"^  --(?:\[no\])?([a-z_0-9]+):", section, re.MULTILINE))


def test_every_tool_is_an_alias_of_a_command():
    tools = {name for name in os.listdir(TOOLS_DIR) if name.endswith(".py")}
    assert tools == set(ALIASES) and set(ALIASES.values()) == set(COMMANDS) == set(BAD_INPUT)
    for tool, name in ALIASES.items():
        with open(os.path.join(TOOLS_DIR, tool), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
                 and getattr(node.func, "id", None) == "run"]
        assert [call.args[0].value for call in calls] == [name], tool


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_flag_is_declared_outside_the_options(name):
    """A command's module and its alias define no flags of their own: every flag is an options
    field (the pre-training command's own flags are `PretrainingCommandOptions`)."""
    tool = next(tool for tool, command in ALIASES.items() if command == name)
    for path in (importlib.util.find_spec(COMMANDS[name].module).origin,
                 os.path.join(TOOLS_DIR, tool)):
        with open(path, encoding="utf-8") as f:
            assert not re.findall(r"DEFINE_[a-z]+\(", f.read()), path


def test_bert_keras_help_lists_the_commands(tmp_path):
    completed = run([bert_keras_command(), "--help"], tmp_path)
    assert completed.returncode == 0, completed.stderr[-2000:]
    listed = dict(re.findall(r"^  ([a-z]+) +(.+)$", completed.stdout, re.MULTILINE))
    assert listed == {name: command.summary for name, command in COMMANDS.items()}
    unknown = run([bert_keras_command(), "vocabulary"], tmp_path)
    assert unknown.returncode == 2 and unknown.stderr.startswith(
        "bert-keras: error: no command 'vocabulary'"), unknown.stderr


@pytest.mark.parametrize("name", list(COMMANDS))
def test_help_lists_the_flags_of_the_options(name, tmp_path):
    completed = run([bert_keras_command(), name, "--help"], tmp_path)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert listed_flags(completed.stdout + completed.stderr, f"bert-keras {name}") == (
        declared_flags(name))


@pytest.mark.parametrize("name", list(COMMANDS))
def test_bad_input_is_one_line_and_exit_2(name, tmp_path):
    completed = run([bert_keras_command(), name, *BAD_INPUT[name]], tmp_path)
    last = completed.stderr.strip().splitlines()[-1]
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert last.startswith(f"bert-keras {name}: error: ") and "bert_keras_input" in last, last
    assert "Traceback" not in completed.stderr, completed.stderr[-2000:]
    assert os.listdir(tmp_path) == [], "nothing is written for bad input"


def test_an_alias_keeps_its_name_in_messages(tmp_path):
    completed = run([sys.executable, os.path.join(TOOLS_DIR, "run_main_job.py"),
                     *BAD_INPUT["main"]], tmp_path)
    last = completed.stderr.strip().splitlines()[-1]
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert last.startswith("bert-keras-main: error: ") and "bert_keras_input" in last, last
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("argv", [["--no_such_flag"], ["--vocab_size=many"]])
def test_a_bad_flag_is_bad_input_too(argv, tmp_path):
    completed = run([sys.executable, os.path.join(TOOLS_DIR, "build_vocab.py"), *argv], tmp_path)
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert completed.stderr.startswith("build_vocab: error: "), completed.stderr[-2000:]
    assert argv[0].split("=")[0].lstrip("-") in completed.stderr
    assert "Traceback" not in completed.stderr and os.listdir(tmp_path) == []


def test_an_alias_takes_the_same_flags(tmp_path):
    completed = run([sys.executable, os.path.join(TOOLS_DIR, "build_vocab.py"), "--help"],
                    tmp_path)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert listed_flags(completed.stdout + completed.stderr, "build_vocab") == declared_flags("vocab")


def test_the_pretraining_command_keeps_its_own_flags():
    """--no_nsp and --num_cpu_devices are flags of the command, not settings of the run."""
    from absl import flags

    from bert_keras.pretraining.cli import PretrainingCommandOptions

    values = flags.FlagValues()
    for options in COMMANDS["pretrain"].options:
        cli.define_flags(options, values)
    values(["bert-keras pretrain", "--output_dir=out", "--no_nsp", "--num_cpu_devices=2"])
    assert cli.options_from_flags(PretrainingCommandOptions, values) == PretrainingCommandOptions(
        no_nsp=True, num_cpu_devices=2)


def test_the_registrys_example_runs():
    import doctest

    from bert_keras import commands

    results = doctest.testmod(commands, optionflags=doctest.ELLIPSIS)
    assert results.failed == 0 and results.attempted > 0, results
