"""Pre-training on the Keras JAX backend in several real processes (`jax.distributed` over a
localhost coordinator, the CPU collectives of gloo), as on the hosts of a TPU pod slice: each
process runs `tools/run_pretraining.py` with `--coordinator_address/--num_processes/
--process_id`, reads its own record files and feeds its share of every global batch.

The same global batch in every run: four record files of 64 records each and no shuffle buffer.
One process reads the four files round-robin, batch k holding records 4k..4k+3 of each; each of
two processes reads two of the files (every second one, from its id) and batches 8 records, each
of four processes reads one file and batches 4: together again records 4k..4k+3 of each file,
in another order within the batch (the loss is a mean over the batch). Dropout is off, so that
the gradients do not depend on the devices' random state.

The TensorFlow engine's workers (`TF_CONFIG`, MultiWorkerMirroredStrategy) are tested the same
way in `test_multi_worker.py`.
"""

import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from bert_keras.pretraining import inputs

from helpers import pretraining_run_fixtures as fx
from helpers.support import REPO_ROOT, backend_env

TOOL = os.path.join(REPO_ROOT, "tools", "run_pretraining.py")
STEPS, SAVE_EVERY, FILES, RECORDS_PER_FILE = 12, 4, 4, 64


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from bert_keras.model.config import BertConfig

    directory = tmp_path_factory.mktemp("multi_process")
    fx.write_vocab(str(directory), size=200)
    os.makedirs(directory / "train")
    for index in range(FILES):
        fx.write_feature_records(str(directory / "train" / f"part-{index:05d}.tfrecord"),
                                 fx.random_features(RECORDS_PER_FILE, 32, 5, 200, seed=index))
    config = BertConfig(vocab_size=200, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config.to_json_file(str(directory / "bert_config.json"))
    return directory


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(data, output_dir, processes):
    """`processes` copies of the pre-training tool, one run (one process: no coordinator)."""
    port = _free_port()
    command = [sys.executable, TOOL, f"--input_files={data}/train/*.tfrecord",
               f"--output_dir={output_dir}", f"--preset={data}/bert_config.json",
               f"--vocab_file={data}/vocab.txt", "--max_seq_length=32",
               "--max_predictions_per_seq=5", "--train_batch_size=16",
               f"--num_train_steps={STEPS}", "--num_warmup_steps=2", "--learning_rate=1e-3",
               f"--save_checkpoints_steps={SAVE_EVERY}", "--shuffle_buffer_size=1",
               "--dtype=float32"]
    launched = []
    for index in range(processes):
        flags = [f"--coordinator_address=127.0.0.1:{port}", f"--num_processes={processes}",
                 f"--process_id={index}"] if processes > 1 else []
        launched.append(subprocess.Popen(command + flags, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, text=True,
                                         env=backend_env("jax")))
    return launched


def finish(processes, timeout=400):
    outputs = [process.communicate(timeout=timeout)[0] for process in processes]
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output[-4000:]
    return outputs


def largest_difference(one, other):
    from bert_keras.modeldir import model_dir

    expected, got = model_dir.read_weights(str(one)), model_dir.read_weights(str(other))
    assert sorted(got) == sorted(expected)
    return max(float(np.max(np.abs(got[name] - expected[name]))) for name in expected)


@pytest.fixture(scope="module")
def one_process(data, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("one_process") / "run"
    finish(start(data, output_dir, 1))
    return output_dir


def test_four_processes_train_the_weights_of_one(data, one_process, tmp_path):
    outputs = finish(start(data, tmp_path / "four", 4))
    for index, output in enumerate(outputs):
        assert f"process {index} of 4 feeding 4" in output, output[-3000:]
    difference = largest_difference(one_process, tmp_path / "four")
    print(f"1 vs 4 processes: largest weight difference {difference:.3g}")
    assert difference <= 1e-4
    # Process 0 alone writes: the others' checkpoints would be the same files.
    assert sorted(os.listdir(tmp_path / "four" / "checkpoints")) == [
        "ckpt-12.npz", "ckpt-4.npz", "ckpt-8.npz", "run.json"]


def test_two_processes_killed_mid_run_resume_to_the_weights_of_one(data, one_process,
                                                                    tmp_path):
    """Process 1 is killed as soon as process 0 has saved step 4: the two take every step
    together, so neither is past step 5 and no later checkpoint exists. Process 0 then waits
    for its peer in a collective: it is stopped too, as a cluster manager stops a slice. The
    rerun of both resumes from step 4 and ends where the unbroken one-process run ended."""
    output_dir = tmp_path / "two"
    processes = start(data, output_dir, 2)
    first = output_dir / "checkpoints" / f"ckpt-{SAVE_EVERY}.npz"
    deadline = time.time() + 400
    while not first.exists() and all(p.poll() is None for p in processes) \
            and time.time() < deadline:
        time.sleep(0.01)
    processes[1].send_signal(signal.SIGKILL)
    processes[0].send_signal(signal.SIGKILL)
    outputs = [process.communicate()[0] for process in processes]
    assert first.exists(), outputs[0][-4000:]
    saved = sorted(name for name in os.listdir(output_dir / "checkpoints")
                   if name.endswith(".npz"))
    assert saved == [first.name] and not (output_dir / "model.safetensors").exists()

    outputs = finish(start(data, output_dir, 2))
    assert f"resumed from {first}" in outputs[0], outputs[0][-3000:]
    difference = largest_difference(one_process, output_dir)
    print(f"1 process vs 2 processes killed at step {SAVE_EVERY} and resumed: largest weight "
          f"difference {difference:.3g}")
    assert difference <= 1e-4
    with np.load(first) as at_kill, np.load(output_dir / "checkpoints" / f"ckpt-{STEPS}.npz") \
            as at_end:
        moved = max(float(np.max(np.abs(at_end[name] - at_kill[name])))
                    for name in at_kill.files if name.startswith("model/") and
                    at_kill[name].dtype.kind == "f")
    assert moved > 1e-3  # the steps after the resumption count


def test_record_files_that_do_not_divide_among_the_processes_are_refused(data):
    """Three files for two processes: one process would read two files, the other one; the
    refusal names the files and the processes (the recipe checks before building the model)."""
    files = inputs.expand_file_pattern(f"{data}/train/part-0000[0-2].tfrecord")
    with pytest.raises(inputs.RecordsError) as refusal:
        inputs.check_files_divide(files, 2)
    message = str(refusal.value)
    assert message.startswith(f"3 record files ({files[0]}, {files[1]}, {files[2]}) do not "
                              "divide among 2 processes")
    assert "--num_output_shards" in message
    inputs.check_files_divide(files + [f"{data}/train/part-00003.tfrecord"], 2)
    inputs.check_files_divide(files, 1)
