"""The tests mirror the package's subpackages; their shared helpers stay in this directory.

The README's command runs the suite in two processes, a test file at a time in each
(`-n 2`, with `--dist loadfile --no-loadscope-reorder` from pytest.ini), so that a file's
module fixtures are built once. The slowest files go first: started last, one of them would
leave a process working alone at the end.
"""

import os
import sys

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TESTS_DIR)

# The slowest files, slowest first (seconds of one process, both busy, 2 cores: about 370
# for the main job, 340 for the notebooks, 230 for the pre-training backends).
SLOWEST_FILES = (
    "test_main_job.py",
    "test_colabs.py",
    "pretraining/test_backends.py",
    "finetuning/test_backends.py",
    "finetuning/test_transfer.py",
    "pretraining/test_multi_worker.py",
    "export/test_encoder_export.py",
    "export/test_every_cpu.py",
    "export/test_savedmodel_layer.py",
    "pretraining/test_run_pretraining_cli.py",
    "pretraining/test_run.py",
)
_MISSING = [name for name in SLOWEST_FILES if not os.path.exists(os.path.join(TESTS_DIR, name))]
if _MISSING:
    raise RuntimeError(f"tests/conftest.py: SLOWEST_FILES names files that are not there: {_MISSING}")

_RANK = {f"tests/{name}": index for index, name in enumerate(SLOWEST_FILES)}


def pytest_collection_modifyitems(items):
    # Stable: the other files keep their order, after the slowest.
    items.sort(key=lambda item: _RANK.get(item.nodeid.split("::")[0], len(_RANK)))


def _cpu_flags():
    """The AVX-512 and AMX flags of this CPU (Linux), sorted."""
    import re

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    return sorted(set(re.findall(r"\b(avx512[a-z_0-9]*|amx[a-z_0-9]*)\b", text)))


def cpu_report():
    """What the CPU lets the oneDNN checks (export/test_every_cpu.py) exercise here: both
    settings always run, but oneDNN's AVX-512 and AMX kernels only where the CPU has them."""
    flags = _cpu_flags()
    if flags is None:
        return ["cpu: flags unknown (no /proc/cpuinfo); oneDNN checks run with TF_ENABLE_ONEDNN_OPTS=1 and =0"]
    lines = [f"cpu: {' '.join(flags) or 'no avx512 or amx flags (AVX2 or older)'}"]
    missing = [name for name, present in (
        ("oneDNN's AVX-512 kernels", any(f.startswith("avx512") for f in flags)),
        ("oneDNN's AVX-512 bf16 kernels", "avx512_bf16" in flags),
        ("oneDNN's AMX kernels", "amx_tile" in flags)) if not present]
    lines.append("oneDNN checks: TF_ENABLE_ONEDNN_OPTS=1 and =0 (Grappler's oneDNN fusions run on any x86 CPU)"
                 + (f"; not exercised on this CPU: {', '.join(missing)}" if missing else ""))
    return lines


def pytest_terminal_summary(terminalreporter):
    # Printed under -q as well: the suite's output says which CPU paths it could not exercise.
    for line in cpu_report():
        terminalreporter.write_line(line)
