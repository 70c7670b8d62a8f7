"""Builds the notebooks of colabs/ from their Python sources in colabs/src/.

A source is a plain Python file in the "percent" layout, so that the notebooks can be read and
reviewed as code:

    # %% [markdown]
    # # A title
    # Some text.

    # %% tags=["parameters"]
    SMOKE = False

    # %%
    print("a code cell")

    # %% install

`# %% install` stands for the install cell shared by every notebook (`src/install_cell.py`).
Markdown lines lose their leading "# " (or "#"). The notebooks are written without outputs,
with stable cell ids, so that rebuilding an unchanged source changes nothing.

    python colabs/make_notebooks.py           # rewrite the .ipynb files
    python colabs/make_notebooks.py --check   # exit 1 if a notebook is out of date
"""

import json
import os
import re
import sys

import nbformat

COLABS_DIR = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.join(COLABS_DIR, "src")
INSTALL_CELL = os.path.join(SOURCE_DIR, "install_cell.py")

# notebook name -> the runtime Colab opens it with ("V5E1" is the free tier's v5e-1 TPU).
NOTEBOOKS = {
    "pretraining_tpu": {"accelerator": "TPU", "gpuType": "V5E1"},
    "finetuning_glue": {"accelerator": "GPU", "gpuType": "T4"},
    "squad": {"accelerator": "GPU", "gpuType": "T4"},
}

_MARKER = re.compile(r"^# %%(?P<rest>.*)$")


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def parse_cells(text, source_name="source"):
    """[(kind, source, tags)] of a percent-layout source; kind is "code" or "markdown"."""
    cells = []
    current = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = _MARKER.match(line)
        if match:
            rest = match.group("rest").strip()
            tags = []
            if rest == "[markdown]":
                kind = "markdown"
            elif rest == "install":
                kind = "install"
            elif rest.startswith("tags="):
                kind = "code"
                try:
                    tags = json.loads(rest[len("tags="):])
                except json.JSONDecodeError as error:
                    raise ValueError(f"{source_name}:{number}: bad tags {rest!r}") from error
            elif rest == "":
                kind = "code"
            else:
                raise ValueError(f"{source_name}:{number}: unknown cell marker {line!r}")
            current = [kind, [], tags]
            cells.append(current)
        elif current is None:
            if line.strip():
                raise ValueError(f"{source_name}:{number}: text before the first '# %%' marker")
        else:
            current[1].append(line)
    result = []
    for kind, lines, tags in cells:
        if kind == "markdown":
            lines = [_markdown_line(line, source_name) for line in lines]
        source = "\n".join(lines).strip("\n")
        result.append((kind, source, tags))
    return result


def _markdown_line(line, source_name):
    if line.startswith("# "):
        return line[2:]
    if line.strip() in ("#", ""):
        return ""
    raise ValueError(f"{source_name}: markdown line without '# ': {line!r}")


def build_notebook(name):
    """The `nbformat` notebook of colabs/src/<name>.py."""
    source_path = os.path.join(SOURCE_DIR, f"{name}.py")
    install = _read(INSTALL_CELL).strip("\n")
    notebook = nbformat.v4.new_notebook()
    for index, (kind, source, tags) in enumerate(parse_cells(_read(source_path), source_path)):
        if kind == "markdown":
            cell = nbformat.v4.new_markdown_cell(source)
        else:
            cell = nbformat.v4.new_code_cell(install if kind == "install" else source)
            if kind == "install":
                tags = ["install"]
        cell.id = f"{name.replace('_', '-')}-{index:02d}"
        if tags:
            cell.metadata["tags"] = tags
        notebook.cells.append(cell)
    runtime = NOTEBOOKS[name]
    notebook.metadata = {
        "accelerator": runtime["accelerator"],
        "colab": {"provenance": [], "toc_visible": True, "gpuType": runtime["gpuType"]},
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    }
    nbformat.validate(notebook)
    return notebook


def notebook_path(name):
    return os.path.join(COLABS_DIR, f"{name}.ipynb")


def render(notebook):
    return nbformat.writes(notebook) + "\n"


def main(argv):
    check = "--check" in argv[1:]
    stale = []
    for name in NOTEBOOKS:
        text = render(build_notebook(name))
        path = notebook_path(name)
        current = _read(path) if os.path.exists(path) else None
        if current == text:
            continue
        if check:
            stale.append(path)
            continue
        temporary = f"{path}.tmp"
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temporary, path)
        print("wrote", path)
    if stale:
        print("out of date (run python colabs/make_notebooks.py):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
