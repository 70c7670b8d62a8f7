"""Runs every benchmark comparison in turn with one command and prints their tables.

    pip install -r benchmarks/requirements.txt   # the peers; never a dependency of the package
    python benchmarks/run_all.py                 # full set (BERT-base runs take tens of minutes on 2 cores)
    python benchmarks/run_all.py --quick         # the small models only

Each benchmark writes benchmarks/results/<benchmark>_<machine class>.json (one file per
benchmark and class of machine, e.g. encoder_avx2_epyc.json, the latest run of each variant;
bench_common.write_results); see docs/benchmarks.md for the figures.
The pre-training data tool's comparison (benchmarks/bench_pretraining_data.py) runs too when
present and --wikitext_dir is given. The fine-tuning scores against Hugging Face
(benchmarks/bench_finetuning_quality.py, about an hour on 2 cores) and the step-for-step STS-B
check (benchmarks/bench_finetuning_trajectory.py, about 20 minutes) run without --quick when the
GLUE folder is there (--glue_dir, holding MRPC/, SST-2/ and STS-B/); the same check for token
tagging, multiple choice and span QA on the project's samples runs without --quick always.
With --model_dir (a pre-trained model directory, e.g. the main job's), the frozen-feature probe
of its transfer to SST-2 runs too (benchmarks/bench_transfer_probe.py, under a minute), and the
job's comparison on mixes of its pre-trained and fresh weights (benchmarks/bench_transfer_parts.py,
about 6 minutes), and the seconds of its exports as whole processes (benchmarks/bench_export.py).
With --finetuned_dirs (fine-tuned GLUE model directories, e.g. glue/mrpc=runs/mrpc,glue/sst2=runs/sst2)
and the GLUE folder, the lite export's int8 weights are scored against float32 on the dev splits
(benchmarks/bench_lite_accuracy.py, a few minutes).
With --gpu, the pre-training step of BERT-base and BERT-large runs on the GPU too, Keras on the
JAX backend (needs `jax` with CUDA and `keras-hub`; see docs/benchmarks.md), with model FLOPs
utilization against --peak_tflops, and BERT-large with the fused attention at seq 128 and 512.
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def commands(quick, wikitext_dir, glue_dir, gpu_peak_tflops=None, model_dir=None,
             finetuned_dirs=None):
    python = sys.executable
    runs = [
        [python, os.path.join(HERE, "bench_tokenizer.py")],
        [python, os.path.join(HERE, "bench_encoder.py")]
        + (["--models=L6_H384"] if quick else []),
        # Our exports with and without --xla_batch_1, HF PyTorch and ONNX Runtime, each runtime
        # in a process of its own.
        [python, os.path.join(HERE, "bench_end_to_end.py"), "--plain_graph_too"],
        # First requests of each new length against steady state, each export in a fresh
        # process (batch 1, MRPC dev pairs), with and without --xla_batch_1.
        [python, os.path.join(HERE, "bench_first_request.py")],
        # Batch 1's floor: the encoder's matmuls alone at a few rows, per runtime.
        [python, os.path.join(HERE, "bench_small_matmuls.py")],
        [python, os.path.join(HERE, "bench_pretraining_step.py")]
        + (["--models=small:16"] if quick else []),
        [python, os.path.join(HERE, "profile_ops.py")],
        [python, os.path.join(HERE, "profile_ops.py"), "--dtype=bfloat16"],
    ]
    data_tool = os.path.join(HERE, "bench_pretraining_data.py")
    if os.path.exists(data_tool) and wikitext_dir:
        runs.append([python, data_tool, f"--wikitext_dir={wikitext_dir}"])
    if gpu_peak_tflops:
        runs.append(["env", "KERAS_BACKEND=jax", python,
                     os.path.join(HERE, "bench_pretraining_step.py"),
                     "--models=base:128,large:64,large:128", "--precisions=bfloat16",
                     "--steps_per_round=10", f"--peak_tflops={gpu_peak_tflops}",
                     "--name=pretraining_step_gpu"])
        # The fused attention (cuDNN flash attention) against the released attention, seq 128
        # and 512: our model only.
        runs.append(["env", "KERAS_BACKEND=jax", python,
                     os.path.join(HERE, "bench_pretraining_step.py"),
                     "--models=large:128,large:256,large:32:512", "--precisions=bfloat16",
                     "--contenders=ours,ours_no_attention_dropout,ours_fused",
                     "--steps_per_round=10", f"--peak_tflops={gpu_peak_tflops}",
                     "--name=pretraining_step_gpu_fused"])
    if not quick and os.path.isdir(glue_dir):
        runs.append([python, os.path.join(HERE, "bench_finetuning_quality.py"),
                     f"--data_dir={glue_dir}"])
        runs.append([python, os.path.join(HERE, "bench_finetuning_trajectory.py"),
                     f"--data_dir={glue_dir}"])
    if not quick:  # the other families step for step, on the project's own samples
        trajectory = [python, os.path.join(HERE, "bench_finetuning_trajectory.py")]
        runs += [trajectory + ["--task=conll2003", "--train_rows=640", "--epochs=2"],
                 trajectory + ["--task=swag", "--batch_size=3", "--epochs=40"],
                 trajectory + ["--task=squad_v2", "--batch_size=8", "--epochs=8"],
                 trajectory + ["--task=squad_v2", "--batch_size=8", "--epochs=8",
                               "--train_pad_row"]]
    if finetuned_dirs and os.path.isdir(glue_dir):
        runs.append([python, os.path.join(HERE, "bench_lite_accuracy.py"),
                     f"--model_dirs={finetuned_dirs}", f"--glue_dir={glue_dir}"])
    if model_dir:
        runs += [[python, os.path.join(HERE, name), f"--model_dir={model_dir}"]
                 for name in ("bench_transfer_probe.py", "bench_transfer_parts.py",
                              "bench_export.py")]
    return runs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small models only")
    parser.add_argument("--wikitext_dir", default=None,
                        help="WikiText-2 directory for bench_pretraining_data.py (skipped without)")
    parser.add_argument("--glue_dir", default=os.path.join(HERE, os.pardir, os.pardir, "shared",
                                                           "data", "glue"),
                        help="GLUE folder (MRPC/, SST-2/, STS-B/) for the fine-tuning benchmarks "
                             "(skipped when absent or with --quick)")
    parser.add_argument("--gpu", action="store_true",
                        help="also the pre-training step on the GPU (JAX backend)")
    parser.add_argument("--peak_tflops", type=float, default=989.0,
                        help="the GPU's dense bf16 peak for --gpu (989: H100 SXM)")
    parser.add_argument("--model_dir", default=None,
                        help="a pre-trained model directory (e.g. the main job's "
                             "bert_keras_work/model) for bench_transfer_probe.py and "
                             "bench_transfer_parts.py and bench_export.py (skipped without)")
    parser.add_argument("--finetuned_dirs", default=None,
                        help="glue/<task>=<fine-tuned model directory>, comma-separated, for "
                             "bench_lite_accuracy.py (skipped without)")
    args = parser.parse_args()
    failed = []
    for command in commands(args.quick, args.wikitext_dir, args.glue_dir,
                            args.peak_tflops if args.gpu else None, args.model_dir,
                            args.finetuned_dirs):
        print("$", " ".join(command), flush=True)
        if subprocess.call(command) != 0:
            failed.append(next(os.path.basename(c) for c in command if c.endswith(".py")))
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
