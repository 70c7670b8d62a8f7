"""The manual and the front page: the MkDocs site builds with every link and anchor resolved,
the command-line reference matches the commands, and the README keeps to a front page's size."""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")


def _env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", NO_MKDOCS_2_WARNING="1")


def test_site_builds_strict(tmp_path):
    """mkdocs.yml's `validation` makes a broken link or anchor a warning, and `--strict` fails
    the build on any warning (a docstring mkdocstrings cannot read, a page missing from nav)."""
    try:
        import mkdocs  # noqa: F401
        import mkdocstrings  # noqa: F401
    except ImportError:
        pytest.fail('the docs packages are missing: pip install mkdocs mkdocs-material '
                    '"mkdocstrings[python]"')
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "cli" / "index.html").exists()
    assert (tmp_path / "site" / "api" / "index.html").exists()


def test_cli_reference_is_current():
    result = subprocess.run([sys.executable, os.path.join("docs", "gen_cli_reference.py"), "--check"],
                            cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def _readme():
    with open(README, encoding="utf-8") as f:
        return f.read()


def test_readme_is_a_front_page():
    text = _readme()
    assert len(text.splitlines()) <= 200
    setup = text.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    block = setup.split("```bash", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert len(commands) == 2, commands
    excerpt = text.split("<!-- main job excerpt: begin -->", 1)[1].split("<!-- main job excerpt: end -->")[0]
    assert len(excerpt.strip().splitlines()) - 2 <= 30  # the lines inside the code fence


def _pages():
    """README.md and every page of the manual."""
    pages = [README]
    for folder, _, names in os.walk(os.path.join(ROOT, "docs")):
        pages += [os.path.join(folder, name) for name in sorted(names) if name.endswith(".md")]
    return pages


@pytest.mark.parametrize("page", _pages(), ids=lambda page: os.path.relpath(page, ROOT))
def test_pages_speak_of_the_project_not_its_history(page):
    """No commit hashes, no dates outside a table (a measurement's date), no work-log words."""
    with open(page, encoding="utf-8") as f:
        text = f.read()
    hashes = [word for word in re.findall(r"\b[0-9a-f]{7,40}\b", text)
              if re.search(r"[0-9]", word) and re.search(r"[a-f]", word)]
    assert not hashes
    prose = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("|"))
    dates = re.findall(r"\b\d{1,2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\b"
                       r"|\b20\d\d-\d\d-\d\d\b", prose)
    assert not dates
    for phrase in ("session", "this round", "now fixed", "we found"):
        assert phrase not in text.lower(), phrase


def _slugs(path):
    """The anchors MkDocs gives the headings of a Markdown file."""
    from markdown.extensions.toc import slugify

    slugs = set()
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            elif not in_code and line.startswith("#"):
                title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", line.lstrip("#").strip())
                slugs.add(slugify(title.replace("`", ""), "-"))
    return slugs


def test_readme_links_resolve():
    for target in re.findall(r"\]\(([^)\s]+)\)", _readme()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        full = os.path.join(ROOT, path)
        assert os.path.exists(full), target
        if anchor:
            assert anchor in _slugs(full), target
