"""Property tests: the vectorized interpreter (rasp/interp.py) against the naive evaluator
(tests/naive.py), on every definition at every position, for random inputs up to length 200,
batched (rows of different lengths padded together) and one at a time.

The fixed programs below cover every core operation and every interpreter path:

* plain counts (prefix sums), every comparison, + - k* -x, min/max, conditionals, constants;
* regular guards, window only (``j == i - 1``, ``i - j <= 3``, pred, pred4), period only
  (``(i - j) % 3 == 1``, ``j % 2 == 0``), window and period together, floor division, negative
  operands, ``!``/``||``/``true``/``false``, and windows longer than the input;
* the general O(n^2) path (``j <= 3``, ``j == i / 2``, ``2 * j >= i``, products of positions),
  also with a tiny query chunk so that chunk boundaries are crossed;
* positional predicates ``pos[...]`` (periodic and not) and ``pos_even``;
* families, any/all/sum, special tokens; counts of counts.

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

MAX_LEN = 200

PROGRAMS = {
    "arith": """\
alphabet a b c
A = #"a"
B = #"b"
C = #"c"
S = A + B - 2 * C
N = -S + C * 3
LT = A < B
GT = A > B
LE = A <= C
GE = B >= C
EQ = A == B
NE = S != 0
BEQ = LT == GT
BNE = "a" != LE
M1 = min(A - B, C - 2)
M2 = max(S, -N)
K = 5
T = true
F = !false && T
IF1 = A if "a" || "b" else B - 7
IF2 = "c" if EQ else !NE
L = #(LT && !GT) + #(IF2 || F)
ok = L > K && BNE
""",
    "window": """\
#import pred
#import pred4
alphabet a b c
P1 = #[j == i - 1] "a"
P2 = #[pred] "b"
P3 = #[pred4] "c"
W3 = #[i - j <= 3] "a"
W0 = #[j == i] "b"
D12 = #[!(j == i) && i - j < 3] Q["c"]
BIG = #[i - j < 300 && i - j > 150] "a"
NEAR = exists[i - j == 2 || i - j == 7] "b"
DIV = #[(j - i) / 2 == -1] "a"
DIV3 = #[(i - j) / 3 == 1] "b"
TT = #[true] "c"
FF = #[false] "c"
ok = P1 + P2 + P3 + DIV > W3 + DIV3 || NEAR
""",
    "periodic": """\
alphabet a b c
M3 = #[(i - j) % 3 == 1] "a"
J2 = #[j % 2 == 0] "b"
I2 = #[i % 2 == 1] "c"
WP = #[i - j > 2 && (i - j) % 2 == 0] "a"
NM = #[(j - i) % 4 == 1] "b"
OR = #[(i - j) % 7 == 3 || j % 5 == 2] "c"
MIX = #[(i + 2 * j) % 3 == 0 && i - j >= 4] "a"
DV = #[(i - j) / 2 % 2 == 0] "b"
FAR = #[i - j >= 2] "a"
NOT = #[!((i - j) % 3 == 0) || i - j < 5] "c"
BLK2 = #[i / 2 - j / 2 == 0] "b"
BLK3 = #[(i + 1) / 3 == (j + 1) / 3] "a"
PAR = #[i % 2 == j % 2] "c"
POLY = #[(i * j + 3 * i) % 4 == 1 || ((i - j) * (i - j) / 2) % 3 == 1] "b"
C1 = #[j >= 0 && (i - j) % 2 == 0] "a"
C2 = #[i + j != -1 || j == i - 1] "b"
C3 = #[3 * j + i < 0 || i - j == 2] "c"
ok = M3 + J2 > I2 + WP || NM + OR + MIX + DV + FAR == NOT || BLK2 + BLK3 + PAR < C1 + C2 + C3 + POLY
""",
    "general": """\
alphabet a b c
J3 = #[j <= 3] "a"
HALF = #[j == i / 2] "b"
SECOND = #[2 * j >= i] "c"
PROD = #[(i * j) / 5 == 1] "a"
ABS = #[i >= 10 && j >= i - 4] "b"
SQ = #[j * j <= i] "c"
FIRST = #[j == 0] "a"
J1 = #[j >= 1 && i - j <= 2] "b"
ok = J3 + HALF + FIRST > SECOND + PROD || ABS == SQ
""",
    "pos": """\
#import pos_even
alphabet a b
P3 = pos[i % 3 == 1]
P0 = pos[i == 0]
P5 = pos[i >= 5]
PD = pos[i / 4 % 2 == 0]
PT = pos[true]
PC = pos[1 == 2]
E = pos_even
CNT = #(P3 && "a") + #(PD || E)
ok = (CNT > #"b") == P5
""",
    "families": """\
alphabet a b c
special "<s>"
PREV[x] = exists[j == i - 1] Q[x]
BIGRAM[x, y] = exists (PREV[x] && Q[y])
AFTER_A[y] = exists (PREV["a"] && Q[y])
FIRST[x] = Q[x] && #Q[x] == 1
ANY = any(x, Q[x] && PREV[x])
ALL = all(y, AFTER_A[y])
DATA = sum(x, #Q[x])
DISTINCT = sum(x, 1 if exists Q[x] else 0)
SEP = #"<s>"
NEXT[y] = exists[j == i - 1] "<s>" && any(x, Q[x] && BIGRAM[x, y])
ok = ALL || DATA == DISTINCT + SEP
""",
    "nested": """\
alphabet "(" ")"
D = #"(" - #")"
NEG = #(D < 0)
DEPTH2 = #[i - j <= 5] (D >= 2)
PER = #[(i - j) % 2 == 0] (D == 0 || NEG > 0)
GEN = #[j <= 7] (DEPTH2 > 1)
ok = D == 0 && NEG == 0
""",
}

_PARSED = {name: rasp.parse(src) for name, src in PROGRAMS.items()}


def tokens_for(program: rasp.Program, max_len: int = MAX_LEN):
    """Random inputs over the program's symbols; lengths spread over 1..max_len (hypothesis alone
    would mostly draw short lists), short ones still likely."""
    symbols = st.sampled_from(program.symbols)

    @st.composite
    def draw(draw_):
        n = draw_(st.integers(1, 12) | st.integers(1, max_len), label="length")
        return draw_(st.lists(symbols, min_size=n, max_size=n))

    return draw()


def assert_rows_match(program: rasp.Program, inputs: list[list[str]]) -> None:
    values = program.evaluate(inputs)
    for r, toks in enumerate(inputs):
        expected = naive_values(program.core, toks)
        for d in program.core.defs:
            got = values[d.name][r, : len(toks)].tolist()
            assert got == expected[d.name], (d.name, toks)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_uses_expected_paths(name):
    """Sanity: the programs really exercise both guard paths where intended."""
    from rasp.guards import GuardForm, analyze_relation

    forms = []
    for d in _PARSED[name].core.defs:
        for node in rasp.ast.walk(d.expr):
            if isinstance(node, rasp.ast.Count) and node.guard is not None:
                forms.append(analyze_relation(node.guard.expr))
    if name in ("window", "periodic"):
        assert forms and all(isinstance(f, GuardForm) for f in forms)
    if name == "general":
        assert forms and not any(isinstance(f, GuardForm) for f in forms)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@given(data=st.data())
def test_single_input(name, data):
    program = _PARSED[name]
    toks = data.draw(tokens_for(program), label="tokens")
    assert_rows_match(program, [toks])


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@given(data=st.data())
def test_batch(name, data):
    program = _PARSED[name]
    inputs = data.draw(st.lists(tokens_for(program, 80), min_size=2, max_size=5), label="batch")
    assert_rows_match(program, inputs)


@given(data=st.data())
def test_general_path_small_chunks(data):
    program = _PARSED["general"]
    inputs = data.draw(st.lists(tokens_for(program, 60), min_size=1, max_size=3), label="batch")
    old = interp.GENERAL_CHUNK
    interp.GENERAL_CHUNK = 7  # queries in chunks of 7: chunk boundaries are crossed
    try:
        assert_rows_match(program, inputs)
    finally:
        interp.GENERAL_CHUNK = old


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@given(data=st.data())
def test_accept_output(name, data):
    """run_batch (the acceptor at each row's last position) against the naive output."""
    program = _PARSED[name]
    inputs = data.draw(st.lists(tokens_for(program, 60), min_size=1, max_size=4), label="batch")
    assert program.run_batch(inputs) == [naive_output(program.core, t) for t in inputs]


PREDICTOR = """\
alphabet a b c
ALLOWED[x] = #Q[x] <= #[i - j < 4] "a" && !(Q[x] && pos[i % 3 == 0])
output predict ALLOWED
"""

GENERATOR = """\
alphabet a b c
special "<s>"
PREV[x] = exists[j == i - 1] Q[x]
BIGRAM[x, y] = exists (PREV[x] && Q[y])
NEXT[y] = exists "<s>" && any(x, Q[x] && BIGRAM[x, y]) && #Q[y] < 4
output generate NEXT
"""


@given(data=st.data())
def test_predictor_output(data):
    program = rasp.parse(PREDICTOR)
    inputs = data.draw(st.lists(tokens_for(program, 60), min_size=1, max_size=4), label="batch")
    assert program.run_batch(inputs) == [naive_output(program.core, t) for t in inputs]


@given(data=st.data())
def test_generator_output(data):
    program = rasp.parse(GENERATOR)
    inputs = data.draw(st.lists(tokens_for(program, 12), min_size=1, max_size=3), label="batch")
    max_new = data.draw(st.none() | st.integers(0, 6), label="max_new")
    assert program.run_batch(inputs, max_new=max_new) == [naive_output(program.core, t, max_new) for t in inputs]


def test_long_input_spot_check():
    """One long input per path (beyond the property tests' lengths), against the naive evaluator."""
    rng = np.random.default_rng(0)
    for name in ("window", "pos"):
        program = _PARSED[name]
        toks = [program.symbols[k] for k in rng.integers(0, len(program.symbols), 400)]
        assert_rows_match(program, [toks])


@pytest.mark.parametrize("guard", ["j <= 2", "7 >= j", "j % 3 == 1 || j > 7", "j == 0", "j * j <= 30",
                                   "i >= 5", "i * i <= 30", "i % 4 == 3 && i < 9"])
def test_guards_of_one_position_take_a_mask(guard):
    """A relation of j alone or of i alone is a mask over positions (O(N), where the general path
    built N x N matrices: first3.rasp at 65,536 tokens took 26 s, now 0.015 s), and a running sum in
    the streaming evaluator; both equal to the naive evaluator's count at every position."""
    from rasp import stream

    p = rasp.parse(f'alphabet a b\nX = #[{guard}] "a"\nE = exists[{guard}] "b"\n')
    rng = np.random.default_rng(1)
    for _ in range(40):
        t = list(rng.choice(["a", "b"], size=int(rng.integers(1, 40))))
        got, want = p.evaluate([t]), naive_values(p.core, t)
        streamed = stream.evaluate(p, [p.encode(t)])  # (the streaming evaluator's O(1) step for them)
        for k in want:
            assert list(np.asarray(got[k])[0]) == list(want[k]) == list(streamed[k][0]), (k, t)
