"""Fine-tunes a model directory on GLUE, SQuAD v1.1/v2.0, SWAG or CoNLL-2003 NER and evaluates it.

  python tools/run_finetuning.py --task=glue/mrpc --data_dir=glue_data/MRPC \
      --init_model_dir=models/minilm --output_dir=runs/mrpc
  python tools/run_finetuning.py --task=squad_v2 --data_dir=squad --init_model_dir=models/base \
      --output_dir=runs/squad2 --train_batch_size=48 --num_train_epochs=2
  python tools/run_finetuning.py --task=conll2003 --feature_based --data_dir=conll2003 ...

Unset hyper-parameters take the paper's defaults for the task (see
`bert_keras.finetuning.task.FinetuningOptions`). The output directory is a fine-tuned model
directory (with task_config.json) plus eval_results.json, predictions/<split>/ in the task's
official format, TensorBoard logs/ and checkpoints/.
"""

import logging
import sys

from absl import app, flags

from bert_keras import distribution
from bert_keras.finetuning import run as finetuning
from bert_keras.optimization import mixed_precision_policy, resolve_dtype

TASK = flags.DEFINE_string("task", None, "glue/<cola|sst2|mrpc|stsb|qqp|mnli|qnli|rte|wnli>, "
                           "squad_v1, squad_v2, swag or conll2003.", required=True)
DATA_DIR = flags.DEFINE_string("data_dir", None, "Folder of the task's official files (for "
                               "--use_tfds: the tensorflow-datasets data folder, or unset).")
INIT_MODEL_DIR = flags.DEFINE_string("init_model_dir", None, "Model directory to start from.",
                                     required=True)
OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Where the fine-tuned model directory and "
                                 "the results go.", required=True)

LEARNING_RATE = flags.DEFINE_float("learning_rate", None, "Peak learning rate (default: 2e-5 "
                                   "GLUE/SWAG, 5e-5 SQuAD/CoNLL, 1e-3 --feature_based).")
TRAIN_BATCH_SIZE = flags.DEFINE_integer("train_batch_size", None, "Global batch size (default 32; "
                                        "SQuAD 2.0 48, SWAG 16).")
EVAL_BATCH_SIZE = flags.DEFINE_integer("eval_batch_size", 32, "Prediction batch size.")
NUM_TRAIN_EPOCHS = flags.DEFINE_integer("num_train_epochs", None, "Epochs (default 3; SQuAD 2.0 2).")
MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", None, "Wordpieces per input (default 128; "
                                      "SQuAD 384).")
WARMUP_PROPORTION = flags.DEFINE_float("warmup_proportion", 0.1, "Share of the steps with linear "
                                       "learning-rate warm-up.")
WEIGHT_DECAY = flags.DEFINE_float("weight_decay", 0.01, "AdamW weight decay (not on biases and "
                                  "layer norms).")
DROPOUT_RATE = flags.DEFINE_float("dropout_rate", 0.1, "Dropout before the task head.")
DOC_STRIDE = flags.DEFINE_integer("doc_stride", 128, "SQuAD: stride between context windows.")
MAX_QUERY_LENGTH = flags.DEFINE_integer("max_query_length", 64, "SQuAD: question wordpieces kept.")
MAX_ANSWER_LENGTH = flags.DEFINE_integer("max_answer_length", 30, "SQuAD: longest answer, in "
                                         "wordpieces.")
N_BEST_SIZE = flags.DEFINE_integer("n_best_size", 20, "SQuAD: candidates in nbest_predictions.json.")
NULL_SCORE_DIFF_THRESHOLD = flags.DEFINE_float(
    "null_score_diff_threshold", 0.0, "SQuAD 2.0: predict no answer when the null odds exceed "
    "this (the best one on dev is reported in eval_results.json).")
FEATURE_BASED = flags.DEFINE_boolean("feature_based", False, "CoNLL-2003: the paper's "
                                     "feature-based approach (frozen BERT, last four layers, "
                                     "two-layer BiLSTM).")
FEATURE_LAYERS = flags.DEFINE_integer("feature_layers", 4, "--feature_based: hidden layers "
                                      "concatenated.")
LSTM_UNITS = flags.DEFINE_integer("lstm_units", 768, "--feature_based: BiLSTM units per direction.")
USE_TFDS = flags.DEFINE_boolean("use_tfds", False, "GLUE: read tensorflow-datasets glue/<task> "
                                "(must be prepared already; never downloads).")
SKIP_MALFORMED = flags.DEFINE_boolean("skip_malformed", False, "GLUE: skip malformed rows with a "
                                      "warning instead of stopping.")
MAX_TRAIN_EXAMPLES = flags.DEFINE_integer("max_train_examples", None, "Use only the first N "
                                          "training examples (quick runs).")
MAX_EVAL_EXAMPLES = flags.DEFINE_integer("max_eval_examples", None, "Evaluate only the first N "
                                         "examples.")
DO_TRAIN = flags.DEFINE_boolean("do_train", True, "Fine-tune on the train split.")
DO_EVAL = flags.DEFINE_boolean("do_eval", True, "Evaluate on the dev split(s).")
DO_PREDICT = flags.DEFINE_boolean("do_predict", False, "Write predictions for the test split(s).")
STRATEGY = flags.DEFINE_enum("strategy", "auto", distribution.STRATEGY_NAMES, "Distribution "
                             "strategy, as for pre-training; auto: a TPU when one is reachable, "
                             "else several workers (TF_CONFIG) or GPUs, else the one device.")
TPU = flags.DEFINE_string("tpu", None, "TPU address (default: local, as on a TPU VM or Colab).")
DTYPE = flags.DEFINE_enum("dtype", "auto", ["auto", "float32", "bfloat16", "float16",
                                            "mixed_bfloat16", "mixed_float16"],
                          "Compute dtype (variables stay float32). auto: bfloat16 on TPUs, GPUs of "
                          "compute capability 8.0+ and CPUs with bf16 units (avx512_bf16, AMX), "
                          "float32 elsewhere; float16 for older GPUs.")
SEED = flags.DEFINE_integer("seed", 42, "Random seed.")
STEPS_PER_EXECUTION = flags.DEFINE_integer("steps_per_execution", 1, "Training steps per "
                                           "compiled call (raise on TPUs).")
JIT_COMPILE = flags.DEFINE_enum("jit_compile", "auto", ["auto", "true", "false"], "XLA; auto: "
                                "on with a GPU.")


def _keras_policy(dtype, strategy):
    """The Keras policy of --dtype on `strategy`'s device (None: float32, the default policy)."""
    policy = mixed_precision_policy(resolve_dtype(dtype, strategy))
    return None if policy == "float32" else policy


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    logging.getLogger("bert_keras").setLevel(logging.INFO)
    try:
        strategy = distribution.resolve_strategy(STRATEGY.value, tpu=TPU.value)
        result = finetuning.run_finetuning(
            TASK.value, DATA_DIR.value, INIT_MODEL_DIR.value, OUTPUT_DIR.value,
            do_train=DO_TRAIN.value, do_eval=DO_EVAL.value, do_predict=DO_PREDICT.value,
            strategy=strategy, dtype=_keras_policy(DTYPE.value, strategy), seed=SEED.value,
            steps_per_execution=STEPS_PER_EXECUTION.value,
            jit_compile={"auto": None, "true": True, "false": False}[JIT_COMPILE.value],
            learning_rate=LEARNING_RATE.value, train_batch_size=TRAIN_BATCH_SIZE.value,
            eval_batch_size=EVAL_BATCH_SIZE.value, num_train_epochs=NUM_TRAIN_EPOCHS.value,
            max_seq_length=MAX_SEQ_LENGTH.value, warmup_proportion=WARMUP_PROPORTION.value,
            weight_decay=WEIGHT_DECAY.value, dropout_rate=DROPOUT_RATE.value,
            doc_stride=DOC_STRIDE.value, max_query_length=MAX_QUERY_LENGTH.value,
            max_answer_length=MAX_ANSWER_LENGTH.value, n_best_size=N_BEST_SIZE.value,
            null_score_diff_threshold=NULL_SCORE_DIFF_THRESHOLD.value,
            feature_based=FEATURE_BASED.value, feature_layers=FEATURE_LAYERS.value,
            lstm_units=LSTM_UNITS.value, use_tfds=USE_TFDS.value,
            skip_malformed=SKIP_MALFORMED.value, max_train_examples=MAX_TRAIN_EXAMPLES.value,
            max_eval_examples=MAX_EVAL_EXAMPLES.value)
    except (ValueError, OSError, ImportError) as error:
        # Input problems (missing files, malformed rows, inconsistent model directories) are
        # all found before training starts; report them without a traceback.
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    for split, metrics in result.metrics.items():
        shown = ", ".join(f"{key}={value:.4f}" for key, value in metrics.items()
                          if isinstance(value, float))
        print(f"{result.results['task']} {split}: {shown}")
    print(f"wrote {result.output_dir}")


if __name__ == "__main__":
    app.run(main)
