"""Pre-training step (masked LM + next sentence): bert_keras against keras-hub and PyTorch+HF.

One step = forward with dropout, MLM loss on 20 masked positions per sequence + NSP loss,
backward, AdamW update. bert_keras and keras-hub run a `tf.function` step over a Keras model
(the masked LM head gathers the 20 positions before the vocabulary projection); keras-hub gets its
`MaskedLMHead` and a 2-way dense layer on its pooled output for NSP. PyTorch runs
`BertForPreTraining`, whose head projects every position (its design), with `torch.optim.AdamW`.
Precisions: float32, and mixed bfloat16 (Keras `mixed_bfloat16`; PyTorch `torch.autocast` bf16).
Contenders run interleaved, median of the rounds; ratio = peer time / our time.

    python benchmarks/bench_pretraining_step.py                  # small (batch 32) and base (batch 8)
    python benchmarks/bench_pretraining_step.py --models=small --rounds=5

Writes benchmarks/results/pretraining_step.json.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402

NUM_PREDICTIONS = 20
PEERS = ("keras_hub", "hf_torch")


def make_batch(config, batch, seq, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, config.vocab_size, size=(batch, seq)).astype(np.int32)
    types = np.zeros((batch, seq), np.int32)
    types[:, seq // 2:] = 1
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq), NUM_PREDICTIONS, replace=False)
                                  for _ in range(batch)]), axis=1).astype(np.int32)
    return {"input_word_ids": ids, "input_mask": np.ones((batch, seq), np.int32),
            "input_type_ids": types, "masked_lm_positions": positions,
            "masked_lm_ids": rng.integers(1000, config.vocab_size, size=(batch, NUM_PREDICTIONS)
                                          ).astype(np.int32),
            "next_sentence_labels": rng.integers(0, 2, size=(batch,)).astype(np.int32)}


def tf_train_step(model, forward):
    """A `tf.function` step: `forward(model, batch)` -> (mlm_logits [b,P,V], nsp_logits [b,2])."""
    import keras
    import tensorflow as tf
    optimizer = keras.optimizers.AdamW(learning_rate=1e-4, weight_decay=0.01)
    variables = model.trainable_variables
    optimizer.build(variables)

    @tf.function
    def step(batch):
        with tf.GradientTape() as tape:
            mlm_logits, nsp_logits = forward(model, batch)
            mlm = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                batch["masked_lm_ids"], tf.cast(mlm_logits, tf.float32)))
            nsp = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                batch["next_sentence_labels"], tf.cast(nsp_logits, tf.float32)))
            loss = mlm + nsp
        grads = tape.gradient(loss, variables)
        optimizer.apply(grads, variables)
        return loss

    def prepare(batch):
        tensors = {k: tf.constant(v) for k, v in batch.items()}
        return lambda: float(step(tensors))
    return prepare


def ours(config, policy):
    from bert_keras.model.pretraining_model import build_pretraining_model
    model = build_pretraining_model(config, dtype=policy)

    def forward(model, batch):
        outputs = model({k: batch[k] for k in ("input_word_ids", "input_mask", "input_type_ids",
                                              "masked_lm_positions")}, training=True)
        return outputs["mlm_logits"], outputs["next_sentence_logits"]
    return tf_train_step(model, forward)


def keras_hub_peer(config, policy):
    import keras
    import keras_hub
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings, num_segments=config.type_vocab_size,
        dtype=policy)
    mlm_head = keras_hub.layers.MaskedLMHead(
        vocabulary_size=config.vocab_size, token_embedding=backbone.token_embedding,
        activation="gelu", dtype=policy)
    nsp_head = keras.layers.Dense(2, dtype=policy)
    inputs = dict(backbone.input)
    positions = keras.Input(shape=(None,), dtype="int32", name="mask_positions")
    out = backbone(inputs)
    model = keras.Model({**inputs, "mask_positions": positions},
                        [mlm_head(out["sequence_output"], mask_positions=positions),
                         nsp_head(out["pooled_output"])])

    def forward(model, batch):
        mlm, nsp = model({"token_ids": batch["input_word_ids"],
                          "segment_ids": batch["input_type_ids"],
                          "padding_mask": batch["input_mask"] > 0,
                          "mask_positions": batch["masked_lm_positions"]}, training=True)
        return mlm, nsp
    return tf_train_step(model, forward)


def hf_peer(config, precision):
    import torch
    import transformers
    hf_config = transformers.BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_hidden_layers=config.num_hidden_layers, num_attention_heads=config.num_attention_heads,
        intermediate_size=config.intermediate_size, hidden_act=config.hidden_act,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, layer_norm_eps=config.layer_norm_eps)
    model = transformers.BertForPreTraining(hf_config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)

    def prepare(batch):
        ids = torch.from_numpy(batch["input_word_ids"].astype(np.int64))
        labels = torch.full_like(ids, -100)  # only the masked positions count
        positions = torch.from_numpy(batch["masked_lm_positions"].astype(np.int64))
        labels.scatter_(1, positions, torch.from_numpy(batch["masked_lm_ids"].astype(np.int64)))
        kwargs = dict(input_ids=ids,
                      attention_mask=torch.from_numpy(batch["input_mask"].astype(np.int64)),
                      token_type_ids=torch.from_numpy(batch["input_type_ids"].astype(np.int64)),
                      labels=labels,
                      next_sentence_label=torch.from_numpy(
                          batch["next_sentence_labels"].astype(np.int64)))

        def run():
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16"):
                loss = model(**kwargs).loss
            loss.backward()
            optimizer.step()
            return float(loss)
        return run
    return prepare


def main(argv=None):
    from bert_keras.model.config import BertConfig
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="small:32,base:8", help="PRESET:BATCH, comma separated")
    parser.add_argument("--precisions", default="float32,bfloat16")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--contenders", default="ours,keras_hub,hf_torch")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--name", default="pretraining_step")
    args = parser.parse_args(argv)
    wanted = args.contenders.split(",")
    load_start = bench_common.load_average()
    rows = []
    for item in args.models.split(","):
        preset, batch_size = item.split(":")
        config = BertConfig.from_preset(preset)
        batch = make_batch(config, int(batch_size), args.seq_length)
        for precision in args.precisions.split(","):
            policy = "mixed_bfloat16" if precision == "bfloat16" else "float32"
            prepares = {}
            if "ours" in wanted:
                prepares["ours"] = ours(config, policy)
            if "keras_hub" in wanted:
                try:
                    prepares["keras_hub"] = keras_hub_peer(config, policy)
                except ImportError as error:
                    print(f"keras-hub not available ({error})")
            if "hf_torch" in wanted:
                prepares["hf_torch"] = hf_peer(config, precision)
            contenders = {name: prepare(batch) for name, prepare in prepares.items()}
            times = bench_common.interleaved_timings(contenders, args.rounds, warmup=2)
            medians = {name: bench_common.median(t) for name, t in times.items()}
            case_rows = []
            for name, seconds in medians.items():
                row = {"model": preset, "batch": int(batch_size), "precision": precision,
                       "contender": name, "median_s": seconds,
                       "seq_per_s": int(batch_size) / seconds, "times_s": times[name]}
                if name == "ours":
                    for peer in PEERS:
                        if peer in medians:
                            row[f"ratio_vs_{peer}"] = medians[peer] / seconds
                case_rows.append(row)
            bench_common.print_table(case_rows, ["model", "batch", "precision", "contender",
                                                 "median_s", "seq_per_s", "ratio_vs_keras_hub",
                                                 "ratio_vs_hf_torch"])
            print(flush=True)
            rows.extend(case_rows)
    print("Summary (ratio = peer time / our time; target >= 1.3):")
    bench_common.print_table(rows, ["model", "batch", "precision", "contender", "median_s",
                                    "seq_per_s", "ratio_vs_keras_hub", "ratio_vs_hf_torch"])
    path = bench_common.write_results(args.name, {
        "benchmark": "pretraining_step", "seq_length": args.seq_length,
        "num_predictions": NUM_PREDICTIONS, "load_average_start": load_start,
        "command": "python benchmarks/bench_pretraining_step.py "
        + " ".join(argv if argv is not None else sys.argv[1:]), "rows": rows})
    print("wrote", path)


if __name__ == "__main__":
    main()
