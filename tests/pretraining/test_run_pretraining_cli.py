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


def heldout_instances(data):
    """The held-out records' instances (the same call, the same seed, as `data` writes)."""
    return fx.make_instances(fx.HELDOUT_TEXT, str(data / "vocab.txt"), 32, 5, dupe_factor=1, seed=2)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cli_data")
    vocab_path = fx.write_vocab(str(directory), size=1000)
    fx.write_shards(str(directory / "train"),
                    fx.make_instances(fx.TRAIN_TEXT, vocab_path, 32, 5, dupe_factor=1, seed=1), 2)
    fx.write_shards(str(directory / "heldout"), heldout_instances(directory), 1)
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


def most_frequent_share(batch):
    """The accuracy of always predicting the most frequent held-out label (for the log)."""
    labels = batch.masked_lm_ids[batch.masked_lm_weights > 0]
    return np.bincount(labels).max() / len(labels)


def evaluate_by_hand(weights, config, batch):
    """Masked-LM and next-sentence figures of the saved weights on `batch`, counted here with
    NumPy from the pre-training model's logits (its heads are matched with the original NumPy
    computation in tests/model/test_pretraining_model.py), independent of the tool's record
    reading, checkpoint choice and metric sums: {name: value}, plus each prediction's margin
    between its two best logits."""
    import bert_keras
    from bert_keras.model import checkpoint_names
    from bert_keras.model.pretraining_model import pretraining_weight_map

    model = bert_keras.build_pretraining_model(config)
    checkpoint_names.assign_weights(pretraining_weight_map(model), weights)
    outputs = model({"input_word_ids": batch.input_ids, "input_mask": batch.input_mask,
                     "input_type_ids": batch.segment_ids, "masked_lm_positions": batch.masked_lm_positions})
    mlm_logits = np.asarray(outputs["mlm_logits"], np.float64)
    nsp_logits = np.asarray(outputs["next_sentence_logits"], np.float64)

    def log_softmax(logits):
        shifted = logits - logits.max(-1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))

    real = batch.masked_lm_weights > 0
    labels = batch.masked_lm_ids
    mlm_nll = -np.take_along_axis(log_softmax(mlm_logits), labels[..., None], -1)[..., 0]
    nsp_nll = -np.take_along_axis(log_softmax(nsp_logits), batch.next_sentence_labels[:, None], -1)[:, 0]
    top2 = np.sort(mlm_logits[real], -1)[:, -2:]
    return dict(
        masked_lm_accuracy=float(np.mean(mlm_logits.argmax(-1)[real] == labels[real])),
        masked_lm_loss=float(mlm_nll[real].mean()),
        next_sentence_accuracy=float(np.mean(nsp_logits.argmax(-1) == batch.next_sentence_labels)),
        next_sentence_loss=float(nsp_nll.mean()),
        mlm_margins=top2[:, 1] - top2[:, 0],
        nsp_margins=np.abs(nsp_logits[:, 1] - nsp_logits[:, 0]))


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
    # The tool's figures are those of the step-60 weights on every held-out record, counted
    # here by hand: a wrong checkpoint, skipped or repeated records, padding slots counted or
    # a metric's sums mixed up change them. The accuracies may differ only by the predictions
    # whose two best logits tie to float32 rounding (1e-4).
    batch = heldout_instances(data)
    config = model_dir.read_config(str(killed_dir))
    hand = evaluate_by_hand(got, config, batch)
    assert int(results["examples"]) == len(batch.input_ids)
    predictions = int((batch.masked_lm_weights > 0).sum())
    print(f"eval: {results}; by hand: { {k: v for k, v in hand.items() if 'margins' not in k} }; "
          f"most frequent token {most_frequent_share(batch):.4f}, NSP majority "
          f"{max(np.mean(batch.next_sentence_labels), 1 - np.mean(batch.next_sentence_labels)):.4f}")
    assert abs(float(results["masked_lm_accuracy"]) - hand["masked_lm_accuracy"]) <= (
        np.sum(hand["mlm_margins"] < 1e-4) / predictions + 1e-6), (results, hand)
    assert abs(float(results["next_sentence_accuracy"]) - hand["next_sentence_accuracy"]) <= (
        np.sum(hand["nsp_margins"] < 1e-4) / len(batch.input_ids) + 1e-6), (results, hand)
    for name in ("masked_lm_loss", "next_sentence_loss"):
        assert float(results[name]) == pytest.approx(hand[name], rel=1e-4), (name, results, hand)

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
