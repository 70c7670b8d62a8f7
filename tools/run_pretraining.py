"""Pre-trains BERT (masked LM + next sentence) on TFRecords, with any tf.distribute strategy.

  # From scratch, phase 1 (seq 128):
  python tools/run_pretraining.py --input_files='data/seq128/*.tfrecord' --output_dir=models/phase1 \
      --preset=base --vocab_file=vocab.txt --train_batch_size=256 --max_seq_length=128 \
      --max_predictions_per_seq=20 --num_train_steps=900000 --num_warmup_steps=10000 \
      --learning_rate=1e-4

  # Phase 2 (seq 512), continuing from phase 1's model directory:
  python tools/run_pretraining.py --input_files='data/seq512/*.tfrecord' --output_dir=models/phase2 \
      --init_model_dir=models/phase1 --max_seq_length=512 --max_predictions_per_seq=80 ...

  # On a TPU (Colab / TPU VM): --strategy=tpu --tpu=local --dtype=bfloat16 \
  #     --steps_per_execution=200
  # Held-out evaluation:  --mode=eval --input_files='data/heldout/*.tfrecord' --output_dir=models/phase1

A rerun with the same --output_dir resumes from its latest checkpoint. See docs/pretraining.md.
"""

import sys

from absl import app, flags

FLAGS = flags.FLAGS

flags.DEFINE_string("input_files", None, "Pre-training TFRecord files: a glob or comma-separated globs.")
flags.DEFINE_string("output_dir", None, "The model directory to write; checkpoints go to "
                    "<output_dir>/checkpoints and a rerun resumes from them.", required=True)
flags.DEFINE_string("preset", None, "Model size: a preset (tiny, mini, small, medium, base, large, "
                    "L4_H256, ...) or a bert_config.json. With a preset, vocab_size is the "
                    "vocabulary's.")
flags.DEFINE_alias("config", "preset")  # the earlier spelling
flags.DEFINE_string("vocab_file", None, "The WordPiece vocabulary (with --preset).")
flags.DEFINE_bool("do_lower_case", True, "Whether the vocabulary is uncased (written to the model "
                  "directory; with --init_model_dir its own setting is kept).")
flags.DEFINE_string("init_model_dir", None, "Start from this model directory (phase 1's output, or "
                    "converted published weights) instead of --preset/--vocab_file.")
flags.DEFINE_enum("mode", "train", ["train", "eval", "export"], "train (or resume); eval: MLM/NSP "
                  "accuracy and loss on --input_files; export: write the model directory from the "
                  "latest checkpoint.")
flags.DEFINE_enum("strategy", "auto", ["auto", "tpu", "gpu", "multi_worker", "mirrored", "cpu"],
                  "auto: a TPU if reachable, else TF_CONFIG's workers, else all GPUs, else the "
                  "default device. mirrored: MirroredStrategy over GPUs, or the logical CPUs.")
flags.DEFINE_string("tpu", None, "TPU address for TPUClusterResolver ('local' on a TPU VM/Colab).")
flags.DEFINE_integer("num_cpu_devices", 1, "Split the CPU into this many logical devices (to try "
                     "--strategy=mirrored without accelerators).")
flags.DEFINE_integer("train_batch_size", 32, "Global batch size (all replicas together).")
flags.DEFINE_integer("eval_batch_size", 32, "Global batch size for --mode=eval.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the records.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked LM predictions per record.")
flags.DEFINE_integer("num_train_steps", 100000, "Total training steps (the schedule's length).")
flags.DEFINE_integer("num_warmup_steps", 10000, "Linear warm-up steps.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "adamw: the paper's Adam with weight "
                  "decay; lamb: layer-wise adaptive moments for large batches.")
flags.DEFINE_float("weight_decay", 0.01, "Weight decay (not on LayerNorm and biases).")
flags.DEFINE_float("adam_epsilon", 1e-6, "Adam epsilon.")
flags.DEFINE_bool("adam_bias_correction", True, "Bias-correct Adam's moments, as PyTorch's and Keras' "
                  "AdamW; --noadam_bias_correction is the original release's update (which learns far "
                  "less at short budgets).")
flags.DEFINE_float("clip_norm", 1.0, "Clip gradients to this global norm (0: no clipping).")
flags.DEFINE_enum("dtype", "auto", ["auto", "float32", "bfloat16", "float16", "mixed_bfloat16",
                                      "mixed_float16"],
                  "Compute dtype (variables stay float32; layer norms and softmax compute in "
                  "float32). auto: bfloat16 on TPUs, GPUs of compute capability 8.0+ and CPUs with "
                  "bf16 units (avx512_bf16, AMX), float32 elsewhere; float16 for older GPUs (with "
                  "loss scaling).")
flags.DEFINE_alias("mixed_precision", "dtype")  # the earlier spelling
flags.DEFINE_integer("gradient_accumulation_steps", 1, "Split each replica's batch into this many "
                     "micro-batches (for batches that do not fit in memory).")
flags.DEFINE_integer("steps_per_execution", 1, "Training steps per tf.function call (use 100s on TPUs).")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Save a checkpoint every this many steps.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints to keep.")
flags.DEFINE_bool("no_nsp", False, "The 'No NSP' ablation: masked LM only.")
flags.DEFINE_bool("left_to_right", False, "The 'LTR & No NSP' ablation: causal attention, predict "
                  "the next token, no NSP.")
flags.DEFINE_bool("dynamic_masking", False, "Mask on the fly (a new mask each epoch); reads ordinary "
                  "or unmasked records.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Masking rate for --dynamic_masking.")
flags.DEFINE_integer("seed", 12345, "Seed of the initialization, the data order and dynamic masks.")
flags.DEFINE_integer("shuffle_buffer_size", 10000, "Records in the shuffle buffer.")
flags.DEFINE_bool("skip_corrupt_records", False, "Skip the unreadable rest of corrupt or truncated "
                  "files (they are counted first) instead of stopping.")
flags.DEFINE_integer("max_eval_steps", 0, "With --mode=eval, at most this many batches (0: all).")
flags.DEFINE_bool("jit_compile", False, "XLA-compile each replica's forward and backward pass (GPUs).")
flags.DEFINE_integer("log_steps", 100, "Without a terminal, log the metrics every this many steps.")


def main(argv):
    del argv
    if FLAGS.num_cpu_devices > 1:
        from bert_keras import distribution
        distribution.split_cpu(FLAGS.num_cpu_devices)
    import tensorflow as tf
    tf.get_logger().setLevel("WARNING")  # tf.distribute's per-step INFO lines drown the metrics

    from bert_keras.data.records import RecordsError
    from bert_keras.model.checkpoint_names import WeightsError
    from bert_keras.model.config import ConfigError
    from bert_keras.modeldir.model_dir import ModelDirError
    from bert_keras.optimization import mixed_precision_policy
    from bert_keras.pretraining import PretrainingError, PretrainingOptions, run_pretraining
    from bert_keras.text.vocab import VocabularyError

    options = PretrainingOptions(
        input_files=FLAGS.input_files or "", output_dir=FLAGS.output_dir, config=FLAGS.preset,
        vocab_file=FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case,
        init_model_dir=FLAGS.init_model_dir, mode=FLAGS.mode, strategy=FLAGS.strategy, tpu=FLAGS.tpu,
        train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
        max_seq_length=FLAGS.max_seq_length, max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        num_train_steps=FLAGS.num_train_steps, num_warmup_steps=FLAGS.num_warmup_steps,
        learning_rate=FLAGS.learning_rate, optimizer=FLAGS.optimizer, weight_decay=FLAGS.weight_decay,
        adam_epsilon=FLAGS.adam_epsilon,
        adam_bias_correction=FLAGS.adam_bias_correction, clip_norm=FLAGS.clip_norm,
        mixed_precision=mixed_precision_policy(FLAGS.dtype),
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
        steps_per_execution=FLAGS.steps_per_execution,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max, next_sentence=not FLAGS.no_nsp,
        left_to_right=FLAGS.left_to_right, dynamic_masking=FLAGS.dynamic_masking,
        masked_lm_prob=FLAGS.masked_lm_prob, seed=FLAGS.seed,
        shuffle_buffer_size=FLAGS.shuffle_buffer_size,
        skip_corrupt_records=FLAGS.skip_corrupt_records, max_eval_steps=FLAGS.max_eval_steps,
        jit_compile=FLAGS.jit_compile, log_steps=FLAGS.log_steps)
    try:
        results = run_pretraining(options)
    except (PretrainingError, RecordsError, ConfigError, ModelDirError, VocabularyError, WeightsError,
            ValueError) as error:
        print(f"run_pretraining: error: {error}", file=sys.stderr)
        return 1
    except tf.errors.OpError as error:
        print(f"run_pretraining: error: {error.message}", file=sys.stderr)
        return 1
    print(" ".join(f"{name}={value:.6g}" if isinstance(value, float) else f"{name}={value}"
                   for name, value in sorted(results.items())))
    return 0


if __name__ == "__main__":
    app.run(lambda argv: sys.exit(main(argv)))
