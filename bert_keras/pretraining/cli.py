r"""`bert-keras pretrain`: pre-trains BERT (masked LM + next sentence) on TFRecords, with any
tf.distribute strategy.

  # From scratch, phase 1 (seq 128):
  bert-keras pretrain --input_files='data/seq128/*.tfrecord' --output_dir=models/phase1 \
      --preset=base --vocab_file=vocab.txt --train_batch_size=256 --max_seq_length=128 \
      --max_predictions_per_seq=20 --num_train_steps=900000 --num_warmup_steps=10000 \
      --learning_rate=1e-4

  # Phase 2 (seq 512), continuing from phase 1's model directory:
  bert-keras pretrain --input_files='data/seq512/*.tfrecord' --output_dir=models/phase2 \
      --init_model_dir=models/phase1 --max_seq_length=512 --max_predictions_per_seq=80 ...

  # On a TPU (Colab / TPU VM): --strategy=tpu --tpu=local --dtype=bfloat16 \
  #     --steps_per_execution=200
  # Held-out evaluation:  --mode=eval --input_files='data/heldout/*.tfrecord' --output_dir=models/phase1

A rerun with the same --output_dir resumes from its latest checkpoint. See docs/pretraining.md.
"""

import dataclasses

from bert_keras.common import cli
from bert_keras.common.cli import option
from bert_keras.pretraining.options import PretrainingOptions


@dataclasses.dataclass
class PretrainingCommandOptions:
    """The command line's own flags: not settings of a run, so not in `PretrainingOptions`."""

    no_nsp: bool = option(False, "The earlier spelling of --nonext_sentence.")
    num_cpu_devices: int = option(1, "Split the CPU into this many logical devices (to try "
                                  "--strategy=mirrored without accelerators).")


def main():
    command = cli.options_from_flags(PretrainingCommandOptions)
    if command.num_cpu_devices > 1:
        from bert_keras import distribution

        distribution.split_cpu(command.num_cpu_devices)
    import tensorflow as tf

    tf.get_logger().setLevel("WARNING")  # tf.distribute's per-step INFO lines drown the metrics

    from bert_keras.pretraining.run import run_pretraining

    overrides = {"next_sentence": False} if command.no_nsp else {}
    results = run_pretraining(cli.options_from_flags(PretrainingOptions, **overrides))
    print(" ".join(f"{name}={value:.6g}" if isinstance(value, float) else f"{name}={value}"
                   for name, value in sorted(results.items())))
    return 0
