"""RASP-L: conformance, lowering to C-RASP[periodic, local], and the verdict of a RASP-L program.

Three public functions:

* :func:`conformance` ``(program) -> list[Reason]`` -- where the program breaks the RASP-L
  restrictions of Zhou et al. (arXiv 2310.16028), each reason located at the offending node;
* :func:`lower` ``(program) -> Program | None`` -- the same function as a C-RASP program (no RASP-L
  primitive left) when every RASP-L part is C-RASP in disguise, else None; :func:`lower_explained`
  also says which node did not lower and why;
* :func:`verdict_for_raspl` ``(program) -> rasp.checker.Verdict`` -- the lowered program's C-RASP
  fragment (guaranteed) when it lowers, fragment ``RASP-L`` (guarantee ``conjectured``) when it
  conforms but does not lower, ``none`` with located reasons when it violates RASP-L.

RASP-L conformance (the rules, decided on the core program)
-----------------------------------------------------------

1. **Causal selectors only.** Always true here: ``select`` is causal by construction (query i only
   sees keys j <= i); nothing can express a non-causal selector.
2. **Indices are only compared.** A value is *a shifted index* when it is ``indices`` or
   ``map(x -> x + c, s)`` / ``x - c`` of a shifted index (c a constant; slope exactly 1). Shifted
   indices may only be the keys or queries of a ``select`` (compared with anything: indices, counts,
   token values). Any other use is a violation located at that use: a map that is not a constant
   shift (``indices * 2``, ``indices % 2``), a seqmap of an index, indices as aggregate values, in a
   comparison, sum, condition or output. Positional relations of C-RASP count as index computations
   unless they are *local* (depend only on i - j over a finite window, period 1) or one comparison
   that a select makes (each side a constant or one index plus a constant: ``#[j <= 3] P`` is
   ``select(indices, full(3), <=)``, which rule 2 allows): a periodic guard or ``pos[...]`` computes
   ``i mod M``, and any other non-regular one (``j * j <= 3``, ``j <= 3 && j >= 1``) computes on
   absolute positions.
3. **Maps only over small finite domains.** Every sequence gets a value domain: tokens have the
   codes ``0 .. |alphabet + special| - 1``, bools ``{0, 1}``, constants themselves; a map's image is
   computed exactly from its arguments' domains; ``aggregate`` of a finite sequence with max/min stays
   in its values plus the default, with mean in the integer range between its least and greatest
   value plus the default; ``+ - * min max`` and conditionals combine finite domains. Counts,
   ``selector_width``, aggregates of unbounded values and indices are **unbounded**. A map or seqmap
   needs every argument finite with at most :data:`SMALL` values (RASP-L's int8 setting): a map of a
   count (``map(x -> x % 2, #"1")``) is a violation.

Lowering (the proof that a RASP-L program is C-RASP[periodic, local])
-------------------------------------------------------------------

Finite sequences are represented by a partition of bools, one per value ("one-hot"), all of them
C-RASP expressions: ``tokens`` is ``Q_a`` per symbol a, a map's case w is the disjunction of the
argument cases that f sends to w. Unbounded values stay C-RASP counts (a map over a count lowers
when f is linear there: ``x + 1``, ``x > 3``, conditionals, tables). Selectors lower when

* keys and queries are both finite (content attention): query value v selects the keys whose case
  u has ``op(u, v)``: per v, a plain count ``#P_v`` -- NoPE C-RASP;
* keys and queries are both shifted indices ``indices + a``, ``indices + b``: the relation
  ``j + a op i + b`` is translation invariant, a C-RASP guard (``j == i - 1`` for a shift by one;
  local, or plain counting for ``<``, ``<=``, ``true``);
* the op is ``true``: all j <= i, whatever keys and queries are.

``selector_width`` is then a (case split of) count(s); ``aggregate`` of a finite value is exact with
counts: max/min is the largest/smallest w with ``#(P && V_w) >= 1``; a mean ``S / n`` (S = sum of w
times ``#(P && V_w)``, n = ``#P``) truncated toward zero is the q in the value range with
``q*n <= S < (q+1)*n`` (mirrored for negative q): linear comparisons of counts. A selector that
selects at most one key (``j == i - c``) reads that key's value directly. Aggregating an unbounded
value lowers only under the identity selector (``j == i``). Anything else (a select comparing
positions with content, counts compared across positions as in sort-by-count, index arithmetic)
does not lower: :func:`lower` returns None. The lowered program keeps every bool and count
definition under its name (selector and shifted-index definitions disappear, helper definitions
``NAME__v`` hold the one-hot cases); families stay families. Lowering gives up above
:data:`DOMAIN_CAP` enumerated cases (a size limit, not a semantic one).
"""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from fractions import Fraction

from . import ast as A
from .errors import ExpansionError, RaspError, Span, TooLargeError
from .expand import expand
from .guards import GuardForm, analyze_relation, eval_relation, int64_op, periodic_residues, select_comparison, wrap64
from .parser import INT_LIMIT
from .program import Program
from .typecheck import POSITION_BOUND, check_module, symbol_comparison

RASPL_NODES = A.RASPL_NODES  # the RASP-L primitives (defined with the AST)

#: largest value domain a map may range over (RASP-L maps act on int8: 256 values)
SMALL = 256
#: largest number of cases lowering enumerates at one node (domain products, mean ranges)
DOMAIN_CAP = 4096
#: the largest max_length of a bounded lowering (its enumerations grow with the square of it)
MAX_BOUNDED_LENGTH = 4096

TRUE = A.BoolConst(True)
FALSE = A.BoolConst(False)


# ============================================================================ shared helpers
def _nodes(e):
    """Every expression node below e (iterative; shared subtrees are visited once)."""
    seen: set = set()
    stack = [e]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        yield n
        stack.extend(A.children(n))


def uses_raspl(program: Program) -> bool:
    """Whether any definition uses a RASP-L primitive: the type checker, which types every expression of
    every written definition, records it (expansion copies the primitives and makes none; a family over
    150 symbols expands to tens of thousands of definitions, which need not be walked)."""
    return program.checked.raspl


def _walk_rel(r):
    yield r
    if dataclasses.is_dataclass(r):
        for f in dataclasses.fields(r):
            v = getattr(r, f.name)
            if dataclasses.is_dataclass(v) and not A.is_span_field(f.name):
                yield from _walk_rel(v)
            elif isinstance(v, tuple):
                for x in v:
                    if dataclasses.is_dataclass(x):
                        yield from _walk_rel(x)


def _affine(body, param: str) -> tuple[int, int] | None:
    """(a, b) when the map body is exactly a*x + b in its parameter x (+ - and constant *), else None.
    a and b are int64 values: the body's int64 arithmetic is that of a*x + b modulo 2^64 (a constant
    2^64 - 1 is -1 there, as in the interpreter)."""
    if isinstance(body, A.PInt):
        return 0, body.value
    if isinstance(body, A.PVar):
        return (1, 0) if body.name == param else None
    if isinstance(body, A.PNeg):
        t = _affine(body.operand, param)
        return None if t is None else (wrap64(-t[0]), wrap64(-t[1]))
    if isinstance(body, A.PBin) and body.op in "+-*":
        x, y = _affine(body.left, param), _affine(body.right, param)
        if x is None or y is None:
            return None
        if body.op == "+":
            return wrap64(x[0] + y[0]), wrap64(x[1] + y[1])
        if body.op == "-":
            return wrap64(x[0] - y[0]), wrap64(x[1] - y[1])
        if x[0] == 0:
            return wrap64(x[1] * y[0]), wrap64(x[1] * y[1])
        if y[0] == 0:
            return wrap64(y[1] * x[0]), wrap64(y[1] * x[1])
    return None


def _body_is_bool(r) -> bool:
    if isinstance(r, (A.PCmp, A.PAnd, A.POr, A.PNot, A.PBool)):
        return True
    if isinstance(r, A.PCond):
        return _body_is_bool(r.then)
    return False


def _cmp(op: str, x, y) -> bool:
    return {"==": x == y, "!=": x != y, "<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y, "true": True}[op]


def _apply(r, env: dict, codes: dict):
    """A map body on Python ints exactly as the interpreter's int64 evaluation computes it (``/``
    floor division, ``%`` Python modulo, missing table keys 0, arithmetic wrapping at 2^63)."""
    ev = lambda s: _apply(s, env, codes)  # noqa: E731
    if isinstance(r, (A.PInt, A.PBool)):
        return r.value
    if isinstance(r, A.PSym):
        return codes[r.value]
    if isinstance(r, A.PVar):
        return env[r.name]
    if isinstance(r, A.PNeg):
        return wrap64(-ev(r.operand))
    if isinstance(r, A.PBin):
        x, y = ev(r.left), ev(r.right)
        return int64_op(r.op, x, y)
    if isinstance(r, A.PCmp):
        return _cmp(r.op, ev(r.left), ev(r.right))
    if isinstance(r, A.PAnd):
        return bool(ev(r.left)) and bool(ev(r.right))
    if isinstance(r, A.POr):
        return bool(ev(r.left)) or bool(ev(r.right))
    if isinstance(r, A.PNot):
        return not ev(r.operand)
    if isinstance(r, A.PCond):
        return ev(r.then) if ev(r.test) else ev(r.other)
    if isinstance(r, A.PTable):
        return dict(r.entries).get(int(ev(r.index)), 0)
    raise TypeError(f"not a map function node: {r!r}")


def _op_name(node) -> str:
    if isinstance(node, A.Map):
        return "map" if len(node.params) == 1 else "seqmap"
    return {A.Select: "select", A.Aggregate: "aggregate", A.SelectorWidth: "selector_width",
            A.Tokens: "tokens", A.Indices: "indices"}.get(type(node), type(node).__name__)


# ============================================================================ conformance
def _reason_cls():
    from .checker import Reason  # the checker's located reason (imported lazily: no import cycle)

    return Reason


@dataclass(frozen=True)
class _Info:
    """What conformance knows about a sequence: a shifted index, a finite domain, unbounded, a selector."""

    kind: str  # "idx" | "fin" | "unb" | "sel"
    values: frozenset = frozenset()
    what: str = ""  # for unbounded values: where they come from


_UNB = lambda what: _Info("unb", what=what)  # noqa: E731


def _contiguous(values) -> bool:
    return len(values) == max(values) - min(values) + 1


class _Conformance:
    def __init__(self, program: Program):
        self.program = program
        self.core = program.core
        self.codes = {s: k for k, s in enumerate(self.core.symbols)}
        self.defs: dict[str, _Info] = {}
        self.found: dict[tuple, object] = {}
        self.Reason = _reason_cls()

    def reason(self, condition: str, message: str, node) -> None:
        from .printer import expr_to_str

        try:
            text = expr_to_str(node)
        except TypeError:
            text = ""
        sp = node.span
        key = (sp.line if sp else 0, sp.column if sp else 0, condition, message)
        self.found.setdefault(key, self.Reason(condition, message, sp, text))

    def run(self) -> list:
        for d in self.core.defs:
            self.defs[d.name] = self.info(d.expr)
        return [self.found[k] for k in sorted(self.found, key=lambda k: (k[0], k[1], k[2], k[3]))]

    # ------------------------------------------------------------------ uses of indices
    def value(self, e, where: str) -> _Info:
        """The info of a sequence used as a value (anything but a select key/query)."""
        inf = self.info(e)
        if inf.kind == "idx":
            self.reason("RASP-L: indices", f"indices {where}: RASP-L only compares indices (possibly plus a "
                        "constant) as the keys or queries of a select", e)
            return _UNB("indices")
        return inf

    def positional(self, rel: A.Rel, node, unary: bool) -> None:
        from .guards import periodic_residues
        from .rewrite import regular_table

        if unary:  # a pos[...]: M evaluations; a constant one has period 1
            pr = periodic_residues(rel.expr)
            period = None if pr is None else pr[0]
        else:
            t = regular_table(rel.expr)
            period = None if t is None else t.period
        if period is None and not unary and select_comparison(rel.expr):
            return  # j <= 3, j + 1 < i: one select over (shifted) indices and constants
        if period is None:
            self.reason("RASP-L: indices", f"this {'positional predicate' if unary else 'guard'} depends on "
                        "absolute positions: RASP-L compares indices (possibly plus a constant) with each "
                        "other or with constants in a select, and computes nothing else on them", node)
        elif period > 1:
            self.reason("RASP-L: indices", f"this {'positional predicate' if unary else 'guard'} computes "
                        f"i mod {period}: RASP-L never computes on indices (C-RASP[periodic] is a separate "
                        "fragment)", node)

    # ------------------------------------------------------------------ the analysis
    def info(self, e) -> _Info:
        if isinstance(e, (A.Tok, A.BoolConst)):
            return _Info("fin", frozenset({0, 1}))
        if isinstance(e, A.IntConst):
            return _Info("fin", frozenset({e.value}))
        if isinstance(e, A.Ref):
            return self.defs[e.name]
        if isinstance(e, A.Tokens):
            return _Info("fin", frozenset(range(len(self.core.symbols))))
        if isinstance(e, A.Indices):
            return _Info("idx")
        if isinstance(e, (A.Not, A.And, A.Or)):
            for c in A.children(e):
                self.value(c, "in a Boolean operation")
            return _Info("fin", frozenset({0, 1}))
        if isinstance(e, A.Compare):
            self.value(e.left, "in a comparison outside select")
            self.value(e.right, "in a comparison outside select")
            return _Info("fin", frozenset({0, 1}))
        if isinstance(e, A.PosPred):
            self.positional(e.rel, e, unary=True)
            return _Info("fin", frozenset({0, 1}))
        if isinstance(e, A.Count):
            if isinstance(e.guard, A.Rel):
                self.positional(e.guard, e, unary=False)
            self.value(e.body, "counted")
            return _UNB("a count")
        if isinstance(e, A.Cond):
            self.value(e.test, "as a condition")
            a, b = self.value(e.then, "in a conditional"), self.value(e.other, "in a conditional")
            if isinstance(e.test, A.BoolConst):  # e.g. a folded symbol comparison
                return a if e.test.value else b
            return self.combine([a, b], lambda x, y: [x, y])
        if isinstance(e, (A.Add, A.Sub, A.Min, A.Max, A.Scale)):
            kids = A.children(e)
            infos = [self.value(c, "in arithmetic") for c in kids]
            if isinstance(e, (A.Add, A.Sub)) and all(i.kind == "fin" and _contiguous(i.values) for i in infos):
                (la, ha), (lb, hb) = ((min(i.values), max(i.values)) for i in infos)
                lo, hi = (la + lb, ha + hb) if isinstance(e, A.Add) else (la - hb, ha - lb)
                return _Info("fin", frozenset(range(lo, hi + 1))) if hi - lo < SMALL else _UNB("a large range")
            f = {A.Add: lambda x, y: [x + y], A.Sub: lambda x, y: [x - y], A.Min: lambda x, y: [min(x, y)],
                 A.Max: lambda x, y: [max(x, y)]}.get(type(e))
            if isinstance(e, A.Scale):
                return self.combine(infos, lambda x: [e.k * x])
            return self.combine(infos, f)
        if isinstance(e, A.Map):
            return self.map(e)
        if isinstance(e, A.Select):
            self.info(e.keys)  # keys and queries may be anything, shifted indices included
            self.info(e.queries)
            return _Info("sel")
        if isinstance(e, A.SelectorWidth):
            self.info(e.selector)
            return _UNB("selector_width")
        if isinstance(e, A.Aggregate):
            self.info(e.selector)
            v = self.value(e.values, "as aggregated values")
            if v.kind != "fin":
                return _UNB("an aggregate of unbounded values")
            if e.reduction == "mean":
                lo, hi = min(v.values), max(v.values)
                if hi - lo + 1 > SMALL:
                    return _UNB("a mean over a large range")
                return _Info("fin", frozenset(range(lo, hi + 1)) | {e.default})
            return _Info("fin", v.values | {e.default})
        raise TypeError(f"not a core expression: {e!r}")

    def combine(self, infos: list[_Info], f) -> _Info:
        if all(i.kind == "fin" for i in infos):
            size = 1
            for i in infos:
                size *= len(i.values)
            if size <= DOMAIN_CAP:
                out = set()
                for combo in itertools.product(*(sorted(i.values) for i in infos)):
                    out.update(int(v) for v in f(*combo))
                if len(out) <= SMALL:
                    return _Info("fin", frozenset(out))
            return _UNB("a large finite domain")
        whats = [i.what for i in infos if i.kind != "fin"]
        return _UNB(whats[0] if whats else "")

    def map(self, e: A.Map) -> _Info:
        name = _op_name(e)
        infos = [self.info(a) for a in e.args]
        if any(i.kind == "idx" for i in infos):
            if len(e.args) == 1:
                lin = _affine(e.body, e.params[0])
                if lin is not None and lin[0] == 1:
                    return _Info("idx")  # indices + c: still only a shifted index
                if lin is not None and lin[0] == 0:
                    return _Info("fin", frozenset({lin[1]}))
            self.reason("RASP-L: indices", f"{name} computes on indices: only a constant shift "
                        "map(x -> x + c, indices) is RASP-L, and only as select keys or queries", e)
            return _UNB("indices")
        for a, i in zip(e.args, infos):
            if i.kind != "fin":
                self.reason("RASP-L: finite maps", f"{name} over an unbounded domain (its argument comes from "
                            f"{i.what or 'an unbounded value'}): RASP-L maps act on small finite domains", e)
                return _UNB(f"a {name} of unbounded values")
            if len(i.values) > SMALL:
                self.reason("RASP-L: finite maps", f"{name} over {len(i.values)} values: RASP-L maps act on "
                            f"at most {SMALL} (int8)", e)
                return _UNB(f"a {name} of a large domain")
        size = 1
        for i in infos:
            size *= len(i.values)
        if size > DOMAIN_CAP * 16:
            return _UNB(f"a {name} of a large domain")
        out = set()
        for combo in itertools.product(*(sorted(i.values) for i in infos)):
            out.add(int(_apply(e.body, dict(zip(e.params, combo)), self.codes)))
        return _Info("fin", frozenset(out))


def conformance(program: Program) -> list:
    """RASP-L violations of ``program``: a list of :class:`rasp.checker.Reason` (``.line``, ``.col``,
    ``.condition``, ``.message``, ``.span``, ``.text``), each located at the offending node; empty when
    the program conforms. Conditions: ``RASP-L: indices``, ``RASP-L: finite maps``."""
    return _Conformance(program).run()


# ============================================================================ lowering: values
@dataclass
class Fin:
    """A finite sequence: ``cases[v]`` is a C-RASP bool that holds exactly where the value is v (the
    cases partition every position); ``expr`` is the value as one C-RASP expression, when known."""

    type: str  # A.BOOL or A.COUNT
    cases: dict
    expr: object = None


@dataclass
class Cnt:
    """An unbounded count, as a C-RASP count expression."""

    expr: object


@dataclass
class Idx:
    """``indices + shift``."""

    shift: int


@dataclass
class Sel:
    """A lowered selector: per query case (``qcond``, None = always), the keys it selects are those
    with ``pred`` (a bool of j) and ``guard(i, j)`` (a relation, None = every j <= i)."""

    branches: list
    at_most_one: bool = False
    identity: bool = False


class _Fail(Exception):
    def __init__(self, message: str, node=None):
        super().__init__(message)
        self.message = message
        self.node = node


#: the token symbols of the program being lowered (tokens are exclusive: "a" && "b" is false, and
#: the disjunction of every symbol is true); set by lower_explained for the duration of a lowering
_UNIVERSE: tuple = ()


_TOKSETS: dict = {}  # id(node) -> (node, symbols or None): memo for _tokset (nodes kept alive)


def _tokset(e) -> list | None:
    """The symbols of a disjunction of token tests ``"a" || "b"``, or None for anything else."""
    if isinstance(e, A.Tok):
        return [e.symbol.value] if isinstance(e.symbol, A.SymLit) else None
    if not isinstance(e, A.Or):
        return None
    hit = _TOKSETS.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1]
    x = _tokset(e.left)
    y = _tokset(e.right) if x is not None else None
    if x is None or y is None:
        out = None
    else:
        seen = set(x)
        out = x + [s for s in y if s not in seen]
    _TOKSETS[id(e)] = (e, out)
    return out


def _from_tokset(symbols: list):
    if not symbols:
        return FALSE
    if _UNIVERSE and set(symbols) >= set(_UNIVERSE):
        return TRUE
    out = A.Tok(A.SymLit(symbols[0]))
    for s in symbols[1:]:
        out = A.Or(out, A.Tok(A.SymLit(s)))
    if isinstance(out, A.Or):
        _TOKSETS[id(out)] = (out, list(symbols))
    return out


def _and(a, b):
    if a == FALSE or b == FALSE:
        return FALSE
    if a == TRUE:
        return b
    if b == TRUE:
        return a
    if a is b:
        return a
    x, y = _tokset(a), _tokset(b)
    if x is not None and y is not None:
        return _from_tokset([s for s in x if s in y])
    return A.And(a, b)


def _or(a, b):
    if a == TRUE or b == TRUE:
        return TRUE
    if a == FALSE:
        return b
    if b == FALSE:
        return a
    if a is b:
        return a
    x, y = _tokset(a), _tokset(b)
    if x is not None and y is not None:
        seen = set(x)
        extra = [s for s in y if s not in seen]
        if not extra:
            return a
        symbols = x + extra
        if _UNIVERSE and len(symbols) >= len(_UNIVERSE) and set(symbols) >= set(_UNIVERSE):
            return TRUE
        out = a  # extend the existing chain (no rebuilding: disjunctions grow one symbol at a time)
        for sym in extra:
            out = A.Or(out, A.Tok(A.SymLit(sym)))
        _TOKSETS[id(out)] = (out, symbols)
        return out
    return A.Or(a, b)


def _not(a):
    if isinstance(a, A.BoolConst):
        return A.BoolConst(not a.value)
    if isinstance(a, A.Not):
        return a.operand
    return A.Not(a)


def _ors(parts):
    """The disjunction of parts; token tests are merged into one disjunction first."""
    toks: list = []
    seen: set = set()
    rest = []
    for p in parts:
        t = _tokset(p)
        if t is None:
            rest.append(p)
        else:
            for sym in t:
                if sym not in seen:
                    seen.add(sym)
                    toks.append(sym)
    out = _from_tokset(toks) if toks else FALSE
    for p in rest:
        out = _or(out, p)
    return out


def _balanced(items: list, join, empty):
    """``join`` over ``items`` as a balanced tree (depth log2 of their number), or ``empty``."""
    if not items:
        return empty
    while len(items) > 1:
        items = [join(items[k], items[k + 1]) if k + 1 < len(items) else items[k] for k in range(0, len(items), 2)]
    return items[0]


def _int(v: int):
    """The constant v as an expression. Past the largest literal (2^31 - 1; the quotient lowering scales
    constants by divisors) it is written as the parser reads ``2147483647 * q + r``, so that the
    printed proof parses back (it printed a literal the language refuses)."""
    v = int(v)
    if abs(v) > INT_LIMIT:
        q, r = divmod(abs(v), INT_LIMIT)
        e = A.Scale(INT_LIMIT, _int(q))
        e = A.Add(e, A.IntConst(r)) if r else e
        return e if v > 0 else A.Neg(e)
    return A.IntConst(v) if v >= 0 else A.Neg(A.IntConst(-v))


def _add(a, b):
    if a == A.IntConst(0):
        return b
    if b == A.IntConst(0):
        return a
    return A.Add(a, b)


def _sub(a, b):
    if b == A.IntConst(0):
        return a
    return A.Sub(a, b)


def _scale(k: int, e):
    if k == 0:
        return A.IntConst(0)
    if k == 1:
        return e
    return A.Scale(k, e)


#: the largest constant a quotient's comparison may scale (k * m): int64 holds it with room to add
QUOTIENT_BOUND = 1 << 62

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _linear(terms: tuple, const: int):
    """``sum c_t * t + const`` as an expression (terms with coefficient 0 dropped)."""
    out = None
    for c, t in terms:
        if c == 0:
            continue
        out = _scale(c, t) if out is None else (A.Add if c > 0 else A.Sub)(out, _scale(abs(c), t))
    if out is None:
        return _int(const)
    return out if const == 0 else (A.Add(out, _int(const)) if const > 0 else A.Sub(out, _int(-const)))


def _plus(q, sign: int, r, count):
    """A quotient ``(s, C, k, terms, const)`` (:meth:`_Lowerer.sym`) plus ``sign`` times the symbolic
    value r: a constant (``("k", v)``) joins ``const``, anything else ``terms`` as a count."""
    s, c, k, terms, const = q
    if r[0] == "k":
        return s, c, k, terms, const + sign * int(r[1])
    return s, c, k, terms + ((sign, count(r)),), const


def _negated(q):
    s, c, k, terms, const = q
    return -s, c, k, tuple((-a, t) for a, t in terms), -const


def _quotient_arith(op: str, a, b, count, e):
    """``s * (C / k) + R`` (a quotient, :meth:`_Lowerer.sym`) plus or minus a count or constant, times
    1 or -1, or ``C / k`` divided again by a constant (``(C / k) / m`` is ``C / (k m)`` for floor
    division by positive constants); anything else of a quotient is not C-RASP."""
    if op in "+-" and (a[0] == "q") != (b[0] == "q"):
        if a[0] == "q":
            return "q", _plus(a[1], 1 if op == "+" else -1, b, count)
        q = b[1] if op == "+" else _negated(b[1])
        return "q", _plus(q, 1, a, count)
    if op == "*" and "k" in (a[0], b[0]):
        m, q = (a[1], b) if a[0] == "k" else (b[1], a)
        if int(m) in (1, -1):
            return "q", q[1] if int(m) == 1 else _negated(q[1])
    if op == "/" and a[0] == "q" and b[0] == "k" and int(b[1]) >= 1:
        s, c, k, terms, const = a[1]
        if s == 1 and not terms and const == 0 and k * int(b[1]) <= QUOTIENT_BOUND:
            return "q", (1, c, k * int(b[1]), (), 0)
    raise _Fail(f"'{op}' of a quotient of an unbounded count in a map (not C-RASP: a map may only compare "
                "x / k, plus or minus counts and constants, with a count or a constant)", e)


def _quotient_compare(op: str, a, b, count, e):
    """A comparison with a quotient ``s * (C / k) + R`` on one side as a comparison of counts.

    With E = (the other side - R) (negated when s = -1, the comparison flipped), an integer:
    ``C / k >= E`` (floor division, k >= 1) iff ``C >= k E``, since floor(x) >= E iff x >= E for an
    integer E. Hence ``> E`` is ``C >= k (E + 1)``, ``< E`` is ``C < k E``, ``<= E`` is
    ``C < k (E + 1)``, ``== E`` both bounds, ``!= E`` neither."""
    if a[0] == "q" and b[0] == "q":
        raise _Fail("a comparison of two quotients of unbounded counts in a map (not C-RASP: each side "
                    "would need its own division)", e)
    if b[0] == "q":
        a, b, op = b, a, _FLIP[op]
    s, c, k, terms, const = _plus(_negated(a[1]), 1, b, count)  # -R + other, and -s
    if s == 1:  # a was -(C / k) + R: E = R - other, the comparison flipped
        terms, const, op = tuple((-x, t) for x, t in terms), -const, _FLIP[op]
    if abs(k) * (abs(const) + 1) > QUOTIENT_BOUND:
        raise _Fail(f"a comparison of a count divided by {k}: as a comparison of the count itself its bound, "
                    f"{k} times {const:,}, passes 2^62", e)
    scaled = tuple((k * x, t) for x, t in terms)
    low, high = _linear(scaled, k * const), _linear(scaled, k * (const + 1))
    ge_low, lt_high = A.Compare(">=", c, low), A.Compare("<", c, high)
    if op == ">=":
        return ge_low
    if op == ">":
        return A.Compare(">=", c, high)
    if op == "<":
        return A.Compare("<", c, low)
    if op == "<=":
        return lt_high
    if op == "==":
        return _and(ge_low, lt_high)
    return _not(_and(ge_low, lt_high))


def _ge1(c):
    return A.Compare(">=", c, A.IntConst(1))


def _eq0(c):
    return A.Compare("==", c, A.IntConst(0))


#: the span of the RASP-L node being lowered (given to the counts built for it)
_SPAN = None


def _count(guard, pred):
    if pred == FALSE:
        return A.IntConst(0)
    return A.Count(guard, pred, span=_SPAN)


def _shallow(node, span):
    """``node`` with ``span`` when it has none (its children keep theirs)."""
    if span is not None and dataclasses.is_dataclass(node) and getattr(node, "span", "x") is None:
        return dataclasses.replace(node, span=span)
    return node


def _chain(pairs, type_: str):
    """``v1 if c1 else v2 if c2 else ... v_last`` from [(cond, value-expr)] (the last cond is implied)."""
    pairs = [(c, v) for c, v in pairs if c != FALSE]
    if not pairs:
        return FALSE if type_ == A.BOOL else A.IntConst(0)
    out = pairs[-1][1]
    for c, v in reversed(pairs[:-1]):
        out = v if c == TRUE else A.Cond(c, v, out)
    return out


def _group(pairs) -> dict:
    """{value: disjunction of conditions} from (value, condition) pairs, dropping false cases."""
    parts: dict = {}
    for v, c in pairs:
        if c == FALSE:
            continue
        parts.setdefault(int(v), []).append(c)
    out = {v: _ors(cs) for v, cs in sorted(parts.items())}
    return {v: c for v, c in out.items() if c != FALSE}


def _fin_bool(e) -> Fin:
    if isinstance(e, A.BoolConst):
        return Fin(A.BOOL, {int(e.value): TRUE}, e)
    return Fin(A.BOOL, {1: e, 0: _not(e)}, e)


def _fin_const(v: int) -> Fin:
    return Fin(A.COUNT, {int(v): TRUE}, _int(v))


def _size(pairs_of_domains) -> int:
    n = 1
    for d in pairs_of_domains:
        n *= max(len(d), 1)
    return n


#: class -> the names of its fields that are not spans, or None for a class that is not a dataclass
_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _fields_of(cls: type) -> tuple[str, ...] | None:
    hit = _FIELDS.get(cls, 0)
    if hit == 0:
        hit = _FIELDS[cls] = (tuple(f.name for f in dataclasses.fields(cls) if not A.is_span_field(f.name))
                              if dataclasses.is_dataclass(cls) else None)
    return hit


def _respan(node, span):
    """Give a freshly built node, and its children without spans, the span of what it replaces.
    Nodes that already have a span keep it, with everything below them (built earlier). (A node's
    fields are looked up once per class: this runs over every lowered expression.)"""
    if span is None:
        return node
    cls = type(node)
    names = _fields_of(cls)  # None for anything but a dataclass instance (a class included)
    if names is None or cls is A.Tok or getattr(node, "span", None) is not None:
        return node
    hit = _TOKSETS.get(id(node))
    if hit is not None and hit[0] is node and hit[1] is not None:
        return node  # a disjunction of token tests: kept as built (shared, memoized)
    changes = {}
    for name in names:
        v = getattr(node, name)
        vt = type(v)
        if vt is tuple:
            if any(_fields_of(type(x)) is not None for x in v):
                nt = tuple(_respan(x, span) for x in v)
                if any(a is not b for a, b in zip(nt, v)):
                    changes[name] = nt
        elif _fields_of(vt) is not None:
            nv = _respan(v, span)
            if nv is not v:
                changes[name] = nv
    if getattr(node, "span", "missing") is None:
        changes["span"] = span
    return dataclasses.replace(node, **changes) if changes else node


def _subst(node, mapping: dict):
    """Replace family variables (``SymVar``) by the symbols a reference passes (templates of families)."""
    if not mapping:
        return node
    if isinstance(node, A.SymVar):
        return mapping.get(node.name, node)
    if isinstance(node, dict):
        return {k: _subst(v, mapping) for k, v in node.items()}
    if isinstance(node, list):
        return [_subst(v, mapping) for v in node]
    if isinstance(node, tuple):
        return tuple(_subst(v, mapping) for v in node)
    if isinstance(node, (Fin, Cnt, Idx, Sel)) or (dataclasses.is_dataclass(node) and not isinstance(node, type)):
        changes = {f.name: _subst(getattr(node, f.name), mapping) for f in dataclasses.fields(node) if not A.is_span_field(f.name)}
        return dataclasses.replace(node, **changes)
    return node


def _names_read(node) -> set[str]:
    """The names a lowered expression reads: family variables (``SymVar``, as in ``Q[y]``) and
    references (a symbol comparison ``y < "2"`` reads its variable as a bare ``Ref``; iterative,
    shared subtrees once)."""
    out: set[str] = set()
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, (A.SymVar, A.Ref)):
            out.add(n.name)
            if isinstance(n, A.Ref):
                stack.extend(n.indices)
        elif isinstance(n, (list, tuple)):
            stack.extend(n)
        elif dataclasses.is_dataclass(n) and not isinstance(n, type) and id(n) not in seen:
            seen.add(id(n))
            stack.extend(getattr(n, f.name) for f in dataclasses.fields(n) if not A.is_span_field(f.name))
    return out


class _Beyond:
    """For a max (min) aggregate over the value cases of ``v``: the values in the order the reduction
    tries them (largest first for max) and, for each k, the disjunction of the first k cases ("the
    value is one of w_0 .. w_(k-1)"), which a selector branch counts under its key predicate. Every
    branch asks for the same n - 1 disjunctions, of up to n cases each, so written out they cost n^2
    per branch (n^3 for an aggregate whose branches are the n values of a key: 360 KB of lowered
    text for raspl_addition_hints.rasp over 16 symbols). Named, they are a chain of helper
    definitions ``NAME__ge3 = NAME__ge4 || <case 3>`` ("the value is 3 or more", of the cases;
    ``le`` for min), one case each; written in place where they read a quantifier's variable
    (``inner``, see :meth:`_Lowerer.share`), and where they and the key predicate are token tests,
    whose intersection ``_and`` works out (a count of ``"a" || "b"``, the same in every branch
    with those tokens; named, each branch had a count of its own)."""

    def __init__(self, low: "_Lowerer", v: Fin, reduction: str, inner: frozenset):
        self.low, self.v, self.inner = low, v, inner
        self.order = sorted(v.cases, reverse=(reduction == "max"))
        self.tag = "ge" if reduction == "max" else "le"
        self.tokens = all(_tokset(c) is not None for c in v.cases.values())
        self.named: list = [FALSE]  # named[k]: the first k cases, as a reference (k >= 1)

    def expr(self, k: int, pred):
        if _tokset(pred) is not None and all(_tokset(self.v.cases[w]) is not None for w in self.order[:k]):
            # token keys and token cases: written out, so that ``_and`` intersects them with the
            # key's tokens (a count of "a" || "b", shared by every branch with those tokens)
            return _ors(self.v.cases[w] for w in self.order[:k])
        while len(self.named) <= k:
            j = len(self.named)  # the first j cases: the first j - 1 and case j - 1
            case = self.v.cases[self.order[j - 1]]
            if j == 1:
                self.named.append(case)  # one case: nothing to share
                continue
            w = self.order[j - 1]
            tag = f"{self.tag}{w}" if w >= 0 else f"{self.tag}m{-w}"
            self.named.append(self.low.share(_or(self.named[j - 1], case), tag, self.inner))
        return self.named[k]


# ============================================================================ lowering: the pass
class _Lowerer:
    def __init__(self, program: Program, max_length: int | None = None):
        self.program = program
        self.max_length = max_length  # bounded mode: exact only for inputs of at most this length
        self.cap = DOMAIN_CAP if max_length is None else max(DOMAIN_CAP, 8 * (max_length + 1) ** 2)
        self.def_exprs: dict[str, object] = {}  # emitted count definitions (for value ranges)
        self.ranges: dict[str, tuple] = {}
        self.codes = {s: k for k, s in enumerate(program.symbols)}
        self.symbols = program.symbols
        self.sigs = program.checked.signatures
        self.templates: dict[str, tuple] = {}  # def name -> (param names, abstract value)
        self.taken = set(self.sigs)
        self.helpers: set[str] = set()
        self.current: tuple = ()  # (name, definition, its parameters as references) being lowered
        self.pending: list = []  # helper definitions made for it (self.share), emitted before it

    # ------------------------------------------------------------------ values
    def count_of(self, v, node=None):
        if isinstance(v, Cnt):
            return v.expr
        if isinstance(v, Fin):
            if v.type == A.BOOL:
                raise _Fail("a bool used as a number", node)
            if v.expr is not None:
                return v.expr
            return _chain([(c, _int(w)) for w, c in v.cases.items()], A.COUNT)
        if isinstance(v, Idx) and self.max_length is not None:
            return self.count_of(self.bounded(v, node), node)
        raise self.unusable(v, node)

    def bool_of(self, v, node=None):
        if isinstance(v, Fin) and v.type == A.BOOL:
            return v.expr if v.expr is not None else v.cases.get(1, FALSE)
        raise self.unusable(v, node)

    def unusable(self, v, node):
        if isinstance(v, Idx):
            return _Fail("indices used as a value: C-RASP has no arithmetic on positions", node)
        if isinstance(v, Sel):
            return _Fail("a selector used as a value", node)
        return _Fail("a value of the wrong type", node)

    def fin_cases(self, v, node) -> Fin | None:
        """The value as a Fin (bools and finite counts), or None when it is an unbounded count. In
        bounded mode counts and indices are finite too (see :meth:`bounded`)."""
        if isinstance(v, Fin):
            return v
        if self.max_length is not None and isinstance(v, (Cnt, Idx)):
            return self.bounded(v, node)
        if isinstance(v, Cnt):
            return None
        raise self.unusable(v, node)

    # ------------------------------------------------------------------ bounded mode
    def bounded(self, v, node) -> Fin:
        """Bounded mode: a count or shifted index as a finite value, exact for positions < N =
        max_length. ``indices + c`` is ``p + c`` where ``pos[i % N == p]`` (an absolute position
        feature, written as a period-N predicate); a count is ``v`` where ``C == v``, for v in the
        range of C over inputs of length <= N (interval arithmetic: a count is in [0, N])."""
        N = self.max_length
        if isinstance(v, Idx):
            mod = A.PBin("%", A.PVar("i"), A.PInt(N))
            cases = {p + v.shift: A.PosPred(A.Rel(A.PCmp("==", mod, A.PInt(p)))) for p in range(N)}
            return Fin(A.COUNT, cases, None)
        lo, hi = self.crange(v.expr)
        if hi - lo + 1 > self.cap:
            raise _Fail(f"a count with {hi - lo + 1} possible values up to length {N} (bounded size limit)", node)
        if lo == hi:
            return _fin_const(lo)
        cases = {w: A.Compare("==", v.expr, _int(w)) for w in range(lo, hi + 1)}
        return Fin(A.COUNT, cases, v.expr)

    @staticmethod
    def absolute(n) -> bool:
        """Whether a node is a guarded count or a ``pos[...]`` of absolute positions (a relation that is
        not regular), which bounded mode enumerates below N (:meth:`bounded_guard`)."""
        if isinstance(n, (A.Count, A.Exists)) and isinstance(n.guard, A.Rel):
            return not isinstance(analyze_relation(n.guard.expr), GuardForm)
        return isinstance(n, A.PosPred) and periodic_residues(n.rel.expr) is None

    def at_positions(self, ps: list[int]):
        """Bounded mode: ``pos[i % N == p1 || ...]``, true at the positions ``ps`` below N."""
        N = self.max_length
        if not ps:
            return FALSE
        if len(ps) >= N:
            return TRUE
        mod = A.PBin("%", A.PVar("i"), A.PInt(N))
        return A.PosPred(A.Rel(_balanced([A.PCmp("==", mod, A.PInt(p)) for p in ps], A.POr, None)))

    def bounded_guard(self, e, body):
        """Bounded mode: ``#[g] P`` (or ``exists[g] P``) with a relation g that is not regular (``j <= 3``,
        ``j <= i / 2``): at query position q < N the count is ``#(P && pos[j in S_q])`` with S_q the
        positions j <= q where g(q, j) holds (inside a count's body a ``pos[...]`` is of the counted
        position j), selected by ``pos[i % N == q]``: at most N distinct counts, exact below N. The
        branches exclude each other, so they are added (or or-ed) as a balanced tree, and so are the
        positions of a ``pos[...]``: nested N deep they passed what the later passes' recursion takes
        (about N = 500)."""
        N = self.max_length
        terms = []
        for q in range(N):
            S = [j for j in range(q + 1) if eval_relation(e.guard.expr, q, j)]
            here, count = self.at_positions([q]), type(e)(None, _and(body, self.at_positions(S)))
            terms.append(A.Cond(here, count, A.IntConst(0)) if isinstance(e, A.Count) else _and(here, count))
        if isinstance(e, A.Count):
            return Cnt(_balanced(terms, _add, A.IntConst(0)))
        return _fin_bool(_balanced(terms, _or, FALSE))

    def crange(self, e) -> tuple[int, int]:
        """Bounds of a C-RASP count expression over inputs of length <= max_length."""
        N = self.max_length
        if isinstance(e, A.IntConst):
            return e.value, e.value
        if isinstance(e, A.Count):
            return 0, N
        if isinstance(e, A.Neg):
            lo, hi = self.crange(e.operand)
            return -hi, -lo
        if isinstance(e, A.Scale):
            lo, hi = self.crange(e.operand)
            return (e.k * lo, e.k * hi) if e.k >= 0 else (e.k * hi, e.k * lo)
        if isinstance(e, (A.Add, A.Sub, A.Min, A.Max)):
            (a, b), (c, d) = self.crange(e.left), self.crange(e.right)
            if isinstance(e, A.Add):
                return a + c, b + d
            if isinstance(e, A.Sub):
                return a - d, b - c
            if isinstance(e, A.Min):
                return min(a, c), min(b, d)
            return max(a, c), max(b, d)
        if isinstance(e, A.Cond):
            (a, b), (c, d) = self.crange(e.then), self.crange(e.other)
            return min(a, c), max(b, d)
        if isinstance(e, A.Quant):  # sum over the data alphabet
            lo, hi = self.crange(e.body)
            n = len(self.program.alphabet)
            return n * min(lo, 0) if lo < 0 else n * lo, n * hi if hi > 0 else n * max(hi, 0)
        if isinstance(e, A.Ref) and e.name in self.def_exprs:
            if e.name not in self.ranges:
                self.ranges[e.name] = self.crange(self.def_exprs[e.name])
            return self.ranges[e.name]
        raise _Fail(f"cannot bound this count ({type(e).__name__})", e)

    # ------------------------------------------------------------------ expressions
    def lower(self, e, bound: frozenset):
        global _SPAN
        outer, _SPAN = _SPAN, e.span or _SPAN  # counts built while lowering e carry e's span
        try:
            v = self._lower(e, bound)
        finally:
            _SPAN = outer
        if isinstance(v, Fin) and v.expr is not None:
            v = Fin(v.type, v.cases, _respan(v.expr, e.span))
        elif isinstance(v, Cnt):
            v = Cnt(_respan(v.expr, e.span))
        return v

    def _lower(self, e, bound: frozenset):
        L = lambda x: self.lower(x, bound)  # noqa: E731
        if isinstance(e, A.Tok):
            return _fin_bool(e)
        if isinstance(e, A.BoolConst):
            return _fin_bool(e)
        if isinstance(e, A.IntConst):
            return _fin_const(e.value)
        if isinstance(e, A.PosPred) and self.max_length is not None and self.absolute(e):
            # bounded mode: a pos[...] of the absolute position is the positions below N where it holds
            return _fin_bool(self.at_positions([p for p in range(self.max_length) if eval_relation(e.rel.expr, p)]))
        if isinstance(e, (A.PosPred, A.PosName)):
            return _fin_bool(e)
        if isinstance(e, A.Ref):
            if e.name not in self.sigs:
                return _fin_bool(e)  # an imported unary predicate used as a bool
            params, value = self.templates[e.name]
            return _subst(value, dict(zip(params, e.indices)))
        if isinstance(e, A.Not):
            return _fin_bool(_not(self.bool_of(L(e.operand), e.operand)))
        if isinstance(e, (A.And, A.Or)):
            a, b = self.bool_of(L(e.left), e.left), self.bool_of(L(e.right), e.right)
            return _fin_bool(type(e)(a, b))
        if isinstance(e, A.Compare):
            if symbol_comparison(e, bound):
                return _fin_bool(e)
            return self.compare(e.op, L(e.left), L(e.right), e)
        if isinstance(e, (A.Count, A.Exists)):
            body = self.bool_of(L(e.body), e.body)
            if self.max_length is not None and self.absolute(e):
                return self.bounded_guard(e, body)
            node = type(e)(e.guard, body)
            return Cnt(node) if isinstance(e, A.Count) else _fin_bool(node)
        if isinstance(e, A.Cond):
            test = self.bool_of(L(e.test), e.test)
            a, b = L(e.then), L(e.other)
            if isinstance(a, Fin) and isinstance(b, Fin) and a.type == b.type:
                pairs = [(w, _and(test, c)) for w, c in a.cases.items()]
                pairs += [(w, _and(_not(test), c)) for w, c in b.cases.items()]
                if a.type == A.BOOL:
                    return _fin_bool(A.Cond(test, self.bool_of(a), self.bool_of(b)))
                return Fin(A.COUNT, _group(pairs), A.Cond(test, self.count_of(a), self.count_of(b)))
            if isinstance(a, Fin) and a.type == A.BOOL:
                return _fin_bool(A.Cond(test, self.bool_of(a, e.then), self.bool_of(b, e.other)))
            return Cnt(A.Cond(test, self.count_of(a, e.then), self.count_of(b, e.other)))
        if isinstance(e, (A.Add, A.Sub, A.Min, A.Max)):
            a, b = L(e.left), L(e.right)
            f = {A.Add: lambda x, y: x + y, A.Sub: lambda x, y: x - y, A.Min: min, A.Max: max}[type(e)]
            node = type(e)(self.count_of(a, e.left), self.count_of(b, e.right))
            return self.arith([a, b], f, node, e)
        if isinstance(e, A.Scale):
            a = L(e.operand)
            return self.arith([a], lambda x: e.k * x, A.Scale(e.k, self.count_of(a, e.operand)), e)
        if isinstance(e, A.Neg):
            a = L(e.operand)
            return self.arith([a], lambda x: -x, A.Neg(self.count_of(a, e.operand)), e)
        if isinstance(e, A.Quant):
            body = self.lower(e.body, bound | {e.var})
            if e.op == "sum":
                return Cnt(A.Quant("sum", e.var, self.count_of(body, e.body)))
            return _fin_bool(A.Quant(e.op, e.var, self.bool_of(body, e.body)))
        if isinstance(e, A.Tokens):
            cases = {k: A.Tok(A.SymLit(s)) for k, s in enumerate(self.symbols)}
            return Fin(A.COUNT, cases, None)
        if isinstance(e, A.Indices):
            return Idx(0)
        if isinstance(e, A.Map):
            return self.map(e, bound)
        if isinstance(e, A.Select):
            return self.select(e, bound)
        if isinstance(e, A.SelectorWidth):
            sel = L(e.selector)
            if not isinstance(sel, Sel):
                raise _Fail("selector_width of something that is not a selector", e)
            return Cnt(self.by_branch(sel, lambda pred, guard: _count(guard, pred)))
        if isinstance(e, A.Aggregate):
            return self.aggregate(e, bound)
        raise TypeError(f"not an expression node: {e!r}")

    def arith(self, vals, f, node, e):
        if self.max_length is not None and any(isinstance(v, Idx) for v in vals):
            vals = [self.bounded(v, e) if isinstance(v, Idx) else v for v in vals]
            node = type(node)(*[self.count_of(v, e) for v in vals]) if not isinstance(node, A.Scale) else \
                A.Scale(node.k, self.count_of(vals[0], e))
        fins = [v for v in vals if isinstance(v, Fin)]
        if len(fins) == len(vals) and _size([v.cases for v in vals]) <= DOMAIN_CAP:
            pairs = []
            for combo in itertools.product(*(v.cases.items() for v in vals)):
                cond = TRUE
                for _, c in combo:
                    cond = _and(cond, c)
                pairs.append((f(*(w for w, _ in combo)), cond))
            cases = _group(pairs)
            if len(cases) <= DOMAIN_CAP:
                return Fin(A.COUNT, cases, node)
        for v in vals:
            if not isinstance(v, (Fin, Cnt)):
                raise self.unusable(v, e)
        return Cnt(node)

    def compare(self, op, a, b, e):
        fa, fb = self.fin_cases(a, e.left), self.fin_cases(b, e.right)
        if fa is not None and fb is not None and fa.type == fb.type and _size([fa.cases, fb.cases]) <= DOMAIN_CAP:
            pairs = [(cu, cv) for (u, cu), (v, cv) in itertools.product(fa.cases.items(), fb.cases.items())
                     if _cmp(op, u, v)]
            # the case split when it is small; else compare the two values (chains where needed)
            chain_cost = (0 if fa.expr is not None else len(fa.cases)) + (0 if fb.expr is not None else len(fb.cases))
            if len(pairs) <= max(chain_cost, 1) or fa.type == A.BOOL:
                return _fin_bool(_ors(_and(cu, cv) for cu, cv in pairs))
        if fa is not None and fa.type == A.BOOL:
            return _fin_bool(A.Compare(op, self.bool_of(a, e.left), self.bool_of(b, e.right)))
        return _fin_bool(A.Compare(op, self.count_of(a, e.left), self.count_of(b, e.right)))

    # ------------------------------------------------------------------ map / seqmap
    def map(self, e: A.Map, bound):
        vals = [self.lower(a, bound) for a in e.args]
        name = _op_name(e)
        if any(isinstance(v, Idx) for v in vals):
            if len(vals) == 1:
                lin = _affine(e.body, e.params[0])
                if lin is not None and lin[0] == 1:
                    shift = wrap64(vals[0].shift + lin[1])  # the value is i + shift in int64
                    if shift > (1 << 63) - POSITION_BOUND:  # i + shift wraps below 0 for some i < 2^31
                        raise _Fail(f"{name} adds {shift:,} to positions: past 2^63 the sum wraps around (the "
                                    "value depends on the absolute position, not translation invariant)", e)
                    return Idx(shift)
                if lin is not None and lin[0] == 0:
                    return _fin_const(lin[1])
            if self.max_length is None:
                raise _Fail(f"{name} computes on indices (C-RASP has no arithmetic on positions)", e)
            vals = [self.bounded(v, a) if isinstance(v, Idx) else v for v, a in zip(vals, e.args)]
        if self.max_length is not None and any(isinstance(v, Cnt) for v in vals):
            try:
                return self.map_values(e, vals)
            except _Fail:  # not linear in the counts: enumerate their values (bounded)
                vals = [self.bounded(v, a) if isinstance(v, Cnt) else v for v, a in zip(vals, e.args)]
        return self.map_values(e, vals)

    def map_values(self, e: A.Map, vals):
        name = _op_name(e)
        for v, a in zip(vals, e.args):
            if not isinstance(v, (Fin, Cnt)):
                raise self.unusable(v, a)
        is_bool = _body_is_bool(e.body)
        fins = [(p, v) for p, v in zip(e.params, vals) if isinstance(v, Fin)]
        cnts = [(p, v) for p, v in zip(e.params, vals) if isinstance(v, Cnt)]
        if _size([v.cases for _, v in fins]) > self.cap:
            raise _Fail(f"{name} over more than {self.cap} argument cases (lowering size limit)", e)
        if not cnts:
            # every argument finite: the image, case by case
            if len(fins) == 2:  # group by the first argument: (A_u && OR_v B_v)
                (p, a), (q, b) = fins
                pairs = []
                for u, cu in a.cases.items():
                    by_w: dict = {}
                    for w_, cv in b.cases.items():
                        w = int(_apply(e.body, {p: u, q: w_}, self.codes))
                        by_w.setdefault(w, []).append(cv)
                    pairs += [(w, _and(cu, _ors(cs))) for w, cs in by_w.items()]
            else:
                (p, a), = fins
                pairs = [(int(_apply(e.body, {p: u}, self.codes)), c) for u, c in a.cases.items()]
            cases = _group(pairs)
            if is_bool:
                return _fin_bool(cases.get(1, FALSE))
            return Fin(A.COUNT, cases, None)
        # some argument is an unbounded count: split on the finite ones, evaluate f symbolically
        results = []
        for combo in itertools.product(*(v.cases.items() for _, v in fins)):
            env = {p: ("k", w) for (p, _), (w, _) in zip(fins, combo)}
            env.update({p: ("c", v.expr) for p, v in cnts})
            cond = TRUE
            for _, c in combo:
                cond = _and(cond, c)
            r = self.sym(e.body, env, e)
            results.append((cond, self.sym_bool(r, e) if is_bool else self.sym_count(r, e)))
        out = _chain(results, A.BOOL if is_bool else A.COUNT)
        return _fin_bool(out) if is_bool else Cnt(out)

    def sym_count(self, r, e=None):
        kind, x = r
        if kind == "k":
            return _int(int(x))
        if kind == "b":
            return A.Cond(x, A.IntConst(1), A.IntConst(0))
        if kind == "q":
            raise _Fail("a quotient of an unbounded count used as a number (C-RASP has no division: a map may "
                        "only compare x / k, plus or minus counts and constants, with a count or a constant)", e)
        return x

    def sym_bool(self, r, e):
        kind, x = r
        if kind == "k":
            return A.BoolConst(bool(x))
        if kind == "b":
            return x
        raise _Fail("a number used as a condition", e)

    def sym(self, r, env, e):
        """A map body on constants ("k", v) and counts ("c", expr): ("k", v), ("c", count), ("b", bool),
        or ("q", (s, C, k, terms, c)), the value ``s * (C / k) + sum a_t * t + c`` (floor division by a
        constant k >= 1, s = 1 or -1, C and the terms counts), which only a comparison consumes
        (:func:`_quotient_compare`)."""
        S = lambda x: self.sym(x, env, e)  # noqa: E731
        C = lambda x: self.sym_count(x, e)  # noqa: E731
        if isinstance(r, (A.PInt, A.PBool)):
            return "k", r.value
        if isinstance(r, A.PSym):
            return "k", self.codes[r.value]
        if isinstance(r, A.PVar):
            return env[r.name]
        if isinstance(r, A.PNeg):
            k, x = S(r.operand)
            if k == "q":
                return "q", _negated(x)
            return ("k", wrap64(-x)) if k == "k" else ("c", _scale(-1, C((k, x))))
        if isinstance(r, A.PBin):
            a, b = S(r.left), S(r.right)
            if a[0] == "k" and b[0] == "k":  # as the interpreter's int64 arithmetic computes it
                return "k", int64_op(r.op, int(a[1]), int(b[1]))
            if "q" in (a[0], b[0]):
                return _quotient_arith(r.op, a, b, C, e)
            if r.op == "+":
                return "c", _add(C(a), C(b))
            if r.op == "-":
                return "c", _sub(C(a), C(b))
            if r.op == "*" and (a[0] == "k" or b[0] == "k"):
                k, other = (a[1], b) if a[0] == "k" else (b[1], a)
                return "c", _scale(int(k), C(other))
            if r.op == "/" and b[0] == "k" and int(b[1]) >= 1:
                return "q", (1, C(a), int(b[1]), (), 0)
            why = ("a residue of a count is not a C-RASP operation" if r.op == "%" else
                   "C-RASP counts are only added, subtracted, scaled by constants, divided by a positive "
                   "constant inside a comparison, and compared")
            raise _Fail(f"'{r.op}' of an unbounded count in a map (not C-RASP: {why})", e)
        if isinstance(r, A.PCmp):
            a, b = S(r.left), S(r.right)
            if a[0] == "k" and b[0] == "k":
                return "k", _cmp(r.op, a[1], b[1])
            if "q" in (a[0], b[0]):
                return "b", _quotient_compare(r.op, a, b, C, e)
            return "b", A.Compare(r.op, C(a), C(b))
        if isinstance(r, (A.PAnd, A.POr)):
            a, b = self.sym_bool(S(r.left), e), self.sym_bool(S(r.right), e)
            return "b", (_and(a, b) if isinstance(r, A.PAnd) else _or(a, b))
        if isinstance(r, A.PNot):
            return "b", _not(self.sym_bool(S(r.operand), e))
        if isinstance(r, A.PCond):
            t = S(r.test)
            if t[0] == "k":
                return S(r.then) if t[1] else S(r.other)
            test = self.sym_bool(t, e)
            a, b = S(r.then), S(r.other)
            if _body_is_bool(r.then):
                return "b", A.Cond(test, self.sym_bool(a, e), self.sym_bool(b, e))
            return "c", A.Cond(test, C(a), C(b))
        if isinstance(r, A.PTable):
            k, x = S(r.index)
            table = dict(r.entries)
            if k == "k":
                return "k", table.get(int(x), 0)
            idx = C((k, x))
            pairs = [(A.Compare("==", idx, _int(key)), _int(val)) for key, val in r.entries if val != 0]
            return "c", _chain(pairs + [(TRUE, A.IntConst(0))], A.COUNT)
        raise TypeError(f"not a map function node: {r!r}")

    # ------------------------------------------------------------------ select / aggregate
    def select(self, e: A.Select, bound):
        if e.op == "true":
            return Sel([(None, TRUE, None)])
        k, q = self.lower(e.keys, bound), self.lower(e.queries, bound)
        if isinstance(k, Idx) and isinstance(q, Idx):
            if abs(q.shift - k.shift) >= POSITION_BOUND:  # (a guard's constant is below 2^31)
                raise _Fail(f"select compares positions {abs(q.shift - k.shift):,} apart, beyond the "
                            f"{POSITION_BOUND:,} positions an input may have", e)
            return self.positional(k.shift, q.shift, e.op, e)
        if isinstance(k, Idx) and isinstance(q, Fin) and self.max_length is None:
            # keys j + shift against a finite query value v: the relation j op v - shift, of j alone
            # (select(indices, full(0), ==) is "the first position"): a guard that plain C-RASP says
            # with #true (rasp.rewrite.absolute_count), or one outside, as the check then reports
            if _size([q.cases]) > self.cap:
                raise _Fail(f"select over more than {self.cap} query cases (lowering size limit)", e)
            branches = []
            for v, cq in q.cases.items():
                c = int(v) - k.shift
                if abs(c) >= POSITION_BOUND:
                    raise _Fail(f"select compares positions with {c:,}, beyond the {POSITION_BOUND:,} "
                                "positions an input may have", e)
                rel = A.Rel(A.PCmp(e.op, A.PVar("j"), A.PInt(c) if c >= 0 else A.PNeg(A.PInt(-c)),
                                   span=e.span), span=e.span)
                branches.append((cq, TRUE, rel))
            if len(branches) == 1:
                branches = [(None, TRUE, branches[0][2])]
            return Sel(branches, at_most_one=e.op == "==")
        if isinstance(q, Idx) and isinstance(k, Fin) and self.max_length is None:
            return self.keys_against_position(k, q.shift, e)
        if (isinstance(k, Idx) or isinstance(q, Idx)) and self.max_length is None:
            raise _Fail("select compares positions with values that are not positions (not translation "
                        "invariant)", e)
        fk, fq = self.fin_cases(k, e.keys), self.fin_cases(q, e.queries)
        if fk is None or fq is None:
            raise _Fail("select compares unbounded values (counts) across positions: C-RASP only counts", e)
        if _size([fk.cases, fq.cases]) > self.cap:
            raise _Fail(f"select over more than {self.cap} key/query cases (lowering size limit)", e)
        branches = []
        for v, cq in fq.cases.items():
            pred = _ors(cu for u, cu in fk.cases.items() if _cmp(e.op, u, v))
            branches.append((cq, pred, None))
        if len(branches) == 1:
            branches = [(None, branches[0][1], None)]
        return Sel(branches)

    def keys_against_position(self, k: Fin, shift: int, e: A.Select) -> Sel:
        """Keys of finite values u (case c_u at j) against queries i + shift (``select(full(2),
        indices, <)``, the mirror of keys j + shift against a finite query): whether u op i + shift
        is a relation of i alone, so at each i the selected keys are those with a value in
        S(i) = {u : u op i + shift}. S changes only where i + shift crosses some u or u + 1: on
        each interval between those points it is one set, and the branch for that interval is
        ``pos[i >= a && i < b]`` (exclusive, covering every i >= 0; plain C-RASP with #true,
        rasp.rewrite.absolute_predicate) selecting the keys with ``c_u`` for u in S."""
        values = sorted(k.cases)
        if len(values) * 2 + 1 > self.cap:
            raise _Fail(f"select over more than {self.cap} key cases (lowering size limit)", e)
        # in terms of i; points below 0 or past the positions an input may have are never crossed
        cuts = sorted({u + d - shift for u in values for d in (0, 1)} | {0})
        cuts = [c for c in cuts if 0 <= c < POSITION_BOUND]
        i = A.PVar("i")
        intervals = []  # [lo, hi) of i (hi None: unbounded), with the keys' predicate there
        for lo, hi in zip(cuts, cuts[1:] + [None]):
            pred = _ors(k.cases[u] for u in values if _cmp(e.op, u, lo + shift))
            if intervals and intervals[-1][2] == pred:
                intervals[-1][1] = hi  # the same keys: one interval
            else:
                intervals.append([lo, hi, pred])
        if len(intervals) == 1:
            return Sel([(None, intervals[0][2], None)])
        branches = []
        for lo, hi, pred in intervals:
            parts = [A.PCmp(">=", i, A.PInt(lo), span=e.span)] if lo > 0 else []
            parts += [A.PCmp("<", i, A.PInt(hi), span=e.span)] if hi is not None else []
            rel = parts[0] if len(parts) == 1 else A.PAnd(parts[0], parts[1])
            branches.append((A.PosPred(A.Rel(rel, span=e.span), span=e.span), pred, None))
        return Sel(branches)

    def positional(self, a: int, b: int, op: str, node) -> Sel:
        """keys j + a, queries i + b: the relation j + a op i + b, i.e. j op i + (b - a) (located at the
        select ``node``: an error about the relation points there)."""
        e = b - a
        i = A.PVar("i")
        rhs = i if e == 0 else A.PBin("+" if e > 0 else "-", i, A.PInt(abs(e)))
        rel = A.Rel(A.PCmp(op, A.PVar("j"), rhs, span=node.span), span=node.span)
        if op == "==":
            if e > 0:
                return Sel([(None, FALSE, None)], at_most_one=True)  # j == i + e > i: never
            return Sel([(None, TRUE, rel)], at_most_one=True, identity=(e == 0))
        return Sel([(None, TRUE, rel)])

    def by_branch(self, sel: Sel, f):
        parts = [(q if q is not None else TRUE, f(pred, guard)) for q, pred, guard in sel.branches]
        return _chain(parts, A.COUNT)

    def aggregate(self, e: A.Aggregate, bound):
        sel = self.lower(e.selector, bound)
        if not isinstance(sel, Sel):
            raise _Fail("aggregate of something that is not a selector", e)
        v = self.lower(e.values, bound)
        if isinstance(v, Cnt) and sel.identity:
            return v
        if self.max_length is not None and isinstance(v, (Cnt, Idx)):
            v = self.bounded(v, e.values)
        if isinstance(v, Idx):
            raise _Fail("aggregate of indices (positions as values are not C-RASP)", e)
        if isinstance(v, Cnt):
            if sel.identity:
                return v
            raise _Fail("aggregate of an unbounded value over other positions (C-RASP cannot read a count "
                        "at another position)", e)
        if not isinstance(v, Fin):
            raise self.unusable(v, e.values)
        if sel.identity:
            return v if v.type == A.COUNT else Fin(A.COUNT, dict(v.cases), None)
        # size of the result: per branch, one condition per result value (a mean's conditions each sum
        # over every value case)
        n = len(v.cases)
        cost = len(sel.branches) * (n if e.reduction != "mean" or sel.at_most_one
                                    else (max(v.cases) - min(v.cases) + 1) * n)
        if cost > self.cap:
            raise _Fail(f"aggregate over too many cases ({cost} > {self.cap}: lowering size limit)", e)
        pairs = []
        inner = bound - {p.name for p in self.current[1].params}  # quantifier variables in scope
        beyond = _Beyond(self, v, e.reduction, inner)  # shared by every branch
        for b, (qcond, pred, guard) in enumerate(sel.branches):
            q = qcond if qcond is not None else TRUE
            if len(v.cases) > 1 and _tokset(pred) is None and isinstance(pred, (A.Or, A.And)):
                # a compound key predicate is read once per result value: named once per branch
                pred = self.share(pred, f"sel{b}", inner)
            branch = f"b{b}_" if len(sel.branches) > 1 else ""
            cases, reached = self.reduce(v, pred, guard, e.reduction, e.default, sel.at_most_one, beyond, branch,
                                         inner)
            for w, c in cases.items():
                pairs.append((w, _and(q, c)))
        one = len(sel.branches) == 1 and q == TRUE and reached is not None  # (see descending)
        return Fin(A.COUNT, _group(pairs), self.descending(beyond, e.default, reached) if one else None)

    def descending(self, beyond: _Beyond, default: int, reached: list):
        """A max (min) aggregate's value as one chain ``w_0 if G_0 else w_1 if G_1 else ... else
        default`` over its values in the order :meth:`reduce` tries them (largest first for max),
        where ``G_k`` = "a selected value is w_0 .. w_k" = ``reached[k]``, the sign reduce made
        (``#(K && V_k) >= 1``, ``V_k`` the disjunction of the first k + 1 value cases): the value is
        w_k exactly where G_k holds and G_(k-1) does not. The definition's expression is this chain:
        compared with a constant it is two signs (each G_k implies G_(k+1), which the compiler reads
        from the counts' bodies), where the chain of exact cases was a conjunction over every value
        before it (raspl_count.rasp over 150 symbols: 6 layers and 84,584 nonzero weights, now 4 and
        61,371). The exact cases stay as reduce made them, for whoever reads one value (``A == 3``,
        a map over the values).

        Only for a selector of one branch that every query position takes: with several, G_k is an
        or over the branches (``"a" && #(...) >= 1 || "b" && ...``), a gate the compiler reads no
        implication from, so the chain compared with a constant was an or over its levels, where the
        exact case it reads was one helper (helper 89: ``A0 >= 0`` of a three-branch max went from 2
        layers and 57 nonzero weights to 3 and 128). Nor where reduce made no signs (token keys and
        values, a mean, at most one selected position)."""
        parts = []  # (G_k, w_k)
        for k, w in enumerate(beyond.order):
            parts.append((reached[k], w))
            if reached[k] == TRUE:
                break
        else:
            parts.append((TRUE, default))
        # the last test is implied where the value it gives is the default's
        while len(parts) > 1 and parts[-1][1] == parts[-2][1]:
            parts.pop(-2)
        return _chain([(g, _int(w)) for g, w in parts], A.COUNT)

    def reduce(self, v: Fin, pred, guard, reduction: str, default: int, at_most_one: bool,
               beyond: _Beyond, branch: str, inner: frozenset) -> tuple[dict, list | None]:
        """{result value: condition} of one selector branch (keys with pred and guard; ``beyond``
        the aggregate's shared disjunctions, ``branch`` tags the helpers named for this branch,
        ``inner`` as for :meth:`share`), and the signs "a selected value is w_k or more" where it
        made them (for :meth:`descending`), else None."""
        if pred == FALSE:
            return {default: TRUE}, None
        cnt = _count(guard, pred)
        always = guard is None and pred == TRUE  # j = i itself is always selected
        nonempty = TRUE if always else _ge1(cnt)
        empty = FALSE if always else _eq0(cnt)
        c = {w: _count(guard, _and(pred, cw)) for w, cw in v.cases.items()}
        out: dict = {}
        values = sorted(v.cases)
        if at_most_one or len(values) == 1:
            for w in values:
                out[w] = _ge1(c[w]) if len(values) > 1 else nonempty
        elif reduction in ("max", "min"):
            order = beyond.order  # the order the values are tried (largest first for max)
            last = len(order) - 1
            if _tokset(pred) is not None and beyond.tokens:
                # token keys and token values: the count of value w is #"w" (or nothing), the same in
                # every branch; the value is w_k iff w_k is selected and none of w_0 .. w_(k-1) is,
                # "none yet" a chain of negated signs of those shared counts (named per branch:
                # NAME__b3_lt5, "no selected value of 5 or more")
                rel = "lt" if reduction == "max" else "gt"
                none_yet = TRUE
                for k, w in enumerate(order):
                    seen = FALSE if c[w] == A.IntConst(0) else _ge1(c[w])
                    if k == last and (always or w == default):
                        out[w] = none_yet  # the last value, or nothing selected (never when always)
                        return out, None
                    out[w] = _and(seen, none_yet)
                    none_yet = _and(none_yet, _not(seen))
                    if k < last and isinstance(none_yet, A.And):
                        tag = f"{rel}{w}" if w >= 0 else f"{rel}m{-w}"
                        none_yet = self.share(none_yet, f"{branch}{tag}", inner)
                if not always:
                    out[default] = _or(out.get(default, FALSE), none_yet)
                return out, None
            # otherwise one count per value, of "a selected position has one of w_0 .. w_k"
            # (the disjunction named once for every branch, NAME__ge5): the value is w_k iff
            # that holds and the count up to w_(k-1) does not, two signs whatever k is (a chain
            # of negated signs made conjunctions of up to n literals, which a key that is not a
            # token cannot tell apart across branches: raspl_addition_hints took 20 s)
            reached = [_ge1(c[order[0]])] + [_ge1(_count(guard, _and(pred, beyond.expr(k + 1, pred))))
                                             for k in range(1, last)] + [nonempty]
            for k, w in enumerate(order):
                if k == last and (always or w == default):
                    out[w] = _not(reached[k - 1]) if k else TRUE  # the last value, or nothing selected
                    return out, reached
                out[w] = _and(reached[k], _not(reached[k - 1])) if k else reached[0]
            if not always:
                out[default] = _or(out.get(default, FALSE), _not(reached[last]))
            return out, reached
        else:  # mean, truncated toward zero: S / n with S = sum w * c_w, n = cnt
            lo, hi = values[0], values[-1]
            S = A.IntConst(0)
            for w in values:
                if w > 0:
                    S = _add(S, _scale(w, c[w]))
            for w in values:
                if w < 0:
                    S = _sub(S, _scale(-w, c[w]))
            n = cnt
            for qv in range(lo, hi + 1):
                conds = []
                if qv >= 1:
                    if qv != lo:
                        conds.append(A.Compare("<=", _scale(qv, n), S))
                    if qv != hi:
                        conds.append(A.Compare("<", S, _scale(qv + 1, n)))
                elif qv == 0:
                    if hi > 0:
                        conds.append(A.Compare("<", S, n))
                    if lo < 0:
                        conds.append(A.Compare(">", _add(S, n), A.IntConst(0)))
                else:
                    if qv != hi:
                        conds.append(A.Compare("<=", S, _scale(qv, n)))
                    if qv != lo:
                        conds.append(A.Compare("<", _scale(qv - 1, n), S))
                cond = nonempty
                for x in conds:
                    cond = _and(cond, x)
                out[qv] = cond
        if empty != FALSE:
            out[default] = _or(out.get(default, FALSE), empty)
        return out, None

    # ------------------------------------------------------------------ the program
    def helper_name(self, name: str, w: int | str) -> str:
        base = f"{name}__{w}" if isinstance(w, str) or w >= 0 else f"{name}__m{-w}"
        out, k = base, 2
        while out in self.taken:
            out, k = f"{base}_{k}", k + 1
        self.taken.add(out)
        self.helpers.add(out)
        return out

    def share(self, expr, tag: str, inner: frozenset = frozenset()):
        """A reference to a new bool helper definition ``NAME__tag`` holding ``expr`` (NAME the
        definition being lowered, with its family parameters): an expression the lowering would
        otherwise write many times is written once. It is evaluated at each position like any
        definition, so the reference means what ``expr`` means wherever it stands, in a count's body
        too. ``inner``: the variables bound inside the definition (by any/all/sum) where expr stands,
        which a helper cannot take."""
        name, d, refs = self.current
        if inner and _names_read(expr) & inner:
            return expr  # it reads a variable bound inside the definition (any(y, ...)): not shareable
        h = self.helper_name(name, tag)
        self.pending.append(A.Definition(h, d.params, _shallow(expr, _SPAN or d.expr.span), span=d.span))
        return A.Ref(h, refs)

    def run(self) -> A.Module:
        module = self.program.module
        emitted: dict[str, list] = {}
        for name in self.program.checked.order:
            sig = self.sigs[name]
            d = sig.definition
            params = tuple(p.name for p in d.params)
            bound = frozenset(params)
            refs = tuple(A.SymVar(p) for p in params)
            self.current, self.pending = (name, d, refs), []
            try:
                v = self.lower(d.expr, bound)
            except _Fail as exc:
                if exc.node is None:
                    exc.node = d
                raise
            plain = not self.needs_lowering(d.expr)
            out = self.pending  # shared parts first: what follows refers to them
            me = A.Ref(name, refs)
            if isinstance(v, (Sel, Idx)):
                self.templates[name] = (params, v)
                emitted[name] = out
                continue
            if sig.type == A.BOOL:
                expr = d.expr if plain else self.bool_of(v, d.expr)
                out.append(dataclasses.replace(d, expr=_respan(expr, d.expr.span)))
                self.templates[name] = (params, _fin_bool(me))
            elif isinstance(v, Fin):
                cases = {}
                for w, c in v.cases.items():
                    if isinstance(c, (A.Tok, A.BoolConst, A.Ref)) or (isinstance(c, A.Not) and isinstance(c.operand, (A.Tok, A.Ref))):
                        cases[w] = c
                    else:
                        h = self.helper_name(name, w)
                        out.append(A.Definition(h, d.params, _shallow(c, d.expr.span), span=d.span))
                        cases[w] = A.Ref(h, refs)
                expr = d.expr if plain else (v.expr if v.expr is not None else
                                             _chain([(c, _int(w)) for w, c in cases.items()], A.COUNT))
                out.append(dataclasses.replace(d, expr=_respan(expr, d.expr.span)))
                self.templates[name] = (params, Fin(A.COUNT, cases, me))
                self.def_exprs[name] = expr
            else:
                expr = d.expr if plain else self.count_of(v, d.expr)
                out.append(dataclasses.replace(d, expr=_respan(expr, d.expr.span)))
                self.templates[name] = (params, Cnt(me))
                self.def_exprs[name] = expr
            emitted[name] = out
        # statements: declarations in place (an explicit alphabet first), definitions in dependency order
        defs = [s for name in self.program.checked.order for s in emitted[name]]
        defs = self.prune(defs)
        decls = [A.AlphabetDecl(tuple(self.program.alphabet))]
        decls += [s for s in module.statements if isinstance(s, (A.SpecialDecl, A.Import))]
        outs = [s for s in module.statements if isinstance(s, A.OutputDecl)]
        if not outs:  # the output was the last definition: name it (definition order may change)
            last = [s for s in module.statements if isinstance(s, A.Definition)][-1]
            outs = [A.OutputDecl("accept", last.name, span=last.span)]
        return A.Module(tuple(decls + defs + outs), span=module.span)

    def needs_lowering(self, e) -> bool:
        for n in _nodes(e):
            if isinstance(n, RASPL_NODES):
                return True
            if self.max_length is not None and self.absolute(n):  # bounded mode rewrites these
                return True
            if isinstance(n, A.Ref) and n.name in self.templates and isinstance(self.templates[n.name][1], (Sel, Idx)):
                return True
        return False

    def prune(self, defs: list) -> list:
        """Drop helper definitions nothing refers to (transitively): a walk from the written
        definitions that enters a helper's expression when it meets a reference to it, and every
        shared subtree once (a helper nothing reads, such as the exact cases of a max aggregate
        whose value is read as a whole, is never walked)."""
        by_name = {d.name: d for d in defs}
        live = {d.name for d in defs if d.name not in self.helpers}
        todo = [by_name[n].expr for n in live]
        seen: set = set()
        children = A.children
        while todo:
            e = todo.pop()
            if id(e) in seen:
                continue
            seen.add(id(e))
            if type(e) is A.Ref and e.name not in live and e.name in by_name:
                live.add(e.name)
                todo.append(by_name[e.name].expr)
            todo.extend(children(e))
        return [d for d in defs if d.name in live]


@dataclass(frozen=True)
class NotLowered:
    """Why a program does not lower: the first node that is not C-RASP in disguise."""

    message: str
    span: Span | None
    text: str = ""
    #: what to do instead, where a bound (``--max-length``) would not help
    hint: str | None = None


def lower_explained(program: Program, max_length: int | None = None) -> tuple[Program | None, NotLowered | None]:
    """(the lowered C-RASP program, None) or (None, why not). With ``max_length`` N (bounded mode)
    the result equals ``program`` only on inputs of at most N tokens (see :func:`lower_bounded`)."""
    from .printer import expr_to_str

    global _UNIVERSE
    if max_length is not None and max_length < 1:
        raise RaspError(f"max length must be at least 1, got {max_length}")
    if max_length is not None and max_length > MAX_BOUNDED_LENGTH:
        raise RaspError(f"max length {max_length} is too large for a bounded model (at most {MAX_BOUNDED_LENGTH}): "
                        "its lowering enumerates the positions up to it",
                        hint="bounded models are for short inputs; a program that lowers exactly needs no bound")
    low = _Lowerer(program, max_length)
    _UNIVERSE = tuple(program.symbols)
    why = f" for inputs of up to {max_length} tokens" if max_length is not None else ""

    def too_deep() -> NotLowered:  # located where the program nests most
        # the lowered program nests with the source, with the alphabet (token tests are disjunctions
        # over it) and, for a bounded model, with the positions it enumerates
        deepest = A.deepest_definition(program.module)
        hint = "split the deepest nesting into several definitions, or use a smaller --alphabet"
        if max_length is not None:
            hint = "try a smaller --max-length; or " + hint
        return NotLowered(f"the lowered program nests too deeply to build{why}",
                          deepest.span if deepest is not None else None, hint=hint)

    try:
        module = low.run()
    except RecursionError:
        return None, too_deep()
    except _Fail as exc:
        node = exc.node
        text = ""
        if node is not None and not isinstance(node, A.Definition):
            try:
                text = expr_to_str(node)
            except TypeError:
                text = ""
        return None, NotLowered(exc.message, getattr(node, "span", None), text)
    finally:
        _UNIVERSE = ()
        _TOKSETS.clear()
    try:
        checked = check_module(module)
        core = expand(module, checked, tuple(program.alphabet))
    except TooLargeError as exc:  # a constant or an expansion of the lowered program beyond the limits
        return None, _too_large(program, module, exc)
    except RaspError as exc:
        raise AssertionError(f"lowered program does not type-check: {exc}") from exc  # a lowering bug
    except RecursionError:  # token tests over a large alphabet are disjunctions as long as it
        return None, too_deep()
    lowered = Program(module, checked, core, program.source, program.filename)
    if checked.raspl:
        raise AssertionError("lowering left a RASP-L primitive")
    return lowered, None


def _too_large(program: Program, lowered: A.Module, exc: RaspError) -> NotLowered:
    """Why a lowered program is refused for its size (a map multiplies a count by more than C-RASP's
    constants allow): located at the original definition the offending lowered one comes from (it
    keeps its name, or is a helper ``NAME__v``)."""
    line = exc.span.line if exc.span else None
    name = next((d.name for d in lowered.statements if isinstance(d, A.Definition) and d.span
                 and d.span.line <= (line or 0) <= d.span.end_line), None)
    original = {d.name: d for d in program.module.statements if isinstance(d, A.Definition)}
    d = original.get(name) or original.get((name or "").split("__")[0])
    what = "is too large to expand" if isinstance(exc, ExpansionError) else "has a value too large for C-RASP"
    return NotLowered(f"its lowered form {what} ({exc.message})",
                      d.span if d is not None else None, d.name if d is not None else "")


def lower_bounded(program: Program, max_length: int) -> Program | None:
    """``program`` as a C-RASP[periodic, local] program that computes the same on every input of at
    most ``max_length`` tokens (generated tokens included), or None when even that is too large.

    What does not lower exactly becomes finite once positions are bounded by N = max_length:
    ``indices + c`` is the value p + c where the absolute-position feature ``pos[i % N == p]`` holds
    (written with period N, so the compiler's periodic position embedding is a one-hot table of
    positions 0 .. N-1), and a count is the value v where ``C == v``, for v between its bounds on
    inputs of length <= N. Everything else lowers as in :func:`lower`. Beyond N the program is
    wrong in general (positions wrap around modulo N, counts leave their enumerated range): a
    bounded construction, as any absolute-position one must be, with no claim beyond its bound."""
    return lower_explained(program, max_length)[0]


def lower(program: Program) -> Program | None:
    """``program`` as a C-RASP program (no RASP-L primitive) computing the same function, or None
    when some part does not lower. Every bool and count definition of ``program`` keeps its name and
    its values at every position; selector and shifted-index definitions disappear; helper
    definitions ``NAME__v`` (``NAME__m3`` for -3) hold "NAME has value v". The alphabet is declared
    explicitly (token codes depend on it)."""
    return lower_explained(program)[0]


# ============================================================================ the verdict
def _within(inner, outer) -> bool:
    """Whether span ``inner`` lies inside span ``outer`` (both present)."""
    if inner is None or outer is None:
        return False
    return ((outer.line, outer.column) <= (inner.line, inner.column)
            and (inner.end_line, inner.end_column) <= (outer.end_line, outer.end_column))


def lowered_verdict(program: Program, lowered: Program, name: str, task):
    """The verdict of a RASP-L program that lowers to ``lowered``, when that is in C-RASP[periodic,
    local] (else None): the lowered program's, with the proof and the task's published result
    (``task``, a :class:`rasp.checker.TaskResult` or None)."""
    from . import checker
    from .rewrite import rewrite_module

    v = checker.check(lowered, name=name, with_task=False)
    if not v.in_class:
        return None
    proof = rewrite_module(lowered.module)
    by_name = {s.name: s for s in proof.statements if isinstance(s, A.Definition)}
    rewrites = tuple((s, by_name[s.name]) for s in program.module.statements
                     if isinstance(s, A.Definition) and s.name in by_name and by_name[s.name] != s)
    return dataclasses.replace(v, rewritten=proof, rewrites=rewrites, task=task, source=program.source)


def verdict_for_raspl(program: Program, *, name: str | None = None, task=None, with_task: bool = True,
                      base=None, lowering=None):
    """The checker's verdict (:class:`rasp.checker.Verdict`) for a program that may use RASP-L.

    ``base``: the verdict :func:`rasp.checker.check` computed before looking at RASP-L (pass it when
    calling from inside ``check``, which avoids a second analysis and any recursion); by default it is
    computed here with ``check(program, name=name, task=task, with_task=with_task)``. ``lowering``:
    :func:`lower_explained`'s result when the caller has it (``check`` passes ``(None, None)`` for a
    lowered program it has already found outside the class). Wiring into
    ``check``, at its RASP-L extension point::

        verdict = Verdict(...)                     # as computed now
        if raspl.uses_raspl(program):
            return raspl.verdict_for_raspl(program, base=verdict)
        return verdict

    (the lowered program has no RASP-L primitive, so checking it does not come back here). ``check``
    first tries :func:`lowered_verdict` on its own, before the facts of a base verdict it would not
    need.

    * no RASP-L primitive: exactly ``rasp.checker.check(program)``;
    * it lowers (:func:`lower`) and the lowered program is in C-RASP[periodic, local]: the lowered
      program's verdict (fragment ``C-RASP``/``C-RASP[local]``/..., guarantee ``guaranteed``), whose
      ``rewritten`` module is the proof (lowered, then guards in normal form) and whose ``rewrites``
      pair each original definition with its lowered form;
    * it conforms to RASP-L (:func:`conformance` finds nothing) but does not lower: fragment
      ``RASP-L``, guarantee ``conjectured``; ``reasons`` says why it is not C-RASP (condition
      ``C-RASP operations``, located at the node that does not lower);
    * otherwise fragment ``none``, guarantee ``none``, ``reasons`` the located violations: a guard or
      positional predicate outside C-RASP[periodic, local] as the C-RASP analysis names it (condition
      and failing atom), then the RASP-L violations elsewhere (conditions ``RASP-L: indices``,
      ``RASP-L: finite maps``).
    """
    from . import checker
    from .rewrite import rewrite_module

    if base is None:
        base = checker.check(program, name=name, task=task, with_task=with_task)
    if not uses_raspl(program):
        return base
    lowered, why = lowering if lowering is not None else lower_explained(program)
    if lowered is not None:
        v = lowered_verdict(program, lowered, base.program, base.task)
        if v is not None:
            return v
    reasons = conformance(program)  # covers C-RASP guards too (non-local ones compute on indices)
    if reasons:
        fragment = "none"
        # a guard or pos[...] outside C-RASP[periodic, local]: the C-RASP analysis names the failing
        # condition at the failing atom; RASP-L's "computes on indices" for the same node adds nothing
        positional = [r for r in base.reasons if r.condition in ("translation invariance", "locality", "periodicity")]
        reasons = positional + [r for r in reasons if not any(_within(p.span, r.span) for p in positional)]
        # why it is not C-RASP either: the lowering's reason, with RASP-L's at the same node (a map over
        # a count breaks RASP-L's finite maps; '%' of that count is also why it does not lower)
        if why is not None and why.span is not None and not any(_within(r.span, why.span) for r in positional):
            same = [k for k, r in enumerate(reasons) if r.span == why.span]
            if same:
                r = reasons[same[0]]
                reasons[same[0]] = dataclasses.replace(
                    r, message=f"{r.message}; and it does not lower to C-RASP: {why.message}")
            elif not any(_within(r.span, why.span) or _within(why.span, r.span) for r in reasons):
                # elsewhere (a reason inside the same node, "indices as aggregated values" within the
                # aggregate the lowering names, already says it)
                reasons.append(checker.Reason("C-RASP operations", f"does not lower to C-RASP: {why.message}",
                                              why.span, why.text))
    else:
        fragment = "RASP-L"
        if why is not None:
            reasons = [checker.Reason("C-RASP operations", f"does not lower to C-RASP: {why.message}",
                                      why.span, why.text)]
        else:  # lowered, but the lowered program is outside: a guard RASP-L takes as one select
            # comparison (``#[j <= 3] P``) and C-RASP does not; the RASP-L primitives lowered, so
            # the C-RASP checker's reasons about them are not why (they were listed first)
            kept = [r for r in base.reasons if r.condition != "C-RASP operations"]
            reasons = kept or list(base.reasons)
    return dataclasses.replace(
        base, fragment=fragment, guarantee=checker.GUARANTEES[fragment], theorem=checker.THEOREMS[fragment],
        reasons=tuple(reasons), rewritten=None, rewrites=(),
    )


__all__ = ["conformance", "lower", "lower_bounded", "lower_explained", "verdict_for_raspl", "uses_raspl", "NotLowered",
           "SMALL", "DOMAIN_CAP"]
