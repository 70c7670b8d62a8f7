"""Where the time goes: a per-op breakdown of the encoder forward pass and the pre-training step.

Runs the TensorFlow profiler around a few calls of our encoder (MiniLM shape: 6 layers, hidden
384, batch 32, seq 128) and of our pre-training step (BERT-small: 4 layers, hidden 512, batch
16, seq 128), reads the trace (`*.xplane.pb`) and sums the time of every TensorFlow op by kind:
matmuls (the dense projections and the attention's batched matmuls apart), softmax, layer norm,
GELU, transposes and reshapes, casts, gathers, bias adds, dropout, the optimizer update, other.
Op times are summed over the threads that ran them, so the shares are of the total op time.

The limit to compare with is this CPU's float32 (and bfloat16) matmul rate, measured here on one
large matmul: the model's matmul FLOPs divided by the time of its matmul ops says how close the
matmuls run to it, and the share of everything else says what fusing or removing ops can win.

Usage:

    python benchmarks/profile_ops.py [--dtype=float32|bfloat16] [--steps=5]

Writes the run default or bfloat16 into benchmarks/results/profile_ops_<machine class>.json.
"""

import argparse
import collections
import glob
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import bench_common  # noqa: E402
import numpy as np  # noqa: E402

MATMUL_TYPES = ("MatMul", "BatchMatMul", "Einsum", "Conv")


def categorize(name, op_type):
    """The kind of a traced op, from its node name and op type."""
    lower = name.lower()
    if any(t in op_type for t in MATMUL_TYPES):
        if "attention" in lower and "batchmatmul" in op_type.lower():
            return "matmul: attention scores and context"
        return "matmul: dense projections"
    if ("adam_weight_decay" in lower or "/lamb/" in lower or "clip_by_global_norm" in lower
            or op_type.startswith(("ResourceApply", "AssignSub", "AssignAdd"))):
        return "optimizer update"
    if "softmax" in op_type.lower() or "softmax" in lower:
        return "softmax (and its gradient)"
    if "layer_norm" in lower:
        return "layer norm"
    if "dropout" in lower:
        return "dropout"
    if "Transpose" in op_type or "Reshape" in op_type:
        return "transposes and reshapes"
    if op_type == "Cast":
        return "casts"
    if "Gather" in op_type or "SegmentSum" in op_type or "Scatter" in op_type:
        return "gathers (embeddings, masked positions)"
    if "intermediate" in lower and "BiasAdd" not in op_type:
        return "GELU"
    if "BiasAdd" in op_type:
        return "bias adds"
    return "other"


def trace_op_times(function, calls):
    """{(node name, op type): picoseconds} of the TensorFlow ops run by `calls` calls."""
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    logdir = tempfile.mkdtemp(prefix="profile_ops_")
    tf.profiler.experimental.start(logdir)
    for _ in range(calls):
        function()
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    with open(sorted(glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb")))[-1],
              "rb") as f:
        space.ParseFromString(f.read())
    times = collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            if not line.name.startswith("tf_Compute"):
                continue
            for event in line.events:
                label = plane.event_metadata[event.metadata_id].name
                if ":" not in label or "::" in label:
                    continue  # executor bookkeeping (it encloses the ops), not an op
                name, op_type = label.rsplit(":", 1)
                times[(name, op_type)] += event.duration_ps
    return times


def breakdown(times, calls):
    """[{"kind", "ms_per_call", "share"}], largest first, and the top op types."""
    kinds, types = collections.Counter(), collections.Counter()
    for (name, op_type), ps in times.items():
        kinds[categorize(name, op_type)] += ps
        types[op_type] += ps
    total = sum(kinds.values())
    rows = [{"kind": kind, "ms_per_call": ps / 1e9 / calls, "share": ps / total}
            for kind, ps in kinds.most_common()]
    top_types = [{"op_type": t, "ms_per_call": ps / 1e9 / calls, "share": ps / total}
                 for t, ps in types.most_common(12)]
    return rows, top_types, total / 1e9 / calls


def matmul_peak(dtype, m=4096, k=512, n=2048, repeats=5):
    """This CPU's matmul rate in GFLOP/s on one large [m, k] x [k, n] product."""
    import tensorflow as tf

    a = tf.random.normal([m, k], dtype=tf.float32)
    b = tf.random.normal([k, n], dtype=tf.float32)
    if dtype == "bfloat16":
        a, b = tf.cast(a, tf.bfloat16), tf.cast(b, tf.bfloat16)
    # Ten products per call, and one element of each back: no copy of the [m, n] result.
    product = tf.function(lambda: tf.add_n([tf.matmul(a + i, b)[0, 0] for i in range(10)]))
    product().numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        product().numpy()
        best = min(best, time.perf_counter() - start)
    return 10 * 2 * m * k * n / best / 1e9


def seconds_per_call(run, calls):
    """Mean seconds of `calls` calls of `run`, after two warm-up calls."""
    for _ in range(2):
        run()
    start = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - start) / calls


def encoder_flops(layers, hidden, intermediate, heads, batch, seq):
    tokens = batch * seq
    dense = 2 * tokens * (4 * hidden * hidden + 2 * hidden * intermediate) * layers
    attention = 2 * 2 * batch * seq * seq * hidden * layers
    return dense + attention


def profile_encoder(dtype, calls):
    import tensorflow as tf

    from bert_keras.model.config import BertConfig
    from bert_keras.model.encoder import build_encoder

    config = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                        num_attention_heads=12, intermediate_size=1536)
    encoder = build_encoder(config, dtype=None if dtype == "float32" else "mixed_bfloat16")
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, 30000, (32, 128)).astype("int32")
    inputs = {"input_word_ids": tf.constant(ids), "input_mask": tf.ones_like(ids),
              "input_type_ids": tf.zeros_like(ids)}
    forward = tf.function(lambda: encoder(inputs, training=False)["sequence_output"])
    run = lambda: forward().numpy()  # noqa: E731
    seconds = seconds_per_call(run, calls)
    flops = encoder_flops(6, 384, 1536, 12, 32, 128)
    return "encoder forward (L6 H384, batch 32, seq 128)", run, seconds, flops


def profile_pretraining_step(dtype, calls):
    import bench_pretraining_step
    from bert_keras.model.config import BertConfig

    batch, seq, predictions = 16, 128, bench_pretraining_step.NUM_PREDICTIONS
    config = BertConfig.from_preset("small", vocab_size=30522)
    # The package's own step (`make_train_function`), as the step benchmark's `ours_trainer`.
    prepare = bench_pretraining_step.ours_trainer(
        config, "float32" if dtype == "float32" else "mixed_bfloat16")
    run = prepare(bench_pretraining_step.make_batch(config, batch, seq))
    seconds = seconds_per_call(run, calls)
    # Forward and backward: about 3x the forward matmul FLOPs, plus the MLM output layer.
    flops = 3 * (encoder_flops(config.num_hidden_layers, config.hidden_size,
                               config.intermediate_size, config.num_attention_heads, batch, seq)
                 + 2 * batch * predictions * config.hidden_size * config.vocab_size)
    return "pre-training step (BERT-small L4 H512, batch 16, seq 128)", run, seconds, flops


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--output_name", default=None)
    args = parser.parse_args()
    peak = matmul_peak(args.dtype)
    print(f"machine: {bench_common.cpu_description()}; one large {args.dtype} matmul: "
          f"{peak:.0f} GFLOP/s")
    results = {"dtype": args.dtype, "matmul_peak_gflops": peak, "profiles": []}
    for build in (profile_encoder, profile_pretraining_step):
        title, run, seconds, flops = build(args.dtype, args.steps)
        times = trace_op_times(run, args.steps)
        rows, top_types, op_ms = breakdown(times, args.steps)
        matmul_ms = sum(r["ms_per_call"] for r in rows if r["kind"].startswith("matmul"))
        profile = {"what": title, "seconds_per_call": seconds, "op_ms_per_call": op_ms,
                   "model_gflop": flops / 1e9,
                   "achieved_gflops": flops / seconds / 1e9,
                   "matmul_gflops": flops / (matmul_ms / 1e3) / 1e9 if matmul_ms else None,
                   "kinds": rows, "top_op_types": top_types}
        results["profiles"].append(profile)
        print(f"\n{title}: {seconds * 1e3:.0f} ms per call, {flops / 1e9:.1f} GFLOP, "
              f"{profile['achieved_gflops']:.0f} GFLOP/s overall "
              f"({100 * profile['achieved_gflops'] / peak:.0f}% of the matmul rate); the matmul ops "
              f"alone run at {profile['matmul_gflops']:.0f} GFLOP/s")
        bench_common.print_table([{"kind": r["kind"], "ms": round(r["ms_per_call"], 1),
                                   "share": f"{100 * r['share']:.1f}%"} for r in rows],
                                 ["kind", "ms", "share"])
        bench_common.print_table([{"op_type": r["op_type"], "ms": round(r["ms_per_call"], 1),
                                   "share": f"{100 * r['share']:.1f}%"} for r in top_types],
                                 ["op_type", "ms", "share"])
    name = args.output_name or ("profile_ops" if args.dtype == "float32" else "profile_ops_bfloat16")
    print(f"wrote {bench_common.write_results(name, results)}")


if __name__ == "__main__":
    main()
