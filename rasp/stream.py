"""Incremental evaluation: a C-RASP program position by position, vectorized over the batch and over
the instances of every family.

Generation (``Program.run_batch`` for ``output generate``) appends one token at a time. Re-evaluating
the whole program after every token costs O(N) per step per core definition, and a copying program
over 150 symbols has 22 500 core definitions. This module keeps, for every counting operation, just
the state it needs (a running sum, a window of recent values, per-residue sums), so each new position
costs O(1) per operation, and it evaluates the *surface* program: a family ``BIGRAM[x, y]`` is one
array of shape ``(batch, |alphabet|, |alphabet|)``, not 22 500 separate definitions. The results are
identical to :func:`rasp.interp.evaluate` on the expanded core program (the tests check it): every
operation is causal, so the value at position i depends only on tokens 0..i.

**Representation.** While evaluating an expression inside a family definition, the bound symbol
variables (the family's parameters, then the variables of enclosing ``any``/``all``/``sum``) form the
*scope*; a value is an array of shape ``(B, d_1, ..., d_s)`` with ``d_k = |alphabet|`` if it depends
on the k-th variable and 1 otherwise (NumPy broadcasting does the rest). A definition's value is
stored with one axis per parameter. Token ids are indices into ``alphabet + special`` (as
:meth:`Program.encode` gives them); -1 is "no token" (padding), for which every token test is false.

**Counting.** ``#P`` and ``exists P`` keep a running sum (or a running or). ``#[g] P`` with a
(T, M)-regular guard (:mod:`rasp.guards`) keeps the last T values of P (the window d = i - j < T,
where g depends on (d, i mod M)) and, per residue r of j mod M, the number of earlier positions
j <= i - T with j = r (mod M) and P(j), combined with the far table F[i mod M, r]. Any other guard
keeps the whole history of P and evaluates g(i, j) for every j <= i (O(i) per step).

**RASP-L.** ``tokens``, ``indices`` and ``map``/``seqmap`` act on the current position only. A
``select`` keeps the keys of every position so far: its value at i is the row
``op(keys[j], queries[i])`` for j <= i, a (B, i + 1) mask; ``selector_width`` sums the row and
``aggregate`` keeps the values of every position so far and reduces them under the row with the
interpreter's own :func:`rasp.interp.aggregate_rows`. A step costs O(i) per such operation instead of
re-evaluating the whole (N x N) selector, so generating a long answer costs O(N^2) in all, not O(N^3).
The primitives are handled where every value is a plain sequence: outside families and quantifiers,
or inside them where they read none of the symbol variables (evaluated once, with shape (B,), and
broadcast over the instances' axes); :func:`supports` says no otherwise, and the caller re-evaluates
the whole program after every token.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import ast as A
from . import builtins
from .expand import instance_key, symbol_codes
from .guards import (TABLE_CAP, GuardForm, analyze_relation, eval_function, eval_relation, far_table,
                     position_names, table_cells)
from .interp import aggregate_rows, mean_is_wide
from .typecheck import symbol_comparison

_CMP = {
    "==": np.equal, "!=": np.not_equal, "<": np.less, ">": np.greater,
    "<=": np.less_equal, ">=": np.greater_equal,
}
_SYMBOL_CMP = _CMP

_SUPPORTED = (A.Tok, A.BoolConst, A.IntConst, A.Ref, A.Not, A.And, A.Or, A.Compare, A.Count, A.Exists, A.Cond,
              A.Add, A.Sub, A.Scale, A.Neg, A.Min, A.Max, A.PosPred, A.PosName, A.Quant) + A.RASPL_NODES


def supports(program) -> bool:
    """Whether :class:`Stream` can evaluate ``program``: C-RASP constructs anywhere, RASP-L primitives
    outside families and quantifiers (where every value is one sequence) and, inside them, where they
    read no symbol variable (``tokens != END`` in a family ``NEXT[x]``: the same sequence for every
    instance, evaluated once and broadcast)."""
    for sig in program.checked.signatures.values():
        d = sig.definition
        variables = {p.name for p in d.params} | {n.var for n in A.walk(d.expr) if isinstance(n, A.Quant)}
        if variables and sig.type == A.SELECTOR:
            return False
        for node in A.walk(d.expr):
            if not isinstance(node, _SUPPORTED):
                return False
            if isinstance(node, A.RASPL_NODES) and variables and not _reads_none_of(node, variables):
                return False
    return True


def _reads_none_of(node, variables: set) -> bool:
    """Whether a subtree reads none of these symbol variables (conservatively: a ``Q[y]`` of any
    variable, or a reference with a variable index, counts as reading one)."""
    for n in A.walk(node):
        if isinstance(n, A.Tok) and isinstance(n.symbol, A.SymVar):
            return False
        if isinstance(n, A.Ref) and (n.name in variables or any(isinstance(s, A.SymVar) for s in n.indices)):
            return False
    return True


def max_scope(program) -> int:
    """The largest number of symbol variables in scope anywhere (parameters + nested quantifiers)."""
    return max((len(s.definition.params) + A.quantifier_depth(s.definition.expr)
                for s in program.checked.signatures.values()), default=0)


# ============================================================================ counting state
@dataclass
class _CountState:
    """What one counting node remembers between positions."""

    exists: bool
    rel: A.PosExpr | None
    form: object = None  # GuardForm | NotRegular | None
    total: np.ndarray | None = None  # unguarded: running sum / running or
    window: list = field(default_factory=list)  # regular guard: the last T body values, newest last
    far: dict = field(default_factory=dict)  # regular guard: residue r -> count over j <= i - T, j = r
    table: np.ndarray | None = None  # regular guard: far table F[i mod M, j mod M]
    history: list = field(default_factory=list)  # general guard: every body value
    one_position: str | None = None  # "j" / "i": a relation of that position alone (O(1) a step)
    at: int = -1  # the position of the last step, and its value: a node the lowering shares between
    value: np.ndarray | None = None  # several expressions is read several times per position

    def step(self, i: int, body: np.ndarray) -> np.ndarray:
        if self.rel is None:
            if self.exists:
                self.total = body.copy() if self.total is None else (self.total | body)
                return self.total
            b = body.astype(np.int64)
            self.total = b if self.total is None else self.total + b
            return self.total
        if isinstance(self.form, GuardForm):
            T, M = self.form.window, self.form.period
            out = np.zeros(body.shape, dtype=np.int64)
            # far part: positions j <= i - T, counted per residue of j
            if i - T >= 0:
                j = i - T
                leaving = body if T == 0 else self.window[0]
                r = j % M
                self.far[r] = leaving.astype(np.int64) if r not in self.far else self.far[r] + leaving
            for r, c in self.far.items():
                if self.table[i % M, r]:
                    out = out + c
            # window: d = i - j in 0 .. min(T, i + 1) - 1
            if T > 0:
                self.window.append(body)
                if len(self.window) > T:
                    self.window.pop(0)
                for d in range(min(T, i + 1)):
                    if eval_relation(self.rel, i, i - d):
                        out = out + self.window[-1 - d]
            return out >= 1 if self.exists else out
        if self.one_position == "j":  # a relation of j alone: P where it holds, summed as it comes
            g = bool(eval_relation(self.rel, None, i))
            b = (body if g else np.zeros_like(body)).astype(np.int64)
            self.total = b if self.total is None else self.total + b
            return self.total >= 1 if self.exists else self.total
        if self.one_position == "i":  # of i alone: every P so far, where it holds at i
            b = body.astype(np.int64)
            self.total = b if self.total is None else self.total + b
            out = self.total if eval_relation(self.rel, i) else np.zeros_like(self.total)
            return out >= 1 if self.exists else out
        # general guard: the whole history
        self.history.append(body)
        out = np.zeros(body.shape, dtype=np.int64)
        js = np.arange(i + 1)
        g = np.broadcast_to(np.asarray(eval_relation(self.rel, i, js), dtype=bool), (i + 1,))
        for j in np.flatnonzero(g):
            out = out + self.history[j]
        return out >= 1 if self.exists else out


@dataclass
class _Trail:
    """The values one RASP-L operand (the keys of a select, the values of an aggregate) took at
    positions 0..i, in a buffer that doubles when full; and the node's value at the last step."""

    buf: np.ndarray | None = None
    n: int = 0
    at: int = -1
    value: np.ndarray | None = None

    def push(self, v: np.ndarray) -> np.ndarray:
        """Append the value at the next position; returns (B, positions so far)."""
        if self.buf is None:
            self.buf = np.empty((len(v), 16), dtype=np.int64)
        elif self.n == self.buf.shape[1]:
            self.buf = np.concatenate([self.buf, np.empty_like(self.buf)], axis=1)
        self.buf[:, self.n] = v
        self.n += 1
        return self.buf[:, : self.n]


# ============================================================================ the evaluator
class Stream:
    """Feed one token per row at a time with :meth:`step`; read definitions at the current position.

    ``values[name]`` is the value of definition ``name`` at the current position: shape (B,) for a plain
    definition, (B, m, ..., m) for a family (one axis per parameter, symbols in alphabet order).
    """

    def __init__(self, program, batch: int) -> None:
        self.program = program
        self.checked = program.checked
        self.alphabet = tuple(program.core.alphabet)
        self.symbols = tuple(program.core.symbols)
        self.codes = {s: k for k, s in enumerate(self.symbols)}
        self.m = len(self.alphabet)
        self.B = batch
        self.i = -1
        self.values: dict[str, np.ndarray] = {}
        self._counts: dict[int, _CountState] = {}
        self._trails: dict[int, _Trail] = {}
        self._bodies: dict[int, A.PosExpr] = {}
        self._tokens = np.full(batch, -1, dtype=np.int64)
        self._onehot = np.zeros((batch, self.m), dtype=bool)
        self._order = list(self.checked.order)

    # ------------------------------------------------------------------ stepping
    def step(self, tokens: np.ndarray) -> dict[str, np.ndarray]:
        """Advance every row by one position with these token ids (-1: none); returns ``values``."""
        self.i += 1
        self._tokens = np.asarray(tokens, dtype=np.int64)
        self._onehot = self._tokens[:, None] == np.arange(self.m)[None, :]
        for name in self._order:
            sig = self.checked.signatures[name]
            d = sig.definition
            scope = tuple(p.name for p in d.params)
            v = self._eval(d.expr, scope)
            if sig.type == A.SELECTOR:  # the current row, (B, i + 1): read by aggregate and selector_width
                self.values[name] = v
                continue
            want = (self.B,) + (self.m,) * len(scope)
            dtype = bool if sig.type == A.BOOL else np.int64
            self.values[name] = np.broadcast_to(np.asarray(v, dtype=dtype), want)
        return self.values

    def core_values(self) -> dict[str, np.ndarray]:
        """The current values under core names (``P[a,b]``), each of shape (B,); selectors (a row of
        a matrix, not a value per position) are left out."""
        out = {}
        for name in self._order:
            if self.checked.signatures[name].type == A.SELECTOR:
                continue
            v = self.values[name]
            k = v.ndim - 1
            if k == 0:
                out[name] = v
                continue
            for idx in np.ndindex(*v.shape[1:]):
                out[instance_key(name, tuple(self.alphabet[t] for t in idx))] = v[(slice(None),) + idx]
        return out

    # ------------------------------------------------------------------ expressions
    def _shape(self, scope, deps=()) -> tuple[int, ...]:
        return (self.B,) + tuple(self.m if v in deps else 1 for v in scope)

    def _const(self, value, scope):
        return np.full(self._shape(scope), value, dtype=bool if isinstance(value, bool) else np.int64)

    def _symbol_axis(self, var: str, scope) -> np.ndarray:
        """The codes of variable ``var`` along its axis: shape (1, .., m, .., 1)."""
        shape = [1] * (1 + len(scope))
        shape[1 + scope.index(var)] = self.m
        return np.arange(self.m).reshape(shape)

    def _eval(self, e, scope):  # noqa: C901 - one case per node type
        if isinstance(e, A.Tok):
            s = e.symbol
            if isinstance(s, A.SymVar):
                shape = list(self._shape(scope))
                shape[1 + scope.index(s.name)] = self.m
                return self._onehot.reshape(shape)
            code = self.codes[s.value]
            return (self._tokens == code).reshape(self._shape(scope))
        if isinstance(e, A.BoolConst):
            return self._const(bool(e.value), scope)
        if isinstance(e, A.IntConst):
            return self._const(int(e.value), scope)
        if isinstance(e, A.Ref):
            if e.name not in self.checked.signatures and e.name in builtins.UNARY:
                return self._pos(builtins.UNARY[e.name], scope)
            return self._ref(e, scope)
        if isinstance(e, A.PosName):
            return self._pos(builtins.UNARY[e.name], scope)
        if isinstance(e, A.PosPred):
            return self._pos(e.rel.expr, scope)
        if isinstance(e, A.Not):
            return ~self._eval(e.operand, scope)
        if isinstance(e, A.And):
            return self._eval(e.left, scope) & self._eval(e.right, scope)
        if isinstance(e, A.Or):
            return self._eval(e.left, scope) | self._eval(e.right, scope)
        if isinstance(e, A.Compare):
            if symbol_comparison(e, set(scope)):
                return self._symbol_compare(e, scope)
            return _CMP[e.op](self._eval(e.left, scope), self._eval(e.right, scope))
        if isinstance(e, (A.Count, A.Exists)):
            return self._count(e, scope)
        if isinstance(e, A.Cond):
            return np.where(self._eval(e.test, scope), self._eval(e.then, scope), self._eval(e.other, scope))
        if isinstance(e, A.Add):
            return self._eval(e.left, scope) + self._eval(e.right, scope)
        if isinstance(e, A.Sub):
            return self._eval(e.left, scope) - self._eval(e.right, scope)
        if isinstance(e, A.Scale):
            return e.k * self._eval(e.operand, scope)
        if isinstance(e, A.Neg):
            return -self._eval(e.operand, scope)
        if isinstance(e, A.Min):
            return np.minimum(self._eval(e.left, scope), self._eval(e.right, scope))
        if isinstance(e, A.Max):
            return np.maximum(self._eval(e.left, scope), self._eval(e.right, scope))
        if isinstance(e, A.Quant):
            inner = scope + (e.var,)
            body = self._eval(e.body, inner)
            full = np.broadcast_to(body, body.shape[:-1] + (self.m,))
            if e.op == "any":
                return full.any(axis=-1)
            if e.op == "all":
                return full.all(axis=-1)
            return full.sum(axis=-1, dtype=np.int64)
        # RASP-L: outside families and quantifiers, or reading none of their variables (supports):
        # every value has shape (B,), placed on the scope's axes as size-1 axes
        if scope and isinstance(e, A.RASPL_NODES):
            return np.asarray(self._eval(e, ())).reshape((self.B,) + (1,) * len(scope))
        if isinstance(e, A.Tokens):
            return self._tokens
        if isinstance(e, A.Indices):
            return self._const(self.i, scope)
        if isinstance(e, A.Map):
            args = {p: self._seq(a, scope) for p, a in zip(e.params, e.args)}
            body = self._bodies.get(id(e))
            if body is None:  # symbols in the function ("+") read as their codes, once per node
                body = self._bodies[id(e)] = symbol_codes(e.body, self.codes)
            return np.broadcast_to(np.asarray(eval_function(body, args)), (self.B,))
        if isinstance(e, A.Select):
            return self._select(e, scope)
        if isinstance(e, A.SelectorWidth):
            return self._eval(e.selector, scope).sum(axis=1, dtype=np.int64)
        if isinstance(e, A.Aggregate):
            return self._aggregate(e, scope)
        raise TypeError(f"the streaming evaluator does not handle {type(e).__name__}")

    def _seq(self, e, scope) -> np.ndarray:
        """A RASP-L operand at the current position as int64 (bools as 0/1, as the interpreter reads them)."""
        return np.broadcast_to(np.asarray(self._eval(e, scope)).astype(np.int64), (self.B,))

    def _trail(self, e) -> _Trail:
        st = self._trails.get(id(e))
        if st is None:
            st = self._trails[id(e)] = _Trail()
        return st

    def _select(self, e: A.Select, scope) -> np.ndarray:
        """Row i of the selector: key j <= i is selected when ``op(keys[j], queries[i])``."""
        st = self._trail(e)
        if st.at == self.i:  # a node shared by several expressions: its keys are pushed once per position
            return st.value
        keys = st.push(self._seq(e.keys, scope))
        queries = self._seq(e.queries, scope)  # evaluated even for ``true``: nested counts must step
        row = np.ones(keys.shape, dtype=bool) if e.op == "true" else _CMP[e.op](keys, queries[:, None])
        st.value, st.at = row, self.i
        return row

    def _aggregate(self, e: A.Aggregate, scope) -> np.ndarray:
        st = self._trail(e)
        if st.at == self.i:
            return st.value
        row = self._eval(e.selector, scope)
        values = st.push(self._seq(e.values, scope))
        wide = e.reduction == "mean" and mean_is_wide(values, values.shape[1])
        out = aggregate_rows(row[:, None, :], values, e.reduction, e.default, wide)[:, 0]
        st.value, st.at = out, self.i
        return out

    def _pos(self, rel, scope):
        return self._const(bool(eval_relation(rel, self.i)), scope)

    def _symbol_compare(self, e: A.Compare, scope):
        def side(v):
            if isinstance(v, A.Ref):
                return self._symbol_axis(v.name, scope)
            return np.full([1] * (1 + len(scope)), self.codes[v.symbol.value])

        out = _SYMBOL_CMP[e.op](side(e.left), side(e.right))
        return np.broadcast_to(out, np.broadcast_shapes(out.shape, self._shape(scope)))

    def _ref(self, e: A.Ref, scope):
        """A definition's value with its parameter axes placed on the scope's axes."""
        v = self.values[e.name]  # (B, m, ..., m), one axis per parameter
        if self.checked.signatures[e.name].type == A.SELECTOR:
            return v  # a selector row (no parameters: supports)
        # literal indices: take the slice (from the last axis back, so axis numbers stay valid)
        var_axes: list[tuple[int, str]] = []
        for k, s in enumerate(e.indices):
            if isinstance(s, A.SymVar):
                var_axes.append((1 + k, s.name))
        for k in reversed(range(len(e.indices))):
            s = e.indices[k]
            if isinstance(s, A.SymLit):
                v = np.take(v, self.codes[s.value], axis=1 + k)
        # after slicing, the variable axes are 1 .. len(var_axes) in order
        names = [n for _, n in var_axes]
        # repeated variables (P[x, x]): take the diagonal
        while len(set(names)) != len(names):
            a = next(k for k, n in enumerate(names) if names.index(n) != k)
            b = names.index(names[a])
            v = np.moveaxis(np.diagonal(v, axis1=1 + b, axis2=1 + a), -1, 1 + b)
            names.pop(a)
        # place each variable on its scope axis, size-1 axes elsewhere
        target = [scope.index(n) for n in names]
        order = np.argsort(target)
        v = np.transpose(v, (0,) + tuple(1 + int(k) for k in order))
        present = sorted(target)
        shape = [v.shape[0]] + [1] * len(scope)
        for k, t in enumerate(present):
            shape[1 + t] = v.shape[1 + k]
        return v.reshape(shape)

    def _count(self, e, scope):
        key = id(e)
        st = self._counts.get(key)
        if st is not None and st.at == self.i:  # already stepped at this position (a shared node)
            return st.value
        body = np.asarray(self._eval(e.body, scope), dtype=bool)
        if st is None:
            rel = None
            if e.guard is not None:
                rel = builtins.BINARY[e.guard.name] if isinstance(e.guard, A.GuardName) else e.guard.expr
            st = _CountState(exists=isinstance(e, A.Exists), rel=rel)
            if rel is not None:
                form = analyze_relation(rel)
                # a table beyond TABLE_CAP (period 10^6: 10^12 cells) is counted by the general path,
                # as the interpreter does
                if isinstance(form, GuardForm) and table_cells(form) <= TABLE_CAP:
                    st.form, st.table = form, far_table(rel, form)
                else:
                    names = position_names(rel)
                    st.one_position = next(iter(names)) if len(names) == 1 else None
            self._counts[key] = st
        st.value, st.at = st.step(self.i, body), self.i
        return st.value


# ============================================================================ whole inputs
def evaluate(program, sequences: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Every core definition at every position, like :func:`rasp.interp.evaluate` on the right-padded
    batch (padding = -1): core name -> (B, N) array."""
    B = len(sequences)
    N = max((len(s) for s in sequences), default=0)
    ids = np.full((B, N), -1, dtype=np.int64)
    for r, s in enumerate(sequences):
        ids[r, : len(s)] = s
    st = Stream(program, B)
    cols: dict[str, list[np.ndarray]] = {}
    for t in range(N):
        st.step(ids[:, t])
        for name, v in st.core_values().items():
            cols.setdefault(name, []).append(np.array(v))
    return {name: np.stack(vs, axis=1) for name, vs in cols.items()}


#: bound on batch x (largest family value) per chunk in :func:`generate`, to keep memory moderate
CHUNK_ELEMENTS = 1 << 22


def generate(program, sequences: list[np.ndarray], limits: list[int]) -> list[list[int]]:
    """Greedy decoding with the streaming evaluator; the same result as re-evaluating the program after
    every token: at each step the first symbol x (alphabet order) whose NEXT[x] holds at the last
    position is appended; a row stops when none holds or after ``limits[r]`` tokens."""
    names = program.core.output.names
    out_name = names[0].split("[", 1)[0] if names else None
    width = max(1, len(program.core.alphabet) ** max(1, max_scope(program)))
    chunk = max(1, CHUNK_ELEMENTS // width)
    order = sorted(range(len(sequences)), key=lambda r: len(sequences[r]))
    result: list[list[int]] = [[] for _ in sequences]
    for start in range(0, len(order), chunk):
        rows = order[start:start + chunk]
        got = _generate_chunk(program, out_name, [sequences[r] for r in rows], [limits[r] for r in rows])
        for r, g in zip(rows, got):
            result[r] = g
    return result


def _generate_chunk(program, out_name, seqs, limits) -> list[list[int]]:
    B = len(seqs)
    lens = np.array([len(s) for s in seqs], dtype=np.int64)
    generated: list[list[int]] = [[] for _ in seqs]
    active = np.ones(B, dtype=bool)
    st = Stream(program, B)
    nxt_tok = np.full(B, -1, dtype=np.int64)
    t = 0
    while True:
        in_prompt = t < lens
        if not in_prompt.any() and not active.any():
            break
        tok = np.where(in_prompt, [s[t] if t < len(s) else -1 for s in seqs], np.where(active, nxt_tok, -1))
        values = st.step(tok)
        decide = active & (t >= lens - 1)
        if decide.any():
            nxt = values[out_name]  # (B, m)
            for r in np.flatnonzero(decide):
                if len(generated[r]) >= limits[r]:
                    active[r] = False
                    continue
                hits = np.flatnonzero(nxt[r])
                if len(hits) == 0:
                    active[r] = False
                    continue
                sid = int(hits[0])  # the data alphabet comes first among the token ids
                generated[r].append(sid)
                nxt_tok[r] = sid
        t += 1
    return generated
