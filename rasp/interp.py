"""The vectorized interpreter: core program + batch of inputs -> the value of every definition at
every position.

A batch is a right-padded (B, N) array of token ids (-1 = padding). Every operation is causal
(position i reads only positions <= i), so padding never changes a real position, and each row is
read at its own last index. Counts are exact int64, bools numpy bool.

Cost per operation is O(B N) for everything in C-RASP[periodic, local]:

* ``#P``: a prefix sum;
* ``#[g] P`` with g (T, M)-regular (:mod:`rasp.guards`): T shifted copies of P for the window and
  M residue-class prefix sums shifted by T for the far part, O(B N (T + M));
* ``pos[phi]``: phi evaluated on the index vector.

Any other guard takes the general path: the (query x key) guard matrix in chunks of queries,
O(B N^2) time and O(N * chunk) memory. The naive evaluator in ``tests/naive.py`` is the
specification all of these are tested against.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import ast as A
from .guards import GuardForm, analyze_relation, eval_relation, far_table

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
    if isinstance(form, GuardForm):
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
    raise TypeError(f"not a core expression: {e!r}")


def evaluate(program: A.CoreProgram, batch: Batch) -> dict[str, np.ndarray]:
    """The value of every definition at every position: name -> (B, N) array."""
    env = _Env(program, batch)
    for d in program.defs:
        v = _eval(d.expr, env)
        env.values[d.name] = v if v.dtype == (bool if d.type == A.BOOL else np.int64) else v.astype(
            bool if d.type == A.BOOL else np.int64)
    return env.values


def output_at_last(program: A.CoreProgram, values: dict[str, np.ndarray], lengths: np.ndarray) -> np.ndarray:
    """(B, |names|) bool: each output definition at each row's last position."""
    rows = np.arange(len(lengths))
    last = lengths - 1
    return np.stack([values[n][rows, last] for n in program.output.names], axis=1)
