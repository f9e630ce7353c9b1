"""Traces: the value of every definition at every position, as a text table or an HTML page.

Rows are definitions in evaluation order (family instances included), columns are positions
(0-based) headed by the input tokens; a generator's trace goes on over the tokens it generated
(marked), and a RASP-L selector's row gives, per query position, the key positions it selects. The HTML file is self-contained (inline CSS, no scripts).
"""
from __future__ import annotations

import html
from typing import Sequence

import numpy as np

from .ast import SELECTOR
from .program import Program, split_tokens


def _cell(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "T" if v else "."
    return str(int(v))


def _ranges(keys: np.ndarray) -> str:
    """Selected key positions as ranges: ``0-3,5`` (a causal ``true`` selector stays short)."""
    parts, k = [], 0
    while k < len(keys):
        e = k
        while e + 1 < len(keys) and keys[e + 1] == keys[e] + 1:
            e += 1
        parts.append(str(keys[k]) if e == k else f"{keys[k]}-{keys[e]}")
        k = e + 1
    return ",".join(parts) or "-"


def _selector_cells(selector, n: int) -> list[str]:
    """A RASP-L selector's row: per query position, the key positions it selects."""
    cells = [""] * n
    for s, e, m in selector.masks():
        for q in range(s, min(e, n)):
            cells[q] = _ranges(m[0, q - s, :n].nonzero()[0])
    return cells


def trace_rows(program: Program, tokens, generated: Sequence[str] = ()
               ) -> tuple[list[str], list[tuple[str, str, list[str]]]]:
    """(tokens, [(name, type, cells)]) for one input; ``generated``: a generator's output, traced
    after the input (the program is causal: the values at the input's positions do not change, and
    the value at each generated position is the one that chose the next token)."""
    toks = split_tokens(tokens) + list(generated)
    values = program.evaluate([toks])
    rows = []
    for d in program.core.defs:
        v = values[d.name]
        cells = _selector_cells(v, len(toks)) if d.type == SELECTOR else [_cell(x) for x in v[0, : len(toks)]]
        rows.append((d.name, d.type, cells))
    return toks, rows


def _alphabet_note(program: Program) -> str | None:
    """The data alphabet the trace ran over, when it is not the one the program text declares
    (``--alphabet``)."""
    declared = program.checked.alphabet
    if declared is not None and tuple(declared.symbols) != tuple(program.alphabet):
        return "alphabet used (--alphabet): " + " ".join(program.alphabet)
    return None


def _tables(program: Program, inputs: Sequence, labels: Sequence[str] | None,
            generated: Sequence[Sequence[str]] | None):
    """Per input: (label, the prompt's tokens, the generated ones, every token, rows of trace_rows)."""
    for k, tokens in enumerate(inputs):
        gen = list(generated[k]) if generated is not None else []
        toks, rows = trace_rows(program, tokens, gen)
        yield (labels[k] if labels is not None else f"input {k + 1}"), toks[:len(toks) - len(gen)], gen, toks, rows


def trace_text(program: Program, inputs: Sequence, *, labels: Sequence[str] | None = None,
               generated: Sequence[Sequence[str]] | None = None) -> str:
    """A text table per input, each under a line naming it (``labels``, e.g. ``<stdin> line 3``).
    A generator's generated tokens (``generated``) are traced after the input, marked ``gen``."""
    blocks = []
    note = _alphabet_note(program)
    if note:
        blocks.append(note)
    for label, prompt, gen, toks, rows in _tables(program, inputs, labels, generated):
        header = ["pos", *[str(p) for p in range(len(toks))]]
        table = [header, ["token", *toks]]
        if gen:
            table.append(["", *([""] * (len(toks) - len(gen)) + ["gen"] * len(gen))])
        table += [[f"{name}", *cells] for name, _, cells in rows]
        widths = [max(len(r[c]) for r in table) for c in range(len(header))]
        lines = ["  ".join(cell.rjust(w) if c else cell.ljust(w) for c, (cell, w) in enumerate(zip(r, widths)))
                 for r in table]
        lines.insert(3 if gen else 2, "-" * len(lines[0]))
        blocks.append(f"{label}: {' '.join(prompt)}\n" + "\n".join(lines))
    return "\n\n".join(blocks) + "\n"


_CSS = """
body{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px;margin:1.5em}
table{border-collapse:collapse;margin-bottom:2em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:center}
th{background:#f0f0f0}
td.name{text-align:left;font-weight:bold;white-space:nowrap}
td.t{background:#c8f7c5} td.f{color:#bbb}
td.count{background:#eef4ff}
td.sel{background:#fff6e0;font-size:11px}
th.gen{background:#ffe9b3}
tr.out td.name{color:#a00}
caption{text-align:left;font-weight:bold;padding:.3em 0}
"""


def trace_html(program: Program, inputs: Sequence, title: str = "C-RASP trace", *,
               labels: Sequence[str] | None = None, generated: Sequence[Sequence[str]] | None = None) -> str:
    """One table per input (see :func:`trace_text` for ``labels`` and ``generated``)."""
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_CSS}</style></head><body>", f"<h1>{html.escape(title)}</h1>",
             "<details><summary>program</summary><pre>", html.escape(str(program)), "</pre></details>"]
    note = _alphabet_note(program)
    if note:
        parts.append(f"<p>{html.escape(note)}</p>")
    outputs = set(program.core.output.names)
    for label, prompt, gen, toks, rows in _tables(program, inputs, labels, generated):
        first_gen = len(prompt)
        parts.append(f"<table><caption>{html.escape(label)}: {html.escape(' '.join(prompt))}"
                     + (f" (then generated: {html.escape(' '.join(gen))})" if gen else "") + "</caption>")
        parts.append("<tr><th>position</th>" + "".join(f"<th>{p}</th>" for p in range(len(toks))) + "</tr>")
        heads = ("<th class='gen'>" if p >= first_gen else "<th>" for p in range(len(toks)))
        parts.append("<tr><th>token</th>" + "".join(f"{h}{html.escape(t)}</th>" for h, t in zip(heads, toks)) + "</tr>")
        for name, typ, cells in rows:
            cls = ' class="out"' if name in outputs else ""
            kind = {"count": "count", SELECTOR: "sel"}.get(typ)
            tds = "".join(
                f'<td class="{kind or ("t" if c == "T" else "f")}">{html.escape(c)}</td>'
                for c in cells
            )
            parts.append(f'<tr{cls}><td class="name">{html.escape(name)}</td>{tds}</tr>')
        parts.append("</table>")
    parts.append("</body></html>")
    return "\n".join(parts)
