"""Every documented example runs as printed (issue 15): the code of `README.md` and `docs/*.md`.

For each page, in a fresh temporary folder:

* its fenced ```python blocks, in order, as ONE script run by `python` (a later block may use
  an earlier block's names; run as a file, so that `if __name__ == "__main__":` guards work
  as they do for a user's script, and Dask worker processes can start);
* then its command lines, in order: lines starting with `meanfield ` in fenced blocks whose info
  string is `bash`, `sh`, `console` or empty (a `$ ` prompt dropped, `\\` continuations
  joined, trailing `# comments` removed), and 4-space-indented lines of the prose starting with `meanfield `.

Each must exit 0; a command's `--out`, `--plot` and `--plot-clusters` files must exist after it.

What an example prints is checked too (issue 21: a result shown in a `# comment` was never
compared), in one of two forms:

* a ```python block written as a doctest (its first line starts with `>>> `; or a ```pycon
  block): run by `doctest` in the page's script, on the script's names, each `>>>` line's
  output compared with the lines beneath it;
* a fenced block with the info string `output` after a ```python block (only prose between):
  what that block printed to stdout, compared line by line (trailing spaces ignored).

Both compare with doctest's rules `ELLIPSIS` (`...` matches anything) and
`NORMALIZE_WHITESPACE`; the docs print numbers rounded so that they are the same on every
machine (`f"{x:.2e}"`, `round`), and write `...` for what may vary (a device, a time).
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
OUTPUT_INFO = "output"
DOCTEST_INFO = {"pycon"}


@dataclass(frozen=True)
class Example:
    """One example of a page: `kind` is "python", "doctest", "command" or "output" (what the
    python example before it prints); `skip` a reason or ""."""

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
        text = textwrap.dedent("\n".join(body))
        if lang == "python" or lang in DOCTEST_INFO:
            doctest_form = lang in DOCTEST_INFO or text.lstrip().startswith(">>> ")
            examples.append(Example(page, start, "doctest" if doctest_form else "python", text, skip))
        elif lang == OUTPUT_INFO:
            before = examples[-1] if examples else None
            if before is None or before.kind != "python":
                msg = f"{page}:{start}: an `output` block must follow a ```python block"
                raise ValueError(msg)
            examples.append(Example(page, start, "output", text, before.skip))
        elif lang in SHELL_INFO and skip:  # listed whole: its commands need the cluster
            examples.append(Example(page, start, "command", "\n".join(body).strip(), skip))
        elif lang in SHELL_INFO:
            examples.extend(_commands([(start + k + 1, b) for k, b in enumerate(body)], page, skip))
    flush_prose()
    return examples


PRELUDE = '''\
import doctest as _doc_doctest
import io as _doc_io
import sys as _doc_sys

_DOC_FLAGS = _doc_doctest.ELLIPSIS | _doc_doctest.NORMALIZE_WHITESPACE
_DOC_MAIN = __name__ == "__main__"  # not in a worker process that imports this script
_doc_stdout = []


def _doc_begin():
    _doc_stdout.append(_doc_sys.stdout)
    _doc_sys.stdout = _doc_io.StringIO()


def _doc_end(expected, where):
    got = _doc_sys.stdout.getvalue()
    _doc_sys.stdout = _doc_stdout.pop()
    print(got, end="")
    if not _DOC_MAIN:
        return
    tidy = lambda text: "\\n".join(line.rstrip() for line in text.strip("\\n").splitlines()) + "\\n"
    if not _doc_doctest.OutputChecker().check_output(tidy(expected), tidy(got), _DOC_FLAGS):
        _doc_sys.exit(f"{where}: the block printed\\n{got}\\nbut the page shows\\n{expected}")


def _doc_test(text, where, globs):
    if not _DOC_MAIN:
        return
    test = _doc_doctest.DocTestParser().get_doctest(text, globs, where, where, 0)
    runner = _doc_doctest.DocTestRunner(optionflags=_DOC_FLAGS)
    report = []
    runner.run(test, out=report.append, clear_globs=False)
    globs.update(test.globs)  # DocTest ran on a copy: its names are the later blocks' too
    if runner.failures:
        _doc_sys.exit(f"{where}: the doctest fails\\n" + "".join(report))
'''
"""Run first by every page's script: the checks of printed output (see the module docstring)."""


def script_of(examples: list[Example]) -> str:
    """The python, doctest and output examples of one page as one script (empty when none)."""
    parts: list[str] = []
    runnable = [e for e in examples if e.kind in ("python", "doctest", "output") and not e.skip]
    for k, e in enumerate(runnable):
        where = f"{e.page}:{e.line}"
        if e.kind == "python":
            shown = k + 1 < len(runnable) and runnable[k + 1].kind == "output"
            parts.append(f"# --- {where}\n" + ("_doc_begin()\n" if shown else "") + e.text)
        elif e.kind == "doctest":
            parts.append(f"# --- {where} (doctest)\n_doc_test({e.text!r}, {where!r}, globals())")
        else:
            parts.append(f"_doc_end({e.text!r}, {where!r})  # --- {where} (output)")
    return PRELUDE + "\n\n" + "\n\n".join(parts) + "\n" if parts else ""


def _meanfield() -> list[str]:
    exe = Path(sys.executable).parent / "meanfield"
    found = str(exe) if exe.exists() else shutil.which("meanfield")
    assert found, "the `meanfield` command is not installed next to this Python"
    return [found]


def _run(cmd: list[str], cwd: Path, what: str) -> None:
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    assert proc.returncode == 0, (
        f"{what} exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n"
        f"--- stderr\n{proc.stderr[-6000:]}"
    )


def _promised(argv: list[str]) -> list[str]:
    return [argv[k + 1] for k, a in enumerate(argv[:-1]) if a in PROMISED]


ALL = {p.relative_to(ROOT).as_posix(): extract(p) for p in PAGES}


def test_pages_have_examples():
    """The extraction finds what the docs show (a guard against a parser that finds nothing)."""
    kinds = {page: {e.kind for e in ex} for page, ex in ALL.items()}
    assert kinds["README.md"] == {"python", "command", "output"}
    assert "python" in kinds["docs/sweeps.md"] and "command" in kinds["docs/sweeps.md"]
    assert SKIPPED, "the cluster examples of docs/sweeps.md are marked and listed"
    assert all(e.page == "docs/sweeps.md" for e in SKIPPED), SKIPPED
    # issue 21: results once shown in comments are compared now
    assert "doctest" in kinds["docs/real_model.md"]
    assert "output" in kinds["docs/backends.md"] and "output" in kinds["README.md"]


def test_extraction_rules(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n    meanfield plot a.nc\n\n```console\n$ meanfield plot b.nc\n```\n"
        "```bash\nmeanfield solve circle --beta 4 \\\n"
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


@pytest.mark.parametrize(("shown", "ok"), [
    ("3 x = 0.33\n", True), ("3 x = 0.34\n", False), ("3 x = ...\n", True)])
def test_output_blocks_are_compared(tmp_path: Path, shown: str, ok: bool):
    """A page's `output` block is what the python block before it prints: a wrong number fails."""
    page = tmp_path / "page.md"
    page.write_text(f"```python\nx = 1 / 3\nprint(3, f'x = {{x:.2f}}')\n```\n\nprints\n\n"
                    f"```output\n{shown}```\n", encoding="utf-8")
    ex = extract(page, tmp_path)
    assert [e.kind for e in ex] == ["python", "output"]
    path = tmp_path / "script.py"
    path.write_text(script_of(ex), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=60)
    assert (proc.returncode == 0) == ok, proc.stderr
    assert ok or "but the page shows" in proc.stderr


@pytest.mark.parametrize(("shown", "ok"), [("(2, 3)", True), ("(3, 2)", False)])
def test_doctest_blocks_are_compared(tmp_path: Path, shown: str, ok: bool):
    """A ```python block of `>>>` lines runs as a doctest on the names of the blocks before it."""
    page = tmp_path / "page.md"
    page.write_text("```python\nimport numpy as np\n```\n\n"
                    f"```python\n>>> a = np.zeros((2, 3))\n>>> a.shape\n{shown}\n```\n\n"
                    "```python\nassert a.sum() == 0\n```\n", encoding="utf-8")
    ex = extract(page, tmp_path)
    assert [e.kind for e in ex] == ["python", "doctest", "python"]
    path = tmp_path / "script.py"
    path.write_text(script_of(ex), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=60)
    assert (proc.returncode == 0) == ok, proc.stderr
    assert ok or "the doctest fails" in proc.stderr


def test_an_output_block_follows_python(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```output\n1\n```\n", encoding="utf-8")
    with pytest.raises(ValueError, match="must follow"):
        extract(page, tmp_path)


SKIPPED = [e for ex in ALL.values() for e in ex if e.skip]


@pytest.mark.parametrize("example", SKIPPED, ids=lambda e: f"{e.page}:{e.line}")
def test_marked_examples_are_listed(example: Example):
    """The examples a doc marks as needing a cluster: listed by pytest -rs with the reason."""
    pytest.skip(f"{example.page}:{example.line} {example.skip}: {example.text.splitlines()[0]}")


@pytest.mark.long  # all pages together: a few minutes
@pytest.mark.parametrize("page", sorted(p for p, ex in ALL.items() if any(not e.skip for e in ex)))
def test_page_examples_run_as_printed(page: str, tmp_path: Path):
    examples = ALL[page]
    script = script_of(examples)
    if script:
        path = tmp_path / "doc_examples.py"
        path.write_text(script, encoding="utf-8")
        _run([sys.executable, str(path)], tmp_path, f"the python blocks of {page}")
    for e in examples:
        if e.kind != "command" or e.skip:
            continue
        argv = shlex.split(e.text)
        _run(_meanfield() + argv[1:], tmp_path, f"{page}:{e.line}: {e.text}")
        for f in _promised(argv):
            assert (tmp_path / f).exists(), f"{page}:{e.line}: {e.text} did not write {f}"
