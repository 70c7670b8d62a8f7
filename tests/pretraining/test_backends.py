"""Pre-training on the Keras JAX backend (`pretraining.keras_engine`, `keras.Model.fit`) takes the
steps of the TensorFlow engine (`pretraining.tensorflow_engine`, the step of `pretraining.step`).

`run_pretraining` in one process per backend (`KERAS_BACKEND`), from the same model directory
(encoder and heads, dropout off) on the same masked records, 6 steps of AdamW with warm-up and
clipping: the model directories they write hold the same weights within 1e-4 (about 1e-6
measured), the weights having moved by far more. Before the JAX path read the records through
one iterator, Keras on JAX drew another shuffle than TensorFlow (it makes an extra iterator of
a dataset to build the model) and the weights parted completely.

Each backend's process does all of its runs one after the other (`runs`, below), each from a
cleared Keras session and its own seed, as a user's process would do one: a process costs
10-20 s of imports on these CPUs, more than a run of 6 steps.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from helpers import pretraining_run_fixtures as fx
from helpers.support import REPO_ROOT, backend_env

_CHILD = textwrap.dedent('''
    import json, sys
    import keras
    from bert_keras.pretraining.run import PretrainingOptions, run_pretraining

    records, init, root, runs, results_file = sys.argv[1:6]
    results = []
    for name, overrides in json.loads(runs):
        options = dict(
            input_files=records, output_dir=f"{root}/{name}", init_model_dir=init,
            train_batch_size=8, num_train_steps=6, num_warmup_steps=2, learning_rate=1e-3,
            max_seq_length=32, max_predictions_per_seq=5, save_checkpoints_steps=6,
            mixed_precision="float32", verbose=0)
        options.update(overrides)
        keras.backend.clear_session()
        try:
            metrics = run_pretraining(PretrainingOptions(**options))
            result = {"metrics": {key: value if isinstance(value, str) else float(value)
                                  for key, value in metrics.items()}}
        except Exception as error:  # a refusal the test expects, or the failure it reports
            result = {"error": f"{type(error).__name__}: {error}"}
        result.update(backend=keras.backend.backend(),
                      devices=len(keras.distribution.list_devices()))
        results.append(result)
    with open(results_file, "w") as f:
        json.dump(results, f)
''')

# name: the run's options over the child's. Each backend does every one; the tests compare
# the two trainers' runs of a name.
RUNS = {
    "default": {},
    "lamb": {"optimizer": "lamb"},
    "no_bias_correction_fused": {"adam_bias_correction": False, "fused_attention": True},
    "accumulated": {"gradient_accumulation_steps": 2},
    "eval": {"mode": "eval", "eval_batch_size": 24},
    "diverging": {"learning_rate": 1e30},
}


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    import keras

    import bert_keras
    from bert_keras.model import checkpoint_names
    from bert_keras.model.pretraining_model import (build_pretraining_model,
                                                    pretraining_weight_map)
    from bert_keras.modeldir import model_dir

    root = tmp_path_factory.mktemp("pretraining_backends")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(95)]
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n")
    config = bert_keras.BertConfig.from_preset("tiny", vocab_size=len(vocab),
                                               hidden_dropout_prob=0.0,
                                               attention_probs_dropout_prob=0.0)
    keras.utils.set_random_seed(1)
    weights = checkpoint_names.collect_weights(pretraining_weight_map(
        build_pretraining_model(config)))
    model_dir.write_model_dir(str(root / "init"), config, str(root / "vocab.txt"), True, weights)
    fx.write_feature_records(str(root / "data.tfrecord"),
                             fx.random_features(64, 32, 5, len(vocab)))
    return root


def _pretrain_all(root, backend, runs, devices=1):
    """Runs [(name, options)] in one child process on `backend`, each into the directory
    `root`/name; [(that directory, its result: "metrics" or the "error" it was refused with,
    "backend", "devices")] in the same order."""
    results_file = root / f"results_{backend}_{time.monotonic_ns()}.json"
    process = subprocess.run([sys.executable, "-c", _CHILD, str(root / "data.tfrecord"),
                              str(root / "init"), str(root), json.dumps(runs), str(results_file)],
                             env=backend_env(backend, devices), capture_output=True, text=True,
                             timeout=900)
    assert process.returncode == 0, process.stderr[-6000:]
    with open(results_file, encoding="utf-8") as f:
        results = json.load(f)
    return [(str(root / name), result) for (name, _), result in zip(runs, results)]


def _finished(result):
    output, run = result
    assert "error" not in run, run["error"]
    return output, run


def _refusal(result):
    """The message a run that must be refused was refused with."""
    output, run = result
    assert "error" in run, f"{output} was not refused: the run finished ({run})"
    return run["error"]


@pytest.fixture(scope="module")
def runs(start):
    """{backend: {name: (output directory, result)}}: every run of RUNS on each backend, and
    "foreign", the backend resuming the other one's finished "default" directory (refused),
    with "kept": that directory's weights before and after (the same, or it was overwritten)."""
    from bert_keras.modeldir import model_dir

    done = {}
    for backend in ("tensorflow", "jax"):
        named = [(f"{name}_{backend}", options) for name, options in RUNS.items()]
        done[backend] = dict(zip(RUNS, _pretrain_all(start, backend, named)))
    for backend, other in (("jax", "tensorflow"), ("tensorflow", "jax")):
        foreign = done[other]["default"][0]
        before = model_dir.read_weights(foreign)
        done[backend]["foreign"] = _pretrain_all(
            start, backend, [(os.path.basename(foreign), {"num_train_steps": 8})])[0]
        done[backend]["kept"] = (before, model_dir.read_weights(foreign))
    return done


def _largest_difference(first, second):
    from bert_keras.modeldir import model_dir

    ours, theirs = model_dir.read_weights(first), model_dir.read_weights(second)
    assert sorted(ours) == sorted(theirs)
    return max(float(np.abs(value - theirs[name]).max()) for name, value in ours.items())


def test_pretraining_takes_the_same_steps_on_jax_and_tensorflow(start, runs):
    from bert_keras.modeldir import model_dir

    tf_dir, tf_run = _finished(runs["tensorflow"]["default"])
    jax_dir, jax_run = _finished(runs["jax"]["default"])
    assert (tf_run["backend"], jax_run["backend"]) == ("tensorflow", "jax")
    assert tf_run["metrics"]["step"] == jax_run["metrics"]["step"] == 6
    assert np.isfinite(jax_run["metrics"]["loss"])
    initial = model_dir.read_weights(str(start / "init"))
    ours, theirs = model_dir.read_weights(tf_dir), model_dir.read_weights(jax_dir)
    assert sorted(ours) == sorted(theirs) == sorted(initial)
    moved = 0
    for name, value in ours.items():
        assert np.abs(value - theirs[name]).max() <= 1e-4, name
        moved += np.abs(value - initial[name]).max() > 1e-3
    assert moved > 30, "degenerate test: the weights hardly moved"
    # The JAX run's directory is a whole model directory (config, vocabulary, casing).
    assert model_dir.read_config(jax_dir) == model_dir.read_config(tf_dir)
    assert model_dir.read_do_lower_case(jax_dir) is True


@pytest.mark.parametrize("name", ["lamb", "no_bias_correction_fused"])
def test_the_other_optimizer_rules_take_the_same_steps_on_jax(start, runs, name):
    """The other update rules; the second run also computes attention with the fused call in
    both trainers (the start's attention dropout is 0, so it is the model of the other runs)."""
    tf_dir, _ = _finished(runs["tensorflow"][name])
    jax_dir, _ = _finished(runs["jax"][name])
    assert _largest_difference(tf_dir, jax_dir) <= 1e-4
    assert _largest_difference(jax_dir, str(start / "init")) > 1e-3


def test_gradient_accumulation_takes_the_same_steps_on_jax_and_tensorflow(start, runs):
    """Keras' accumulation on JAX (micro-batches of 4, gradients averaged, the schedule counting
    updates) against the TensorFlow trainer's (the batch of 8 in two slices): every record has
    the same number of predictions here, where the two normalizations agree."""
    tf_dir, _ = _finished(runs["tensorflow"]["accumulated"])
    jax_dir, jax_run = _finished(runs["jax"]["accumulated"])
    assert jax_run["metrics"]["step"] == 6
    assert _largest_difference(tf_dir, jax_dir) <= 1e-4
    # And accumulating is not a no-op: it matches the whole batch, which differs from the start.
    whole_dir, _ = _finished(runs["tensorflow"]["default"])
    assert _largest_difference(jax_dir, whole_dir) <= 1e-4
    assert _largest_difference(jax_dir, str(start / "init")) > 1e-3


@pytest.mark.alone
def test_data_parallel_over_two_devices_takes_the_steps_of_one(start):
    """`keras.distribution.DataParallel` over two (XLA host) devices: the batch split between
    them, the loss normalized over the whole batch, the same weights as one device."""
    one_dir, _ = _finished(_pretrain_all(start, "jax", [("one_device", {})])[0])
    two, odd = _pretrain_all(start, "jax", [("two_devices", {}),
                                            ("odd_batch", {"train_batch_size": 7})], devices=2)
    two_dir, two_run = _finished(two)
    assert two_run["devices"] == 2
    assert _largest_difference(one_dir, two_dir) <= 1e-4
    assert "--train_batch_size=7 must be a multiple of the 2 devices" in _refusal(odd)


def test_evaluation_on_jax_equals_tensorflow(runs):
    tf_metrics = _finished(runs["tensorflow"]["eval"])[1]["metrics"]
    jax_out, jax_run = _finished(runs["jax"]["eval"])
    jax_metrics = jax_run["metrics"]
    assert jax_metrics["examples"] == tf_metrics["examples"] == 64  # a partial last batch too
    for name in ("masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss",
                 "next_sentence_accuracy"):
        assert abs(jax_metrics[name] - tf_metrics[name]) <= 1e-4, name
    assert "weights = " in open(os.path.join(jax_out, "eval_results.txt")).read()


def test_a_diverging_run_stops_with_the_same_message_on_both_engines(runs):
    """A learning rate of 1e30 overflows the weights within the 6 steps: each engine stops
    before saving, and the recipe says so in the same words; no model is written."""
    for backend in ("tensorflow", "jax"):
        message = _refusal(runs[backend]["diverging"])
        assert message.startswith("NonFiniteLossError: loss is "), message
        assert "training stopped. No checkpoint was saved; lower the learning rate" in message
        output = runs[backend]["diverging"][0]
        assert not os.path.exists(os.path.join(output, "model.safetensors"))


def test_a_run_resumes_only_with_its_own_trainer(runs):
    """A directory with the TensorFlow trainer's checkpoints is not resumed on JAX (nor the
    other way round): the message names the backend to use, and nothing is overwritten (the
    finished runs' weights are the ones the other tests compare)."""
    from bert_keras.modeldir import model_dir

    message = _refusal(runs["jax"]["foreign"])
    assert "a checkpoint of the trainer of the Keras tensorflow backend" in message
    assert "KERAS_BACKEND=tensorflow" in message
    assert "KERAS_BACKEND=jax" in _refusal(runs["tensorflow"]["foreign"])
    for backend in ("tensorflow", "jax"):
        before, after = runs[backend]["kept"]
        assert sorted(before) == sorted(after)
        assert all(np.array_equal(before[name], after[name]) for name in before)


def test_a_jax_run_killed_after_a_checkpoint_resumes_to_the_same_weights(start, tmp_path):
    """tools/run_pretraining.py on JAX, dropout on (its random state is in the checkpoint),
    several steps per execution: SIGKILL once a checkpoint exists, rerun, and the weights are
    those of a run that was never stopped."""
    from bert_keras.modeldir import model_dir
    from bert_keras.pretraining.keras_engine import checkpoints as keras_checkpoints

    steps = 120
    env = backend_env("jax")

    def command(output_dir):
        return [sys.executable, os.path.join(REPO_ROOT, "tools", "run_pretraining.py"),
                f"--input_files={start / 'data.tfrecord'}", f"--output_dir={output_dir}",
                "--preset=tiny", f"--vocab_file={start / 'vocab.txt'}", "--max_seq_length=32",
                "--max_predictions_per_seq=5", "--train_batch_size=8",
                f"--num_train_steps={steps}", "--num_warmup_steps=10", "--learning_rate=5e-4",
                "--steps_per_execution=5", "--save_checkpoints_steps=20",
                "--keep_checkpoint_max=2", "--dtype=float32"]

    def run(output_dir):
        process = subprocess.run(command(output_dir), capture_output=True, text=True, env=env,
                                 timeout=600)
        assert process.returncode == 0, process.stderr[-4000:]
        return process

    run(tmp_path / "uninterrupted")
    killed_dir = tmp_path / "killed"
    process = subprocess.Popen(command(killed_dir), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 300
    while (not keras_checkpoints(str(killed_dir)) and process.poll() is None
           and time.time() < deadline):
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    killed_at = keras_checkpoints(str(killed_dir))
    assert killed_at, "no checkpoint was written before the kill"
    assert not (killed_dir / "model.safetensors").exists(), "the run finished before it was killed"
    assert killed_at[-1][0] < steps

    resumed = run(killed_dir)
    assert "resumed from" in resumed.stderr and f"step={steps}" in resumed.stdout
    difference = _largest_difference(str(tmp_path / "uninterrupted"), str(killed_dir))
    print(f"\nkilled at step {killed_at[-1][0]}; resumed weights differ by at most "
          f"{difference:.2e}")
    assert difference <= 1e-5
    initial = model_dir.read_weights(str(tmp_path / "uninterrupted"))
    assert len(initial) > 30
    # keep_checkpoint_max=2: the last two checkpoints, the final step's among them.
    assert [step for step, _ in keras_checkpoints(str(killed_dir))] == [steps - 20, steps]


_JAXPR_CHILD = textwrap.dedent('''
    import json, sys
    import jax
    from bert_keras.pretraining import inputs, keras_engine
    from bert_keras.pretraining.output_dir import resolve_model_setup
    from bert_keras.pretraining.run import PretrainingOptions

    records, init = sys.argv[1:3]
    options = PretrainingOptions(input_files=records, output_dir="unused", init_model_dir=init,
                                 train_batch_size=8, num_train_steps=6, num_warmup_steps=2,
                                 max_seq_length=32, max_predictions_per_seq=5,
                                 mixed_precision="float32", gradient_accumulation_steps=2)
    setup = resolve_model_setup(options)
    trainer, _ = keras_engine.compile_trainer(options, setup.config)
    files, kind = inputs.prepare_records(options)
    batch = next(inputs.make_dataset_fn(files, kind, 32, 5, 4, targets=inputs.target_options(
        options, setup.vocab), seed=1)(None).as_numpy_iterator())
    trainer(batch)  # builds it, as fit does before its first step
    state = tuple([v.value for v in variables] for variables in (
        trainer.trainable_variables, trainer.non_trainable_variables,
        trainer.optimizer.variables, trainer.metrics_variables))

    def primitives(jaxpr):
        for equation in jaxpr.eqns:
            yield equation.primitive.name
            for value in equation.params.values():
                for inner in (value if isinstance(value, (list, tuple)) else [value]):
                    inner = getattr(inner, "jaxpr", inner)
                    if hasattr(inner, "eqns"):
                        yield from primitives(inner)

    traced = jax.make_jaxpr(trainer.train_step)(state, (batch,))
    jax.jit(trainer.train_step).lower(state, (batch,)).compile()
    print(json.dumps(sorted(set(primitives(traced.jaxpr)))))
''')


def test_the_jax_training_step_is_one_xla_program_without_host_calls(start):
    """Item 4 of the backend work: the step `fit` runs on JAX (forward, loss, backward, AdamW
    with accumulation and clipping) traces with static shapes into one jaxpr that `jax.jit`
    compiles, with no host callback in it (nothing leaves the device mid-step)."""
    env = backend_env("jax")
    process = subprocess.run([sys.executable, "-c", _JAXPR_CHILD, str(start / "data.tfrecord"),
                              str(start / "init")], env=env, capture_output=True, text=True,
                             timeout=600)
    assert process.returncode == 0, process.stderr[-6000:]
    names = json.loads(process.stdout.strip().splitlines()[-1])
    assert {"dot_general", "cond"} <= set(names), names  # matmuls; accumulation's update step
    assert not [name for name in names if "callback" in name], names
