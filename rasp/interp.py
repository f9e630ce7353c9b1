"""The vectorized interpreter: core program + batch of inputs -> the value of every definition at
every position.

A batch is a right-padded (B, N) array of token ids (-1 = padding). Every operation is causal
(position i reads only positions <= i), so padding never changes a real position, and each row is
read at its own last index. Counts are exact int64, bools numpy bool.

Cost per operation is O(B N) for everything in C-RASP[periodic, local]:

* ``#P``: a prefix sum;
* ``#[g] P`` with g (T, M)-regular (:mod:`rasp.guards`): T shifted copies of P for the window and
  M residue-class prefix sums shifted by T for the far part, O(B N (T + M));
* ``pos[phi]``: phi evaluated on the index vector;
* ``#[g] P`` with g a relation of j alone (``j <= 2``) or of i alone: a mask over positions and a
  prefix sum.

Any other guard, and a regular one whose table exceeds ``TABLE_CAP`` or whose T + M exceeds
max(N, GENERAL_CHUNK) (the general path is cheaper then), takes the general path: the (query x key) guard
matrix in chunks of queries,
O(B N^2) time and O(N * chunk) memory. The naive evaluator in ``tests/naive.py`` is the
specification all of these are tested against.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from . import ast as A
from .guards import (TABLE_CAP, GuardForm, analyze_relation, eval_function, eval_relation, far_table,
                     position_names, table_cells)

_CMP = {
    "==": np.equal, "!=": np.not_equal, "<": np.less, ">": np.greater,
    "<=": np.less_equal, ">=": np.greater_equal,
}

#: query-chunk size of the general O(N^2) path
GENERAL_CHUNK = 512


@dataclass
class Batch:
    """Token ids, right-padded with -1, and each row's length."""

    ids: np.ndarray  # (B, N) int64
    lengths: np.ndarray  # (B,) int64

    @property
    def shape(self) -> tuple[int, int]:
        return self.ids.shape


def make_batch(sequences: list[list[int]] | list[np.ndarray]) -> Batch:
    lengths = np.array([len(s) for s in sequences], dtype=np.int64)
    n = int(lengths.max()) if len(lengths) else 0
    ids = np.full((len(sequences), n), -1, dtype=np.int64)
    for r, s in enumerate(sequences):
        ids[r, : len(s)] = s
    return Batch(ids, lengths)


@dataclass
class _Env:
    program: A.CoreProgram
    batch: Batch
    values: dict[str, np.ndarray] = field(default_factory=dict)
    forms: dict[int, object] = field(default_factory=dict)

    @property
    def index(self) -> np.ndarray:
        return np.arange(self.batch.shape[1], dtype=np.int64)


def count_with_guard(P: np.ndarray, rel: A.PosExpr, form: GuardForm | None = None) -> np.ndarray:
    """#[g] P for a bool array P of shape (B, N): number of j <= i with g(i, j) and P(j)."""
    B, N = P.shape
    idx = np.arange(N, dtype=np.int64)
    if form is None:
        form = analyze_relation(rel)
    out = np.zeros((B, N), dtype=np.int64)
    # the regular path costs about N (T + M) per input plus an M x M table; with a period or window
    # larger than the input (or a table beyond TABLE_CAP) the general path below is cheaper
    if (isinstance(form, GuardForm) and table_cells(form) <= TABLE_CAP
            and form.window + form.period <= max(N, GENERAL_CHUNK)):
        T, M = form.window, form.period
        for d in range(min(T, N)):
            g = np.asarray(eval_relation(rel, idx[d:], idx[d:] - d), dtype=bool)
            g = np.broadcast_to(g, (N - d,))
            if g.any():
                out[:, d:] += P[:, : N - d] & g
        if T < N:
            F = far_table(rel, form)
            rows = idx[T:] % M  # residue of i for i >= T
            for rj in range(M):
                col = F[rows, rj]
                if not col.any():
                    continue
                mask = P if M == 1 else P & (idx % M == rj)
                c = np.cumsum(mask, axis=1, dtype=np.int64)  # c[:, x] = #{j <= x: j = rj (M), P(j)}
                out[:, T:] += c[:, : N - T] * col
        return out
    # a relation of one position (#[j <= 2], #[i >= 5]): a mask over positions, O(N)
    names = position_names(rel)
    if names == {"j"}:
        g = np.broadcast_to(np.asarray(eval_relation(rel, None, idx), dtype=bool), (N,))
        return np.cumsum(P & g, axis=1, dtype=np.int64)
    if names == {"i"}:
        g = np.broadcast_to(np.asarray(eval_relation(rel, idx), dtype=bool), (N,))
        return np.where(g, np.cumsum(P, axis=1, dtype=np.int64), 0)
    # general path: explicit (chunk x N) guard matrices
    Pf = P.astype(np.float64)
    for s in range(0, N, GENERAL_CHUNK):
        e = min(N, s + GENERAL_CHUNK)
        i = idx[s:e, None]
        g = np.asarray(eval_relation(rel, i, idx[None, :]), dtype=bool)
        g = np.broadcast_to(g, (e - s, N)) & (idx[None, :] <= i)
        out[:, s:e] = np.rint(Pf @ g.T.astype(np.float64)).astype(np.int64)
    return out


def _eval(e, env: _Env) -> np.ndarray:
    B, N = env.batch.shape
    if isinstance(e, A.Tok):
        sid = env.program.symbols.index(e.symbol.value)
        return env.batch.ids == sid
    if isinstance(e, A.BoolConst):
        return np.full((B, N), e.value, dtype=bool)
    if isinstance(e, A.IntConst):
        return np.full((B, N), e.value, dtype=np.int64)
    if isinstance(e, A.Ref):
        return env.values[e.name]
    if isinstance(e, A.Not):
        return ~_eval(e.operand, env)
    if isinstance(e, A.And):
        return _eval(e.left, env) & _eval(e.right, env)
    if isinstance(e, A.Or):
        return _eval(e.left, env) | _eval(e.right, env)
    if isinstance(e, A.Compare):
        return _CMP[e.op](_eval(e.left, env), _eval(e.right, env))
    if isinstance(e, A.Count):
        body = _eval(e.body, env)
        if e.guard is None:
            return np.cumsum(body, axis=1, dtype=np.int64)
        key = id(e)
        if key not in env.forms:
            env.forms[key] = analyze_relation(e.guard.expr)
        return count_with_guard(body, e.guard.expr, env.forms[key])
    if isinstance(e, A.Cond):
        if isinstance(e.test, A.BoolConst):  # a folded symbol comparison (``1 if y < x else 0``)
            return _eval(e.then if e.test.value else e.other, env)
        return np.where(_eval(e.test, env), _eval(e.then, env), _eval(e.other, env))
    if isinstance(e, A.Add):
        return _eval(e.left, env) + _eval(e.right, env)
    if isinstance(e, A.Sub):
        return _eval(e.left, env) - _eval(e.right, env)
    if isinstance(e, A.Scale):
        return e.k * _eval(e.operand, env)
    if isinstance(e, A.Min):
        return np.minimum(_eval(e.left, env), _eval(e.right, env))
    if isinstance(e, A.Max):
        return np.maximum(_eval(e.left, env), _eval(e.right, env))
    if isinstance(e, A.PosPred):
        v = np.asarray(eval_relation(e.rel.expr, env.index), dtype=bool)
        return np.broadcast_to(v, (B, N)).copy() if v.ndim else np.full((B, N), bool(v))
    if isinstance(e, A.Tokens):
        return env.batch.ids
    if isinstance(e, A.Indices):
        return np.broadcast_to(env.index, (B, N))
    if isinstance(e, A.Map):
        args = {p: _eval(a, env).astype(np.int64) for p, a in zip(e.params, e.args)}
        v = np.asarray(eval_function(e.body, args))
        return np.broadcast_to(v, (B, N)).copy()
    if isinstance(e, A.Select):
        return _Selector(_eval(e.keys, env).astype(np.int64), _eval(e.queries, env).astype(np.int64), e.op)
    if isinstance(e, A.SelectorWidth):
        return _eval(e.selector, env).width()
    if isinstance(e, A.Aggregate):
        return _eval(e.selector, env).aggregate(_eval(e.values, env).astype(np.int64), e.reduction, e.default)
    raise TypeError(f"not a core expression: {e!r}")


#: the most queries of a RASP-L selector evaluated at once ...
SELECT_CHUNK = 256
#: ... and the most (batch x query x key) cells: a chunk's mask is a bool per cell, and an aggregate
#: makes int64 copies of it (about 17 bytes per cell in all: 70 MB at this size), so the chunk
#: narrows as the batch grows (raspl_mode on 300 inputs of 1,000 tokens: 1.43 GB peak with 256
#: queries per chunk, 171 MB now)
SELECT_CELLS = 1 << 22


@dataclass
class _Selector:
    """A RASP-L selector, kept as (keys, queries, op) and applied chunk by chunk over queries:
    query i selects key j when j <= i and ``op(keys[j], queries[i])`` (the library's convention:
    ``pred(key, query)``)."""

    keys: np.ndarray
    queries: np.ndarray
    op: str

    def masks(self):
        B, N = self.keys.shape
        idx = np.arange(N)
        chunk = max(1, min(SELECT_CHUNK, SELECT_CELLS // max(1, B * N)))
        for s in range(0, N, chunk):
            e = min(N, s + chunk)
            causal = idx[None, :] <= idx[s:e, None]  # (chunk, N)
            if self.op == "true":
                m = np.broadcast_to(causal, (B, e - s, N))
            else:
                m = _CMP[self.op](self.keys[:, None, :], self.queries[:, s:e, None]) & causal
            yield s, e, m

    def width(self) -> np.ndarray:
        B, N = self.keys.shape
        out = np.zeros((B, N), dtype=np.int64)
        for s, e, m in self.masks():
            out[:, s:e] = m.sum(axis=2)
        return out

    def aggregate(self, values: np.ndarray, reduction: str, default: int) -> np.ndarray:
        B, N = self.keys.shape
        out = np.full((B, N), default, dtype=np.int64)
        wide = mean_is_wide(values, N) if reduction == "mean" else False
        for s, e, m in self.masks():
            out[:, s:e] = aggregate_rows(m, values, reduction, default, wide)
        return out


def mean_is_wide(values: np.ndarray, n: int) -> bool:
    """Whether a sum of up to n of these values can leave int64 (a mean cannot): then
    :func:`aggregate_rows` sums in two halves (see :func:`_split_mean`)."""
    return bool(values.size) and max(-int(values.min()), int(values.max())) * n >= 2 ** 63


def aggregate_rows(m: np.ndarray, values: np.ndarray, reduction: str, default: int, wide: bool) -> np.ndarray:
    """RASP-L ``aggregate`` for a block of queries: ``m`` (B, q, k) says which of the k keys each
    query selects, ``values`` (B, k) int64; returns (B, q). The mean truncates toward zero (as
    ``int()``); ``wide`` (from :func:`mean_is_wide`) says the sum may need more than int64. A query
    that selects nothing gets ``default``. Shared by the interpreter and the streaming evaluator."""
    w = m.sum(axis=2)
    has = w > 0
    if reduction == "mean" and wide:
        val = _split_mean(m.astype(np.int64), values, np.maximum(w, 1))
    elif reduction == "mean":
        num = np.einsum("bqk,bk->bq", m.astype(np.int64), values)
        q = np.abs(num) // np.maximum(w, 1)  # int() truncates toward zero
        val = np.where(num < 0, -q, q)
    else:
        # the extreme int64 values: a selected value equal to the filler still wins
        fill = np.iinfo(np.int64).min if reduction == "max" else np.iinfo(np.int64).max
        vals = np.where(m, values[:, None, :], fill)
        val = vals.max(axis=2) if reduction == "max" else vals.min(axis=2)
    return np.where(has, val, default)


def _split_mean(m: np.ndarray, values: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The mean truncated toward zero, ``int(S / w)`` with ``S = sum_k m[b, q, k] values[b, k]``,
    exactly although S itself may not fit in int64 (w >= 1 values selected, N < 2^31).

    Write each value as ``hi * 2^32 + lo`` (``hi = v >> 32`` in [-2^31, 2^31), ``lo`` in [0, 2^32)):
    ``S = H * 2^32 + L`` with |H| < w 2^31 and 0 <= L < w 2^32, both exact in int64. With
    ``H = q w + r`` (floor division, 0 <= r < w), ``S = q w 2^32 + T`` where ``T = r 2^32 + L`` lies in
    [0, 2 w 2^32): so ``floor(S / w) = q 2^32 + T // w`` and ``S mod w = T mod w``. The floor is the
    mean rounded down, which lies between the least and the greatest value and so fits; truncation
    toward zero adds 1 to a negative floor when the division is not exact."""
    values = values.astype(np.int64, copy=False)
    hi = np.einsum("bqk,bk->bq", m, values >> 32)
    lo = np.einsum("bqk,bk->bq", m, values & 0xFFFFFFFF)
    q, r = np.divmod(hi, w)
    t = (r << 32) + lo
    floor = (q << 32) + t // w
    return floor + ((floor < 0) & (t % w != 0))


_INT_OPS = {A.Add: lambda a, b: a + b, A.Sub: lambda a, b: a - b, A.Min: min, A.Max: max}


def fold_constants(program: A.CoreProgram) -> A.CoreProgram:
    """The same program with every count or bool operation over constants replaced by its value:
    ``sum(y, 1 if y < x else 0)`` (each ``y < x`` already folded to true or false by the expansion)
    becomes one integer. What a generation loop evaluates once per token; a definition's value is
    unchanged at every position (these operations act position by position, and constants are the
    same everywhere). Only the arithmetic and boolean operations, conditionals and references to
    definitions folded to a constant are looked into; counts and RASP-L nodes stay as they are."""
    memo: dict[int, object] = {}

    def fold(e):
        hit = memo.get(id(e))  # shared subtrees (expanded families) are folded once
        if hit is not None:
            return hit
        out = e
        kind = type(e)
        if kind is A.Ref:
            out = consts.get(e.name, e)  # a definition folded to a constant
        elif kind is A.Cond:
            test = fold(e.test)
            if type(test) is A.BoolConst:
                out = fold(e.then if test.value else e.other)
            else:
                then, other = fold(e.then), fold(e.other)
                if test is not e.test or then is not e.then or other is not e.other:
                    out = A.Cond(test, then, other, span=e.span)
        elif kind in _INT_OPS or kind is A.Compare or kind is A.And or kind is A.Or:
            left, right = fold(e.left), fold(e.right)
            lk, rk = type(left), type(right)
            if kind in _INT_OPS and lk is A.IntConst and rk is A.IntConst:
                out = A.IntConst(_INT_OPS[kind](left.value, right.value), span=e.span)
            elif kind is A.Compare and lk is rk and lk in (A.IntConst, A.BoolConst):
                out = A.BoolConst(bool(_CMP[e.op](left.value, right.value)), span=e.span)
            elif (kind is A.And or kind is A.Or) and lk is A.BoolConst and rk is A.BoolConst:
                out = A.BoolConst(left.value and right.value if kind is A.And else left.value or right.value,
                                  span=e.span)
            elif left is not e.left or right is not e.right:
                out = (A.Compare(e.op, left, right, span=e.span) if kind is A.Compare
                       else kind(left, right, span=e.span))
        elif kind is A.Scale or kind is A.Not:
            x = fold(e.operand)
            if kind is A.Scale and type(x) is A.IntConst:
                out = A.IntConst(e.k * x.value, span=e.span)
            elif kind is A.Not and type(x) is A.BoolConst:
                out = A.BoolConst(not x.value, span=e.span)
            elif x is not e.operand:
                out = A.Scale(e.k, x, span=e.span) if kind is A.Scale else A.Not(x, span=e.span)
        memo[id(e)] = out
        return out

    consts: dict[str, object] = {}
    defs = []
    for d in program.defs:  # in dependency order: a reference's definition is folded before it
        f = fold(d.expr)
        if type(f) is A.IntConst or type(f) is A.BoolConst:
            consts[d.name] = f
        defs.append(d if f is d.expr else dataclasses.replace(d, expr=f))
    return dataclasses.replace(program, defs=tuple(defs))


def evaluate(program: A.CoreProgram, batch: Batch) -> dict[str, np.ndarray]:
    """The value of every definition at every position: name -> (B, N) array."""
    env = _Env(program, batch)
    for d in program.defs:
        v = _eval(d.expr, env)
        if d.type != A.SELECTOR:
            want = bool if d.type == A.BOOL else np.int64
            v = v if v.dtype == want else v.astype(want)
        env.values[d.name] = v
    return env.values


def output_at_last(program: A.CoreProgram, values: dict[str, np.ndarray], lengths: np.ndarray) -> np.ndarray:
    """(B, |names|) bool: each output definition at each row's last position."""
    rows = np.arange(len(lengths))
    last = lengths - 1
    return np.stack([values[n][rows, last] for n in program.output.names], axis=1)
