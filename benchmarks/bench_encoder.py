"""Encoder inference: bert_keras (Keras model and exported SavedModel) against PyTorch+HF and keras-hub.

Times one forward pass (dropout off) of randomly initialized encoders of the same shape, at equal
precision: float32, and bfloat16 (bert_keras and keras-hub under the `mixed_bfloat16` policy:
bf16 matmuls with float32 variables; PyTorch with the model cast to bfloat16, its fastest bf16
mode on CPU). Contenders run interleaved round by round; each figure is the median of the rounds.
The ratio is the best peer's time over ours (above 1: we are faster).

    python benchmarks/bench_encoder.py                       # BERT-base and L6_H384, all cases
    python benchmarks/bench_encoder.py --models=L6_H384 --cases=128x32 --rounds=5

Writes benchmarks/results/encoder_<machine class>.json (the run `encoder`; --name for another).
"""

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402

PEERS = ("hf_torch", "keras_hub")
OURS = ("ours_keras", "ours_keras_xla", "ours_savedmodel")


def model_config(name):
    from bert_keras.model.config import BertConfig
    if name == "L6_H384":  # the MiniLM shape: 6 layers, hidden 384, 12 heads
        return BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                          intermediate_size=1536)
    return BertConfig.from_preset(name)


def make_inputs(config, batch, seq, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, config.vocab_size, size=(batch, seq)).astype(np.int32)
    ids[:, 0] = 101
    types = np.zeros((batch, seq), np.int32)
    types[:, seq // 2:] = 1
    mask = np.ones((batch, seq), np.int32)
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def ours_contenders(config, precision, wanted, export_root):
    import tensorflow as tf
    from bert_keras.export import export_encoder
    from bert_keras.model import checkpoint_names
    from bert_keras.model.encoder import build_encoder
    policy = "mixed_bfloat16" if precision == "bfloat16" else "float32"
    encoder = build_encoder(config, dtype=policy)
    makers = {}
    if "ours_keras" in wanted:
        fn = tf.function(lambda inputs: encoder(inputs, training=False)["sequence_output"])
        makers["ours_keras"] = fn
    if "ours_keras_xla" in wanted:
        fn = tf.function(lambda inputs: encoder(inputs, training=False)["sequence_output"],
                         jit_compile=True)
        makers["ours_keras_xla"] = fn
    if "ours_savedmodel" in wanted:
        weights = checkpoint_names.collect_weights(checkpoint_names.encoder_weight_map(encoder))
        export_dir = os.path.join(export_root, f"encoder_{precision}")
        export_encoder(export_dir, config, weights, dtype=precision)
        loaded = tf.saved_model.load(export_dir)
        makers["ours_savedmodel"] = lambda inputs: loaded(inputs, training=False)["sequence_output"]

    def bind(fn):
        def prepare(inputs):
            tensors = {k: tf.constant(v) for k, v in inputs.items()}
            return lambda: fn(tensors).numpy()
        return prepare
    return {name: bind(fn) for name, fn in makers.items()}


def hf_contender(config, precision):
    import torch
    import transformers
    hf_config = transformers.BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_hidden_layers=config.num_hidden_layers, num_attention_heads=config.num_attention_heads,
        intermediate_size=config.intermediate_size, hidden_act=config.hidden_act,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, layer_norm_eps=config.layer_norm_eps)
    model = transformers.BertModel(hf_config, add_pooling_layer=True).eval()
    if precision == "bfloat16":
        model = model.to(torch.bfloat16)

    def prepare(inputs):
        ids = torch.from_numpy(inputs["input_word_ids"].astype(np.int64))
        mask = torch.from_numpy(inputs["input_mask"].astype(np.int64))
        types = torch.from_numpy(inputs["input_type_ids"].astype(np.int64))

        def run():
            with torch.inference_mode():
                return model(input_ids=ids, attention_mask=mask, token_type_ids=types
                             ).last_hidden_state.float().numpy()
        return run
    return prepare


def keras_hub_contender(config, precision):
    import tensorflow as tf
    import keras_hub
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size,
        dtype="mixed_bfloat16" if precision == "bfloat16" else "float32")
    fn = tf.function(lambda inputs: backbone(inputs, training=False)["sequence_output"])

    def prepare(inputs):
        tensors = {"token_ids": tf.constant(inputs["input_word_ids"]),
                   "segment_ids": tf.constant(inputs["input_type_ids"]),
                   "padding_mask": tf.constant(inputs["input_mask"].astype(bool))}
        return lambda: fn(tensors).numpy()
    return prepare


def build_contenders(config, precision, wanted, export_root):
    prepares = ours_contenders(config, precision, wanted, export_root)
    if "hf_torch" in wanted:
        prepares["hf_torch"] = hf_contender(config, precision)
    if "keras_hub" in wanted:
        try:
            prepares["keras_hub"] = keras_hub_contender(config, precision)
        except ImportError as error:
            print(f"keras-hub not available ({error}); comparing with PyTorch only")
    return prepares


def summarize(times, batch, model, precision, case):
    rows = []
    medians = {name: bench_common.median(t) for name, t in times.items()}
    peers = {n: m for n, m in medians.items() if n in PEERS}
    best_peer = min(peers, key=peers.get) if peers else None
    for name, seconds in medians.items():
        row = {"model": model, "precision": precision, "case": case, "contender": name,
               "median_s": seconds, "seq_per_s": batch / seconds,
               "times_s": times[name]}
        if best_peer and name in OURS:
            row["best_peer"] = best_peer
            row["ratio_vs_best_peer"] = peers[best_peer] / seconds
        rows.append(row)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="base,L6_H384")
    parser.add_argument("--precisions", default="float32,bfloat16")
    parser.add_argument("--cases", default="128x32,512x1,128x1", help="SEQxBATCH, comma separated")
    parser.add_argument("--contenders", default=",".join(OURS + PEERS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--name", default="encoder")
    args = parser.parse_args(argv)
    wanted = args.contenders.split(",")
    cases = [tuple(int(x) for x in case.split("x")) for case in args.cases.split(",")]
    load_start = bench_common.load_average()
    rows = []
    with tempfile.TemporaryDirectory() as export_root:
        for model in args.models.split(","):
            config = model_config(model)
            for precision in args.precisions.split(","):
                prepares = build_contenders(config, precision, wanted, export_root)
                for seq, batch in cases:
                    inputs = make_inputs(config, batch, seq)
                    contenders = {name: prepare(inputs) for name, prepare in prepares.items()}
                    # Small cases are quick: more rounds for a steadier median.
                    rounds = args.rounds if seq * batch >= 2048 else max(args.rounds, 7)
                    times = bench_common.interleaved_timings(contenders, rounds, warmup=2)
                    case_rows = summarize(times, batch, model, precision, f"seq{seq}_b{batch}")
                    rows.extend(case_rows)
                    bench_common.print_table(case_rows, ["model", "precision", "case", "contender",
                                                         "median_s", "seq_per_s", "ratio_vs_best_peer"])
                    print(flush=True)
                del prepares
    import tensorflow as tf
    import torch
    threads = {"torch_num_threads": torch.get_num_threads(),
               "tf_intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
               "tf_inter_op": tf.config.threading.get_inter_op_parallelism_threads()}
    print("Summary (ratio = best peer time / our time; target >= 1.3 at seq128 batch32):")
    bench_common.print_table(rows, ["model", "precision", "case", "contender", "median_s",
                                    "seq_per_s", "ratio_vs_best_peer"])
    path = bench_common.write_results(args.name, {
        "benchmark": "encoder_inference", "command": "python benchmarks/bench_encoder.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "load_average_start": load_start, "threads": threads, "rows": rows})
    print("wrote", path)


if __name__ == "__main__":
    main()
