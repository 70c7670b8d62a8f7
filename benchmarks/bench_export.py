"""Seconds to export SavedModels, as a user runs it: `tools/export_savedmodel.py`, whole processes.

    python benchmarks/bench_export.py --model_dir=bert_keras_work/model \
        --task_model_dir=bert_keras_work/finetuned
    # one checkout against another (e.g. a commit before a change), interleaved round by round:
    python benchmarks/bench_export.py --model_dir=... --task_model_dir=... \
        --checkouts=before=/tmp/before_checkout,after=.

Each round runs, for every checkout in turn, one process per export kind (preprocessor, encoder,
and the raw-text task model when `--task_model_dir` is given), start-up included, and records
its wall-clock seconds, then loads the export in another new process (`tf.saved_model.load`
after importing TensorFlow and tensorflow-text, the load alone timed) and reads the size of its
`saved_model.pb`; each checkout's figure is the median of its rounds. A checkout is put
first on `PYTHONPATH`, so its `bert_keras` is the one the tool imports. The main job's export
stage makes the same three exports in one process. Writes the run --name into
benchmarks/results/export_<machine class>.json.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

from bench_common import median, print_table, write_results

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join("tools", "export_savedmodel.py")


def parse_checkouts(text):
    """"name=path,..." -> {name: absolute path}; "" -> {"this checkout": the repository}."""
    if not text:
        return {"this checkout": REPO_DIR}
    checkouts = {}
    for item in text.split(","):
        name, sep, path = item.partition("=")
        if not sep or not name or not os.path.isfile(os.path.join(path, TOOL)):
            raise SystemExit(f"--checkouts: {item!r} is not name=path of a checkout holding {TOOL}")
        checkouts[name] = os.path.abspath(path)
    return checkouts


def export_seconds(checkout, kind, model_dir, export_dir):
    """Runs the checkout's export tool once in a new process; returns its wall-clock seconds."""
    env = dict(os.environ, PYTHONPATH=checkout, TF_CPP_MIN_LOG_LEVEL="2")
    start = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, os.path.join(checkout, TOOL), f"--kind={kind}",
         f"--model_dir={model_dir}", f"--export_dir={export_dir}"],
        capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - start
    if completed.returncode != 0:
        raise SystemExit(f"{checkout}: the {kind} export failed:\n{completed.stderr[-3000:]}")
    return seconds


LOAD = ("import sys, time\nimport tensorflow as tf\nimport tensorflow_text  # noqa: F401\n"
        "start = time.perf_counter()\ntf.saved_model.load(sys.argv[1])\n"
        "print(time.perf_counter() - start)\n")


def load_seconds(export_dir):
    """Seconds of `tf.saved_model.load(export_dir)` in a new process (imports not counted)."""
    completed = subprocess.run([sys.executable, "-c", LOAD, export_dir], capture_output=True,
                               text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
                               check=False)
    if completed.returncode != 0:
        raise SystemExit(f"loading {export_dir} failed:\n{completed.stderr[-3000:]}")
    return float(completed.stdout.split()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", required=True, help="a pre-trained model directory")
    parser.add_argument("--task_model_dir", default=None, help="a fine-tuned model directory")
    parser.add_argument("--checkouts", default="", help="name=path,...; default this checkout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--name", default="export")
    args = parser.parse_args()
    checkouts = parse_checkouts(args.checkouts)
    exports = [("preprocessor", args.model_dir), ("encoder", args.model_dir)]
    if args.task_model_dir:
        exports.append(("task", args.task_model_dir))

    seconds = {name: {kind: [] for kind, _ in exports} for name in checkouts}
    loads = {name: {kind: [] for kind, _ in exports} for name in checkouts}
    graph_bytes = {name: {} for name in checkouts}
    with tempfile.TemporaryDirectory() as scratch:
        for index in range(args.rounds):
            for number, (name, checkout) in enumerate(checkouts.items()):
                for kind, model_dir in exports:
                    # A new directory for every export: none replaces (removes) an earlier one.
                    export_dir = os.path.join(scratch, f"{index}_{number}_{kind}")
                    seconds[name][kind].append(export_seconds(checkout, kind, model_dir, export_dir))
                    loads[name][kind].append(load_seconds(export_dir))
                    graph_bytes[name][kind] = os.path.getsize(
                        os.path.join(export_dir, "saved_model.pb"))
                    print(f"round {index + 1}: {name} {kind} {seconds[name][kind][-1]:.1f} s, "
                          f"load {loads[name][kind][-1]:.2f} s", flush=True)
    rows, load_rows = [], []
    for name in checkouts:
        row, load_row = {"checkout": name}, {"checkout": name}
        for kind, _ in exports:
            row[kind] = median(seconds[name][kind])
            load_row[kind] = median(loads[name][kind])
            load_row[f"{kind} pb KiB"] = graph_bytes[name][kind] // 1024
        row["all"] = sum(row[kind] for kind, _ in exports)
        rows.append(row)
        load_rows.append(load_row)
    print("export, seconds (whole process):")
    print_table(rows, ["checkout"] + [kind for kind, _ in exports] + ["all"])
    print("load, seconds (tf.saved_model.load in a new process), and saved_model.pb size:")
    print_table(load_rows, ["checkout"] + [kind for kind, _ in exports] +
                [f"{kind} pb KiB" for kind, _ in exports])
    path = write_results(args.name, {"rounds": args.rounds, "checkouts": checkouts,
                                     "exports": dict(exports), "seconds": seconds,
                                     "median_seconds": rows, "load_seconds": loads,
                                     "median_load_seconds": load_rows,
                                     "saved_model_pb_bytes": graph_bytes})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
