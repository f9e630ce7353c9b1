"""Position relations -> their regular form, exactly, by symbolic analysis.

A relation g(i, j) over positions j <= i (a guard) is **(T, M)-regular** when

* for 0 <= d = i - j < T, g(i, j) is whatever it is (a finite *window* of offsets), and
* for d >= T, g(i, j) = F(i mod M, j mod M) for a table F (the *far* part).

Regular guards are exactly what C-RASP[periodic, local] can count with: the window is a finite set
of local relations ``j = i - d`` (each split by the residue of j, i.e. by a periodic predicate), and
the far part is a periodic case split of counts over ``j <= i - T``, which is a plain count minus
T local counts. A unary predicate pos[phi(i)] is regular when it is periodic (T = 0, no j).

**How it is decided.** Every integer term is kept as

    t = a*i + b*j + c + p,   with a, b, c rational and p a bounded *periodic part*
                             (lo <= p <= hi, p a function of (i mod M, j mod M)).

Constants, ``i`` and ``j`` have p = 0. ``+``/``-``/negation act componentwise; ``*`` needs a constant
side. ``t % k`` (k > 0) is a pure periodic part in [0, k-1] with period lcm(M, k*L), L the common
denominator of a and b: shifting i (or j) by that period adds a multiple of k to t. ``t / k`` is
``(t - t % k) / k``. An atom ``t1 op t2`` with t = t1 - t2:

* a = b = 0: depends only on residues (periodic, T = 0);
* a + b = 0, a != 0: t = a*d + c + p, whose sign for d > -(c + lo)/a (a > 0) or
  d > (c + hi)/(-a) (a < 0) is the sign of a: regular with that T;
* a + b != 0: depends on absolute position, not translation invariant: **not regular**.

A product of two purely periodic terms is periodic. Other products of positions are kept as a
:class:`_Poly`, known only modulo constants: an integer polynomial taken ``% k`` is periodic
(``i * i % 5 == 1`` is ``i % 5`` in {1, 4}); compared as it is, it is not analysed (not translation
invariant, or a non-linear function of i - j). A Boolean combination of atoms is regular with the
largest T and the lcm of the periods. All of this is exact: no sampling is involved.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields, is_dataclass
from fractions import Fraction

import numpy as np

from . import ast as A
from .errors import RaspError, Span


@dataclass(frozen=True)
class NotRegular:
    """Why a relation is not regular: which condition of the theory fails, and where."""

    condition: str  # "translation invariance" | "periodicity" | "locality"
    message: str
    span: Span | None
    hint: str = ""  # how to say it otherwise, where the analysis knows (a position against a constant)


@dataclass(frozen=True)
class GuardForm:
    """The regular form of a relation: window length T and period M."""

    window: int
    period: int


@dataclass(frozen=True)
class _Term:
    a: Fraction
    b: Fraction
    c: Fraction
    lo: Fraction
    hi: Fraction
    period: int

    @property
    def is_const(self) -> bool:
        return self.a == 0 and self.b == 0 and self.lo == self.hi == 0

    @property
    def denominator(self) -> int:
        return math.lcm(self.a.denominator, self.b.denominator)


@dataclass(frozen=True)
class _Poly:
    """An integer term that is not linear in i and j (a product of non-constant terms), known only
    modulo constants: shifting i, or j, by a multiple of ``shift(k)`` changes it by a multiple of k.
    So ``P % k`` is periodic with period ``shift(k)`` (``i * i % 5`` has period 5), and a comparison
    of P itself is not analysed (``info`` says why)."""

    info: NotRegular
    shift: object  # int k -> int

    is_const = False


def _shift(t) -> object:
    """``shift`` of any term: for a linear one t = a*i + b*j + c + p, a shift by lcm(M, k*L) (L the
    common denominator of a and b) adds a multiple of k (a*L and b*L are integers) and keeps p."""
    if isinstance(t, _Poly):
        return t.shift
    return lambda k: math.lcm(t.period, k * t.denominator)


def _poly(info: NotRegular, x, y) -> _Poly:
    """A sum or product of two integer terms, one of them non-linear: with x = x' + k*m1 and
    y = y' + k*m2 after a shift by a multiple of both shifts, x +- y and x*y change by multiples of k."""
    sx, sy = _shift(x), _shift(y)
    return _Poly(info, lambda k: math.lcm(sx(k), sy(k)))


def _const(v) -> _Term:
    return _Term(Fraction(0), Fraction(0), Fraction(v), Fraction(0), Fraction(0), 1)


class _NotRegular(Exception):
    def __init__(self, condition: str, message: str, span: Span | None, hint: str = "") -> None:
        super().__init__(message)
        self.info = NotRegular(condition, message, span, hint)


def _term(r) -> _Term:
    if isinstance(r, A.PInt):
        return _const(r.value)
    if isinstance(r, A.PVar):
        one, zero = Fraction(1), Fraction(0)
        return _Term(one if r.name == "i" else zero, one if r.name == "j" else zero, zero, zero, zero, 1)
    if isinstance(r, A.PNeg):
        t = _term(r.operand)
        if isinstance(t, _Poly):
            return t
        return _Term(-t.a, -t.b, -t.c, -t.hi, -t.lo, t.period)
    if isinstance(r, A.PBin):
        x, y = _term(r.left), _term(r.right)
        poly = x if isinstance(x, _Poly) else y if isinstance(y, _Poly) else None
        if poly is not None:
            if r.op in "+-*":
                return _poly(poly.info, x, y)
            k = int(y.c)  # (a positive constant: y is no _Poly)
            if r.op == "%":
                return _Term(Fraction(0), Fraction(0), Fraction(0), Fraction(0), Fraction(k - 1), poly.shift(k))
            return _Poly(poly.info, lambda k2: poly.shift(k * k2))  # floor(P / k) moves by k2 when P moves by k*k2
        if r.op in "+-":
            s = 1 if r.op == "+" else -1
            lo, hi = (y.lo, y.hi) if s == 1 else (-y.hi, -y.lo)
            return _Term(x.a + s * y.a, x.b + s * y.b, x.c + s * y.c, x.lo + lo, x.hi + hi,
                         math.lcm(x.period, y.period))
        if r.op == "*":
            if y.is_const:
                x, y = y, x
            if not x.is_const:
                return _product(x, y, r.span)
            k = x.c
            lo, hi = sorted((k * y.lo, k * y.hi))
            return _Term(k * y.a, k * y.b, k * y.c, lo, hi, y.period)
        k = int(y.c)  # the type checker guarantees a positive integer constant
        if x.is_const:
            v = int(x.c)
            return _const(v % k if r.op == "%" else v // k)
        period = math.lcm(x.period, k * x.denominator)
        if r.op == "%":
            return _Term(Fraction(0), Fraction(0), Fraction(0), Fraction(0), Fraction(k - 1), period)
        # t / k = (t - t % k) / k
        return _Term(x.a / k, x.b / k, x.c / k, (x.lo - (k - 1)) / k, x.hi / k, period)
    raise TypeError(f"not a term: {r!r}")


def _product(x: _Term, y: _Term, span) -> _Term:
    """x * y for two non-constant terms. Exact when both are purely periodic (a = b = 0): the product
    is periodic with the corner products as bounds. Anything else is not analysed: a factor that
    moves with absolute position makes the product fail translation invariance; two factors in
    i - j give a non-linear function of the distance, for which no window of local relations is
    derived (the analysis is linear in i - j)."""
    if x.a == x.b == 0 and y.a == y.b == 0:
        xs, ys = (x.c + x.lo, x.c + x.hi), (y.c + y.lo, y.c + y.hi)
        corners = [u * v for u in xs for v in ys]
        return _Term(Fraction(0), Fraction(0), Fraction(0), min(corners), max(corners), math.lcm(x.period, y.period))
    if x.a + x.b != 0 or y.a + y.b != 0:
        info = NotRegular("translation invariance",
                          "multiplies positions: the product changes when i and j shift together "
                          "(it depends on absolute position)", span)
    else:
        info = NotRegular("locality",
                          "multiplies a term that grows with the distance i - j by another non-constant term: "
                          "only linear arithmetic in i - j is reduced to finitely many local relations "
                          "(write it as comparisons of i - j with constants)", span)
    return _poly(info, x, y)


def _formula(r) -> GuardForm:
    if isinstance(r, A.PBool):
        return GuardForm(0, 1)
    if isinstance(r, (A.PAnd, A.POr)):
        f, g = _formula(r.left), _formula(r.right)
        return GuardForm(max(f.window, g.window), math.lcm(f.period, g.period))
    if isinstance(r, A.PNot):
        return _formula(r.operand)
    if isinstance(r, A.PCmp):
        x, y = _term(r.left), _term(r.right)
        for t in (x, y):
            if isinstance(t, _Poly):  # a product compared as it is, not modulo a constant
                raise _NotRegular(t.info.condition, t.info.message, t.info.span)
        a, b, c = x.a - y.a, x.b - y.b, x.c - y.c
        lo, hi = x.lo - y.hi, x.hi - y.lo
        period = math.lcm(x.period, y.period)
        if a == 0 and b == 0:
            return GuardForm(0, period)
        if a + b != 0:
            if _constant_on_domain(r.op, a, b, c, lo, hi) is not None:
                return GuardForm(0, 1)  # e.g. j >= 0: the same for every 0 <= j <= i
            what = "the counted position j" if a == 0 else "the current position i" if b == 0 else "i and j"
            hint = ""
            if (a == 0 or b == 0) and lo == hi:  # one position against a constant: a count says it
                hint = ("a position compared with a constant is plain C-RASP written with counts: "
                        + ("pos[i <= 5] is #true <= 6 (#true counts the positions up to i)" if b == 0 else
                           "#[j <= 2] P is #(P && #true <= 3) (#true inside the count is j + 1)"))
            raise _NotRegular(
                "translation invariance",
                f"compares {what} with a bound that does not move with i - j: depends on absolute position",
                r.span, hint,
            )
        bound = -(c + lo) / a if a > 0 else (c + hi) / (-a)
        window = max(0, math.floor(bound) + 1)
        return GuardForm(window, period)
    raise TypeError(f"not a formula: {r!r}")


def equality_offset(rel: A.PosExpr) -> int | None:
    """d >= 0 when ``rel`` is an equation of linear terms (:func:`_term`, no ``%`` or ``/`` part) that
    holds exactly when j = i - d (``i - j == 300``, ``2 * i == 2 * j + 4``, ``j + 5 == i``); else None.
    The normal form's tables would need d + 1 columns: ``i - j == 2147483647`` passed TABLE_CAP while
    ``j == i - 2147483647``, the same relation, was one local count. (Guards are checked to stay within
    64-bit integers at positions up to 2^31, so this exact arithmetic is the evaluation's.)"""
    if not (isinstance(rel, A.PCmp) and rel.op == "=="):
        return None
    x, y = _term(rel.left), _term(rel.right)
    if any(isinstance(t, _Poly) or t.lo != 0 or t.hi != 0 or t.period != 1 for t in (x, y)):
        return None
    a, b, c = x.a - y.a, x.b - y.b, x.c - y.c  # a i + b j + c == 0
    if a == 0 or a != -b:
        return None
    d = -c / a  # i - j == d
    return int(d) if d.denominator == 1 and d >= 0 else None


def eventually_constant(rel: A.PosExpr) -> tuple[int, bool] | None:
    """``(i0, value)`` when ``rel`` is one comparison that reads j and whose value is ``value`` at
    every 0 <= j <= i once i >= i0; else None (a comparison of i alone is an absolute atom,
    ``rasp.rewrite.absolute_atoms``). ``i + j >= 7`` is (7, True), ``2 * i - j > 3`` is (4, True),
    ``i + j == 5`` is (6, False), ``2 * i + j % 2 >= 5`` is (3, True).

    With t = a*i + b*j + c + p (lo <= p <= hi) = (a + b)*j + a*(i - j) + c + p and both j and i - j
    at least 0: when a and a + b are both positive, t >= min(a, a + b)*i + c + lo, so t >= 0 for
    every j once i >= -(c + lo) / min(a, a + b) (which decides ``>=`` and ``<``) and t > 0 once i is
    past it (which decides the others). Both negative: t <= max(a, a + b)*i + c + hi, at most 0 once
    i >= (c + hi) / -max(a, a + b) and below 0 past it. Such a comparison is not translation
    invariant (a + b != 0), but only finitely many positions i see it vary, so a count under it is the
    count under its value from i0 on and a table of finitely many counts before
    (``rasp.rewrite.eventual_count``). With a = 0 it never settles (j = 0 stays in range); with a and
    a + b of opposite signs (``i - 2 * j >= 0``) its boundary moves with i. Sound, not tight: the
    bound on p may set i0 later than the first position that settles."""
    if not isinstance(rel, A.PCmp):
        return None
    x, y = _term(rel.left), _term(rel.right)
    if isinstance(x, _Poly) or isinstance(y, _Poly):
        return None
    a, b, c = x.a - y.a, x.b - y.b, x.c - y.c
    lo, hi = x.lo - y.hi, x.hi - y.lo
    s = a + b
    if b == 0 and "j" not in position_names(rel):  # of i alone: rasp.rewrite.absolute_atoms splits it off
        return None
    if a > 0 and s > 0:  # t >= bound... : t > 0 from the first i past it, t >= 0 from it on
        bound, sign, weak = -(c + lo) / min(a, s), 1, rel.op in (">=", "<")
    elif a < 0 and s < 0:
        bound, sign, weak = (c + hi) / -max(a, s), -1, rel.op in ("<=", ">")
    else:
        return None
    # ``>=`` and ``<`` (``<=`` and ``>`` when t falls) are decided once t >= 0 (t <= 0); the others
    # need t != 0 as well
    i0 = math.ceil(bound) if weak else math.floor(bound) + 1
    return max(0, i0), bool(_PCMP[rel.op](sign, 0))


def select_comparison(rel: A.PosExpr) -> bool:
    """Whether ``rel`` is one comparison (or its negation) whose sides are each a linear term
    (:func:`_term`, no ``%`` or ``/`` part) that is a constant or one index plus a constant
    (``j <= 3``, ``j + 1 < i``, ``i - 2 == j``): what one RASP-L select computes (theory.md: RASP-L
    compares indices, possibly after adding a constant)."""
    while isinstance(rel, A.PNot):
        rel = rel.operand
    if not isinstance(rel, A.PCmp):
        return False
    for t in (_term(rel.left), _term(rel.right)):
        if isinstance(t, _Poly) or t.lo != 0 or t.hi != 0 or t.period != 1 or (t.a, t.b) not in ((0, 0), (1, 0), (0, 1)):
            return False
    return True


def _constant_on_domain(op: str, a, b, c, lo, hi) -> bool | None:
    """The value of ``t op 0`` when it is the same at every 0 <= j <= i, else None.

    t = a*i + b*j + c + p = (a + b)*j + a*d + c + p with j, d = i - j >= 0 and lo <= p <= hi, so t
    is bounded below by c + lo when a + b >= 0 and a >= 0, and above by c + hi when both are <= 0.
    A bound that decides the comparison (``j >= 0``, ``i + j > -1``) makes the atom constant; the
    answer is sound, never a guess (None only means "not shown constant")."""
    s = a + b
    if s > 0 and a >= 0:
        m = c + lo  # t >= m
        table = {">=": True if m >= 0 else None, ">": True if m > 0 else None,
                 "<": False if m >= 0 else None, "<=": False if m > 0 else None,
                 "==": False if m > 0 else None, "!=": True if m > 0 else None}
    elif s < 0 and a <= 0:
        m = c + hi  # t <= m
        table = {"<=": True if m <= 0 else None, "<": True if m < 0 else None,
                 ">": False if m <= 0 else None, ">=": False if m < 0 else None,
                 "==": False if m < 0 else None, "!=": True if m < 0 else None}
    else:
        return None
    return table[op]


def analyze_relation(rel: A.PosExpr) -> GuardForm | NotRegular:
    """The (T, M)-regular form of a relation over i and j (or i alone), or why there is none."""
    try:
        return _formula(rel)
    except _NotRegular as exc:
        return exc.info


# ---------------------------------------------------------------------- evaluation
def eval_relation(rel: A.PosExpr, i, j=None):
    """Evaluate a relation on integer arrays (or ints) i and j, with Python's // and % semantics."""
    return eval_function(rel, {"i": i, "j": j})


def wrap64(v: int) -> int:
    """A Python int as the int64 arithmetic of the evaluation computes it (wrapping around at 2^63)."""
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)


def int64_op(op: str, x: int, y: int) -> int:
    """``x op y`` for Python ints as the int64 evaluation computes it (``/`` floor division, ``%``
    Python modulo, wrapping at 2^63)."""
    return wrap64(x + y if op == "+" else x - y if op == "-" else x * y if op == "*" else x // y if op == "/" else x % y)


_PCMP = {
    "==": np.equal, "!=": np.not_equal, "<": np.less, ">": np.greater,
    "<=": np.less_equal, ">=": np.greater_equal,
}


def eval_function(rel: A.PosExpr, env: dict):
    """Evaluate an integer/bool expression (relation or map function) with variables bound in env.

    Values are ints or numpy arrays; ``/`` is floor division and ``%`` Python's modulo (the type
    checker makes every divisor a positive constant); a table lookup with a missing key gives 0."""
    ev = lambda r: eval_function(r, env)  # noqa: E731
    if isinstance(rel, (A.PInt, A.PBool)):
        return rel.value
    if isinstance(rel, A.PVar):
        return env[rel.name]
    if isinstance(rel, A.PNeg):
        x = ev(rel.operand)
        return wrap64(-x) if type(x) is int else -x  # -(-2^63) wraps, as int64 negation does
    if isinstance(rel, A.PBin):
        x, y = ev(rel.left), ev(rel.right)
        if type(x) is int and type(y) is int:  # constants: as int64 arithmetic would compute them (it wraps)
            return int64_op(rel.op, x, y)
        if rel.op == "+":
            return x + y
        if rel.op == "-":
            return x - y
        if rel.op == "*":
            return x * y
        if rel.op == "/":
            return np.floor_divide(x, y)
        return np.mod(x, y)
    if isinstance(rel, A.PCmp):
        return _PCMP[rel.op](ev(rel.left), ev(rel.right))
    if isinstance(rel, A.PAnd):
        return np.logical_and(ev(rel.left), ev(rel.right))
    if isinstance(rel, A.POr):
        return np.logical_or(ev(rel.left), ev(rel.right))
    if isinstance(rel, A.PNot):
        return np.logical_not(ev(rel.operand))
    if isinstance(rel, A.PCond):
        return np.where(ev(rel.test), ev(rel.then), ev(rel.other))
    if isinstance(rel, A.PTable):
        x = np.asarray(ev(rel.index))
        out = np.zeros(x.shape, dtype=np.int64)
        for k, v in rel.entries:
            out = np.where(x == k, v, out)
        return out
    raise TypeError(f"not a relation: {rel!r}")


def position_names(r) -> frozenset[str]:
    """The position variables (``i``, ``j``) a relation mentions."""
    if isinstance(r, A.PVar):
        return frozenset((r.name,))
    out: frozenset[str] = frozenset()
    if is_dataclass(r) and not isinstance(r, type):
        for f in fields(r):
            v = getattr(r, f.name)
            if not A.is_span_field(f.name) and is_dataclass(v) and not isinstance(v, type):
                out |= position_names(v)
    return out


def eventually_periodic(rel: A.PosExpr) -> tuple[int, int] | None:
    """``(c, M)`` for a unary relation phi(i) (a ``pos[...]``: a function of i alone) with
    phi(i) = phi(i + M) for every i >= c, or None where the analysis cannot show one.

    Every comparison of the linear analysis (:func:`_term`) is ``a i + c0 + p(i) op 0`` with p
    periodic and within [lo, hi]: for a = 0 it is periodic; otherwise its sign is that of a from the
    first i where |a i + c0| outgrows the periodic part (a > 0: a i + c0 + lo > 0), so it is constant
    from there on. ``and``/``or``/``not`` take the largest start and the lcm of the periods.
    ``i <= 5`` is (6, 1); ``i % 2 == 0 || i > 10`` is (11, 2)."""
    try:
        return _eventual(rel)
    except _NotRegular:
        return None


def _eventual(r) -> tuple[int, int]:
    if isinstance(r, A.PBool):
        return 0, 1
    if isinstance(r, (A.PAnd, A.POr)):
        (c1, m1), (c2, m2) = _eventual(r.left), _eventual(r.right)
        return max(c1, c2), math.lcm(m1, m2)
    if isinstance(r, A.PNot):
        return _eventual(r.operand)
    if isinstance(r, A.PCmp):
        x, y = _term(r.left), _term(r.right)
        if isinstance(x, _Poly) or isinstance(y, _Poly) or x.b != 0 or y.b != 0:
            raise _NotRegular("periodicity", "not a function of i alone, linear in i", r.span)
        a, c0 = x.a - y.a, x.c - y.c
        lo, hi = x.lo - y.hi, x.hi - y.lo
        period = math.lcm(x.period, y.period)
        if a == 0:
            return 0, period
        start = -(c0 + lo) / a if a > 0 else (c0 + hi) / (-a)  # strictly past it the sign is a's
        return max(0, math.floor(start) + 1), 1
    raise _NotRegular("periodicity", "not analysed", getattr(r, "span", None))


@functools.lru_cache(maxsize=4096)
def periodic_residues(rel: A.PosExpr) -> tuple[int, frozenset] | None:
    """(M, residues) with minimal period M for a periodic unary relation (a ``pos[...]``: a function
    of i alone), or None when it is not periodic: M evaluations, not an M x M table (cached: a
    rewritten periodic guard repeats the same predicates in every branch)."""
    form = analyze_relation(rel)
    if not isinstance(form, GuardForm) or form.window != 0:
        return None
    M = form.period
    if M > TABLE_CAP:
        raise RaspError(f"this positional predicate has period {M:,}: its table would have more than {TABLE_CAP:,} "
                        "entries, too large to analyse or compile", rel.span,
                        "a smaller period (rasp run evaluates it as written)")
    vals = np.broadcast_to(np.asarray(eval_relation(rel, np.arange(M, dtype=np.int64)), dtype=bool), (M,))
    r = np.arange(M)
    for p in range(1, M + 1):
        if M % p == 0 and np.array_equal(vals, vals[r % p]):
            return p, frozenset(int(x) for x in np.flatnonzero(vals[:p]))
    raise AssertionError("unreachable")


#: the most table entries (M x (M + T)) a regular relation may need: beyond it the normal form (one
#: branch per residue of i, each listing residues of j) is too large to build or compile
#: (rasp.rewrite.regular_table refuses it), and the interpreter counts such a guard by its general path
TABLE_CAP = 1 << 22


def table_cells(form: GuardForm) -> int:
    """Entries of a relation's tables: ``far`` is M x M, ``local`` M x T."""
    return form.period * (form.period + form.window)


def far_table(rel: A.PosExpr, form: GuardForm) -> np.ndarray:
    """F[ri, rj] = g(i, j) for any i - j >= T with i = ri, j = rj (mod M), from one representative each."""
    M, T = form.period, form.window
    ri = np.arange(M)[:, None]
    rj = np.arange(M)[None, :]
    # smallest i >= rj + T with i = ri (mod M)
    i = ri + M * np.maximum(0, -((ri - rj - T) // M))
    j = np.broadcast_to(rj, i.shape)
    return np.broadcast_to(np.asarray(eval_relation(rel, i, j), dtype=bool), (M, M)).copy()
