# %% [markdown]
# # SQuAD v1.1 / v2.0 with BERT: fine-tuning, prediction, evaluation
#
# This notebook fine-tunes a BERT model directory on SQuAD (v1.1: every question has an
# answer in its paragraph; v2.0: some have none), writes the predictions in the official
# format, scores them with the official metrics (exact match and F1; for v2.0 also the
# "no answer" threshold), and exports a **raw-text question-answering SavedModel** that takes
# a question and a paragraph as strings and returns the answer's text and position.
#
# **Runtime.** *Runtime → Change runtime type*: a GPU (T4) or a TPU (the Keras JAX backend
# there, see the install cell). A CPU is only
# good for the smoke test.
#
# **How long.** Installing takes 1-3 minutes, downloading and converting BERT-Base about a
# minute, the SQuAD files (train 30-40 MB, dev 5 MB) seconds. The paper fine-tunes BERT-Base
# "in at most 1 hour on a single Cloud TPU, or a few hours on a GPU"; SQuAD (88k-130k
# questions, 384-token windows) is the longest of its tasks. Prediction and scoring of the 10-12k dev questions take
# a few minutes more.
#
# **Smoke test.** `SMOKE = True` (or `BERT_KERAS_SMOKE=1`) runs every step with a tiny random
# BERT and a few fill-in-the-blank questions written from the bundled text, in about a minute
# on a CPU and with no download; its scores mean nothing. The test suite runs it that way.

# %% install

# %% [markdown]
# ## Settings
#
# `INIT_MODEL_DIR`: the model directory to fine-tune (the pre-training notebook's `model/`, a
# converted checkpoint, ...); left empty, Google's BERT-Base uncased is downloaded and
# converted. `DATA_DIR`: a folder with `train-v1.1.json` and `dev-v1.1.json` (or `-v2.0`);
# left empty, the official files are downloaded from the SQuAD site.
#
# Batch size and epochs: 0 means the paper's values on a TPU (v1.1: batch 32, 3 epochs;
# v2.0: batch 48, 2 epochs, learning rate 5e-5) and, on a GPU, the original BERT README's GPU
# recipe (batch 12, 2 epochs, learning rate 3e-5): that README counts 12 windows of 384 tokens
# as the most BERT-Base fits in 12 GB of GPU memory. If a GPU runs out of memory
# (`ResourceExhaustedError`), lower `TRAIN_BATCH_SIZE` or `MAX_SEQ_LENGTH` (256).

# %% tags=["parameters"]
SMOKE = False  # @param {type:"boolean"}
SQUAD_VERSION = "v1.1"  # @param ["v1.1", "v2.0"]
DATA_DIR = ""  # @param {type:"string"}
INIT_MODEL_DIR = ""  # @param {type:"string"}
WORK_DIR = "bert_keras_squad"  # @param {type:"string"}
LEARNING_RATE = 0.0  # @param {type:"number"}
TRAIN_BATCH_SIZE = 0  # @param {type:"integer"}
NUM_TRAIN_EPOCHS = 0  # @param {type:"integer"}
MAX_SEQ_LENGTH = 384  # @param {type:"integer"}
DOC_STRIDE = 128  # @param {type:"integer"}

# %%
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if os.environ.get("BERT_KERAS_SMOKE") == "1":
    SMOKE = True
if SQUAD_VERSION not in ("v1.1", "v2.0"):
    raise ValueError(f"SQUAD_VERSION must be 'v1.1' or 'v2.0', not {SQUAD_VERSION!r}")
if SMOKE:
    # A tiny random model and generated questions: checks that every step runs.
    DATA_DIR, INIT_MODEL_DIR = "", ""
    LEARNING_RATE, TRAIN_BATCH_SIZE, NUM_TRAIN_EPOCHS = 1e-3, 16, 2
    MAX_SEQ_LENGTH, DOC_STRIDE = 128, 48
TASK = "squad_v2" if SQUAD_VERSION == "v2.0" else "squad_v1"
print("smoke test" if SMOKE else "full run", f"of SQuAD {SQUAD_VERSION} - outputs in",
      os.path.abspath(WORK_DIR))

# %% [markdown]
# ## Find the accelerator
#
# On the Keras JAX backend (the install cell's choice on Colab's TPU runtime) JAX trains on its
# own devices; on TensorFlow `resolve_strategy("auto")` takes the TPU when there is one
# (`TPUClusterResolver(tpu="local")` with `tensorflow-tpu`), else the GPUs, else the CPU.
# bfloat16 on a TPU, float16 on a GPU.

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
STEPS_PER_EXECUTION = 50 if ACCELERATOR == "TPU" else 1
if ACCELERATOR == "TPU":
    paper = {"v1.1": (5e-5, 32, 3), "v2.0": (5e-5, 48, 2)}[SQUAD_VERSION]
else:
    paper = (3e-5, 12, 2)
LEARNING_RATE = LEARNING_RATE or paper[0]
TRAIN_BATCH_SIZE = TRAIN_BATCH_SIZE or paper[1]
NUM_TRAIN_EPOCHS = NUM_TRAIN_EPOCHS or paper[2]
print(f"{ACCELERATOR}: {DEVICES} device(s), Keras on {keras.backend.backend()}, dtype {DTYPE or 'float32'}; "
      f"learning rate {LEARNING_RATE}, batch {TRAIN_BATCH_SIZE}, {NUM_TRAIN_EPOCHS} epoch(s)")

# %% [markdown]
# ## The model directory to fine-tune
#
# Google's BERT-Base uncased, converted from its original checkpoint (as
# `python tools/convert_checkpoint.py --format=tf1 ...`), unless `INIT_MODEL_DIR` names one.
# The smoke test builds a tiny BERT with random weights and a 1,000-token vocabulary learned
# from the bundled WikiText-2 sample.

# %%
import glob
import urllib.request
import zipfile

from bert_keras import BertConfig
from bert_keras.model import checkpoint_names
from bert_keras.modeldir import model_dir
from bert_keras.text import vocab_builder
from bert_keras.modeldir.convert import convert_tf1_checkpoint
from bert_keras.data.bundled import WIKITEXT_HELDOUT_FILE, WIKITEXT_TRAIN_FILE
from bert_keras.model.pretraining_model import build_pretraining_model, pretraining_weight_map

PUBLISHED_CHECKPOINT = ("https://storage.googleapis.com/bert_models/2018_10_18/"
                        "uncased_L-12_H-768_A-12.zip")


def download(url, folder):
    path = os.path.join(folder, os.path.basename(url))
    os.makedirs(folder, exist_ok=True)
    if not os.path.exists(path):
        print("downloading", url)
        urllib.request.urlretrieve(url, path + ".part")
        os.replace(path + ".part", path)
    return path


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
    folder = os.path.join(WORK_DIR, "download")
    with zipfile.ZipFile(download(url, folder)) as f:
        f.extractall(folder)
    index = glob.glob(os.path.join(folder, "**", "bert_model.ckpt.index"), recursive=True)[0]
    convert_tf1_checkpoint(index[: -len(".index")], path)
    return path


if SMOKE:
    INIT_MODEL_DIR = tiny_random_model_dir(os.path.join(WORK_DIR, "tiny_random_model"))
elif not INIT_MODEL_DIR:
    INIT_MODEL_DIR = published_model_dir(os.path.join(WORK_DIR, "bert_base_uncased"))
config = model_dir.read_config(INIT_MODEL_DIR)
print(INIT_MODEL_DIR, ":", config.num_hidden_layers, "layers,", config.hidden_size, "wide,",
      config.vocab_size, "tokens")

# %% [markdown]
# ## The data
#
# The official JSON files: articles → paragraphs (`context`) → questions (`qas`) with
# `answers` (`text` and character offset `answer_start`); v2.0 adds `is_impossible`
# questions without answers. The smoke test writes files of that layout from the bundled
# text: contexts of three sentences, and questions made of one of their sentences with a word
# replaced by "what", asking for that word; for v2.0 every third context also gets a question
# from another context, without an answer.

# %%
import json
import random
import re

SQUAD_URL = "https://rajpurkar.github.io/SQuAD-explorer/dataset/"


def bundled_contexts(path, sentences_per_context=3):
    """Short paragraphs of a bundled text: runs of a few sentences."""
    with open(path, encoding="utf-8") as f:
        paragraphs = [line.strip() for line in f
                      if len(line.strip()) > 200 and not line.strip().startswith("=")]
    contexts = []
    for paragraph in paragraphs:
        sentences = [s for s in re.split(r"(?<= \.) ", paragraph) if 6 <= len(s.split()) <= 30]
        for start in range(0, len(sentences) - sentences_per_context + 1, sentences_per_context):
            contexts.append(" ".join(sentences[start:start + sentences_per_context]))
    return contexts


def cloze_question(sentence, rng):
    """(question, answer word, its character offset in the sentence) or None."""
    words = sentence.split(" ")
    choices = [i for i, word in enumerate(words) if word.isalpha() and len(word) > 3]
    if not choices:
        return None
    i = rng.choice(choices)
    question = " ".join(words[:i] + ["what"] + words[i + 1:]).rstrip(" .") + " ?"
    return question, words[i], len(" ".join(words[:i])) + (1 if i else 0)


def smoke_squad(contexts, with_impossible, rng, prefix, questions_per_context=2):
    articles = []
    for number, context in enumerate(contexts):
        sentences = re.split(r"(?<= \.) ", context)
        qas = []
        for k in range(questions_per_context):
            sentence = rng.choice(sentences)
            made = cloze_question(sentence, rng)
            if made is None:
                continue
            question, answer, offset = made
            qas.append({"id": f"{prefix}-{number}-{k}", "question": question,
                        "answers": [{"text": answer,
                                     "answer_start": context.index(sentence) + offset}]})
        if with_impossible and number % 3 == 0:
            other = contexts[(number + 1) % len(contexts)]
            made = cloze_question(rng.choice(re.split(r"(?<= \.) ", other)), rng)
            if made is not None:
                qas.append({"id": f"{prefix}-{number}-none", "question": made[0],
                            "answers": [], "is_impossible": True})
        articles.append({"title": f"{prefix} {number}",
                         "paragraphs": [{"context": context, "qas": qas}]})
    return {"version": SQUAD_VERSION.lstrip("v"), "data": articles}


if SMOKE:
    DATA_DIR = os.path.join(WORK_DIR, "data")
    os.makedirs(DATA_DIR, exist_ok=True)
    rng = random.Random(0)
    for split, path, count in (("train", WIKITEXT_TRAIN_FILE, 40),
                               ("dev", WIKITEXT_HELDOUT_FILE, 12)):
        chosen = bundled_contexts(path)[:count]
        with open(os.path.join(DATA_DIR, f"{split}-{SQUAD_VERSION}.json"), "w",
                  encoding="utf-8") as f:
            json.dump(smoke_squad(chosen, SQUAD_VERSION == "v2.0", rng, split), f)
elif not DATA_DIR:
    DATA_DIR = os.path.join(WORK_DIR, "data")
    for split in ("train", "dev"):
        download(f"{SQUAD_URL}{split}-{SQUAD_VERSION}.json", DATA_DIR)

dev_file = os.path.join(DATA_DIR, f"dev-{SQUAD_VERSION}.json")
with open(dev_file, encoding="utf-8") as f:
    dev_dataset = json.load(f)["data"]
dev_questions = [(qa, paragraph["context"]) for article in dev_dataset
                 for paragraph in article["paragraphs"] for qa in paragraph["qas"]]
print(f"{len(dev_questions)} dev questions, e.g. {dev_questions[0][0]['question']!r} -> "
      f"{[a['text'] for a in dev_questions[0][0]['answers']]}")

# %% [markdown]
# ## Fine-tune with `keras.Model.fit`, predict the dev set
#
# `run_finetuning` follows the original `run_squad.py`: each question is packed with windows
# of its paragraph (`MAX_SEQ_LENGTH` tokens, `DOC_STRIDE` apart), a dense layer on the
# `sequence_output` gives start and end logits, and training minimises the mean of the two
# cross-entropies with AdamW (10% warm-up, then linear decay). It then predicts the dev set,
# picks the best span per question over all windows (at most 30 wordpieces; v2.0: "no answer"
# when its score beats the best span), writes `predictions.json`, `nbest_predictions.json`
# and, for v2.0, `null_odds.json` under `run/predictions/dev/`, and scores them. Same as
# `python tools/run_finetuning.py --task=squad_v1 --data_dir=... --init_model_dir=...
# --output_dir=...`.

# %%
from bert_keras.finetuning import run_finetuning

run_dir = os.path.join(WORK_DIR, "run")
result = run_finetuning(
    TASK, DATA_DIR, INIT_MODEL_DIR, run_dir, strategy=strategy, dtype=DTYPE,
    steps_per_execution=STEPS_PER_EXECUTION, learning_rate=LEARNING_RATE,
    train_batch_size=TRAIN_BATCH_SIZE, num_train_epochs=NUM_TRAIN_EPOCHS,
    max_seq_length=MAX_SEQ_LENGTH, doc_stride=DOC_STRIDE, verbose=2)
print("training loss per epoch:", [round(loss, 4) for loss in result.train_loss])
prediction_dir = os.path.join(run_dir, "predictions", "dev")
print(sorted(os.listdir(prediction_dir)))

# %% [markdown]
# ## Evaluate
#
# The official scripts' definitions (`bert_keras.metrics.squad_eval`): answers are compared
# after lower-casing and removing punctuation, articles and extra spaces; exact match and
# token-overlap F1 take the best gold answer. For v2.0 a question counts as "no answer" when
# its `null_odds` is above a threshold; the best threshold on dev is reported too (and stored
# in the fine-tuned model for the export below). The official script gives the same numbers:
#
#     python evaluate-v2.0.py dev-v2.0.json run/predictions/dev/predictions.json \
#         --na-prob-file run/predictions/dev/null_odds.json
#
# `exact` and `f1` are those `run_finetuning` reported. For v2.0 its `best_f1` can be higher
# than the script's: it searches the threshold over each question's best non-empty answer,
# while the script only sees `predictions.json`, already cut at threshold 0.
#
# BERT-Base in the paper: v1.1 dev EM 80.8, F1 88.5 (Table 2).

# %%
from bert_keras.metrics import squad_eval

with open(os.path.join(prediction_dir, "predictions.json"), encoding="utf-8") as f:
    predictions = json.load(f)
if SQUAD_VERSION == "v1.1":
    scores = squad_eval.evaluate_v1(dev_dataset, predictions)
else:
    with open(os.path.join(prediction_dir, "null_odds.json"), encoding="utf-8") as f:
        null_odds = json.load(f)
    scores = squad_eval.evaluate_v2(dev_dataset, predictions, null_odds)
print(json.dumps(scores, indent=2))
print("run_finetuning reported:", json.dumps(result.metrics["dev"]))
for qa, _ in dev_questions[:5]:
    print(f"{qa['question']!r}\n    predicted {predictions[qa['id']]!r}, "
          f"gold {[a['text'] for a in qa['answers']] or ['(no answer)']}")

# %% [markdown]
# ## Export a raw-text question-answering model and ask it
#
# One SavedModel with the tokenizer, the encoder, the span head and the post-processing: its
# `serving_default` signature takes `question` and `context` strings and returns
# `answer_text`, `answer_start` / `answer_end` (character offsets into the context),
# `score`, and for v2.0 `has_answer` and `null_odds`. It loads with TensorFlow and
# tensorflow-text alone. Same as `python tools/export_savedmodel.py --kind=task
# --model_dir=run --export_dir=...`.
#
# The check below compares its answers on the dev set with the Python post-processing above
# (the best non-empty span of `nbest_predictions.json`): the same windows, logits and rules.

# %%
import numpy as np
import tensorflow_text  # noqa: F401  (registers the tokenizer ops before the load)

from bert_keras.export import export_from_model_dir

qa_dir = os.path.join(WORK_DIR, "export", "question_answering")
export_from_model_dir("task", run_dir, qa_dir)
answer = tf.saved_model.load(qa_dir).signatures["serving_default"]

outputs = {}
for start in range(0, len(dev_questions), 64):
    chunk = dev_questions[start:start + 64]
    batch = answer(question=tf.constant([qa["question"] for qa, _ in chunk]),
                   context=tf.constant([context for _, context in chunk]))
    for name, value in batch.items():
        outputs.setdefault(name, []).append(value.numpy())
outputs = {name: np.concatenate(values) for name, values in outputs.items()}

with open(os.path.join(prediction_dir, "nbest_predictions.json"), encoding="utf-8") as f:
    nbest = json.load(f)
agree = []
for index, (qa, context) in enumerate(dev_questions):
    text = outputs["answer_text"][index].decode()
    begin, end = int(outputs["answer_start"][index]), int(outputs["answer_end"][index])
    if begin >= 0 and context[begin:end] != text:
        raise AssertionError(f"{qa['id']}: answer {text!r} is not context[{begin}:{end}]")
    best_span = next((entry["text"] for entry in nbest[qa["id"]] if entry["text"]), "")
    if "has_answer" not in outputs or outputs["has_answer"][index]:
        agree.append(squad_eval.normalize_answer(text) == squad_eval.normalize_answer(best_span))
same_answers = float(np.mean(agree)) if agree else 1.0
print(f"exported model vs Python post-processing: same answer for {same_answers:.0%} of "
      f"{len(agree)} answered dev questions")

question = "What is the lobster a species of ?"
context = ("Homarus gammarus , known as the European lobster or common lobster , is a species "
           "of clawed lobster from the eastern Atlantic Ocean , Mediterranean Sea and parts of "
           "the Black Sea .")
reply = answer(question=tf.constant([question]), context=tf.constant([context]))
print(question, "->", repr(reply["answer_text"][0].numpy().decode()),
      "score", float(reply["score"][0]))

# %% [markdown]
# ## Summary
#
# Written to `WORK_DIR/summary.json`. Keep `run/` (the fine-tuned model directory) and
# `export/question_answering/` (the SavedModel): copy them to Drive or a bucket before the
# runtime goes away.

# %%
summary = {
    "accelerator": ACCELERATOR,
    "backend": keras.backend.backend(),
    "smoke": SMOKE,
    "squad_version": SQUAD_VERSION,
    "task": TASK,
    "data_dir": os.path.abspath(DATA_DIR),
    "run_dir": os.path.abspath(run_dir),
    "qa_dir": os.path.abspath(qa_dir),
    "scores": scores,
    "reported_metrics": result.metrics,
    "train_loss": result.train_loss,
    "exported_same_answer_fraction": same_answers,
    "example": {"question": question, "answer": reply["answer_text"][0].numpy().decode()},
}
with open(os.path.join(WORK_DIR, "summary.json"), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=2)
print(json.dumps({key: summary[key] for key in ("task", "scores", "train_loss")}, indent=2))
