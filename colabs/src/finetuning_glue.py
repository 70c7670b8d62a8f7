# %% [markdown]
# # Fine-tuning BERT on GLUE (MRPC, SST-2, ...)
#
# This notebook fine-tunes a BERT model directory on a GLUE task with `keras.Model.fit`,
# scores it on the dev set with the task's official metric, exports a **raw-text classifier**
# (a SavedModel that takes strings and returns labels) and calls it. A last section fine-tunes
# from an **exported encoder** SavedModel instead, the way TF Hub encoders are used.
#
# **Runtime.** *Runtime → Change runtime type*: a GPU (T4) or a TPU (the Keras JAX backend
# there, see the install cell); a CPU works for
# the smoke test only. The notebook finds out which one it has and uses it.
#
# **How long.** Installing takes 1-3 minutes. The paper fine-tunes BERT-Base on any GLUE task
# "in at most 1 hour on a single Cloud TPU, or a few hours on a GPU"; MRPC (3,668 training
# pairs, 3 epochs) is among the smallest, a matter of minutes on either. Downloading and
# converting the published BERT-Base checkpoint (about 400 MB) takes about a minute.
#
# **Smoke test.** `SMOKE = True` (or `BERT_KERAS_SMOKE=1`) runs every step with a tiny
# random BERT and a few sentence pairs written from the bundled text, in one to two minutes
# on a CPU and with no download; its scores mean nothing. The test suite runs it that way.

# %% install

# %% [markdown]
# ## Settings
#
# `INIT_MODEL_DIR` is the model to fine-tune: a model directory (the pre-training notebook's
# `model/`, or any converted checkpoint: `python tools/convert_checkpoint.py`). Left empty,
# Google's BERT-Base uncased is downloaded and converted. `DATA_DIR` holds the task's official
# TSV files (`train.tsv`, `dev.tsv`, as the GLUE download script writes them); left empty, the
# data comes from tensorflow-datasets (`glue/mrpc`, `glue/sst2`, ...), downloaded here.

# %% tags=["parameters"]
SMOKE = False  # @param {type:"boolean"}
# glue/mrpc, glue/sst2, glue/cola, glue/qqp, glue/mnli, glue/qnli, glue/rte, glue/stsb, glue/wnli
TASK = "glue/mrpc"  # @param {type:"string"}
DATA_DIR = ""  # @param {type:"string"}
INIT_MODEL_DIR = ""  # @param {type:"string"}
WORK_DIR = "bert_keras_glue"  # @param {type:"string"}
# The paper's settings: batch 32, 3 epochs, learning rate among 5e-5, 4e-5, 3e-5, 2e-5.
LEARNING_RATE = 2e-5  # @param {type:"number"}
TRAIN_BATCH_SIZE = 32  # @param {type:"integer"}
NUM_TRAIN_EPOCHS = 3  # @param {type:"integer"}
MAX_SEQ_LENGTH = 128  # @param {type:"integer"}
# Also fine-tune from the exported encoder SavedModel (last section; classification tasks).
FROM_EXPORTED_ENCODER = True  # @param {type:"boolean"}

# %%
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if os.environ.get("BERT_KERAS_SMOKE") == "1":
    SMOKE = True
if SMOKE:
    # A tiny random model and generated MRPC-format data: checks that every step runs.
    TASK, DATA_DIR, INIT_MODEL_DIR = "glue/mrpc", "", ""
    LEARNING_RATE, TRAIN_BATCH_SIZE, NUM_TRAIN_EPOCHS, MAX_SEQ_LENGTH = 1e-3, 16, 2, 64
print("smoke test" if SMOKE else "full run", "- outputs in", os.path.abspath(WORK_DIR))

# %% [markdown]
# ## Find the accelerator
#
# On the Keras JAX backend (the install cell's choice on Colab's TPU runtime) JAX trains on its
# own devices. On TensorFlow, `resolve_strategy("auto")` takes the TPU when there is one
# (`TPUClusterResolver(tpu="local")` on a TPU VM with `tensorflow-tpu`), else all GPUs, else the
# CPU. Mixed precision follows the hardware: bfloat16 on a TPU, float16 (with loss scaling) on
# a GPU.

# %%
import keras
import tensorflow as tf

from bert_keras import distribution

tf.get_logger().setLevel("WARNING")
# On the Keras JAX backend (a TPU runtime) JAX holds the devices; the strategy is TensorFlow's
# default one, which only feeds the input pipeline.
strategy = distribution.resolve_strategy("auto")
ACCELERATOR, DEVICES = distribution.accelerator(strategy)
DTYPE = {"TPU": "mixed_bfloat16", "GPU": "mixed_float16", "CPU": None}[ACCELERATOR]
# Several steps per call keep a TPU busy; elsewhere one step per call is as fast.
STEPS_PER_EXECUTION = 50 if ACCELERATOR == "TPU" else 1
print(f"{ACCELERATOR}: {DEVICES} device(s), Keras on {keras.backend.backend()}, dtype {DTYPE or 'float32'}, "
      f"TensorFlow {tf.__version__}")

# %% [markdown]
# ## The model directory to fine-tune
#
# A model directory is `bert_config.json` + `vocab.txt` + `tokenizer_config.json` +
# `model.safetensors`. The published BERT-Base is converted from its original checkpoint
# (as `python tools/convert_checkpoint.py --format=tf1 --input=.../bert_model.ckpt`). The
# smoke test builds a tiny BERT with random weights and a 1,000-token vocabulary learned from
# the bundled WikiText-2 sample.

# %%
import glob
import urllib.request
import zipfile

from bert_keras import BertConfig
from bert_keras.model import checkpoint_names
from bert_keras.modeldir import model_dir
from bert_keras.text import vocab_builder
from bert_keras.modeldir.convert import convert_tf1_checkpoint
from bert_keras.data.bundled import WIKITEXT_HELDOUT_FILE
from bert_keras.model.pretraining_model import build_pretraining_model, pretraining_weight_map

PUBLISHED_CHECKPOINT = ("https://storage.googleapis.com/bert_models/2018_10_18/"
                        "uncased_L-12_H-768_A-12.zip")


def tiny_random_model_dir(path):
    os.makedirs(path, exist_ok=True)
    vocab_file = os.path.join(path, "vocab.txt")
    tokens = vocab_builder.build_vocabulary([WIKITEXT_HELDOUT_FILE], 1000, lower_case=True,
                                            progress=False)
    vocab_builder.write_vocabulary(tokens, vocab_file)
    config = BertConfig.from_preset("tiny", vocab_size=len(tokens))
    weights = checkpoint_names.collect_weights(
        pretraining_weight_map(build_pretraining_model(config)))
    model_dir.write_model_dir(path, config, vocab_file, True, weights)
    return path


def published_model_dir(path, url=PUBLISHED_CHECKPOINT):
    if os.path.exists(os.path.join(path, model_dir.WEIGHTS_NAME)):
        return path
    download = os.path.join(WORK_DIR, "download")
    archive = os.path.join(download, os.path.basename(url))
    os.makedirs(download, exist_ok=True)
    if not os.path.exists(archive):
        print("downloading", url)
        urllib.request.urlretrieve(url, archive + ".part")
        os.replace(archive + ".part", archive)
    with zipfile.ZipFile(archive) as f:
        f.extractall(download)
    index = glob.glob(os.path.join(download, "**", "bert_model.ckpt.index"), recursive=True)[0]
    convert_tf1_checkpoint(index[: -len(".index")], path)
    return path


if SMOKE:
    INIT_MODEL_DIR = tiny_random_model_dir(os.path.join(WORK_DIR, "tiny_random_model"))
elif not INIT_MODEL_DIR:
    INIT_MODEL_DIR = published_model_dir(os.path.join(WORK_DIR, "bert_base_uncased"))
config = model_dir.read_config(INIT_MODEL_DIR)
print(INIT_MODEL_DIR, ":", config.num_hidden_layers, "layers,", config.hidden_size, "wide,",
      config.vocab_size, "tokens, lower case:", model_dir.read_do_lower_case(INIT_MODEL_DIR))

# %% [markdown]
# ## The data
#
# The smoke test writes a tiny MRPC in the official layout (`Quality`, two ids, two
# sentences): a bundled sentence paired with itself minus one word is a paraphrase (1), paired
# with another sentence it is not (0). Otherwise the official TSVs in `DATA_DIR` are read, or
# tensorflow-datasets prepares `glue/<task>` (a download of a few MB for MRPC and SST-2).

# %%
import random

from bert_keras.finetuning.catalog import parse_task_name
from bert_keras.finetuning.glue import data as glue

spec = glue.task_spec(parse_task_name(TASK).glue_task)
USE_TFDS = False


def bundled_sentences():
    with open(WIKITEXT_HELDOUT_FILE, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip() and not line.strip().startswith("=")]
    sentences = []
    for line in lines:
        sentences += [part.strip() + " ." for part in line.split(" . ")
                      if 6 <= len(part.split()) <= 25]
    return sentences


def write_smoke_mrpc(folder, sizes=(("train", 64), ("dev", 32)), seed=0):
    rng = random.Random(seed)
    sentences = bundled_sentences()
    os.makedirs(folder, exist_ok=True)
    for split, count in sizes:
        rows = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for index in range(count):
            first = rng.choice(sentences)
            if index % 2 == 0:
                words = first.split()
                del words[rng.randrange(len(words) - 1)]
                second, label = " ".join(words), 1
            else:
                second, label = rng.choice(sentences), 0
            rows.append(f"{label}\t{2 * index}\t{2 * index + 1}\t{first}\t{second}")
        with open(os.path.join(folder, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("\n".join(rows) + "\n")
    return folder


if SMOKE:
    DATA_DIR = write_smoke_mrpc(os.path.join(WORK_DIR, "data", "MRPC"))
elif not DATA_DIR:
    try:
        import tensorflow_datasets as tfds
    except ImportError:
        pip_install("tensorflow-datasets")  # pip_install: from the install cell
        import tensorflow_datasets as tfds
    tfds.builder(spec.tfds_name).download_and_prepare()
    USE_TFDS, DATA_DIR = True, None


def read_examples(split):
    if USE_TFDS:
        return glue.read_glue_tfds(spec.name, split)
    return glue.read_glue_examples(spec.name, DATA_DIR, split)


dev_split = spec.eval_splits[0]
dev_examples = read_examples(dev_split)
print(f"{spec.name}: {len(read_examples('train'))} training examples, "
      f"{len(dev_examples)} in {dev_split}; labels {glue.get_labels(spec.name)}")
print("e.g.", dev_examples[0])

# %% [markdown]
# ## Fine-tune with `keras.Model.fit`
#
# `run_finetuning` does the paper's recipe: encoder + dropout + a dense layer on the
# `pooled_output`, AdamW with 10% warm-up then linear decay, `fit` under the strategy, then
# the dev metrics (MRPC: accuracy and F1), the predictions in the GLUE submission layout and a
# fine-tuned model directory with the head in `run/`. Same as `python tools/run_finetuning.py
# --task=glue/mrpc --data_dir=... --init_model_dir=... --output_dir=...`. The step-by-step
# version (your own `compile` and `fit`) is in `docs/finetuning.md`.

# %%
from bert_keras.finetuning import run_finetuning

run_dir = os.path.join(WORK_DIR, "run")
result = run_finetuning(
    TASK, DATA_DIR, INIT_MODEL_DIR, run_dir, strategy=strategy, dtype=DTYPE,
    steps_per_execution=STEPS_PER_EXECUTION, learning_rate=LEARNING_RATE,
    train_batch_size=TRAIN_BATCH_SIZE, num_train_epochs=NUM_TRAIN_EPOCHS,
    max_seq_length=MAX_SEQ_LENGTH, use_tfds=USE_TFDS, verbose=2)
print("training loss per epoch:", [round(loss, 4) for loss in result.train_loss])
print("dev metrics:", result.metrics)
print(sorted(os.listdir(run_dir)))

# %% [markdown]
# ## Export a raw-text classifier and call it
#
# The fine-tuned directory becomes one SavedModel with the tokenizer, the encoder and the
# head inside: its `serving_default` signature takes the two sentences as strings and returns
# the label, its probabilities and logits. It loads with TensorFlow and tensorflow-text alone
# (import `tensorflow_text` first, it registers the tokenizer's ops). Same as
# `python tools/export_savedmodel.py --kind=task --model_dir=run --export_dir=...`.
#
# The check below compares its logits on the dev set with those of the Keras model that was
# just trained: the same tokenization and the same weights, so the same numbers (within
# float rounding; bfloat16 on a TPU differs more).

# %%
import numpy as np
import tensorflow_text  # noqa: F401  (registers the tokenizer ops before the load)

from bert_keras.export import export_from_model_dir
from bert_keras.finetuning import predict
from bert_keras.finetuning import FinetuningOptions, get_task

classifier_dir = os.path.join(WORK_DIR, "export", "classifier")
export_from_model_dir("task", run_dir, classifier_dir)
serve = tf.saved_model.load(classifier_dir).signatures["serving_default"]

texts = glue.examples_to_arrays(dev_examples, spec.name)


def serve_in_batches(batch_size=256):
    """The signature's outputs for the whole dev set, a batch at a time."""
    pieces = []
    for start in range(0, len(dev_examples), batch_size):
        inputs = {name: tf.constant(texts[name][start:start + batch_size].astype(str))
                  for name in ("text_a", "text_b") if name in texts}
        pieces.append({name: value.numpy() for name, value in serve(**inputs).items()})
    return {name: np.concatenate([piece[name] for piece in pieces]) for name in pieces[0]}


outputs = serve_in_batches()
for index in range(3):
    pair = " | ".join(str(texts[k][index]) for k in ("text_a", "text_b") if k in texts)
    if spec.is_regression:
        print(f"score {outputs['score'][index]:.3f}  {pair}")
    else:
        print(f"{outputs['label_name'][index].decode():>12s} "
              f"{outputs['probabilities'][index].round(3)}  {pair}")

task = get_task(TASK, DATA_DIR, run_dir, FinetuningOptions(
    max_seq_length=MAX_SEQ_LENGTH, use_tfds=USE_TFDS))
keras_logits = np.asarray(predict(result.model, task.load(dev_split).inputs, 32), np.float32)
exported_logits = outputs["score"][:, None] if spec.is_regression else outputs["logits"]
largest_difference = float(np.max(np.abs(keras_logits - exported_logits)))
same_labels = float(np.mean(keras_logits.argmax(-1) == exported_logits.argmax(-1)))
print(f"exported vs Keras model on {len(dev_examples)} dev examples: largest logit difference "
      f"{largest_difference:.2e}, same label {same_labels:.0%}")

# %% [markdown]
# ## Fine-tuning from an exported encoder (TF Hub style)
#
# The pre-trained model can also travel as two SavedModels: a **preprocessor** (strings →
# `input_word_ids`, `input_mask`, `input_type_ids`) and an **encoder**. In Keras 3 the encoder
# becomes a trainable layer through `keras.layers.TFSMLayer` (`hub.KerasLayer` does not work
# with Keras 3); `bert_keras.export.savedmodel_layer` wraps it with clean weight names and
# dropout during training. The preprocessor runs in `tf.data`, on the CPU next to the input
# pipeline. The model is an ordinary `keras.Model`: compile and `fit` as usual.
#
# A SavedModel is a TensorFlow graph, so this path needs Keras on the TensorFlow backend: on
# JAX (Colab's TPU runtime) the cell says so and skips it. It runs in the test suite on a CPU;
# it has not been tried on a TPU here. If it fails on one, use the model-directory path above.

# %%
import keras

from bert_keras import optimization
from bert_keras.export.savedmodel_layer import build_classifier_from_export, preprocess_dataset

export_result = None
if FROM_EXPORTED_ENCODER and keras.backend.backend() != "tensorflow":
    print("skipped: keras.layers.TFSMLayer runs on the Keras TensorFlow backend only, this is",
          keras.backend.backend())
elif FROM_EXPORTED_ENCODER and not spec.is_regression:
    preprocessor_dir = os.path.join(WORK_DIR, "export", "preprocessor")
    encoder_dir = os.path.join(WORK_DIR, "export", "encoder")
    export_from_model_dir("preprocessor", INIT_MODEL_DIR, preprocessor_dir,
                          seq_length=MAX_SEQ_LENGTH)
    export_from_model_dir("encoder", INIT_MODEL_DIR, encoder_dir)

    def text_dataset(examples, training):
        arrays = glue.examples_to_arrays(examples, spec.name)
        features = (arrays["text_a"].astype(str),)
        if "text_b" in arrays:
            features += (arrays["text_b"].astype(str),)
        dataset = tf.data.Dataset.from_tensor_slices((features, arrays["label"]))
        if training:
            dataset = dataset.shuffle(len(examples), seed=0).repeat()
        # TPUs need static shapes: whole batches only (training repeats the data anyway).
        dataset = dataset.batch(TRAIN_BATCH_SIZE, drop_remainder=training or ACCELERATOR == "TPU")
        return preprocess_dataset(dataset, preprocessor_dir, seq_length=MAX_SEQ_LENGTH)

    train_examples = read_examples("train")
    steps_per_epoch = max(1, len(train_examples) // TRAIN_BATCH_SIZE)
    num_train_steps = steps_per_epoch * NUM_TRAIN_EPOCHS
    with strategy.scope():
        hub_model = build_classifier_from_export(encoder_dir, len(glue.get_labels(spec.name)),
                                                 seq_length=MAX_SEQ_LENGTH)
        optimizer = keras.optimizers.AdamW(
            learning_rate=optimization.WarmupLinearDecay(
                LEARNING_RATE, num_train_steps // 10, num_train_steps),
            weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0)
        optimizer.exclude_from_weight_decay(var_names=["layer_norm", "LayerNorm", "bias"])
        hub_model.compile(optimizer=optimizer,
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          metrics=["accuracy"])
    history = hub_model.fit(text_dataset(train_examples, True), epochs=NUM_TRAIN_EPOCHS,
                            steps_per_epoch=steps_per_epoch, verbose=2)
    # (On a TPU the last partial batch of the dev set is left out.)
    dev_loss, dev_accuracy = hub_model.evaluate(text_dataset(dev_examples, False), verbose=0)
    export_result = {"loss_per_epoch": [float(v) for v in history.history["loss"]],
                     "dev_accuracy": float(dev_accuracy)}
    print("from the exported encoder:", export_result)

# %% [markdown]
# ## Summary
#
# Written to `WORK_DIR/summary.json`. The fine-tuned model directory (`run/`) and the
# raw-text classifier (`export/classifier/`) are the results worth keeping: copy them to
# Drive or a bucket before the runtime goes away.

# %%
import json

summary = {
    "accelerator": ACCELERATOR,
    "backend": keras.backend.backend(),
    "smoke": SMOKE,
    "task": TASK,
    "init_model_dir": os.path.abspath(INIT_MODEL_DIR),
    "data_dir": os.path.abspath(DATA_DIR) if DATA_DIR else None,
    "run_dir": os.path.abspath(run_dir),
    "classifier_dir": os.path.abspath(classifier_dir),
    "dev_split": dev_split,
    "metrics": result.metrics,
    "train_loss": result.train_loss,
    "exported": {
        "label_names": (None if spec.is_regression
                        else [name.decode() for name in outputs["label_name"]]),
        "probabilities": None if spec.is_regression else outputs["probabilities"].tolist(),
        "largest_logit_difference": largest_difference,
        "same_label_fraction": same_labels,
    },
    "from_exported_encoder": export_result,
}
with open(os.path.join(WORK_DIR, "summary.json"), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=2)
print(json.dumps({key: summary[key] for key in ("task", "metrics", "train_loss")}, indent=2))
