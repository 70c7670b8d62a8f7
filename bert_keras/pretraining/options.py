"""Every setting of a pre-training run (`PretrainingOptions`), declared once: the tools'
flags are generated from these fields (`bert_keras.common.cli`), and `validate` checks them.

Example:

>>> options = PretrainingOptions(input_files="data/*.tfrecord", output_dir="models/tiny",
...                              config="tiny", vocab_file="vocab.txt", num_train_steps=10,
...                              num_warmup_steps=1)
>>> options.validate()
>>> options.uses_next_sentence, PretrainingOptions(next_sentence=True, left_to_right=True).uses_next_sentence
(True, False)
"""

import dataclasses
import os

from bert_keras import distribution, optimization
from bert_keras.common import cli
from bert_keras.common.cli import option
from bert_keras.common.errors import BertKerasError
from bert_keras.model.config import BertConfig

MODES = ("train", "eval", "export")


class PretrainingError(BertKerasError, RuntimeError):
    """Pre-training cannot start or cannot go on (the message says why and what to do)."""


class NonFiniteLossError(PretrainingError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


@dataclasses.dataclass
class PretrainingOptions:
    """Every setting of a pre-training run, with the original `run_pretraining.py` defaults.

    config: a preset name ("tiny", "base", "L4_H256", ...; vocab_size is then the vocabulary's),
      a path to a `bert_config.json`, or a `BertConfig`. Exclusive with `init_model_dir`, which
      brings its own config, vocabulary and weights (e.g. the first phase of two-phase training,
      or converted published weights). Both may be left out on a rerun: the config and the
      vocabulary written in `output_dir` are used.
    next_sentence: False is the paper's "No NSP" ablation (MLM only).
    left_to_right: causal attention, next-token targets, no NSP ("LTR & No NSP").
    dynamic_masking: mask on the fly, a new mask each time a sequence is read.
    gradient_accumulation_steps: split each replica's batch in this many micro-batches.
    mixed_precision: "float32", "mixed_bfloat16" (TPUs, recent GPUs, CPUs with bf16 units),
      "mixed_float16" (GPUs, with loss scaling) or "auto" (mixed_bfloat16 where the device computes
      bfloat16 natively, else float32; decided once the strategy is known).
    adam_bias_correction: Adam's bias correction (as PyTorch's and Keras' AdamW); False is the
      released `AdamWeightDecayOptimizer`, which has none and learns far less at short budgets.
    """

    input_files: str = option("", "Pre-training TFRecord files: a glob or comma-separated globs.")
    output_dir: str = option("", "The model directory to write; checkpoints go to "
                             "<output_dir>/checkpoints and a rerun resumes from them.",
                             required=True)
    start_over: bool = cli.start_over_option("checkpoints, logs and model files in --output_dir "
                                             "(nothing else there)")
    config: object = option(None, "Model size: a preset (tiny, mini, small, medium, base, large, "
                            "L4_H256, ...) or a bert_config.json. With a preset, vocab_size is the "
                            "vocabulary's.", flag="preset", aliases=("config",))
    vocab_file: str = option(None, "The WordPiece vocabulary (with --preset).")
    do_lower_case: bool = cli.do_lower_case_option(
        "Whether the vocabulary is uncased (written to the model directory; with "
        "--init_model_dir its own setting is kept).")
    init_model_dir: str = option(None, "Start from this model directory (phase 1's output, or "
                                 "converted published weights) instead of --preset/--vocab_file.")
    mode: str = option("train", "train (or resume); eval: MLM/NSP accuracy and loss on "
                       "--input_files; export: write the model directory from the latest "
                       "checkpoint.", choices=MODES)
    strategy: str = distribution.strategy_option()
    tpu: str = distribution.tpu_option()
    coordinator_address: str = option(
        None, "JAX backend, several processes (one per TPU host or GPU node): host:port of "
        "process 0, the same in every process; 'auto': JAX finds it (Cloud TPU pod slice, "
        "Slurm, Open MPI). Default: KERAS_DISTRIBUTION_JOB_ADDRESSES, else one process.")
    num_processes: int = option(0, "Processes of a multi-process run on the JAX backend (0: "
                                "KERAS_DISTRIBUTION_NUM_PROCESSES, or one). Each reads its share "
                                "of --input_files: their number must divide by it.")
    process_id: int = option(-1, "This process's index in a multi-process run on the JAX "
                             "backend, 0 to num_processes - 1; process 0 writes the output "
                             "directory (-1: KERAS_DISTRIBUTION_PROCESS_ID).")
    train_batch_size: int = option(32, "Global batch size (all replicas together).")
    eval_batch_size: int = option(32, "Global batch size for --mode=eval.")
    max_seq_length: int = cli.max_seq_length_option(128, "Sequence length of the records.")
    max_predictions_per_seq: int = option(20, "Masked LM predictions per record.")
    num_train_steps: int = option(100000, "Total training steps (the schedule's length).")
    num_warmup_steps: int = option(10000, "Linear warm-up steps.")
    learning_rate: float = option(5e-5, "Peak learning rate.")
    optimizer: str = option("adamw", "adamw: the paper's Adam with weight decay; lamb: layer-wise "
                            "adaptive moments for large batches.",
                            choices=optimization.OPTIMIZER_NAMES)
    weight_decay: float = option(0.01, "Weight decay (not on LayerNorm and biases).")
    adam_epsilon: float = option(1e-6, "Adam epsilon.")
    adam_bias_correction: bool = option(
        True, "Bias-correct Adam's moments, as PyTorch's and Keras' AdamW; "
        "--noadam_bias_correction is the original release's update (which learns far less at "
        "short budgets).")
    clip_norm: float = option(1.0, "Clip gradients to this global norm (0: no clipping).")
    mixed_precision: str = optimization.dtype_option()
    gradient_accumulation_steps: int = option(1, "Split each replica's batch into this many "
                                              "micro-batches (for batches that do not fit in "
                                              "memory).")
    steps_per_execution: int = option(1, "Training steps per tf.function call (use 100s on TPUs).")
    save_checkpoints_steps: int = option(1000, "Save a checkpoint every this many steps.")
    keep_checkpoint_max: int = option(5, "Checkpoints to keep.")
    next_sentence: bool = option(True, "Pre-train with the next-sentence task as well as the "
                                 "masked LM; --nonext_sentence is the 'No NSP' ablation (MLM "
                                 "only; the earlier spelling --no_nsp still works).")
    left_to_right: bool = option(False, "The 'LTR & No NSP' ablation: causal attention, predict "
                                 "the next token, no NSP.")
    fused_attention: bool = option(
        False, "Compute attention in one fused call per layer (cuDNN flash attention on the JAX "
        "backend on an NVIDIA GPU; elsewhere the same function, unfused). It has no dropout on "
        "the attention probabilities, so the run's config, and its model directory, get "
        "attention_probs_dropout_prob 0.")
    dynamic_masking: bool = option(False, "Mask on the fly (a new mask each epoch); reads ordinary "
                                   "or unmasked records.")
    masked_lm_prob: float = option(0.15, "Masking rate for --dynamic_masking.")
    seed: int = cli.seed_option(12345, "Seed of the initialization, the data order and dynamic "
                                "masks.")
    shuffle_buffer_size: int = option(10000, "Records in the shuffle buffer.")
    skip_corrupt_records: bool = option(False, "Skip the unreadable rest of corrupt or truncated "
                                        "files (they are counted first) instead of stopping.")
    max_eval_steps: int = option(0, "With --mode=eval, at most this many batches (0: all).")
    jit_compile: bool = option(False, "XLA-compile each replica's forward and backward pass "
                               "(GPUs).")
    verbose: int = 1
    log_steps: int = option(100, "Without a terminal, log the metrics every this many steps.")

    def validate(self):
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if not self.output_dir:
            raise ValueError("output_dir is required")
        if self.mode != "export" and not self.input_files:
            raise ValueError("input_files is required")
        for name in ("train_batch_size", "eval_batch_size", "max_seq_length", "max_predictions_per_seq",
                     "num_train_steps", "gradient_accumulation_steps", "steps_per_execution",
                     "save_checkpoints_steps", "keep_checkpoint_max"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 0 <= self.num_warmup_steps <= self.num_train_steps:
            raise ValueError(f"num_warmup_steps must be in [0, num_train_steps], got {self.num_warmup_steps}")
        if self.config is not None and self.init_model_dir:
            raise ValueError("give either config (with vocab_file) or init_model_dir, not both")
        if self.init_model_dir and os.path.abspath(self.init_model_dir) == os.path.abspath(self.output_dir):
            raise ValueError("output_dir must differ from init_model_dir")
        if self.optimizer not in optimization.OPTIMIZER_NAMES:
            raise ValueError(f"optimizer must be one of {optimization.OPTIMIZER_NAMES}")
        allowed = optimization.MIXED_PRECISION_POLICIES + (optimization.AUTO_DTYPE,)
        if self.mixed_precision not in allowed:
            raise ValueError(f"mixed_precision must be one of {allowed}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")
        for name in ("weight_decay", "clip_norm"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not self.adam_epsilon > 0:
            raise ValueError(f"adam_epsilon must be positive, got {self.adam_epsilon}")
        if not 0 < self.masked_lm_prob < 1:
            raise ValueError(f"masked_lm_prob must be in (0, 1), got {self.masked_lm_prob}")

    @property
    def attention_implementation(self):
        return "fused" if self.fused_attention else "softmax"

    @property
    def uses_next_sentence(self):
        return self.next_sentence and not self.left_to_right

    def to_json_dict(self):
        values = dataclasses.asdict(self)
        if isinstance(self.config, BertConfig):
            values["config"] = self.config.to_dict()
        return values


__all__ = ["MODES", "PretrainingError", "NonFiniteLossError", "PretrainingOptions"]
