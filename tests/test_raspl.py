"""RASP-L primitives: the vectorized interpreter (rasp/interp.py, ``_Selector``) against the naive
evaluator (tests/naive.py, loops straight from the definitions), on every definition at every
position (selectors compared as the sets of selected keys), for random inputs.

* fixed programs that together use every primitive: ``tokens``, ``indices``, ``full``, ``map`` and
  ``seqmap`` (arithmetic, floor ``/`` and ``%``, comparisons, ``&& || !``, conditionals, tables with
  missing keys, symbol codes), ``select`` with every op (``== != < > <= >= true``), ``aggregate``
  with mean (negative sums: truncation toward zero; values near +-2^63, whose sums leave int64; map products that wrap around at 2^63), max and min with defaults, ``selector_width``,
  selector definitions, bool sequences as 0/1, and C-RASP mixed in (``#P`` of a map result);
* randomly generated RASP-L programs (:func:`random_program`);
* batches of rows of different lengths (padding must not leak) and tiny query chunks.

Profiles (tests/conftest.py): ``HYPOTHESIS_PROFILE=ci`` (default) or ``thorough``.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rasp
from rasp import interp
from naive import naive_output, naive_values

PROGRAMS = {
    "shift": """\
alphabet a b c
special "<s>"
PREV = aggregate(select(indices, map(x -> x - 1, indices), ==), tokens, mean, -1)
PREV2 = aggregate(select(map(x -> x + 2, indices), indices, ==), tokens, max, 7)
NEXT_SEP = aggregate(select(indices, map(x -> x - 1, indices), ==), map(t -> t == "<s>", tokens), max)
ok = PREV == PREV2 || NEXT_SEP == 1
""",
    "histogram": """\
alphabet a b c d
SAME = select(tokens, tokens, ==)
W = selector_width(SAME)
DIFF = selector_width(select(tokens, tokens, !=))
ALL = selector_width(select(indices, indices, true))
FIRST = aggregate(SAME, indices, min, -1)
LASTBEFORE = aggregate(select(tokens, tokens, ==), map(x -> x, indices), max)
ok = W + DIFF == ALL && FIRST <= LASTBEFORE
""",
    "ops": """\
alphabet 0 1 2 3 4 5 6 7 8 9
LT = aggregate(select(tokens, tokens, <), tokens, max, -3)
GT = aggregate(select(tokens, tokens, >), tokens, min, 42)
LE = selector_width(select(tokens, tokens, <=))
GE = selector_width(select(tokens, tokens, >=))
NE = aggregate(select(tokens, tokens, !=), tokens, mean, -9)
TT = aggregate(select(tokens, tokens, true), tokens, mean)
SEL_EARLIER = select(indices, indices, <)
E = aggregate(SEL_EARLIER, tokens, max, -1)
ok = LT + GT > LE + GE || NE == TT || E > 5
""",
    "mean": """\
alphabet a b c
NEGV = map(x -> {0: -3, 1: 1}[x], tokens)
M1 = aggregate(select(indices, indices, true), NEGV, mean)
M2 = aggregate(select(tokens, tokens, ==), map(x -> 0 - x * 7 + 2, indices), mean, 5)
M3 = aggregate(select(indices, map(x -> x - 3, indices), >=), NEGV, mean, -100)
ok = M1 + M2 + M3 < 0
""",
    "maps": """\
alphabet a b c d
special "<s>" "<e>"
T = map(x -> {0: 4, 2: -1, 3: 9}[x] if x != "<s>" else 100, tokens)
D = map(x -> (x - 3) / 2 + (x * 5) % 3, T)
B = map(x -> x > 2 && !(x == 4) || x == -1, T)
S2 = seqmap((x, y) -> x * y - (x if x > y else y), T, D)
S3 = seqmap((x, y) -> {0: 1, 1: 0}[x % 2] + y, indices, tokens)
CNT = #B
K = full(3)
KN = full(-2)
ok = CNT + K > S3 + KN || S2 > D
""",
    "bools": """\
alphabet a b
A = "a"
AB = map(x -> 1 - x, A)
MX = aggregate(select(indices, indices, true), A, max)
MN = aggregate(select(tokens, full(1), ==), A, min, 2)
MEANB = aggregate(select(indices, indices, true), A, mean)
CA = selector_width(select(A, full(1), ==))
WB = selector_width(select(A, A, ==))
ok = CA == #"a" && MX + MN >= MEANB && AB + WB > 0
""",
    "layers": """\
alphabet 0 1 2 3
special "<s>"
P1 = aggregate(select(indices, map(x -> x - 1, indices), ==), tokens, mean, 0)
P2 = aggregate(select(indices, map(x -> x - 1, indices), ==), P1, mean, 0)
SUMD = seqmap((x, y) -> (x + y) % 4, P1, P2)
W = selector_width(select(SUMD, tokens, ==))
R = aggregate(select(W, map(x -> x % 3, indices), <=), SUMD, max, -1)
C = #(W > 1) - #[j == i - 1] (R == 2)
ok = C >= 0
""",
    "wide_mean": """\
alphabet a b c
V1 = map(x -> (x % 3 - 1) * 2147483647, tokens)
V = map(x -> x * 2147483647 * 2, V1)
ALL = aggregate(select(indices, indices, true), V, mean)
SAME = aggregate(select(tokens, tokens, ==), V, mean, 7)
LATE = aggregate(select(indices, map(x -> x - 2, indices), >=), map(x -> x - 1, V), mean, -3)
WRAP = map(x -> x * 2147483647 * 2147483647 + 5, indices)
NEGW = map(x -> 0 - x * 2147483647 * 2147483647 * 3, indices)
ok = ALL > 0 || SAME < 0 || WRAP > NEGW
""",
    "int64_extremes": """\
alphabet a b c
MIN = map(x -> 65536 * 65536 * 65536 * 32768 + x % 2, tokens)
MX = aggregate(select(indices, indices, ==), MIN, max, 3)
MN = aggregate(select(tokens, tokens, ==), map(x -> 0 - x - 1, MIN), min, 4)
NEG = map(x -> -(0 - 65536 * 65536 * 65536 * 32768) + x, indices)
ok = MX == MIN && MN < 0 || NEG < 0
""",
    "generator": """\
alphabet a b c
N = selector_width(select(indices, indices, true))
PREV[x] = aggregate(select(indices, map(t -> t - 2, indices), ==), Q[x], max) == 1
NEXT[x] = PREV[x] && N < 9
output generate NEXT
""",
}

_PARSED = {name: rasp.parse(src) for name, src in PROGRAMS.items()}

MAX_LEN = 70


def tokens_for(program: rasp.Program, max_len: int = MAX_LEN):
    symbols = st.sampled_from(program.symbols)

    @st.composite
    def draw(draw_):
        n = draw_(st.integers(1, 10) | st.integers(1, max_len), label="length")
        return draw_(st.lists(symbols, min_size=n, max_size=n))

    return draw()


def _selected_sets(sel, row: int, n: int) -> list[list[int]]:
    """The interpreter's selector as naive.py writes it: per query i, the selected keys j."""
    out = [[] for _ in range(n)]
    for s, e, m in sel.masks():
        for q in range(s, min(e, n)):
            out[q] = [int(k) for k in m[row, q - s, :n].nonzero()[0]]
    return out


def assert_rows_match(program: rasp.Program, inputs: list[list[str]]) -> None:
    values = program.evaluate(inputs)
    for r, toks in enumerate(inputs):
        expected = naive_values(program.core, toks)
        for d in program.core.defs:
            if d.type == rasp.ast.SELECTOR:
                got = _selected_sets(values[d.name], r, len(toks))
            else:
                got = values[d.name][r, : len(toks)].tolist()
            assert got == expected[d.name], (d.name, toks)


def test_programs_use_every_primitive():
    seen = set()
    for p in _PARSED.values():
        for d in p.core.defs:
            for node in rasp.ast.walk(d.expr):
                seen.add(type(node).__name__)
                if isinstance(node, rasp.ast.Select):
                    seen.add("op " + node.op)
                if isinstance(node, rasp.ast.Aggregate):
                    seen.add("reduce " + node.reduction)
                if isinstance(node, rasp.ast.Map):
                    seen.add(f"map{len(node.params)}")
    want = {"Tokens", "Indices", "Map", "Select", "Aggregate", "SelectorWidth", "Count", "map1", "map2"}
    want |= {f"op {o}" for o in ("==", "!=", "<", ">", "<=", ">=", "true")}
    want |= {f"reduce {r}" for r in ("mean", "max", "min")}
    assert want <= seen, want - seen


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@given(data=st.data())
def test_single_input(name, data):
    program = _PARSED[name]
    assert_rows_match(program, [data.draw(tokens_for(program), label="tokens")])


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@given(data=st.data())
def test_batch(name, data):
    program = _PARSED[name]
    inputs = data.draw(st.lists(tokens_for(program, 40), min_size=2, max_size=4), label="batch")
    assert_rows_match(program, inputs)


@given(data=st.data())
def test_small_select_chunks(data):
    program = _PARSED["layers"]
    inputs = data.draw(st.lists(tokens_for(program, 40), min_size=1, max_size=3), label="batch")
    old = interp.SELECT_CHUNK
    interp.SELECT_CHUNK = 3
    try:
        assert_rows_match(program, inputs)
    finally:
        interp.SELECT_CHUNK = old


@given(data=st.data())
def test_generator_output(data):
    program = _PARSED["generator"]
    toks = data.draw(tokens_for(program, 12), label="tokens")
    assert rasp.run(program, toks) == naive_output(program.core, toks)


# ---------------------------------------------------------------------- random RASP-L programs
_FUNCS1 = [
    "x + {c}", "x - {c}", "x * {c}", "x / {m}", "x % {m}", "{c} - x", "-x + {c}",
    "{{0: {c}, 1: -1, 3: 2}}[x]", "x if x > {c} else {c} - x", "x == {c}", "x < {c} || x > {m}",
    "!(x >= {c})", "(x + {c}) % {m} == 0 && x != 1",
]
_FUNCS2 = [
    "x + y", "x - y", "x * {c} + y", "(x + y) % {m}", "x if x > y else y", "x == y", "x < y && y < {c}",
    "{{0: 1, 1: 0}}[x % 2] * y",
]
_OPS = ["==", "!=", "<", ">", "<=", ">=", "true"]


@st.composite
def random_program(draw):
    """A straight-line RASP-L program over alphabet a b c (codes 0 1 2) plus <s> (code 3):
    each definition is a map, seqmap, aggregate, selector_width, count or comparison of earlier
    sequences (ints and bools mixed; bools act as 0/1)."""
    seqs = ["tokens", "indices", '"a"', "full(2)"]
    bools = ['"b"']
    lines = ["alphabet a b c", 'special "<s>"']
    n_defs = draw(st.integers(2, 7))
    c = lambda: draw(st.integers(-3, 4))  # noqa: E731
    m = lambda: draw(st.integers(1, 4))  # noqa: E731
    for k in range(n_defs):
        kind = draw(st.sampled_from(["map", "seqmap", "agg", "width", "count", "cmp"]))
        s = draw(st.sampled_from(seqs + bools))
        t = draw(st.sampled_from(seqs + bools))
        name = f"D{k}"
        if kind == "map":
            f = draw(st.sampled_from(_FUNCS1)).format(c=c(), m=m())
            expr = f"map(x -> {f}, {s})"
        elif kind == "seqmap":
            f = draw(st.sampled_from(_FUNCS2)).format(c=c(), m=m())
            expr = f"seqmap((x, y) -> {f}, {s}, {t})"
        elif kind in ("agg", "width"):
            op = draw(st.sampled_from(_OPS))
            sel = f"select({s}, {t}, {op})"
            if kind == "width":
                expr = f"selector_width({sel})"
            else:
                v = draw(st.sampled_from(seqs + bools))
                red = draw(st.sampled_from(["mean", "max", "min"]))
                expr = f"aggregate({sel}, {v}, {red}, {c()})"
        elif kind == "count":
            b = draw(st.sampled_from(bools))
            expr = f"#{b}"
        else:
            x, y = draw(st.sampled_from(seqs)), draw(st.sampled_from(seqs))
            expr = f"{x} {draw(st.sampled_from(['<', '==', '>=']))} {y}"
        lines.append(f"{name} = {expr}")
        try:
            t_ = rasp.parse("\n".join(lines + [f"ok__ = true"])).checked.signatures[name].type
        except rasp.RaspError:  # e.g. a bool map body used where a count is needed
            lines.pop()
            continue
        (bools if t_ == rasp.ast.BOOL else seqs).append(name)
    lines.append(f"ok = {draw(st.sampled_from(bools))}")
    return rasp.parse("\n".join(lines) + "\n")


@given(program=random_program(), data=st.data())
def test_random_programs(program, data):
    inputs = data.draw(st.lists(tokens_for(program, 30), min_size=1, max_size=3), label="batch")
    assert_rows_match(program, inputs)


@given(program=random_program(), data=st.data())
def test_random_programs_stream(program, data):
    """The streaming evaluator (what generation uses after the first tokens) equals the interpreter
    at every position: each select row from the keys kept so far, each aggregate over the values
    kept so far."""
    from rasp import stream

    assert stream.supports(program)
    inputs = data.draw(st.lists(tokens_for(program, 30), min_size=1, max_size=3), label="batch")
    seqs = [program.encode(t) for t in inputs]
    want = interp.evaluate(program.core, interp.make_batch(seqs))
    got = stream.evaluate(program, seqs)
    assert set(got) == {k for k, v in want.items() if isinstance(v, np.ndarray)}
    for k, v in got.items():
        assert np.array_equal(v, want[k]), (k, v, want[k])


def test_stream_takes_raspl_inside_families_that_reads_no_variable():
    """A RASP-L primitive inside a family or a quantifier that reads none of its variables is one
    sequence: the streaming evaluator evaluates it once and broadcasts it over the instances, and its
    values equal the interpreter's at every position. One that reads a variable has a value per symbol:
    the stream does not take it (supports), and generation re-evaluates it."""
    from rasp import stream

    head = 'alphabet a b c\nspecial "<s>"\nAFTER = exists "<s>"\n'
    taken = [
        'NEXT[x] = AFTER && map(y -> y, indices) < 6 && x == "a"\noutput generate NEXT\n',
        'ANY = any(x, Q[x] && aggregate(select(tokens, tokens, ==), tokens, max) == 0)\n'
        'NEXT[x] = AFTER && x == "b" && (ANY || map(y -> y, indices) < 4)\noutput generate NEXT\n',
        'CODE[x] = sum(y, 1 if y < x else 0)\nP1 = aggregate(select(indices, map(z -> z - 1, indices), ==), tokens, max, -1)\n'
        'NEXT[x] = AFTER && P1 + 1 == CODE[x] && selector_width(select(tokens, full(3), ==)) < 3\noutput generate NEXT\n',
        'K[x, y] = Q[y] && aggregate(select(tokens, full(0), ==), indices, mean, 0) >= 1 && x != y\n'
        'NEXT[x] = AFTER && any(y, K[x, y]) && #"<s>" < 2\noutput generate NEXT\n',
    ]
    rng = np.random.default_rng(5)
    for src in taken:
        p = rasp.parse(head + src)
        assert stream.supports(p), src
        inputs = [[str(t) for t in rng.choice(["a", "b", "c", "<s>"], size=int(rng.integers(1, 25)))] for _ in range(6)]
        seqs = [p.encode(t) for t in inputs]
        want = interp.evaluate(p.core, interp.make_batch(seqs))
        got = stream.evaluate(p, seqs)
        for k, v in got.items():
            assert np.array_equal(v, want[k]), (src, k)
        prompts = [seqs[0], p.encode(["a", "b", "<s>"])]
        assert p._generate(prompts, 12) == p._generate_reevaluate(prompts, 12), src
    # the values Q[x]: one aggregate per symbol (whether an x occurred at an "a", i.e. whether x is "a")
    reads = rasp.parse(head + 'NEXT[x] = AFTER && aggregate(select(tokens, full(0), ==), Q[x], max, 0) == 1 '
                       '&& #"a" < 4\noutput generate NEXT\n')
    assert not stream.supports(reads)
    assert rasp.run(reads, "a b a <s>") == ["a", "a"] and rasp.run(reads, "b <s>") == []


def test_the_type_checker_records_raspl_primitives():
    """``Checked.raspl`` (what ``uses_raspl`` and the lowering's final check read instead of walking
    every definition) says whether the expanded program has a RASP-L node, for the fixed RASP-L
    programs here, the shared case table and every program in programs/."""
    from pathlib import Path

    import cases
    from rasp import ast as A
    from rasp.raspl import RASPL_NODES, uses_raspl

    sources = list(PROGRAMS.values()) + [c.source for c in cases.CASES]
    sources += [p.read_text() for p in sorted((Path(__file__).resolve().parent.parent / "programs").iterdir())]
    seen = {True: 0, False: 0}
    for src in sources:
        try:
            p = rasp.parse(src)
        except rasp.RaspError:
            continue
        walked = any(isinstance(n, RASPL_NODES) for d in p.core.defs for n in A.walk(d.expr))
        assert p.checked.raspl is walked and uses_raspl(p) is walked, src
        seen[walked] += 1
    assert seen[True] >= 10 and seen[False] >= 40
