"""rasp/raspl.py: RASP-L conformance, lowering to C-RASP, and the verdict.

* ``LOWERS``: RASP-L programs that are C-RASP[periodic, local] in disguise, with the fragment their
  lowered form lands in. Property: the lowered program has no RASP-L primitive and evaluates
  identically to the original on random inputs, on the output and on every definition that
  survives (and so does its printed source, parsed back);
* ``CONJECTURED``: programs that conform to RASP-L but do not lower (fragment ``RASP-L``, guarantee
  ``conjectured``), with where lowering stops;
* ``VIOLATES``: programs that break a RASP-L restriction (fragment ``none``), with the verdict's located
  reasons (and conformance's own, where they differ: a guard outside C-RASP is named by the C-RASP analysis;
  where the lowering stops elsewhere, or at the node RASP-L's reason names, the verdict says that too).
"""
from __future__ import annotations

import itertools
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rasp
from rasp import ast as A
from rasp.raspl import RASPL_NODES, conformance, lower, lower_explained, verdict_for_raspl

# name -> (source, fragment of the lowered program)
LOWERS = {
    "shift": ("""\
// the previous token (a shift by one) is b
alphabet a b c
PREV = aggregate(select(indices, map(x -> x - 1, indices), ==), tokens, mean, -1)
ok = PREV == 1
""", "C-RASP[local]"),
    "shift-keys": ("""\
// the token two back, written with shifted keys
alphabet a b
BACK2 = aggregate(select(map(x -> x + 2, indices), indices, ==), tokens, max, 5)
ok = BACK2 == 0
""", "C-RASP[local]"),
    "exists-prev": ("""\
// some earlier position held an a right before a b: max of a bool under a shift is exists[j == i - 1]
alphabet a b
PA = aggregate(select(indices, map(x -> x - 1, indices), ==), "a", max)
AB = map(p -> p == 1, PA) && "b"
ok = #AB >= 1
""", "C-RASP[local]"),
    "histogram": ("""\
// the current token has occurred exactly twice: selector_width of token equality
alphabet a b c
W = selector_width(select(tokens, tokens, ==))
ok = W == 2
""", "C-RASP"),
    "length": ("""\
// the length so far: selector_width of the all-true selector is #true
alphabet a b
N = selector_width(select(indices, indices, true))
ok = N == 2 * #"a"
""", "C-RASP"),
    "mean-bool": ("""\
// the mean of a Boolean under a select on token equality: per-symbol count family
alphabet a b c
PB = aggregate(select(indices, map(x -> x - 1, indices), ==), "b", max)
M = aggregate(select(tokens, tokens, ==), PB, mean)
ok = M == 1
""", "C-RASP[local]"),
    "earlier-max": ("""\
// max and min of strictly earlier tokens (select with <)
alphabet 0 1 2 3
HI = aggregate(select(indices, indices, <), tokens, max, -1)
LO = aggregate(select(indices, indices, <), tokens, min, 9)
ok = HI > tokens && LO < tokens
""", "C-RASP"),
    "linear-count-map": ("""\
// maps over counts that are linear: C-RASP arithmetic and comparisons
alphabet a b
W = selector_width(select(tokens, full(0), ==))
X = map(x -> 2 * x - 3 if x > 1 else {0: 7, 1: 4}[x], W)
ok = map(x -> x >= 5, X) && W != #"b"
""", "C-RASP"),
    "count-quotient-map": ("""\
// a count divided by a constant, compared (floor(C / k) >= E is C >= k E): C-RASP comparisons
alphabet a b
HALF = map(x -> x / 2 > 3, #"a")
THIRD = seqmap((x, y) -> 5 - x / 3 != y + 1, #"a", #"b")
ok = HALF || THIRD
""", "C-RASP"),
    "seqmap-digits": ("""\
// the last digit plus the one before it is 10 (seqmap of two finite sequences)
alphabet 0 1 2 3 4 5 6 7 8 9
P = aggregate(select(indices, map(x -> x - 1, indices), ==), tokens, max, 0)
S = seqmap((x, y) -> x + y, tokens, P)
ok = S == 10
""", "C-RASP[local]"),
    "mean-trunc": ("""\
// the mean of a -> -1, b -> 2 over the prefix, truncated toward zero, is 0
alphabet a b
V = map(x -> {0: -1, 1: 2}[x], tokens)
M = aggregate(select(indices, indices, true), V, mean)
ok = M == 0
""", "C-RASP"),
    "mean-trunc-inline": ("""\
// the same mean compared where it is written: the lowering uses each value's case condition
// directly (as its own definition, a chain in value order hid an overlap of the -1 and 0 cases)
alphabet a b
V = map(x -> {0: -1, 1: 2}[x], tokens)
ok = aggregate(select(indices, indices, true), V, mean) == 0
""", "C-RASP"),
    "generator": ("""\
// copy the token two back until the length is 8 (a family: PREV2[x] lowers to a local count)
alphabet a b c
N = selector_width(select(indices, indices, true))
PREV2[x] = aggregate(select(indices, map(t -> t - 2, indices), ==), Q[x], max) == 1
NEXT[x] = PREV2[x] && N < 8
output generate NEXT
""", "C-RASP[local]"),
    "induction": ("""\
// induction head: the token after an earlier occurrence of the current token (content select on the
// previous token)
alphabet a b c
special "<sep>"
PREV = aggregate(select(indices, map(x -> x - 1, indices), ==), tokens, max, -1)
AFTER = aggregate(select(PREV, tokens, ==), tokens, max, -1)
ok = AFTER == 1
""", "C-RASP[local]"),
    "selector-def": ("""\
// a selector definition used twice; a family that uses it; select with >=
alphabet a b c
GE = select(tokens, tokens, >=)
W = selector_width(GE)
HAS[x] = aggregate(GE, Q[x], max) == 1
ok = W >= 2 && HAS["c"]
""", "C-RASP"),
    "never": ("""\
// a shift into the future selects nothing: always the default
alphabet a b
F = aggregate(select(indices, map(x -> x + 1, indices), ==), tokens, max, 3)
ok = F == 3 && "a"
""", "C-RASP"),
    "identity": ("""\
// the identity selector returns any value unchanged, counts included
alphabet a b
C = #"a"
SAME = aggregate(select(indices, indices, ==), C, mean)
ok = SAME == C
""", "C-RASP"),
    "max-min-many-values": ("""\
// max and min over eight values with compound key predicates (PREV > token is a disjunction of
// PREV's cases): the lowering names each branch's predicate and the chain "the value is v or more"
// (NAME__sel3, NAME__ge5), which every branch reads
alphabet 0 1 2 3 4 5 6 7
PREV = aggregate(select(indices, map(x -> x - 1, indices), ==), tokens, max, -1)
HI = aggregate(select(PREV, tokens, >), tokens, max, -1)
LO = aggregate(select(PREV, tokens, <=), PREV, min, 9)
ok = HI > LO || HI == 7 && LO == 9
""", "C-RASP[local]"),
    "keys-against-position": ("""\
// keys of finite values against the query position (the mirror of select(indices, full(2), >)):
// "u op i + shift" is a relation of i alone, so each interval of i selects one set of key values
alphabet a b c
W = selector_width(select(full(2), indices, <))
V = aggregate(select(tokens, map(x -> x - 1, indices), ==), tokens, max, 7)
M = aggregate(select(map(x -> 3 * x, tokens), map(x -> x + 2, indices), >=), tokens, mean, 0)
ok = W >= 1 && V == 1 || M == 1
""", "C-RASP"),
    "aggregate-in-quantifier": ("""\
// a max whose selector and values read a quantifier's variable: its shared parts (the key predicate
// of a branch, "none larger yet") are written in place, not named (a helper has only the
// definition's parameters; naming them was an internal error)
alphabet 0 1 2 3 4
P = aggregate(select(indices, map(x -> x - 1, indices), ==), tokens, max, -1)
ok = any(y, aggregate(select(P, tokens, >), P if Q[y] else tokens, max, -1) == 2)
S = sum(y, 1 if aggregate(select(map(t -> t + 1, P) if Q[y] else P, tokens, >), tokens, min, 9) == 3 else 0)
// a symbol comparison reads its variable as a name, not as Q[y]
R = any(y, aggregate(select(P, tokens, >), map(t -> t + 1, tokens) if y < "2" else P, max, -1) == 2)
ok2 = ok || S >= 2 || R
""", "C-RASP[local]"),
    "max-min-token-keys": ("""\
// token keys and token values: the count of value w is #"w" in every branch, and "none larger yet"
// is a chain of their negated signs; a default outside the values (-1) and one that is the last
// value tried (0 for max)
alphabet 0 1 2 3 4 5
NXT = aggregate(select(tokens, tokens, >), tokens, min, -1)
PRV = aggregate(select(tokens, tokens, <), tokens, max, 0)
ok = NXT == 3 || PRV == 2 || NXT == -1 && PRV == 0
""", "C-RASP"),
    "max-min-mixed-cases": ("""\
// token keys, values whose cases are tokens but one (7 is "0" or "8"): the prefixes of token cases are
// written out and intersected with each branch's key tokens, the rest named
alphabet 0 1 2 3 4 5 6 7 8 9
V = map(x -> x - 1 if x > 0 else 7, tokens)
M = aggregate(select(tokens, tokens, >=), V, min, -1)
ok = M > #"0" - #"1"
""", "C-RASP"),
    "periodic-mix": ("""\
// C-RASP and RASP-L mixed: a periodic predicate and a RASP-L shift
alphabet a b
EVEN = pos[i % 2 == 0]
PREV = aggregate(select(indices, map(x -> x - 1, indices), ==), tokens, max, 0)
ok = EVEN && PREV == 1 || #"a" == 3
""", "C-RASP[periodic,local]"),
}

# name -> (source, (line, col) where lowering stops)
CONJECTURED = {
    # a guard comparing an index with a constant is the select(indices, full(3), <=) that RASP-L has
    # (theory.md: RASP-L compares indices, possibly after adding a constant); it was "none". (W was
    # select(tokens, indices, ==), which now lowers: see keys-against-position)
    "index-vs-constant-guard": ("""\
alphabet a b
W = selector_width(select(tokens, tokens, ==))
MAXW = aggregate(select(indices, indices, true), W, max)
ok = #[j <= 3] "a" == MAXW
""", (3, 8)),
    "mode": ("""\
alphabet a b c
W = selector_width(select(tokens, tokens, ==))
MAXW = aggregate(select(indices, indices, true), W, max)
MODE = aggregate(select(W, MAXW, ==), tokens, max)
ok = MODE == 0
""", (3, 8)),
    "count-of-neighbour": ("""\
alphabet a b
W = selector_width(select(tokens, tokens, ==))
PW = aggregate(select(indices, map(x -> x - 1, indices), ==), W, max)
ok = PW > 2
""", (3, 6)),
}

# name -> (source, [(line, col, condition)])
VIOLATES = {
    "parity": ("""\
alphabet 0 1
C = selector_width(select(tokens, full(1), ==))
P = map(x -> x % 2, C)
ok = P == 0
""", [(3, 5, "RASP-L: finite maps")]),
    "index-arith": ("""\
alphabet a b
EVEN = map(x -> x % 2, indices)
ok = EVEN == 0
""", [(2, 8, "RASP-L: indices")]),
    "index-values": ("""\
alphabet a b
LAST = aggregate(select(tokens, tokens, ==), indices, max)
AT = aggregate(select(indices, LAST, ==), tokens, max)
ok = AT == 1
""", [(2, 46, "RASP-L: indices")]),
    "index-compare": ("""\
alphabet a b
W = selector_width(select(tokens, tokens, ==))
ok = indices == W
""", [(3, 6, "RASP-L: indices")]),
    "nonregular-guard": ("""\
alphabet a b
W = selector_width(select(tokens, indices, ==))
ok = #[j * j <= 3] "a" == W
""", [(3, 8, "translation invariance")],  # the C-RASP analysis names the failing atom (the select
        # lowers: keys of finite values against the query position, see keys-against-position)
        [(3, 6, "RASP-L: indices")]),  # RASP-L's own reason covers the whole count
    "mixed-with-positional": ("""\
alphabet a b
PREV = aggregate(select(indices, map(x -> x - 1, indices), ==), tokens, max, -1)
X = #[j * j <= 3] "a"
OUT = PREV == 0 && X >= 1 && pos[i % 2 == 0 && i * i < 25]
""", [(3, 7, "translation invariance"), (4, 48, "periodicity")],
        [(3, 5, "RASP-L: indices"), (4, 30, "RASP-L: indices")]),
    "index-scaled-select": ("""\
alphabet a b
HALF = aggregate(select(map(x -> 2 * x, indices), indices, ==), tokens, max)
ok = HALF == 1
""", [(2, 25, "RASP-L: indices")]),
}


def _random_inputs(program: rasp.Program, rng, count: int, max_len: int) -> list[list[str]]:
    syms = program.symbols
    return [[syms[k] for k in rng.integers(0, len(syms), size=int(rng.integers(1, max_len + 1)))]
            for _ in range(count)]


def assert_same(original: rasp.Program, lowered: rasp.Program, inputs) -> None:
    a, b = original.evaluate(inputs), lowered.evaluate(inputs)
    survivors = [d.name for d in original.core.defs if d.type != A.SELECTOR and d.name in b]
    assert set(original.core.output.names) <= set(survivors)
    for name in survivors:
        for r, t in enumerate(inputs):
            assert a[name][r, : len(t)].tolist() == b[name][r, : len(t)].tolist(), (name, t)
    if original.output_kind != "generate":
        assert original.run_batch(inputs) == lowered.run_batch(inputs)


@pytest.mark.parametrize("name", sorted(LOWERS))
def test_lowers(name):
    source, fragment = LOWERS[name]
    p = rasp.parse(source)
    low = lower(p)
    assert low is not None, lower_explained(p)[1]
    assert not any(isinstance(n, RASPL_NODES) for d in low.core.defs for n in A.walk(d.expr))
    v = verdict_for_raspl(p)
    assert (v.fragment, v.guarantee) == (fragment, "guaranteed"), v.reasons
    assert v.rewritten is not None and not v.reasons
    # (conformance is not required: a map over a count breaks RASP-L's finite-map rule, but when it
    # lowers the program is C-RASP, which is what the verdict reports; see linear-count-map)


@pytest.mark.parametrize("name", sorted(LOWERS))
@given(data=st.data())
def test_lowered_evaluates_identically(name, data):
    p = rasp.parse(LOWERS[name][0])
    low = lower(p)
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    inputs = _random_inputs(p, np.random.default_rng(seed), 6, 40)
    assert_same(p, low, inputs)
    printed = rasp.parse(str(low))  # the proof as text parses back to the same function
    assert_same(p, printed, inputs)


@pytest.mark.parametrize("name", sorted(LOWERS))
def test_lowered_generators_agree(name):
    p = rasp.parse(LOWERS[name][0])
    if p.output_kind != "generate":
        pytest.skip("not a generator")
    low = lower(p)
    rng = np.random.default_rng(1)
    inputs = _random_inputs(p, rng, 20, 6)
    assert p.run_batch(inputs) == low.run_batch(inputs)


def test_at_least_ten_lower():
    assert len(LOWERS) >= 10


@pytest.mark.parametrize("name", sorted(CONJECTURED))
def test_conjectured(name):
    source, (line, col) = CONJECTURED[name]
    p = rasp.parse(source)
    assert lower(p) is None
    assert conformance(p) == []
    v = verdict_for_raspl(p)
    assert (v.fragment, v.guarantee) == ("RASP-L", "conjectured")
    assert len(v.reasons) == 1 and v.reasons[0].condition == "C-RASP operations"
    assert (v.reasons[0].line, v.reasons[0].col) == (line, col), v.reasons[0]


@pytest.mark.parametrize("name", sorted(VIOLATES))
def test_violates(name):
    source, expected, *own = VIOLATES[name]
    p = rasp.parse(source)
    v = verdict_for_raspl(p)
    assert (v.fragment, v.guarantee) == ("none", "none")
    got = [(r.line, r.col, r.condition) for r in v.reasons]
    assert got == expected, [(r.line, r.col, r.condition, r.message) for r in v.reasons]
    rl = [(r.line, r.col, r.condition) for r in conformance(p)]
    assert rl == (own[0] if own else [x for x in expected if x[2].startswith("RASP-L")])


def test_plain_crasp_is_the_checkers_verdict():
    from rasp import checker

    p = rasp.parse('alphabet a b\nD = #"a" - #"b"\nok = D == 0 && #[j == i - 1] "a" >= 1\n')
    assert verdict_for_raspl(p) == checker.check(p)


def test_lowering_keeps_families_and_names():
    p = rasp.parse(LOWERS["generator"][0])
    low = lower(p)
    text = str(low)
    assert "PREV2[x] = #[j == i - 2] Q[x] >= 1" in text
    assert "output generate NEXT" in text
    assert set(p.core.output.names) == set(low.core.output.names)


def test_lowering_with_another_alphabet():
    p = rasp.parse(LOWERS["histogram"][0]).with_alphabet(["x", "y", "z", "w"])
    low = lower(p)
    assert low.alphabet == ("x", "y", "z", "w")
    assert_same(p, low, [["x", "y", "x", "w", "x"], ["w"]])


def test_size_limit_gives_none_not_an_explosion():
    big = " ".join(str(k) for k in range(150))
    p = rasp.parse(f"alphabet {big}\nS = aggregate(select(tokens, tokens, <), tokens, mean, 0)\nok = S == 3\n")
    low, why = lower_explained(p)
    assert low is None and "limit" in why.message
    assert verdict_for_raspl(p).fragment == "RASP-L"


def test_readme_raspl_section_is_current():
    """The README's RASP-L examples: the files as shown, and every output line shown (lines elided
    with '...' aside) is in the current rendering."""
    import re
    from pathlib import Path

    from rasp.checker import render

    root = Path(__file__).resolve().parent.parent
    section = (root / "README.md").read_text().split("## RASP-L\n", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```\n(.*?)```", section, re.S)[0]
    parts = re.split(r"^\$ cat (\S+)\n", block, flags=re.M)[1:]
    assert len(parts) == 6
    fragments = []
    for name, body in zip(parts[0::2], parts[1::2]):
        path = root / "docs/examples/raspl" / name
        shown_src, shown_out = body.split(">>> ", 1)
        assert shown_src == path.read_text(), name
        explain = "explain=True" in shown_out.splitlines()[0]
        p = rasp.load(path)
        p = rasp.Program(p.module, p.checked, p.core, p.source, name)  # printed as in the README
        got = render(verdict_for_raspl(p), explain=explain).splitlines()
        for line in shown_out.splitlines()[1:]:
            if line.strip() != "...":
                assert line in got, (name, line)
        fragments.append(got[0].split(": ", 1)[1].split(" ")[0])
    assert fragments == ["C-RASP[local]", "RASP-L", "none"]


def test_base_verdict_is_reused():
    """Called from inside rasp.checker.check with the verdict computed so far (no second analysis,
    no recursion when check delegates to it)."""
    from rasp import checker

    p = rasp.parse(LOWERS["shift"][0], filename="shift.rasp")
    base = checker.check(p)  # "none" before the RASP-L analysis is wired into check, the same after
    v = verdict_for_raspl(p, base=base)
    assert v == verdict_for_raspl(p) and v.fragment == "C-RASP[local]" and v.program == "shift.rasp"


#: value-domain edges of the RASP-L conformance check (rasp.raspl._Conformance, SMALL = 256 values):
#: each program also holds a part that does not lower (an aggregate keyed by a selector width), so
#: its verdict comes from conformance: "RASP-L" when every map's domain stays finite and small
_CONFORMANCE_TAIL = ("W = selector_width(select(tokens, tokens, ==))\nU = aggregate(select(W, W, ==), tokens, max, 0)\n"
                     "ok = U == 1 && T\n")
_MEAN = "M = aggregate(select(indices, indices, true), V, mean)\n"
CONFORMANCE_EDGES = [
    ("sum of two means (199 values)", "V = map(x -> x * 99, tokens)\n" + _MEAN + "S = M + M\nT = map(x -> x > 5, S)\n", "RASP-L"),
    ("difference of means (-200..200)", "V = map(x -> x * 200, tokens)\n" + _MEAN + "S = M - M\nT = map(x -> x > 5, S)\n", "none"),
    ("sum of 257 values", "V = map(x -> x * 128, tokens)\n" + _MEAN + "S = M + M\nT = map(x -> x > 5, min(S, 100))\n", "none"),
    ("mean of 257 values", "V = map(x -> x * 256, tokens)\n" + _MEAN + "T = map(x -> x > 5, min(M, 100))\n", "none"),
    ("scaled mean, 256 values", "V = map(x -> x * 255, tokens)\n" + _MEAN + "S = 2 * M\nT = map(x -> x > 5, S)\n", "RASP-L"),
    ("map over 256 values", "V = map(x -> x * 255, tokens)\n" + _MEAN + "T = map(x -> x > 5, M)\n", "RASP-L"),
    ("folded conditional", 'C[x] = tokens if x == "a" else selector_width(select(tokens, tokens, ==))\n'
                           'T = map(v -> v == 1, C["a"])\n', "RASP-L"),
]


@pytest.mark.parametrize("name,body,fragment", CONFORMANCE_EDGES, ids=[c[0] for c in CONFORMANCE_EDGES])
def test_conformance_at_its_domain_limits(name, body, fragment):
    from rasp.checker import check

    assert check(rasp.parse("alphabet a b\n" + body + _CONFORMANCE_TAIL), with_task=False).fragment == fragment


def test_aggregate_cost_at_the_cap_lowers():
    """A mean of tokens over a 64-symbol alphabet under select(indices, indices, true) costs exactly
    the lowering's cap (4,096 cases): it lowers, so the verdict is C-RASP."""
    from rasp.checker import check

    alphabet = " ".join(f"t{k}" for k in range(64))
    p = rasp.parse(f"alphabet {alphabet}\nM = aggregate(select(indices, indices, true), tokens, mean)\nok = M == 3\n")
    assert check(p, with_task=False).fragment == "C-RASP"


def test_map_arithmetic_wraps_as_the_interpreter_does():
    """Maps are evaluated on int64 arrays, which wrap at 2^63; the lowering tabulates them the same
    way, so the lowered program (and the compiled model) agree with the interpreter even there."""
    p = rasp.parse("alphabet a b\nok = map(x -> x * 2000000000 * 2000000000 * 3 > 0, tokens)\n")
    low = lower(p)
    assert low is not None
    for toks in (["a"], ["b"], ["a", "b"], ["b", "a", "b"]):
        assert low.run(toks) == p.run(toks), toks
    assert p.run(["b"]) is False  # 1.2e19 wraps to a negative number


def test_lowering_wraps_constants_and_shifts_as_int64():
    """Found by an audit: constants folded in a map over a count, and the constant of ``indices + c``,
    were unbounded Python ints where the interpreter computes in int64. ``x + (2^64 - 1)`` is the
    predecessor shift ``x - 1`` (it lowered to a constant), ``2^62 * 4 % 7`` is 2 (it lowered to 4):
    both were "guaranteed" with a proof computing something else, and the compiled model disagreed.
    A shift whose sum can wrap for some position below 2^31, and keys and queries 2^31 or more
    apart, do not lower (the second was an AssertionError, an internal error)."""
    from compiler.bounded import compile_raspl

    big = "2147483647 * 2147483647 * 4 + 2147483647 * 8 + 3"  # 2^64 - 1: -1 in int64
    same = {
        "shift": f"alphabet a b\nPREV = aggregate(select(indices, map(x -> x + {big}, indices), ==), tokens, max, -1)\n"
                 "ok = PREV == 0\n",
        "fold": 'alphabet a b\nX = map(x -> x + 2147483647 * 2147483647 * 4 % 7, #"a")\nok = X == 2\n',
        "bounded": f"alphabet a b c\nW = selector_width(select(map(x -> x + {big}, indices), tokens, ==))\nok = W > 0\n",
    }
    rng = np.random.default_rng(3)
    inputs = _random_inputs(rasp.parse(same["shift"]), rng, 30, 30)
    for name, src in same.items():
        p = rasp.parse(src)
        low = lower(p) if name != "bounded" else None
        if low is not None:
            assert_same(p, low, inputs)
        model = compile_raspl(p, max_length=12 if name == "bounded" else None)
        short = [t for t in inputs if len(t) <= 12] if name == "bounded" else inputs
        assert [model.run(t) for t in short] == p.run_batch(short), name
    assert lower(rasp.parse(same["shift"])) is not None and verdict_for_raspl(rasp.parse(same["shift"])).fragment == "C-RASP[local]"
    refused = {
        "wraps": "alphabet a b\nK = map(x -> x + 2147483647 * 2147483647 * 2 + 2147483647 * 4 - 3, indices)\n"
                 "W = selector_width(select(K, K, <=))\nok = W == #true\n",
        "apart": "alphabet a b\nK = map(x -> x - (2147483647 + 1) * (2147483647 + 1) * 2, indices)\n"
                 "QQ = map(x -> x + (2147483647 + 1) * (2147483647 + 1), indices)\nW = selector_width(select(K, QQ, <=))\nok = W > 2\n",
        "apart-2^32": "alphabet a b\nK = map(x -> x + 2147483647 * 2, indices)\nV = aggregate(select(K, indices, ==), tokens, max, 0)\n"
                      "ok = V > 0\n",
    }
    for name, src in refused.items():
        p = rasp.parse(src)
        low, why = lower_explained(p)
        assert low is None and why.span is not None, name
        assert verdict_for_raspl(p).guarantee != "guaranteed", name


def test_a_relation_too_large_from_a_select_is_located():
    """The relation a shifted select lowers to carries the select's place: its error was unlocated."""
    p = rasp.parse("alphabet a b\nP = aggregate(select(indices, map(x -> x - 5000000, indices), <=), tokens, max, 0)\n"
                   "ok = P == 1\n")
    with pytest.raises(rasp.RaspError, match="window 5,000,001") as e:
        verdict_for_raspl(p)
    assert (e.value.span.line, e.value.span.column) == (2, 15)


def test_a_lowered_program_outside_names_the_guard_not_the_primitives():
    """Lowered, but a guard RASP-L takes as one select comparison is outside C-RASP: the reason is the
    guard (the selector_width that lowered fine was listed first)."""
    p = rasp.parse('alphabet a b\nW = selector_width(select(tokens, tokens, ==))\nok = #[2 * j <= i] "a" >= 1 && W > 2\n')
    v = verdict_for_raspl(p)
    assert [(r.line, r.condition) for r in v.reasons] == [(3, "translation invariance")]


def test_a_lowered_value_too_large_for_crasp_does_not_lower():
    """A map that multiplies a count past C-RASP's constants: not lowered, with the reason located at
    the definition (it was an AssertionError, an internal error in rasp check and rasp compile)."""
    p = rasp.parse('alphabet a b\nX = map(c -> c * 2000000000 * 2, #"a")\nok = X > 5\n')
    low, why = lower_explained(p)
    assert low is None and "too large for C-RASP" in why.message and (why.span.line, why.span.column) == (2, 1)
    assert verdict_for_raspl(p).fragment == "none"  # (the map is over a count: not RASP-L either)


def test_a_lowered_program_past_the_expansion_cap_does_not_lower(monkeypatch):
    """Lowering adds definitions (raspl_ur: 3 families become 58 definitions), so a program under the
    expansion cap can lower to one over it: that is a reason not to lower, located, not an
    AssertionError ("lowered program does not type-check"). The cap is lowered here to stand for a
    program near 2^22 copies."""
    import rasp.expand as E

    from pathlib import Path

    p = rasp.load(Path(__file__).resolve().parent.parent / "programs" / "raspl_ur.rasp")
    monkeypatch.setattr(E, "EXPANSION_CAP", 720)
    low, why = lower_explained(p)
    assert low is None and "lowered form is too large to expand" in why.message and why.span is not None


def test_lowered_generator_with_shared_nodes_keeps_counting_once_per_token():
    """The lowering shares one node among several expressions (here ``#[j <= i] true``); generation's
    step-by-step evaluator (used after the first tokens) advanced its count once per use, so the
    lowered program generated ``b b b b a a a`` where the original generates b seven times."""
    p = rasp.parse('alphabet a b c\nspecial "<s>"\nD0 = aggregate(select(indices, indices, <=), "b")\n'
                   'CODE[x] = sum(y, 1 if y < x else 0)\nNEXT[x] = D0 == CODE[x]\noutput generate NEXT\n')
    low = lower(p)
    for prompt in (["b"], ["a", "b"], ["c", "<s>"]):
        assert low.run(prompt, max_new=12) == p.run(prompt, max_new=12), prompt
    assert p.run(["b"], max_new=7) == ["b"] * 7


def test_positions_against_finite_values_lower_through_counts_of_every_position():
    """select(indices, q, op) with q finite (a constant, a token code) is the relation j op v for each
    value v: a guard of j alone, which plain C-RASP says with #true (rasp.rewrite.absolute_count).
    "The first token" and "the token at the position named by the current token" lower to C-RASP
    (they were RASP-L, conjectured), and the lowered program computes the same values."""
    first = rasp.parse('alphabet a b\nF = aggregate(select(indices, full(0), ==), tokens, max, -1)\nO = F == 0\n')
    at = rasp.parse('alphabet 0 1 2 3\nAT = aggregate(select(indices, tokens, ==), tokens, max, -1)\nok = AT == 2\n')
    early = rasp.parse('alphabet a b\nE = selector_width(select(indices, full(3), <))\nok = E > 2\n')
    rng = np.random.default_rng(3)
    for p in (first, at, early):
        v = verdict_for_raspl(p)
        assert v.fragment == "C-RASP" and v.guarantee == "guaranteed", [r.message for r in v.reasons]
        low = lower(p)
        assert_same(p, low, _random_inputs(p, rng, 40, 30))


_QUOTIENT_OPS = ["==", "!=", "<", "<=", ">", ">="]


@st.composite
def _quotient_bodies(draw) -> str:
    """A map body comparing a quotient of x (a count) by a constant, plus or minus y (a count) and
    constants, possibly negated or divided again, with y or a constant (either side)."""
    k = draw(st.integers(1, 5))
    q = f"x / {k}" if draw(st.booleans()) else f"(x / {k}) / {draw(st.integers(1, 3))}"
    for _ in range(draw(st.integers(0, 2))):
        q = draw(st.sampled_from([f"{q} + y", f"{q} - y", f"y - {q}", f"-({q})", f"{q} + 3", f"2 - {q}",
                                  f"1 * ({q})", f"({q}) * -1"]))
    other = draw(st.sampled_from(["y", "2", "-1", "y + 1", "0"]))
    op = draw(st.sampled_from(_QUOTIENT_OPS))
    return f"{q} {op} {other}" if draw(st.booleans()) else f"{other} {op} {q}"


@given(body=_quotient_bodies(), seed=st.integers(0, 2**32 - 1))
def test_quotients_of_counts_in_maps_lower_to_comparisons(body, seed):
    """``map(x -> x / 2 > 3, #"a")`` is ``#"a" >= 8`` (it was outside: '/' of an unbounded count): a
    quotient of a count by a constant, plus or minus counts and constants, compared with a count or
    a constant, lowers to comparisons of counts (floor(C / k) >= E iff C >= k E for an integer E). The
    verdict is C-RASP and the lowered program computes the same values on every input, at lengths
    past every constant, as the compiled model does."""
    import compiler

    p = rasp.parse(f'alphabet a b\nX = seqmap((x, y) -> {body}, #"a", #"b")\nok = X\n')
    v = verdict_for_raspl(p)
    assert v.fragment == "C-RASP", (body, [r.message for r in v.reasons])
    low = lower(p)
    rng = np.random.default_rng(seed)
    inputs = _random_inputs(p, rng, 12, 40)
    assert_same(p, low, inputs)
    model = compiler.compile(low)
    assert [model.run(t) for t in inputs[:4]] == [p.run(t) for t in inputs[:4]]


@pytest.mark.parametrize("body", ["x / 3 < 0 - 2147483647 * 1000", "x / 65536 / 65536 >= 1",
                                  "x / 7 == 2147483647", "x / 2 > 2147483647 * 3 + 5"])
def test_a_lowered_constant_past_the_largest_literal_prints_as_a_program(body):
    """k E can pass 2^31 - 1, the largest literal: the lowered program writes it as the parser reads
    ``2147483647 * q + r`` (helper 66: the proof printed ``A < -6442450941000``, which rasp check and
    rasp run refused), and the printed proof parses back to the same program."""
    p = rasp.parse(f'alphabet a b\nA = #"a"\nX = map(x -> {body}, A)\n')
    low = lower(p)
    assert low is not None and verdict_for_raspl(p).fragment == "C-RASP"
    again = rasp.parse(str(low))
    assert again.core == low.core
    inputs = [["a"] * n for n in (1, 5, 9)] + [["b", "a"] * 4]
    assert [again.run(t) for t in inputs] == [p.run(t) for t in inputs] == [low.run(t) for t in inputs]


def test_quotients_that_are_not_comparisons_stay_outside():
    """A residue of a count (parity), a quotient used as a number, two quotients compared, a quotient
    scaled by a constant other than 1 or -1: not lowered, each with its reason."""
    for body, word in [("x % 2 == 0", "a residue of a count"), ("x / 2", "used as a number"),
                       ("x / 2 >= x / 3", "two quotients"), ("x / 3 * 2 > 1", "'*' of a quotient")]:
        p = rasp.parse(f'alphabet a b\nX = map(x -> {body}, #"a")\nok = X > 0\n' if body == "x / 2" else
                       f'alphabet a b\nX = map(x -> {body}, #"a")\nok = X\n')
        low, why = lower_explained(p)
        assert low is None and word in why.message, (body, why)
        # the verdict says it beside RASP-L's reason at the same map (which is about finite domains)
        v = verdict_for_raspl(p)
        assert v.fragment == "none" and any(word in r.message for r in v.reasons), (body, v.reasons)


def test_constant_sequences_print_as_written():
    """full(k) parses to the constant k; as an argument of select, aggregate or map it prints as
    full(k) again (reasons quoted `select(tokens, 1, ==)`), and the text parses back to the same program."""
    src = ("alphabet a b\nW = selector_width(select(tokens, full(1), ==))\n"
           "V = aggregate(select(full(-2), tokens, <), full(3), mean, 0)\nM = map(x -> x + 1, full(-4))\n"
           "ok = W == 0 && V == 1 && M == -3\n")
    p = rasp.parse(src)
    assert str(p) == src
    assert rasp.parse(str(p)).module == p.module


def test_token_keys_keep_their_intersections():
    """With token keys, a prefix of token cases is written out so that each branch's count is of the
    tokens both name (shared by the branches with those tokens): named, every branch had counts of
    its own (an audit: 64 heads with two counts per value before 2026-12-02, 90 with the names, 57 now)."""
    from compiler.bounded import compile_raspl

    m = compile_raspl(rasp.parse(LOWERS["max-min-mixed-cases"][0]))
    assert m.size["heads"] < 64


_DESCENDING = {
    # one branch, a max over a shifted token value: raspl_count's START
    "max-one-branch": """alphabet 0 1 2 3
special "<sep>"
P2 = aggregate(select(indices, map(x -> x - 2, indices), ==), tokens, max, -1)
START = aggregate(select("<sep>", full(1), ==), P2, max, -1)
ok = START == 2 || START > 3
""",
    # a min, and a default equal to one of the values (the last test is then implied)
    "min-default-a-value": """alphabet 0 1 2 3
P1 = aggregate(select(indices, map(x -> x - 1, indices), ==), tokens, max, 0)
LOW = aggregate(select("3", full(1), ==), P1, min, 0)
ok = LOW == 0 || LOW == 2
""",
    # every position selects itself (nothing selected cannot happen: no default case)
    "max-always-selected": """alphabet a b c
P1 = aggregate(select(indices, map(x -> x - 1, indices), ==), tokens, max, 0)
TOP = aggregate(select(indices, indices, <=), P1, max, 0)
ok = TOP >= 1
""",
}


@pytest.mark.parametrize("name", sorted(_DESCENDING))
def test_max_and_min_aggregates_lower_to_a_descending_chain(name):
    """A max (min) aggregate's definition is the chain ``w_0 if G_0 else w_1 if G_1 else ...`` over
    its values, largest (smallest) first, where G_k says "a selected value is w_k or more (less)",
    one count compared with 1 per branch, not a chain of the exact cases (see _Lowerer.descending).
    The lowered program equals the original at every position of every input up to length 6."""
    p = rasp.parse(_DESCENDING[name])
    low = lower(p)
    assert low is not None, lower_explained(p)[1]
    name_ = next(s.name for s in p.module.statements if isinstance(s, A.Definition) and s.name not in ("P1", "P2", "PREV", "ok"))
    expr = next(d.expr for d in low.core.defs if d.name == name_)
    values = []
    while isinstance(expr, A.Cond):
        test = expr.test
        assert isinstance(test, A.Compare) and isinstance(test.left, A.Count) and test.op == ">="
        v = expr.then
        values.append(v.value if isinstance(v, A.IntConst) else -v.operand.value if isinstance(v, A.Neg) else -v.k * v.operand.value)
        expr = expr.other
    assert len(values) >= 2
    assert values == sorted(values, reverse="min" not in _DESCENDING[name].split(name_ + " = ")[1].split("\n")[0])
    inputs = [list(w) for n in range(1, 7) for w in itertools.product(p.symbols, repeat=n)]
    assert_same(p, low, inputs)


_SEVERAL_BRANCHES = {
    # one branch per query token: raspl_ur's AFTER
    "max-per-query-token": """alphabet a b c
special "<sep>"
PREV = aggregate(select(indices, map(x -> x - 1, indices), ==), tokens, max, -1)
AFTER = aggregate(select(PREV, tokens, ==), tokens, max, -1)
ok = AFTER == 1 || AFTER < 0
""",
    # helper 89's: as a descending chain of ors over the branches, ``A0 >= 0`` took 3 layers
    "max-of-a-map-per-query-value": """alphabet a b c d
VAL = map(x -> {0: 1, 1: 3, 2: 3, 3: 2}[x] - 1, tokens)
B = map(x -> x > 0, VAL)
A0 = aggregate(select(tokens, tokens, >), B, max, -2)
ok = A0 >= 0
""",
}


@pytest.mark.parametrize("name", sorted(_SEVERAL_BRANCHES))
def test_a_max_over_several_branches_keeps_the_chain_of_its_exact_cases(name):
    """With several selector branches "a selected value is w or more" is an or over them, a gate
    the compiler reads no implication from: the definition stays the chain of its exact cases
    (``NAME__v`` helpers), where a comparison with a constant reads one case (_Lowerer.descending)."""
    from compiler.bounded import compile_raspl

    p = rasp.parse(_SEVERAL_BRANCHES[name])
    low = lower(p)
    name_ = "AFTER" if "AFTER" in _SEVERAL_BRANCHES[name] else "A0"
    expr = next(d.expr for d in low.core.defs if d.name == name_)
    assert isinstance(expr, A.Cond) and isinstance(expr.test, A.Ref) and expr.test.name.startswith(name_ + "__")
    inputs = [list(w) for n in range(1, 6) for w in itertools.product(p.symbols, repeat=n)]
    assert_same(p, low, inputs)
    if name == "max-of-a-map-per-query-value":
        m = compile_raspl(p)
        # 3 layers as an or over the branches; 2 with the exact cases; 1 since a count of a set of
        # tokens reads the set as an embedding feature (no gate before the heads)
        assert m.size["layers"] == 1
        assert m.run_batch(inputs, dtype="float64") == p.run_batch(inputs)
