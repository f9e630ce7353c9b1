"""Pass 1, for programs that treat their symbols alike: the operation graph over a large alphabet
lifted from the builder's graph over a few symbols.

**When it applies.** Let G be the program's data alphabet. The written program is *symmetric*
(:func:`symmetric`) when it never names a data symbol (no ``"a"``, no ``F["a"]``), never orders
symbols (no ``x < y``; ``x == y`` is fine), never sums over the alphabet (``sum(x, 1)`` is its
size) and uses no RASP-L primitive. Families, ``any``/``all`` and ``Q[x]`` then
range over G without telling its symbols apart: for every permutation sigma of G (specials fixed)
the program's values satisfy ``P(sigma w) = sigma P(w)``. (What a definition computes about the
symbols it does not name may still depend on how many there are, ``all(x, exists Q[x])``: the
construction below refuses the forms where that shows.) UF, UB, copy-unique (|G|^2
definitions), UR, UL, NLFIRST, NRFIRST are such programs; sort (``z < y``) and majority (below) are
compiled by the builder.

**The construction.** A graph node (:mod:`.graph`) is determined by its kind and parameters (input
nodes, coefficients, token symbols), so a permutation of the symbols acts on nodes: rename the
tokens, map the inputs, sort what has no order (:func:`_canon`). The builder's graph over k
placeholder symbols (:func:`small_size`: 2r + 1 for r symbol variables in scope at once) must be
closed under every transposition (:func:`analyze`; majority's is not: the builder writes ``#a - #b``
and ``#b - #a`` as one head and its negation, by node order). Then each node has a **support** S, the
symbols it depends on (it is fixed by every permutation of the others; :func:`_support` finds them
when the others outnumber S's own groups), and is ``(r, t)``: the image of a representative r whose
support maps to the tuple t. The lifted graph over n symbols has a node ``(r, u)`` for every
representative and every tuple u of distinct symbols, with r's parameters renamed by ``S -> u``
(:func:`lift`): kind, slot, coefficients and label (placeholders replaced) are r's.

**Why it is exact at every n.** A renamed node computes the renamed function, so a node whose
parameters name only symbols of its support is right over any alphabet by the symmetry above. Two
things in a node could depend on n, and only one is lifted:

* a linear form summing over an orbit (one neuron reading ``exists Q[x]`` for every x: its bias
  counts the terms) is refused (:func:`_term_templates`);
* a gate's neurons may come as an orbit of one more symbol x, the same neurons for every x outside
  S (a token split: ``NEXT[y]`` of UF has one neuron per x). They are lifted when each is *gated by
  its token* (:func:`_gated`): it reads ``Q[x]`` with a positive weight and cannot be on without it.
  At a position holding token t only t's neurons and those of no extra symbol are on, and they are
  renamed copies of the small graph's; so the gate computes what the small gate computes at the
  renamed position, whatever n is.

A token set is lifted when it holds all or none of the symbols outside its support (it is invariant
under their permutations, so over n symbols it holds all or none as well).

**Checked against the builder.** Each time, the graph lifted to k + 1 symbols must equal the
builder's graph over k + 1 symbols (:func:`same_graph`: nodes as keys with inputs replaced by their
classes, neurons and terms as multisets, slots, outputs and definitions). At larger n the lifted
model is the builder's model up to the order of its residual dimensions, heads and neurons (and
labels that may order the operands of ``&&`` differently) while no builder cap that grows with the
alphabet is passed: ``boolean.PRODUCT_CAP`` (the and of an or of 2n terms, past n = 32) and
``graph.PAIR_CAP`` make the builder choose another form there, and the lifted model, keeping the
small graph's form, is another exact model of the same function, possibly of another size (review
93: 990 nonzero weights against 642 for a program of 40 symbols; every program in ``programs/``
that lifts gives the builder's sizes). ``tests/test_symmetry.py`` compares the graphs at more
sizes. Anything refused or unequal leaves the program to the builder (:func:`lift_program` returns
None), as does an alphabet with a symbol that instance names quote (``P["a,b"]``).
"""
from __future__ import annotations

import dataclasses
import itertools
from collections import Counter

import numpy as np

from rasp import ast as A
from rasp.errors import RaspError
from rasp.program import Program
from rasp.rewrite import only_local_counts, rewrite_core

from .graph import Graph, Node, build_graph, realized_by

#: placeholder symbols of the small graph: private-use code points, which no label contains otherwise,
#: so replacing them in labels and definition names is exact
PLACEHOLDER = 0xF0000


#: the fewest definitions (after expansion) for which lifting is tried: it costs about 10 ms
#: whatever the alphabet (two small graphs, their orbits, the check) plus the lift, about even with
#: the builder near 300 definitions and faster beyond (graph pass alone, collector paused, best of
#: 15, 2026-12-02: ``uf.rasp`` over 16 symbols, 306 definitions, 25 ms lifted and 20 built in one
#: run, 24 and 29 in another; over 22 symbols, 552 definitions, 25 and 42 ms; ``ur.rasp`` over 26,
#: 729 definitions, 31 and 47 ms)
LIFT_DEFINITIONS = 500


def placeholders(k: int) -> tuple[str, ...]:
    return tuple(chr(PLACEHOLDER + j) for j in range(k))


# ----------------------------------------------------------------------------- the program test
def symmetric(program: Program) -> str | None:
    """None when the written program treats its data symbols alike (see the module docstring), else
    the first reason it does not."""
    if program.checked.raspl:
        return "it uses RASP-L primitives"
    data = set(program.alphabet)
    for s in program.module.statements:
        if not isinstance(s, A.Definition):  # (an import names a positional predicate or relation)
            continue
        variables = {p.name for p in s.params}  # (parameters are variables: the type checker says so)
        stack = [s.expr]
        while stack:  # (guards are relations over positions: no symbols in them)
            e = stack.pop()
            written = (e.symbol,) if isinstance(e, A.Tok) else e.indices if isinstance(e, A.Ref) else ()
            for sym in written:  # (symbols are written only in tokens and family references)
                if isinstance(sym, A.SymLit) and sym.value in data:
                    return f"{s.name} names the data symbol {sym.value!r}"
            if isinstance(e, A.Quant):
                if e.op == "sum":  # sum(x, 1) is the alphabet's size: the value would depend on it
                    return f"{s.name} sums over the alphabet"
                variables.add(e.var)
            if isinstance(e, A.Compare) and e.op not in ("==", "!=") and any(
                    (isinstance(x, A.Ref) and not x.indices and x.name in variables) or isinstance(x, A.Tok)
                    for x in (e.left, e.right)):
                return f"{s.name} compares symbols by their order"
            stack.extend(A.children(e))
    return None


def small_size(program: Program) -> int:
    """The placeholders to build the small graph over: 2r + 1 for r symbols in scope at once (a
    family's parameters and the quantifiers around an expression), so that a support of r symbols
    leaves a larger set outside it (see :func:`_support`; a node or neuron with a larger support
    makes :func:`analyze` fail, and the builder builds the graph)."""
    r = 0
    for name in program.checked.order:
        sig = program.checked.signatures[name]
        r = max(r, sig.arity + A.quantifier_depth(sig.definition.expr))
    return 2 * r + 1


# ----------------------------------------------------------------------------- the action on nodes
def _lin(lin, idmap) -> tuple:
    return tuple(sorted((idmap[i], c) for i, c in lin))


def _canon(n: Node, idmap, smap: dict, order: dict) -> tuple:
    """The key of node n with its inputs renamed by ``idmap`` and its symbols by ``smap``."""
    k, p = n.kind, n.params
    if k == "token":
        return (k, smap.get(p["symbol"], p["symbol"]))
    if k == "tokenset":
        return (k, tuple(sorted((smap.get(s, s) for s in p["symbols"]), key=order.__getitem__)))
    if k == "periodic":
        return (k, p["period"], tuple(sorted(p["residues"])))
    if k == "local":
        return (k, p["offset"], _lin(p["value"], idmap))
    if k == "uniform":
        return (k, _lin(p["value"], idmap))
    if k == "sign":
        return (k, _lin(p["input"], idmap))
    if k == "gate":
        return (k, tuple(sorted((_lin(pre, idmap), c) for pre, c in p["neurons"])))
    return (k,)  # bos, real


def keys(g: Graph) -> dict:
    """Every node's key (:func:`_canon`, nothing renamed) -> its id."""
    order = {s: j for j, s in enumerate(g.symbols)}
    ident = range(len(g.nodes))
    return {_canon(n, ident, {}, order): n.id for n in g.nodes}


def images(g: Graph, smap: dict, table: dict) -> list[int] | None:
    """The image of every node under the symbol permutation ``smap`` (None when some image is not a
    node of g: g is not closed under it); ``table`` is :func:`keys` of g."""
    order = {s: j for j, s in enumerate(g.symbols)}
    out: list[int] = []
    for n in g.nodes:  # topological order: inputs first
        hit = table.get(_canon(n, out, smap, order))
        if hit is None:
            return None
        out.append(hit)
    return out


def _components(k: int, fixed_pairs) -> list[set]:
    parent = list(range(k))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for a, b in fixed_pairs:
        parent[find(a)] = find(b)
    comps: dict[int, set] = {}
    for a in range(k):
        comps.setdefault(find(a), set()).add(a)
    return list(comps.values())


def _support(universe: list[int], fixed_pairs) -> set | None:
    """The support of something fixed exactly by the transpositions ``fixed_pairs`` of ``universe``:
    the symbols outside the largest set all of whose transpositions fix it. That set is a component
    of the graph of fixing transpositions; it is told apart from the support's own components only
    when it is larger than each of them (None otherwise: too few placeholders)."""
    pos = {a: j for j, a in enumerate(universe)}
    comps = _components(len(universe), [(pos[a], pos[b]) for a, b in fixed_pairs])
    comps.sort(key=len, reverse=True)
    if len(comps[0]) < 2 or (len(comps) > 1 and len(comps[1]) >= len(comps[0])):
        return None
    free = {universe[j] for j in comps[0]}
    return {a for a in universe if a not in free}


@dataclasses.dataclass
class Orbits:
    """The small graph's nodes as images of representatives: ``rep[i]`` the representative of node i,
    ``tup[i]`` its support as an ordered tuple of placeholder indices (the representative's support
    in increasing order, carried by the permutation that maps it to i)."""

    graph: Graph
    k: int
    rep: list[int]
    tup: list[tuple]


def analyze(g: Graph, k: int) -> Orbits | None:
    """The orbits of the small graph g over the placeholders 0..k-1 (see the module docstring), or
    None when g is not closed under their transpositions or a support cannot be told apart."""
    ph = placeholders(k)
    pairs = list(itertools.combinations(range(k), 2))
    img = {}
    table = keys(g)
    for a, b in pairs:
        im = images(g, {ph[a]: ph[b], ph[b]: ph[a]}, table)
        if im is None:
            return None
        img[(a, b)] = im
    n = len(g.nodes)
    rep = [-1] * n
    tup: list[tuple] = [()] * n
    for node in g.nodes:
        if rep[node.id] >= 0:
            continue
        fixed = [(a, b) for a, b in pairs if img[(a, b)][node.id] == node.id]
        S = _support(list(range(k)), fixed)
        if S is None:
            return None
        r = node.id
        rep[r], tup[r] = r, tuple(sorted(S))
        queue = [r]
        while queue:  # the orbit: images under transpositions, with their support tuples
            m = queue.pop()
            for (a, b), im in img.items():
                m2 = im[m]
                t2 = tuple(b if x == a else a if x == b else x for x in tup[m])
                if rep[m2] < 0:
                    rep[m2], tup[m2] = r, t2
                    queue.append(m2)
                elif tup[m2] != t2:
                    return None  # a permutation of the support fixes it (P[x, y] = P[y, x]): not lifted
    return Orbits(g, k, rep, tup)


# ----------------------------------------------------------------------------- templates
#: kinds whose dimension is a bool (0 or 1 at real positions): what a gate's neurons may read
_BOOLS = frozenset(("token", "tokenset", "periodic", "local", "sign", "gate"))


def _term_templates(o: Orbits, lin, fixed: tuple) -> list | None:
    """A linear form of the small graph as (rep, pattern, coefficient) per term, the pattern giving
    for each symbol of the term's support its position in ``fixed``; None when a term names a
    symbol outside ``fixed``: a sum over an orbit (``all(x, exists Q[x])`` is one neuron reading
    every x), whose construction may depend on the orbit's size, is not lifted."""
    pos = {a: j for j, a in enumerate(fixed)}
    out = []
    for i, c in lin:
        t = o.tup[i]
        if not all(a in pos for a in t):
            return None
        out.append((o.rep[i], tuple(pos[a] for a in t), c))
    return out


def _gated(o: Orbits, terms: list, e: int) -> bool:
    """Whether a neuron of one symbol beyond the support (pattern position ``e``) is off wherever the
    token is not that symbol: it reads the token with a positive weight, every other term is a bool,
    and its preactivation at a real position (``real`` = 1, ``bos`` = 0) is at most 0 with that token
    0 and every other bool at its worst. Then at a position holding token t only the neurons of t
    (and those of no symbol) are on, and they are renamed copies of the small graph's: that is why
    a gate's orbit of such neurons lifts to any number of symbols (a token split: ``NEXT[y]`` of
    UF has one neuron per x)."""
    g = o.graph
    gate_token = False
    worst = 0
    for r, pat, c in terms:
        kind = g.nodes[r].kind
        if kind == "bos":
            continue
        if kind == "real":
            worst += c
        elif kind == "token" and pat == (e,):
            if c <= 0:
                return False
            gate_token = True
        elif kind in _BOOLS:
            worst += max(c, 0)
        else:
            return False
    return gate_token and worst <= 0


def _neuron_templates(o: Orbits, node: Node, S: tuple) -> list | None:
    """A gate's neurons as (e, terms, coefficient): e None for a neuron reading only S's symbols
    (pattern positions into S), 1 for an orbit of neurons of one more symbol x (pattern position
    len(S) for x), the same neurons for every x outside S, each gated by its token (:func:`_gated`).
    None for anything else (a neuron of two more symbols, one summing over an orbit)."""
    F = [a for a in range(o.k) if a not in S]
    fixed: list = []
    per_symbol: dict[int, Counter] = {a: Counter() for a in F}  # a -> (terms, coefficient) -> copies
    for pre, c in node.params["neurons"]:
        extra = {a for i, _ in pre for a in o.tup[i] if a not in S}
        if len(extra) > 1:
            return None
        terms = _term_templates(o, pre, S + tuple(extra))
        if terms is None:
            return None
        if not extra:
            fixed.append((None, terms, c))
            continue
        (a,) = extra
        if not _gated(o, terms, len(S)):
            return None
        per_symbol[a][(tuple(sorted(terms)), c)] += 1
    # every symbol outside S has the same neurons: the gate is fixed by the transpositions of those
    # symbols (S is its support), and (a b) maps a's neurons to b's
    return fixed + [(1, list(terms), c) for (terms, c), m in per_symbol[F[0]].items() for _ in range(m)]


# ----------------------------------------------------------------------------- lifting
def permutations(n: int, m: int) -> np.ndarray:
    """Every tuple of m distinct symbols of ``range(n)`` as the rows of an array, in the order of
    ``itertools.permutations(range(n), m)`` (lexicographic): each row of the tuples of length j
    extended by every symbol it lacks, in increasing order."""
    rows = np.zeros((1, 0), dtype=np.int64)
    for _ in range(m):
        rest = complements(rows, n)
        rows = np.concatenate([np.repeat(rows, rest.shape[1], axis=0), rest.reshape(-1, 1)], axis=1)
    return rows


def complements(rows: np.ndarray, n: int) -> np.ndarray:
    """Per row of distinct symbols, the symbols of ``range(n)`` it lacks, in increasing order."""
    keep = np.ones((rows.shape[0], n), dtype=bool)
    keep[np.arange(rows.shape[0])[:, None], rows] = False
    return np.nonzero(keep)[1].reshape(rows.shape[0], n - rows.shape[1])


def rank(rows: np.ndarray, n: int) -> np.ndarray:
    """The position of each row among :func:`permutations` (n, rows.shape[1]): with d_j the number of
    symbols below row[j] that the row does not use before j, rank = sum_j d_j (n-j-1)(n-j-2)...
    (n-m+1), the number of tuples that agree up to j and have a smaller symbol there, summed (Horner)."""
    out = np.zeros(rows.shape[:-1], dtype=np.int64)  # (any leading axes: one rank per row)
    for j in range(rows.shape[-1]):
        below = (rows[..., :j] < rows[..., j:j + 1]).sum(axis=-1)
        out = out * (n - j) + rows[..., j] - below
    return out


def lift(o: Orbits, program: Program) -> Graph | None:
    """The graph of ``program`` (the written program of the small graph ``o.graph``, over its own
    alphabet) lifted from the small graph, or None where a node is not of a liftable form.

    The instances of a representative with a support of m symbols are its nodes for the tuples of m
    distinct symbols, made in :func:`permutations` order, so the instance for tuple t has the id
    ``first[r] + rank(t)``: a term's ids for all the instances at once are arrays."""
    g = o.graph
    k = o.k
    ph = placeholders(k)
    target = tuple(program.core.alphabet)
    if any(_quoted(s) for s in target):
        return None  # instance names quote such a symbol (P["a,b"]); labels and names here would not
    n_sym = len(target)
    order = {s: j for j, s in enumerate(program.core.symbols)}
    first: dict[int, int] = {}  # rep -> the id of its first instance
    nodes: list[Node] = []
    tuples: dict[int, np.ndarray] = {}  # m -> permutations(n_sym, m)
    names = np.array(target, dtype=object)

    def tuples_of(m: int) -> np.ndarray:
        if m not in tuples:
            tuples[m] = permutations(n_sym, m)
        return tuples[m]

    def forms(terms, rows):
        """A linear form's terms per tuple of ``rows`` (any leading axes), in id order as the builder
        writes them (the ids of one form are distinct, so sorting by id alone is the builder's
        order), and those ids as an array with one row per form."""
        ids = np.zeros(rows.shape[:-1] + (len(terms),), dtype=np.int64)
        for j, (r2, pat, _) in enumerate(terms):
            ids[..., j] = first[r2] + rank(rows[..., list(pat)], n_sym)
        by_id = np.argsort(ids, axis=-1)
        shape = (int(np.prod(rows.shape[:-1])), len(terms))  # (one row per form; -1 fails for no terms)
        ids = np.take_along_axis(ids, by_id, axis=-1).reshape(shape)
        coefs = np.array([c for _, _, c in terms], dtype=object)[by_id].reshape(shape)
        return [tuple(zip(a, b)) for a, b in zip(ids.tolist(), coefs.tolist())], ids

    for r in range(len(g.nodes)):
        if o.rep[r] != r:
            continue
        node = g.nodes[r]
        S = o.tup[r]
        kind = node.kind
        rows = tuples_of(len(S))
        params: list | None = None  # per instance, where they change with it
        inputs: list | None = None
        if kind in ("local", "uniform", "sign"):
            key = "input" if kind == "sign" else "value"
            terms = _term_templates(o, node.params[key], S)
            if terms is None:
                return None
            lins, ids = forms(terms, rows)
            params = [{**node.params, key: lin} for lin in lins]
            inputs = list(map(tuple, ids.tolist()))
        elif kind == "gate":
            neurons = _neuron_templates(o, node, S)
            if neurons is None:
                return None
            wide = None  # rows (t, x) for every symbol x outside t, for neurons per extra symbol
            if any(e for e, _, _ in neurons):
                outside = complements(rows, n_sym)
                wide = np.concatenate([np.repeat(rows[:, None, :], outside.shape[1], axis=1), outside[:, :, None]],
                                      axis=2)
            per = []  # per neuron template, per instance: its neurons
            reads = []  # per neuron template, per instance: the ids its neurons read
            for e, terms_, c in neurons:
                lins, ids = forms(terms_, wide if e else rows)
                w = len(lins) // len(rows)  # neurons per instance: n - m for an extra symbol, else 1
                per.append([tuple([(lin, c) for lin in lins[j * w:(j + 1) * w]]) for j in range(len(rows))])
                reads.append(ids.reshape(len(rows), -1))
            pres = [tuple(itertools.chain.from_iterable(ns)) for ns in zip(*per)] if per else [()] * len(rows)
            params = [{"neurons": p} for p in pres]
            read = np.sort(np.concatenate(reads, axis=1), axis=1) if reads else np.zeros((len(rows), 0), np.int64)
            if (read[:, 1:] != read[:, :-1]).all():  # (no id read twice in any instance: the rows as they are)
                inputs = list(map(tuple, read.tolist()))
            else:
                inputs = [tuple(sorted(set(row))) for row in read.tolist()]
        elif kind == "token" and node.params["symbol"] in ph:
            params = [{"symbol": s} for s in names[rows[:, 0]].tolist()]
        elif kind == "tokenset":
            # the set holds all or none of the symbols outside its support (it is fixed by their
            # permutations): all of them over any alphabet, or none
            syms = node.params["symbols"]
            fixed = [x for x in syms if x not in ph]
            mine = [j for j, a in enumerate(S) if ph[a] in syms]
            every = any(ph[a] in syms for a in range(k) if a not in S)
            rest = names[complements(rows, n_sym)].tolist() if every else [[]] * len(rows)
            params = [{"symbols": tuple(sorted(fixed + [target[u[j]] for j in mine] + others, key=order.__getitem__))}
                      for u, others in zip(rows.tolist(), rest)]
        # the label as a format string: S's placeholders become {0}, {1}, ...; a label may name one
        # term of an orbit (a symbol outside the support): that one becomes *
        label = _template(node.label, {a: ("{%d}" % S.index(a)) if a in S else "*" for a in range(k)})
        first[r] = base = len(nodes)
        for j, u in enumerate(names[rows].tolist()):
            nodes.append(Node(base + j, kind, label.format(*u), node.slot, node.params if params is None else params[j],
                              () if inputs is None else inputs[j], None))

    def id_of(i: int, t: tuple) -> int:  # the lifted node for small node i's representative at tuple t
        return first[o.rep[i]] + int(rank(np.array(t, dtype=np.int64), n_sym))

    outputs = []
    if g.output_kind == "accept":
        for name, (i, neg) in g.outputs:
            if o.tup[i]:
                return None
            outputs.append((name, (id_of(i, ()), neg)))
    else:
        name0, (i, neg) = g.outputs[0]  # the output of the first placeholder
        if set(o.tup[i]) - {0}:
            return None
        for x, s in enumerate(target):
            outputs.append((name0.translate({PLACEHOLDER: s}), (id_of(i, (x,) * len(o.tup[i])), neg)))
    definitions = {}
    for name, text in g.definitions.items():
        syms = [ord(ch) - PLACEHOLDER for ch in name if PLACEHOLDER <= ord(ch) < PLACEHOLDER + k]
        used = list(dict.fromkeys(syms))
        if used != list(range(len(used))):
            continue  # not a representative instance: F[P0, P1] and F[P0, P0] stand for all
        rows = tuples_of(len(used))
        texts = itertools.repeat(text)
        by = realized_by(text)
        if by is not None:
            prefix, node_id = by
            if not set(o.tup[node_id]) <= set(used):
                return None
            ids = first[o.rep[node_id]] + rank(rows[:, list(o.tup[node_id])], n_sym)
            texts = (f"{prefix}node {j}" for j in ids.tolist())
        pattern = _template(name, {a: "{%d}" % a for a in range(len(used))})
        for u, t in zip(names[rows].tolist(), texts):
            definitions[pattern.format(*u)] = t
    return Graph(nodes, outputs, program.core.output.kind, program.core.symbols, program.core.alphabet,
                 program.core.special, definitions, lifted_from=k)


def _template(text: str, fields: dict[int, str]) -> str:
    """``text`` as a ``str.format`` template: its braces escaped, placeholder a replaced by
    ``fields[a]`` (``{0}``, ``{1}``, ... or any text)."""
    return text.replace("{", "{{").replace("}", "}}").translate({PLACEHOLDER + a: f for a, f in fields.items()})


def _quoted(symbol: str) -> bool:
    """Whether :func:`rasp.expand.instance_key` writes the symbol as a JSON string."""
    return "," in symbol or symbol.startswith('"')


# ----------------------------------------------------------------------------- checking and driving
def same_graph(g1: Graph, g2: Graph) -> bool:
    """Whether two graphs have the same nodes up to their order: keys with inputs replaced by their
    classes (a class per key, shared by both graphs), compared as multisets, with the outputs and the
    definitions' realizations."""
    classes: dict = {}

    def summary(g: Graph):
        order = {s: j for j, s in enumerate(g.symbols)}
        cls: list[int] = []
        for n in g.nodes:
            cls.append(classes.setdefault(_canon(n, cls, {}, order), len(classes)))
        nodes = Counter((c, n.slot) for c, n in zip(cls, g.nodes))
        outputs = [(name, cls[i], neg) for name, (i, neg) in g.outputs]
        defs = {}
        for name, text in g.definitions.items():
            by = realized_by(text)
            defs[name] = text if by is None else (by[0], cls[by[1]])
        return nodes, outputs, defs, (g.output_kind, g.symbols, g.alphabet, g.special)

    return summary(g1) == summary(g2)


def graph_of(program: Program) -> Graph:
    """The builder's graph of a program (as :func:`compiler.compile` builds it)."""
    normal = only_local_counts(program.module)
    return build_graph(program.core if normal else rewrite_core(program.core), normal=normal)


def lift_program(program: Program) -> Graph | None:
    """The graph of a symmetric program lifted from its graph over a few placeholder symbols, checked
    against the builder's graph over one placeholder more; None when the program is not symmetric,
    its alphabet is not larger than that, or a check fails (the caller builds the graph as usual)."""
    if len(program.core.defs) < LIFT_DEFINITIONS or symmetric(program) is not None:
        return None
    k = small_size(program)
    if len(program.core.alphabet) <= k + 1:
        return None
    try:
        small = program.with_alphabet(placeholders(k))
        o = analyze(graph_of(small), k)
        if o is None:
            return None
        check = program.with_alphabet(placeholders(k + 1))
        lifted = lift(o, check)
        if lifted is None or not same_graph(lifted, graph_of(check)):
            return None
    except (RaspError, RecursionError):
        return None  # the builder says it where it is written
    return lift(o, program)
