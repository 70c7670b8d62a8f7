"""The package's layout: each subpackage imports only from the floors below it, so that a change
to one step of the pipeline cannot reach back into the steps before it.

    common                                   the ground floor (atomic writes, the command line)
    text | model | metrics | distribution    none imports another
    learning_rate                            (the warm-up/decay schedule, on the same floor)
    modeldir | precision                     the model directory on top of text and model;
                                             the compute dtype on top of distribution
    data | optimization                      pre-training data; the optimizers
    pretraining -> finetuning -> export -> main_job
    commands                                 the `bert-keras` command, naming every step

Imports inside functions count too.
"""

import ast
import os

import bert_keras

PACKAGE_DIR = os.path.dirname(bert_keras.__file__)
FLOORS = {
    "common": 0,
    "text": 1, "model": 1, "metrics": 1, "distribution": 1, "learning_rate": 1,
    "modeldir": 2, "precision": 2,
    "data": 3, "optimization": 3,
    "pretraining": 4,
    "finetuning": 5,
    "export": 6,
    "main_job": 7,
    "commands": 8,
}


def _unit(relative_path):
    """The subpackage (or loose module) a file of the package belongs to; None for __init__."""
    first = relative_path.split(os.sep)[0]
    return None if first == "__init__.py" else first.removesuffix(".py")


def _imported_units(tree):
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names
                                     if node.module == "bert_keras"]
        for name in names:
            parts = name.split(".")
            if parts[0] == "bert_keras" and len(parts) > 1 and parts[1] in FLOORS:
                yield parts[1], node.lineno


def _modules():
    for root, _, files in os.walk(PACKAGE_DIR):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(root, name)
                yield os.path.relpath(path, PACKAGE_DIR), path


def test_every_unit_has_a_floor():
    units = {_unit(relative) for relative, _ in _modules()} - {None}
    assert units <= set(FLOORS), f"give these a floor in FLOORS: {sorted(units - set(FLOORS))}"


def test_imports_go_only_down():
    wrong = []
    for relative, path in _modules():
        unit = _unit(relative)
        if unit is None:
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for imported, line in _imported_units(tree):
            if imported != unit and FLOORS[imported] >= FLOORS[unit]:
                wrong.append(f"{relative}:{line}: {unit} (floor {FLOORS[unit]}) imports "
                             f"{imported} (floor {FLOORS[imported]})")
    assert not wrong, "\n".join(wrong)


def test_the_test_sees_imports():
    """A control: the checker finds an upward import when there is one."""
    tree = ast.parse("def f():\n    from bert_keras.modeldir import model_dir\n")
    assert list(_imported_units(tree)) == [("modeldir", 2)]
