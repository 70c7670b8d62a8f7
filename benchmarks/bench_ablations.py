"""The paper's ablations in miniature: pre-training tasks (Table 5) and model size (Table 6).

One corpus, one budget of pre-training steps, several pre-trained models, each fine-tuned on
several GLUE tasks with the same fair comparison as the main job
(`bert_keras.finetuning.transfer.compare_initializations`: each model's learning rate and epochs
chosen from one grid on held-out *training* rows, then several seeds on the dev set):

- Table 5 (pre-training tasks), at the `--objective_preset` size:
  `MLM + NSP` (BERT), `No NSP` (masked LM only), `LTR & No NSP` (a left-to-right model: causal
  attention, masked LM only) and `No pre-training` (the same architecture freshly initialized);
- Table 6 (model size): `--size_presets` (e.g. tiny, mini, small) pre-trained with
  `--size_objective` (default MLM + NSP), the same number of steps, each against its own
  freshly initialized twin;
- Section 5.3 (feature-based) on the first task: the `--size_objective` encoder frozen, its last
  four layers' mean-pooled outputs concatenated into a logistic-regression classifier, against
  fine-tuning the whole model; both with their learning rate chosen on the held-out rows.

The vocabulary and the records are built once by the main job's own stages
(`bert_keras.main_job`), as are the pre-training runs (its options with the variant's changes).
Tasks are read from `--glue_dir` (GLUE's folder layout; SST-2 defaults to the bundled sample).
STS-B has no dev set in GLUE's public train-only release, so it is not offered here.

Usage:

    python benchmarks/bench_ablations.py --glue_dir=../shared/data/glue \\
        [--tasks=sst2,mrpc,rte] [--steps=800] [--objective_preset=tiny] \\
        [--size_presets=tiny,mini,small] [--seeds=1,2,3] [--work_dir=/tmp/bert_keras_ablations]

Writes benchmarks/results/ablations_<machine class>.json and prints the tables in the layout of
`docs/ablations.md`; `--plot=docs/ablations.png` draws them.
"""

import argparse
import dataclasses
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bench_common  # noqa: E402

OBJECTIVES = {  # name: overrides of the pre-training options
    "MLM + NSP": dict(next_sentence=True, left_to_right=False),
    "No NSP": dict(next_sentence=False, left_to_right=False),
    "LTR & No NSP": dict(next_sentence=False, left_to_right=True),
}
NONE = "No pre-training"
TASK_DIRS = {"sst2": "SST-2", "mrpc": "MRPC", "rte": "RTE", "cola": "CoLA"}
TASK_SEQ = {"sst2": 64, "cola": 64, "mrpc": 128, "rte": 128}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--glue_dir", required=True)
    parser.add_argument("--tasks", default="sst2,mrpc,rte")
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--train_batch_size", type=int, default=64)
    parser.add_argument("--objective_preset", default="tiny")
    parser.add_argument("--size_presets", default="tiny,mini,small")
    parser.add_argument("--size_tasks", default="",
                        help="Tasks of Table 6 (default: all of --tasks); the larger sizes "
                        "cost the most fine-tuning time.")
    parser.add_argument("--size_objective", default="MLM + NSP", choices=list(OBJECTIVES),
                        help="Pre-training tasks of Table 6 and of the feature-based run (the "
                        "paper's: MLM + NSP; the main job's: No NSP).")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--train_examples", type=int, default=2000)
    parser.add_argument("--selection_examples", type=int, default=400)
    parser.add_argument("--learning_rates", default="1e-3,3e-3")
    parser.add_argument("--epochs", default="3,6")
    from bert_keras.finetuning.task_models import POOLINGS

    parser.add_argument("--pooling", default="mean", choices=POOLINGS,
                        help="What the fine-tuned classifier reads (the main job's default: "
                        "mean; cls is the paper's pooled [CLS] output).")
    parser.add_argument("--work_dir", default="/tmp/bert_keras_ablations")
    parser.add_argument("--plot", default="")
    parser.add_argument("--output_name", default="ablations")
    return parser.parse_args(argv)


def pretrain_variants(args, job_options):
    """{(name, preset): model directory}, each pre-trained once (a rerun reuses them)."""
    from bert_keras import main_job

    base = job_options.paths()
    stages = main_job.Stages(base["stages"])
    stages.run("vocab", lambda: main_job.build_vocab_stage(job_options, base))
    stages.run("data", lambda: main_job.create_data_stage(job_options, base))
    variants = [(name, args.objective_preset) for name in OBJECTIVES]
    variants += [(args.size_objective, preset) for preset in args.size_presets.split(",")
                 if preset != args.objective_preset]
    models = {}
    for name, preset in variants:
        slug = f"{preset}_" + name.lower().replace(" & ", "_").replace(" + ", "_").replace(" ", "_")
        output = os.path.join(base["root"], "models", slug)
        if not os.path.exists(os.path.join(output, "model.safetensors")):
            options = dataclasses.replace(job_options, preset=preset)
            start = time.time()
            from bert_keras.pretraining import run as pretraining

            pretraining.run_pretraining(options.pretraining_options(output_dir=output,
                                                                    **OBJECTIVES[name]))
            print(f"pre-trained {slug} in {time.time() - start:.0f}s", flush=True)
        models[(name, preset)] = output
    return models


def heldout_mlm(job_options, model_dir, name, preset):
    from bert_keras.pretraining import run as pretraining

    base = job_options.paths()
    job_options = dataclasses.replace(job_options, preset=preset)
    results = pretraining.evaluate(job_options.pretraining_options(
        mode="eval", output_dir=model_dir,
        input_files=os.path.join(base["heldout_data"], "*.tfrecord"), **OBJECTIVES[name]))
    return {key: float(value) for key, value in results.items()
            if key in ("masked_lm_accuracy", "next_sentence_accuracy")}


def compare(args, task_name, data_dir, model_dirs, state_path):
    """`compare_initializations` of {label: model dir or None (fresh)} sharing one config."""
    from bert_keras.finetuning.sweep import FinetuningSweep, random_encoder_weights
    from bert_keras.finetuning.task import FinetuningOptions, get_task
    from bert_keras.finetuning.transfer import TransferOptions, compare_initializations
    from bert_keras.modeldir import model_dir as model_dir_lib

    reference = next(path for path in model_dirs.values() if path)
    task = get_task(f"glue/{task_name}", data_dir, reference,
                    FinetuningOptions(max_seq_length=TASK_SEQ[task_name], pooling=args.pooling))
    config = model_dir_lib.read_config(reference)
    weights = {label: (model_dir_lib.read_weights(path) if path else
                       random_encoder_weights(config, 12345))
               for label, path in model_dirs.items()}
    rows = task.load("train", training=True).num_rows
    n = min(args.train_examples, rows - args.selection_examples)
    options = TransferOptions(
        num_train_examples=n, selection_examples=args.selection_examples,
        learning_rates=tuple(float(v) for v in args.learning_rates.split(",")),
        epochs=tuple(int(v) for v in args.epochs.split(",")),
        seeds=tuple(int(v) for v in args.seeds.split(",")), curve_examples=(n,))
    sweep = FinetuningSweep(task, config, options.train_batch_size)
    result = compare_initializations(task, config, weights, options, state_path=state_path,
                                     log=None, sweep=sweep)
    return result, sweep, task, weights


def feature_based(args, sweep, task, weights, result):
    """Frozen encoder: the last four layers' mean-pooled outputs, concatenated, into a
    logistic regression (Keras, AdamW), learning rate chosen on the held-out rows."""
    import keras
    import numpy as np

    from bert_keras.finetuning.sweep import subset
    from bert_keras.model import checkpoint_names

    checkpoint_names.assign_weights(
        checkpoint_names.encoder_weight_map(sweep.model.encoder), weights, source="encoder")
    encoder = sweep.model.encoder

    def features(data):
        outputs = encoder.predict(data.inputs, batch_size=128, verbose=0)
        mask = data.inputs["input_mask"][..., None].astype("float32")
        layers = outputs["encoder_outputs"][-4:]
        return np.concatenate([(np.asarray(h) * mask).sum(1) / mask.sum(1) for h in layers], -1)

    train_all = task.load("train", training=True)
    n = result["options"]["num_train_examples"]
    selection = args.selection_examples
    x_train = features(subset(train_all, np.arange(n)))
    x_sel = features(subset(train_all, np.arange(train_all.num_rows - selection,
                                                 train_all.num_rows)))
    dev = task.load("dev")
    x_dev = features(dev)
    mean, std = x_train.mean(0), x_train.std(0) + 1e-6
    y_train = np.asarray(train_all.labels[:n])
    y_sel = np.asarray(train_all.labels[-selection:])
    best = None
    for learning_rate in (1e-3, 3e-3, 1e-2):
        scores = []
        for seed in result["options"]["seeds"]:
            keras.utils.set_random_seed(seed)
            classifier = keras.Sequential([keras.Input((x_train.shape[1],)),
                                           keras.layers.Dense(sweep.task.spec.num_labels)])
            classifier.compile(keras.optimizers.AdamW(learning_rate, weight_decay=0.01),
                               keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            classifier.fit((x_train - mean) / std, y_train, batch_size=32, epochs=20, verbose=0)
            predict = lambda x: classifier.predict((x - mean) / std, verbose=0).argmax(-1)  # noqa: E731
            scores.append((float(np.mean(predict(x_sel) == y_sel)),
                           float(np.mean(predict(x_dev) == np.asarray(dev.labels)))))
        selection_score = float(np.mean([s for s, _ in scores]))
        if best is None or selection_score > best["selection"]:
            best = {"learning_rate": learning_rate, "selection": selection_score,
                    "dev": [d for _, d in scores]}
    best["dev_mean"] = float(np.mean(best["dev"]))
    best["dev_std"] = float(np.std(best["dev"]))
    return best


def main(argv=None):
    args = parse_args(argv)
    from bert_keras import main_job
    from bert_keras.data import bundled

    job_options = main_job.MainJobOptions(
        work_dir=args.work_dir, max_seq_length=args.max_seq_length,
        max_predictions_per_seq=max(1, round(args.max_seq_length * 0.15)),
        train_batch_size=args.train_batch_size, num_train_steps=args.steps,
        save_checkpoints_steps=max(args.steps, 1), dupe_factor=5)
    start = time.time()
    models = pretrain_variants(args, job_options)
    pretraining = {f"{name} / {preset}": heldout_mlm(job_options, path, name, preset)
                   for (name, preset), path in models.items()}
    tasks = args.tasks.split(",")
    table5, table6, features = {}, {}, None
    for task_name in tasks:
        data_dir = os.path.join(args.glue_dir, TASK_DIRS[task_name])
        if task_name == "sst2" and not os.path.exists(os.path.join(data_dir, "train.tsv")):
            data_dir = bundled.SST2_DATA_DIR
        state = os.path.join(args.work_dir,
                             f"runs_{task_name}_{args.objective_preset}_{args.pooling}.json")
        dirs = {name: models[(name, args.objective_preset)] for name in OBJECTIVES}
        dirs[NONE] = None
        result, sweep, task, weights = compare(args, task_name, data_dir, dirs, state)
        table5[task_name] = {side: _summary(values) for side, values in result["sides"].items()}
        table5[task_name]["metric"] = result["metric"]
        table5[task_name]["majority"] = result["majority_share"]
        table5[task_name]["majority_score"] = majority_score(task, result["metric"])
        print(f"{task_name}: " + ", ".join(f"{side} {values['dev_mean']:.3f}"
                                         for side, values in result["sides"].items()), flush=True)
        if task_name == tasks[0]:
            features = feature_based(args, sweep, task, weights[args.size_objective], result)
            features["fine_tuning"] = table5[task_name][args.size_objective]
            features["objective"] = args.size_objective
        for preset in args.size_presets.split(","):
            if args.size_tasks and task_name not in args.size_tasks.split(","):
                continue
            if preset == args.objective_preset:
                table6.setdefault(preset, {})[task_name] = {
                    "pre-trained": table5[task_name][args.size_objective],
                    "random init": table5[task_name][NONE]}
                continue
            state = os.path.join(args.work_dir, f"runs_{task_name}_{preset}_{args.pooling}.json")
            result, _, _, _ = compare(args, task_name, data_dir,
                                      {"pre-trained": models[(args.size_objective, preset)],
                                       "random init": None}, state)
            table6.setdefault(preset, {})[task_name] = {
                side: _summary(values) for side, values in result["sides"].items()}
            print(f"{task_name} {preset}: " + ", ".join(
                f"{side} {values['dev_mean']:.3f}" for side, values in result["sides"].items()),
                flush=True)
    payload = {"machine": bench_common.cpu_description(), "versions": bench_common.versions(),
               "settings": vars(args), "seconds": round(time.time() - start, 1),
               "pretraining_heldout": pretraining, "table5": table5, "table6": table6,
               "feature_based": features}
    bench_common.write_results(args.output_name, payload)
    print(markdown(payload))
    if args.plot:
        plot(payload, args.plot)


def majority_score(task, metric):
    """The task's metric for always answering the dev set's most frequent label (accuracy:
    its share; F1: the F1 of that answer; Matthews correlation: 0)."""
    import numpy as np

    from bert_keras.finetuning.glue import data as glue

    labels = np.asarray(task.load("dev").labels)
    values, counts = np.unique(labels, return_counts=True)
    predictions = np.full_like(labels, values[np.argmax(counts)])
    return float(glue.compute_metrics(task.spec.name, predictions, labels)[metric])


def _summary(values):
    return {"mean": values["dev_mean"], "std": values["dev_std"], "dev": values["dev"],
            "chosen": values["chosen"]}


def _cell(value):
    return f"{value['mean'] * 100:.1f} ± {value['std'] * 100:.1f}"


def markdown(payload):
    """The tables of docs/ablations.md (mean ± standard deviation over seeds, in points)."""
    table5, table6 = payload["table5"], payload["table6"]
    tasks = list(table5)
    lines = ["| pre-training tasks | " + " | ".join(
        f"{task} ({table5[task]['metric']})" for task in tasks) + " |",
        "|---|" + "---|" * len(tasks)]
    for side in list(OBJECTIVES) + [NONE]:
        lines.append(f"| {side} | " + " | ".join(_cell(table5[task][side]) for task in tasks) + " |")
    lines.append("| majority label | " + " | ".join(
        f"{table5[task].get('majority_score', table5[task]['majority']) * 100:.1f}"
        for task in tasks) + " |")
    lines += ["", "| size | " + " | ".join(f"{task}: pre-trained / random init" for task in tasks)
              + " |", "|---|" + "---|" * len(tasks)]
    for preset, per_task in table6.items():
        lines.append(f"| {preset} | " + " | ".join(
            f"{_cell(per_task[task]['pre-trained'])} / {_cell(per_task[task]['random init'])}"
            if task in per_task else "not run" for task in tasks) + " |")
    features = payload.get("feature_based")
    if features:
        lines += ["", f"Feature-based ({tasks[0]}): frozen encoder, last four layers "
                  f"concatenated, {features['dev_mean'] * 100:.1f} ± {features['dev_std'] * 100:.1f}"
                  f" against fine-tuning {_cell(features['fine_tuning'])}"]
    return "\n".join(lines)


def plot(payload, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

    table5 = payload["table5"]
    tasks = list(table5)
    sides = list(OBJECTIVES) + [NONE]
    figure, axes = plt.subplots(figsize=(7, 3.6), dpi=120)
    width = 0.8 / len(sides)
    for index, side in enumerate(sides):
        xs = [t + index * width for t in range(len(tasks))]
        axes.bar(xs, [table5[task][side]["mean"] for task in tasks], width,
                 yerr=[table5[task][side]["std"] for task in tasks], capsize=3, label=side)
    for t, task in enumerate(tasks):
        axes.hlines(table5[task].get("majority_score", table5[task]["majority"]),
                    t - width / 2, t + 0.8 - width / 2,
                    colors="grey", linestyles=":")
    axes.set_xticks([t + 0.4 - width / 2 for t in range(len(tasks))])
    axes.set_xticklabels([f"{task} ({table5[task]['metric']})" for task in tasks])
    lowest = min(min(table5[task][side]["mean"] for side in sides)
                 for task in tasks)
    axes.set_ylim(bottom=min(0.0, lowest - 0.1))
    axes.set_ylabel("dev score (dotted: majority label)")
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


if __name__ == "__main__":
    main()
