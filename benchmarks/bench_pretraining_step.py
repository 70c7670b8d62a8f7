"""Pre-training step (masked LM + next sentence): bert_keras against keras-hub and PyTorch+HF.

One step = forward with dropout, MLM loss on 20 masked positions per sequence + NSP loss,
backward, AdamW update. `ours` and keras-hub run the same `tf.function` step over a Keras model
(the masked LM head gathers the 20 positions before the vocabulary projection); keras-hub gets its
`MaskedLMHead` and a 2-way dense layer on its pooled output for NSP. PyTorch runs
`BertForPreTraining`, whose head projects every position (its design), with `torch.optim.AdamW`.
`ours_no_attention_dropout` is `ours` with attention dropout 0, and `ours_fused` that model with
`attention_implementation="fused"` (cuDNN flash attention on the JAX backend on a GPU); the
other dropout stays. `ours_trainer` is what `run_pretraining.py` runs: the package's step
function, with clipping and the package's AdamW. Precisions: float32, and mixed bfloat16
(Keras `mixed_bfloat16`; PyTorch `torch.autocast` bf16).
Contenders run interleaved, median of the rounds; ratio = peer time / our time, and
`rounds_vs_<peer>` the lower and upper quartiles of the per-round ratios (how far one run's ratio
can be trusted).

    python benchmarks/bench_pretraining_step.py                  # small (batch 32) and base (batch 8)
    python benchmarks/bench_pretraining_step.py --models=small:16 --rounds=5
    python benchmarks/bench_pretraining_step.py --models=small:16:512  # PRESET:BATCH[:SEQ]

On a GPU the Keras contenders run on the JAX backend, which compiles the step with XLA, and
PyTorch on CUDA; `--peak_tflops` adds model FLOPs utilization, `--profile_dir` a kernel profile:

    KERAS_BACKEND=jax python benchmarks/bench_pretraining_step.py --models=base:128,large:128 \
        --precisions=bfloat16 --steps_per_round=10 --peak_tflops=989 --name=pretraining_step_gpu

Writes benchmarks/results/pretraining_step_<machine class>.json (the run --name).
"""

import argparse
import dataclasses
import glob
import os
import sys

import numpy as np

# JAX takes 75% of the GPU's memory at its start by default; PyTorch, interleaved, needs its share.
os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.55")

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


def losses(mlm_logits, nsp_logits, batch):
    """Mean masked-LM cross-entropy + mean next-sentence cross-entropy, in float32."""
    import keras
    ops = keras.ops
    mlm = ops.mean(ops.sparse_categorical_crossentropy(
        batch["masked_lm_ids"], ops.cast(mlm_logits, "float32"), from_logits=True))
    nsp = ops.mean(ops.sparse_categorical_crossentropy(
        batch["next_sentence_labels"], ops.cast(nsp_logits, "float32"), from_logits=True))
    return mlm + nsp


def keras_train_step(model, model_inputs, model_outputs, jit_compile=False):
    """One compiled step of a Keras model on the active backend (TensorFlow or JAX).

    `model_inputs(batch)` -> what the model is called with; `model_outputs(outputs)` ->
    (mlm_logits [b,P,V], nsp_logits [b,2]). TensorFlow: a `tf.function` (XLA when
    `jit_compile`); JAX: `jax.jit` over `stateless_call` (always XLA). Returns prepare(batch) ->
    a zero-argument callable that runs one step to completion and returns the loss.
    """
    import keras
    optimizer = keras.optimizers.AdamW(learning_rate=1e-4, weight_decay=0.01)
    optimizer.build(model.trainable_variables)
    if keras.backend.backend() == "jax":
        return _jax_train_step(model, model_inputs, model_outputs, optimizer)
    import tensorflow as tf
    variables = model.trainable_variables

    @tf.function(jit_compile=jit_compile)
    def step(batch):
        with tf.GradientTape() as tape:
            loss = losses(*model_outputs(model(model_inputs(batch), training=True)), batch)
        optimizer.apply(tape.gradient(loss, variables), variables)
        return loss

    def prepare(batch):
        tensors = {k: tf.constant(v) for k, v in batch.items()}
        return lambda: float(step(tensors))
    return prepare


def _jax_train_step(model, model_inputs, model_outputs, optimizer):
    import functools

    import jax

    def loss_fn(trainable, non_trainable, batch):
        outputs, non_trainable = model.stateless_call(trainable, non_trainable,
                                                      model_inputs(batch), training=True)
        return losses(*model_outputs(outputs), batch), non_trainable

    @functools.partial(jax.jit, donate_argnums=0)  # the old weights' buffers take the new ones
    def step(state, batch):
        trainable, non_trainable, optimizer_state = state
        (loss, non_trainable), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            trainable, non_trainable, batch)
        trainable, optimizer_state = optimizer.stateless_apply(optimizer_state, grads, trainable)
        return loss, (trainable, non_trainable, optimizer_state)

    state = [[v.value for v in model.trainable_variables],
             [v.value for v in model.non_trainable_variables],
             [v.value for v in optimizer.variables]]

    def prepare(batch):
        arrays = {k: jax.device_put(v) for k, v in batch.items()}

        def run():
            loss, new_state = step(tuple(state), arrays)
            state[:] = new_state
            return float(loss)
        # What JAX emits for the step: cuDNN's fused attention is a custom call named so.
        run.cudnn_attention = "cudnn$fmha" in step.lower(tuple(state), arrays).as_text()
        return run
    return prepare


def ours(config, policy, jit_compile=False, attention_implementation="softmax"):
    from bert_keras.model.pretraining_model import build_pretraining_model
    model = build_pretraining_model(config, dtype=policy,
                                    attention_implementation=attention_implementation)
    names = ("input_word_ids", "input_mask", "input_type_ids", "masked_lm_positions")
    return keras_train_step(
        model, lambda batch: {k: batch[k] for k in names},
        lambda outputs: (outputs["mlm_logits"], outputs["next_sentence_logits"]), jit_compile)


def ours_trainer(config, policy, jit_compile=False):
    """Our package's own step, as `run_pretraining.py` runs it (TensorFlow backend only):
    `make_train_function` under the default strategy, i.e. `strategy.run`, the summed losses,
    clipping to a global norm of 1.0 and the package's AdamW (one XLA loop on the large
    variables), one step per call."""
    import tensorflow as tf
    from bert_keras.pretraining.run import PretrainingOptions
    from bert_keras.pretraining.step import build_training_state, make_train_function
    options = PretrainingOptions(mixed_precision=policy, learning_rate=1e-4,
                                 num_train_steps=100000, num_warmup_steps=100)
    state = build_training_state(config, tf.distribute.get_strategy(), options)
    train_steps = make_train_function(state, jit_compile=jit_compile)

    def prepare(batch):
        records = {"input_ids": batch["input_word_ids"], "input_mask": batch["input_mask"],
                   "segment_ids": batch["input_type_ids"],
                   "masked_lm_positions": batch["masked_lm_positions"],
                   "masked_lm_ids": batch["masked_lm_ids"],
                   "masked_lm_weights": np.ones(batch["masked_lm_ids"].shape, np.float32),
                   "next_sentence_labels": batch["next_sentence_labels"]}
        iterator = iter(tf.data.Dataset.from_tensors(records).repeat())
        one = tf.constant(1)
        return lambda: float(train_steps(iterator, one)["loss"])
    return prepare


def keras_hub_peer(config, policy, jit_compile=False):
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
    return keras_train_step(
        model, lambda batch: {"token_ids": batch["input_word_ids"],
                              "segment_ids": batch["input_type_ids"],
                              "padding_mask": batch["input_mask"] > 0,
                              "mask_positions": batch["masked_lm_positions"]},
        lambda outputs: tuple(outputs), jit_compile)


def hf_peer(config, precision):
    """`BertForPreTraining` with `torch.optim.AdamW`, on the GPU when PyTorch sees one."""
    import torch
    import transformers
    device = "cuda" if torch.cuda.is_available() else "cpu"
    hf_config = transformers.BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_hidden_layers=config.num_hidden_layers, num_attention_heads=config.num_attention_heads,
        intermediate_size=config.intermediate_size, hidden_act=config.hidden_act,
        max_position_embeddings=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, layer_norm_eps=config.layer_norm_eps)
    model = transformers.BertForPreTraining(hf_config).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)

    def prepare(batch):
        def tensor(name):
            return torch.from_numpy(batch[name].astype(np.int64)).to(device)
        ids = tensor("input_word_ids")
        labels = torch.full_like(ids, -100)  # only the masked positions count
        labels.scatter_(1, tensor("masked_lm_positions"), tensor("masked_lm_ids"))
        kwargs = dict(input_ids=ids, attention_mask=tensor("input_mask"),
                      token_type_ids=tensor("input_type_ids"), labels=labels,
                      next_sentence_label=tensor("next_sentence_labels"))

        def run():
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bfloat16"):
                loss = model(**kwargs).loss
            loss.backward()
            optimizer.step()
            return float(loss)
        return run
    return prepare


def train_flops_per_step(config, batch_size, seq_length, num_predictions=NUM_PREDICTIONS):
    """Model FLOPs of one training step (forward + backward = 3 x forward matmul FLOPs).

    Per sequence, per layer: Q, K, V and output projections 8*S*H^2, feed-forward 4*S*H*I,
    attention scores and context 4*S^2*H; then the pooler and next-sentence layer 2*H^2 + 4*H,
    and the masked-LM head on its P gathered positions 2*P*H^2 + 2*P*H*V. Lookups, norms,
    softmax and elementwise work are not counted (the usual convention for MFU).
    """
    s, h, i, v, p = (seq_length, config.hidden_size, config.intermediate_size, config.vocab_size,
                     num_predictions)
    per_layer = 8 * s * h * h + 4 * s * h * i + 4 * s * s * h
    forward = (config.num_hidden_layers * per_layer + 2 * h * h + 4 * h
               + 2 * p * h * h + 2 * p * h * v)
    return 3 * batch_size * forward


def matmul_tflops(precision, n=8192, repeats=10):
    """This accelerator's measured rate on one n x n x n matmul (JAX backend only), TFLOP/s."""
    import time
    import jax
    import jax.numpy as jnp
    dtype = jnp.bfloat16 if precision == "bfloat16" else jnp.float32
    a = jax.random.normal(jax.random.key(0), (n, n), dtype)
    matmul = jax.jit(lambda x: x @ x)
    matmul(a).block_until_ready()
    start = time.perf_counter()
    for _ in range(repeats):
        out = matmul(a)
    out.block_until_ready()
    return 2 * n ** 3 * repeats / (time.perf_counter() - start) / 1e12


def trace_gpu_kernels(run, trace_dir, steps):
    """Calls `run` (`steps` steps) under the JAX profiler; returns the trace's path and
    {kernel name: [microseconds per step, count]}.

    Reads the Perfetto trace that `jax.profiler.trace` writes: the complete events ("ph": "X")
    of the processes whose name says GPU are the kernels.
    """
    import gzip
    import json
    import jax
    with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
        run()
    path = sorted(glob.glob(os.path.join(trace_dir, "**", "*perfetto_trace.json.gz"),
                            recursive=True))[-1]
    with gzip.open(path, "rt", encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    gpu_pids = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
                and "gpu" in str(e.get("args", {}).get("name", "")).lower()}
    kernels = {}
    for event in events:
        if event.get("ph") == "X" and event.get("pid") in gpu_pids:
            entry = kernels.setdefault(event["name"], [0.0, 0])
            entry[0] += event.get("dur", 0) / steps
            entry[1] += 1
    return path, kernels


def print_kernels(name, kernels, top=40):
    total = sum(v[0] for v in kernels.values())
    print(f"{name}: {total / 1000:.1f} ms of kernels per step, {len(kernels)} kinds")
    for kernel, (us, count) in sorted(kernels.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"  {us / 1000:8.3f} ms {100 * us / total:5.1f}% x{count:<5} {kernel[:90]}")


def main(argv=None):
    import keras
    from bert_keras.model.config import BertConfig
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="small:32,base:8",
                        help="PRESET:BATCH or PRESET:BATCH:SEQ (default seq: --seq_length), "
                             "comma separated")
    parser.add_argument("--precisions", default="float32,bfloat16")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--contenders", default="ours,ours_trainer,keras_hub,hf_torch",
                        help="ours: our model in the same generic step as keras-hub's (Keras "
                             "AdamW); ours_no_attention_dropout, ours_fused: the same with "
                             "attention dropout 0, softmax or fused attention; ours_trainer: the "
                             "package's own training step")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps_per_round", type=int, default=1,
                        help="steps timed together per round (more for fast accelerators)")
    parser.add_argument("--jit_compile", action="store_true",
                        help="TensorFlow backend: compile the step with XLA (JAX always does)")
    parser.add_argument("--peak_tflops", type=float, default=None,
                        help="the accelerator's peak dense TFLOP/s of the bf16 (or float32) "
                             "precision; adds model FLOPs utilization (MFU) columns")
    parser.add_argument("--no_dropout", action="store_true",
                        help="all dropout rates 0 (to see what dropout's random numbers cost)")
    parser.add_argument("--profile_dir", default=None,
                        help="JAX backend: trace a few steps of each Keras contender there and "
                             "print GPU kernel times")
    parser.add_argument("--name", default="pretraining_step")
    args = parser.parse_args(argv)
    wanted = args.contenders.split(",")
    load_start = bench_common.load_average()
    rows, measured_peaks = [], {}
    for item in args.models.split(","):
        preset, batch_size, seq_length = (item.split(":") + [args.seq_length])[:3]
        seq_length = int(seq_length)
        config = BertConfig.from_preset(preset)
        if args.no_dropout:
            config = dataclasses.replace(config, hidden_dropout_prob=0.0,
                                         attention_probs_dropout_prob=0.0)
        no_attention_dropout = dataclasses.replace(config, attention_probs_dropout_prob=0.0)
        batch = make_batch(config, int(batch_size), seq_length)
        flops = train_flops_per_step(config, int(batch_size), seq_length)
        for precision in args.precisions.split(","):
            policy = "mixed_bfloat16" if precision == "bfloat16" else "float32"
            if keras.backend.backend() == "jax" and precision not in measured_peaks:
                measured_peaks[precision] = matmul_tflops(precision)
            prepares = {}
            if "ours" in wanted:
                prepares["ours"] = ours(config, policy, args.jit_compile)
            if "ours_no_attention_dropout" in wanted:
                prepares["ours_no_attention_dropout"] = ours(no_attention_dropout, policy,
                                                             args.jit_compile)
            if "ours_fused" in wanted:
                prepares["ours_fused"] = ours(no_attention_dropout, policy, args.jit_compile,
                                              attention_implementation="fused")
            if "ours_trainer" in wanted and keras.backend.backend() == "tensorflow":
                prepares["ours_trainer"] = ours_trainer(config, policy, args.jit_compile)
            if "keras_hub" in wanted:
                try:
                    prepares["keras_hub"] = keras_hub_peer(config, policy, args.jit_compile)
                except ImportError as error:
                    print(f"keras-hub not available ({error})")
            if "hf_torch" in wanted:
                prepares["hf_torch"] = hf_peer(config, precision)
            contenders, cudnn_attention = {}, {}
            for name, prepare in prepares.items():
                try:  # one contender that fails (out of memory, a kernel missing) skips alone
                    run = prepare(batch)
                    run()
                except Exception as error:  # noqa: BLE001 (reported, and the row is left out)
                    print(f"{name} {preset} batch {batch_size} seq {seq_length} failed: "
                          f"{type(error).__name__}: {str(error)[:2000]}", flush=True)
                    continue
                if hasattr(run, "cudnn_attention"):
                    cudnn_attention[name] = run.cudnn_attention
                contenders[name] = (lambda run: lambda: [run() for _ in
                                                          range(args.steps_per_round)])(run)
            times = bench_common.interleaved_timings(contenders, args.rounds, warmup=2)
            kernel_ms = {}
            if args.profile_dir and keras.backend.backend() == "jax":
                for name in sorted(set(contenders) - {"hf_torch"}):
                    trace_dir = os.path.join(args.profile_dir,
                                             f"{preset}_{batch_size}_{seq_length}_{name}")
                    path, kernels = trace_gpu_kernels(contenders[name], trace_dir,
                                                      args.steps_per_round)
                    print("trace:", path)
                    print_kernels(f"{name} {preset} batch {batch_size} seq {seq_length}", kernels)
                    kernel_ms[name] = sum(us for us, _ in kernels.values()) / 1000
            medians = {name: bench_common.median(t) / args.steps_per_round
                       for name, t in times.items()}
            case_rows = []
            for name, seconds in medians.items():
                row = {"model": preset, "batch": int(batch_size), "seq_length": seq_length,
                       "precision": precision,
                       "contender": name, "median_s": seconds,
                       "seq_per_s": int(batch_size) / seconds, "times_s": times[name],
                       "model_tflops_per_s": flops / seconds / 1e12}
                if name in kernel_ms:
                    row["gpu_kernel_ms_per_step"] = kernel_ms[name]
                if name in cudnn_attention:
                    row["cudnn_attention"] = cudnn_attention[name]
                if args.peak_tflops:
                    row["mfu"] = row["model_tflops_per_s"] / args.peak_tflops
                if name.startswith("ours"):
                    for peer in PEERS:
                        if peer in medians:
                            row[f"ratio_vs_{peer}"] = medians[peer] / seconds
                            low, _, high = bench_common.round_ratios(times[peer], times[name])
                            row[f"ratio_vs_{peer}_quartiles"] = [low, high]
                            row[f"rounds_vs_{peer}"] = f"{low:.2f}-{high:.2f}"
                case_rows.append(row)
            bench_common.print_table(case_rows, COLUMNS)
            print(flush=True)
            rows.extend(case_rows)
            # Written after every case, so that a case that fails (out of memory, say) keeps
            # the ones before it.
            path = bench_common.write_results(args.name, {
                "benchmark": "pretraining_step", "seq_length": args.seq_length,
                "num_predictions": NUM_PREDICTIONS, "load_average_start": load_start,
                "keras_backend": keras.backend.backend(), "peak_tflops": args.peak_tflops,
                "measured_matmul_tflops": measured_peaks or None,
                "command": "python benchmarks/bench_pretraining_step.py "
                + " ".join(argv if argv is not None else sys.argv[1:]), "rows": rows})
            del prepares, contenders
            free_accelerator_memory()
    print("Summary (ratio = peer time / our time; target >= 1.3):")
    bench_common.print_table(rows, COLUMNS)
    print("wrote", path)


def free_accelerator_memory():
    """Drops the last case's models and compiled steps before the next case is built."""
    import gc
    import keras
    keras.backend.clear_session()
    gc.collect()
    if keras.backend.backend() == "jax":
        import jax
        jax.clear_caches()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


COLUMNS = ["model", "batch", "seq_length", "precision", "contender", "median_s", "seq_per_s",
           "model_tflops_per_s", "mfu", "gpu_kernel_ms_per_step", "cudnn_attention",
           "ratio_vs_keras_hub", "rounds_vs_keras_hub", "ratio_vs_hf_torch", "rounds_vs_hf_torch"]

if __name__ == "__main__":
    main()
