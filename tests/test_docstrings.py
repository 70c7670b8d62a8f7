"""The docstring examples (`doctest`) of the public API and of every module of `model/` (with
`layers/`), `text/`, `modeldir/` and `common/` run and give what they show.

One test per module (`doctest.testmod`, with ELLIPSIS and NORMALIZE_WHITESPACE; examples marked
`# doctest: +SKIP` are skipped), and one per package asserting that its modules attempted at
least one example in all, so that a package cannot pass by having none. The public API is the
`bert_keras` module (its names load lazily) with the modules that define its names.

Examples that write files use `tempfile`; they write under the test's `tmp_path` here.
"""

import doctest
import importlib
import pkgutil
import tempfile

import pytest

import bert_keras

PACKAGES = ["bert_keras.model", "bert_keras.text", "bert_keras.modeldir", "bert_keras.common"]
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

# Modules whose examples fail, left out until their docstring is fixed: {module: why}.
EXCLUDED = {}


def _package_modules(package):
    """The package and all its modules and subpackages, by name."""
    path = importlib.import_module(package).__path__
    return [package] + sorted(info.name for info in pkgutil.walk_packages(path, package + "."))


def _public_api_modules():
    """`bert_keras` and the modules that define the names it exports."""
    return ["bert_keras"] + sorted({getattr(bert_keras, name).__module__
                                    for name in bert_keras.__all__})


GROUPS = {"public API": _public_api_modules(),
          **{package: _package_modules(package) for package in PACKAGES}}
MODULES = [name for name in dict.fromkeys(name for names in GROUPS.values() for name in names)
           if name not in EXCLUDED]

_RESULTS = {}  # module name -> doctest.TestResults, so that the group checks run nothing twice


@pytest.fixture
def run_doctests(tmp_path, monkeypatch, capsys):
    """`run(module name)` -> (TestResults, doctest's report of the failures)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def run(name):
        if name not in _RESULTS:
            module = importlib.import_module(name)
            _RESULTS[name] = doctest.testmod(module, optionflags=OPTIONS, verbose=False,
                                             report=False)
        return _RESULTS[name], capsys.readouterr().out

    return run


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, run_doctests):
    results, report = run_doctests(name)
    assert results.failed == 0, (
        f"{results.failed} of {results.attempted} examples of {name} failed:\n{report}")


@pytest.mark.parametrize("group", list(GROUPS))
def test_each_package_has_examples(group, run_doctests):
    names = [name for name in GROUPS[group] if name not in EXCLUDED]
    assert sum(run_doctests(name)[0].attempted for name in names) > 0, (
        f"no docstring example of {group} ran ({names})")


def test_every_public_name_is_in_a_checked_module():
    """The lazily exported names of `bert_keras` and of the packages are defined in modules
    whose examples run above."""
    for package in ["bert_keras"] + PACKAGES:
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", []):
            assert getattr(module, name).__module__ in MODULES, (package, name)
