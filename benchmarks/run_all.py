"""Runs every benchmark comparison in turn with one command and prints their tables.

    pip install -r benchmarks/requirements.txt   # the peers; never a dependency of the package
    python benchmarks/run_all.py                 # full set (BERT-base runs take tens of minutes on 2 cores)
    python benchmarks/run_all.py --quick         # the small models only

Each benchmark writes benchmarks/results/<name>.json; see docs/benchmarks.md for the figures.
The pre-training data tool's comparison (benchmarks/bench_pretraining_data.py) runs too when
present and --wikitext_dir is given. The fine-tuning scores against Hugging Face
(benchmarks/bench_finetuning_quality.py, about an hour on 2 cores) run without --quick when the
GLUE folder is there (--glue_dir, holding MRPC/ and SST-2/).
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def commands(quick, wikitext_dir, glue_dir):
    python = sys.executable
    runs = [
        [python, os.path.join(HERE, "bench_tokenizer.py")],
        [python, os.path.join(HERE, "bench_encoder.py")]
        + (["--models=L6_H384"] if quick else []),
        [python, os.path.join(HERE, "bench_end_to_end.py")],
        [python, os.path.join(HERE, "bench_pretraining_step.py")]
        + (["--models=small:16"] if quick else []),
        [python, os.path.join(HERE, "profile_ops.py")],
        [python, os.path.join(HERE, "profile_ops.py"), "--dtype=bfloat16"],
    ]
    data_tool = os.path.join(HERE, "bench_pretraining_data.py")
    if os.path.exists(data_tool) and wikitext_dir:
        runs.append([python, data_tool, f"--wikitext_dir={wikitext_dir}"])
    if not quick and os.path.isdir(glue_dir):
        runs.append([python, os.path.join(HERE, "bench_finetuning_quality.py"),
                     f"--data_dir={glue_dir}"])
    return runs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small models only")
    parser.add_argument("--wikitext_dir", default=None,
                        help="WikiText-2 directory for bench_pretraining_data.py (skipped without)")
    parser.add_argument("--glue_dir", default=os.path.join(HERE, os.pardir, os.pardir, "shared",
                                                           "data", "glue"),
                        help="GLUE folder (MRPC/, SST-2/) for bench_finetuning_quality.py "
                             "(skipped when absent or with --quick)")
    args = parser.parse_args()
    failed = []
    for command in commands(args.quick, args.wikitext_dir, args.glue_dir):
        print("$", " ".join(command), flush=True)
        if subprocess.call(command) != 0:
            failed.append(os.path.basename(command[1]))
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
