"""Which parts of a pre-trained model help or hurt a fine-tuned task: the main job's comparison
run on mixes of the pre-trained and the freshly initialized weights.

The main job compares a pre-trained model with the same architecture from random
initialization. When the pre-trained side loses, this asks where the loss comes from: each side
below starts from the pre-trained weights in some parts and from the random side's weights
(the job's `--seed`, the same draw as its random side) in the others, and every side goes
through the job's fine-tuning comparison (`finetuning.transfer.compare_initializations`: the
same grid of learning rates and epochs chosen on held-out *training* rows, the same seeds):

- `pretrained`: every weight pre-trained; `random_init`: none;
- `embeddings_only`: the embeddings (words, positions, segments and their layer norm)
  pre-trained, the Transformer layers random;
- `layers_only`: the Transformer layers pre-trained, the embeddings random;
- `reinit_top`: pre-trained but the last layer drawn afresh (the re-initialization of Zhang et
  al. 2021, "Revisiting few-sample BERT fine-tuning").

Usage (the main job's task and fine-tuning settings by default):

    python benchmarks/bench_transfer_parts.py --model_dir=bert_keras_work/model \
        [--sides=pretrained,random_init,embeddings_only,layers_only,reinit_top] \
        [--task_dir=bert_keras/data/sst2] [--output_name=transfer_parts]

Writes benchmarks/results/<output_name>.json (each side's selection scores, chosen setting and
per-seed dev scores).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402

SIDES = ("pretrained", "random_init", "embeddings_only", "layers_only", "reinit_top")


def mixed_weights(pretrained, random_init, config, side):
    """{original name: array} of `side` (see the module docstring); the encoder's names only."""
    top = f"/layer_{config.num_hidden_layers - 1}/"

    def from_pretrained(name):
        if side == "pretrained":
            return True
        if side == "random_init":
            return False
        if side == "embeddings_only":
            return "/embeddings/" in name
        if side == "layers_only":
            return "/embeddings/" not in name
        if side == "reinit_top":
            return top not in name
        raise ValueError(f"unknown side {side!r}; known: {', '.join(SIDES)}")

    return {name: (pretrained[name] if from_pretrained(name) else value)
            for name, value in random_init.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_dir", required=True, help="a pre-trained model directory")
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--task", default="glue/sst2")
    parser.add_argument("--task_dir", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), os.pardir, "bert_keras", "data", "sst2"))
    parser.add_argument("--random_seed", type=int, default=12345,
                        help="seed of the random weights (the main job's --seed)")
    parser.add_argument("--max_seq_length", type=int, default=48)
    parser.add_argument("--pooling", default="mean")
    parser.add_argument("--train_examples", type=int, default=1000)
    parser.add_argument("--selection_examples", type=int, default=500)
    parser.add_argument("--learning_rates", default="1e-3,3e-3")
    parser.add_argument("--epochs", default="3,6")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--output_name", default="transfer_parts")
    parser.add_argument("--runs_file", default=None,
                        help="JSON file of the runs done so far: a rerun with the same settings "
                             "continues from it")
    args = parser.parse_args()

    from bert_keras.finetuning import transfer
    from bert_keras.finetuning.sweep import random_encoder_weights
    from bert_keras.finetuning.task import FinetuningOptions, get_task
    from bert_keras.modeldir import model_dir

    sides = [side for side in args.sides.split(",") if side]
    unknown = sorted(set(sides) - set(SIDES))
    if unknown:
        sys.exit(f"--sides: unknown {unknown}; known: {', '.join(SIDES)}")
    start = time.time()
    config = model_dir.read_config(args.model_dir)
    pretrained = model_dir.read_weights(args.model_dir)
    random_init = random_encoder_weights(config, args.random_seed)
    task = get_task(args.task, args.task_dir, args.model_dir, FinetuningOptions(
        max_seq_length=args.max_seq_length, pooling=args.pooling))
    options = transfer.TransferOptions(
        num_train_examples=args.train_examples, selection_examples=args.selection_examples,
        learning_rates=tuple(float(v) for v in args.learning_rates.split(",")),
        epochs=tuple(int(v) for v in args.epochs.split(",")),
        seeds=tuple(int(v) for v in args.seeds.split(",")),
        curve_examples=(args.train_examples,))
    result = transfer.compare_initializations(
        task, config, {side: mixed_weights(pretrained, random_init, config, side)
                       for side in sides}, options, state_path=args.runs_file, log=print)
    rows = []
    for side in sides:
        values = result["sides"][side]
        rows.append({"side": side, "lr": f"{values['chosen']['learning_rate']:g}",
                     "epochs": values["chosen"]["epochs"],
                     "per seed": " ".join(f"{score:.3f}" for score in values["dev"]),
                     "mean +- sd": f"{values['dev_mean']:.3f} +- {values['dev_std']:.3f}"})
    print(f"\n{args.task} dev {result['metric']}, {args.train_examples} labelled examples "
          f"(majority label {result['majority_share']:.3f}):")
    bench_common.print_table(rows, ["side", "lr", "epochs", "per seed", "mean +- sd"])
    path = bench_common.write_results(args.output_name, {
        "model_dir": os.path.abspath(args.model_dir), "args": vars(args),
        "seconds": round(time.time() - start, 1), **result})
    print("wrote", path)


if __name__ == "__main__":
    main()
