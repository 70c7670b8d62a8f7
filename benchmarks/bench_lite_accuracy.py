"""The lite export with int8 weights against float32: GLUE dev scores and batch-1 latency.

For each fine-tuned GLUE model directory (`tools/run_finetuning.py` writes one) this exports
the raw-text task SavedModel (`--kind=task`, float32: the reference) and the lite export in
float32 and in int8 (`--kind=lite --dtype=int8`: dynamic-range quantized weights), predicts
the task's whole dev split with each, and reports the task's metrics, the share of
predictions equal to the SavedModel's, the largest logit difference, the size of
`model.tflite`, and the median milliseconds of a one-text (or one-pair) request for the two
lite exports (every dev example one request at a time, the two exports alternating).

    python benchmarks/bench_lite_accuracy.py \
        --model_dirs=glue/mrpc=runs/mrpc,glue/sst2=runs/sst2 --glue_dir=data/glue

`--glue_dir` holds one folder per task with the official `dev.tsv` (MRPC/, SST-2/, ...).
Writes benchmarks/results/lite_accuracy_<machine class>.json.
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402

# GLUE task name -> its folder in --glue_dir.
FOLDERS = {"cola": "CoLA", "sst2": "SST-2", "mrpc": "MRPC", "stsb": "STS-B", "qqp": "QQP",
           "mnli": "MNLI", "qnli": "QNLI", "rte": "RTE", "wnli": "WNLI"}


def evaluate(task, model_dir, glue_dir, root):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from bert_keras.export import export_from_model_dir
    from bert_keras.export.lite import LiteModel
    from bert_keras.finetuning.glue.data import (compute_metrics, examples_to_arrays,
                                                 read_glue_examples)

    name = task.split("/")[-1]
    examples = read_glue_examples(name, os.path.join(glue_dir, FOLDERS[name]), "dev")
    arrays = examples_to_arrays(examples, name)
    pair = "text_b" in arrays
    paths = {kind: os.path.join(root, f"{name}_{kind}") for kind in ("task", "float32", "int8")}
    export_from_model_dir("task", model_dir, paths["task"])
    for dtype in ("float32", "int8"):
        export_from_model_dir("lite", model_dir, paths[dtype], dtype=dtype)

    serve = tf.saved_model.load(paths["task"]).signatures["serving_default"]
    reference = []
    for start in range(0, len(examples), 32):
        inputs = {key: tf.constant(list(arrays[key][start:start + 32]), tf.string)
                  for key in ("text_a", "text_b") if key in arrays}
        reference.append(serve(**inputs)["logits"].numpy())
    reference = np.concatenate(reference)

    models = {dtype: LiteModel(paths[dtype]) for dtype in ("float32", "int8")}
    logits = {dtype: [] for dtype in models}
    seconds = {dtype: [] for dtype in models}
    for index in range(len(examples)):
        texts = [arrays["text_a"][index]] + ([arrays["text_b"][index]] if pair else [])
        for dtype in (("float32", "int8") if index % 2 else ("int8", "float32")):
            start = time.perf_counter()
            logits[dtype].append(models[dtype](*texts)["logits"][0])
            seconds[dtype].append(time.perf_counter() - start)

    rows = []
    for kind, values in [("savedmodel_float32", reference)] + [
            (f"lite_{dtype}", np.stack(logits[dtype])) for dtype in models]:
        predictions = values.argmax(axis=-1)
        row = {"task": task, "model": kind, "examples": len(examples),
               **{key: float(value) for key, value in
                  compute_metrics(name, predictions, arrays["label"]).items()},
               "same_prediction_as_savedmodel": float(np.mean(
                   predictions == reference.argmax(axis=-1))),
               "max_abs_logit_diff": float(np.max(np.abs(values - reference)))}
        if kind.startswith("lite_"):
            dtype = kind[len("lite_"):]
            row["median_ms_per_request"] = 1000 * bench_common.median(seconds[dtype])
            row["model_tflite_mb"] = os.path.getsize(
                os.path.join(paths[dtype], "model.tflite")) / 1e6
        rows.append(row)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dirs", required=True,
                        help="task=model_dir pairs, comma-separated, e.g. glue/mrpc=runs/mrpc")
    parser.add_argument("--glue_dir", required=True)
    parser.add_argument("--name", default="lite_accuracy")
    args = parser.parse_args(argv)
    pairs = []
    for item in args.model_dirs.split(","):
        task, _, model_dir = item.partition("=")
        if task.split("/")[-1] not in FOLDERS or not os.path.isdir(model_dir):
            parser.error(f"--model_dirs: {item!r} is not glue/<task>=<fine-tuned model directory>")
        pairs.append((task, model_dir))
    load_start = bench_common.load_average()
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for task, model_dir in pairs:
            rows += evaluate(task, model_dir, args.glue_dir, root)
    bench_common.print_table(rows, ["task", "model", "accuracy", "f1", "same_prediction_as_savedmodel",
                                    "max_abs_logit_diff", "median_ms_per_request",
                                    "model_tflite_mb"])
    path = bench_common.write_results(args.name, {
        "benchmark": "lite_accuracy", "machine": bench_common.cpu_description(),
        "load_average_start": load_start, "rows": rows,
        "command": "python benchmarks/bench_lite_accuracy.py "
        + " ".join(argv if argv is not None else sys.argv[1:])})
    print("wrote", path)


if __name__ == "__main__":
    main()
