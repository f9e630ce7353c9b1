"""Traces: the value of every definition at every position, as a text table or an HTML page.

Rows are definitions in evaluation order (family instances included), columns are positions
(0-based) headed by the input tokens. The HTML file is self-contained (inline CSS, no scripts).
"""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np

from .program import Program, split_tokens


def _cell(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "T" if v else "."
    return str(int(v))


def trace_rows(program: Program, tokens) -> tuple[list[str], list[tuple[str, str, list[str]]]]:
    """(tokens, [(name, type, cells)]) for one input."""
    toks = split_tokens(tokens)
    values = program.evaluate([toks])
    rows = [(d.name, d.type, [_cell(v) for v in values[d.name][0, : len(toks)]]) for d in program.core.defs]
    return toks, rows


def trace_text(program: Program, inputs: Sequence) -> str:
    blocks = []
    for tokens in inputs:
        toks, rows = trace_rows(program, tokens)
        header = ["pos", *[str(p) for p in range(len(toks))]]
        table = [header, ["token", *toks]] + [[f"{name}", *cells] for name, _, cells in rows]
        widths = [max(len(r[c]) for r in table) for c in range(len(header))]
        lines = ["  ".join(cell.rjust(w) if c else cell.ljust(w) for c, (cell, w) in enumerate(zip(r, widths)))
                 for r in table]
        lines.insert(2, "-" * len(lines[0]))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


_CSS = """
body{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px;margin:1.5em}
table{border-collapse:collapse;margin-bottom:2em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:center}
th{background:#f0f0f0}
td.name{text-align:left;font-weight:bold;white-space:nowrap}
td.t{background:#c8f7c5} td.f{color:#bbb}
td.count{background:#eef4ff}
tr.out td.name{color:#a00}
caption{text-align:left;font-weight:bold;padding:.3em 0}
"""


def trace_html(program: Program, inputs: Sequence, title: str = "C-RASP trace") -> str:
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_CSS}</style></head><body>", f"<h1>{html.escape(title)}</h1>",
             "<details><summary>program</summary><pre>", html.escape(str(program)), "</pre></details>"]
    outputs = set(program.core.output.names)
    for n, tokens in enumerate(inputs):
        toks, rows = trace_rows(program, tokens)
        parts.append(f"<table><caption>input {n + 1}: {html.escape(' '.join(toks))}</caption>")
        parts.append("<tr><th>position</th>" + "".join(f"<th>{p}</th>" for p in range(len(toks))) + "</tr>")
        parts.append("<tr><th>token</th>" + "".join(f"<th>{html.escape(t)}</th>" for t in toks) + "</tr>")
        for name, typ, cells in rows:
            cls = ' class="out"' if name in outputs else ""
            tds = "".join(
                f'<td class="{"count" if typ == "count" else ("t" if c == "T" else "f")}">{html.escape(c)}</td>'
                for c in cells
            )
            parts.append(f'<tr{cls}><td class="name">{html.escape(name)}</td>{tds}</tr>')
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)
