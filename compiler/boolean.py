"""Exact Boolean forms over 0/1 residual features, and the ReLU gates that materialize them.

**Literals.** A *literal* is ``(node, negated)``: the value of a residual dimension that holds an
exact bool (0 or 1 at real positions, 0 at BOS), or its negation ``real - x`` (also 0 at BOS, since
``real`` is 0 there). ``(REAL, False)`` is the constant true, ``(REAL, True)`` the constant false;
both are literals too.

**Threshold terms.** ``Thr`` is ``[sum_k w_k l_k >= theta]`` with positive integer weights over
literals of distinct nodes and ``1 <= theta <= W = sum_k w_k`` (anything else is a constant and
is folded by :func:`make_thr`). Such a term is computed **exactly** by a ReLU MLP on 0/1 inputs::

    z = sum_k w_k l_k - theta * one           (an integer at every real position)
    [z >= 0] = relu(z + 1) - relu(z)           (exactly 0 or 1)

and by the single neuron ``relu(z + 1)`` when ``theta = W`` (a conjunction: z + 1 <= 1). At BOS all
literals are 0, so z = -theta <= -1 and both neurons are 0: the result is 0 at BOS, as every bool
must be. ``one = bos + real`` is 1 everywhere (the MLP has no bias). Weights are capped at
:data:`WEIGHT_CAP` (255) so every preactivation is an integer of magnitude at most 255, exact even in
bfloat16 (8-bit significand); :func:`make_thr` itself does not cap (a comparison of local counts
keeps the program's weights: see ``compiler.graph._Builder.threshold`` and
``compiler.weights.exact_dtypes``).

**Forms.** A ``Form`` is a sum of *mutually exclusive* threshold terms (at most one is 1 at any
position), optionally negated: ``value = sum_k T_k`` or ``real - sum_k T_k``. A sum of exclusive
0/1 terms is itself 0/1, so a form is materialized by one MLP sublayer: the neurons of all its
terms, plus ``relu(real) = real`` for a negated form. Forms combine *without* materializing when
the result is again a form:

* ``not``: flip the negation (a single term flips its literals: ``not [w.x >= theta] =
  [w.(not x) >= W - theta + 1]``);
* ``and`` of two terms when one is a conjunction of m literals (all weights 1, theta = m):
  ``[W_U * sum_{l in T} l + w_U.x >= W_U * m + theta_U]`` (if some l of T is 0 the left side is at
  most W_U (m - 1) + W_U < W_U m + theta_U; if all are 1 it is U). ``and`` distributes over the
  exclusive sums; ``or`` is ``not and not``; the ``or`` of two sums whose terms are pairwise exclusive
  (different token symbols, disjoint residue classes, x and not x) is their concatenation;
* a conditional ``a if t else b`` is the exclusive sum of ``t and a`` and ``(not t) and b``;
* anything else over at most :data:`TABLE_LITERALS` distinct nodes becomes a truth table: the
  exclusive sum of its minterms (each a conjunction), or the negation of the sum of its false
  minterms, whichever is shorter.

When none applies, the operand whose literals are ready first is materialized (an MLP gate, the
builder's :meth:`Context.materialize`), which turns it into a literal, and the combination is retried
(an ``and`` with a literal always succeeds).
"""
from __future__ import annotations

import bisect
import itertools
import math
import operator
from typing import Callable, Protocol

BOS, REAL = 0, 1  # node ids of the two flag features

#: the largest total weight of a threshold term (preactivations are integers of magnitude at most
#: this, exact in bfloat16's 8-bit significand up to 256)
WEIGHT_CAP = 255
#: the most terms a conjunction may distribute into (a product of two sums)
PRODUCT_CAP = 64
#: the most exclusive terms a form keeps before an operand is materialized
TERM_CAP = 4096
#: labels show at most this many terms (and literals per term)
MAX_TEXT_TERMS = 6
#: a combination that fails otherwise becomes a truth table over at most this many nodes
TABLE_LITERALS = 4

Lit = tuple  # (node id, negated)
TRUE_LIT: Lit = (REAL, False)
FALSE_LIT: Lit = (REAL, True)


_literal = operator.itemgetter(0)  # (lit, weight) -> lit


def flip(l: Lit) -> Lit:
    return (l[0], not l[1])


def lit_lin(l: Lit, coeff=1) -> dict:
    """The value of a literal as a linear form over nodes: ``x`` or ``real - x``."""
    n, neg = l
    if n == REAL:
        return {} if neg else {REAL: coeff}
    return {REAL: coeff, n: -coeff} if neg else {n: coeff}


# ----------------------------------------------------------------------------- threshold terms
class Thr:
    """``[sum w * l >= theta]`` over literals of distinct nodes, 1 <= theta <= W. Immutable; the
    derived quantities and the hash are computed once."""

    __slots__ = ("lits", "theta", "W", "conj", "_hash", "_required", "_flips")

    def __init__(self, lits: tuple, theta: int, conjunction: bool = False) -> None:
        """``conjunction``: the caller knows every weight is 1 and theta is their number."""
        self.lits = lits  # ((lit, weight), ...) sorted
        self.theta = theta
        if conjunction:
            self.W, self.conj = theta, True
        else:
            ws = [w for _, w in lits]
            self.W = sum(ws)
            # every literal must hold: W - w < theta for every w, i.e. for the smallest
            self.conj = not ws or self.W - min(ws) < theta
        self._hash = hash((lits, theta))
        self._required = self._flips = None

    def __eq__(self, other) -> bool:
        return isinstance(other, Thr) and self._hash == other._hash and self.lits == other.lits and self.theta == other.theta

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Thr({self.lits}, {self.theta})"

    def required(self) -> tuple:
        """Literals without which the term cannot hold."""
        if self._required is None:
            self._required = (tuple(map(_literal, self.lits)) if self.conj  # a conjunction needs them all
                              else tuple(l for l, w in self.lits if self.W - w < self.theta))
        return self._required

    def flips(self) -> frozenset:
        """The negations of the literals, as a set."""
        if self._flips is None:
            self._flips = frozenset((n, not neg) for (n, neg), _ in self.lits)
        return self._flips

    def eval(self, assign: dict) -> bool:
        return sum(w * (assign[l[0]] ^ int(l[1])) for l, w in self.lits) >= self.theta


def make_thr(weights: dict, theta: int):
    """``[sum w * l >= theta]`` for any integer weights (negative allowed, literals may repeat a node
    or be constants), normalized to a :class:`Thr`, or a bool when it is constant at real positions."""
    const = 0
    coef: dict[int, int] = {}
    for (n, neg), w in weights.items():
        if w == 0:
            continue
        if n == REAL:
            const += 0 if neg else w
            continue
        if neg:  # w * (1 - x)
            const += w
            coef[n] = coef.get(n, 0) - w
        else:
            coef[n] = coef.get(n, 0) + w
    theta = theta - const
    terms = {}
    for n, c in coef.items():
        if c > 0:
            terms[(n, False)] = c
        elif c < 0:  # c * x = |c| (1 - x) - |c|
            terms[(n, True)] = -c
            theta += -c
    W = sum(terms.values())
    if theta <= 0:
        return True
    if theta > W:
        return False
    terms = {l: min(w, theta) for l, w in terms.items()}
    g = 0
    for w in terms.values():
        g = math.gcd(g, w)
    if g > 1:
        terms = {l: w // g for l, w in terms.items()}
        theta = -(-theta // g)
    # a conjunction: unit weights
    W = sum(terms.values())
    if all(W - w < theta for w in terms.values()):
        terms = {l: 1 for l in terms}
        theta = len(terms)
    return Thr(tuple(sorted(terms.items())), theta)


def not_thr(t: Thr):
    return make_thr({flip(l): w for l, w in t.lits}, t.W - t.theta + 1)


def _and_lit(t: Thr, l: Lit):
    """Conjunction ``t`` and the literal ``l``: the literal put in its place in t's sorted literals
    (a binary search; literals are sorted by node, and t has at most one per node), the result
    and_thr's general case gives (t itself when l is there, False when its negation is)."""
    lits = t.lits
    i = bisect.bisect_left(lits, ((l[0], False),))  # the first literal of a node >= l's
    if i < len(lits) and lits[i][0][0] == l[0]:
        return t if lits[i][0] == l else False
    if len(lits) + 1 > WEIGHT_CAP:
        return None
    return Thr(lits[:i] + ((l, 1),) + lits[i:], len(lits) + 1, conjunction=True)


def and_thr(t: Thr, u: Thr):
    """The conjunction as one threshold term, or None when neither is a conjunction (or the weights
    would exceed the cap)."""
    if not t.conj and u.conj:
        t, u = u, t
    if not t.conj:
        return None
    if u.conj:  # the common case, directly: the union of the literals (what make_thr would return)
        # x and not x: false (the smaller term's negations, a set kept with it, against the larger's
        # literals as a dict's keys: conditional chains and long conjunctions with a short one)
        small, big = (t, u) if len(t.lits) <= len(u.lits) else (u, t)
        if len(small.lits) == 1:  # a literal more (a conditional chain's branch, one level at a
            # time; ``PREV[x] && Q[y]`` in a family): no copy into a dict and no sort
            return _and_lit(big, small.lits[0][0])
        lits = dict(big.lits)
        if not lits.keys().isdisjoint(small.flips()):
            return False
        lits.update(small.lits)  # a conjunction's weights are all 1
        if len(lits) > WEIGHT_CAP:
            return None
        return Thr(tuple(sorted(lits.items())), len(lits), conjunction=True)
    Wu = u.W
    tnodes = {l[0] for l, _ in t.lits}
    if not any(l[0] in tnodes for l, _ in u.lits):
        # t's literals are new to u: make_thr would keep every weight (none exceeds theta; their gcd
        # is that of u's weights, which is 1: terms that are not conjunctions come from make_thr or
        # from here), find no constant (no term has a literal of REAL) and no conjunction (u is none:
        # its unrequired literals stay unrequired), so W = Wu (m + 1) is the weight the cap checks
        if Wu * (len(t.lits) + 1) > WEIGHT_CAP:
            return None
        return Thr(tuple(sorted([(l, Wu) for l, _ in t.lits] + list(u.lits))), Wu * len(t.lits) + u.theta)
    weights: dict = {}
    for l, _ in t.lits:
        weights[l] = weights.get(l, 0) + Wu
    for l, w in u.lits:
        weights[l] = weights.get(l, 0) + w
    r = make_thr(weights, Wu * len(t.lits) + u.theta)
    if isinstance(r, Thr) and r.W > WEIGHT_CAP:
        return None
    return r


# ----------------------------------------------------------------------------- forms
class Form:
    """``sum(terms)`` (or ``real - sum(terms)`` when ``neg``), the terms mutually exclusive."""

    __slots__ = ("terms", "neg", "_hash", "_nodes")

    def __init__(self, terms: tuple = (), neg: bool = False) -> None:
        self.terms = terms
        self.neg = neg
        self._hash = hash((terms, neg))
        self._nodes = None

    def __eq__(self, other) -> bool:
        return (isinstance(other, Form) and self._hash == other._hash and self.neg == other.neg
                and self.terms == other.terms)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Form({self.terms}, neg={self.neg})"

    def nodes(self) -> set:
        if self._nodes is None:
            out = set()
            for t in self.terms:
                out.update(l[0] for l, _ in t.lits)
            self._nodes = frozenset(out)
        return self._nodes

    def eval(self, assign: dict) -> bool:
        v = any(t.eval(assign) for t in self.terms)
        return (not v) if self.neg else v


TRUE = Form((), True)
FALSE = Form((), False)


def lit_form(l: Lit) -> Form:
    if l == TRUE_LIT:
        return TRUE
    if l == FALSE_LIT:
        return FALSE
    return Form((Thr(((l, 1),), 1, conjunction=True),))


def thr_form(t) -> Form:
    if t is True:
        return TRUE
    if t is False:
        return FALSE
    return Form((t,))


def as_lit(f: Form):
    """The literal a form is (no gate needed), or None."""
    terms = f.terms
    if not terms:  # TRUE or FALSE (read from the fields: this runs at every level of every chain)
        return TRUE_LIT if f.neg else FALSE_LIT
    if len(terms) == 1 and len(terms[0].lits) == 1:
        (l, _), = terms[0].lits
        return flip(l) if f.neg else l
    return None


def norm(f: Form) -> Form:
    """A negated single term becomes the (non-negated) flipped term."""
    if f.neg and len(f.terms) == 1:
        t = f.terms[0]
        if len(t.lits) == 1:  # not l: the flipped literal (what make_thr makes of it)
            return lit_form(flip(t.lits[0][0]))
        return thr_form(not_thr(t))
    return f


def f_not(f: Form) -> Form:
    return norm(Form(f.terms, not f.neg))


class Context(Protocol):
    def slot_of(self, node: int) -> int: ...
    def exclusive(self, a: Lit, b: Lit) -> bool: ...
    def materialize(self, f: Form) -> Lit: ...
    def forms_exclusive(self, f: Form, g: Form) -> bool: ...
    def terms_exclusive(self, t: Thr, u: Thr) -> bool: ...  # what terms_exclusive(ctx, t, u) says
    def test_excludes(self, t: Thr, u: Thr) -> bool: ...  # terms_exclusive, or more where it knows


def ready(ctx: Context, f: Form) -> int:
    return max(map(ctx.slot_of, f.nodes()), default=-1)


def terms_exclusive(ctx: Context, t: Thr, u: Thr) -> bool:
    """Whether t and u never hold together: some literal t requires excludes one u requires (the
    definition; a context's ``terms_exclusive`` may work it out faster)."""
    return any(ctx.exclusive(a, b) for a in t.required() for b in u.required())


def _try_and(ctx: Context, f: Form, g: Form):
    if f.neg and not g.neg:
        f, g = g, f
    if not f.neg and not g.neg:
        cap = max(PRODUCT_CAP, len(f.terms), len(g.terms))
        pairs = [(t, u) for t in f.terms for u in g.terms]
        if len(pairs) > cap:  # exclusive pairs vanish (e.g. branches of the same conditional)
            if len(pairs) > 64 * cap:
                return None
            pairs = [(t, u) for t, u in pairs if not ctx.terms_exclusive(t, u)]
            if len(pairs) > cap:
                return None
        terms = []
        for t, u in pairs:
            r = and_thr(t, u)
            if r is None:
                return None
            if r is True:
                return TRUE
            if r is not False:
                terms.append(r)
        return Form(tuple(terms))
    if not f.neg and g.neg:  # f and not(sum U) = sum_t (t and not u_1 and not u_2 ...)
        if len(f.terms) * max(1, len(g.terms)) > max(PRODUCT_CAP, len(f.terms)):
            return None
        terms = []
        for t in f.terms:
            r = t
            for u in g.terms:
                nu = not_thr(u)
                if nu is False:
                    r = False
                    break
                if nu is True:
                    continue
                r = and_thr(r, nu)
                if r is None:
                    return None
                if r is False or r is True:
                    break
            if r is True:
                return TRUE
            if r is not False:
                terms.append(r)
        return Form(tuple(terms))
    # both negated: not A and not B = not (A or B), a sum when A's and B's terms are exclusive
    if len(f.terms) + len(g.terms) > TERM_CAP:
        return None
    if ctx.forms_exclusive(f, g):
        return Form(f.terms + g.terms, True)
    return None


def truth_table(fn: Callable[[dict], bool], nodes) -> Form:
    """The function ``fn`` of the given nodes as an exclusive sum of minterms (or its negation)."""
    nodes = sorted(nodes)
    true_pts, false_pts = [], []
    for bits in itertools.product((0, 1), repeat=len(nodes)):
        a = dict(zip(nodes, bits))
        (true_pts if fn(a) else false_pts).append(bits)
    if not false_pts:
        return TRUE
    if not true_pts:
        return FALSE

    def minterm(bits):
        return make_thr({(n, not b): 1 for n, b in zip(nodes, bits)}, len(nodes))

    if len(true_pts) <= len(false_pts) + 1:
        return norm(Form(tuple(minterm(b) for b in true_pts)))
    return norm(Form(tuple(minterm(b) for b in false_pts), True))


def _and_quiet(ctx: Context, f: Form, g: Form):
    """The conjunction when it needs no gate (constants, or forms that combine), else None."""
    if not (f.neg or g.neg) and len(f.terms) == len(g.terms) == 1:
        # two single terms (``PREV[x] && Q[y]``, the commonest and of a family): what _try_and
        # makes of them, without the case analysis
        r = and_thr(f.terms[0], g.terms[0])
        if r is None or isinstance(r, Thr):
            return r if r is None else Form((r,))
        return TRUE if r else FALSE
    if f == FALSE or g == FALSE:
        return FALSE
    if f == TRUE:
        return g
    if g == TRUE:
        return f
    return _try_and(ctx, norm(f), norm(g))


def f_and(ctx: Context, f: Form, g: Form) -> Form:
    r = _and_quiet(ctx, f, g)
    if r is not None:
        return r
    f, g = norm(f), norm(g)
    nodes = f.nodes() | g.nodes()
    if len(nodes) <= TABLE_LITERALS:
        return truth_table(lambda a: f.eval(a) and g.eval(a), nodes)
    # materialize the operand that is ready first (on a tie the smaller one, nearer the leaves);
    # a literal already is one
    cands = [x for x in (f, g) if as_lit(x) is None]
    m = min(cands, key=lambda x: (ready(ctx, x), len(x.nodes())))
    lf = lit_form(ctx.materialize(m))
    return f_and(ctx, lf, g) if m is f else f_and(ctx, f, lf)


def f_or(ctx: Context, f: Form, g: Form) -> Form:
    if f == TRUE or g == TRUE:
        return TRUE
    if f == FALSE:
        return g
    if g == FALSE:
        return f
    f, g = norm(f), norm(g)
    if (not f.neg and not g.neg and len(f.terms) + len(g.terms) <= TERM_CAP
            and ctx.forms_exclusive(f, g)):
        return Form(f.terms + g.terms)  # an or of exclusive sums is their sum
    if not f.neg and not g.neg and len(f.terms) == len(g.terms) == 1:
        r = _or_lit(f.terms[0], g.terms[0])
        if r is not None:
            return Form((r,))
    return f_not(f_and(ctx, f_not(f), f_not(g)))


def _or_lit(t: Thr, u: Thr):
    """``[l1 + ... + lk >= 1] or l`` (either way round) as ``[l1 + ... + lk + l >= 1]``, l put in
    its place by binary search, when l's node is not in the disjunction and the weights stay under
    the cap; else None. What ``not (not t and not l)`` gives through not_thr and _and_lit (tested),
    without the three copies of the disjunction that made a running or ``V_k = V_(k+1) || P_k``
    quadratic in its length (a lowered max aggregate's chain over 150 values)."""
    if len(u.lits) != 1:
        t, u = u, t
    if len(u.lits) != 1 or u.theta != 1 or u.W != 1 or t.theta != 1 or t.W != len(t.lits):
        return None
    lits = t.lits
    if len(lits) + 1 > WEIGHT_CAP:
        return None
    l = u.lits[0][0]
    i = bisect.bisect_left(lits, ((l[0], False),))  # the first literal of a node >= l's
    if i < len(lits) and lits[i][0][0] == l[0]:
        return None
    return Thr(lits[:i] + ((l, 1),) + lits[i:], 1)


def f_cond(ctx: Context, t: Form, a: Form, b: Form) -> Form:
    """``a if t else b``: the exclusive sum of ``t and a`` and ``not t and b``."""
    if not t.terms:  # TRUE or FALSE
        return a if t.neg else b
    if a is b or a == b:
        return a
    t = norm(t)
    if t.neg or len(t.terms) != 1:
        t = lit_form(ctx.materialize(t))

    def branches(t, strict):
        T = t.terms[0]
        and_ = f_and if strict else _and_quiet
        x = and_(ctx, t, a)
        if not b.neg and b.terms and all(ctx.test_excludes(T, u) for u in b.terms):
            y = b  # every term of b already excludes t (e.g. another token): "not t" adds nothing
        else:
            y = and_(ctx, f_not(t), b)
        return x, y

    x, y = branches(t, False)
    if x is None or y is None:
        # a test that does not combine is materialized (one gate, ready early) rather than the
        # branches (which would chain a gate per nested conditional)
        if as_lit(t) is None:
            t = lit_form(ctx.materialize(t))
        x, y = branches(t, True)
    if not x.neg and not y.neg and len(x.terms) + len(y.terms) <= TERM_CAP:
        return norm(Form(x.terms + y.terms))
    nodes = x.nodes() | y.nodes()
    if len(nodes) <= TABLE_LITERALS:
        return truth_table(lambda s: x.eval(s) or y.eval(s), nodes)
    return f_or(ctx, x, y)


# ----------------------------------------------------------------------------- gates
def gate_neurons(f: Form) -> list[tuple[tuple, int]]:
    """The hidden neurons that compute a form: (preactivation as a linear form over nodes, output
    coefficient). The output ``sum_k coeff_k relu(pre_k)`` is exactly the form's 0/1 value, and 0 at
    BOS (see the module docstring).

    A preactivation is a canonical linear form (``((node, coefficient), ...)`` sorted by node, no
    zero coefficient, as ``compiler.graph.make_lin`` makes them), built directly: a term's literals
    are of distinct nodes above BOS and REAL and sorted by node, and a negated literal ``w (real - x)``
    adds w to the REAL coefficient."""
    sign = -1 if f.neg else 1
    out: list[tuple[tuple, int]] = []
    for t in f.terms:
        lits = []
        real = 0
        for (n, neg), w in t.lits:
            if neg:
                real += w
                lits.append((n, -w))
            else:
                lits.append((n, w))
        # z + 1 = sum w l - (theta - 1) * one; z = sum w l - theta * one (one = bos + real)
        out.append((_with_flags(-(t.theta - 1), real - (t.theta - 1), lits), sign))
        if not t.conj:
            out.append((_with_flags(-t.theta, real - t.theta, lits), -sign))
    if f.neg:
        out.append((((REAL, 1),), 1))
    return out


def _with_flags(bos: int, real: int, lits: list) -> tuple:
    """The linear form ``bos * e_BOS + real * e_REAL + lits`` (lits sorted, of nodes above REAL)."""
    if lits and lits[0][0] <= REAL:
        raise AssertionError(f"a threshold term over a flag feature: {lits}")
    head = []
    if bos:
        head.append((BOS, bos))
    if real:
        head.append((REAL, real))
    return tuple(head + lits)


def form_text(f: Form, name: Callable[[Lit], str]) -> str:
    """A readable rendering of a form (for labels)."""
    def name_(l):
        return name(l)

    def term(t: Thr) -> str:
        if len(t.lits) > MAX_TEXT_TERMS:
            return f"[{len(t.lits)} literals >= {t.theta}]"
        if t.conj:
            return " && ".join(name(l) for l, _ in t.lits)
        if t.theta == 1:
            return "(" + " || ".join(name(l) for l, _ in t.lits) + ")"
        return "[" + " + ".join((f"{w}*" if w != 1 else "") + name(l) for l, w in t.lits) + f" >= {t.theta}]"

    if not f.terms:
        return "true" if f.neg else "false"
    shown = [term(t) for t in f.terms[:MAX_TEXT_TERMS]]
    if len(f.terms) > MAX_TEXT_TERMS:
        shown.append(f"... ({len(f.terms)} terms)")
    body = " | ".join(shown)
    return f"!({body})" if f.neg else body
