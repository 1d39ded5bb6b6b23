"""Every documented example runs as printed (issue 15): the code of `README.md` and `docs/*.md`.

For each page, in a fresh temporary folder:

* its fenced ```python blocks, in order, as ONE script run by `python` (a later block may use
  an earlier block's names; run as a file, so that `if __name__ == "__main__":` guards work
  as they do for a user's script, and Dask worker processes can start);
* then its command lines, in order: lines starting with `meanfield ` in fenced blocks whose info
  string is `bash`, `sh`, `console` or empty (a `$ ` prompt dropped, `\\` continuations
  joined, trailing `# comments` removed), and 4-space-indented lines of the prose starting with `meanfield `.

Each must exit 0; a command's `--out`, `--plot` and `--plot-clusters` files must exist after it.
The only exclusion is visible in the docs: a fence whose info string carries the word `cluster`
(it needs a Dask cluster on other machines) is listed and skipped with that reason. Nothing
else is skipped, and the examples are run with no environment variable changing their sizes:
what is printed is what runs.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_INFO = {"", "bash", "sh", "console"}
SKIP_MARKERS = {"cluster": "needs a Dask cluster on other machines (marked `cluster` in the doc)"}
PROMISED = ("--out", "--plot", "--plot-clusters")
TIMEOUT_S = 600  # per script or command: a hang fails instead of blocking CI

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)(?P<info>.*)$")


@dataclass(frozen=True)
class Example:
    """One example of a page: `kind` is "python" or "command"; `skip` a reason or ""."""

    page: str
    line: int
    kind: str
    text: str
    skip: str = ""


def _join_continuations(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for line_no, raw in lines:
        text = raw.strip()
        if pending is not None:
            line_no, text = pending[0], pending[1] + " " + text
            pending = None
        if text.endswith("\\"):
            pending = (line_no, text[:-1].rstrip())
            continue
        out.append((line_no, text))
    if pending is not None:
        out.append(pending)
    return out


def _strip_comment(command: str) -> str:
    """The command without a trailing `# comment` (shell rules: quotes protect a `#`)."""
    return shlex.join(shlex.split(command, comments=True))


def _commands(lines: list[tuple[int, str]], page: str, skip: str) -> list[Example]:
    lines = [(n, re.sub(r"^\s*\$ ", "", t)) for n, t in lines]  # a console prompt
    return [
        Example(page, n, "command", _strip_comment(text), skip)
        for n, text in _join_continuations(lines)
        if text.startswith("meanfield ")
    ]


def extract(path: Path, root: Path = ROOT) -> list[Example]:
    """The examples of one Markdown page, in document order."""
    page = path.relative_to(root).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    examples: list[Example] = []
    i = 0
    prose: list[tuple[int, str]] = []

    def flush_prose() -> None:
        examples.extend(_commands(prose, page, ""))
        prose.clear()

    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            line = lines[i]
            if line.startswith("    ") and line.strip():
                prose.append((i + 1, line))
            else:
                flush_prose()
            i += 1
            continue
        flush_prose()
        words = m["info"].strip().split()
        lang = words[0].lower() if words else ""
        skip = "; ".join(SKIP_MARKERS[w] for w in words[1:] if w in SKIP_MARKERS)
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(m["fence"]):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence
        if lang == "python":
            examples.append(Example(page, start, "python", textwrap.dedent("\n".join(body)), skip))
        elif lang in SHELL_INFO and skip:  # listed whole: its commands need the cluster
            examples.append(Example(page, start, "command", "\n".join(body).strip(), skip))
        elif lang in SHELL_INFO:
            examples.extend(_commands([(start + k + 1, b) for k, b in enumerate(body)], page, skip))
    flush_prose()
    return examples


def _meanfield() -> list[str]:
    exe = Path(sys.executable).parent / "meanfield"
    found = str(exe) if exe.exists() else shutil.which("meanfield")
    assert found, "the `meanfield` command is not installed next to this Python"
    return [found]


def _run(cmd: list[str], cwd: Path, what: str) -> None:
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    assert proc.returncode == 0, (
        f"{what} exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-6000:]}"
    )


def _promised(argv: list[str]) -> list[str]:
    return [argv[k + 1] for k, a in enumerate(argv[:-1]) if a in PROMISED]


ALL = {p.relative_to(ROOT).as_posix(): extract(p) for p in PAGES}


def test_pages_have_examples():
    """The extraction finds what the docs show (a guard against a parser that finds nothing)."""
    kinds = {page: {e.kind for e in ex} for page, ex in ALL.items()}
    assert kinds["README.md"] == {"python", "command"}
    assert "python" in kinds["docs/sweeps.md"] and "command" in kinds["docs/sweeps.md"]
    assert SKIPPED, "the cluster examples of docs/sweeps.md are marked and listed"
    assert all(e.page == "docs/sweeps.md" for e in SKIPPED), SKIPPED


def test_extraction_rules(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n    meanfield plot a.nc\n\n```console\n$ meanfield plot b.nc\n```\n```bash\nmeanfield solve circle --beta 4 \\\n"
        "    --out 'x y.nc'   # a comment\necho no\n```\n\n```python cluster\nx = 1\n```\n"
        "```sh cluster\ndask worker tcp://h:1\n```\n"
        "```toml\nmeanfield = 1\n```\n",
        encoding="utf-8",
    )
    ex = extract(page, tmp_path)
    assert [(e.kind, e.text, bool(e.skip)) for e in ex] == [
        ("command", "meanfield plot a.nc", False),
        ("command", "meanfield plot b.nc", False),
        ("command", "meanfield solve circle --beta 4 --out 'x y.nc'", False),
        ("python", "x = 1", True),
        ("command", "dask worker tcp://h:1", True),
    ]


SKIPPED = [e for ex in ALL.values() for e in ex if e.skip]


@pytest.mark.parametrize("example", SKIPPED, ids=lambda e: f"{e.page}:{e.line}")
def test_marked_examples_are_listed(example: Example):
    """The examples a doc marks as needing a cluster: listed by pytest -rs with the reason."""
    pytest.skip(f"{example.page}:{example.line} {example.skip}: {example.text.splitlines()[0]}")


@pytest.mark.long  # all pages together: a few minutes
@pytest.mark.parametrize("page", sorted(p for p, ex in ALL.items() if any(not e.skip for e in ex)))
def test_page_examples_run_as_printed(page: str, tmp_path: Path):
    examples = ALL[page]
    script = "\n\n".join(
        f"# --- {page}:{e.line}\n{e.text}" for e in examples if e.kind == "python" and not e.skip
    )
    if script:
        path = tmp_path / "doc_examples.py"
        path.write_text(script + "\n", encoding="utf-8")
        _run([sys.executable, str(path)], tmp_path, f"the python blocks of {page}")
    for e in examples:
        if e.kind != "command" or e.skip:
            continue
        argv = shlex.split(e.text)
        _run(_meanfield() + argv[1:], tmp_path, f"{page}:{e.line}: {e.text}")
        for f in _promised(argv):
            assert (tmp_path / f).exists(), f"{page}:{e.line}: {e.text} did not write {f}"
