"""Speed, memory and quality of tools/build_vocab.py against Hugging Face's WordPiece trainer.

Both learn an uncased vocabulary of `--vocab_size` tokens (default 5,000) from the same files,
each as a whole process, start to exit, imports included, as a user runs it:

    bert_keras   python tools/build_vocab.py --input_files=... --vocab_size=... --noprogress
    tokenizers   `tokenizers`' WordPieceTrainer behind its BertNormalizer (lower-casing) and
                 BertPreTokenizer, `Tokenizer.train(files)`: the library's BERT recipe

The contenders run interleaved (A B A B ...), `--rounds` times after one untimed warm-up round
(which fills the page cache); each figure is the median of the rounds. Peak memory is the
process's maximum resident set size (`ru_maxrss` of `os.wait4`), which also gives its CPU time
(user + system: less sensitive than the wall time to other work on the machine, but blind to
how well a contender uses several cores). `--earlier_checkout=DIR` also times the
tools/build_vocab.py of another copy of this project (e.g. `git archive <commit> | tar -x -C
DIR`), with DIR first on PYTHONPATH so that it runs its own package, `--earlier_rounds` times.

Quality, on held-out text (default: the bundled WikiText held-out articles): the share of
words that become [UNK] and the mean wordpieces per word (fewer is better, as more of the text
fits a sequence) when each vocabulary tokenizes it (BERT's basic tokenization, then greedy
WordPiece); the package's in-graph `BertTokenizer` gives them too where it loads the vocabulary
(the "loads" column). `--compare_vocab` scores further vocab.txt files the same way.

Usage (the books are a local corpus: pass their folder; they are not part of the project):

    python benchmarks/bench_vocab_builder.py --books_dir=/path/to/books
    python benchmarks/bench_vocab_builder.py --input_files='corpus/*.txt' [--rounds=3]

The default corpus is `--books_dir`/*.txt plus the bundled `bert_keras/data/wikitext_train.txt`.
Writes benchmarks/results/vocab_builder_<machine class>.json (with the CPU, its AVX-512/AMX
flags and the load
average before and after, as other work on the machine slows both contenders).
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tokenizers_worker(files, vocab_size, output):
    """The `tokenizers` contender (run in its own process): BERT's recipe in that library."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                        show_progress=False)
    tokenizer.train(files, trainer)
    vocab = tokenizer.get_vocab()
    with open(output, "w", encoding="utf-8") as f:
        f.write("".join(token + "\n" for token in sorted(vocab, key=vocab.get)))


def run_measured(command, env=None):
    """(wall seconds, CPU seconds, peak RSS in MiB) of one process; raises if it fails."""
    with tempfile.TemporaryFile() as log:
        start = time.perf_counter()
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        # Reaped with wait4, which gives this process's own resource usage.
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            log.seek(0)
            raise RuntimeError(f"{' '.join(command[:2])} ... failed ({process.returncode}):\n"
                               + log.read().decode(errors="replace")[-4000:])
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def cpu_flags():
    """The AVX-512 and AMX flags of the CPU (none on an AVX2-only machine)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return sorted(set(re.findall(r"\b(avx512[a-z_0-9]*|amx[a-z_0-9]*)", f.read())))
    except OSError:
        return None


def _wordpieces(word, vocab, max_chars=200):
    """Greedy longest-match-first WordPiece (the original's), or None for [UNK]."""
    if len(word) > max_chars:
        return None
    count, start = 0, 0
    while start < len(word):
        for end in range(len(word), start, -1):
            if (word[start:end] if start == 0 else "##" + word[start:end]) in vocab:
                count, start = count + 1, end
                break
        else:
            return None
    return count


def vocabulary_quality(vocab_file, heldout_text):
    """[UNK] share and wordpieces per word of `heldout_text`, and the tokens that the package's
    reader or tokenizer cannot take.

    The figures come from the package's in-graph `BertTokenizer` when it loads the vocabulary;
    they are also computed in Python from the file's raw lines (BERT's basic tokenization, then
    greedy WordPiece), so that a vocabulary the package refuses is scored too."""
    from bert_keras.text import unicode_tables
    from bert_keras.text.tokenizer import BertTokenizer
    from bert_keras.text.vocab_builder import split_words

    with open(vocab_file, encoding="utf-8") as f:
        raw = f.read().split("\n")[:-1]
    bad = [token for token in raw if not token or any(
        char.isspace() or unicode_tables.is_removed(char) for char in token)]
    quality = {"tokens": len(raw), "bad_tokens": len(bad), "bad_examples": bad[:5]}
    words = split_words(heldout_text, lower_case=True)
    vocab = set(raw)
    pieces = [_wordpieces(word, vocab) for word in words]
    unknown = sum(count is None for count in pieces)
    quality["python"] = {"heldout_words": len(words), "unk_share": unknown / len(words),
                         "pieces_per_word": sum(count or 1 for count in pieces) / len(words)}
    try:
        tokenizer = BertTokenizer(vocab_file, lower_case=True)
    except ValueError as error:  # the package's reader refuses it
        quality["loads"] = False
        quality["error"] = str(error)
        return quality
    lines = [line for line in heldout_text.split("\n") if line.strip()]
    ids = tokenizer.tokenize(lines)
    words = int(ids.values.nrows())
    ids = ids.flat_values.numpy()
    unknown = tokenizer.vocab.token_to_id["[UNK]"]
    quality.update(loads=True, heldout_words=words, unk_share=float((ids == unknown).sum() / words),
                   pieces_per_word=float(len(ids) / words))
    return quality


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input_files", default=None,
                        help="Comma-separated files or globs (default: the books and the bundled "
                             "WikiText training articles).")
    parser.add_argument("--books_dir", default=None, help="Folder of the books (*.txt).")
    parser.add_argument("--vocab_size", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3,
                        help="Timed rounds (0: only build the vocabularies and score them).")
    parser.add_argument("--heldout_file", default=os.path.join(ROOT, "bert_keras", "data",
                                                               "wikitext_heldout.txt"))
    parser.add_argument("--compare_vocab", action="append", default=[],
                        help="NAME=PATH of a further vocab.txt to score (repeatable).")
    parser.add_argument("--earlier_checkout", default=None,
                        help="Another copy of this project whose tools/build_vocab.py is timed "
                             "too.")
    parser.add_argument("--earlier_rounds", type=int, default=1)
    parser.add_argument("--results_name", default="vocab_builder")
    parser.add_argument("--tokenizers_worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.input_files:
        patterns = [p for p in args.input_files.split(",") if p.strip()]
    elif args.books_dir:
        patterns = [os.path.join(args.books_dir, "*.txt"),
                    os.path.join(ROOT, "bert_keras", "data", "wikitext_train.txt")]
    else:
        parser.error("give --books_dir (the default corpus) or --input_files")
    files = [path for pattern in patterns for path in sorted(glob.glob(pattern.strip()))]
    if not files:
        parser.error(f"no files match {patterns}")
    if args.tokenizers_worker:
        tokenizers_worker(files, args.vocab_size, args.tokenizers_worker)
        return 0

    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import bench_common

    work = tempfile.mkdtemp(prefix="bench_vocab_")
    outputs = {"bert_keras": os.path.join(work, "bert_keras.txt"),
               "tokenizers": os.path.join(work, "tokenizers.txt")}
    commands = {
        "bert_keras": [sys.executable, os.path.join(ROOT, "tools", "build_vocab.py"),
                       "--input_files=" + ",".join(files), f"--vocab_size={args.vocab_size}",
                       f"--output={outputs['bert_keras']}", "--noprogress"],
        "tokenizers": [sys.executable, os.path.abspath(__file__),
                       "--input_files=" + ",".join(files), f"--vocab_size={args.vocab_size}",
                       f"--tokenizers_worker={outputs['tokenizers']}"],
    }
    environments = {"bert_keras": None, "tokenizers": None}
    if args.earlier_checkout:
        earlier = os.path.abspath(args.earlier_checkout)
        outputs["earlier"] = os.path.join(work, "earlier.txt")
        commands["earlier"] = [sys.executable, os.path.join(earlier, "tools", "build_vocab.py"),
                               "--input_files=" + ",".join(files),
                               f"--vocab_size={args.vocab_size}",
                               f"--output={outputs['earlier']}", "--noprogress"]
        environments["earlier"] = dict(os.environ, PYTHONPATH=earlier + os.pathsep
                                       + os.environ.get("PYTHONPATH", ""))

    corpus_bytes = sum(os.path.getsize(path) for path in files)
    print(f"{len(files)} files, {corpus_bytes / 1e6:.1f} MB; vocab_size={args.vocab_size}; "
          f"load average {bench_common.load_average()}", flush=True)
    load_start = bench_common.load_average()
    timings = {name: [] for name in commands}
    for round_index in range(args.rounds + 1):
        for name, command in commands.items():
            if name == "earlier" and round_index > args.earlier_rounds:
                continue
            if name == "earlier" and round_index == 0:
                continue  # too slow for a warm-up round; the others have filled the page cache
            load = os.getloadavg()[0]
            seconds, cpu, peak = run_measured(command, environments[name])
            label = "warm-up" if round_index == 0 else f"round {round_index}"
            print(f"  {label:8s} {name:11s} {seconds:7.2f} s  cpu {cpu:7.2f} s  {peak:5.0f} MiB  "
                  f"load before {load:.2f}", flush=True)
            if round_index > 0:
                timings[name].append({"seconds": seconds, "cpu_seconds": cpu,
                                      "peak_rss_mib": peak, "load_1min_before": load})

    with open(args.heldout_file, encoding="utf-8") as f:
        heldout = f.read()
    scored = dict(outputs)
    for item in args.compare_vocab:
        name, _, path = item.partition("=")
        scored[name] = path
    rows, results = [], {}
    for name, path in scored.items():
        runs = timings.get(name, [])
        result = {"vocab_file": os.path.basename(path),
                  "quality": vocabulary_quality(path, heldout)}
        if runs:
            result.update(rounds=runs, **{key: bench_common.median([run[key] for run in runs])
                                          for key in ("seconds", "cpu_seconds", "peak_rss_mib")})
        results[name] = result
        quality = result["quality"]
        rows.append({"contender": name, "median s": result.get("seconds"),
                     "cpu s": result.get("cpu_seconds"), "rounds": len(runs) or None,
                     "peak MiB": result.get("peak_rss_mib"),
                     "[UNK] share": quality["python"]["unk_share"],
                     "pieces/word": quality["python"]["pieces_per_word"],
                     "bad tokens": quality["bad_tokens"],
                     "loads": "yes" if quality["loads"] else "no: " + quality["error"][-40:]})
    print()
    bench_common.print_table(rows, ["contender", "median s", "cpu s", "rounds", "peak MiB",
                                    "[UNK] share", "pieces/word", "bad tokens", "loads"])
    ratio = None
    if args.rounds > 0:
        ratio = results["bert_keras"]["seconds"] / results["tokenizers"]["seconds"]
        print(f"\nbert_keras / tokenizers wall time: {ratio:.2f}x")
    path = bench_common.write_results(args.results_name, {
        "corpus": {"files": [os.path.basename(f) for f in files], "bytes": corpus_bytes},
        "heldout_file": os.path.relpath(args.heldout_file, ROOT),
        "vocab_size": args.vocab_size, "rounds": args.rounds,
        "results": results, "time_ratio_bert_keras_over_tokenizers": ratio,
        "cpu_flags_avx512_amx": cpu_flags(), "load_average_start": load_start,
    })
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
