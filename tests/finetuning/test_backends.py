"""Fine-tuning on the Keras JAX backend takes the same steps as on TensorFlow.

The same model directory, the same rows, the same head (drawn with NumPy from the run's seed),
the same batches (`tf.data`, shuffled with the seed, on the host under both backends), dropout
off: `FinetuningSweep.run` (`keras.Model.fit` with the package's AdamW) in one process per
backend (Keras picks its backend once per process, from `KERAS_BACKEND`). After 12 steps every
weight's update agrees within 3% (about 1% measured: float32 rounding, which Adam amplifies
where gradients are small), the last epoch's loss within 1e-3, the dev logits within 1% of
their scale, and both runs learn: the same dev accuracy, above the majority label's share. Before `make_dataset` drew each epoch's order statelessly, Keras on
JAX trained on another shuffle than TensorFlow (it makes an extra iterator to build the model)
and the weights parted by 1e-2.

JAX is part of the test extra: a missing JAX fails here, it does not skip.
"""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from helpers.support import backend_env

# One fine-tuning run, written to `output` (.npz and .json): run in this process (TensorFlow,
# the suite's backend) and in a child process on JAX.
_SWEEP = textwrap.dedent('''
    def sweep_run(root, output):
        import json
        import numpy as np
        import keras
        from bert_keras.finetuning import FinetuningOptions
        from bert_keras.finetuning.sweep import FinetuningSweep
        from bert_keras.finetuning.run import predict
        from bert_keras.finetuning.task import get_task
        from bert_keras.modeldir import model_dir

        task = get_task("glue/sst2", root, f"{root}/model",
                        FinetuningOptions(max_seq_length=12, dropout_rate=0.0))
        train, dev = task.load("train", training=True), task.load("dev")
        sweep = FinetuningSweep(task, model_dir.read_config(f"{root}/model"), train_batch_size=8,
                                dtype="float32")
        result = sweep.run(model_dir.read_weights(f"{root}/model"), train, learning_rate=3e-3,
                           epochs=2, seed=7, evaluate={"dev": dev})
        if keras.backend.backend() == "jax":  # a model directory written under JAX, for export
            from bert_keras.finetuning.task_models import save_task_model_dir
            save_task_model_dir(sweep.model, f"{root}/finetuned_jax", sweep.config, task.vocab,
                                task.do_lower_case, task.task_config())
        # At the batch size `score` compiled (on JAX every batch shape compiles).
        logits = predict(sweep.model, dev.inputs, sweep.eval_batch_size)
        np.savez(output, logits=np.asarray(logits),
                 **{"w/" + name: value for name, value in sweep.weights().items()})
        with open(output + ".json", "w") as f:
            json.dump({"backend": keras.backend.backend(), "loss": result.train_loss,
                       "steps": result.steps, "accuracy": result.metrics["dev"]["accuracy"]}, f)
''')
_CHILD = _SWEEP + "\nimport sys\nsweep_run(sys.argv[1], sys.argv[2])\n"

POSITIVE = ["good", "great", "fine", "nice"]
NEGATIVE = ["bad", "awful", "poor", "dull"]


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory):
    import bert_keras
    from bert_keras.finetuning.sweep import random_encoder_weights
    from bert_keras.modeldir import model_dir

    root = tmp_path_factory.mktemp("backends")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "film", "plot", "the", "was", "."]
    vocab += POSITIVE + NEGATIVE
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n")
    config = bert_keras.BertConfig.from_preset("tiny", vocab_size=len(vocab),
                                               hidden_dropout_prob=0.0,
                                               attention_probs_dropout_prob=0.0)
    model_dir.write_model_dir(str(root / "model"), config, str(root / "vocab.txt"), True,
                              random_encoder_weights(config, seed=3))
    rng = np.random.default_rng(0)
    for split, count in (("train", 48), ("dev", 32)):
        rows = ["sentence\tlabel"]
        for index in range(count):
            label = index % 2
            word = rng.choice(POSITIVE if label else NEGATIVE)
            rows.append(f"the {rng.choice(['film', 'plot'])} was {word} .\t{label}")
        (root / f"{split}.tsv").write_text("\n".join(rows) + "\n")
    return root


def _run(root, backend):
    """The run on `backend`: on TensorFlow in this process, on JAX in a child process."""
    output = str(root / f"run_{backend}.npz")
    if backend == "tensorflow":
        import keras

        assert keras.backend.backend() == "tensorflow"
        namespace = {}
        exec(_SWEEP, namespace)  # pylint: disable=exec-used
        namespace["sweep_run"](str(root), output)
    else:
        process = subprocess.run([sys.executable, "-c", _CHILD, str(root), output],
                                 env=backend_env(backend), capture_output=True, text=True,
                                 timeout=600)
        assert process.returncode == 0, process.stderr[-6000:]
    with open(output + ".json", encoding="utf-8") as f:
        summary = json.load(f)
    arrays = dict(np.load(output))
    return summary, arrays


def test_jax_is_installed():
    import jax  # noqa: F401  the backend these tests compare with; part of the test extra


def test_fine_tuning_takes_the_same_steps_on_jax_and_tensorflow(task_dir):
    tf_summary, tf_arrays = _run(task_dir, "tensorflow")
    jax_summary, jax_arrays = _run(task_dir, "jax")
    assert (tf_summary["backend"], jax_summary["backend"]) == ("tensorflow", "jax")
    assert tf_summary["steps"] == jax_summary["steps"] == 12
    assert sorted(tf_arrays) == sorted(jax_arrays)
    initial = _initial_weights(task_dir)
    weights = [name for name in tf_arrays if name.startswith("w/")]
    assert len(weights) > 20
    moved = 0
    for name in weights:
        if name[2:] not in initial:  # the head: drawn from the seed, not in the model directory
            difference = tf_arrays[name] - jax_arrays[name]
            if name.endswith("bias"):
                # Starts at zero, so its value is its update: held to the encoder's 3% below.
                apart = np.linalg.norm(difference) / np.linalg.norm(tf_arrays[name])
                assert apart <= 0.03, (name, apart)
            else:
                scale = np.abs(tf_arrays[name]).max()
                assert np.abs(difference).max() <= 0.01 * scale, name
            continue
        update = tf_arrays[name] - initial[name[2:]]
        if np.abs(update).max() < 1e-5:
            continue  # no gradient in exact arithmetic (the key biases): rounding noise only
        moved += 1
        apart = np.linalg.norm(tf_arrays[name] - jax_arrays[name]) / np.linalg.norm(update)
        assert apart <= 0.03, (name, apart)
    assert moved > 20, "degenerate test: the encoder hardly moved"
    assert abs(tf_summary["loss"] - jax_summary["loss"]) <= 1e-3
    # Both learnt the words: dev accuracy above the majority label's share (0.5).
    assert tf_summary["accuracy"] == jax_summary["accuracy"] > 0.5
    # The dev logits, after weights that differ by float32 rounding amplified over 12 Adam
    # steps: within 1% of their scale.
    scale = np.abs(tf_arrays["logits"]).max()
    assert scale > 0.1, "degenerate test: near-zero logits"
    assert np.abs(tf_arrays["logits"] - jax_arrays["logits"]).max() <= 0.01 * scale


def test_a_model_directory_written_under_jax_exports_and_serves_its_outputs(task_dir):
    """The JAX run's fine-tuned model directory, exported by TensorFlow's tools as a raw-text
    SavedModel, gives the JAX model's dev logits from the dev sentences themselves."""
    import tensorflow as tf

    from bert_keras.export import export_from_model_dir

    if not (task_dir / "finetuned_jax").exists():  # this test run alone
        _run(task_dir, "jax")
    jax_arrays = dict(np.load(str(task_dir / "run_jax.npz")))
    export_dir = str(task_dir / "export_jax")
    export_from_model_dir("task", str(task_dir / "finetuned_jax"), export_dir)
    sentences = [line.split("\t")[0] for line in
                 (task_dir / "dev.tsv").read_text().splitlines()[1:]]
    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    logits = serve(text_a=tf.constant(sentences))["logits"].numpy()
    np.testing.assert_allclose(logits, jax_arrays["logits"], atol=1e-5)
    assert len(set(logits.argmax(-1).tolist())) == 2, "degenerate test: one label for every row"


def _initial_weights(root):
    from bert_keras.modeldir import model_dir

    return model_dir.read_weights(str(root / "model"))


_RUN_CHILD = textwrap.dedent('''
    import json, sys
    import keras
    from bert_keras.finetuning import run_finetuning

    root, output = sys.argv[1], sys.argv[2]
    result = run_finetuning("glue/sst2", root, f"{root}/model", output, learning_rate=3e-3,
                            train_batch_size=8, eval_batch_size=8, num_train_epochs=2,
                            max_seq_length=12, dropout_rate=0.0, seed=7, verbose=0)
    with open(output + ".json", "w") as f:
        json.dump({"devices": len(keras.distribution.list_devices()),
                   "replicas": result.results["train"]["replicas"],
                   "metrics": result.metrics, "loss": result.results["train"]["loss_per_epoch"]}, f)
''')


@pytest.mark.alone
def test_fine_tuning_on_two_jax_devices_takes_the_steps_of_one(task_dir):
    """`run_finetuning` on JAX with two XLA host devices (`keras.distribution.DataParallel`,
    each batch split between them) against one device: the same fine-tuned weights within
    1e-4, the same dev accuracy."""
    from bert_keras.modeldir import model_dir

    runs = {}
    for devices in (1, 2):
        output = str(task_dir / f"finetuned_on_{devices}")
        env = backend_env("jax", devices)
        process = subprocess.run([sys.executable, "-c", _RUN_CHILD, str(task_dir), output],
                                 env=env, capture_output=True, text=True, timeout=600)
        assert process.returncode == 0, process.stderr[-6000:]
        with open(output + ".json", encoding="utf-8") as f:
            runs[devices] = (output, json.load(f))
    (one_dir, one), (two_dir, two) = runs[1], runs[2]
    assert (one["devices"], two["devices"], two["replicas"]) == (1, 2, 2)
    ours, theirs = model_dir.read_weights(one_dir), model_dir.read_weights(two_dir)
    initial = _initial_weights(task_dir)
    assert sorted(ours) == sorted(theirs)
    assert max(float(np.abs(ours[name] - theirs[name]).max()) for name in ours) <= 1e-4
    assert max(float(np.abs(ours[name] - initial[name]).max()) for name in initial) > 1e-3
    assert one["metrics"]["dev"]["accuracy"] == two["metrics"]["dev"]["accuracy"]
    assert abs(one["loss"][-1] - two["loss"][-1]) <= 1e-4
