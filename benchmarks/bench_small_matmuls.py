"""Where batch-1 serving time goes: the encoder's matmuls alone at a few rows, per runtime.

At batch 1 a BERT encoder is a chain of matmuls of a few rows against weight matrices read
whole, so a runtime's small-matmul kernels set its latency. This times MiniLM-L6-H384's 36
weight matmuls (per layer: query, key, value and attention output 384 x 384, feed-forward
384 x 1536 and 1536 x 384; float32, random weights, each output feeding the next) on
[rows, 384] inputs, in:

- `tf_graph`: a TensorFlow `tf.function` over variables (the plain graph of our exports);
- `tf_xla`: the same, `jit_compile=True` (our batch-1 path, `--xla_batch_1`);
- `tf_xla_transposed`: XLA on kernels stored [out, in] (`transpose_b`);
- `torch`: PyTorch eager under `inference_mode`;
- `onnxruntime`: ONNX Runtime on the same chain (MatMul nodes, weights as initializers, which
  it pre-packs when the session starts), `intra_op_num_threads` = the cores;
- `tflite`: the chain converted to TensorFlow Lite (weights as constants), run by its
  interpreter with the cores as threads: XNNPACK's kernels, which also pack the weights once
  (what `--kind=lite` exports serve with).

    python benchmarks/bench_small_matmuls.py --rows=16,9,1

Interleaved rounds in one process (a pause before each turn lets the previous runtime's
threads stop); writes benchmarks/results/small_matmuls_<machine class>.json.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_common  # noqa: E402

HIDDEN, INTERMEDIATE, LAYERS = 384, 1536, 6


def weights(seed=0):
    rng = np.random.default_rng(seed)
    shapes = [(HIDDEN, HIDDEN)] * 4 + [(HIDDEN, INTERMEDIATE), (INTERMEDIATE, HIDDEN)]
    return [(rng.normal(size=shape) * 0.02).astype(np.float32) for shape in shapes * LAYERS]


def tensorflow_contenders(kernels, x):
    import tensorflow as tf

    variables = [tf.Variable(kernel) for kernel in kernels]
    transposed = [tf.Variable(kernel.T.copy()) for kernel in kernels]
    inputs = tf.constant(x)

    def chain(hidden, matrices, transpose_b):
        for matrix in matrices:
            hidden = tf.matmul(hidden, matrix, transpose_b=transpose_b)
        return hidden

    graph = tf.function(lambda h: chain(h, variables, False), autograph=False)
    xla = tf.function(lambda h: chain(h, variables, False), jit_compile=True, autograph=False)
    xla_t = tf.function(lambda h: chain(h, transposed, True), jit_compile=True, autograph=False)
    return {"tf_graph": lambda: graph(inputs).numpy(), "tf_xla": lambda: xla(inputs).numpy(),
            "tf_xla_transposed": lambda: xla_t(inputs).numpy()}


def tflite_contender(kernels, x):
    import tensorflow as tf

    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        Interpreter = tf.lite.Interpreter

    constants = [tf.constant(kernel) for kernel in kernels]

    @tf.function(input_signature=[tf.TensorSpec([None, HIDDEN], tf.float32)], autograph=False)
    def chain(hidden):
        for matrix in constants:
            hidden = tf.matmul(hidden, matrix)
        return hidden

    converter = tf.lite.TFLiteConverter.from_concrete_functions([chain.get_concrete_function()],
                                                                tf.Module())
    interpreter = Interpreter(model_content=converter.convert(), num_threads=os.cpu_count())
    inputs, = interpreter.get_input_details()
    interpreter.resize_tensor_input(inputs["index"], x.shape)
    interpreter.allocate_tensors()
    output = interpreter.get_output_details()[0]["index"]

    def run():
        interpreter.set_tensor(inputs["index"], x)
        interpreter.invoke()
        return interpreter.get_tensor(output)
    return {"tflite": run}


def torch_contender(kernels, x):
    import torch

    torch.set_num_threads(os.cpu_count())
    matrices, inputs = [torch.from_numpy(kernel) for kernel in kernels], torch.from_numpy(x)

    def run():
        with torch.inference_mode():
            hidden = inputs
            for matrix in matrices:
                hidden = hidden @ matrix
            return hidden.numpy()
    return {"torch": run}


def onnxruntime_contender(kernels, x):
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    nodes, initializers, previous = [], [], "x"
    for index, kernel in enumerate(kernels):
        initializers.append(numpy_helper.from_array(kernel, f"w{index}"))
        nodes.append(helper.make_node("MatMul", [previous, f"w{index}"], [f"h{index}"]))
        previous = f"h{index}"
    graph = helper.make_graph(
        nodes, "matmul_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, HIDDEN])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, None)], initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = os.cpu_count()
    session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    return {"onnxruntime": lambda: session.run(None, {"x": x})[0]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="16,9,1")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--name", default="small_matmuls")
    args = parser.parse_args(argv)
    load_start = bench_common.load_average()
    kernels = weights()
    rows_out = []
    for rows in [int(value) for value in args.rows.split(",")]:
        x = np.random.default_rng(rows).normal(size=(rows, HIDDEN)).astype(np.float32)
        contenders = {**tensorflow_contenders(kernels, x), **torch_contender(kernels, x),
                      **onnxruntime_contender(kernels, x), **tflite_contender(kernels, x)}
        reference = contenders["tf_graph"]()
        for name, run in contenders.items():  # the same chain everywhere
            np.testing.assert_allclose(run(), reference, rtol=1e-3, atol=1e-5, err_msg=name)
        times = bench_common.interleaved_timings(contenders, args.rounds, warmup=2,
                                                 calls=args.calls, pause=0.05)
        fastest = min(bench_common.median(t) for t in times.values())
        for name, values in times.items():
            rows_out.append({"rows": rows, "contender": name,
                             "median_ms": 1000 * bench_common.median(values),
                             "vs_fastest": bench_common.median(values) / fastest})
    print(f"MiniLM's 36 weight matmuls chained ({sum(k.nbytes for k in kernels) / 1e6:.1f} MB of "
          "float32 weights), milliseconds per call:")
    bench_common.print_table(rows_out, ["rows", "contender", "median_ms", "vs_fastest"])
    path = bench_common.write_results(args.name, {
        "benchmark": "small_matmuls", "command": "python " + " ".join(sys.argv),
        "rounds": args.rounds, "calls_per_round": args.calls, "load_average_start": load_start,
        "rows": rows_out})
    print("wrote", path)


if __name__ == "__main__":
    main()
