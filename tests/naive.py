"""The oracle: a naive C-RASP evaluator written straight from the definitions.

Nothing here is clever on purpose. Every expression is evaluated at every position with plain
Python loops over positions (one list of values per node); a count ``#[g] P`` at position i loops over j = 0..i and evaluates the
relation g(i, j) on Python ints (``/`` is ``//`` and ``%`` is ``%``, Python's floor semantics). It
does not use :mod:`rasp.interp` or :mod:`rasp.guards`; it only reads the core program
(:class:`rasp.ast.CoreProgram`, i.e. ``program.core``).

* :func:`naive_values` -- {definition name: [value at position 0, 1, ...]} (bools are ``bool``,
  counts ``int``);
* :func:`naive_output` -- the output value in the same form as :func:`rasp.run`: an acceptor's
  bool, a generator's list of generated tokens, a predictor's list (one per position) of allowed
  symbols in alphabet order.

It is slow (O(n^2) per count): keep inputs to a few hundred tokens.
"""
from __future__ import annotations

from fractions import Fraction

from rasp import ast as A


# ---------------------------------------------------------------------- relations over positions
def rel_value(r, i: int, j: int | None = None):
    """The value of a position relation (or a term inside one) at positions i and j."""
    if isinstance(r, A.PInt):
        return r.value
    if isinstance(r, A.PBool):
        return r.value
    if isinstance(r, A.PVar):
        if r.name == "i":
            return i
        if r.name == "j":
            if j is None:
                raise ValueError("j used in a predicate of i alone")
            return j
        raise ValueError(f"unknown position variable {r.name!r}")
    if isinstance(r, A.PNeg):
        return -rel_value(r.operand, i, j)
    if isinstance(r, A.PBin):
        x = rel_value(r.left, i, j)
        y = rel_value(r.right, i, j)
        if r.op == "+":
            return x + y
        if r.op == "-":
            return x - y
        if r.op == "*":
            return x * y
        if r.op == "/":
            return x // y
        if r.op == "%":
            return x % y
        raise ValueError(f"unknown operator {r.op!r}")
    if isinstance(r, A.PCmp):
        return compare(r.op, rel_value(r.left, i, j), rel_value(r.right, i, j))
    if isinstance(r, A.PAnd):
        return bool(rel_value(r.left, i, j)) and bool(rel_value(r.right, i, j))
    if isinstance(r, A.POr):
        return bool(rel_value(r.left, i, j)) or bool(rel_value(r.right, i, j))
    if isinstance(r, A.PNot):
        return not rel_value(r.operand, i, j)
    raise TypeError(f"not a relation node: {r!r}")


def compare(op: str, x, y) -> bool:
    if op == "==":
        return x == y
    if op == "!=":
        return x != y
    if op == "<":
        return x < y
    if op == ">":
        return x > y
    if op == "<=":
        return x <= y
    if op == ">=":
        return x >= y
    raise ValueError(f"unknown comparison {op!r}")


# ---------------------------------------------------------------------- expressions
def column(e, tokens: list[str], values: dict[str, list]) -> list:
    """The values of core expression ``e`` at positions 0..n-1 (``values``: earlier definitions).

    Each node is evaluated position by position with a plain loop; a count loops over j = 0..i.
    """
    n = len(tokens)
    if isinstance(e, A.Tok):
        return [tokens[i] == e.symbol.value for i in range(n)]
    if isinstance(e, A.BoolConst):
        return [e.value for i in range(n)]
    if isinstance(e, A.IntConst):
        return [e.value for i in range(n)]
    if isinstance(e, A.Ref):
        return list(values[e.name])
    if isinstance(e, A.Not):
        x = column(e.operand, tokens, values)
        return [not x[i] for i in range(n)]
    if isinstance(e, A.PosPred):
        return [bool(rel_value(e.rel.expr, i)) for i in range(n)]
    if isinstance(e, A.Count):
        body = column(e.body, tokens, values)
        out = []
        for i in range(n):
            total = 0
            for j in range(0, i + 1):  # j <= i always
                if e.guard is not None and not rel_value(e.guard.expr, i, j):
                    continue
                if body[j]:
                    total += 1
            out.append(total)
        return out
    if isinstance(e, A.Cond):
        test = column(e.test, tokens, values)
        then = column(e.then, tokens, values)
        other = column(e.other, tokens, values)
        return [then[i] if test[i] else other[i] for i in range(n)]
    if isinstance(e, A.Scale):
        x = column(e.operand, tokens, values)
        return [e.k * x[i] for i in range(n)]
    if isinstance(e, (A.Tokens, A.Indices, A.Map, A.Select, A.Aggregate, A.SelectorWidth)):
        return raspl_column(e, tokens, values)
    x = column(e.left, tokens, values)
    y = column(e.right, tokens, values)
    if isinstance(e, A.And):
        return [bool(x[i]) and bool(y[i]) for i in range(n)]
    if isinstance(e, A.Or):
        return [bool(x[i]) or bool(y[i]) for i in range(n)]
    if isinstance(e, A.Compare):
        return [compare(e.op, x[i], y[i]) for i in range(n)]
    if isinstance(e, A.Add):
        return [x[i] + y[i] for i in range(n)]
    if isinstance(e, A.Sub):
        return [x[i] - y[i] for i in range(n)]
    if isinstance(e, A.Min):
        return [min(x[i], y[i]) for i in range(n)]
    if isinstance(e, A.Max):
        return [max(x[i], y[i]) for i in range(n)]
    raise TypeError(f"not a core expression: {e!r}")


# ---------------------------------------------------------------------- RASP-L (Zhou et al.)
#: key under which naive_values passes the token codes (index in alphabet + special) to column()
CODES = "<token codes>"


def wrap64(v: int) -> int:
    """``v`` as a 64-bit two's-complement integer: RASP-L map arithmetic wraps around (README)."""
    return (v + 2 ** 63) % 2 ** 64 - 2 ** 63


def fn_value(r, env: dict):
    """A map function's body on Python ints; ``env`` binds its parameters (``/`` is ``//``; ``+ - *``
    and negation wrap around at 64 bits, as the language says)."""
    if isinstance(r, (A.PInt, A.PBool)):
        return r.value
    if isinstance(r, A.PVar):
        return env[r.name]
    if isinstance(r, A.PNeg):
        return wrap64(-fn_value(r.operand, env))
    if isinstance(r, A.PBin):
        x, y = fn_value(r.left, env), fn_value(r.right, env)
        return {"+": lambda: wrap64(x + y), "-": lambda: wrap64(x - y), "*": lambda: wrap64(x * y),
                "/": lambda: x // y, "%": lambda: x % y}[r.op]()
    if isinstance(r, A.PCmp):
        return compare(r.op, fn_value(r.left, env), fn_value(r.right, env))
    if isinstance(r, A.PAnd):
        return bool(fn_value(r.left, env)) and bool(fn_value(r.right, env))
    if isinstance(r, A.POr):
        return bool(fn_value(r.left, env)) or bool(fn_value(r.right, env))
    if isinstance(r, A.PNot):
        return not fn_value(r.operand, env)
    if isinstance(r, A.PCond):
        return fn_value(r.then, env) if fn_value(r.test, env) else fn_value(r.other, env)
    if isinstance(r, A.PTable):
        return dict(r.entries).get(int(fn_value(r.index, env)), 0)  # a missing key gives 0
    raise TypeError(f"not a map function node: {r!r}")


def selected(keys: list, queries: list, op: str) -> list[list[int]]:
    """For each query i, the keys j <= i (causal) with ``op(keys[j], queries[i])``."""
    rows = []
    for i in range(len(queries)):
        row = []
        for j in range(0, i + 1):
            if op == "true" or compare(op, int(keys[j]), int(queries[i])):
                row.append(j)
        rows.append(row)
    return rows


def raspl_column(e, tokens: list[str], values: dict[str, list]) -> list:
    """tokens / indices / map / seqmap / select / aggregate / selector_width, loop by loop.

    A selector's column holds, at query i, the list of selected key positions j."""
    n = len(tokens)
    if isinstance(e, A.Tokens):
        return list(values[CODES])
    if isinstance(e, A.Indices):
        return list(range(n))
    if isinstance(e, A.Map):
        args = [column(a, tokens, values) for a in e.args]
        return [fn_value(e.body, {p: int(a[i]) for p, a in zip(e.params, args)}) for i in range(n)]
    if isinstance(e, A.Select):
        return selected(column(e.keys, tokens, values), column(e.queries, tokens, values), e.op)
    if isinstance(e, A.SelectorWidth):
        return [len(row) for row in column(e.selector, tokens, values)]
    if isinstance(e, A.Aggregate):
        rows = column(e.selector, tokens, values)
        vals = [int(v) for v in column(e.values, tokens, values)]
        out = []
        for i in range(n):
            picked = [vals[j] for j in rows[i]]
            if not picked:
                out.append(e.default)
            elif e.reduction == "mean":
                out.append(int(Fraction(sum(picked), len(picked))))  # truncates toward zero
            elif e.reduction == "max":
                out.append(max(picked))
            else:
                out.append(min(picked))
        return out
    raise TypeError(f"not a RASP-L expression: {e!r}")


def naive_values(core: A.CoreProgram, tokens) -> dict[str, list]:
    """{definition name: [value at each position]} for one input (a list of token strings)."""
    tokens = tokens.split() if isinstance(tokens, str) else list(tokens)
    for p, t in enumerate(tokens):
        if t not in core.symbols:
            raise ValueError(f"token {t!r} at position {p} is not in {core.symbols}")
    values: dict[str, list] = {CODES: [core.symbols.index(t) for t in tokens]}
    for d in core.defs:
        col = column(d.expr, tokens, values)
        values[d.name] = col if d.type == A.SELECTOR else [bool(v) if d.type == A.BOOL else int(v) for v in col]
    del values[CODES]
    return values


def default_max_new(n: int) -> int:
    return 2 * n + 8


def naive_output(core: A.CoreProgram, tokens, max_new: int | None = None):
    """The program's output for one input, in the form :func:`rasp.run` returns it."""
    tokens = tokens.split() if isinstance(tokens, str) else list(tokens)
    if not tokens:
        raise ValueError("empty input")
    kind = core.output.kind
    if kind == "accept":
        values = naive_values(core, tokens)
        return values[core.output.names[0]][-1]
    if kind == "predict":
        values = naive_values(core, tokens)
        out = []
        for i in range(len(tokens)):
            out.append([a for a, name in zip(core.alphabet, core.output.names) if values[name][i]])
        return out
    if kind == "generate":
        limit = default_max_new(len(tokens)) if max_new is None else max_new
        current = list(tokens)
        generated: list[str] = []
        while len(generated) < limit:
            values = naive_values(core, current)
            nxt = None
            for a, name in zip(core.alphabet, core.output.names):
                if values[name][-1]:
                    nxt = a
                    break
            if nxt is None:
                break
            current.append(nxt)
            generated.append(nxt)
        return generated
    raise ValueError(f"unknown output kind {kind!r}")
