"""Pre-training on two worker processes (MultiWorkerMirroredStrategy over localhost) against one
process with the same global batch, and a worker killed mid-run then resumed.

The same global batch: one record file and no shuffle buffer, so that the two input pipelines
take every other record of the same stream and together hold exactly the records one process
batches; dropout off, so that the gradients do not depend on each replica's random state.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from bert_keras.modeldir import model_dir

from helpers import pretraining_run_fixtures as fx
from helpers.support import REPO_ROOT

TOOL = os.path.join(REPO_ROOT, "tools", "run_pretraining.py")
STEPS = 12


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from bert_keras.model.config import BertConfig

    directory = tmp_path_factory.mktemp("multi_worker")
    vocab_path = fx.write_vocab(str(directory), size=1000)
    fx.write_shards(str(directory / "train"),
                    fx.make_instances(fx.TRAIN_TEXT, vocab_path, 32, 5, dupe_factor=1, seed=1), 1)
    config = BertConfig.from_preset("tiny", vocab_size=1000, max_position_embeddings=64,
                                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config.to_json_file(str(directory / "bert_config.json"))
    return directory


def command(data, output_dir, strategy, *extra):
    return [sys.executable, TOOL, f"--input_files={data}/train/*.tfrecord",
            f"--output_dir={output_dir}", f"--preset={data}/bert_config.json",
            f"--vocab_file={data}/vocab.txt", "--max_seq_length=32", "--max_predictions_per_seq=5",
            "--train_batch_size=16", f"--num_train_steps={STEPS}", "--num_warmup_steps=2",
            "--learning_rate=1e-3", "--steps_per_execution=2", "--save_checkpoints_steps=4",
            "--shuffle_buffer_size=1", f"--strategy={strategy}", "--dtype=float32", *extra]


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _env(tf_config=None):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)
    if tf_config:
        env["TF_CONFIG"] = json.dumps(tf_config)
    return env


def start_workers(data, output_dir):
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    return [subprocess.Popen(command(data, output_dir, "multi_worker", "--alsologtostderr", "--verbosity=0"),
                             stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True,
                             env=_env({"cluster": cluster, "task": {"type": "worker", "index": i}}))
            for i in range(2)]


def finish(processes, timeout=400):
    outputs = [process.communicate(timeout=timeout)[0] for process in processes]
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output[-4000:]
    return outputs


def weights(directory):
    return model_dir.read_weights(str(directory))


@pytest.fixture(scope="module")
def two_workers(data, tmp_path_factory):
    """An uninterrupted two-worker run: (its output directory, each worker's output)."""
    output_dir = tmp_path_factory.mktemp("two_workers") / "two"
    return output_dir, finish(start_workers(data, output_dir))


def test_two_workers_train_the_weights_of_one_process(data, two_workers, tmp_path):
    one = subprocess.run(command(data, tmp_path / "one", "cpu"), capture_output=True, text=True,
                         timeout=300, env=_env())
    assert one.returncode == 0, one.stderr[-4000:]
    two, outputs = two_workers
    for output in outputs:
        assert "CollectiveAllReduceStrategy with 2 replica(s)" in output, output[-3000:]
    expected, got = weights(tmp_path / "one"), weights(two)
    assert sorted(got) == sorted(expected)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], atol=1e-5, rtol=0, err_msg=name)


def test_a_killed_worker_resumes_from_the_last_checkpoint(data, two_workers, tmp_path):
    output_dir = tmp_path / "killed"
    processes = start_workers(data, output_dir)
    index = output_dir / "checkpoints" / "checkpoint"
    deadline = time.time() + 300
    while not index.exists() and all(p.poll() is None for p in processes) and time.time() < deadline:
        time.sleep(0.05)
    assert index.exists(), "no checkpoint before the deadline"
    processes[1].send_signal(signal.SIGKILL)
    processes[1].wait()
    # The other worker cannot go on without its peer: stop it too (as a cluster manager would).
    try:
        processes[0].wait(timeout=15)
    except subprocess.TimeoutExpired:
        processes[0].kill()
        processes[0].wait()
    for process in processes:
        process.stdout.close()
    saved = int(open(index).read().split('"')[1].rsplit("-", 1)[1])
    assert 0 < saved < STEPS
    finish(start_workers(data, output_dir))
    # The reference: the same two workers, not interrupted.
    got, expected = weights(output_dir), weights(two_workers[0])
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], atol=1e-5, rtol=0, err_msg=name)
