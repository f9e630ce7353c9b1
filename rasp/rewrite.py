"""Regular guards -> C-RASP[periodic, local] operations (the checker's proof, the compiler's input).

Normal form. After rewriting, every count is ``#P`` or ``#[j == i - d] P`` for a constant d >= 0,
and every positional predicate ``pos[phi]`` is periodic. A (T, M)-regular guard g
(:mod:`rasp.guards`) rewrites as follows. Write ``L_d = #[j == i - d] P`` (P at position i - d) and
``[S] = pos[i % M in S]`` for a set S of residues. For the branch i = ri (mod M):

    #[g] P  =  #(P && [S_ri])  +  sum_{d < T} ( g(ri, d) - [(ri - d) mod M in S_ri] ) * L_d

where ``S_ri = {rj : F[ri, rj]}`` is the far table's row (g for i - j >= T) and g(ri, d) is g at
i = ri (mod M), j = i - d. Why: positions j <= i split into the window j = i - d (d < T), where g is
g(ri, d), and the far part j <= i - T, where g is F[ri, j mod M]. The far part equals
``#(P && [S_ri])`` (over all j <= i) minus its window terms, and a window position j = i - d lies in
S_ri iff (ri - d) mod M does, since i = ri. At i < T the identity still holds: the window terms then
cover every j <= i. Branches are joined with ``if pos[i % M == ri]``; M and T are first reduced to
the smallest period and window the guard's tables allow, so ``#[j == i - 1] P`` rewrites to itself
and ``#[j <= i - 2] P`` to ``#P - #[j == i] P - #[j == i - 1] P``.

A predicate of one position that is not periodic but periodic from some position on (``pos[i <= 5]``,
a guard of j alone such as ``#[j <= 2] P``) is written with counts of every position, ``#true`` being
i + 1 (:func:`absolute_predicate`, :func:`absolute_count`): plain C-RASP besides its periodic part.
Such comparisons of one position also split off a guard of both positions (:func:`split_count`:
``#[j > 0 && j < i] P`` is ``#[j < i] (P && !(#true <= 1))``), whose rest is then rewritten as above.

The rewrite works on surface and core expressions alike (both use :mod:`rasp.ast`), so
``rasp check --explain`` prints a rewritten program in the source language and the compiler
compiles the rewritten core program.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from . import ast as A
from .errors import RaspError
from .guards import (TABLE_CAP, GuardForm, analyze_relation, equality_offset, eval_relation, eventually_constant,
                     eventually_periodic, far_table, periodic_residues, position_names, table_cells)


@dataclass(frozen=True)
class RegularTable:
    """The values of a regular guard, with minimal window and period.

    ``local[ri, d]`` is g at i = ri (mod M), j = i - d for d < window; ``far[ri, rj]`` is g for
    i - j >= window."""

    window: int
    period: int
    local: np.ndarray  # (period, window) bool
    far: np.ndarray  # (period, period) bool


def _tables(rel: A.PosExpr, T: int, M: int) -> tuple[np.ndarray, np.ndarray]:
    ri = np.arange(M)
    base = ri + M * ((T + M) // M + 1)  # representatives of each residue, larger than any d < T
    # every offset at once (M x T <= TABLE_CAP cells): an offset at a time took seconds for a window
    # of 300,000 (i - j <= 300000) before BRANCH_CAP refused it
    d = np.arange(T, dtype=np.int64)[None, :]
    local = np.broadcast_to(eval_relation(rel, base[:, None], base[:, None] - d), (M, T)).astype(bool)
    return local, far_table(rel, GuardForm(T, M))


@functools.lru_cache(maxsize=4096)
def regular_table(rel: A.PosExpr) -> RegularTable | None:
    """The minimal tables of a regular relation, or None when it is not regular (cached: relations
    are immutable, and family instances share theirs; do not modify the returned arrays)."""
    form = analyze_relation(rel)
    if not isinstance(form, GuardForm):
        return None
    T, M = form.window, form.period
    if table_cells(form) > TABLE_CAP:
        raise RaspError(f"this relation has period {M:,} and window {T:,}: its normal form needs tables of "
                        f"{table_cells(form):,} entries (at most {TABLE_CAP:,}), and about as many operations; "
                        "too large to analyse", getattr(rel, "span", None),
                        "use a smaller period or window (the normal form has a branch per class of residues of i)")
    local, far = _tables(rel, T, M)
    # smallest period p | M consistent with both tables
    for p in range(1, M + 1):
        if M % p:
            continue
        r = np.arange(M)
        if np.array_equal(far, far[np.ix_(r % p, r % p)]) and np.array_equal(local, local[r % p]):
            local, far, M = local[:p], far[:p, :p], p
            break
    # smallest window: drop trailing offsets whose value is already the far value
    while T > 0:
        d = T - 1
        far_at_d = far[np.arange(M), (np.arange(M) - d) % M]
        if np.array_equal(local[:, d], far_at_d):
            T -= 1
        else:
            break
    local, far = local[:, :T].copy(), far.copy()
    local.flags.writeable = far.flags.writeable = False  # shared through the cache
    return RegularTable(T, M, local, far)


# ---------------------------------------------------------------------- building expressions
def local_guard(d: int) -> A.Rel:
    """The relation ``j == i - d`` (``j == i`` for d = 0)."""
    rhs = A.PVar("i") if d == 0 else A.PBin("-", A.PVar("i"), A.PInt(d))
    return A.Rel(A.PCmp("==", A.PVar("j"), rhs))


def local_offset(g) -> int | None:
    """d when g is exactly ``j == i - d`` (or the built-in ``pred``/``pred4``), else None."""
    if isinstance(g, A.GuardName):
        return {"pred": 1, "pred4": 4}.get(g.name)
    if not isinstance(g, A.Rel):
        return None
    e = g.expr
    if not (isinstance(e, A.PCmp) and e.op == "==" and e.left == A.PVar("j")):
        return None
    if e.right == A.PVar("i"):
        return 0
    r = e.right
    if isinstance(r, A.PBin) and r.op == "-" and r.left == A.PVar("i") and isinstance(r.right, A.PInt) and r.right.value > 0:
        return r.right.value
    return None


def residue_pred(M: int, residues) -> A.Expr | None:
    """``pos[i % M == r1 || i % M == r2 ...]``, or None when the set is every residue. The ``||`` form a
    balanced tree (a class of hundreds of residues would otherwise nest hundreds deep)."""
    residues = sorted(int(r) for r in residues)
    if len(residues) == M:
        return None
    if not residues:
        return A.BoolConst(False)
    mod = A.PBin("%", A.PVar("i"), A.PInt(M))
    return A.PosPred(A.Rel(A.balanced(A.POr, [A.PCmp("==", mod, A.PInt(r)) for r in residues])))


def _and(p, q):
    return p if q is None else A.And(p, q)


def _sum(terms: list[tuple[int, A.Expr]]) -> A.Expr:
    terms = [(k, t) for k, t in terms if k != 0]
    if len(terms) > BRANCH_CAP:
        # only the checker's analysis writes sums this long (ANALYSIS_CAP): halves, so that the depth
        # is logarithmic (a chain of 1,001 terms passed the recursion limit of every walk)
        half = len(terms) // 2
        return A.Add(_sum(terms[:half]), _sum(terms[half:]))
    out = None
    for k, t in terms:
        if k == 0:
            continue
        term = t if abs(k) == 1 else A.Scale(abs(k), t)
        if out is None:
            out = term if k > 0 else A.Scale(-1, term) if abs(k) == 1 else A.Scale(-abs(k), t)
        else:
            out = A.Add(out, term) if k > 0 else A.Sub(out, term)
    return out if out is not None else A.IntConst(0)


#: the most branches (one per class of residues of i) and the most window offsets a count's normal
#: form may have (see normalize_count): the branches nest as conditionals, the offsets as a sum, and
#: the compiler spends about the square of their number on them
BRANCH_CAP = 256
#: the same cap for the checker's analysis (:func:`analysis_caps`), which only reads the normal form:
#: ``#[i - j <= 1000] P`` is C-RASP[local] (1,001 local counts), a verdict that needs no compiled model
ANALYSIS_CAP = 4096
#: the most counts the normal forms of one analysis may write in all (a count's normal form copies
#: its body into each of its terms, so nested windows multiply: #[i - j <= 1000] (#[i - j <= 1000] P
#: >= 2) is a million counts, minutes to walk)
ANALYSIS_BUDGET = 1 << 16


@dataclass
class _Caps:
    cap: int  # the most branches or local counts of one normal form
    over: list  # the errors the compiler's cap would have raised (an analysis)
    used: int = 0  # counts written so far (an analysis)


_branch_cap: contextvars.ContextVar[_Caps] = contextvars.ContextVar("branch_cap", default=_Caps(BRANCH_CAP, []))


@contextlib.contextmanager
def analysis_caps():
    """Within this block :func:`normalize_count` writes normal forms of up to :data:`ANALYSIS_CAP`
    branches and window offsets (the checker); outside it, up to :data:`BRANCH_CAP` (the compiler).
    Yields a list that collects, for each normal form past :data:`BRANCH_CAP`, the located error the
    compiler gives it."""
    over: list[RaspError] = []
    token = _branch_cap.set(_Caps(ANALYSIS_CAP, over))
    try:
        yield over
    finally:
        _branch_cap.reset(token)


def _check_size(n: int, what: str, rel, hint: str) -> None:
    """Refuse a normal form of n branches or offsets past the cap in force; note one past the
    compiler's cap during an analysis."""
    state = _branch_cap.get()
    cap, over = state.cap, state.over
    span = getattr(rel, "span", None)
    if n > ANALYSIS_CAP:
        limits = f"{ANALYSIS_CAP:,}" if cap == ANALYSIS_CAP else f"{BRANCH_CAP} to compile, {ANALYSIS_CAP:,} to analyse"
        raise RaspError(f"{what} (at most {limits}): too large to analyse or compile", span, hint)
    if n > BRANCH_CAP:
        error = RaspError(f"{what} (at most {BRANCH_CAP}): too large to compile", span, hint)
        if cap == BRANCH_CAP:  # compiling
            error.hint = f"{hint}; rasp check gives the verdict up to {ANALYSIS_CAP:,}"
            raise error
        over.append(error)


def _spend(terms: int, body: A.Expr, rel) -> None:
    """Charge an analysis for a normal form of ``terms`` counts of ``body`` (each copies the counts
    in body); refuse past :data:`ANALYSIS_BUDGET`. The compiler's caps bound it already."""
    state = _branch_cap.get()
    if state.cap != ANALYSIS_CAP:
        return
    inner = sum(1 for n in A.walk(body) if type(n) is A.Count)
    state.used += terms * (1 + inner)
    if state.used > ANALYSIS_BUDGET:
        raise RaspError(f"the normal forms of this program's counts would write {state.used:,} counts by this one "
                        f"(at most {ANALYSIS_BUDGET:,} in all): too large to analyse or compile", getattr(rel, "span", None),
                        "give an inner count of a wide window its own definition, or use narrower windows")


def normalize_count(rel: A.PosExpr, body: A.Expr) -> A.Expr | None:
    """``#[rel] body`` in normal form (see the module docstring), or None when rel is not regular."""
    d = equality_offset(rel)
    if d is not None:  # one local count, however large d is (what the tables would give)
        return A.Count(local_guard(d), body)
    form = analyze_relation(rel)
    one = one_position(rel)
    if isinstance(form, GuardForm) and table_cells(form) > TABLE_CAP and one is not None and one[0] == "j":
        # a periodic relation of j alone is a predicate of the counted position: #(P && pos[...]) needs
        # M entries where the tables need M x M (#[j % 2310 == 1] was refused as too large)
        pr = periodic_residues(one[1])
        if pr is not None:
            pred = residue_pred(*pr)
            return A.Count(None, body if pred is None else A.And(body, pred))
    t = regular_table(rel)
    if t is None:
        return None
    M = t.period
    # residues of i whose branches are equal share one (#[j % 300 == 0] P is one branch)
    by_branch: dict[tuple, list[int]] = {}
    n_local: dict[tuple, int] = {}  # a branch's local counts: one per offset whose correction is not 0
    for ri in range(M):
        corr = _corrections(t, ri)
        key = (t.far[ri].tobytes(), corr.tobytes())
        if key not in by_branch:
            by_branch[key], n_local[key] = [], int(np.count_nonzero(corr))  # (#[i - j == 300]: one, d = 300)
        by_branch[key].append(ri)
    most_local = max(n_local.values())
    _check_size(most_local, f"this count's relation needs {most_local:,} local counts (one per offset of its "
                "window where the far part does not already count j)", rel, "use a narrower window")
    groups = list(by_branch.values())
    _check_size(len(groups), f"this count's relation has period {M:,} and {len(groups):,} different branches, "
                "one per class of residues of i", rel, "use a smaller period")
    _spend(sum(1 + k for k in n_local.values()), body, rel)
    branches = [_branch(t, g[0], body) for g in groups]
    if len(groups) > BRANCH_CAP:
        return _branch_tree(M, groups, branches)
    out = branches[-1]
    for g, branch in zip(reversed(groups[:-1]), reversed(branches[:-1])):
        out = A.Cond(residue_pred(M, g), branch, out)
    return out


def _branch_tree(M: int, groups: list[list[int]], branches: list[A.Expr]) -> A.Expr:
    """The branches as a balanced tree of conditionals (each test: i mod M in the residues of the
    first half), of logarithmic depth: only the checker's analysis has more than BRANCH_CAP branches."""
    if len(branches) == 1:
        return branches[0]
    half = len(branches) // 2
    first = [r for g in groups[:half] for r in g]
    return A.Cond(residue_pred(M, first), _branch_tree(M, groups[:half], branches[:half]),
                  _branch_tree(M, groups[half:], branches[half:]))


def _corrections(t: RegularTable, ri: int) -> np.ndarray:
    """For each offset d < T, the window's value at i = ri (mod M), j = i - d minus the far count's
    (which counts j there when (ri - d) mod M is a far residue): -1, 0 or 1. A branch is its far row
    and these; two residues with equal table rows can still differ here (``j % 300 == 0 || i - j == 1
    && i % 300 == 5``: at ri = 1 the far count already holds j = i - 1, at ri = 5 it does not)."""
    d = np.arange(t.window)
    return t.local[ri].astype(np.int8) - t.far[ri][(ri - d) % t.period].astype(np.int8)


def _branch(t: RegularTable, ri: int, body: A.Expr) -> A.Expr:
    """``#[rel] body`` at positions i = ri (mod M): a count of the j in the far residues S plus, for
    each offset d < T, the local correction where the window's value differs from the far one."""
    M = t.period
    S = np.flatnonzero(t.far[ri])
    terms: list[tuple[int, A.Expr]] = []
    if len(S):
        pred = residue_pred(M, S)
        terms.append((1, A.Count(None, _and(body, pred) if pred is not None else body)))
    for d, k in enumerate(_corrections(t, ri).tolist()):
        if k:
            terms.append((k, A.Count(local_guard(d), body)))
    return _sum(terms)


# ---------------------------------------------------------------------- absolute positions
#: the longest prefix of positions an eventually periodic predicate may treat apart, and the most
#: runs of positions where it differs from its periodic part (each run is one comparison of #true)
ABSOLUTE_PREFIX_CAP = 1 << 20
ABSOLUTE_RUN_CAP = 64


def _positions_so_far() -> A.Expr:
    return A.Count(None, A.BoolConst(True))  # #true = i + 1 (j + 1 inside a count's body)


def _eventual_values(rel: A.PosExpr) -> tuple[int, int, np.ndarray] | None:
    """``(s, M, values)`` for a unary relation phi(i) periodic with period M from s on (s a multiple of
    M, :func:`rasp.guards.eventually_periodic`): phi at 0 .. s + M - 1, which say it everywhere; None
    where that is not shown or past the caps (s > ABSOLUTE_PREFIX_CAP, M > TABLE_CAP)."""
    ep = eventually_periodic(rel)
    if ep is None:
        return None
    c, M = ep
    start = -(-c // M) * M
    if M > TABLE_CAP or start > ABSOLUTE_PREFIX_CAP:
        return None
    n = start + M
    return start, M, np.broadcast_to(np.asarray(eval_relation(rel, np.arange(n, dtype=np.int64)), dtype=bool), (n,))


def absolute_predicate(rel: A.PosExpr) -> A.Expr | None:
    """A unary relation phi(i) that is not periodic but eventually so (``i <= 5``, ``i == 0``,
    ``i % 2 == 0 || i > 10``; :func:`rasp.guards.eventually_periodic`) as plain C-RASP with a periodic
    part: None where it is periodic, not eventually periodic, or beyond the caps.

    With phi(i) = psi(i mod M) for i >= c, take s >= c a multiple of M, the periodic part
    ``P = pos[i % M in S]`` (S the residues where psi holds) and the positions D below s where phi
    differs from psi, in runs [a, b]. ``#true`` is i + 1, so i in [a, b] is ``#true >= a + 1 &&
    #true <= b + 1``, and phi = ``(inD && !P) || (!inD && P)``. Inside a count's body the same
    expression is a predicate of the counted position j (``#true`` there is j + 1), as ``pos[...]`` is.
    ``pos[i <= 5]`` becomes ``#true <= 6``; a guard of j alone, ``#[j <= 2] P``, becomes
    ``#(P && #true <= 3)`` (:func:`absolute_count`)."""
    values = _eventual_values(rel)
    if values is None or periodic_residues(rel) is not None:
        return None
    start, M, vals = values
    tail = vals[start:]  # residue k at index k (start is a multiple of M)
    differ = np.flatnonzero(vals[:start] != tail[np.arange(start) % M])
    cuts = np.flatnonzero(np.diff(differ) != 1) + 1
    runs = [(int(r[0]), int(r[-1])) for r in np.split(differ, cuts)] if len(differ) else []
    if len(runs) > ABSOLUTE_RUN_CAP:
        return None
    n = _positions_so_far

    def within(a: int, b: int) -> A.Expr:
        upper = A.Compare("<=", n(), A.IntConst(b + 1))
        return upper if a == 0 else A.And(A.Compare(">=", n(), A.IntConst(a + 1)), upper)

    in_d = A.balanced(A.Or, [within(a, b) for a, b in runs]) if runs else None
    periodic = residue_pred(M, np.flatnonzero(tail))  # None: every residue
    if in_d is None:
        return periodic if periodic is not None else A.BoolConst(True)
    if periodic is None:
        return A.Not(in_d)
    if periodic == A.BoolConst(False):
        return in_d
    return A.Or(A.And(in_d, A.Not(periodic)), A.And(A.Not(in_d), periodic))


def _renamed(r, old: str, new: str):
    if isinstance(r, A.PVar):
        return A.PVar(new, span=r.span) if r.name == old else r
    if not dataclasses.is_dataclass(r) or isinstance(r, type):
        return r
    changes = {f.name: _renamed(getattr(r, f.name), old, new) for f in dataclasses.fields(r)
               if not A.is_span_field(f.name) and dataclasses.is_dataclass(getattr(r, f.name))}
    return dataclasses.replace(r, **changes) if changes else r


def one_position(rel: A.PosExpr) -> tuple[str, A.PosExpr] | None:
    """``(name, phi)`` for a relation of one position, ``name`` "j" or "i", with phi the same
    relation as a function of i (j renamed), the form :func:`absolute_predicate` and
    ``periodic_residues`` read; None for a relation of both positions or of none."""
    names = position_names(rel)
    if len(names) != 1:
        return None
    name = next(iter(names))
    return name, (_renamed(rel, "j", "i") if name == "j" else rel)


def past_absolute_limits(rel: A.PosExpr) -> bool:
    """Whether ``rel`` is a relation of one position, periodic from some position on, that
    :func:`absolute_predicate` does not write only because of its caps (``pos[i <= 1048576]``)."""
    one = one_position(rel)
    if one is None:
        return False
    phi = one[1]
    return eventually_periodic(phi) is not None and periodic_residues(phi) is None and absolute_predicate(phi) is None


def absolute_count(rel: A.PosExpr, body: A.Expr) -> A.Expr | None:
    """``#[rel] body`` for a relation of j alone or of i alone that :func:`absolute_predicate`
    writes with counts (``#[j <= 2] P`` is ``#(P && #true <= 3)``; ``#[i <= 5] P`` is ``#P`` where
    ``#true <= 6`` and 0 elsewhere), or for a relation whose absolute atoms split off
    (:func:`split_count`: ``#[j > 0 && j < i] P``), or None."""
    one = one_position(rel)
    pred = None if one is None else absolute_predicate(one[1])
    if pred is None:
        split = split_count(rel, body)
        return split if split is not None else eventual_count(rel, body)
    if one[0] == "j":  # a predicate of the counted position, inside the count
        return A.Count(None, A.And(body, pred))
    return A.Cond(pred, A.Count(None, body), A.IntConst(0))  # of the current position: outside it


#: the most positions :func:`eventual_count` treats one by one (one count and one conditional each)
EVENTUAL_CAP = 64
#: the latest settling point :func:`eventual_count` looks below for positions that have settled already
EVENTUAL_SCAN_CAP = 4096


def _row(rel, i: int) -> np.ndarray:
    """The relation at position i for every j = 0 .. i (bools)."""
    return np.broadcast_to(np.asarray(eval_relation(rel, np.full(i + 1, i, dtype=np.int64),
                                                    np.arange(i + 1, dtype=np.int64)), dtype=bool), (i + 1,))


def count_in_class(rel: A.PosExpr, body: A.Expr) -> A.Expr | None:
    """``#[rel] body`` as C-RASP[periodic, local] writes it: the normal form of a regular relation
    (:func:`normalize_count`), else with positions against constants and settling comparisons taken
    apart (:func:`absolute_count`); None when neither applies."""
    new = normalize_count(rel, body)
    return new if new is not None else absolute_count(rel, body)


def eventual_atoms(rel) -> dict:
    """The comparisons of i and j in ``rel`` (under ``&&``, ``||``, ``!``) that settle from some i on
    (:func:`rasp.guards.eventually_constant`): atom -> (i0, value)."""
    found: dict = {}
    stack = [rel]
    while stack:
        r = stack.pop()
        if isinstance(r, (A.PAnd, A.POr)):
            stack += [r.left, r.right]
        elif isinstance(r, A.PNot):
            stack.append(r.operand)
        elif isinstance(r, A.PCmp) and r not in found:
            settled = eventually_constant(r)
            if settled is not None:
                found[r] = settled
    return found


def eventual_count(rel: A.PosExpr, body: A.Expr) -> A.Expr | None:
    """``#[rel] body`` when what keeps ``rel`` outside the regular relations are comparisons of i and j
    that settle once i is large (``i + j >= 7``, ``2 * i - j > 3``; :func:`rasp.guards.eventually_constant`),
    or None.

    Let i0 be the largest position from which each such comparison has its final value at every
    0 <= j <= i. From i0 on the guard is ``g_far``, ``rel`` with each of them replaced by its value,
    whose count is rewritten as any other (normal form, absolute atoms split off). Before i0 there are
    finitely many positions, and at each i' the count N_i' is ``#(body && J)`` with J the set of
    j <= i' where ``rel`` holds, evaluated exactly (J written with ``#true``, which is j + 1 inside the
    count: :func:`absolute_predicate`; 0 or ``#body`` when J is empty or every j). Consecutive
    positions with the same count form a run [s, e], and ``#[rel] body = N_run1 if #true <= e1 + 1 else
    N_run2 if #true <= e2 + 1 else ... else #[g_far] body`` (the last run ends at i0 - 1): plain C-RASP
    besides what ``g_far`` needs. Positions just below i0 whose guard already is ``g_far``'s (the bound
    on a periodic part can be loose: ``i + j - j % 100 >= 5`` settles at 5, its bound says 104) are
    left to ``g_far``; at most :data:`EVENTUAL_CAP` positions are treated one by one."""
    atoms = eventual_atoms(rel)
    if not atoms:
        return None
    i0 = max(i for i, _ in atoms.values())
    if i0 > EVENTUAL_SCAN_CAP:
        return None
    far_rel = rel
    for atom, (_, value) in atoms.items():
        far_rel = _substituted(far_rel, atom, value)
    # the bound on a periodic part can set i0 late (i + j - j % 100 >= 0 holds everywhere, and its
    # i0 is 99): positions below i0 whose row of j is already the settled guard's need no branch
    while i0 > 0 and np.array_equal(_row(rel, i0 - 1), _row(far_rel, i0 - 1)):
        i0 -= 1
    if i0 > EVENTUAL_CAP:
        return None
    far = count_in_class(far_rel, body)
    if far is None or i0 == 0:
        return far
    nears = []  # the count at each position before i0
    for i in range(i0):
        holds = _row(rel, i)
        if not holds.any():
            nears.append(A.IntConst(0))
        elif holds.all():
            nears.append(A.Count(None, body))
        else:
            at = A.balanced(A.POr, [A.PCmp("==", A.PVar("i"), A.PInt(int(j))) for j in np.flatnonzero(holds)])
            nears.append(A.Count(None, A.And(body, absolute_predicate(at))))
    # a run of positions with the same count is one branch; each test is "#true <= the run's last
    # position + 1", the runs before being excluded by the conditionals outside it
    out = far
    for i in reversed(range(i0)):
        if i + 1 < i0 and nears[i + 1] == nears[i]:
            continue  # the same run as i + 1: its branch is made at the run's last position
        out = A.Cond(A.Compare("<=", _positions_so_far(), A.IntConst(i + 1)), nears[i], out)
    return out


#: the most absolute atoms :func:`split_count` splits off one guard (each may double its normal form)
SPLIT_ATOM_CAP = 6


def absolute_atoms(rel: A.PosExpr) -> list[A.PosExpr]:
    """The absolute atoms of a relation, those of i first, then those of j, each in source order: the
    largest parts under ``&&``, ``||`` and ``!`` that mention one position only and that
    :func:`absolute_predicate` writes with counts (eventually periodic, not periodic: ``j > 0``,
    ``i >= 5``, ``j <= 3 || j % 2 == 0``). Periodic parts (``j % 2 == 0``) are not atoms: the
    normal form's tables take them as they are."""
    found: list = []

    def visit(r) -> None:
        one = one_position(r)
        if one is not None and absolute_predicate(one[1]) is not None:
            if r not in found:
                found.append(r)
            return
        if isinstance(r, (A.PAnd, A.POr)):
            visit(r.left)
            visit(r.right)
        elif isinstance(r, A.PNot):
            visit(r.operand)

    visit(rel)
    return sorted(found, key=lambda r: position_names(r) != {"i"})  # stable: source order within


def _substituted(r, atom, value: bool):
    """``r`` with every occurrence of ``atom`` replaced by ``value`` and the constants folded through
    ``&&``, ``||`` and ``!`` (atoms compare by structure: spans are not compared)."""
    if r == atom:
        return A.PBool(value)
    if isinstance(r, A.PNot):
        x = _substituted(r.operand, atom, value)
        return A.PBool(not x.value) if isinstance(x, A.PBool) else A.PNot(x, span=r.span)
    if isinstance(r, (A.PAnd, A.POr)):
        x, y = _substituted(r.left, atom, value), _substituted(r.right, atom, value)
        absorbing = isinstance(r, A.POr)  # true absorbs an or, false an and
        for a, b in ((x, y), (y, x)):
            if isinstance(a, A.PBool):
                return a if a.value == absorbing else b
        return type(r)(x, y, span=r.span)
    return r


def split_count(rel: A.PosExpr, body: A.Expr) -> A.Expr | None:
    """``#[rel] body`` with the absolute atoms of ``rel`` (:func:`absolute_atoms`) split off and the
    rest in normal form (:func:`normalize_count`), or None when there are none, more than
    :data:`SPLIT_ATOM_CAP`, or a rest that is not regular.

    Shannon's expansion on one atom a at a time: ``g = (a && g[a := true]) || (!a && g[a := false])``,
    the two disjuncts exclusive. An atom of i is a condition on the current position, outside the count:
    ``#[g] P = #[g[a := true]] P if A else #[g[a := false]] P`` with A = absolute_predicate(a). An atom
    of j is a condition on the counted position, inside it: ``#[g] P = #[g[a := true]] (P && A) +
    #[g[a := false]] (P && !A)``, A written with ``#true`` being j + 1 there (as ``pos[...]`` is read at
    j inside a count's body). A rest that is constant is ``#P`` or 0. So ``#[j > 0 && j < i] P`` (the
    positions before i but the first) is ``#[j < i] (P && !(#true <= 1))``.

    The atoms are found again in each branch (setting one atom may leave a smaller one of a larger
    atom: ``j == 1 || j == 3`` with ``j == 1`` false is ``j == 3``), a branch whose conditions on i, or
    on j, hold at no position is dropped (``j == 1 && j == 3``), and the conditions a branch puts on j
    are one predicate of the counted position."""
    atoms = absolute_atoms(rel)
    if not atoms or len(atoms) > SPLIT_ATOM_CAP:
        return None
    return _split(rel, body, A.PBool(True), A.PBool(True), SPLIT_ATOM_CAP)


def _conj(a, b):
    return b if a == A.PBool(True) else A.PAnd(a, b)


def _never(phi) -> bool:
    """Whether a relation of one position (of i) holds at no position (False where that is not shown)."""
    values = _eventual_values(phi)
    return values is not None and not values[2].any()


def _position_pred(phi) -> A.Expr | None:
    """A relation of one position (of i) as a predicate: periodic, or with counts of every position
    (:func:`absolute_predicate`); ``true`` when it always holds; None past the caps."""
    pr = periodic_residues(phi)
    if pr is not None:
        pred = residue_pred(*pr)
        return A.BoolConst(True) if pred is None else pred
    return absolute_predicate(phi)


def _split(rel, body: A.Expr, at_i, at_j, left: int) -> A.Expr | None:
    """``#[rel] body`` on a branch whose conditions so far are ``at_i`` on i and ``at_j`` on j (each a
    relation of i); ``left`` more splits allowed."""
    if rel == A.PBool(False):
        return A.IntConst(0)
    atoms = absolute_atoms(rel)
    if not atoms:
        pred = _position_pred(at_j)
        if pred is None:
            return None
        where = body if pred == A.BoolConst(True) else A.And(body, pred)
        return A.Count(None, where) if rel == A.PBool(True) else normalize_count(rel, where)
    if left == 0:
        return None
    atom = atoms[0]
    name, phi = one_position(atom)
    yes, no = _substituted(rel, atom, True), _substituted(rel, atom, False)
    ctx = at_i if name == "i" else at_j
    branches = []
    for sub, cond in ((yes, _conj(ctx, phi)), (no, _conj(ctx, A.PNot(phi)))):
        if _never(cond):
            branches.append(A.IntConst(0) if name == "j" else None)  # no position takes this branch
            continue
        out = _split(sub, body, cond, at_j, left - 1) if name == "i" else _split(sub, body, at_i, cond, left - 1)
        if out is None:
            return None
        branches.append(out)
    then, other = branches
    if name == "i":
        if then is None or other is None:
            return other if then is None else then
        return then if then == other else A.Cond(absolute_predicate(phi), then, other)
    if other == A.IntConst(0):
        return then
    return other if then == A.IntConst(0) else A.Add(then, other)


# ---------------------------------------------------------------------- whole programs
def _respan(node, span):
    """Give a freshly built node (and its children without spans) the span of what it replaces."""
    if not dataclasses.is_dataclass(node) or isinstance(node, type):
        return node
    changes = {}
    for f in dataclasses.fields(node):
        if A.is_span_field(f.name):
            continue
        v = getattr(node, f.name)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            changes[f.name] = _respan(v, span)
    if getattr(node, "span", None) is None:
        changes["span"] = span
    return dataclasses.replace(node, **changes) if changes else node


_TRAVERSED: dict[type, tuple[str, ...]] = {}


def _traversed(cls) -> tuple[str, ...]:
    """The fields of a node class that rewrite_expr descends into (not guards, spans, relations)."""
    names = _TRAVERSED.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls) if f.name not in ("guard", "span", "rel"))
        _TRAVERSED[cls] = names
    return names


def _is_node(v) -> bool:
    return hasattr(type(v), "__dataclass_fields__")


#: nodes without sub-expressions or guards: nothing to rewrite below them
_LEAVES = frozenset({A.Tok, A.Ref, A.BoolConst, A.IntConst})


def rewrite_expr(e):
    """Rewrite every regular guard in an expression into normal form; other guards stay as they are.
    Subtrees with nothing to rewrite are returned as the same objects."""
    t = type(e)
    if t in _LEAVES:  # half of an expanded program's nodes
        return e
    if t in A.BINARY:  # the other commonest: nothing of their own to rewrite
        left, right = e.left, e.right
        new_left = left if type(left) in _LEAVES else rewrite_expr(left)
        new_right = right if type(right) in _LEAVES else rewrite_expr(right)
        if new_left is left and new_right is right:
            return e
        return dataclasses.replace(e, left=new_left, right=new_right)
    kids = {}
    for name in _traversed(t):
        v = getattr(e, name)
        if type(v) in _LEAVES:  # skipped without a call
            continue
        if isinstance(v, tuple):  # e.g. map arguments
            if any(_is_node(x) for x in v):
                new = tuple(rewrite_expr(x) if _is_node(x) else x for x in v)
                if any(a is not b for a, b in zip(new, v)):
                    kids[name] = new
        elif _is_node(v):
            new = rewrite_expr(v)
            if new is not v:
                kids[name] = new
    node = dataclasses.replace(e, **kids) if kids else e
    if isinstance(node, A.PosPred):
        # a periodic predicate with minimal period 1 is a constant: no positional information
        pr = periodic_residues(node.rel.expr)
        if pr is not None and pr[0] == 1:
            return A.BoolConst(bool(pr[1]), span=node.span)
        if pr is None:  # eventually periodic (pos[i <= 5]): counts of every position say it
            new = absolute_predicate(node.rel.expr)
            if new is not None:
                return _respan(new, node.span)
        return node
    if isinstance(node, (A.Count, A.Exists)) and isinstance(node.guard, A.Rel):
        if local_offset(node.guard) is not None:
            return node
        new = count_in_class(node.guard.expr, node.body)
        if new is None:
            return node
        if isinstance(node, A.Exists):
            if isinstance(new, A.Count):
                return _respan(A.Exists(new.guard, new.body), node.span)
            new = A.Compare(">=", new, A.IntConst(1))
        return _respan(new, node.span)
    return node


#: written expression kinds that expansion copies and rewriting leaves as they are (no guard, no
#: positional predicate, no RASP-L primitive): see :func:`only_local_counts`
_PLAIN_KINDS = frozenset({A.Tok, A.Ref, A.BoolConst, A.IntConst, A.Not, A.Neg, A.And, A.Or, A.Compare, A.Add,
                          A.Sub, A.Scale, A.Min, A.Max, A.Cond, A.Quant})


def only_local_counts(module: A.Module) -> bool:
    """Whether every count written in the module is plain or local (``#P``, ``#[j == i - d] P``,
    ``pred``, ``pred4``) and nothing else needs the rewrite or is outside C-RASP[periodic, local]: no
    other guard, no positional predicate, no RASP-L primitive (any other kind answers False).

    Expansion copies each written guard into every instance and makes no guard or positional predicate
    of its own (an imported unary predicate such as ``pos_even``, written as a name, becomes one: such
    names answer False), and :func:`rewrite_expr` returns a count with a local guard as it is. So when
    this holds, :func:`rewrite_core` of the module's core program returns it unchanged and every count
    in it is in normal form: a family expanded into tens of thousands of definitions need not be
    walked to learn that (the compiler's class check and rewrite are skipped)."""
    from .builtins import UNARY

    kids_of = A._CHILDREN.get
    seen: set[int] = set()  # composite expressions already looked at (a lowered program shares them)
    for s in module.statements:
        if not isinstance(s, A.Definition):
            continue
        stack = [s.expr]
        while stack:  # (a loop without a call per node: it runs over every lowered RASP-L program)
            node = stack.pop()
            kind = type(node)
            kids = kids_of(kind)
            if kids is not None:
                if id(node) in seen:
                    continue
                seen.add(id(node))
                stack.extend(kids(node))
            if kind is A.Count or kind is A.Exists:
                if node.guard is not None and local_offset(node.guard) is None:
                    return False
            elif kind not in _PLAIN_KINDS or (kind is A.Ref and node.name in UNARY):
                return False
    return True


def rewrite_core(program: A.CoreProgram) -> A.CoreProgram:
    defs = []
    changed = False
    for d in program.defs:  # most definitions have nothing to rewrite: keep them as they are
        e = rewrite_expr(d.expr)
        if e is not d.expr:
            d, changed = dataclasses.replace(d, expr=e), True
        defs.append(d)
    return dataclasses.replace(program, defs=tuple(defs)) if changed else program


def rewrite_module(module: A.Module) -> A.Module:
    stmts = tuple(
        dataclasses.replace(s, expr=rewrite_expr(s.expr)) if isinstance(s, A.Definition) else s
        for s in module.statements
    )
    return dataclasses.replace(module, statements=stmts)
