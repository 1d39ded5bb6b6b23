"""The validation report: ``report.md`` and ``report.html`` in the output folder.

.. autosummary::
   write_report

The table of all checks (check, status, worst comparison, time), then one section per
check: what it compares, the table of its numeric comparisons (measured, expected,
tolerance, kind, result), its figure (PNG), the argument for its tolerances (the check's
docstring), the extra numbers, the traceback of an error, and the link to its raw numbers
(``checks/<name>/data.nc``, NetCDF) from which any figure can be redrawn.
"""

from __future__ import annotations

import html
import json
import os
import time
from pathlib import Path
from typing import Any

from meanfield.io import write_text
from validation.records import KINDS, CheckResult, Comparison
from validation.runner import load_record, status_of
from validation.runner import summary as one_line
from validation.suites import SuiteEntry


def _doc(entry: SuiteEntry) -> str:
    return entry.doc


def _rule(c: Comparison) -> str:
    if c.kind == "ci":
        return f"[{c.low:.6g}, {c.high:.6g}]"
    return f"{c.tolerance:.3g}"


def _comparison_rows(r: CheckResult) -> list[tuple[str, str, str, str, str, str]]:
    """(what, measured, expected, tolerance or interval, kind, pass/FAIL) per comparison."""
    return [(c.what, f"{c.measured:.6g}", f"{c.expected:.6g}", _rule(c), c.kind,
             "pass" if c.passed else "FAIL") for c in r.comparisons]


def _rel(path: str | None, root: Path) -> str | None:
    if not path:
        return None
    return os.path.relpath(Path(path).resolve(), root.resolve()).replace(os.sep, "/")


def _sections(entries: list[SuiteEntry], out_dir: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for e in entries:
        loaded = load_record(out_dir, e.name)
        if loaded is None:
            out.append({"name": e.name, "status": "not run", "entry": e})
            continue
        res, meta = loaded
        out.append({"name": e.name, "status": status_of(res), "result": res, "meta": meta, "entry": e,
                    "figure": (_rel(res.figure, out_dir) if res.figure and Path(res.figure).is_file()
                               else None),
                    "data": _rel(meta.get("data_path"), out_dir)})
    return out


def _counts(sections: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for s in sections:
        counts[s["status"]] = counts.get(s["status"], 0) + 1
    return counts


def _md_cell(x: Any) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def _details_text(res: CheckResult) -> str:
    d = {k: v for k, v in (res.details or {}).items() if k != "table"}
    text = json.dumps(d, indent=1, default=str)
    return text if len(text) < 6000 else text[:6000] + "\n…"


def _header(sections: list[dict[str, Any]], *, suite: str, seed: int, wall_time: float | None,
            interrupted: bool) -> list[str]:
    """The report's head lines: suite, seed, version and time; the count of each status."""
    counts = _counts(sections)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    from meanfield import __version__

    head = [f"suite `{suite}`, seed {seed}, meanfield {__version__}, {stamp}",
            f"result: {summary}" + (f"; wall time {wall_time:.1f} s" if wall_time is not None else "")]
    if interrupted:
        head.append("**interrupted**: checks not run are listed as 'not run'; `--resume` continues.")
    return head


# -- markdown --------------------------------------------------------------------------------


def _md_table(sections: list[dict[str, Any]]) -> list[str]:
    """The table of all checks: check, status, worst comparison, law, wall and CPU time."""
    md = ["| check | status | worst comparison | expected law, tolerance | wall (s) | CPU (s) |",
          "|---|---|---|---|---:|---:|"]
    for s in sections:
        r = s.get("result")
        if r is None:
            md.append(f"| [{s['name']}](#{s['name'].replace('.', '')}) | not run | | | | |")
            continue
        w, c = s["meta"].get("wall_time_s"), s["meta"].get("cpu_time_s")
        md.append(f"| [{s['name']}](#{s['name'].replace('.', '')}) | **{s['status']}** | "
                  f"{_md_cell(one_line(r))} | {_md_cell(r.description)} | "
                  f"{'' if w is None else f'{w:.1f}'} | {'' if c is None else f'{c:.1f}'} |")
    return md


def _md_section(s: dict[str, Any]) -> list[str]:
    """One check's section: what it compares, its comparisons, figure, docstring, details."""
    md = ["", f"## {s['name']}", "", f"Status: **{s['status']}**", ""]
    r = s.get("result")
    if r is None:
        return md
    md += [f"- compared: {r.quantity}", f"- expected law, tolerance: {r.description}"]
    if s.get("data"):
        md.append(f"- raw numbers: [{s['data']}]({s['data']}) (NetCDF)")
    if r.comparisons:
        md += ["", "| comparison | measured | expected | tolerance | kind | result |",
               "|---|---:|---:|---:|---|---|"]
        md += ["| " + " | ".join(_md_cell(x) for x in row) + " |" for row in _comparison_rows(r)]
        md += ["", "Kinds: " + "; ".join(f"`{k}`: {v}" for k, v in KINDS.items()
                                         if any(c.kind == k for c in r.comparisons)) + "."]
    if s.get("figure"):
        md += ["", f"![{s['name']}]({s['figure']})"]
    doc = _doc(s["entry"])
    if doc:
        md += ["", "<details><summary>what it tests and why the tolerance</summary>", "", "```text", doc,
               "```", "", "</details>"]
    if r.details and r.details.get("table"):
        md += ["", str(r.details["table"])]
    if r.error:
        md += ["", "Traceback:", "", "```text", r.error.rstrip(), "```"]
    elif r.details:
        md += ["", "<details><summary>details</summary>", "", "```json", _details_text(r), "```", "",
               "</details>"]
    return md


def _markdown(sections: list[dict[str, Any]], head: list[str]) -> str:
    """``report.md``: the head, the table of all checks, one section per check."""
    md = ["# meanfield validation report", ""] + [f"- {h}" for h in head] + [""] + _md_table(sections)
    for s in sections:
        md += _md_section(s)
    return "\n".join(md) + "\n"


# -- html ------------------------------------------------------------------------------------

_COLORS = {"pass": "#1a7f37", "FAIL": "#cf222e", "ERROR": "#cf222e", "not run": "#57606a"}
"""The colour of each status in ``report.html``."""


def _html_table(sections: list[dict[str, Any]]) -> list[str]:
    """The table of all checks: check, status, worst comparison, law, wall time."""
    esc = html.escape
    h = ["<table><tr><th>check</th><th>status</th><th>worst comparison</th><th>expected law, tolerance</th>"
         "<th>time (s)</th></tr>"]
    for s in sections:
        r = s.get("result")
        col = _COLORS.get(s["status"], "#000")
        anchor = esc(s["name"].replace(".", ""))
        if r is None:
            h.append(f"<tr><td><a href='#{anchor}'>{esc(s['name'])}</a></td><td>not run</td>"
                     "<td></td><td></td><td></td></tr>")
            continue
        w = s["meta"].get("wall_time_s")
        h.append(f"<tr><td><a href='#{anchor}'>{esc(s['name'])}</a></td>"
                 f"<td style='color:{col};font-weight:bold'>{esc(s['status'])}</td>"
                 f"<td>{esc(one_line(r))}</td><td>{esc(r.description)}</td>"
                 f"<td>{'' if w is None else f'{w:.1f}'}</td></tr>")
    h.append("</table>")
    return h


def _html_section(s: dict[str, Any]) -> list[str]:
    """One check's section, as :func:`_md_section`."""
    esc = html.escape
    anchor = esc(s["name"].replace(".", ""))
    col = _COLORS.get(s["status"], "#000")
    h = [f"<h2 id='{anchor}'>{esc(s['name'])} <span style='color:{col}'>{esc(s['status'])}</span></h2>"]
    r = s.get("result")
    if r is None:
        return h
    h.append("<ul>" + "".join(f"<li>{k}: {esc(str(v))}</li>" for k, v in
                              (("compared", r.quantity), ("expected law, tolerance", r.description))))
    if s.get("data"):
        h.append(f"<li>raw numbers: <a href='{esc(s['data'])}'>{esc(s['data'])}</a> (NetCDF)</li>")
    h.append("</ul>")
    if r.comparisons:
        h.append("<table><tr><th>comparison</th><th>measured</th><th>expected</th><th>tolerance</th>"
                 "<th>kind</th><th>result</th></tr>")
        for row in _comparison_rows(r):
            rc = _COLORS.get(row[-1], "#000")
            h.append("<tr>" + "".join(f"<td>{esc(x)}</td>" for x in row[:-1])
                     + f"<td style='color:{rc};font-weight:bold'>{row[-1]}</td></tr>")
        h.append("</table>")
    if s.get("figure"):
        h.append(f"<img src='{esc(s['figure'])}' alt='{esc(s['name'])}'>")
    doc = _doc(s["entry"])
    if doc:
        h.append("<details><summary>what it tests and why the tolerance</summary>"
                 f"<pre>{esc(doc)}</pre></details>")
    if r.details and r.details.get("table"):
        h.append(f"<pre>{esc(str(r.details['table']))}</pre>")
    if r.error:
        h.append(f"<p>Traceback:</p><pre>{esc(r.error)}</pre>")
    elif r.details:
        h.append(f"<details><summary>details</summary><pre>{esc(_details_text(r))}</pre></details>")
    return h


def _html(sections: list[dict[str, Any]], head: list[str]) -> str:
    """``report.html``: as :func:`_markdown`, with the statuses in colour."""
    esc = html.escape
    h = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>meanfield validation report</title>",
         "<style>body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}"
         "table{border-collapse:collapse;font-size:90%}td,th{border:1px solid #ccc;padding:3px 6px;"
         "vertical-align:top}pre{background:#f6f8fa;padding:.6em;overflow-x:auto;font-size:85%}"
         "img{max-width:100%}</style></head><body>",
         "<h1>meanfield validation report</h1><ul>"]
    h += [f"<li>{esc(x).replace('**', '')}</li>" for x in head]
    h += ["</ul>"] + _html_table(sections)
    for s in sections:
        h += _html_section(s)
    h.append("</body></html>")
    return "\n".join(h) + "\n"


# -- the report ------------------------------------------------------------------------------


def write_report(entries: list[SuiteEntry], out_dir: Path, *, suite: str, seed: int,
                 wall_time: float | None = None, interrupted: bool = False) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` from the records under ``out_dir``: the records
    are collected once (:func:`_sections`), then rendered as markdown and as html.

    Returns:
        The two paths.
    """
    out_dir = Path(out_dir)
    secs = _sections(entries, out_dir)
    head = _header(secs, suite=suite, seed=seed, wall_time=wall_time, interrupted=interrupted)
    md_path = out_dir / "report.md"
    _write(md_path, _markdown(secs, head))
    html_path = out_dir / "report.html"
    _write(html_path, _html(secs, head))
    return md_path, html_path


def _write(path: Path, text: str) -> None:
    write_text(path, text)


__all__ = ["write_report"]
