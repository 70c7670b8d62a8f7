"""tools/run_pretraining.py end to end: resume after SIGKILL, evaluation, errors and exit codes."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from bert_keras.modeldir import model_dir

from helpers import pretraining_run_fixtures as fx
from helpers.support import REPO_ROOT as ROOT

TOOL = os.path.join(ROOT, "tools", "run_pretraining.py")
STEPS = 60


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cli_data")
    vocab_path = fx.write_vocab(str(directory), size=1000)
    fx.write_shards(str(directory / "train"),
                    fx.make_instances(fx.TRAIN_TEXT, vocab_path, 32, 5, dupe_factor=1, seed=1), 2)
    fx.write_shards(str(directory / "heldout"),
                    fx.make_instances(fx.HELDOUT_TEXT, vocab_path, 32, 5, dupe_factor=1, seed=2), 1)
    return directory


def command(data, output_dir, *extra):
    return [sys.executable, TOOL, f"--input_files={data}/train/*.tfrecord", f"--output_dir={output_dir}",
            "--preset=tiny", f"--vocab_file={data}/vocab.txt", "--max_seq_length=32",
            "--max_predictions_per_seq=5", "--train_batch_size=16", f"--num_train_steps={STEPS}",
            "--num_warmup_steps=5", "--learning_rate=5e-4", "--steps_per_execution=5",
            "--save_checkpoints_steps=10", "--strategy=cpu", "--dtype=float32", *extra]


def _env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def run(args, timeout=240):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=_env())


def run_in_this_process(args):
    """The run of `tools/run_pretraining.py args` in this process: the tool's flags, parsed
    into the options it passes to `run_pretraining` (no second TensorFlow start-up)."""
    from absl import flags

    from bert_keras.common import cli
    from bert_keras.pretraining import run_pretraining
    from bert_keras.pretraining.options import PretrainingOptions

    values = flags.FlagValues()
    cli.define_flags(PretrainingOptions, flag_values=values)
    values([TOOL, *args])
    return run_pretraining(cli.options_from_flags(PretrainingOptions, values))


def test_a_run_killed_after_a_checkpoint_resumes_to_the_same_weights(data, tmp_path):
    # Dropout stays on (the tiny preset's 0.1): its random state is part of the checkpoint.
    reference = run_in_this_process(command(data, tmp_path / "uninterrupted")[2:])
    assert reference["step"] == STEPS

    killed_dir = tmp_path / "killed"
    process = subprocess.Popen(command(data, killed_dir), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=_env())
    index = killed_dir / "checkpoints" / "checkpoint"
    deadline = time.time() + 180
    while not index.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    assert index.exists(), "no checkpoint was written before the kill"
    assert not (killed_dir / "model.safetensors").exists(), "the run finished before it was killed"
    killed_at = open(index).read()

    resumed = run(command(data, killed_dir))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stderr
    assert f"step={STEPS}" in resumed.stdout
    expected = model_dir.read_weights(str(tmp_path / "uninterrupted"))
    got = model_dir.read_weights(str(killed_dir))
    assert sorted(got) == sorted(expected)
    difference = max(float(np.abs(got[name] - expected[name]).max()) for name in expected)
    print(f"\nkilled with {killed_at.splitlines()[0]}; resumed weights differ by at most {difference:.2e}")

    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], atol=1e-5, err_msg=name)
    assert os.path.exists(killed_dir / "checkpoints" / f"ckpt-{STEPS}.index")

    # A finished run rerun is a no-op; evaluation reads the latest checkpoint.
    again = run(command(data, killed_dir))
    assert again.returncode == 0 and f"step={STEPS}" in again.stdout
    evaluation = run([sys.executable, TOOL, "--mode=eval", f"--input_files={data}/heldout/*.tfrecord",
                      f"--output_dir={killed_dir}", "--max_seq_length=32", "--max_predictions_per_seq=5",
                      "--strategy=cpu"])
    assert evaluation.returncode == 0, evaluation.stderr[-3000:]
    results = dict(line.split(" = ") for line in open(killed_dir / "eval_results.txt").read().splitlines())
    assert float(results["global_step"]) == STEPS
    assert 0 <= float(results["masked_lm_accuracy"]) <= 1
    assert 0 <= float(results["next_sentence_accuracy"]) <= 1
    assert float(results["masked_lm_loss"]) > 0

    # Another model size into the same directory is refused with exit code 2, naming the
    # change and --start_over (which replaces that run: tests/pretraining/test_run.py).
    changed = run(command(data, killed_dir, "--preset=L4_H128"))
    assert changed.returncode == 2, changed.stderr[-3000:]
    assert "num_hidden_layers: 2 in the checkpoint, 4 now" in changed.stderr
    assert "--start_over" in changed.stderr


def test_bad_flags_fail_with_a_message_and_exit_code(data, tmp_path):
    done = run(command(data, tmp_path / "out", "--max_seq_length=128"))
    assert done.returncode == 2
    assert "part-00000.tfrecord" in done.stderr and "max_seq_length=32" in done.stderr
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    done = run(command(data, a_file))
    assert done.returncode == 2 and f"--output_dir={a_file} is a file, not a directory" in (
        done.stderr), done.stderr[-2000:]
    assert a_file.read_text() == "not a directory"
