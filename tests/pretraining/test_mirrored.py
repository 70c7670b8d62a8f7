"""Pre-training under MirroredStrategy on two logical CPU devices equals one device.

The CPU must be split before TensorFlow initializes, which other tests in this process already
did, so the runs happen in a fresh Python process.
"""

import json
import os
import subprocess
import sys
import textwrap
from helpers.support import TESTS_DIR


SCRIPT = textwrap.dedent("""
    import json, os, sys
    from bert_keras import distribution
    distribution.split_cpu(2)
    import numpy as np
    import tensorflow as tf
    from bert_keras.model import checkpoint_names
    from bert_keras.model.config import BertConfig
    from bert_keras.model.pretraining_model import build_pretraining_model, pretraining_weight_map
    from bert_keras.modeldir import model_dir
    from bert_keras.pretraining.run import PretrainingOptions, train
    from bert_keras.text.vocab import Vocabulary
    from helpers import pretraining_run_fixtures as fx

    work = sys.argv[1]
    vocab_path = fx.write_vocab(work, size=1000)
    batch = fx.make_instances(fx.TRAIN_TEXT, vocab_path, 32, 5, dupe_factor=1, seed=3)
    fx.write_shards(os.path.join(work, "records"), batch, num_shards=2)
    vocab = Vocabulary.from_file(vocab_path)
    config = BertConfig.from_preset("tiny", vocab_size=len(vocab), hidden_dropout_prob=0.0,
                                    attention_probs_dropout_prob=0.0, max_position_embeddings=32)
    # One initial model directory for every run.
    model = build_pretraining_model(config)
    model_dir.write_model_dir(os.path.join(work, "init"), config, vocab, True,
                              checkpoint_names.collect_weights(pretraining_weight_map(model)))

    def run(name, strategy, **overrides):
        values = dict(input_files=os.path.join(work, "records", "*.tfrecord"),
                      output_dir=os.path.join(work, name), init_model_dir=os.path.join(work, "init"),
                      train_batch_size=16, max_seq_length=32, max_predictions_per_seq=5,
                      num_train_steps=3, num_warmup_steps=0, learning_rate=1e-3, clip_norm=0.05,
                      steps_per_execution=3, save_checkpoints_steps=3, verbose=0)
        values.update(overrides)
        metrics = train(PretrainingOptions(**values), strategy=strategy)
        return model_dir.read_weights(os.path.join(work, name)), metrics

    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    single, single_metrics = run("single", tf.distribute.get_strategy())
    two, two_metrics = run("mirrored", mirrored)
    accumulated, _ = run("mirrored_accumulated", mirrored, gradient_accumulation_steps=2)
    initial = model_dir.read_weights(os.path.join(work, "init"))

    def max_difference(a, b):
        return max(float(np.abs(a[name] - b[name]).max()) for name in a)

    print(json.dumps({
        "replicas": mirrored.num_replicas_in_sync,
        "moved": max_difference(single, initial),
        "mirrored_vs_single": max_difference(two, single),
        "accumulated_vs_single": max_difference(accumulated, single),
        "loss_single": single_metrics["loss"], "loss_mirrored": two_metrics["loss"],
    }))
""")


def test_mirrored_step_equals_the_single_device_step(tmp_path):
    script = tmp_path / "mirrored.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([TESTS_DIR, os.environ.get("PYTHONPATH", "")]),
               TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"\n{result}")
    assert result["replicas"] == 2
    assert result["moved"] > 1e-4  # three clipped steps of lr 1e-3 moved the weights
    # Same global batch, gradients summed over replicas before clipping: the same update.
    assert result["mirrored_vs_single"] < 2e-6
    assert result["accumulated_vs_single"] < 2e-6
    assert abs(result["loss_single"] - result["loss_mirrored"]) < 1e-4
