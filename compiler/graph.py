"""Pass 1: a C-RASP[periodic, local] core program in normal form -> the operation graph.

The input is the core program after :func:`rasp.rewrite.rewrite_core`: every count is ``#P`` or
``#[j == i - d] P`` and every ``pos[...]`` is periodic. Anything else (a guard the rewrite could
not normalize, a ``pos[...]`` that is not periodic, RASP-L operations) is a :class:`RaspError`
located at its span.

The graph is a list of **nodes** in topological order; each node is one residual dimension:

==========  =====================================================================================
kind        value at position t (t = 0 is BOS; input position p = t - 1)
==========  =====================================================================================
bos, real   1 at BOS / 1 at every other position (embedding flags; ``one = bos + real``)
token       1 where the token is ``symbol`` (embedding)
tokenset    1 where the token is one of ``symbols`` (embedding; read only by heads, see ``count_lit``)
periodic    1 where p mod M is in ``residues`` (periodic positional embedding, 0 at BOS)
local       the literal ``value`` at t - d, or at BOS (0) when t - d <= 0 (a local head)
uniform     the average of ``value`` over positions 0..t (a uniform head; a ``frac`` dimension)
sign        ``[input > 0]`` (a sign group)
gate        ``sum_k c_k relu(pre_k)`` (MLP neurons computing a Boolean form, see :mod:`.boolean`)
==========  =====================================================================================

**Comparisons.** Counts never get their own dimension: in C-RASP a count is consumed only by
comparisons, so every comparison is pushed down to atoms ``[E >= 0]`` with E a linear combination
of counts (``L < R`` is ``R - L - 1 >= 0``; ``==`` two atoms; ``min``/``max``/count conditionals
are moved out of E: ``X + min(a, b) >= 0`` iff both ``X + a >= 0`` and ``X + b >= 0``;
``X + (a if t else b) >= 0`` is ``(X + a >= 0) if t else (X + b >= 0)``, and a periodic test already
fixed by the residues chosen on the way is decided, so the M branches of a rewritten periodic guard
do not multiply). A linear atom ``E = F + I + c`` has a uniform part ``F = sum_k a_k #P_k``, a local
part ``I = sum_l b_l L_l`` (each L_l a bool at the query position: ``#[j == i - d] P`` read by a local
head, or P itself when d = 0) and an integer c. Then

* F = 0: ``[I + c >= 0]`` is a threshold function of bools (no attention at all);
* otherwise, for every m in the range [lo, hi] of I, a uniform head with value
  ``v(j) = sum_k a_k P_k(j) + (c + m + 1/2) bos(j)`` outputs ``(F + c + m + 1/2) / (t + 1)``: the
  attention average is one rounded quotient of an exactly accumulated half-integer, so its sign is
  ``s_m = [F + c + m >= 0]`` in every dtype. A sign group reads ``head - (|c + m| + 1) bos`` (negative
  at BOS, where the head holds c + m + 1/2, so every sign bool is 0 at BOS). A sign is made only for
  a linear form whose first coefficient (lowest node) is positive: ``[F + off >= 0]`` with a
  negative one is the negated literal of ``[-F - off - 1 >= 0]`` (integers), so ``exists P`` and
  ``#P == 0`` (``[-#P >= 0]``) read one head. Since s_m is
  monotone in m, ``[F + I + c >= 0] = [I + sum_m s_m >= hi + 1]``: again a threshold function, and
  just ``s_0`` when there is no local part.

**Bools** are :class:`~.boolean.Form` values combined by :mod:`.boolean`; a form is materialized
(an MLP ``gate`` node) only when a head's value or the readout needs a single dimension, when two
forms do not combine into one form, or as the test of a conditional chain.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from fractions import Fraction

from rasp import ast as A
from rasp.errors import OutsideClassError, RaspError
from rasp.guards import periodic_residues
from rasp.printer import expr_to_str
from rasp.rewrite import local_offset

from . import boolean as B
from .boolean import BOS, REAL, Form

#: the most linear atoms of counts one comparison may expand into (min/max/conditionals multiply them)
ATOM_CAP = 1024
#: the most branches (constant ones included) one comparison may expand into: 2^18 lets a lowered
#: RASP-L value over the 256 int8 codes be compared with all of them (raspl_count.rasp: 258 x 257)
LEAF_CAP = 1 << 18
#: the widest range of the local part of one atom (one head per value): 1,024 takes every count the
#: rewrite writes (at most 256 local counts, rasp.rewrite.BRANCH_CAP) in comparisons of a few of them;
#: it was 16, which refused the C-RASP[local] count #[i - j > 20] P (#P minus 21 local counts)
LOCAL_RANGE_CAP = 1024
#: two periodic literals whose periods' lcm exceeds this are not tested for exclusivity (``exclusive``)
PERIOD_CAP = 5040
#: the most (token, residue) pairs a path may track when deciding tests along it (this, not
#: PERIOD_CAP, bounds the periods a path combines)
PAIR_CAP = 1 << 16
#: the largest magnitude a head's value may reach: float64 holds every half-integer up to 2^52
HEAD_VALUE_CAP = 2 ** 52
#: the local heads' content logit at BOS (any value with exp(-L) = 0 in float64 works)
LOCAL_BOS_LOGIT = 1024.0

#: the longest text of one node inside another node's label (labels are for people)
NAME_CAP = 80

HINT = "run `rasp check PROGRAM` for the fragment and the reason"

Lin = tuple  # ((node id, Fraction), ...) sorted, no zero coefficients


def make_lin(d: dict) -> Lin:
    """A canonical linear form: coefficients are ints, or floats for half-integers (exact)."""
    return tuple(sorted((n, c if type(c) is int else int(c) if float(c).is_integer() else float(c))
                        for n, c in d.items() if c != 0))


@dataclass
class Node:
    """One residual dimension: what computes it (``kind``, ``params``), which nodes it reads
    (``inputs``), its slot (see :mod:`.plan`) and a label for people."""

    id: int
    kind: str
    label: str
    slot: int
    params: dict
    inputs: tuple
    origin: str | None = None  # the definition that first needed it


@dataclass
class Graph:
    nodes: list[Node]
    outputs: list[tuple[str, tuple]]  # (definition name, literal) per output bool
    output_kind: str
    symbols: tuple[str, ...]
    alphabet: tuple[str, ...]
    special: tuple[str, ...]
    definitions: dict[str, str] = field(default_factory=dict)  # name -> how it is realized (see realized_by)
    #: for a graph lifted from a few symbols' (compiler.symmetry): how many; None when built here
    lifted_from: int | None = None

    @functools.cached_property
    def periods(self) -> list[int]:  # the graph is complete when anything asks (a scan of every node)
        return sorted({n.params["period"] for n in self.nodes if n.kind == "periodic"})


_PHASE = {"uniform": 0, "local": 0, "sign": 1, "gate": 2}
_EMBEDDED = frozenset(("bos", "real", "token", "tokenset", "periodic"))  # the kinds the embedding computes (slot -1)


def next_slot(kind: str, input_slots) -> int:
    """The earliest slot of ``kind`` after all inputs: layer l has slots 3l (attention), 3l + 1
    (sign), 3l + 2 (MLP); embedding features have slot -1."""
    s = max(input_slots, default=-1) + 1
    return s + (_PHASE[kind] - s) % 3


# ----------------------------------------------------------------------------- class check
def check_class(core: A.CoreProgram, walk: bool = True) -> None:
    """Raise a located :class:`RaspError` for the first construct outside C-RASP[periodic, local].
    ``walk=False`` checks only the definitions' types: for a core program whose expressions are known
    to be in normal form (:func:`rasp.rewrite.only_local_counts` of its module)."""
    raspl = set(A.RASPL_NODES)
    checked = raspl | {A.Count, A.Exists, A.PosPred}  # the kinds that can be outside the class
    for d in core.defs:
        if d.type not in (A.BOOL, A.COUNT):
            raise OutsideClassError(
                f"definition {d.name} has type {d.type}: not in C-RASP[periodic, local] (only bool and "
                "count values compile); see rasp check", d.span, HINT)
        if not walk:
            continue
        stack = [d.expr]  # pre-order, as A.walk (the first offence in source order is reported)
        while stack:
            node = stack.pop()
            kind = type(node)  # the AST's classes have no subclasses
            if kind is A.Tok or kind is A.Ref:
                continue
            stack.extend(reversed(A.children(node)))
            if kind not in checked:
                continue
            if kind in raspl:
                raise OutsideClassError(
                    f"'{expr_to_str(node)}' is a RASP-L operation, not in C-RASP[periodic, local]; "
                    "see rasp check", node.span or d.span,
                    "RASP-L programs compile through their lowering: compiler.bounded.compile_raspl (rasp compile "
                    "does this)")
            if (kind is A.Count or kind is A.Exists) and node.guard is not None and local_offset(node.guard) is None:
                raise OutsideClassError(
                    f"'{expr_to_str(node)}' counts with a relation that is not local or periodic after "
                    "rewriting: not in C-RASP[periodic, local]; see rasp check", node.span or d.span, HINT)
            if kind is A.PosPred and periodic_residues(node.rel.expr) is None:
                raise OutsideClassError(
                    f"'{expr_to_str(node)}' is not periodic: not in C-RASP[periodic, local]; see rasp check",
                    node.span or d.span, HINT)


# ----------------------------------------------------------------------------- builder
#: the most definitions :meth:`_Builder.def_form` works out one inside the other before it starts
#: the innermost one afresh (:meth:`_Builder.form_of`)
DEF_DEPTH = 48
#: test_excludes reads implications between the signs of two terms (see
#: _Builder._signs_imply_exclusive) only when they have at most this many pairs of signs
IMPLIED_PAIRS_CAP = 64
#: how many references deep _Builder.body_implies reads definitions (a False it finds at this
#: depth is kept: a claim missed, never a wrong one)
UNFOLD_DEPTH = 4
#: the most definitions _Builder._members_of keeps for one definition (a lowered chain over 4,096
#: values would keep 8 million otherwise)
MEMBERS_CAP = 4096


class _Deeper(Exception):
    """Raised by :meth:`_Builder.def_form` at :data:`DEF_DEPTH`: work out definition ``name`` first."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class _Builder:
    def __init__(self, core: A.CoreProgram) -> None:
        self.core = core
        self.defs = {d.name: d for d in core.defs}
        self.nodes: list[Node] = []
        self.slots: list[int] = []  # node id -> its slot (read for every new node's inputs)
        self.slot_of = self.slots.__getitem__  # boolean.Context's slot_of, a C call
        self.keys: dict = {}
        self.bool_memo: dict = {}
        self.def_forms: dict[str, Form] = {}
        self.form_names: dict[Form, str] = {}
        self.origin: str | None = None
        self.atoms = 0
        self.leaves = 0
        self.hint = None
        self.materialized: dict[Form, B.Lit] = {}
        self._tok_cache: dict = {}
        self._token_forms: dict[str, Form] = {}  # symbol -> the form of its token literal
        self._term_token: dict = {}  # threshold term -> the one token it requires, or None
        self.compare_memo: dict = {}  # comparison (by structure) -> its form
        self._and_memo: dict = {}  # (form, form) -> their and
        self._or_memo: dict = {}  # (form, form) -> their or
        self._pairs: dict = {}
        self._walks: dict = {}  # (chain, paths) -> chain_walk's levels
        self._runs: dict = {}  # id of a walk's level list -> its token runs (_token_runs)
        self._implied: dict = {}  # id of a walk's level list -> its runs of implied tests (_implied_runs)
        self._tables: dict = {}  # id of a chain -> (it, its token table) (_token_table)
        self._free: dict = {}  # id of a chain -> its levels when no path splits them (_free_chain)
        self._consts: dict = {}  # id of a walk's level list -> its levels by constant branch (_constant_levels)
        self._req: dict = {}  # threshold term -> what terms_exclusive needs of it
        self._sign_lits: set = set()  # both literals of every sign node
        # a sign's linear form (as its head holds it, without the constant) -> the sign nodes over it
        self._signs_of_form: dict = {}
        self._form_of_sign: dict = {}  # sign node -> that form
        self._sign_offsets: dict = {}  # sign literal -> its constant (_sign_offset)
        # sign node -> (body, k, c): its positive literal is [k * #body + c >= 0], k = 1 or -1, a count
        # of the whole prefix (recorded where a comparison of one count with a constant makes it)
        self._sign_atoms: dict = {}
        self._members: dict = {}  # bool definition -> the definitions that imply it (see _members_of)
        self._implies_memo: dict = {}  # (id, id) of two bool expressions -> body_implies
        self._unfolding = 0  # references body_implies has replaced by their definitions, one inside the other
        self._token_lits: set = set()  # (token node, False): a token's positive literal
        self._token_sets: dict = {}  # form -> _token_set
        self._set_forms: dict = {}  # form -> _set_form
        self._set_lits: dict = {}  # symbols -> the form of their tokenset literal
        self._count_lits: dict = {}  # id of a count's body -> count_lit
        self._periodic_lits: set = set()  # both literals of every periodic node
        # the core's symbols are a computed property: read them once
        self.symbols: tuple[str, ...] = core.symbols
        self.symbol_index = {s: k for k, s in enumerate(self.symbols)}
        self._start_path = (1, frozenset((k, 0) for k in range(len(self.symbols))))
        self._path_tokens: dict = {}
        self._masks: dict = {}  # periodic literal -> (period, residue bits)
        self.def_depth = 0  # definitions being worked out, one inside the other (see form_of)
        self._node("bos", ("bos",), "bos", {}, ())
        self._node("real", ("real",), "real", {}, ())

    # ---------------------------------------------------------------- nodes
    def _node(self, kind, key, label, params, inputs) -> Node:
        """The node computing ``key`` (hash-consed). ``label`` may be a function that makes it:
        labels are text for people, built only for new nodes."""
        hit = self.keys.get(key)
        if hit is not None:
            return self.nodes[hit]
        if callable(label):
            label = label()
        inputs = tuple(sorted(set(inputs)))
        slot = -1 if kind in _EMBEDDED else next_slot(kind, [self.slots[x] for x in inputs])
        n = Node(len(self.nodes), kind, label, slot, params, inputs, self.origin)
        self.nodes.append(n)
        self.slots.append(slot)
        self.keys[key] = n.id
        return n

    def token(self, symbol: str) -> Node:
        n = self._node("token", ("token", symbol), f'"{symbol}"', {"symbol": symbol}, ())
        self._token_lits.add((n.id, False))
        return n

    def token_form(self, symbol: str) -> Form:
        """The token's literal as a form, one per symbol (a lowered RASP-L program writes its tokens
        as distinct objects, thousands of times in or-chains of token sets; a split by token puts
        the token in front of every branch)."""
        f = self._token_forms.get(symbol)
        if f is None:
            f = self._token_forms[symbol] = B.lit_form((self.token(symbol).id, False))
        return f

    def tokenset(self, symbols: tuple) -> B.Lit:
        """The embedding feature ``[token in symbols]`` (two or more symbols, in alphabet order): one
        row of the token embedding per symbol. Only the key side of a head reads it (see
        :meth:`count_lit`)."""
        n = self._node("tokenset", ("tokenset", symbols), lambda: "tokens in {" + ", ".join(symbols) + "}",
                       {"symbols": symbols}, ())
        return (n.id, False)

    def periodic(self, M: int, residues: frozenset) -> B.Lit:
        if not residues:
            return B.FALSE_LIT
        if len(residues) == M:
            return B.TRUE_LIT
        rs = sorted(residues)
        label = (f"pos[i % {M} == {rs[0]}]" if len(rs) == 1
                 else f"pos[i % {M} in {{{', '.join(map(str, rs))}}}]")
        n = self._node("periodic", ("periodic", M, tuple(rs)), label, {"period": M, "residues": tuple(rs)}, ())
        self._periodic_lits.update(((n.id, False), (n.id, True)))
        return (n.id, False)

    def lit_name(self, l: B.Lit) -> str:
        """A literal's text inside another node's label: the node's label, cut at ``NAME_CAP``
        characters (a gate's label names its inputs, so uncut labels of gates on gates grow
        exponentially: 29 nested ``==`` of bools made a label of gigabytes)."""
        if l == B.TRUE_LIT:
            return "true"
        if l == B.FALSE_LIT:
            return "false"
        name = self.nodes[l[0]].label
        if len(name) > NAME_CAP:
            name = "(" + name[:NAME_CAP - 5] + " ...)"
        if l[1]:
            return f"!({name})" if " " in name else f"!{name}"
        return name

    def local(self, d: int, lit: B.Lit) -> B.Lit:
        if lit == B.FALSE_LIT:
            return B.FALSE_LIT
        value = make_lin(B.lit_lin(lit))
        name = self.lit_name(lit)
        n = self._node("local", ("local", d, value), f"{name} at i-{d}", {"offset": d, "value": value},
                       [x for x, _ in value])
        return (n.id, False)

    def materialize(self, f: Form) -> B.Lit:
        lit = B.as_lit(f)
        if lit is not None:
            return lit
        if f in self.materialized:
            return self.materialized[f]
        neurons = tuple(B.gate_neurons(f))
        inputs = [x for pre, _ in neurons for x, _ in pre]
        n = self._node("gate", ("gate", neurons), lambda: self.form_names.get(f) or B.form_text(f, self.lit_name),
                       {"neurons": neurons}, inputs)
        self.materialized[f] = (n.id, False)
        return (n.id, False)

    def exclusive(self, a: B.Lit, b: B.Lit) -> bool:
        if a[0] == b[0]:
            return a[1] != b[1]
        na, nb = self.nodes[a[0]], self.nodes[b[0]]
        ka, kb = na.kind, nb.kind
        if ka == kb == "token":
            return not a[1] and not b[1]
        if ka == kb == "periodic":
            (Ma, ma), (Mb, mb) = self._lit_mask(a), self._lit_mask(b)
            L = math.lcm(Ma, Mb)
            if L > PERIOD_CAP:
                return False
            return not (_lift_mask(ma, Ma, L) & _lift_mask(mb, Mb, L))
        if ka == kb == "sign":
            return self._signs_exclusive(a, b)
        return False

    def _signs_exclusive(self, a: B.Lit, b: B.Lit) -> bool:
        """Two sign literals over opposite linear forms: ``[F + c >= 0]`` and ``[-F + d >= 0]`` never
        hold together when c + d < 0 (F >= -c and F <= d). So ``#"a" >= 3`` excludes ``#"a" <= 1``
        (``[-#a + 1 >= 0]``, the negated literal of the sign ``[#a - 2 >= 0]``: a comparison and its
        negation share one sign, see :meth:`sign_lit`). An ``==`` of counts is two such signs, so
        the cases of a count compared with several constants (``D == 0``, ``D == 1``, ...) are
        exclusive as forms, and their or is a sum rather than a gate. Forms are compared as
        written (``2 * #a`` is not ``#a``): a sufficient test, exact for one form. The literals over
        the form opposite to a's are looked up (:meth:`_opposite_signs`), not compared."""
        return b in self._opposite_signs(a) and self._sign_offset(a) + self._sign_offset(b) < 0

    def _sign_offset(self, x: B.Lit) -> int:
        """The constant c of a sign literal ``[F + c >= 0]`` (its head holds ``F + c + 1/2``; the
        negation of ``[F + c >= 0]`` is ``[-F - c - 1 >= 0]``)."""
        hit = self._sign_offsets.get(x)
        if hit is None:
            head = self.nodes[self.nodes[x[0]].params["input"][1][0]]
            c = int(head.params["value"][0][1] - 0.5)  # ((BOS, c + 1/2), (node, coefficient), ...)
            hit = self._sign_offsets[x] = -c - 1 if x[1] else c
        return hit

    def forms_exclusive(self, f: Form, g: Form) -> bool:
        """Whether every term of f excludes every term of g. Fast path: each term requires a token,
        and no token is required by a term of both."""
        tf, tg = self._form_tokens(f), self._form_tokens(g)
        if tf is not None and tg is not None and not (tf & tg):
            return True
        return all(self.terms_exclusive(t, u) for t in f.terms for u in g.terms)

    def terms_exclusive(self, t: B.Thr, u: B.Thr) -> bool:
        """:func:`~.boolean.terms_exclusive` (some literal t requires excludes one u requires, by
        :meth:`exclusive`) without trying every pair: two distinct tokens, one required by each; a
        literal and its negation; else only periodic pairs need a look, and signs of opposite linear
        forms (:meth:`_signs_exclusive`), looked up from the term with fewer signs (see
        :meth:`_opposite_signs`)."""
        rt, tt, pt, st = self._required(t)
        ru, tu, pu, su = self._required(u)
        if tt and tu and len(tt | tu) > 1:
            return True
        if any((n, not neg) in ru for n, neg in rt):
            return True
        if pt and pu and any(self.exclusive(a, b) for a in pt for b in pu):
            return True
        if st and su:
            if len(st) > len(su):
                st, su, ru = su, st, rt
            if any(self._signs_exclusive(a, b) for a in st for b in self._opposite_signs(a) if b in ru):
                return True
        return False

    def test_excludes(self, t: B.Thr, u: B.Thr) -> bool:
        """Whether a conditional's test t excludes the term u of its else branch (so ``not t`` adds
        nothing to u, see :func:`~.boolean.f_cond`): :meth:`terms_exclusive`, or a sign t requires
        implies the negation of one u requires (:meth:`_signs_imply_exclusive`; between a few signs,
        at most :data:`IMPLIED_PAIRS_CAP` pairs). Only here: an or of two forms that are exclusive
        only by implication stays a sum, which every later use combines term by term (in
        raspl_addition_hints.rasp that took 3 layers off and put 70% on the MLP width)."""
        if self.terms_exclusive(t, u):
            return True
        st, su = self._required(t)[3], self._required(u)[3]
        if not (st and su and self._sign_atoms) or len(st) * len(su) > IMPLIED_PAIRS_CAP:
            return False
        atoms = self._sign_atoms
        return any(self._signs_imply_exclusive(a, b) for a in st if a[0] in atoms for b in su if b[0] in atoms)

    # ------------------------------------------------------------ signs that imply one another
    def _atom_of(self, l: B.Lit):
        """A sign literal as ``(body, k, c)``: it holds iff ``k * #body + c >= 0`` (k = 1 or -1), or
        None when no comparison of one count with a constant recorded its sign. The negation of
        ``[k #B + c >= 0]`` is ``[-k #B - c - 1 >= 0]`` (integers)."""
        atom = self._sign_atoms.get(l[0])
        if atom is None or not l[1]:
            return atom
        body, k, c = atom
        return (body, -k, -c - 1)

    def _signs_imply_exclusive(self, a: B.Lit, b: B.Lit) -> bool:
        """Whether sign literals a and b never hold together because a implies not b, read from the
        counts they compare: ``[#P + c >= 0]`` implies ``[#Q + d >= 0]`` when P implies Q at every
        position (so ``#P <= #Q`` on every prefix) and c <= d; ``[-#P + c >= 0]`` implies
        ``[-#Q + d >= 0]`` when Q implies P and c <= d. Whether P implies Q is :meth:`body_implies`,
        a sufficient test on the written expressions. A lowered max aggregate is a chain ``w_0 if
        #(K && V_0) >= 1 else w_1 if #(K && V_1) >= 1 else ...`` with ``V_k = V_(k+1) || ...`` ("a
        selected value is w_k or more"): each test implies the next, so the chain compared with a
        constant is two signs, not a conjunction over every level above it."""
        x, y = self._atom_of(a), self._atom_of((b[0], not b[1]))
        return x is not None and y is not None and self._atom_implies(x, y)

    def _atom_implies(self, x: tuple, y: tuple) -> bool:
        """Whether ``[k #P + c >= 0]`` implies ``[k' #Q + d >= 0]`` (atoms ``(P, k, c)``, ``(Q, k', d)``,
        k and k' = 1 or -1, counts of the whole prefix): k = k', c <= d, and P implies Q (k = 1) or Q
        implies P (k = -1), by :meth:`body_implies`."""
        if x[1] != y[1] or x[2] > y[2]:
            return False
        return self.body_implies(x[0], y[0]) if x[1] == 1 else self.body_implies(y[0], x[0])

    def body_implies(self, x, y) -> bool:
        """Whether the bool expression x implies y at every position, by their structure (sufficient,
        not complete): x is y; y an or with a side x implies; y an and of sides x implies each; x an
        and with a side that implies y, or an or whose sides both do; two tokens of one symbol; a
        reference to a definition that is a disjunct, through ors of definitions, of the other's
        (:meth:`_members_of`); else a reference is read as its definition, :data:`UNFOLD_DEPTH`
        references deep."""
        if x is y:
            return True
        key = (id(x), id(y))  # (the core's nodes live as long as the builder)
        hit = self._implies_memo.get(key)
        if hit is None:
            hit = self._implies_memo[key] = self._body_implies(x, y)
        return hit

    def _body_implies(self, x, y) -> bool:
        tx, ty = type(x), type(y)
        if ty is A.Or:
            return self.body_implies(x, y.left) or self.body_implies(x, y.right)
        if ty is A.And:
            return self.body_implies(x, y.left) and self.body_implies(x, y.right)
        if tx is A.And:
            return self.body_implies(x.left, y) or self.body_implies(x.right, y)
        if tx is A.Or:
            return self.body_implies(x.left, y) and self.body_implies(x.right, y)
        if tx is A.Ref and ty is A.Ref:
            if x.name == y.name or x.name in self._members_of(y.name):
                return True
        if self._unfolding < UNFOLD_DEPTH:  # a reference as its definition (a few deep)
            if tx is A.Ref or ty is A.Ref:
                self._unfolding += 1
                try:
                    return self.body_implies(self.defs[x.name].expr if tx is A.Ref else x,
                                             self.defs[y.name].expr if ty is A.Ref else y)
                finally:
                    self._unfolding -= 1
        if tx is A.Tok and ty is A.Tok:
            return x.symbol.value == y.symbol.value
        if tx is A.Compare and ty is A.Compare:  # two comparisons of one count with a constant
            sx, sy = _count_vs_constant(x), _count_vs_constant(y)
            if (sx is None or sy is None or x.op in ("==", "!=") or y.op in ("==", "!=")
                    or sx[0].guard is not None or sy[0].guard is not None):
                return False
            return self._atom_implies((sx[0].body, sx[1], sx[2]), (sy[0].body, sy[1], sy[2]))
        return (ty is A.BoolConst and y.value) or (tx is A.BoolConst and not x.value)

    def _members_of(self, name: str) -> frozenset:
        """The bool definitions D with ``name = ... || D || ...`` (through ors, and through such
        definitions in turn): each implies ``name``. Worked out bottom up without recursion (a lowered
        chain ``N__ge3 = N__ge4 || ...`` is as long as the alphabet); a set that would pass
        :data:`MEMBERS_CAP` keeps only the direct disjuncts (a subset: the test stays sound)."""
        hit = self._members.get(name)
        if hit is not None:
            return hit
        stack = [(name, False)]
        while stack:
            n, ready = stack.pop()
            if n in self._members:
                continue
            kids = self._disjunct_refs(n)
            if not ready:
                stack.append((n, True))
                stack.extend((k, False) for k in kids if k not in self._members)
                continue
            out = {n}
            for k in kids:
                out |= self._members[k]
                if len(out) > MEMBERS_CAP:
                    out = {n, *kids}
                    break
            self._members[n] = frozenset(out)
        return self._members[name]

    def _disjunct_refs(self, name: str) -> list:
        """The references among the disjuncts of a bool definition's expression (through ors)."""
        d = self.defs.get(name)
        if d is None or d.type != A.BOOL:
            return []
        out, stack = [], [d.expr]
        while stack:
            e = stack.pop()
            if type(e) is A.Or:
                stack.append(e.right)
                stack.append(e.left)
            elif type(e) is A.Ref and e.name in self.defs:
                out.append(e.name)
        return out

    def _opposite_signs(self, a: B.Lit) -> tuple:
        """The sign literals over the linear form opposite to ``a``'s, the only ones
        :meth:`_signs_exclusive` may find exclusive with it. A sign node holds ``[G + c >= 0]`` with G
        as its head holds it, whose first coefficient is positive (:meth:`sign_lit` flips it so), and
        its negation ``[-G - c - 1 >= 0]``; so the literals over the form opposite to ``(s, neg)``'s
        are ``(s', not neg)`` for the sign nodes s' whose head holds the same G. A term of a value's
        chain compared with a constant gains a sign at every level: looking its few signs up here,
        rather than indexing the long term's signs anew at each level, keeps a fold linear."""
        group = self._signs_of_form[self._form_of_sign[a[0]]]
        return tuple((s, not a[1]) for s in group)

    def _required(self, t: B.Thr) -> tuple:
        """(t's required literals, the tokens among them that are positive, the periodic ones, the
        sign literals)."""
        hit = self._req.get(t)
        if hit is None:
            req = frozenset(t.required())
            toks = frozenset(n for n, _ in req & self._token_lits)
            hit = self._req[t] = (req, toks, tuple(req & self._periodic_lits), req & self._sign_lits)
        return hit

    def _form_tokens(self, f: Form):
        """The tokens the terms of f require, one per term and all different; else None."""
        if f in self._tok_cache:
            return self._tok_cache[f]
        toks = set()
        out = None
        term_token = self._term_token
        for t in f.terms:
            tok = term_token.get(t, -1)
            if tok == -1:
                req = self._token_lits.intersection(t.required())
                tok = term_token[t] = next(iter(req))[0] if len(req) == 1 else None
            if tok is None:
                break
            toks.add(tok)
        else:
            out = frozenset(toks) if len(toks) == len(f.terms) else None
        self._tok_cache[f] = out
        return out

    def _lit_mask(self, l: B.Lit) -> tuple[int, int]:
        """(M, the residues mod M where a periodic literal holds, as the bits of an int): exclusivity
        of two literals is then one AND, not a set intersection (a periodic guard's normal form
        compares every pair of its M branches)."""
        hit = self._masks.get(l)
        if hit is None:
            p = self.nodes[l[0]].params
            M = p["period"]
            mask = sum(1 << r for r in p["residues"])
            hit = self._masks[l] = (M, ((1 << M) - 1) ^ mask if l[1] else mask)
        return hit

    # ---------------------------------------------------------------- bools
    def def_form(self, name: str) -> Form:
        if name not in self.def_forms:
            if self.def_depth >= DEF_DEPTH:
                raise _Deeper(name)
            d = self.defs[name]
            saved, self.origin = self.origin, name
            self.def_depth += 1
            try:
                f = self.bool_expr(d.expr)
            finally:
                self.origin = saved
                self.def_depth -= 1
            self.def_forms[name] = f
            self.form_names.setdefault(f, name)
        return self.def_forms[name]

    def form_of(self, name: str) -> Form:
        """:meth:`def_form` from the top: a definition met :data:`DEF_DEPTH` references down is worked
        out first, from here, and the one that met it again (its work so far is found in the caches
        and the hash-consed nodes), so that a chain of definitions ``D_k = D_(k-1) && ...`` costs the
        stack of DEF_DEPTH of them, not of all (200 overflowed Python's recursion limit)."""
        pending = [name]
        while pending:
            try:
                self.def_form(pending[-1])
            except _Deeper as deeper:
                pending.append(deeper.name)
            else:
                pending.pop()
        return self.def_forms[name]

    def is_bool(self, e) -> bool:
        if isinstance(e, (A.Tok, A.BoolConst, A.Not, A.And, A.Or, A.Compare, A.PosPred)):
            return True
        if isinstance(e, A.Ref):
            return self.defs[e.name].type == A.BOOL
        if isinstance(e, A.Cond):
            return self.is_bool(e.then)
        return False

    def bool_expr(self, e) -> Form:
        # memo by identity (hashing deep expression trees is slow); equal structures still share
        # their nodes, which are keyed by content
        hit = self.bool_memo.get(id(e))
        if hit is not None:
            return hit[1]
        f = self._bool_expr(e)
        self.bool_memo[id(e)] = (e, f)
        return f

    def _bool_expr(self, e) -> Form:
        kind = type(e)  # the AST's classes have no subclasses
        if kind is A.Compare:
            if self.is_bool(e.left):
                a, b = self.bool_expr(e.left), self.bool_expr(e.right)
                eq = B.f_cond(self, a, b, B.f_not(b))
                return eq if e.op == "==" else B.f_not(eq)
            return self.compare(e)
        if kind is A.Ref:
            return self.def_form(e.name)
        if kind is A.And:
            return self.f_and(self.bool_expr(e.left), self.bool_expr(e.right))
        if kind is A.Tok:
            return self.token_form(e.symbol.value)
        if kind is A.Or:
            if type(e.left) is A.Or or type(e.right) is A.Or:
                return self.or_chain(e)
            return self.f_or(self.bool_expr(e.left), self.bool_expr(e.right))
        if kind is A.Not:
            return B.f_not(self.bool_expr(e.operand))
        if kind is A.BoolConst:
            return B.TRUE if e.value else B.FALSE
        if kind is A.Cond:
            return B.f_cond(self, self.bool_expr(e.test), self.bool_expr(e.then), self.bool_expr(e.other))
        if kind is A.PosPred:
            M, R = periodic_residues(e.rel.expr)
            return B.lit_form(self.periodic(M, R))
        raise RaspError(f"'{expr_to_str(e)}' is not a bool operation of C-RASP", e.span, HINT)

    def f_and(self, f: Form, g: Form) -> Form:
        """:func:`~.boolean.f_and`, once per pair of forms: lowered RASP-L programs repeat the same
        chains (``SUMD__34 || SUMD__33 || ...`` in every column's definition) as distinct objects,
        and a combination that needs gates is worked out again each time otherwise. The result is
        a function of the two forms and of the nodes made so far, which the builder only adds to."""
        key = (f, g)
        hit = self._and_memo.get(key)
        if hit is None:
            hit = self._and_memo[key] = B.f_and(self, f, g)
        return hit

    def f_or(self, f: Form, g: Form) -> Form:
        """:func:`~.boolean.f_or`, once per pair of forms (see :meth:`f_and`)."""
        key = (f, g)
        hit = self._or_memo.get(key)
        if hit is None:
            hit = self._or_memo[key] = B.f_or(self, f, g)
        return hit

    def or_chain(self, e: A.Or) -> Form:
        """``a1 || a2 || ... || an`` (nested ``||`` in any bracketing; ``any(x, ...)`` expands into a
        balanced tree) folded from the left exactly as :func:`~.boolean.f_or` would, but with the
        running sum kept as a list of terms and its token set: while every operand is a sum of terms
        that each require one token of their own (``Q[x] && ...``), each step is a concatenation that
        costs the operand's size, not the sum's (folding pairwise would re-examine the whole sum n
        times)."""
        ops = or_operands(e)
        acc = self.bool_expr(ops[0])
        terms: list | None = None  # the running sum, while there is one (acc is then stale)
        toks: set = set()  # the tokens its terms require
        for op in ops[1:]:
            g = self.bool_expr(op)
            if terms is None and acc not in (B.TRUE, B.FALSE) and g not in (B.TRUE, B.FALSE):
                f = B.norm(acc)
                tf = None if f.neg else self._form_tokens(f)
                if tf is not None:
                    terms, toks = list(f.terms), set(tf)
            if terms is not None:
                gn = B.norm(g)
                tg = None if (gn.neg or g == B.FALSE) else self._form_tokens(gn)
                if tg is not None and len(terms) + len(gn.terms) <= B.TERM_CAP and not (toks & tg):
                    terms.extend(gn.terms)  # what f_or returns for token-exclusive sums
                    toks |= tg
                    continue
                acc, terms = B.Form(tuple(terms)), None
            acc = self.f_or(acc, g)
        return acc if terms is None else B.Form(tuple(terms))

    # ---------------------------------------------------------------- comparisons
    def compare(self, e: A.Compare) -> Form:
        # expanded families repeat the same comparison in every instance as distinct objects (a
        # RASP-L lowering's ``tokens != END`` in each NEXT[x]); AST nodes compare by structure, so
        # each distinct comparison is compiled once
        hit = self.compare_memo.get(e)
        if hit is None:
            hit = self.compare_memo[e] = self._compare_located(e)
        return hit

    def _compare_located(self, e: A.Compare) -> Form:
        saved = (self.atoms, self.leaves, getattr(self, "span", None), getattr(self, "hint", None))
        self.atoms, self.leaves, self.span = 0, 0, e.span
        try:
            return self._compare(e)
        finally:
            self.atoms, self.leaves, self.span, self.hint = saved

    def _compare(self, e: A.Compare) -> Form:
        # a comparison that stays one linear atom without local part labels its sign by its source
        self.hint = e if e.op in ("<", "<=", ">", ">=") else None  # printed only if a sign uses it
        simple = _count_vs_constant(e)
        if simple is not None:  # ``#P >= c`` (``exists P``), the commonest comparison of a family:
            # the one leaf that flatten and ge0 would make (on the start path, which fixes no token)
            count, k, c = simple
            eq = e.op in ("==", "!=")
            leaf = self.leaf({id(count): (count, k)}, c, self.start_path(), eq)
            if not eq and count.guard is None:
                lit = B.as_lit(leaf)  # the sign [k #P + c >= 0], unless a constant or a token's and
                if lit is not None and lit[0] in self._form_of_sign and lit[0] not in self._sign_atoms:
                    self._sign_atoms[lit[0]] = (count.body, k, c) if not lit[1] else (count.body, -k, -c - 1)
            return B.f_not(leaf) if e.op == "!=" else leaf
        L, R = {}, {}
        lc = self.flatten(e.left, 1, L)
        rc = self.flatten(e.right, 1, R)

        def diff(x, xc, y, yc, extra=0):  # x - y + extra
            terms = dict(x)
            for k, (e, v) in y.items():
                terms[k] = (e, (terms[k][1] if k in terms else 0) - v)
            return terms, xc - yc + extra

        start = self.start_path()
        if e.op == "<":
            return self.ge0(*diff(R, rc, L, lc, -1), start)
        if e.op == "<=":
            return self.ge0(*diff(R, rc, L, lc), start)
        if e.op == ">":
            return self.ge0(*diff(L, lc, R, rc, -1), start)
        if e.op == ">=":
            return self.ge0(*diff(L, lc, R, rc), start)
        both = self.ge0(*diff(R, rc, L, lc), start, eq=True)  # pushed once, both atoms per branch
        return both if e.op == "==" else B.f_not(both)

    def flatten(self, e, k: int, acc: dict) -> int:
        """Add ``k * e`` to ``acc`` (count subterm -> coefficient); returns the constant part.

        Iterative, left to right as a recursion would go (the order the terms enter ``acc`` is the
        order their heads are made): a chain ``C_k = C_(k-1) + #P`` of hundreds of count
        definitions is inlined here, and a recursion as deep overflowed Python's stack."""
        c = 0
        stack = [(e, k)]
        while stack:
            e, k = stack.pop()
            if k == 0:
                continue
            kind = type(e)  # the AST's classes have no subclasses
            if kind is A.Ref:
                stack.append((self.defs[e.name].expr, k))
            elif kind is A.IntConst:
                c += k * e.value
            elif kind is A.Count or kind is A.Cond or kind is A.Min or kind is A.Max:
                # keyed by identity: hashing deep expression trees is slow (equal subtrees that are
                # distinct objects still meet in the head value, which merges nodes)
                old = acc.get(id(e))
                acc[id(e)] = (e, k + (old[1] if old else 0))
            elif kind is A.Add:
                stack.append((e.right, k))
                stack.append((e.left, k))
            elif kind is A.Sub:
                stack.append((e.right, -k))
                stack.append((e.left, k))
            elif kind is A.Scale:
                stack.append((e.operand, k * e.k))
            else:
                raise RaspError(f"'{expr_to_str(e)}' is not a count operation of C-RASP", e.span, HINT)
        return c

    def _with(self, terms: dict, c: int, e, k: int):
        t = dict(terms)
        c2 = c + self.flatten(e, k, t)
        return t, c2

    def ge0(self, terms: dict, c: int, path, eq: bool = False) -> Form:
        """``[sum_k coeff_k * term_k + c >= 0]`` (``== 0`` when ``eq``) as a bool form (see the module
        docstring). ``path`` is what the conditionals passed on the way fix (see :meth:`decide`)."""
        terms = {key: ek for key, ek in terms.items() if ek[1] != 0}
        if self.only_counts(terms):  # nothing to decide, split or distribute: a leaf at once
            return self.leaf(terms, c, path, eq)
        # conditionals the path decides are replaced by their branch: one sweep over the terms
        # (branches go to the end, in order), repeated while the branches brought new conditionals
        while True:
            kept: dict = {}
            added: dict = {}
            for key, (e, k) in terms.items():
                if isinstance(e, A.Cond):
                    decided, _, _ = self.decide(e.test, path)
                    if decided is not None:
                        c += self.flatten(e.then if decided else e.other, k, added)
                        continue
                kept[key] = (e, k)
            if not added:
                terms = kept
                break
            for key, (e, k) in added.items():
                old = kept.get(key)
                kept[key] = (e, k + (old[1] if old else 0))
            terms = {key: ek for key, ek in kept.items() if ek[1] != 0}
        split = self.split_by_token(terms, c, path, eq)
        if split is None:
            split = self.split_token_value(terms, c, path, eq)
        if split is not None:
            return split
        for key, (e, k) in terms.items():
            if isinstance(e, (A.Min, A.Max, A.Cond)):
                self.hint = None
                rest = dict(terms)
                del rest[key]
                if isinstance(e, A.Cond):
                    decision = self.decide(e.test, path)
                    if type(e.other) is A.Cond and self.only_counts(rest):
                        return self.cond_chain(e, decision, k, rest, c, eq)
                    _, p_then, p_else = decision  # (inline, not through cond_chain: a frame less
                    # per level where ge0 recurses deeply, as over a 256-symbol alphabet)
                    a = self.ge0(*self._with(rest, c, e.then, k), p_then, eq)
                    b = self.ge0(*self._with(rest, c, e.other, k), p_else, eq)
                    return self.cond_form(e, a, b)
                if eq:  # E == 0 iff E >= 0 and -E >= 0; min/max split differently in each
                    return self.f_and(self.ge0(terms, c, path), self.ge0(_neg(terms), -c, path))
                a = self.ge0(*self._with(rest, c, e.left, k), path)
                b = self.ge0(*self._with(rest, c, e.right, k), path)
                conj = isinstance(e, A.Min) == (k > 0)  # min >= ... : both; max >= ... : either
                return self.f_and(a, b) if conj else self.f_or(a, b)
        return self.leaf(terms, c, path, eq)

    def cond_form(self, e: A.Cond, a: Form, b: Form) -> Form:
        """``a if e.test else b``, given the forms of the two branches."""
        if a is b or a == b:  # the test does not matter (and is not built): most levels of a lowered
            return a  # value's chain compared with a constant are false on both sides
        test = self.bool_expr(e.test)
        if type(e.other) is A.Cond and B.as_lit(test) is None:
            # a chain ``v0 if t0 else v1 if t1 else ...`` (lowered RASP-L values): with every test a
            # literal, the branch ``t_k and not t_0 ... and not t_(k-1)`` stays one conjunction;
            # tests left as threshold forms multiply their weights at every level until a gate is
            # needed, one layer per few levels
            test = B.lit_form(self.materialize(test))
        return B.f_cond(self, test, a, b)

    def cond_chain(self, e: A.Cond, decision, k: int, rest: dict, c: int, eq: bool) -> Form:
        """:meth:`ge0` of ``k * (v0 if t0 else v1 if t1 else ...) + rest + c`` where ``rest`` is only
        counts and ``decision`` is what :meth:`decide` said of t0: what ge0's recursion builds, one
        level per loop instead of one recursive call per level (a lowered RASP-L value is a chain of
        one branch per token code, compared with every family instance's constant).

        ge0 on ``rest + (v1 if t1 else ...)`` under t0's else path would decide nothing but t1 (rest
        has no conditional), split nothing (split_by_token needs two conditionals) and take t1's
        branches next, as here; the chain stops where the path decides a test or the else branch is
        not a conditional, and ge0 takes over. The then branches are built first, top to bottom,
        then the tests and the conditionals bottom up (:meth:`cond_form`): the order in which the
        recursion makes nodes, so the model is the same. The bottom-up fold skips the levels where
        cond_form would return its else form unchanged: FALSE under FALSE, and runs of token tests
        that every term of the else form excludes (:meth:`_excluded_run`). cond_form makes no node
        at a FALSE-under-FALSE level, and a skipped token test's node exists already
        (:meth:`_token_runs`), so the skips leave the graph as the fold makes it."""
        thens = {}  # level -> its branch's form, for the levels whose branch is not FALSE
        nonfalse = [-1]  # those levels, in order, after a sentinel
        walk, paths, nxt, p_else = self.chain_walk(e, decision)
        FALSE = B.FALSE
        levels = range(len(walk))
        if eq and not rest and self.leaves + len(walk) <= LEAF_CAP:
            # ``v_L + c == 0`` (k = +-1 or any k): of the levels with a constant branch only those
            # whose constant is -c / k are not FALSE, found in the walk's index instead of level by
            # level (the constant levels skipped are counted as the FALSE leaves the loop would find)
            index, others = self._constant_levels(walk)
            hits = index.get(-c // k, ()) if -c % k == 0 else ()
            self.leaves += len(walk) - len(others) - len(hits)
            levels = sorted((*hits, *others)) if others else hits
        for L in levels:
            p_then = paths[L] if paths is not None else p_else
            then = walk[L].then
            if not rest and type(then) is A.IntConst:  # a constant branch: what ge0 would find
                v = c + k * then.value
                if v == 0 if eq else v >= 0:
                    a = self.leaf({}, v, p_then, eq)
                else:  # leaf's FALSE, without the call (most levels, for all but one constant)
                    self.leaves += 1
                    a = FALSE if self.leaves <= LEAF_CAP else self.leaf({}, v, p_then, eq)
            else:
                a = self.ge0(*self._with(rest, c, then, k), p_then, eq)
            if a != FALSE:
                nonfalse.append(L)
                thens[L] = a
        b = self.ge0(*self._with(rest, c, nxt, k), p_else, eq)
        runs = None
        top = len(walk) - 1
        while top >= 0:
            e, a = walk[top], thens.get(top, FALSE)
            if a == FALSE:
                # levels with a FALSE branch, from the next one up that is not FALSE, to top
                while nonfalse[-1] > top:
                    nonfalse.pop()
                low = nonfalse[-1] + 1
                if b == FALSE:  # FALSE if t else FALSE: cond_form returns FALSE at every level
                    b, top = a, low - 1
                    continue
                if runs is None:
                    runs = self._token_runs(walk)
                skip = self._excluded_run(runs, low, top, b) if runs else top + 1
                if skip <= top:
                    top = skip - 1
                    continue
            b2 = self.cond_form(e, a, b)
            if a == FALSE and (b2 is b or b2 == b):
                # b excludes this level's test; each level below it in a run of implied tests has a
                # test that implies this one, so b excludes it too (see the docstring)
                while nonfalse[-1] > top:
                    nonfalse.pop()
                starts = self._implied_runs(walk)
                top = min(top, max(nonfalse[-1] + 1, starts[top])) - 1
                continue
            b = b2
            top -= 1
        return b

    def _constant_levels(self, walk) -> tuple:
        """For :meth:`cond_chain`: ({constant: the levels whose then branch is that constant, in
        order}, [the levels whose then branch is not a constant]), made once per walk: ``OUT ==
        CODE[x]`` of raspl_count.rasp compares OUT's chain (START's value, then one constant per
        token) with each of 150 constants, and only START's level and the matching one are not
        FALSE."""
        key = id(walk)
        hit = self._consts.get(key)
        if hit is None:
            index: dict = {}
            others = []
            for L, e in enumerate(walk):
                if type(e.then) is A.IntConst:
                    index.setdefault(e.then.value, []).append(L)
                else:
                    others.append(L)
            hit = self._consts[key] = (index, others)
        return hit

    def _implied_runs(self, walk) -> list:
        """For :meth:`cond_chain`'s fold: per level L of the walk, the first level of the run ending
        at L in which every level's test implies the next one's (:meth:`body_implies`). A lowered max
        aggregate's chain ``w0 if #(K && V_0) >= 1 else w1 if #(K && V_1) >= 1 else ...`` is one run
        (``V_k = V_(k+1) || ...``): compared with a constant, every level above the matching one has
        a FALSE branch and a test that the else form already excludes, so the fold stops asking at
        the first of them instead of once per level per family instance."""
        key = id(walk)
        hit = self._implied.get(key)
        if hit is None:
            hit = [0]
            for i in range(1, len(walk)):
                hit.append(hit[-1] if self.body_implies(walk[i - 1].test, walk[i].test) else i)
            self._implied[key] = hit
        return hit

    def _token_runs(self, walk):
        """For :meth:`cond_chain`'s fold: (per level, the token node of its test when that test is a
        written token, else None; per level, the first level of the run of token tests it ends),
        or () until every such token has a node (so skipping a level never skips making one)."""
        key = id(walk)
        hit = self._runs.get(key)
        if hit is not None:
            return hit
        toks = []
        for e in walk:
            if type(e.test) is A.Tok:
                n = self.keys.get(("token", e.test.symbol.value))
                if n is None:
                    return ()  # not cached: a later fold may find the node made
                toks.append(n)
            else:
                toks.append(None)
        starts, start = [], 0
        for i, t in enumerate(toks):
            if t is None:
                start = i + 1
            starts.append(start)
        hit = self._runs[key] = (toks, starts)
        return hit

    def _excluded_run(self, runs, low: int, top: int, b: Form) -> int:
        """The lowest level L >= low such that :meth:`cond_form` of every level L..top, each with a
        FALSE branch, returns b unchanged (top + 1 if none). That holds at a level whose test is a
        token t when every term of b requires a positive token other than t (or two tokens): then
        :func:`~.boolean.f_cond` finds ``t and FALSE`` FALSE and every term of b exclusive of t
        (:meth:`terms_exclusive`'s first test), and returns b's terms as they are. One lowered value
        compared with every family instance's constant thus costs the levels around the matching
        ones, not the whole chain per instance."""
        if b.neg or not b.terms or len(b.terms) > B.TERM_CAP:
            return top + 1
        toks, starts = runs
        low = max(low, starts[top])
        if toks[top] is None:
            return top + 1
        single = set()  # the one token some term of b requires
        for u in b.terms:
            tu = self._required(u)[1]
            if not tu:
                return top + 1
            if len(tu) == 1:
                single |= tu
        if single:  # those tokens' levels end the run (below them the test is the term's token)
            for L in range(top, low - 1, -1):
                if toks[L] in single:
                    return L + 1
        return low

    def chain_walk(self, e: A.Cond, decision) -> tuple:
        """The levels :meth:`cond_chain` takes from ``e`` on, given :meth:`decide`'s ``decision`` on
        its test: ``([level, ...], [its then path, ...] or None, the expression after the last
        level, its path)``; the chain stops where the path decides a test or the else branch is not
        a conditional. The walk depends only on the chain and the paths, not on the constant or the
        rest of the comparison, so it is made once per (chain, paths): ``OUT == CODE[x]`` of
        raspl_count.rasp walks OUT's chain (151 levels) and START's for each of its 150 symbols.

        A chain whose tests no path decides or splits (counts, not tokens: a lowered aggregate's) has
        one list of levels for every path, and the paths None: each level's then path is the path
        it started on, which is also the else path. So the per-walk tables (:meth:`_implied_runs`,
        :meth:`_constant_levels`) are made once per chain, not once per path it is compared on."""
        if decision[1] is decision[2]:  # the first test leaves the path as it is
            free = self._free_chain(e)
            if free is not None:
                return free[0], None, free[1], decision[2]
        key = (id(e), decision[1], decision[2])
        hit = self._walks.get(key)
        if hit is not None:
            return hit
        walk, paths = [], []
        while True:
            _, p_then, p_else = decision
            walk.append(e)
            paths.append(p_then)
            nxt = e.other
            if type(nxt) is not A.Cond:
                break
            decision = self.decide(nxt.test, p_else)
            if decision[0] is not None:
                break
            e = nxt
        out = self._walks[key] = (walk, paths, nxt, p_else)  # walk[0] keeps the chain, so its id, alive
        return out

    def _free_chain(self, e: A.Cond):
        """(the levels of the chain from ``e`` down, the expression after them) when no level's test
        depends only on the token and i mod M (so :meth:`decide` leaves every path as it is), else
        None; once per chain."""
        key = id(e)
        hit = self._free.get(key, 0)
        if hit == 0:
            levels, lvl = [], e
            while True:
                if self.test_pairs(lvl.test) is not None:
                    hit = None
                    break
                levels.append(lvl)
                if type(lvl.other) is not A.Cond:
                    hit = (levels, lvl.other)
                    break
                lvl = lvl.other
            self._free[key] = hit
        return hit

    @staticmethod
    def only_counts(terms: dict) -> bool:
        """Whether every term is a count (no conditional, min or max): then :meth:`ge0` would find
        nothing to do before :meth:`leaf`. True for a constant (most leaves of a comparison of two
        value chains) and for ``exists P`` (``#P >= 1``), the commonest comparison of a family."""
        return all(type(e) is A.Count for e, _ in terms.values())

    def leaf(self, terms: dict, c: int, path, eq: bool) -> Form:
        """A branch of :meth:`ge0` with only counts left: linear atoms, and the path's token."""
        self.leaves += 1
        if terms:  # constant leaves cost nothing (no head); count the others
            self.atoms += 1 + eq
        if self.atoms > ATOM_CAP or self.leaves > LEAF_CAP:
            raise RaspError(f"this comparison expands into more than {ATOM_CAP} linear comparisons of counts "
                            f"(or {LEAF_CAP} branches): min, max and conditionals multiply them; too large to "
                            "compile", self.span, "split it into several definitions")
        if not terms:
            leaf = B.TRUE if (c == 0 if eq else c >= 0) else B.FALSE
        elif eq:
            leaf = self.f_and(self.linear_atom(terms, c), self.linear_atom(_neg(terms), -c))
        else:
            leaf = self.linear_atom(terms, c)
        # where the path has fixed the token, say so: the branch is only used under that condition,
        # and the token literal makes the branches visibly exclusive (no negations pile up)
        toks = self._path_tokens.get(path[1])
        if toks is None:
            toks = self._path_tokens[path[1]] = frozenset(k for k, _ in path[1])
        if len(toks) == 1 and len(self.symbols) > 1 and leaf != B.FALSE:
            sym = self.symbols[next(iter(toks))]
            leaf = self.f_and(self.token_form(sym), leaf)
        return leaf

    def split_by_token(self, terms: dict, c: int, path, eq: bool):
        """The common shape ``sum(s, X[s] if Q[s] else Y[s])`` in one step, or None.

        When two or more undecided conditionals each hold for exactly one token of the path (and
        the path does not depend on i mod M), splitting them one at a time costs a sweep of all of
        them per branch (cubic in the alphabet over a family). Instead the path is partitioned at
        once: one branch per token some conditional singles out, plus at most one other token (the
        path minus those; more than one and the pairwise split is used). On each branch every such
        conditional is decided, and :meth:`ge0` puts the branch's token literal in front of its leaf,
        so the leaves are exclusive and their sum is their concatenation. The result is the same
        function as the pairwise split."""
        if path[0] != 1:
            return None
        cur = path[1]
        singled: dict = {}  # token pair -> the conditionals (key, expr, coeff) that hold only there
        for key, (e, k) in terms.items():
            if not isinstance(e, A.Cond):
                continue
            s = self.test_pairs(e.test)
            if s is None or s[0] != 1:
                continue
            hit = s[1] & cur
            if len(hit) != 1:
                return None
            singled.setdefault(next(iter(hit)), []).append((key, e, k))
        if sum(len(v) for v in singled.values()) < 2:
            return None
        rest = cur.difference(singled)
        if len(rest) > 1:
            return None
        self.hint = None
        # every singled-out conditional takes its else branch, except on its own token's branch
        cond_keys = {key for v in singled.values() for key, _, _ in v}
        base = {key: ek for key, ek in terms.items() if key not in cond_keys}
        c_base = c
        for v in singled.values():
            for _, e, k in v:
                c_base += self.flatten(e.other, k, base)
        leaves = []
        for pair in list(singled) + list(rest):
            t, cc = dict(base), c_base
            for _, e, k in singled.get(pair, ()):
                cc += self.flatten(e.then, k, t) + self.flatten(e.other, -k, t)
            t = {key: ek for key, ek in t.items() if ek[1] != 0}
            leaves.append((pair, self.ge0(t, cc, (1, frozenset((pair,))), eq)))
        return self._join_token_branches(leaves)

    def _join_token_branches(self, leaves: list) -> Form:
        """The or of ``[(token pair, the form of a branch on that token alone), ...]``: every branch
        implies its token (:meth:`leaf` puts the token's literal in front), so branches of different
        tokens are exclusive, and when each is one term requiring its token the or is their
        concatenation (no f_or, which compares every pair of terms)."""
        out: list = []
        for pair, leaf in leaves:
            if leaf == B.FALSE:
                continue
            if leaf.neg or self._form_tokens(leaf) != frozenset((self.token(self.symbols[pair[0]]).id,)):
                return functools.reduce(self.f_or, (f for _, f in leaves), B.FALSE)
            out.extend(leaf.terms)
        return B.norm(B.Form(tuple(out)))

    def split_token_value(self, terms: dict, c: int, path, eq: bool):
        """A comparison of a token's value with other values (``tokens != END`` of a lowered RASP-L
        program), one branch per token, or None.

        A chain ``v0 if "s0" else v1 if "s1" else ... else w`` whose every test is one written token
        is a table: on the path's token s it is the branch of the first level testing s (w when none
        does). When the comparison has another conditional, min or max term, and the path (period 1)
        leaves at most one token to w, the path is split into its tokens at once: on each, the chain
        is that token's branch, and :meth:`ge0` of the rest puts the token's literal in front of its
        leaves, so the branches are exclusive and joined by :meth:`_join_token_branches`. The same
        function as ge0's recursion, which takes the chain's levels one at a time and, at each, the
        other chain's levels: a staircase of walks and forms quadratic in the chain's length (about
        1.3 of the 2.5 billion instructions of raspl_count.rasp's compile over 150 symbols; the split
        and :meth:`_free_chain` together took 0.74 billion off it, the or insert of
        ``boolean._or_lit`` most of the rest)."""
        if path[0] != 1:
            return None
        chain = other = None
        for key, (e, k) in terms.items():
            kind = type(e)
            if kind is A.Count:
                continue
            if chain is None and kind is A.Cond and self._token_table(e) is not None:
                chain = key
            elif other is None:
                other = key
            if chain is not None and other is not None:
                break
        else:
            return None
        e, k = terms[chain]
        table, default = self._token_table(e)
        pairs = sorted(path[1], key=lambda p: table.get(p[0], (len(table), 0))[0])
        if sum(1 for p in pairs if p[0] not in table) > 1:
            return None  # several tokens would share the default branch: the recursion groups them
        self.hint = None
        rest = {key: ek for key, ek in terms.items() if key != chain}
        leaves = []
        for pair in pairs:
            value = table[pair[0]][1] if pair[0] in table else default
            leaves.append((pair, self.ge0(*self._with(rest, c, value, k), (1, frozenset((pair,))), eq)))
        return self._join_token_branches(leaves)

    def _token_table(self, e: A.Cond):
        """({token index: (its level, the branch there)}, the last else) when every test of the
        chain from ``e`` is one written token, else None; once per chain."""
        key = id(e)
        hit = self._tables.get(key, 0)
        if hit == 0:
            table: dict = {}
            lvl = e
            while type(lvl) is A.Cond:
                if type(lvl.test) is not A.Tok or type(lvl.test.symbol) is not A.SymLit:
                    hit = None
                    break
                sym = self.symbol_index.get(lvl.test.symbol.value)
                if sym is None:
                    hit = None
                    break
                table.setdefault(sym, (len(table), lvl.then))
                lvl = lvl.other
            else:
                hit = (table, lvl)
            self._tables[key] = (e, hit)  # (e keeps its id alive)
            return hit
        return hit[1]

    def decide(self, test, path):
        """Whether ``test`` (a function of the token at i and i mod M) is fixed on the current path;
        and the path of each branch. A path is (L, the set of (token, i mod L) still possible)."""
        s = self.test_pairs(test)
        if s is None:
            return None, path, path
        L = math.lcm(path[0], s[0])
        if L * len(self.symbols) > PAIR_CAP:
            return None, path, path
        cur, t = _lift(path, L), _lift(s, L)
        if cur <= t:
            return True, path, path
        if not (cur & t):
            return False, path, path
        return None, (L, cur & t), (L, cur - t)

    def start_path(self):
        return self._start_path

    def test_pairs(self, e):
        """(M, {(token id, i mod M)} where e holds) when a bool expression depends only on the token
        at i and on i mod M; else None."""
        key = id(e)
        if key in self._pairs:
            return self._pairs[key][1]
        out = self._test_pairs(e)
        self._pairs[key] = (e, out)
        return out

    def _test_pairs(self, e):
        ntok = len(self.symbols)
        if isinstance(e, A.Tok):
            return (1, frozenset({(self.symbol_index[e.symbol.value], 0)}))
        if isinstance(e, A.PosPred):
            M, R = periodic_residues(e.rel.expr)
            return (M, frozenset((k, r) for k in range(ntok) for r in R))
        if isinstance(e, A.BoolConst):  # every token or none: the start path's set, shared
            return (1, self._start_path[1] if e.value else frozenset())
        if isinstance(e, A.Ref) and self.defs[e.name].type == A.BOOL:
            return self.test_pairs(self.defs[e.name].expr)
        if isinstance(e, A.Not):
            s = self.test_pairs(e.operand)
            if s is None:
                return None
            return (s[0], frozenset((k, r) for k in range(ntok) for r in range(s[0])) - s[1])
        if isinstance(e, (A.And, A.Or)):
            # the side that is not a reference first: a chain of definitions ``N5 = N6 && !(#... >= 1)``
            # (a lowered max) is None at its first count, without recursing down the chain
            first, second = (e.right, e.left) if isinstance(e.left, A.Ref) else (e.left, e.right)
            a = self.test_pairs(first)
            b = self.test_pairs(second) if a is not None else None
            if a is None or b is None:
                return None
            L = math.lcm(a[0], b[0])
            if L * ntok > PAIR_CAP:
                return None
            la, lb = _lift(a, L), _lift(b, L)
            return (L, la & lb if isinstance(e, A.And) else la | lb)
        return None

    def count_lit(self, body) -> B.Lit:
        """The literal a head counts: the body's form as one node. Where that form is a set S of
        two or more tokens, ``[token in S]``, or ``C && [token in S]`` for a conjunction C that reads
        no token (a sum of ``C && t`` over t in S), the set is one embedding feature
        (:meth:`tokenset`) and the gate, if any, one neuron: ``#(PREV__3 && AFTER__ge5)`` of a
        lowered max is ``relu(PREV__3 + [token >= 5] - 1)``, where the gate of the sum ``PREV__3 &&
        "5" + PREV__3 && "6" + ...`` had one neuron per token (shared between nested sets, but each
        gate wrote every one of them). The feature is 1 exactly where the sum is (tokens are
        exclusive; both are 0 at BOS), so the head counts the same. Every body whose form is the
        same sum gets the same literal (:meth:`_set_form`), so their heads and signs are shared as
        before; a body written ``C && S`` goes there without building the sum."""
        hit = self._count_lits.get(id(body))  # (sort.rasp's RANK[y] is read by every comparison
        if hit is None:  # of its branches; the core's nodes live as long as the builder)
            hit = self._count_lits[id(body)] = self._count_lit(body)
        return hit

    def _count_lit(self, body) -> B.Lit:
        if type(body) is A.And:
            left, right = self.bool_expr(body.left), self.bool_expr(body.right)
            if len(left.terms) < 2 and len(right.terms) < 2 and not (left.neg or right.neg):
                return self.materialize(self.bool_expr(body))  # (no side is a set: most bodies)
            sl, sr = self._token_set(left), self._token_set(right)
            if (sl is None) != (sr is None):
                other = right if sl is not None else left
                t = other.terms[0] if len(other.terms) == 1 and not other.neg else None
                if t is not None and t.conj and not any((n, False) in self._token_lits for n in other.nodes()):
                    # what _set_form makes of the sum bool_expr(body) would build
                    return self.materialize(self.f_and(other, self._set_lit(sl or sr)))
        f = self.bool_expr(body)
        g = self._set_form(f)
        return self.materialize(f if g is None else g)

    def _token_set(self, f: Form):
        """The symbols S, in alphabet order, when f is ``[token in S]`` for two or more symbols but
        not all (a sum of positive token literals, or its negation: an or of tokens is such a sum,
        tokens being exclusive); else None. (The node is made where it is read, :meth:`_set_lit`.)"""
        if len(f.terms) < 2 and not f.neg:
            return None  # (most forms: one term)
        hit = self._token_sets.get(f, False)
        if hit is not False:
            return hit
        toks = set()
        for t in f.terms:
            if len(t.lits) != 1 or t.theta != 1 or t.lits[0][0] not in self._token_lits:
                toks = None
                break
            toks.add(t.lits[0][0][0])
        out = None
        if toks is not None:
            out = self._symbols_of(toks, f.neg)
        self._token_sets[f] = out
        return out

    def _symbols_of(self, toks, complement: bool = False):
        """The symbols of the token nodes ``toks`` (or every other symbol) in alphabet order, or None
        when that is fewer than two symbols or all of them."""
        syms = {self.nodes[n].params["symbol"] for n in toks}
        if complement:
            syms = set(self.symbols) - syms
        if 2 <= len(syms) < len(self.symbols):
            return tuple(s for s in self.symbols if s in syms)
        return None

    def _set_lit(self, symbols: tuple) -> Form:
        """The form of the literal of :meth:`tokenset` over ``symbols``."""
        f = self._set_lits.get(symbols)
        if f is None:
            f = self._set_lits[symbols] = B.lit_form(self.tokenset(symbols))
        return f

    def _set_form(self, f: Form):
        """f as :meth:`_token_set`, or as ``C && [token in S]`` when f is the sum of ``C && t`` over
        two or more tokens t, C one conjunction of literals that reads no token; else None."""
        if len(f.terms) < 2 and not f.neg:
            return None
        hit = self._set_forms.get(f, False)
        if hit is not False:
            return hit
        out = self._token_set(f)
        if out is not None:
            out = self._set_lit(out)
        elif not f.neg:
            rest0, toks = None, []
            for t in f.terms:
                if not t.conj:
                    break
                tok, rest = None, []
                for l, _ in t.lits:
                    if (l[0], False) in self._token_lits:
                        if tok is not None or l[1]:
                            break
                        tok = l[0]
                    else:
                        rest.append(l)
                else:
                    if tok is not None and rest and (rest0 is None or rest == rest0):
                        rest0 = rest
                        toks.append(tok)
                        continue
                break
            else:
                s = self._symbols_of(toks)
                if s is not None:
                    out = self.f_and(B.Form((B.make_thr({l: 1 for l in rest0}, len(rest0)),)), self._set_lit(s))
        self._set_forms[f] = out
        return out

    def linear_atom(self, terms: dict, c: int) -> Form:
        F: dict = {}  # node -> coefficient in the head value
        I: dict = {}  # literal -> coefficient (bools at the query position)
        for e, k in terms.values():
            lit = self.count_lit(e.body)
            if e.guard is None:
                for n, v in B.lit_lin(lit, k).items():
                    F[n] = F.get(n, 0) + v
            else:
                d = local_offset(e.guard)
                if d > 0:
                    lit = self.local(d, lit)
                I[lit] = I.get(lit, 0) + k
        F = {n: v for n, v in F.items() if v != 0}
        texts: list = []

        def ftext() -> str:  # F as text, for labels: made once, and only if a new node needs it
            if not texts:
                texts.append(_lin_text(F, self.nodes))
            return texts[0]

        if not I:  # no local part: just s_0 (what make_thr makes of [s_0 >= 1])
            if not F:
                return B.TRUE if c >= 0 else B.FALSE
            return B.lit_form(self.sign_lit(F, c, self.hint, ftext))
        # the local part as coefficients over nodes plus a constant (at real positions)
        coef: dict = {}
        for (n, neg), k in I.items():
            if n == REAL:
                c += 0 if neg else k
            elif neg:
                c += k
                coef[n] = coef.get(n, 0) - k
            else:
                coef[n] = coef.get(n, 0) + k
        coef = {n: k for n, k in coef.items() if k != 0}
        if not F:
            return self.threshold(B.make_thr({(n, False): k for n, k in coef.items()}, -c))
        lo = sum(k for k in coef.values() if k < 0)
        hi = sum(k for k in coef.values() if k > 0)
        if hi - lo + 1 > LOCAL_RANGE_CAP:
            raise RaspError(f"a comparison mixes counts with local counts whose sum ranges over {hi - lo + 1} "
                            f"values (more than {LOCAL_RANGE_CAP}): too large to compile", self.span,
                            "split it into several definitions")
        weights: dict = {(n, False): k for n, k in coef.items()}
        hint = self.hint if not coef else None
        for m in range(lo, hi + 1):
            lit = self.sign_lit(F, c + m, hint, ftext)
            weights[lit] = weights.get(lit, 0) + 1
        if not coef:
            return B.lit_form(lit)
        return B.thr_form(B.make_thr(weights, hi + 1))

    @staticmethod
    def threshold(t) -> Form:
        """A threshold of local bools as a form. Its gate's preactivation ``sum w l - theta`` is an
        integer up to the weights' sum W, exact in a dtype only up to 2^p: ``199 #[j == i] "a" +
        198 #[j == i - 1] "a" + 198 #[j == i - 2] "a" >= 200`` rounds z = 395 to 396 in bfloat16 and
        its gate ``relu(z + 1) - relu(z)`` says 0. Over at most ``TABLE_LITERALS`` literals a
        heavier one is its truth table (unit weights); a larger one stays as it is, and
        :func:`compiler.weights.exact_dtypes` leaves out the dtypes its preactivations exceed."""
        if isinstance(t, B.Thr) and t.W > B.WEIGHT_CAP and len(t.lits) <= B.TABLE_LITERALS:
            return B.truth_table(t.eval, [n for (n, _), _ in t.lits])
        return B.thr_form(t)

    def sign_lit(self, F: dict, off: int, hint, ftext, label=None) -> B.Lit:
        """``s = [F + off >= 0]`` (F a nonzero linear form over count bodies' nodes) as a literal:
        constant when every coefficient has the sign of ``off``, else the sign node of a uniform head
        (see the module docstring). ``hint``, the source comparison, labels the sign when given;
        ``ftext()`` is F as text; ``label()``, when given, labels the sign instead."""
        if off >= 0 and all(v > 0 for v in F.values()):
            return B.TRUE_LIT
        if off < 0 and all(v < 0 for v in F.values()):
            return B.FALSE_LIT
        if F[min(F)] < 0:
            # [F + off >= 0] = not [-F - off - 1 >= 0] (integers): a comparison and its negation
            # (``exists P`` and ``#P == 0``, whose atom is [-#P >= 0]) read one head, whose linear
            # form starts with a positive coefficient
            G = {n: -v for n, v in F.items()}
            node, neg = self.sign_lit(G, -off - 1, None, lambda: _lin_text(G, self.nodes),
                                      None if hint is None else lambda: f"!({expr_to_str(hint)})")
            return (node, not neg)
        if abs(off) + sum(map(abs, F.values())) >= HEAD_VALUE_CAP:  # (a cheap bound first: rarely true)
            self.check_value_bound(off, F)
        # canonical linear forms (as make_lin makes them) built directly: BOS is node 0 and F has
        # integer coefficients over nodes above it
        vlin = ((BOS, off + 0.5), *sorted(F.items()))
        head = self._node("uniform", ("uniform", vlin),
                          lambda: f"({ftext()}{_const_text(off + 0.5)})/(i+1)",
                          {"value": vlin}, [n for n, _ in vlin])
        y = ((BOS, -(abs(off) + 1)), (head.id, 1))
        sign = self._node("sign", ("sign", y),
                          label or (lambda: expr_to_str(hint) if hint is not None else f"{ftext()}{_const_text(off)} >= 0"),
                          {"input": y}, [head.id, BOS])
        if sign.id not in self._form_of_sign:  # (a new node: hash-consing may return an old one)
            self._sign_lits.add((sign.id, False))
            self._sign_lits.add((sign.id, True))
            self._form_of_sign[sign.id] = vlin[1:]
            self._signs_of_form.setdefault(vlin[1:], []).append(sign.id)
        return (sign.id, False)

    def check_value_bound(self, off: int, F: dict) -> None:
        """A head's value ``sum_k a_k P_k + (off + 1/2) bos`` must be a float64 half-integer at every
        position (inputs are 0/1, so it lies between the sum of its negative and the sum of its
        positive coefficients): beyond 2^52 even float64 rounds it, and no dtype runs the model
        exactly. Such a comparison is refused where it is written."""
        twice = [2 * off + 1, *(2 * v for v in F.values())]  # doubled: exact integers, no float rounding
        reach2 = max(sum(c for c in twice if c > 0), -sum(c for c in twice if c < 0))
        if reach2 > 2 * HEAD_VALUE_CAP:
            raise RaspError(f"this comparison's constants and coefficients add up to {reach2 // 2:,}{'.5' if reach2 % 2 else ''}: a compiled head "
                            "holds them exactly only up to 2^52 (float64's precision), so no dtype would run the "
                            "model exactly", self.span, "use smaller constants (the interpreter runs it as written)")


#: op -> (k, extra) for the count on the left; ``==`` and ``!=`` as _compare pushes them (right - left)
_COUNT_SIDE = {">=": (1, 0), ">": (1, -1), "<=": (-1, 0), "<": (-1, -1), "==": (-1, 0), "!=": (-1, 0)}


def _count_vs_constant(e: A.Compare):
    """``(count, k, c)`` with ``e`` equivalent to ``k * count + c >= 0`` (to ``== 0`` for ``==``, its
    negation for ``!=``), when ``e`` compares one count with a constant (either way round); else None.
    ``#P > v`` is ``#P - v - 1 >= 0``, ``v > #P`` is ``-#P + v - 1 >= 0``, ``#P == v`` is
    ``v - #P == 0``: the term and constant :meth:`_Builder._compare` makes of it."""
    op = _COUNT_SIDE.get(e.op)
    if op is None:
        return None
    left, right = e.left, e.right
    if type(left) is A.Count and type(right) is A.IntConst:
        k, extra = op
        return left, k, -k * right.value + extra
    if type(right) is A.Count and type(left) is A.IntConst:
        k, extra = op
        return right, -k, k * left.value + extra
    return None


def or_operands(e) -> list:
    """The operands of nested ``||`` (``a1 || a2 || ... || an`` however it is bracketed: ``any(x, ...)``
    expands into a balanced tree), in order."""
    ops = []
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, A.Or):
            stack.append(n.right)
            stack.append(n.left)
        else:
            ops.append(n)
    return ops


def _neg(terms: dict) -> dict:
    return {key: (e, -k) for key, (e, k) in terms.items()}


def _lift(s, L: int) -> frozenset:
    """A set of residues mod M (or of (token, residue) pairs) as the same set mod L (M | L)."""
    M, R = s
    if M == L:
        return R
    if R and isinstance(next(iter(R)), tuple):
        return frozenset((k, r) for k, r0 in R for r in range(r0, L, M))
    return frozenset(r for r in range(L) if r % M in R)


def _lift_mask(mask: int, M: int, L: int) -> int:
    """Residue bits mod M as the same set mod L (M | L): the pattern repeated L / M times."""
    out, width = mask, M
    while width < L:  # doubling; the last step may overshoot, cut below
        out |= out << width
        width *= 2
    return out & ((1 << L) - 1)


def _const_text(v) -> str:
    if v == 0:
        return ""
    a = abs(v)
    if a == int(a):
        s = str(int(a))
    elif 2 * a == int(2 * a):  # the half-integers of head values, without building Fractions
        s = f"{int(2 * a)}/2"
    else:
        s = f"{Fraction(a).numerator}/{Fraction(a).denominator}"
    return f" + {s}" if v > 0 else f" - {s}"


def _lin_text(F: dict, nodes: list[Node]) -> str:
    parts = []
    for n, v in sorted(F.items(), key=lambda kv: (kv[1] < 0, kv[0])):
        label = nodes[n].label
        name = "#true" if n == REAL else f"#{label}" if " " not in label else f"#({label})"
        k = abs(v)
        term = name if k == 1 else f"{k}*{name}"
        if not parts:
            parts.append(term if v > 0 else f"-{term}")
        else:
            parts.append(f" + {term}" if v > 0 else f" - {term}")
    return "".join(parts)


def realized_by(how: str) -> tuple[str, int] | None:
    """For a definition realized by a node (``bool: node 7``, ``bool: real - node 7``, as
    :func:`build_graph` writes it): (the text before ``node``, the node id); None for the others."""
    for prefix in ("bool: ", "bool: real - "):
        if how.startswith(prefix + "node "):
            return prefix, int(how[len(prefix) + len("node "):])
    return None


def build_graph(core: A.CoreProgram, normal: bool = False) -> Graph:
    """The operation graph of a core program in normal form (see the module docstring). ``normal``:
    the caller knows every expression is already in the class and in normal form (then only the
    definitions' types are checked; see :func:`check_class`)."""
    check_class(core, walk=not normal)
    b = _Builder(core)
    outputs = []
    for name in core.output.names:
        b.origin = name
        lit = b.materialize(b.form_of(name))
        outputs.append((name, lit))
    nodes, new_id = _live_nodes(b.nodes, [lit[0] for _, lit in outputs])
    outputs = [(name, (new_id[n], neg)) for name, (n, neg) in outputs]
    definitions = {}
    for d in core.defs:
        if d.type == A.COUNT:
            definitions[d.name] = "count: read through the comparison heads that use it"
        elif d.name not in b.def_forms:
            definitions[d.name] = "bool: not needed by the output"
        else:
            f = b.def_forms[d.name]
            lit = B.as_lit(f) or b.materialized.get(f)
            if lit is None:
                definitions[d.name] = "bool: fused into the gates that use it"
            elif lit[0] == REAL:
                definitions[d.name] = f"bool: constant {'false' if lit[1] else 'true'}"
            elif lit[0] not in new_id:
                definitions[d.name] = "bool: not needed by the output"
            else:
                definitions[d.name] = f"bool: {'real - ' if lit[1] else ''}node {new_id[lit[0]]}"
    return Graph(nodes, outputs, core.output.kind, core.symbols, core.alphabet, core.special, definitions)


def _live_nodes(nodes: list[Node], roots: list[int]) -> tuple[list[Node], dict[int, int]]:
    """The nodes the outputs read (through their inputs; the flags BOS and REAL always), renumbered in
    order, and the map from old ids to new. The builder makes a node when a form needs it, and a
    later step may find the form does not matter after all: a chain's test that turns out excluded
    (``f_cond``), or an output that folds to a constant (a lowered aggregate compared with a value it
    cannot take). Such nodes would be dimensions, heads and layers that nothing reads. A live node
    reads only live nodes, so every slot, and so the plan, is as it was for the nodes kept."""
    live = bytearray(len(nodes))
    live[B.BOS] = live[B.REAL] = 1
    stack = list(roots)
    while stack:
        n = stack.pop()
        if not live[n]:
            live[n] = 1
            stack.extend(nodes[n].inputs)
    if all(live):  # (every bundled program: nothing to renumber)
        return nodes, {n.id: n.id for n in nodes}
    new_id = {}
    for n in nodes:
        if live[n.id]:
            new_id[n.id] = len(new_id)

    def lin(value):  # a linear form ((node, coefficient), ...) over the new ids (order kept)
        return tuple((new_id[x], c) for x, c in value)

    out = []
    for n in nodes:
        if not live[n.id]:
            continue
        params = n.params
        if n.kind == "gate":
            params = {**params, "neurons": tuple((lin(pre), c) for pre, c in params["neurons"])}
        elif n.kind == "uniform" or n.kind == "local":
            params = {**params, "value": lin(params["value"])}
        elif n.kind == "sign":
            params = {**params, "input": lin(params["input"])}
        elif n.kind not in _EMBEDDED:
            raise AssertionError(f"a node kind _live_nodes does not renumber: {n.kind}")
        out.append(dataclasses.replace(n, id=new_id[n.id], params=params,
                                       inputs=tuple(new_id[x] for x in n.inputs)))
    return out, new_id
