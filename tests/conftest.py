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
