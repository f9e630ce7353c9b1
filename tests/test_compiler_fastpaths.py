"""The graph pass's shortcuts build exactly the model the plain construction builds.

`compiler/graph.py` has shortcuts that keep compile time linear in the expanded program (see
docs/compiler.md, "Compile time"): one-step splitting of token-determined sums, or-chains folded as
running sums, comparisons and and/or pairs worked out once, the and of two single terms built
directly, a comparison of plain counts sent straight to its atom (and one of a single count with a
constant without flattening either side), a conditional chain walked in a loop (each walk made once
per chain and paths). Each is switched off here in turn (the plain construction: pairwise splits,
pairwise folds, no memos) and the model must be the same, weight for weight and label for label, on
the programs that use it and on random programs."""
from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compiler
import compiler.api
import rasp
from compiler import boolean as B
from compiler import graph as G
from rasp.strategies import programs


def _plain_or_chain(self, e):
    return functools.reduce(lambda f, g: B.f_or(self, f, g), [self.bool_expr(x) for x in G.or_operands(e)])


def _plain_and_quiet(ctx, f, g):
    """boolean._and_quiet without its shortcut for two single terms."""
    if f == B.FALSE or g == B.FALSE:
        return B.FALSE
    if f == B.TRUE:
        return g
    if g == B.TRUE:
        return f
    return B._try_and(ctx, B.norm(f), B.norm(g))


def _plain_cond_chain(self, e, decision, k, rest, c, eq):
    """One level of a conditional chain, the rest by ge0's recursion (what ge0 did before
    cond_chain)."""
    _, p_then, p_else = decision
    a = self.ge0(*self._with(rest, c, e.then, k), p_then, eq)
    b = self.ge0(*self._with(rest, c, e.other, k), p_else, eq)
    return self.cond_form(e, a, b)


#: shortcut -> (where it lives, its name there, the plain construction)
PLAIN = {
    "split_by_token": (G._Builder, "split_by_token", lambda self, terms, c, path, eq: None),
    "or_chain": (G._Builder, "or_chain", _plain_or_chain),
    "compare": (G._Builder, "compare", G._Builder._compare_located),
    "f_and": (G._Builder, "f_and", lambda self, f, g: B.f_and(self, f, g)),
    "f_or": (G._Builder, "f_or", lambda self, f, g: B.f_or(self, f, g)),
    "and_single_terms": (B, "_and_quiet", _plain_and_quiet),
    "only_counts": (G._Builder, "only_counts", staticmethod(lambda terms: False)),
    "only_local_counts": (compiler.api, "only_local_counts", lambda module: False),
    "cond_chain": (G._Builder, "cond_chain", _plain_cond_chain),
    "count_vs_constant": (G, "_count_vs_constant", lambda e: None),
}


def _fingerprint(model: compiler.CompiledModel):
    weights = {k: (idx.numpy().tolist(), vals.numpy().tolist()) for k, (_, idx, vals) in model.module.weights().items()}
    return model.config["architecture"], model.residual_labels, model.config["definitions"], weights


def _compile_plain(program, monkeypatch, shortcut: str):
    with monkeypatch.context() as m:
        m.setattr(*PLAIN[shortcut])
        return compiler.compile(program)


def _alphabet(path: str, n: int | None):
    """The program over n symbols; a RASP-L program as its lowered C-RASP program."""
    from rasp import raspl

    p = rasp.load(path)
    p = p.with_alphabet([str(k) for k in range(n)]) if n else p
    return raspl.lower(p) if raspl.uses_raspl(p) else p


CASES = [  # (program, alphabet size or None, the shortcuts it exercises)
    ("programs/sort.rasp", 7, ["split_by_token", "or_chain", "compare", "f_and", "f_or", "and_single_terms", "only_counts",
                                     "only_local_counts", "count_vs_constant"]),
    ("programs/uf.rasp", 6, ["or_chain", "compare", "f_and", "f_or", "and_single_terms", "only_counts", "only_local_counts",
                             "count_vs_constant"]),
    ("programs/ur.rasp", None, ["or_chain", "compare", "f_and", "f_or", "and_single_terms", "only_counts",
                                "only_local_counts", "count_vs_constant"]),
    ("programs/majority.rasp", None, ["split_by_token", "compare", "f_and", "f_or", "and_single_terms", "only_counts",
                                      "only_local_counts"]),
    # lowered RASP-L values: chains of one conditional per token code, compared with constants
    ("programs/raspl_count.rasp", 9, ["cond_chain", "split_by_token", "compare", "f_and", "f_or"]),
    ("programs/raspl_ur.rasp", 8, ["cond_chain", "compare"]),
]


#: an or-chain that runs as a sum over C, "c", A (each needs its own token) and must then stop: B
#: needs "a" too, so it is not exclusive of the sum and f_or takes over
OVERLAP = '''alphabet a b c
A = "a" && exists "b"
B = "a" && #"c" >= 2
C = "b" && exists "c"
D = C || "c" || A || B || (!"b" && #"a" > #"c")
output accept D
'''


#: single counts against constants with every operator, on either side, with coefficients (a local
#: count too); counts under min, max and a conditional; and an and of two conjunctions that clash
#: (X && !X)
ATOMS = '''alphabet a b c
P1 = #"a" > 1
P2 = 2 < #"b"
P3 = #"c" <= 2
P4 = 1 >= #("a" || "b")
P5 = 3 * #"a" < 4
P6 = 1 - #"b" >= 0
P7 = min(#"a", #"b") >= 1
P8 = (#"a" if "b" else #"c") > max(#"b", 1)
P9 = #"c" == 4
P10 = 3 != #"a"
P11 = 1 != #[j == i - 1] "c"
X = exists "c"
Y = X && !X
Z = ("a" && P1 && P3 && P7) || ("b" && P2 && P5 && P8) || ("c" && P4 && P6) || Y || (P9 && P10 && P11)
output accept Z
'''
#: conditional chains compared with counts: the path decides a test in the middle of the chain (the
#: second "a" is false once "a" is, "c" true once only "c" is left), a chain under a periodic test,
#: a chain whose else branch is a reference, and equality (both atoms per branch); one chain (V2)
#: walked from the start and, under the else path of "b", stopped by the path at its second test;
#: a chain of count tests (no path splits them: one walk for every path) and one whose first test is
#: a count and whose later tests are tokens, walked under paths that decide some of them
CHAIN = '''alphabet a b c
V = #"a" if "a" else #"b" if "b" else 2 * #"c" if "a" else #"c" if "c" else 3
W = 1 if pos[i % 2 == 0] else 2 if "a" else V
X = V > #"b" + 1
Y = W == #"c"
Z = (0 if "a" else 1 if "b" else 2) != #"a"
V2 = #"a" if "a" else #"b" if "b" else #"c" if "c" else 0
X2 = V2 > #"a"
X3 = (V2 if "b" else V2 + 1) > 1
V3 = 0 if #"a" >= 2 else 1 if #"b" >= 1 else 2 if #"c" >= 1 else 3
V4 = 0 if #"a" >= 2 else 1 if "b" else 2 if "a" else 3
X4 = (V3 if "a" else V3 + 1 if "b" else 2) == 1 || (V4 if "c" else 1 if "b" else V4 + 1) == 2
OUT = X && (Y || Z) && (X2 || X3) || X4
output accept OUT
'''
INLINE = {OVERLAP: "overlapping-or", ATOMS: "single-counts", CHAIN: "conditional-chains"}


@pytest.mark.parametrize("path,n,shortcuts", CASES + [(OVERLAP, None, ["or_chain", "f_or"]),
                                                      (ATOMS, None, ["only_counts", "and_single_terms", "count_vs_constant"]),
                                                      (CHAIN, None, ["cond_chain", "split_by_token", "compare"])],
                         ids=[c[0].split("/")[1] for c in CASES] + ["overlapping-or", "single-counts",
                                                                   "conditional-chains"])
def test_shortcuts_build_the_same_model(path, n, shortcuts, monkeypatch):
    program = rasp.parse(path) if path in INLINE else _alphabet(path, n)
    fast = _fingerprint(compiler.compile(program))
    for shortcut in shortcuts:
        assert _fingerprint(_compile_plain(program, monkeypatch, shortcut)) == fast, shortcut


def test_split_by_token_is_used_and_linear():
    """sort's NEXT[y] compares RANK[y] with a sum of one conditional per token: one branch per token
    in one step, each conditional decided once per branch (not a sweep of all of them per branch)."""
    program = _alphabet("programs/sort.rasp", 12)
    calls = {"split": 0, "decide": 0}
    split, decide = G._Builder.split_by_token, G._Builder.decide

    def count_split(self, *a):
        out = split(self, *a)
        calls["split"] += out is not None
        return out

    def count_decide(self, *a):
        calls["decide"] += 1
        return decide(self, *a)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(G._Builder, "split_by_token", count_split)
        m.setattr(G._Builder, "decide", count_decide)
        compiler.compile(program)
    assert calls["split"] >= 12  # at least once per NEXT[y]
    assert calls["decide"] < 12 * 12 * 4  # was cubic: about 12^3 = 1,728 decisions


def test_a_skipped_run_of_token_levels_is_what_the_fold_returns():
    """cond_chain skips the levels of a run of token tests whose branch is FALSE when ``cond_form``
    would return b unchanged at each (``_Builder._excluded_run``). Checked level by level against
    cond_form for forms b that require a token outside the run, inside it (the run stops above that
    token's level: there the fold makes ``not t and b``), two tokens, or no token, on a chain of
    token tests and on one with a periodic test inside (a run stops there, also where the fold would
    keep b: the skip is allowed to stop early, never late)."""
    core = rasp.parse('alphabet a b c d\nV = 0 if "a" else 1 if "b" else 2 if "c" else 3\n'
                      'W = 0 if "a" else 1 if pos[i % 2 == 0] else 2 if "b" else 3\n'
                      'X = V == #"d" && W == #"c"\noutput accept X').core
    builder = G._Builder(core)
    tok = {s: builder.token_form(s) for s in "abcd"}
    lit = {s: f.terms[0].lits[0][0] for s, f in tok.items()}
    bs = {"d": tok["d"], "b": tok["b"], "a and b": B.Form((B.make_thr({lit["a"]: 1, lit["b"]: 1}, 2),)),
          "b or d": B.f_or(builder, tok["b"], tok["d"]), "no token": B.lit_form(builder.periodic(2, frozenset({1})))}
    for chain, starts in [("V", [0, 0, 0]), ("W", [0, 2, 2])]:
        e = next(d.expr for d in core.defs if d.name == chain)
        walk = builder.chain_walk(e, builder.decide(e.test, builder.start_path()))[0]
        runs = builder._token_runs(walk)
        assert runs and runs[1] == starts
        for name, b in bs.items():
            for top in range(3):
                for low in range(top + 1):
                    skip = builder._excluded_run(runs, low, top, b)
                    assert low <= skip <= top + 1
                    for level in range(top, skip - 1, -1):  # every skipped level returns b itself
                        assert builder.cond_form(walk[level], B.FALSE, b) == b, (chain, name, level)
                    if skip > low and chain == "V":  # a stop inside a token run is needed: it changes b
                        assert builder.cond_form(walk[skip - 1], B.FALSE, b) != b, (chain, name, skip)
    assert builder._excluded_run(runs, 0, 2, tok["d"]) == 2  # W: the periodic test ends the run
    e = next(d.expr for d in core.defs if d.name == "V")
    runs = builder._token_runs(builder.chain_walk(e, builder.decide(e.test, builder.start_path()))[0])
    assert builder._excluded_run(runs, 0, 2, tok["d"]) == 0
    assert builder._excluded_run(runs, 0, 2, tok["b"]) == 2


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(alphabet=("a", "b", "c"), fragment="C-RASP[periodic,local]", max_depth=3, max_size=24))
def test_shortcuts_on_random_programs(program):
    fast = _fingerprint(compiler.compile(program))
    with pytest.MonkeyPatch.context() as m:
        for owner, name, plain in PLAIN.values():
            m.setattr(owner, name, plain)
        assert _fingerprint(compiler.compile(program)) == fast


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(["C-RASP", "C-RASP[local]", "C-RASP[local]", "C-RASP[local]", "C-RASP[periodic]",
                        "C-RASP[periodic,local]", "any"]).flatmap(
    lambda fragment: programs(alphabet=("a", "b", "c"), fragment=fragment, max_depth=3, max_size=24)))
def test_only_local_counts_means_nothing_to_rewrite_or_check(program):
    """The compiler skips the rewrite and the class check's walk when every written count is plain or
    local (``rasp.rewrite.only_local_counts``), and the checker skips the rewrite and its walk for
    reasons: then the rewrite must change nothing and the walks must find nothing, for programs of
    every fragment (irregular guards, periodic ones, imports). Local fragments are drawn thrice as
    often: a guarded count the fast path takes as it is (``j == i - d``,
    ``#[pred]``) is in 54 of 600 draws so (4 of 600 before the strategies wrote ``j == i - d``
    directly, and all fragments were drawn alike)."""
    from rasp.checker import _reasons
    from rasp.rewrite import only_local_counts, rewrite_core

    if only_local_counts(program.module):
        assert rewrite_core(program.core) is program.core
        G.check_class(program.core)  # raises on a construct outside the class
        assert _reasons(program.core) == []  # rasp.checker.check skips this walk too


def test_only_local_counts_on_the_shapes_it_must_refuse():
    """Every written construct that rewriting changes or the class check refuses answers False."""
    from rasp.rewrite import only_local_counts

    for src, plain in [
        ('#import pred\nalphabet a b\nX = exists[j == i - 1] "a" && #"b" > #[pred] "a"\noutput accept X', True),
        ('alphabet a b\nX = #[j <= i - 2] "a" > 0', False),  # a regular guard: rewritten
        ('alphabet a b\nX = #[j == i] "a" > 0', True),
        ('alphabet a b\nX = pos[i % 2 == 0] && "a"', False),  # a positional predicate
        ('#import pos_even\nalphabet a b\nX = pos_even && "a"', False),  # an imported one, by name
        ('alphabet a b\nX = #[j * j <= i] "a" > 0', False),  # outside every fragment
        ('alphabet a b\nX = any(x, Q[x] && exists[j == i - 2] Q[x])', True),
        ('alphabet a b\nT = map(t -> t == "a", tokens)\nX = T == T', False),  # RASP-L
    ]:
        program = rasp.parse(src)
        assert only_local_counts(program.module) is plain, src


def _plain_and_thr(t: B.Thr, u: B.Thr):
    """and_thr's general case as the module docstring states it: ``[W_U sum_{l in T} l + w_U.x >=
    W_U m + theta_U]`` normalized by make_thr, None over the weight cap."""
    weights: dict = {}
    for l, _ in t.lits:
        weights[l] = weights.get(l, 0) + u.W
    for l, w in u.lits:
        weights[l] = weights.get(l, 0) + w
    r = B.make_thr(weights, u.W * len(t.lits) + u.theta)
    return None if isinstance(r, B.Thr) and r.W > B.WEIGHT_CAP else r


_lits = st.dictionaries(st.tuples(st.integers(2, 9), st.booleans()), st.integers(1, 40), min_size=1, max_size=7)


def test_signs_of_opposite_forms_exclude_each_other_exactly_when_no_value_fits():
    """``[F + c >= 0]`` and ``[-F + d >= 0]`` (either may be a sign's negated literal) exclude each
    other iff no integer F satisfies both; F = #a - #b takes every integer value. Literals of other
    forms are never said to exclude each other."""
    core = rasp.parse("alphabet a b c\nX = exists \"a\"\noutput accept X\n").core
    b = G._Builder(core)
    a_, b_, c_ = (b.token(s).id for s in "abc")
    forms = {"F": {a_: 1, b_: -1}, "-F": {a_: -1, b_: 1}, "G": {a_: 1, c_: -1}}
    lits = []
    for name, F in forms.items():
        for off in range(-3, 4):
            lit = b.sign_lit(F, off, None, lambda: name)
            lits.append((lit, name, off))
            lits.append((B.flip(lit), "not " + name, off))

    def holds(name, off, v):  # v: the value of #a - #b (and of #a - #c: G's literals use it)
        sign = -1 if name.endswith("-F") else 1
        value = sign * v + off >= 0
        return not value if name.startswith("not ") else value

    for x, nx, ox in lits:
        for y, ny, oy in lits:
            if x[0] == y[0]:
                continue
            same_form = ("G" in nx) == ("G" in ny)
            both = any(holds(nx, ox, v) and holds(ny, oy, v) for v in range(-12, 13))
            assert b.exclusive(x, y) == (same_form and not both), (nx, ox, ny, oy)


@settings(max_examples=2000, deadline=None)
@given(_lits, _lits, st.integers(1, 300))
def test_and_of_a_conjunction_and_a_threshold_term_is_make_thrs(conj, weights, theta):
    """and_thr builds the and of a conjunction and a threshold term directly: the union of two
    conjunctions (false when one has a literal the other negates), or the weighted sum over literals
    new to the conjunction; it must be what make_thr makes of the weighted sum (overlapping nodes, a
    shared gcd and the weight cap included)."""
    t = B.make_thr(dict.fromkeys(conj, 1), len(conj))
    u = B.make_thr(weights, min(theta, sum(weights.values())))
    if not isinstance(t, B.Thr) or not isinstance(u, B.Thr) or not t.conj:
        return
    got, want = B.and_thr(t, u), _plain_and_thr(t, u)
    assert got == B.and_thr(u, t)
    assert got == want and (got is None or isinstance(got, bool) or got.conj == want.conj)


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.dictionaries(st.tuples(st.integers(0, 14), st.booleans()), st.integers(1, 3), min_size=1,
                                max_size=4), min_size=2, max_size=2),
       st.integers(1, 4), st.integers(1, 4))
def test_builder_terms_exclusive_is_the_definition(weight_maps, theta_t, theta_u):
    """The graph builder decides the exclusivity of two threshold terms from their required tokens,
    negations, periodic literals and signs of opposite linear forms; it must say what
    boolean.terms_exclusive (every pair of required literals through ``exclusive``) says, over
    tokens, periodic literals, gates and signs (#"a" >= 1, 2, 3 and #"a" - #"b" >= 0, 1, -1: their
    literals and negations bound one form from both sides)."""
    core = rasp.parse("alphabet a b c\nX = exists \"a\"\noutput accept X\n").core
    b = G._Builder(core)
    ids = [b.token(s).id for s in "abc"]
    ids += [b.periodic(2, frozenset({0}))[0], b.periodic(3, frozenset({1, 2}))[0], b.periodic(6, frozenset({0, 3}))[0]]
    ids += [b._node("gate", ("gate", k), f"g{k}", {"neurons": ()}, ()).id for k in range(3)]
    a_, b_ = ids[0], ids[1]
    ids += [b.sign_lit({a_: 1}, -k, None, lambda: "#a")[0] for k in (1, 2, 3)]
    ids += [b.sign_lit({a_: 1, b_: -1}, k, None, lambda: "#a - #b")[0] for k in (0, -1, 1)]
    terms = []
    for weights, theta in zip(weight_maps, (theta_t, theta_u)):
        t = B.make_thr({(ids[n], neg): w for (n, neg), w in weights.items()}, min(theta, sum(weights.values())))
        if not isinstance(t, B.Thr):
            return
        terms.append(t)
    t, u = terms
    assert b.terms_exclusive(t, u) == B.terms_exclusive(b, t, u) == b.terms_exclusive(u, t)


@settings(max_examples=1500, deadline=None)
@given(st.dictionaries(st.integers(2, 40), st.booleans(), min_size=1, max_size=30), st.integers(2, 40),
       st.booleans())
def test_and_of_a_conjunction_and_one_literal_is_make_thrs(conj, node, neg):
    """and_thr inserts one literal into a conjunction by binary search; it must be make_thr's union
    (the conjunction itself when the literal is there, false when its negation is), either way round."""
    t = B.make_thr({(n, ng): 1 for n, ng in conj.items()}, len(conj))
    lit = B.make_thr({(node, neg): 1}, 1)
    union = {(n, ng): 1 for n, ng in conj.items()}
    union[(node, neg)] = 1
    want = B.make_thr(union, len(union)) if (node, not neg) not in union else False
    assert B.and_thr(t, lit) == want and B.and_thr(lit, t) == want


@settings(max_examples=1500, deadline=None)
@given(st.dictionaries(st.integers(2, 40), st.booleans(), min_size=1, max_size=30), st.integers(2, 40),
       st.booleans())
def test_or_of_a_disjunction_and_one_literal_is_not_and_not(disj, node, neg):
    """f_or puts one literal into a disjunction ``[l1 + ... + lk >= 1]`` by binary search
    (``boolean._or_lit``); it must be the term the general path builds, ``not (not t and not l)``
    through not_thr and and_thr, either way round, and make_thr's disjunction of the union; it
    declines (None) when the literal's node is in the disjunction already."""
    t = B.make_thr({(n, ng): 1 for n, ng in disj.items()}, 1)
    lit = B.make_thr({(node, neg): 1}, 1)
    got = B._or_lit(t, lit)
    assert got == B._or_lit(lit, t)
    if node in disj:
        assert got is None
        return
    union = {(n, ng): 1 for n, ng in disj.items()}
    union[(node, neg)] = 1
    assert got == B.make_thr(union, 1) == B.not_thr(B.and_thr(B.not_thr(t), B.not_thr(lit)))


@pytest.mark.parametrize("lit", [(n, neg) for n in (B.REAL, 2, 7) for neg in (False, True)])
def test_not_of_one_literal_is_make_thrs(lit):
    """norm flips a negated single literal directly; it must be what not_thr (make_thr) returns."""
    t = B.Thr(((lit, 1),), 1, conjunction=True)
    assert B.norm(B.Form((t,), True)) == B.thr_form(B.not_thr(t))


# ----------------------------------------------------------------------------- signs that imply others
_CHAIN = """alphabet a b c d
V3 = "d"
V2 = V3 || "c"
V1 = V2 || "b"
V0 = V1 || "a"
K = "a" || "d"
W = K && V2
"""
#: comparisons of one count with a constant (each becomes one sign literal)
_ATOMS = ([f"#(K && V{k}) >= {m}" for k in range(4) for m in (1, 2)] + [f"#V{k} <= {m}" for k in range(4) for m in (0, 1)]
          + [f"#V{k} >= 2" for k in range(4)] + ["#W >= 1", "#(V2 && K) >= 1", '#"d" >= 1', '#("c" || "d") <= 1', '#"d" <= 1'])


def _atom_program():
    text = _CHAIN + "".join(f"C{k} = {a}\n" for k, a in enumerate(_ATOMS)) + "output accept C0\n"
    p = rasp.parse(text)
    b = G._Builder(p.core)
    lits = [B.as_lit(b.form_of(f"C{k}")) for k in range(len(_ATOMS))]
    assert all(l is not None and b.nodes[l[0]].kind == "sign" for l in lits)
    inputs = [list(w) for n in range(1, 6) for w in itertools.product("abcd", repeat=n)]
    values = p.evaluate(inputs)
    lengths = np.array([len(w) for w in inputs])
    real = np.arange(values["C0"].shape[1])[None, :] < lengths[:, None]
    return b, lits, [values[f"C{k}"].astype(bool) & real for k in range(len(_ATOMS))], real


def test_signs_that_imply_each_other_exclude_their_negations():
    """_signs_imply_exclusive(a, b) claims that sign literals a and b never hold together because a
    implies not b, read from the compared counts' bodies (``#(K && V1) >= 1`` implies ``#(K && V2)
    >= 1``'s negation is false wherever V1 = V2 || ... ). Every claim is checked against the
    interpreter at every position of every input up to length 5 (sound), and the claims a lowered
    max's chain needs are made (complete there): ``#(K && V_j) >= m`` excludes the negation of
    ``#(K && V_k) >= m'`` for j >= k, m >= m', and ``#V_j <= m`` the negation of ``#V_k <= m'`` for
    j <= k (V_k implies V_j), m <= m'."""
    b, lits, vals, real = _atom_program()
    claims = 0
    for i, a in enumerate(lits):
        for j, c in enumerate(lits):
            for na in (False, True):
                for nc in (False, True):
                    la, lc = (a[0], a[1] ^ na), (c[0], c[1] ^ nc)
                    va = vals[i] if not na else ~vals[i] & real
                    vc = vals[j] if not nc else ~vals[j] & real
                    if b._signs_imply_exclusive(la, lc):
                        claims += 1
                        assert not (va & vc).any(), (_ATOMS[i], na, _ATOMS[j], nc)
    assert claims > 40
    idx = {a: k for k, a in enumerate(_ATOMS)}
    for j in range(4):
        for k in range(j + 1):
            for m in (1, 2):
                for m2 in range(1, m + 1):
                    a, c = lits[idx[f"#(K && V{j}) >= {m}"]], lits[idx[f"#(K && V{k}) >= {m2}"]]
                    assert b._signs_imply_exclusive(a, (c[0], not c[1])), (j, k, m, m2)
            for m in (0, 1):
                for m2 in range(m, 2):
                    a, c = lits[idx[f"#V{k} <= {m}"]], lits[idx[f"#V{j} <= {m2}"]]
                    assert b._signs_imply_exclusive(a, (c[0], not c[1])), (j, k, m, m2)
    # through an and of the same sides in another order, a definition, and or of tokens
    a, c = lits[idx["#W >= 1"]], lits[idx["#(V2 && K) >= 1"]]
    assert b._signs_imply_exclusive(a, (c[0], not c[1]))
    a, c = lits[idx['#"d" >= 1']], lits[idx["#V2 >= 2"]]
    assert not b._signs_imply_exclusive(a, (c[0], not c[1]))  # a count of 1 does not imply one of 2
    a, c = lits[idx['#("c" || "d") <= 1']], lits[idx['#"d" <= 1']]
    assert b._signs_imply_exclusive(a, (c[0], not c[1]))


_BODY = st.recursive(
    st.sampled_from(['"a"', '"b"', '"c"', "V0", "V1", "V2", "V3", "K", "W", "true", "false",
                     # comparisons of one count with a constant, which body_implies reads as signs
                     "(#(K && V1) >= 1)", "(#(K && V2) >= 1)", "(#(V2 && K) >= 2)", "(#V1 >= 2)", "(#V3 <= 1)",
                     "(2 >= #V0)", "(#V1 > 1)", "(1 < #V2)", "(#V0 == 1)", "(#V3 != 1)", "(#[j == i - 1] V1 >= 1)",
                     "(#[j == i - 1] V2 >= 1)"]),
    lambda sub: st.one_of(st.tuples(sub, sub).map(lambda t: f"({t[0]} || {t[1]})"),
                          st.tuples(sub, sub).map(lambda t: f"({t[0]} && {t[1]})"),
                          sub.map(lambda t: f"!{t}")),
    max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(_BODY, _BODY)
def test_body_implies_is_sound(x, y):
    """body_implies(x, y) says x implies y at every position, from the expressions' structure; when it
    says so, no position of any input up to length 4 has x true and y false."""
    p = rasp.parse(_CHAIN + f"X = {x}\nY = {y}\noutput accept X\n")
    b = G._Builder(p.core)
    if not b.body_implies(b.defs["X"].expr, b.defs["Y"].expr):
        return
    inputs = [list(w) for n in range(1, 5) for w in itertools.product("abcd", repeat=n)]
    v = p.evaluate(inputs)
    assert not (v["X"].astype(bool) & ~v["Y"].astype(bool)).any()


def test_body_implies_reads_comparisons_of_one_count_with_a_constant():
    """Where the tests of a lowered max's chain need it (each implies the next), and not beyond: the
    bodies must imply each other the right way round for the operator, the constants must allow it,
    and equalities and local counts are never read."""
    def implies(x, y):
        p = rasp.parse(_CHAIN + f"X = {x}\nY = {y}\noutput accept X\n")
        b = G._Builder(p.core)
        return b.body_implies(b.defs["X"].expr, b.defs["Y"].expr)

    assert implies("#(K && V1) >= 1", "#(K && V0) >= 1")
    assert implies("#(K && V2) >= 2", "#(V0 && K) > 0")
    assert not implies("#(K && V0) >= 1", "#(K && V1) >= 1")  # V0 does not imply V1
    assert not implies("#(K && V1) >= 1", "#(K && V0) >= 2")  # a count of 1 does not imply one of 2
    assert implies("#V0 <= 1", "#V2 < 3") and implies("1 >= #V0", "#V1 <= 1")
    assert not implies("#V2 <= 1", "#V0 <= 1")  # V2 implies V0: fewer V2 than V0, not more
    assert not implies("#V1 == 1", "#V0 >= 1") and not implies("#V1 >= 1", "#V1 == 1")
    assert not implies("#[j == i - 1] V1 >= 1", "#[j == i - 1] V0 >= 1")  # (local counts: not read)
    # every claim between these comparisons holds at every position of every input up to length 4
    cmps = [f"{l} {op} {r}" for body in ("V0", "V1", "V3", "(K && V1)", "(V1 && K)") for m in (0, 1, 2)
            for l, op, r in ((f"#{body}", ">=", m), (f"#{body}", "<", m), (m, "<", f"#{body}"), (m, ">=", f"#{body}"))]
    p = rasp.parse(_CHAIN + "".join(f"C{k} = {c}\n" for k, c in enumerate(cmps)) + "output accept C0\n")
    b = G._Builder(p.core)
    inputs = [list(w) for n in range(1, 5) for w in itertools.product("abcd", repeat=n)]
    v = p.evaluate(inputs)
    claims = 0
    for i, j in itertools.product(range(len(cmps)), repeat=2):
        if b.body_implies(b.defs[f"C{i}"].expr, b.defs[f"C{j}"].expr):
            claims += 1
            assert not (v[f"C{i}"].astype(bool) & ~v[f"C{j}"].astype(bool)).any(), (cmps[i], cmps[j])
    assert claims > 3 * len(cmps)


#: tests for the chains below: counts of bodies that imply each other ("a" implies a || b implies
#: true), compared with constants either way
_TESTS = [f"#{body} {op} {m}" for body in ('"a"', '("a" || "b")', "true") for op in (">=", "<=") for m in (1, 2, 3)]


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.sampled_from(_TESTS), st.integers(0, 3)), min_size=1, max_size=6), st.integers(0, 3),
       st.integers(0, 3), st.booleans())
def test_a_chain_of_implied_tests_compared_with_a_constant(levels, default, c, ordered):
    """cond_chain's fold stops at the first level of a run of tests that each imply the next
    (``_Builder._implied_runs``) once the else form excludes a test: every test below it implies it,
    so ``not t and b`` is b at each. On random chains ``w0 if t0 else w1 if t1 else ...`` of count
    comparisons (sorted into an order where many imply the next, or as drawn), ``V == c`` and ``V <=
    c`` are what the interpreter says at the last position of every input up to length 5 (so at
    every position of every input up to that length)."""
    if ordered:  # stronger tests first: larger counts of narrower bodies for >=, the reverse for <=
        rank = {t: k for k, t in enumerate(_TESTS)}
        levels = sorted(levels, key=lambda lv: (">=" not in lv[0], rank[lv[0]] * (-1 if ">=" in lv[0] else 1)))
    chain = " else ".join(f"{w} if {t}" for t, w in levels) + f" else {default}"
    p = rasp.parse(f"alphabet a b c\nV = {chain}\nX = V == {c}\nY = V <= {c}\nOUT = X || (Y && \"c\")\n"
                   "output accept OUT\n")
    inputs = [list(w) for n in range(1, 6) for w in itertools.product("abc", repeat=n)]
    assert compiler.compile(p).run_batch(inputs, dtype="float64") == p.run_batch(inputs), chain


def test_the_fold_skips_a_run_of_implied_tests():
    """A lowered max compared with each of its values (raspl_count.rasp's ``OUT == CODE[x]``): the
    fold asks cond_form once above the matching level, not once per level (was quadratic)."""
    program = _alphabet("programs/raspl_count.rasp", 40)
    calls = {"cond_form": 0}
    cond_form = G._Builder.cond_form

    def count(self, *a):
        calls["cond_form"] += 1
        return cond_form(self, *a)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(G._Builder, "cond_form", count)
        compiler.compile(program)
    assert calls["cond_form"] < 40 * 40 // 2  # was about 40^2 / 2 + 40 * 4


def test_members_of_a_long_chain_stay_sound_past_the_cap(monkeypatch):
    """_members_of works a chain of definitions out without recursion, and past MEMBERS_CAP keeps
    only the direct disjuncts (a subset: fewer claims, never a wrong one)."""
    n = 30
    text = "alphabet a b\n" + "".join(f"D{k} = D{k + 1} || \"a\"\n" for k in range(n)) + f'D{n} = "b"\noutput accept D0\n'
    p = rasp.parse(text)
    b = G._Builder(p.core)
    assert b._members_of("D0") == frozenset(f"D{k}" for k in range(n + 1))
    monkeypatch.setattr(G, "MEMBERS_CAP", 5)
    b = G._Builder(p.core)
    for k in range(n + 1):
        got = b._members_of(f"D{k}")
        assert {f"D{k}", f"D{min(k + 1, n)}"} <= got <= {f"D{j}" for j in range(k, n + 1)}
        assert len(got) <= 5
    assert b._members_of(f"D{n - 3}") == frozenset(f"D{k}" for k in range(n - 3, n + 1))
    assert len(b._members_of("D0")) < n


# a lowered max compared with values it cannot take: the chain's tests are built, then the output
# folds to a constant (helper 89's random program r199)
_DEAD = """alphabet a b c d
VAL = map(x -> {0: 2, 1: 3, 2: 1, 3: 1}[x] - 0, tokens)
A2 = aggregate(select(indices, full(2), <=), VAL, max, -4)
OUT = !(A2 != -1) && !(#(A2 == -2) >= 1) && !(A2 >= -3)
"""


#: counts of token sets: a set alone (a head reads the embedding), a set and-ed with a literal or a
#: conjunction (one neuron), a complement, a set written in the body and one behind a definition,
#: an and whose other side reads a token (the set is not used: the form keeps its tokens), a local
#: count of a set, and one set read by a body that writes it and by one that names a definition
SETS = """alphabet a b c d
special "<sep>"
S = "a" || "b" || "c"
P = exists[j == i - 1] "d"
X1 = #("a" || "b") >= 2
X2 = #(P && S) >= 1
X3 = #(!("c" || "d")) > #(P && !("a" || "b"))
X4 = #("a" && ("a" || "b")) == #(("b" || "c") && "a")
X5 = exists[j == i - 1] ("b" || "d")
X6 = #(S && P && exists "c") >= 2
PS = P && ("c" || "b" || "a")
X7 = #PS >= 1
OUT = (X1 || X2) && (X3 || !X4) || (X5 && X6) || (X7 && "d")
output accept OUT
"""


def test_token_sets_in_count_bodies_are_embedding_features(tmp_path):
    """A count whose body is a set of tokens, or such a set and-ed with a side that reads no token,
    reads the set as one embedding feature (``_Builder.count_lit``): the model agrees with the
    interpreter at every position of every input up to length 6, each feature is 1 exactly on its
    symbols' rows of the token embedding, and the gate of ``P && S`` is one neuron. Saved and
    loaded, the model is the same."""
    p = rasp.parse(SETS)
    m = compiler.compile(p)
    inputs = [list(w) for n in range(1, 7) for w in itertools.product(["a", "b", "c", "d", "<sep>"], repeat=n)]
    assert m.run_batch(inputs, dtype="float64") == p.run_batch(inputs)
    sets = {lab: k for k, lab in enumerate(m.residual_labels) if lab.startswith("tokens in") and lab.endswith("}")}
    assert set(sets) == {"tokens in {a, b}", "tokens in {a, b, c}", "tokens in {a, b, <sep>}",
                         "tokens in {c, d, <sep>}", "tokens in {b, d}"}
    embed = m.module.weights()["embed.token"]
    table = np.zeros(embed[0])
    table[tuple(embed[1].numpy())] = embed[2].numpy()
    rows = {s: k for k, s in enumerate(m.config["program"]["alphabet"] + m.config["program"]["special"])}
    for label, k in sets.items():
        members = label[len("tokens in {"):-1].split(", ")
        assert [s for s, r in rows.items() if table[r, k] == 1] == members and (table[:, k] != 0).sum() == len(members)
    gate = next(n for n in G.build_graph(p.core).nodes if n.kind == "gate" and n.label.endswith("&& tokens in {a, b, c}"))
    assert len(gate.params["neurons"]) == 1
    b = G._Builder(p.core)  # the set written in the body, or behind a definition: one head, one sign
    assert b.form_of("X2") == b.form_of("X7")
    made = []  # a set is made only where a head reads it (X4's "a" || "b" is not: the other side reads "a")
    live_nodes = G._live_nodes
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(G, "_live_nodes", lambda nodes, roots: made.append(len(nodes)) or live_nodes(nodes, roots))
        assert len(G.build_graph(p.core).nodes) == made[0]
    m.save(tmp_path / "m")
    assert compiler.load(tmp_path / "m").run_batch(inputs[:400], dtype="float64") == p.run_batch(inputs[:400])


def test_nodes_the_outputs_do_not_read_are_dropped():
    """The builder makes a node when a form needs it, and a later step may find that it does not
    matter (an excluded test, an output that folds to a constant): build_graph keeps only what the
    outputs read (graph._live_nodes), renumbered. Here the output is the constant false: no head, no
    layer. And over random programs every node but the flags is read by an output."""
    from compiler.bounded import compile_raspl

    p = rasp.parse(_DEAD)
    m = compile_raspl(p)
    assert (m.size["layers"], m.size["heads"]) == (0, 0)
    inputs = [list(w) for n in range(1, 5) for w in itertools.product("abcd", repeat=n)]
    assert m.run_batch(inputs, dtype="float64") == p.run_batch(inputs) == [False] * len(inputs)


@settings(max_examples=150, deadline=None)
@given(programs(alphabet=("a", "b", "c"), fragment="C-RASP[periodic,local]", max_depth=3, max_size=24))
def test_every_node_of_a_graph_is_read_by_an_output(p):
    from rasp.rewrite import only_local_counts, rewrite_core

    try:
        normal = only_local_counts(p.module)
        g = G.build_graph(p.core if normal else rewrite_core(p.core), normal=normal)
    except rasp.RaspError:
        return
    live, stack = {B.BOS, B.REAL}, [lit[0] for _, lit in g.outputs]
    while stack:
        n = stack.pop()
        if n not in live:
            live.add(n)
            stack.extend(g.nodes[n].inputs)
    assert live == {n.id for n in g.nodes}
    assert all(n.id == k for k, n in enumerate(g.nodes))


_SYMS = ("a", "b", "c", "d")
#: tests of a second chain: counts (no path splits them) or tokens (the path decides them)
_OTHER_TESTS = ['#"a" >= 1', '#"b" >= 2', '#("c" || "d") >= 1', '"a"', '"c"', "#[j == i - 1] \"b\" >= 1"]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.sampled_from(_SYMS + ("<s>",)), st.integers(0, 3)), min_size=1, max_size=7),
       st.integers(0, 3),
       st.lists(st.tuples(st.sampled_from(_OTHER_TESTS), st.integers(0, 3)), min_size=1, max_size=4),
       st.integers(0, 3), st.sampled_from(["==", "!=", "<", ">="]), st.integers(-2, 2), st.booleans())
def test_a_token_value_compared_with_another_value(levels, default, other, other_default, op, c, with_min):
    """``_Builder.split_token_value``: a chain of written-token tests (a lowered ``tokens`` value;
    tokens repeated, or left to the default, one or several) compared with another chain, of counts
    or tokens, or a min of it, is what the interpreter says at every position of every input up to
    length 4, whether the path is split by token or (several tokens left to the default) not."""
    chain = " else ".join(f'{w} if "{s}"' for s, w in levels) + f" else {default}"
    second = " else ".join(f"{w} if {t}" for t, w in other) + f" else {other_default}"
    if with_min:
        second = f"min({second}, #\"d\")"
    p = rasp.parse(f'alphabet a b c d\nspecial "<s>"\nV = {chain}\nW = {second}\n'
                   f"X = V {op} W + {c}\nOUT = X || (\"<s>\" && V == 1)\noutput accept OUT\n")
    inputs = [list(w) for n in range(1, 5) for w in itertools.product(_SYMS + ("<s>",), repeat=n)]
    assert compiler.compile(p).run_batch(inputs, dtype="float64") == p.run_batch(inputs), (chain, second, op, c)


def test_a_token_value_split_by_token_is_what_the_interpreter_says():
    """A chain that tests every symbol but one (the special token falls to the last else) compared
    with a chain of counts and with a min: ``split_token_value`` must fire for both, and the model
    must agree with the interpreter on every input up to length 4."""
    p = rasp.parse('alphabet a b c d\nspecial "<s>"\nV = 1 if "a" else 2 if "b" else 0 if "c" else 3 if "d" else 0\n'
                   'W = 2 if #"a" >= 2 else 1 if #[j == i - 1] "b" >= 1 else 0\n'
                   'X = V == W || V > min(W, #"c") + 1\noutput accept X\n')
    splits = []
    split = G._Builder.split_token_value

    def count_split(self, *a):
        out = split(self, *a)
        splits.append(out is not None)
        return out

    with pytest.MonkeyPatch.context() as m:
        m.setattr(G._Builder, "split_token_value", count_split)
        model = compiler.compile(p)
    assert sum(splits) == 2
    inputs = [list(w) for n in range(1, 5) for w in itertools.product(_SYMS + ("<s>",), repeat=n)]
    assert model.run_batch(inputs, dtype="float64") == p.run_batch(inputs)


def test_a_token_value_compared_with_a_value_is_split_once_per_token():
    """raspl_count.rasp's ``tokens != END`` over n symbols: split by token once (n + 1 branches, each
    END's chain against a constant, one walk of it for every path), not ge0's staircase through
    both chains (a walk of a suffix of one chain at every level of the other: about n^2 levels)."""
    n = 40
    program = _alphabet("programs/raspl_count.rasp", n)
    splits, walks = [], {}
    split, walk = G._Builder.split_token_value, G._Builder.chain_walk

    def count_split(self, *a):
        out = split(self, *a)
        splits.append(out is not None)
        return out

    def count_walk(self, e, decision):
        out = walk(self, e, decision)
        walks[id(out[0])] = out[0]  # each walk made (the builder keeps them)
        return out

    with pytest.MonkeyPatch.context() as m:
        m.setattr(G._Builder, "split_token_value", count_split)
        m.setattr(G._Builder, "chain_walk", count_walk)
        model = compiler.compile(program)
    assert sum(splits) == 1
    assert sum(map(len, walks.values())) < 8 * n  # was about n^2 (two staircases of n^2 / 2 levels each)
    inputs = [[str(a), str(b), "<sep>"] + [str(k) for k in range(a, b + 1)] for a, b in [(0, 3), (5, 5), (7, 39), (38, 39)]]
    assert model.run_batch(inputs) == program.run_batch(inputs)
