# %% [markdown]
# # Pre-training BERT on Colab's free TPU
#
# This notebook runs the whole pre-training pipeline of `bert_keras` in one place:
#
# 1. raw text → a WordPiece vocabulary (`vocab.txt`)
# 2. raw text → pre-training TFRecords (masked LM + next sentence, the original algorithm)
# 3. TFRecords → a pre-trained **model directory** (config + vocabulary + weights)
# 4. held-out MLM / NSP accuracy
# 5. model directory → SavedModels (a preprocessor with the tokenizer inside, and the encoder)
# 6. the reloaded SavedModels fill in `[MASK]` words of a few sentences.
#
# **Runtime.** *Runtime → Change runtime type → TPU* (the free tier's v5e-1). The notebook
# trains on the Keras JAX backend there, and on a GPU (T4) or CPU runtime with TensorFlow, only
# slower; it finds out which one it has.
#
# **How long.** The install cell takes a few minutes on the TPU runtime. With the default
# settings (BERT-mini on the bundled 370 KB WikiText-2 sample, 5,000 steps of 256 sequences)
# making the records takes well under a minute; the training prints its speed (examples/s),
# so the first log lines tell how long the rest will take. For scale: the paper's BERT-Base
# took 4 days on 16 TPU chips, and the free v5e-1 has one chip while a session lasts a few
# hours, so the models trained here are small ones. A useful model also needs a real corpus
# (hundreds of MB of text or more): point `CORPUS_FILES` at it. The bundled sample is only
# enough to see the losses fall.
#
# **Smoke test.** `SMOKE = True` (or the environment variable `BERT_KERAS_SMOKE=1`) runs
# everything with a tiny model for 20 steps: one to two minutes on a 2-core CPU. The test suite
# runs the notebook that way.

# %% install

# %% [markdown]
# ## Settings
#
# Every setting of the run is here. `WORK_DIR` receives everything the notebook writes
# (vocabulary, records, model directory, SavedModels); on Colab it is on the runtime's local
# disk, which is erased when the runtime is recycled: set `COPY_RESULTS_TO` to a Google Drive
# folder or a Cloud Storage bucket to keep the results.

# %% tags=["parameters"]
SMOKE = False  # @param {type:"boolean"}
WORK_DIR = "bert_keras_work"  # @param {type:"string"}
# Training text: comma-separated files or globs; empty = the bundled WikiText-2 sample.
CORPUS_FILES = ""  # @param {type:"string"}
HELDOUT_FILES = ""  # @param {type:"string"}
# paragraphs: one paragraph per line, " = Title = " lines start articles (WikiText);
# sentences: one sentence per line, a blank line between documents (the original BERT format).
INPUT_FORMAT = "paragraphs"  # @param ["paragraphs", "sentences"]
DO_LOWER_CASE = True  # @param {type:"boolean"}
VOCAB_SIZE = 8000  # @param {type:"integer"}
# tiny (2 layers, 128 wide), mini (4, 256), small (4, 512), medium (8, 512), base (12, 768),
# or L{2..12}_H{128..768}.
PRESET = "mini"  # @param {type:"string"}
MAX_SEQ_LENGTH = 128  # @param {type:"integer"}
MAX_PREDICTIONS_PER_SEQ = 20  # @param {type:"integer"}
DUPE_FACTOR = 10  # @param {type:"integer"}
TRAIN_BATCH_SIZE = 256  # @param {type:"integer"}
NUM_TRAIN_STEPS = 5000  # @param {type:"integer"}
LEARNING_RATE = 1e-3  # @param {type:"number"}
# Training steps per call into the accelerator: what keeps a TPU busy (1 on a CPU).
STEPS_PER_EXECUTION = 100  # @param {type:"integer"}
SAVE_CHECKPOINTS_STEPS = 1000  # @param {type:"integer"}
# Where to copy the results at the end: a Drive folder (/content/drive/MyDrive/...) or gs://...
COPY_RESULTS_TO = ""  # @param {type:"string"}

# %%
import os

if os.environ.get("BERT_KERAS_SMOKE") == "1":
    SMOKE = True
if SMOKE:
    # A tiny model for a few steps on the bundled sample: checks that every step runs.
    CORPUS_FILES, HELDOUT_FILES, INPUT_FORMAT = "", "", "paragraphs"
    VOCAB_SIZE, PRESET = 2000, "tiny"
    MAX_SEQ_LENGTH, MAX_PREDICTIONS_PER_SEQ, DUPE_FACTOR = 64, 10, 1
    TRAIN_BATCH_SIZE, NUM_TRAIN_STEPS, LEARNING_RATE = 16, 20, 1e-3
    STEPS_PER_EXECUTION, SAVE_CHECKPOINTS_STEPS = 5, 20
    COPY_RESULTS_TO = ""
print("smoke test" if SMOKE else "full run", "- outputs in", os.path.abspath(WORK_DIR))

# %% [markdown]
# ## Connect to the TPU (or find the GPU / CPU)
#
# Colab's TPU runtime is a **TPU VM** (a single-chip TPU v5e-1 on the free tier since 2025):
# the TPU chips are devices of the machine that runs this notebook. Since 2025 TensorFlow's
# TPU build no longer connects there, so on a TPU the install cell picks the **Keras JAX
# backend**: JAX holds the TPU and trains (`keras.Model.fit`, data parallel over every chip),
# while TensorFlow, on the CPU, only reads the records and writes and runs the SavedModels.
# With `KERAS_BACKEND = "tensorflow"` on a TPU VM that has `tensorflow-tpu`, TensorFlow
# connects with `TPUClusterResolver(tpu="local")` and trains with `TPUStrategy`; on a GPU or
# CPU either backend trains. Only one process can hold the TPU: run everything from this
# notebook, not from `!python` commands, once the TPU is connected.

# %%
import glob

import keras
import tensorflow as tf

from bert_keras import precision

tf.get_logger().setLevel("WARNING")  # tf.distribute's per-step INFO lines drown the metrics
BACKEND = keras.backend.backend()


def connect_accelerator():
    """(tf.distribute strategy or None on JAX, "TPU" | "GPU" | "CPU", number of devices)."""
    if BACKEND == "jax":
        import jax

        devices = jax.devices()
        return None, devices[0].platform.upper(), len(devices)
    tpu_devices = glob.glob("/dev/accel*") + glob.glob("/dev/vfio/[0-9]*")
    if tpu_devices or os.environ.get("TPU_ACCELERATOR_TYPE") or os.environ.get("TPU_NAME"):
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu="local")
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
            found = tf.distribute.TPUStrategy(resolver)
            return found, "TPU", found.num_replicas_in_sync
        except Exception as error:  # the resolver raises several unrelated types
            print("A TPU seems present but TensorFlow cannot use it:", error)
            print("(run the install cell with KERAS_BACKEND = 'jax') - going on without it")
    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) > 1:
        return tf.distribute.MirroredStrategy(), "GPU", len(gpus)
    if gpus:
        return tf.distribute.OneDeviceStrategy(gpus[0].name), "GPU", 1
    return tf.distribute.get_strategy(), "CPU", 1


strategy, ACCELERATOR, DEVICES = connect_accelerator()
# bfloat16 is the TPU's native format; a GPU gets it where it has the units (compute
# capability 8.0+), else float16 with loss scaling on TensorFlow, float32 on JAX.
MIXED_PRECISION = {"TPU": "mixed_bfloat16", "CPU": "float32"}.get(ACCELERATOR)
if MIXED_PRECISION is None:
    MIXED_PRECISION = precision.mixed_precision_policy(precision.resolve_dtype("auto", strategy))
    if MIXED_PRECISION == "float32" and BACKEND == "tensorflow":
        MIXED_PRECISION = "mixed_float16"
if ACCELERATOR == "CPU":
    STEPS_PER_EXECUTION = min(STEPS_PER_EXECUTION, 5)
print(f"{ACCELERATOR}: {DEVICES} device(s), {MIXED_PRECISION}, Keras {keras.__version__} on "
      f"{BACKEND}, TensorFlow {tf.__version__}")

# %% [markdown]
# ## Where the files go: local disk or a bucket
#
# On a **TPU VM** (Colab's TPU runtime today, and Cloud TPU VMs) TensorFlow reads the records
# and writes checkpoints on the VM's own disk, exactly as on a GPU runtime, so this notebook
# keeps everything under `WORK_DIR` on the local disk. The rule that a TPU reads and writes
# **only Cloud Storage buckets** (`gs://...`) belonged to the old **TPU Node** architecture
# (Colab's former "TPU (deprecated)" runtime and Cloud TPU Nodes), where the TPU sat on
# another host that could not see the notebook's files. You need a bucket only there, or
# when the corpus does not fit on the VM's disk. TensorFlow reads `gs://` paths directly
# (TFRecords, checkpoints), after `google.colab.auth.authenticate_user()`; the model
# directories of `bert_keras` are written with ordinary file I/O, so keep `WORK_DIR` local
# and copy the results to a bucket or Drive at the end (last cell).

# %%
from bert_keras.data.bundled import WIKITEXT_HELDOUT_FILE, WIKITEXT_TRAIN_FILE

os.makedirs(WORK_DIR, exist_ok=True)
paths = {
    "vocab": os.path.join(WORK_DIR, "vocab.txt"),
    "train_data": os.path.join(WORK_DIR, "data", "train"),
    "heldout_data": os.path.join(WORK_DIR, "data", "heldout"),
    "model": os.path.join(WORK_DIR, "model"),
    "preprocessor": os.path.join(WORK_DIR, "export", "preprocessor"),
    "encoder": os.path.join(WORK_DIR, "export", "encoder"),
}


def expand(patterns, default):
    files = []
    for pattern in (patterns or default).split(","):
        matched = sorted(tf.io.gfile.glob(pattern.strip()))
        if not matched:
            raise FileNotFoundError(f"no file matches {pattern.strip()!r}")
        files += matched
    return files


corpus_files = expand(CORPUS_FILES, WIKITEXT_TRAIN_FILE)
heldout_files = expand(HELDOUT_FILES, WIKITEXT_HELDOUT_FILE)
print("training text:", corpus_files)
print("held-out text:", heldout_files)

# %% [markdown]
# ## 1. The vocabulary
#
# BERT's basic tokenization (lower-casing and accent stripping for an uncased model, splits
# on whitespace and punctuation) counts the words, exactly as the tokenizer splits them; the
# WordPiece trainer of Hugging Face's `tokenizers` then learns the wordpieces from those counts
# (`bert_keras/text/vocab_builder.py`), and exactly `VOCAB_SIZE` tokens are kept, with
# `[PAD] [UNK] [CLS] [SEP] [MASK]` first. Same as `bert-keras vocab --input_files=...
# --vocab_size=... --do_lower_case --output=vocab.txt`.

# %%
from bert_keras.text import vocab_builder

tokens = vocab_builder.build_vocabulary(corpus_files, VOCAB_SIZE, lower_case=DO_LOWER_CASE)
vocab_builder.write_vocabulary(tokens, paths["vocab"])
print(len(tokens), "tokens, e.g.", tokens[5:15], "->", paths["vocab"])

# %% [markdown]
# ## 2. Pre-training records
#
# The original `create_pretraining_data.py` algorithm (document chunks, 50% random next
# segment, 15% of the tokens masked: 80% `[MASK]`, 10% kept, 10% random), `DUPE_FACTOR`
# passes with different masks, written as sharded TFRecords by one worker process per CPU
# core. The TPU VM of Colab has many cores, so this is quick even for large corpora. Same as
# `bert-keras data --input_files=... --vocab_file=vocab.txt
# --output_dir=... --max_seq_length=128 --max_predictions_per_seq=20 --dupe_factor=10`.

# %%
from bert_keras.data import instances as pretraining_data
from bert_keras.data import pipeline as pretraining_pipeline

instance_options = pretraining_data.InstanceOptions(
    max_seq_length=MAX_SEQ_LENGTH, max_predictions_per_seq=MAX_PREDICTIONS_PER_SEQ,
    dupe_factor=DUPE_FACTOR)
data_stats = {}
for split, files, shards in (("train", corpus_files, 8), ("heldout", heldout_files, 1)):
    data_stats[split] = pretraining_pipeline.run(pretraining_pipeline.PipelineConfig(
        input_files=files, vocab_file=paths["vocab"], output_dir=paths[f"{split}_data"],
        do_lower_case=DO_LOWER_CASE, options=instance_options, input_format=INPUT_FORMAT,
        num_output_shards=shards, seed=12345 + (split == "heldout"),
        # Worker processes pay off on big corpora; the smoke test stays in this process.
        num_workers=1 if SMOKE else 0))
    print(f"{split}: {data_stats[split]['instances']:,} instances")

# %% [markdown]
# ## 3. Pre-training
#
# The paper's losses (masked LM + next sentence) and optimizer (Adam with weight decay,
# linear warm-up then linear decay, gradients clipped to norm 1), `STEPS_PER_EXECUTION` steps
# per call into the accelerator: on JAX with `keras.Model.fit`, on TensorFlow in a
# `tf.function` around `strategy.run`. The model directory is the same either way. Checkpoints go to
# `model/checkpoints` every `SAVE_CHECKPOINTS_STEPS` steps: if the session stops, running
# this cell again continues from the last one. Same as `bert-keras pretrain
# --strategy=tpu --tpu=local --dtype=bfloat16 ...`.

# %%
import dataclasses

from bert_keras.pretraining import run as pretraining

pretraining_options = pretraining.PretrainingOptions(
    input_files=os.path.join(paths["train_data"], "*.tfrecord"), output_dir=paths["model"],
    config=PRESET, vocab_file=paths["vocab"], do_lower_case=DO_LOWER_CASE,
    train_batch_size=TRAIN_BATCH_SIZE, eval_batch_size=TRAIN_BATCH_SIZE,
    max_seq_length=MAX_SEQ_LENGTH, max_predictions_per_seq=MAX_PREDICTIONS_PER_SEQ,
    num_train_steps=NUM_TRAIN_STEPS, num_warmup_steps=NUM_TRAIN_STEPS // 10,
    learning_rate=LEARNING_RATE, mixed_precision=MIXED_PRECISION,
    steps_per_execution=STEPS_PER_EXECUTION, save_checkpoints_steps=SAVE_CHECKPOINTS_STEPS,
    log_steps=5 if SMOKE else 500)
train_metrics = pretraining.run_pretraining(pretraining_options, strategy=strategy)
print({name: round(float(value), 4) for name, value in train_metrics.items()})

# %% [markdown]
# ## 4. Held-out accuracy
#
# Masked-LM and next-sentence accuracy on the held-out records, dropout off. A random model
# gets next to 0 masked-LM accuracy. For scale, from the learning test of
# `docs/pretraining.md` (a word vocabulary, 32-token sequences): always guessing the most
# frequent token scored 0.19 on the bundled held-out text, a tiny model after 800 steps 0.21.

# %%
eval_options = dataclasses.replace(
    pretraining_options, mode="eval",
    input_files=os.path.join(paths["heldout_data"], "*.tfrecord"))
eval_results = pretraining.run_pretraining(eval_options, strategy=strategy)
for name in ("masked_lm_accuracy", "masked_lm_loss", "next_sentence_accuracy",
             "next_sentence_loss", "examples", "global_step"):
    print(f"{name:24s} {eval_results[name]}")

# %% [markdown]
# ## 5. Export SavedModels
#
# Two SavedModels in the TF Hub layout: the **preprocessor** (the WordPiece tokenizer in the
# graph: raw strings in, `input_word_ids` / `input_mask` / `input_type_ids` out) and the
# **encoder** (those three in, `pooled_output` / `sequence_output` out, plus `.mlm` for the
# masked-LM head). They load with TensorFlow and tensorflow-text alone, no `bert_keras`
# (`import tensorflow_text` must come before `tf.saved_model.load`). Same as
# `bert-keras export --kind=preprocessor|encoder --model_dir=... --export_dir=...`.
# On the JAX backend, `export_many` runs both exports in one TensorFlow child process.

# %%
from bert_keras.export import export_many

export_many([dict(kind="preprocessor", model_dir=paths["model"], export_dir=paths["preprocessor"],
                  seq_length=MAX_SEQ_LENGTH),
             dict(kind="encoder", model_dir=paths["model"], export_dir=paths["encoder"])])
print(sorted(os.listdir(os.path.dirname(paths["encoder"]))))

# %% [markdown]
# ## 6. Fill in the blanks
#
# The reloaded SavedModels (not the Python model) score every word of the vocabulary at each
# `[MASK]`. After a smoke run the answers are noise; after a real run they should fit the
# sentence.

# %%
from bert_keras.export.serving_demo import masked_word_predictions
from bert_keras.main_job import DEFAULT_SENTENCES

predictions = masked_word_predictions(paths["preprocessor"], paths["encoder"], paths["vocab"],
                                      DEFAULT_SENTENCES, seq_length=MAX_SEQ_LENGTH)
for sentence, per_mask in zip(DEFAULT_SENTENCES, predictions):
    print(sentence)
    for candidates in per_mask:
        print("    [MASK] ->", "  ".join(f"{token} ({p:.2f})" for token, p in candidates))

# %% [markdown]
# ## Keep the results
#
# A summary of the run goes to `WORK_DIR/summary.json`. With `COPY_RESULTS_TO` set, the
# model directory and the SavedModels are copied there: a Drive folder (mounted here when the
# path starts with `/content/drive`) or a `gs://` bucket (you are asked to sign in). The
# model directory is what the fine-tuning notebooks start from (`INIT_MODEL_DIR`).

# %%
import json

summary = {
    "accelerator": ACCELERATOR,
    "backend": BACKEND,
    "devices": DEVICES,
    "smoke": SMOKE,
    "vocab_size": len(tokens),
    "instances": {split: stats["instances"] for split, stats in data_stats.items()},
    "train": {name: float(value) for name, value in train_metrics.items()},
    "eval": {name: float(value) for name, value in eval_results.items()},
    "masked_word_predictions": predictions,
    "paths": {name: os.path.abspath(path) for name, path in paths.items()},
}
with open(os.path.join(WORK_DIR, "summary.json"), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=2)


def copy_tree(source, destination):
    for directory, _, files in tf.io.gfile.walk(source):
        target = os.path.join(destination, os.path.relpath(directory, source))
        tf.io.gfile.makedirs(target)
        for name in files:
            tf.io.gfile.copy(os.path.join(directory, name), os.path.join(target, name),
                             overwrite=True)


if COPY_RESULTS_TO:
    if COPY_RESULTS_TO.startswith("/content/drive"):
        from google.colab import drive
        drive.mount("/content/drive")
    elif COPY_RESULTS_TO.startswith("gs://"):
        from google.colab import auth
        auth.authenticate_user()
    for name in ("model", "preprocessor", "encoder"):
        copy_tree(paths[name], os.path.join(COPY_RESULTS_TO, name))
    print("copied to", COPY_RESULTS_TO)
print(json.dumps({key: summary[key] for key in ("accelerator", "instances", "eval")}, indent=2))
