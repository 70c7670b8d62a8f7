"""The launchers in deploy/ parse, and every flag they give a `bert-keras` command is one of its
flags (they cannot run here: no Slurm, Kubernetes or TPU)."""

import os
import re
import subprocess

import pytest
import yaml
from absl import flags

from bert_keras.commands import COMMANDS
from bert_keras.common import cli

from helpers.support import REPO_ROOT

DEPLOY = os.path.join(REPO_ROOT, "deploy")
SCRIPTS = ["slurm/create_pretraining_data.sbatch", "slurm/pretrain_jax.sbatch",
           "tpu/pretrain_pod_slice.sh"]
JOB = "kubernetes/create-pretraining-data.yaml"


def command_flags(name):
    flag_values = flags.FlagValues()
    for options in COMMANDS[name].options:
        cli.define_flags(options, flag_values)
    names = set(flag_values)
    return names | {f"no{name}" for name in names}


def bert_keras_calls(text):
    """[(sub-command, [flag names])] of the `bert-keras SUB --flag ...` calls in a script."""
    text = text.replace("\\\n", " ")
    calls = []
    for match in re.finditer(r"bert-keras (\w+)((?:\s+--[\w]+(?:=\S+)?)+)", text):
        calls.append((match[1], re.findall(r"--(\w+)", match[2])))
    return calls


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_scripts_parse_and_use_real_flags(script):
    path = os.path.join(DEPLOY, script)
    subprocess.run(["bash", "-n", path], check=True)
    calls = bert_keras_calls(open(path, encoding="utf-8").read())
    assert calls, f"{script} runs no bert-keras command"
    for command, used in calls:
        unknown = sorted(set(used) - command_flags(command))
        assert not unknown, f"{script}: bert-keras {command} has no flag(s) {unknown}"


def test_the_indexed_job_runs_one_task_per_completion_index():
    with open(os.path.join(DEPLOY, JOB), encoding="utf-8") as f:
        job = yaml.safe_load(f)
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    args = " ".join(spec["template"]["spec"]["containers"][0]["args"])
    assert f"--num_tasks={spec['completions']}" in args
    assert "--task_index=${JOB_COMPLETION_INDEX}" in args
    for command, used in bert_keras_calls(args):
        assert not sorted(set(used) - command_flags(command)), used


def test_the_slurm_array_runs_one_task_per_array_index():
    text = open(os.path.join(DEPLOY, SCRIPTS[0]), encoding="utf-8").read()
    assert '--num_tasks="${SLURM_ARRAY_TASK_COUNT}"' in text
    assert '--task_index="${SLURM_ARRAY_TASK_ID}"' in text
