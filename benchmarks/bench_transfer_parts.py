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

It also reports how each side's layers spread their attention over the task's dev sentences
(before any fine-tuning): per layer, the entropy of each query's attention relative to a uniform
spread over the sentence's real tokens (1: uniform), and the shares on the token itself, on its
two neighbours and on [CLS] and [SEP], averaged over heads and real tokens.

Usage (the main job's task and fine-tuning settings by default):

    python benchmarks/bench_transfer_parts.py --model_dir=bert_keras_work/model \
        [--sides=pretrained,random_init,embeddings_only,layers_only,reinit_top] \
        [--task_dir=bert_keras/data/sst2] [--output_name=transfer_parts]

Writes the run <output_name> into benchmarks/results/transfer_parts_<machine class>.json (each
side's selection scores, chosen setting and
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


def attention_summary(encoder, config, weights, inputs, batch_size=128):
    """[{layer, entropy, self, neighbours, cls_sep}] of `encoder` (`build_encoder(config)`)
    with `weights` on `inputs` (a task's features; one sentence each: [CLS] first, [SEP]
    last)."""
    import numpy as np

    from bert_keras.model import checkpoint_names

    variables = checkpoint_names.encoder_weight_map(encoder)
    checkpoint_names.assign_weights(variables, {name: weights[name] for name in variables})
    embeddings = encoder.get_layer("embeddings")
    heads = config.num_attention_heads
    size = config.hidden_size // heads
    totals = np.zeros((config.num_hidden_layers, 4))
    count = 0
    for start in range(0, len(inputs["input_mask"]), batch_size):
        batch = {name: value[start:start + batch_size] for name, value in inputs.items()}
        mask = batch["input_mask"].astype(bool)  # [b, s]
        # Each layer's input: the embeddings' output, then the previous layer's output.
        layer_inputs = [np.asarray(embeddings(batch["input_word_ids"], batch["input_type_ids"]))]
        layer_inputs += [np.asarray(x) for x in encoder(batch)["encoder_outputs"][:-1]]
        lengths = mask.sum(1)
        positions = np.arange(mask.shape[1])
        is_self = positions[:, None] == positions[None, :]
        is_neighbour = np.abs(positions[:, None] - positions[None, :]) == 1
        is_cls_sep = (positions[None, :] == 0) | (positions[None, :] == lengths[:, None] - 1)
        for layer, hidden in enumerate(layer_inputs):
            prefix = f"bert/encoder/layer_{layer}/attention/self/"

            def project(kind):
                values = hidden @ weights[prefix + kind + "/kernel"] + weights[prefix + kind + "/bias"]
                return values.reshape(*values.shape[:2], heads, size).transpose(0, 2, 1, 3)

            scores = project("query") @ project("key").transpose(0, 1, 3, 2) / np.sqrt(size)
            scores = np.where(mask[:, None, None, :], scores, -np.inf)
            probs = np.exp(scores - scores.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)  # [b, heads, query, key]
            entropy = -np.sum(np.where(probs > 0, probs * np.log(np.maximum(probs, 1e-30)), 0), -1)
            entropy /= np.log(np.maximum(lengths, 2))[:, None, None]
            shares = [entropy, (probs * is_self).sum(-1), (probs * is_neighbour).sum(-1),
                      (probs * is_cls_sep[:, None, None, :]).sum(-1)]
            real = mask[:, None, :]  # real query tokens
            totals[layer] += [float((share * real).sum()) / heads for share in shares]
        count += int(mask.sum())
    return [{"layer": layer, **dict(zip(("entropy", "self", "neighbours", "cls_sep"),
                                        (float(v) for v in totals[layer] / count)))}
            for layer in range(config.num_hidden_layers)]


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
    from bert_keras.model.encoder import build_encoder
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
    initial_weights = {side: mixed_weights(pretrained, random_init, config, side)
                       for side in sides}
    result = transfer.compare_initializations(task, config, initial_weights, options,
                                              state_path=args.runs_file, log=print)
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
    print("\nAttention before fine-tuning, over the dev sentences (entropy relative to uniform; "
          "shares of each token's attention):")
    dev_inputs = task.load("dev").inputs
    encoder = build_encoder(config)
    attention = {side: attention_summary(encoder, config, weights, dev_inputs)
                 for side, weights in initial_weights.items()}
    bench_common.print_table(
        [{"side": side, **{key: round(value, 3) for key, value in row.items()}}
         for side, rows_of_side in attention.items() for row in rows_of_side],
        ["side", "layer", "entropy", "self", "neighbours", "cls_sep"])
    path = bench_common.write_results(args.output_name, {
        "attention_before_finetuning": attention,
        "model_dir": os.path.abspath(args.model_dir), "args": vars(args),
        "seconds": round(time.time() - start, 1), **result})
    print("wrote", path)


if __name__ == "__main__":
    main()
