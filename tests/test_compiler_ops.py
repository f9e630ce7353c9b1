"""The compiler operation by operation: every C-RASP[periodic, local] operation, random programs
(hypothesis), the exact Boolean gates, the sign sublayer at every scale, long inputs in float32 and
bfloat16, and located errors for programs outside the class."""
from __future__ import annotations

import itertools
import json
import math
import random
import re
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import compiler
import rasp
from compiler import boolean as B
from compiler import verify as V
from compiler.model import CompiledTransformer
from rasp.strategies import programs


pytestmark = pytest.mark.usefixtures("one_thread")  # (tests/conftest.py)


def _bool_defs(program: rasp.Program) -> list[str]:
    return [d.name for d in program.core.defs if d.type == "bool" and "[" not in d.name]


def agree_everywhere(text: str, lengths=(1, 2, 3, 4, 5, 7, 9, 12, 30, 200), per_length=6, seed=0,
                     dtypes=("float32",)):
    """Compile one acceptor per bool definition and compare it with the interpreter at every prefix
    of random inputs."""
    base = rasp.parse(text)
    rng = np.random.default_rng(seed)
    inputs = [[str(s) for s in rng.choice(list(base.symbols), size=n)] for n in lengths for _ in range(per_length)]
    names = _bool_defs(base)
    assert names
    for name in names:
        p = rasp.parse(re.sub(r"(?m)^output .*$", "", text) + f"\noutput accept {name}\n")
        m = compiler.compile(p)
        for dt in dtypes:
            same, _, _, _, _ = V.check_inputs(m, inputs, [None] * len(inputs), dtype=dt, device="cpu")
            assert all(same), (name, dt, inputs[same.index(False)])
    return names


# ----------------------------------------------------------------------------- operations
def test_tokens_logic_and_constants():
    agree_everywhere("""
alphabet a b c
A = "a"
NA = !"a"
AB = "a" || "b"
NOTC = !("c") && true
F = false || "a" && !"b"
T = true
FF = false
EQ = "a" == NA
NE = AB != "c"
X = "a" if "b" || "c" else !"a"
Y = ("a" && !"b") || ("b" && !"c") || ("c" && !"a")
""")


def test_every_comparison_with_constants_and_arithmetic():
    agree_everywhere("""
alphabet a b
A = #"a"
B = #"b"
LT = A < B
LE = A <= B + 1
GT = A > 2 * B - 3
GE = A >= 3
EQ = A == B
NE = A != 2
NEG = -A + B > 0
SCALE = 3 * A - 2 * B == 1
CONST = 2 < 3
CONST2 = A - A > 0
ALL = #true >= 2 * A
""")


def test_local_counts_alone_and_mixed_with_counts():
    agree_everywhere("""
alphabet a b
#import pred
#import pred4
P1 = exists[j == i - 1] "a"
P4 = #[pred4] "b" >= 1
PR = #[pred] "a" == 0
W = #[i - j <= 2] "a" >= 2
FAR = #[j <= i - 2] "a" > #"b" - 3
MIX = #"a" + #[j == i - 1] "b" - #[j == i] "a" >= #"b"
SELF = #[j == i] "a" == 1
TWO = #[j == i - 1] "a" + #[j == i - 2] "a" == 2
""")


def test_wide_local_windows_compile():
    """A count past a wide window, #[i - j > 20] P, is #P minus 21 local counts: its comparisons' local
    part ranges over 22 values, one head each (the compiler refused more than 16: an in-class program
    that did not compile); up to 1,024 values compile, and are exact in the dtypes the model lists."""
    agree_everywhere("""
alphabet a b
FAR = #[i - j > 20] "a" >= 3
FARTHER = #[i - j > 200] "a" - #[i - j > 200] "b" >= 1
""", lengths=(1, 5, 21, 22, 60, 230, 600), per_length=3, dtypes=("float32", "float64"))
    many = " + ".join(f'#[i - j > 255] "{s}"' for s in "abab")  # 4 x 256 local counts: 1,025 values
    with pytest.raises(rasp.RaspError, match="ranges over 1025 values"):
        compiler.compile(rasp.parse(f"alphabet a b\nX = {many} >= 3\n"))


def test_min_max_and_count_conditionals():
    agree_everywhere("""
alphabet a b c
A = #"a"
B = #"b"
C = #"c"
MIN = min(A, B) >= C
MAX = max(A, B) < C + 1
MIX = min(A, max(B, C)) == B
NEGMIN = -min(A, B) + C > 0
COND = (A if "a" else B) > C
COND2 = (A if exists "c" else 0) + (B if "a" else C) >= 2
EQC = (A if "b" else B + 1) == (C if "a" else A)
""")


def test_periodic_predicates_and_guards():
    agree_everywhere("""
alphabet a b
#import pos_even
E = pos_even
P3 = pos[i % 3 == 1]
NP = !pos[i % 4 == 0] && "a"
G = #[(i - j) % 2 == 0] "a" > #[(i - j) % 2 == 1] "a"
G3 = #[(i - j) % 3 == 0 && i - j >= 1] "b" >= 1
POSJ = #("a" && pos[i % 2 == 0]) == #("a" && pos[i % 2 == 1])
MIXED = (#"a" if pos[i % 2 == 0] else #"b") + (#"b" if pos[i % 3 == 0] else 0) >= 2
""")


def test_nested_counts_and_deep_bool_chains():
    agree_everywhere("""
alphabet a b
D = #"a" - #"b"
NEG = #(D < 0)
OK = D == 0 && NEG == 0
DEEP = #(#(#"a" > #"b") > #"b") >= 2
CH = (("a" || NEG > 0) && (D > 1 || "b")) || (OK && !"a") || (DEEP && D != 3)
""")


def test_exclusivity_negations_and_compound_tests():
    """Programs that reach the graph pass's less common paths (each was found by mutation testing:
    a deliberately broken line there passed every other compiler test):
    exclusivity of a token with a negated token (X1) and of forms that require the same token (X2);
    periodic literals whose periods' lcm exceeds PERIOD_CAP (71 * 73, treated as not exclusive);
    count conditionals whose test is a negation or an and/or of tokens (C1, C2, C3); constants
    and negated literals in the local part of an atom (``#[j == i] true``, ``#[j == i] !"a"``);
    ``min``/``max`` compared with ``==`` a nonzero constant; the and of two negated multi-term
    forms (NPR); counts of bare periodic literals (the BOS position must not count)."""
    agree_everywhere("""
alphabet a b c
X1 = "a" || !"b"
OK1 = #X1 == #"a" + #"c"
C1 = (#"a" if !"a" else #"b") + (#"b" if "a" else #"c") >= 1
C2 = (#"a" if "a" && "b" else #"b") + (#"c" if "a" || "b" else 0) >= 1
C3 = (#"a" if "a" || "b" else #"b") >= 1
""")
    agree_everywhere("""
alphabet a b
P = pos[i % 71 == 0] || pos[i % 73 == 0]
OKP = #P == 1
X2 = ("a" && #"b" > 0) || ("a" && #"b" > 1)
OK2 = #X2 == #("a" && #"b" > 0)
L1 = #"a" + #[j == i] true >= 2
L2 = #"b" + #[j == i] !"a" >= 2
M1 = min(#"a", #"b") == 1
M2 = max(#"a", #"b") == 2
PC = #pos[i % 2 == 1] > #pos[i % 2 == 0]
PC3 = #(pos[i % 3 == 2]) >= 1
""", lengths=(1, 2, 3, 4, 5, 7, 9, 12, 30, 200, 400))
    agree_everywhere("""
alphabet a b c d
P = ("a" && #"b" > 1) || ("b" && #"a" > 1)
R = ("c" && #"a" > 2) || ("d" && #"b" > 2)
NPR = !P && !R
""")


def test_generator_prompt_shorter_than_its_local_offset():
    """Cached decoding of a generator whose local head looks 2 back, from prompts of 1 and 2 tokens:
    the cache starts with BOS's value where the offset reaches before the input (every prompt of up
    to 3 tokens, against the interpreter)."""
    p = rasp.parse('alphabet a b\nspecial "<s>"\n'
                   'NEXT[x] = (!Q[x] if exists[j == i - 2] "b" else Q[x]) && !Q["<s>"]\n'
                   "output generate NEXT\n")
    m = compiler.compile(p)
    prompts = [list(t) for n in (1, 2, 3) for t in itertools.product(p.symbols, repeat=n)]
    for dtype in ("float32", "float64"):
        same, _, _, _, _ = V.check_inputs(m, prompts, [None] * len(prompts), dtype=dtype, max_new=6)
        assert all(same), (dtype, prompts[same.index(False)])
    assert m.run(["b"], max_new=4) == rasp.run(p, ["b"], max_new=4)


def test_families_and_three_output_kinds():
    fam = """
alphabet a b c
special "<sep>"
PREV[x] = exists[j == i - 1] Q[x]
BIGRAM[x, y] = exists (PREV[x] && Q[y])
SEP = exists[j == i - 1] "<sep>"
ANY = any(x, Q[x] && BIGRAM[x, "a"])
ALL = all(x, exists Q[x])
S = sum(x, #Q[x]) >= 3
NEXT[y] = SEP && any(x, Q[x] && BIGRAM[x, y])
"""
    agree_everywhere(fam + "output accept ANY\n")
    rng = np.random.default_rng(3)
    for kind in ("generate", "predict"):
        p = rasp.parse(fam + f"output {kind} NEXT\n")
        m = compiler.compile(p)
        assert m.kind == kind
        inputs = [[str(s) for s in rng.choice(list(p.symbols), size=n)] for n in (1, 4, 9, 20) for _ in range(8)]
        for toks in inputs[:6]:
            assert m.run(toks) == rasp.run(p, toks)
        same, _, _, _, _ = V.check_inputs(m, inputs, [None] * len(inputs))
        assert all(same)


def test_quantifiers_over_a_large_alphabet():
    """any/all/sum over 2,000 symbols: expanded as balanced trees, so checking, running and compiling
    do not recurse 2,000 deep (left-nested chains made `rasp check` fail from about 450 symbols and
    `rasp run` exit 1 at 2,000); the model agrees with the interpreter."""
    from rasp.checker import check

    symbols = [f"s{k}" for k in range(2000)]
    p = rasp.parse(f"alphabet {' '.join(symbols)}\n"
                   "TWICE = any(x, Q[x] && #Q[x] > 1)\n"
                   "ALL = all(x, #Q[x] < 3)\n"
                   "S = sum(x, #Q[x]) >= 3\n"
                   "OUT = TWICE && ALL && S\n")
    assert rasp.ast.depth(p.core.defs[0].expr) < 40
    assert check(p, with_task=False).in_class
    m = compiler.compile(p)
    # TWICE: the last token occurred before; ALL: no token three times; S: at least three tokens
    cases = [["s1", "s2", "s1"], ["s1", "s2", "s3"], ["s5", "s5", "s5"], ["s1999", "s7", "s1999"],
             ["s0", "s1999", "s0", "s7"], ["s3"]]
    expected = [True, False, False, True, False, False]
    assert [rasp.run(p, t) for t in cases] == expected
    assert [m.run(t) for t in cases] == expected


def test_generator_run_matches_interpreter_and_max_new():
    p = rasp.load("programs/ur.rasp").with_alphabet(["a", "b", "c"])
    m = compiler.compile(p)
    toks = "a b c a <sep> b".split()
    assert m.run(toks) == rasp.run(p, toks)
    assert m.run(toks, max_new=0) == []
    copy = rasp.load("programs/uf.rasp").with_alphabet(["a", "b", "c", "d"])
    mc = compiler.compile(copy)
    for toks in (["b", "d", "a", "<sep>"], ["c", "<sep>"], ["a", "b", "c", "d", "<sep>"]):
        assert mc.run(toks) == rasp.run(copy, toks) == [t for t in toks if t != "<sep>"]
        assert mc.run(toks, max_new=2) == rasp.run(copy, toks, max_new=2)


def test_max_new_as_a_numpy_integer():
    """A NumPy integer limit is read as a Python int: np.uint8(250) overflowed in the sum that sizes the
    local heads' ring (offset 7 read the wrong slots), and np.int8(120) was a RuntimeError."""
    p = rasp.parse('alphabet a b c\nF[x] = exists[j == i - 7] Q[x]\n'
                   'NEXT[x] = (F[x] || !exists[j == i - 7] true && x == "b") && #true < 30\noutput generate NEXT\n')
    m = compiler.compile(p)
    prompt = "a b c a c c b a b c"
    want = rasp.run(p, prompt, max_new=250)
    assert len(want) == 20
    for k in (np.uint8(250), np.int16(250), np.int8(120)):
        assert m.run(prompt, max_new=k) == rasp.run(p, prompt, max_new=k) == want


@settings(max_examples=40)
@given(programs(alphabet=("a", "b"), fragment="C-RASP[periodic,local]", max_depth=3, max_size=20),
       st.integers(0, 2**31 - 1))
def test_random_programs_agree(program, seed):
    m = compiler.compile(program)
    rng = np.random.default_rng(seed)
    inputs = [[str(s) for s in rng.choice(list(program.symbols), size=n)] for n in (1, 2, 3, 5, 8, 13, 40)]
    if m.kind == "generate":
        for toks in inputs[:4]:
            assert m.run(toks, max_new=10) == rasp.run(program, toks, max_new=10)
    same, _, _, _, _ = V.check_inputs(m, inputs, [None] * len(inputs), max_new=10)
    assert all(same), str(program)


# ----------------------------------------------------------------------------- out of the class
@pytest.mark.parametrize("text, what", [
    ('alphabet a b\nX = #[2 * j <= i] "a" > 1', "2 * j <= i"),  # (#[j <= 3] is C-RASP through #true)
    ('alphabet a b\nX = pos[i * i <= 25] && "a"', "pos[i * i <= 25]"),
    ('alphabet a b\nX = #[j == i / 2] "a" > 1', "j == i / 2"),
])
def test_out_of_class_is_a_located_error(text, what):
    p = rasp.parse(text, filename="bad.rasp")
    with pytest.raises(rasp.RaspError) as info:
        compiler.compile(p)
    err = info.value
    assert "not in C-RASP[periodic, local]" in err.message and "rasp check" in err.message
    assert err.line == 2 and err.column is not None
    assert what in err.render() and "bad.rasp:2:" in err.render()


def test_rasp_l_primitives_are_a_located_error_for_compile():
    """compiler.compile takes C-RASP; RASP-L programs go through compiler.bounded.compile_raspl."""
    p = rasp.parse('alphabet a b\nT = aggregate(select(indices, indices, ==), tokens, max, -1)\nY = exists "a"')
    with pytest.raises(rasp.RaspError) as info:
        compiler.compile(p)
    assert "RASP-L operation" in info.value.message and info.value.line == 2


# ----------------------------------------------------------------------------- Boolean gates
class _Ctx:
    """A context for Boolean forms over plain variables (node ids >= 2), materializing into new ids."""

    def __init__(self):
        self.next = 100
        self.defs = {}

    def slot_of(self, n):
        return 0

    def exclusive(self, a, b):
        return a[0] == b[0] and a[1] != b[1]

    def forms_exclusive(self, f, g):
        return all(B.terms_exclusive(self, t, u) for t in f.terms for u in g.terms)

    def terms_exclusive(self, t, u):
        return B.terms_exclusive(self, t, u)

    def test_excludes(self, t, u):
        return B.terms_exclusive(self, t, u)

    def materialize(self, f):
        lit = B.as_lit(f)
        if lit is not None:
            return lit
        n = self.next
        self.next += 1
        self.defs[n] = f
        return (n, False)

    def value(self, f, assign):
        """Evaluate a form, expanding materialized nodes."""
        full = dict(assign)
        for n, g in sorted(self.defs.items()):  # a materialized node only reads earlier ones
            full[n] = int(g.eval(full))
        return f.eval(full)


def _gate_value(f, assign: dict, bos: bool = False) -> float:
    """What the MLP neurons of a form output (float64), at a real position or at BOS."""
    x = {B.BOS: 1.0 if bos else 0.0, B.REAL: 0.0 if bos else 1.0}
    for n, v in assign.items():
        x[n] = 0.0 if bos else float(v)
    return sum(c * max(0.0, sum(w * x[n] for n, w in pre)) for pre, c in B.gate_neurons(f))


@pytest.mark.parametrize("seed", range(30))
def test_boolean_forms_and_gates_are_exact(seed):
    rnd = random.Random(seed)
    ctx = _Ctx()
    vars_ = [2, 3, 4, 5, 6]
    leaves = [B.lit_form((v, False)) for v in vars_]

    def build(depth):
        if depth == 0 or rnd.random() < 0.25:
            f = rnd.choice(leaves)
            return B.f_not(f) if rnd.random() < 0.3 else f
        op = rnd.choice(["and", "or", "not", "cond"])
        if op == "not":
            return B.f_not(build(depth - 1))
        if op == "cond":
            return B.f_cond(ctx, build(depth - 1), build(depth - 1), build(depth - 1))
        a, b = build(depth - 1), build(depth - 1)
        return B.f_and(ctx, a, b) if op == "and" else B.f_or(ctx, a, b)

    # the semantic reference: the same random choices evaluated directly
    state = rnd.getstate()
    f = build(4)
    rnd.setstate(state)

    def ref(depth, a):
        if depth == 0 or rnd.random() < 0.25:
            v = rnd.choice(vars_)
            val = a[v]
            return (not val) if rnd.random() < 0.3 else bool(val)
        op = rnd.choice(["and", "or", "not", "cond"])
        if op == "not":
            return not ref(depth - 1, a)
        if op == "cond":
            t, x, y = ref(depth - 1, a), ref(depth - 1, a), ref(depth - 1, a)
            return x if t else y
        x, y = ref(depth - 1, a), ref(depth - 1, a)
        return (x and y) if op == "and" else (x or y)

    for bits in itertools.product((0, 1), repeat=len(vars_)):
        a = dict(zip(vars_, bits))
        rnd.setstate(state)
        want = ref(4, a)
        assert ctx.value(f, a) == want
        full = dict(a)
        for n, g in sorted(ctx.defs.items()):
            full[n] = int(g.eval(full))
            assert _gate_value(g, full) == full[n]
        assert _gate_value(f, full) == float(want)  # exactly 0.0 or 1.0
        assert _gate_value(f, full, bos=True) == 0.0  # every bool is 0 at BOS
        for t in f.terms:
            assert t.W <= B.WEIGHT_CAP


def test_threshold_normal_form():
    assert B.make_thr({(2, False): 1, (3, False): 1}, 3) is False
    assert B.make_thr({(2, False): 1}, 0) is True
    t = B.make_thr({(2, False): 1, (2, True): 1}, 1)  # x + not x >= 1: always
    assert t is True
    t = B.make_thr({(2, False): 3, (3, False): 3}, 3)  # gcd and clamping: x or y
    assert t.lits == (((2, False), 1), ((3, False), 1)) and t.theta == 1
    t = B.make_thr({(2, False): -2, (3, False): 1}, -1)  # -2x + y >= -1  ==  2 (not x) + y >= 1
    assert t.eval({2: 0, 3: 0}) and t.eval({2: 1, 3: 1}) and not t.eval({2: 1, 3: 0})


# ----------------------------------------------------------------------------- precision
@pytest.mark.parametrize("dtype, top", [("float64", 1 << 24), ("float32", 1 << 24), ("bfloat16", 1 << 24),
                                        ("float16", 1 << 22)])
def test_sign_sublayer_is_exact_at_every_scale(dtype, top):
    """(k + 1/2)/(t + 1) for t up to 2^24 (float16: 2^22, where (1/2)/(t + 1) is still above half its
    smallest subnormal): the model's normalization gives exactly +-1, so the sign group's bool is
    exactly 0 or 1 with the right sign. In float16 these quotients are subnormal from t = 8,192 on
    (a floor at the smallest normal number broke it there)."""
    from compiler.model import normalized_pair

    dt = getattr(torch, dtype)
    t = torch.cat([torch.arange(1, 5000), torch.randint(5000, top, (20000,)),
                   torch.tensor([8191, 8192, 8193, top - 1])]).to(torch.float64)
    k = torch.randint(-60, 60, t.shape).to(torch.float64)
    k[-4:] = torch.tensor([0.0, -1.0, 0.0, -1.0])
    y = ((k + 0.5) / (t + 1)).to(dt)
    assert not torch.any(y == 0)
    b = 0.5 * normalized_pair(y) + 0.5
    assert torch.equal(b, (k >= 0).to(dt))


def test_float16_past_its_smallest_normal():
    """Dyck-1 in float16 beyond 8,192 tokens, where every comparison's quotient is subnormal: every
    prefix agrees with the interpreter (was wrong from 8,370 tokens on)."""
    p = rasp.load("programs/dyck1.cr")
    m = compiler.compile(p)
    assert "float16" in m.exact_dtypes
    rng = np.random.default_rng(3)
    inputs = [["(", ")"] * 6000, [str(s) for s in rng.choice(["(", ")"], size=20000, p=[0.52, 0.48])]]
    same, _, _, _, _ = V.check_inputs(m, inputs, [None, None], dtype="float16", device="cpu")
    assert same == [True, True]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_long_inputs_are_exact(dtype):
    """Majority and a^n b^n at 131,072 tokens: every prefix agrees with the interpreter, also in
    bfloat16 (each comparison is one rounded quotient of an exact sum)."""
    for path, n in (("programs/bin_majority.rasp", 1 << 17), ("programs/dyck1.cr", 1 << 17)):
        p = rasp.load(path)
        m = compiler.compile(p)
        rng = np.random.default_rng(5)
        data = [s for s in p.alphabet if not s.startswith("<")]
        # a near-balanced walk keeps the comparisons close (the hard case for precision)
        toks = [data[int(b)] for b in (rng.random(n) < 0.5)]
        same, _, _, _, _ = V.check_inputs(m, [toks], [None], dtype=dtype, max_new=4)
        assert all(same), path


def test_cast_warns_when_a_constant_is_not_exact():
    m = compiler.compile(rasp.parse('alphabet a b\nX = #"a" > 1000'))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m.model("cpu", "bfloat16")
    assert any("not exactly representable" in str(x.message) for x in w)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.model("cpu", "float32")


@pytest.mark.parametrize("c", [100, 126, 127, 128, 200, 301, 5000, 9000000])
def test_exact_dtypes_say_where_constants_fit(c):
    """``exact_dtypes`` lists the dtypes that hold every weight: in those the model agrees with the
    interpreter at every prefix of an input that crosses the constant; bfloat16 (8 significant bits)
    drops out once the head constant c + 1/2 needs more bits, and then the model can disagree: the
    check is not vacuous (c = 301: 301.5 is stored as 302)."""
    m = compiler.compile(rasp.parse(f'alphabet a b\nX = #"a" > {c}'))
    assert ("bfloat16" in m.exact_dtypes) == (c < 128)  # the head holds F - (c + 1) + 1/2: 127.5 fits 8 bits
    assert ("float32" in m.exact_dtypes) == (c + 1 < 2**23)
    assert "float64" in m.exact_dtypes
    toks = ["a"] * (c + 3) if c < 10000 else None
    for dt in ("float32", "bfloat16"):
        if toks is None:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            same, _, _, _, _ = V.check_inputs(m, [toks], [None], dtype=dt, device="cpu")
        if dt in m.exact_dtypes:
            assert same == [True], (c, dt)
        elif c == 301:
            assert same == [False]


def test_exact_dtypes_recorded_reported_and_recomputed_on_load(tmp_path, capsys):
    """compile records exact_dtypes in config.json; `rasp compile` notes the dtypes that do not hold
    the weights, `rasp verify` notes it before such a dtype's rows and marks them; load recomputes the
    list from the weights (config.json is not covered by their hash)."""
    import json

    from rasp.cli import main

    src = tmp_path / "big.rasp"
    src.write_text('alphabet a b\nX = #"a" > 301\n')
    assert main(["compile", str(src), "-o", str(tmp_path / "m")]) == 0
    out = capsys.readouterr().out
    assert "note: bfloat16 cannot run this model exactly" in out and "float32" not in out.split("note:")[1].split(":")[0]
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    assert cfg["exact_dtypes"] == ["float64", "float32", "float16"]
    cfg["exact_dtypes"] = ["float64", "float32", "bfloat16", "float16"]  # a false claim is not believed
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    assert "bfloat16" not in compiler.load(tmp_path / "m").exact_dtypes
    assert main(["verify", str(src), "--lengths", "305", "--samples", "1", "--dtype", "float32,bfloat16",
                 "--inputs", "uniform", "--json"]) in (0, 1)
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["weights_exact"] for r in rows] == [True, False]
    assert main(["verify", str(src), "--lengths", "8", "--samples", "1", "--dtype", "bfloat16"]) == 0
    assert "note: bfloat16 cannot run this model exactly" in capsys.readouterr().out
    small = tmp_path / "small.rasp"
    small.write_text('alphabet a b\nX = #"a" > 3\n')
    assert main(["compile", str(small)]) == 0
    assert "note:" not in capsys.readouterr().out


# ----------------------------------------------------------------------------- structure
def test_layers_size_and_labels():
    m = compiler.compile(rasp.load("programs/dyck1.cr"))
    s = m.size
    assert (s["layers"], s["heads"]) == (2, 4)
    labels = m.residual_labels
    # D < 0 is the negation of D >= 0's sign (one head for a comparison and its negation)
    ge = '#"(" - #")" >= 0'
    assert labels[:4] == ["bos", "real", '"("', '")"'] and "ok" in labels and ge in labels
    assert "D < 0" not in labels
    enc = {r["label"]: r["encoding"] for r in m.config["residual"]}
    assert enc[ge] == "bool" and enc["bos"] == "flag"
    assert any(e == "frac" for e in enc.values())
    # the sparse weights hold no explicit zeros, so "nonzero" counts what it says
    assert all(np.all(vals != 0) for _, _, vals in m._weights.values())
    assert s["nonzero"] == sum(len(vals) for _, _, vals in m._weights.values())
    from compiler.weights import COO

    w = COO(2, 3)  # entries written twice are summed; those that cancel are dropped
    w.add((0, 1), 1.5), w.add((1, 2), 2.0), w.add((0, 1), -1.5), w.add((1, 2), 1.0)
    shape, idx, vals = w.arrays()
    assert shape == (2, 3) and idx.tolist() == [[1], [2]] and vals.tolist() == [3.0]
    # whole rows are linear forms over graph nodes, put at each node's dimension, summed with entries
    w = COO(3, 4)
    w.add((2, 0), 1.0), w.rows([((6, 3),), (), ((5, 0.5), (7, -2))]), w.add((0, 3), -3.0)
    dims = np.array([0, 0, 0, 0, 0, 1, 3, 0])  # node 5 -> dimension 1, node 6 -> 3, node 7 -> 0
    shape, idx, vals = w.arrays(dims)
    assert shape == (3, 4) and idx.tolist() == [[2, 2], [0, 1]] and vals.tolist() == [-1.0, 0.5]
    # the residual stream holds exactly what the labels say
    res = m.residual("( ( ) ) )", dtype="float64")
    col = labels.index(ge)
    assert list(res[:, col]) == [0, 1, 1, 1, 1, 0]  # 0 at BOS, as every sign
    # every bool dimension is exactly 0/1, and 0 at BOS
    for k, r in enumerate(m.config["residual"]):
        if r["encoding"] == "bool":
            assert set(np.unique(res[:, k])) <= {0.0, 1.0} and res[0, k] == 0.0


def test_same_depth_operations_share_a_layer():
    p = rasp.parse('alphabet a b c\nX = #"a" > #"b" && #"b" > #"c" && #"c" > 0 && exists[j == i - 1] "a"')
    m = compiler.compile(p)
    assert m.size["layers"] == 1 and m.size["heads"] == 4
    heads = m.config["architecture"]["layers"][0]["heads"]
    assert sorted(h["kind"] for h in heads) == ["local", "uniform", "uniform", "uniform"]
    assert isinstance(m.module, CompiledTransformer)


def test_periodic_exclusivity_matches_brute_force():
    """The builder's exclusivity of two periodic literals (residue bitmasks lifted to the lcm of their
    periods, negated literals complemented) against the sets of positions where each holds."""
    from compiler.graph import _Builder

    b = _Builder(rasp.parse('alphabet a\nX = "a"').core)
    lits = []
    for M, residues in ((2, {1}), (3, {2}), (4, {1, 3}), (6, {0, 3}), (5, {0}), (12, {1, 5, 7}), (71, {0}),
                        (73, {0})):  # (71 and 73: lcm beyond PERIOD_CAP, never called exclusive)
        lit = b.periodic(M, frozenset(residues))
        lits += [lit, B.flip(lit)]
    for x in lits:
        for y in lits:
            def holds(l, i):
                p = b.nodes[l[0]].params
                return (i % p["period"] in p["residues"]) != l[1]
            period = math.lcm(b.nodes[x[0]].params["period"], b.nodes[y[0]].params["period"])
            truth = not any(holds(x, i) and holds(y, i) for i in range(period))
            assert b.exclusive(x, y) == truth, (b.lit_name(x), b.lit_name(y))


def test_exact_dtypes_on_synthetic_weights():
    """Each dtype's test, on its own: 257 is not a bfloat16 (8 significant bits), 2^24 + 1 not a
    float32, 2^16 not a float16 (beyond its range, 65504); a value row of 0/1 inputs is bounded by its
    positive or its negative entries, whichever sum is larger (127.5 - 1 fits bfloat16's 2^7)."""
    from compiler.weights import exact_dtypes

    def tensors(*values, row=None, bos=None):
        """``values`` as weights; ``row`` a head's W_V row; ``bos``: the row's bos column (the token
        embedding's BOS row points at it), None: no embedding tells it (the whole row is bounded)."""
        t = {"weights": ((1, len(values)), np.array([[0] * len(values), list(range(len(values)))]),
                         np.array(values, dtype=np.float64))}
        if bos is not None:
            t["embed.token"] = ((2, len(row)), np.array([[0, 1], [1 - bos if len(row) > 1 else 0, bos]]),
                                np.array([1.0, 1.0]))
        if row is not None:
            t["layers.0.attn.W_V"] = ((1, len(row)), np.array([[0] * len(row), list(range(len(row)))]),
                                      np.array(row, dtype=np.float64))
        return t

    assert exact_dtypes(tensors(1.0, -1024.0, 0.5)) == ["float64", "float32", "bfloat16", "float16"]
    assert exact_dtypes(tensors(257.0)) == ["float64", "float32", "float16"]
    assert exact_dtypes(tensors(2.0**24 + 1)) == ["float64"]
    assert exact_dtypes(tensors(65536.0)) == ["float64", "float32", "bfloat16"]
    # without a bos column, a row's values are half-integers, exact below 2^(p-1) = 128 in bfloat16
    assert "bfloat16" in exact_dtypes(tensors(1.0, row=[1.0, -127.5]))   # |value| <= 127.5
    assert "bfloat16" not in exact_dtypes(tensors(1.0, row=[100.0, 100.0, -0.5]))  # up to 200
    assert "bfloat16" not in exact_dtypes(tensors(1.0, row=[-100.0, -100.0, 0.5]))  # down to -200
    assert "bfloat16" in exact_dtypes(tensors(1.0, row=[100.0, 28.0]))  # 128: the bound itself fits
    assert "bfloat16" not in exact_dtypes(tensors(1.0, row=[100.0, 28.5]))  # 128.5 does not
    # with it, the BOS constant is one weight and the rest are integers, exact up to 2^p = 256
    assert "bfloat16" in exact_dtypes(tensors(1.0, row=[100.0, 100.0, -0.5], bos=2))  # 200 after BOS
    assert "bfloat16" in exact_dtypes(tensors(1.0, row=[-100.0, -100.0, 0.5], bos=2))
    assert "bfloat16" in exact_dtypes(tensors(1.0, row=[200.0, 56.0, -0.5], bos=2))  # 256 fits
    assert "bfloat16" not in exact_dtypes(tensors(1.0, row=[200.0, 57.0, -0.5], bos=2))  # 257 does not
    assert "bfloat16" not in exact_dtypes(tensors(1.0, row=[1.0, 200.5], bos=1))  # 200.5: not a bfloat16


def test_constant_127_is_exact_in_bfloat16():
    """#"a" > 126 keeps its head constant at 126.5 with a count of weight 1: bfloat16 holds it, says
    exact_dtypes, and the model agrees at every prefix across the boundary."""
    m = compiler.compile(rasp.parse('alphabet a b\nX = #"a" > 126'))
    assert "bfloat16" in m.exact_dtypes
    same, _, _, _, _ = V.check_inputs(m, [["a"] * 140], [None], dtype="bfloat16", device="cpu")
    assert same == [True]


def test_generator_checks_compare_every_prompt_position():
    """A generator is checked at every prompt position too, not only on what it generates: a prompt
    whose last token does not trigger generation used to compare nothing. Here the model computes
    #Q[x] > 1 where the program says #Q[x] > 0; the input generates nothing under either, and the
    disagreement at the separator in the middle is found. Uniform inputs include special tokens."""
    src = 'alphabet a b\nspecial "<s>"\nNEXT[x] = "<s>" && #Q[x] > {k}\noutput generate NEXT\n'
    right, wrong = rasp.parse(src.format(k=0)), compiler.compile(rasp.parse(src.format(k=1)))
    liar = wrong.with_config(wrong.config, right, None, None)  # the wrong weights, the right program
    toks = ["a", "<s>", "b", "a"]
    assert liar.run(toks) == right.run(toks) == []
    same, _, _, _, _ = V.check_inputs(liar, [toks], [None], dtype="float64", device="cpu")
    assert same == [False]
    same, _, _, _, _ = V.check_inputs(compiler.compile(right), [toks], [None], dtype="float64", device="cpu")
    assert same == [True]
    inputs, _ = V.sample_inputs(right, None, np.random.default_rng(0), 200, 3)
    assert all("<s>" in x for x in inputs)


def test_head_values_beyond_float64_are_refused_where_written():
    """A head holds its comparison's constants and coefficients as one half-integer sum: up to 2^52
    it is exact in float64 (and the model agrees with the interpreter), beyond it no dtype is exact
    and compile refuses the comparison, located."""
    ok = 'alphabet a b\nP = #"a" - #"b" + 4194304 * 1073741823 >= 0\nZ = exists[j == i - 1] P == exists[j == i - 1] true\n'
    p = rasp.parse(ok)
    m = compiler.compile(p)
    assert m.exact_dtypes == ["float64"]
    for toks in ("a", "b", "a b", "b b a", "a a b b a b"):
        assert m.run(toks, dtype="float64") == rasp.run(p, toks), toks
    bad = 'alphabet a b\nP = #"a" - #"b" + 4194304 * 1073741824 + 1 >= 0\nX = 2 * #P > 2 * #true\n'
    with pytest.raises(rasp.RaspError, match=r"add up to 4,503,599,627,370,498\.5:.*2\^52") as info:
        compiler.compile(rasp.parse(bad))
    assert (info.value.line, info.value.column) == (2, 5)


def test_exact_dtypes_count_integers_after_bos():
    """After BOS a head's value is an integer (the bos input is 0), exact up to 2^p, not only 2^(p-1):
    ``200 * #"a" > 199 * #"b"`` is exact in bfloat16 (p = 8) and listed; ``257 * ...`` is not a
    bfloat16 weight. The listed dtype agrees with the interpreter on inputs that stay at the tie."""
    p = rasp.parse('alphabet a b\nX = 200 * #"a" > 199 * #"b"\n')
    m = compiler.compile(p)
    assert "bfloat16" in m.exact_dtypes
    assert "bfloat16" not in compiler.compile(rasp.parse('alphabet a b\nX = 257 * #"a" > 256 * #"b"\n')).exact_dtypes
    toks, e = [], 0
    for k in range(3000):  # 200 #a - 199 #b held near 0: a tie or one off it at every position
        t = "b" if e > 0 else "a" if e < 0 else "ab"[k % 2]
        e += 200 if t == "a" else -199
        toks.append(t)
    want = p.evaluate([toks])["X"][0]
    for backend in ("scan", "dense"):
        got = m.outputs([toks[:600] if backend == "dense" else toks], dtype="bfloat16", backend=backend)[0][:, 0]
        assert np.array_equal(np.asarray(got, bool), np.asarray(want[: len(got)], bool)), backend


def test_heavy_local_thresholds_stay_exact_in_the_listed_dtypes():
    """A comparison of local counts alone is one MLP threshold gate; with weights past 255 its
    preactivation passed 2^p and ``relu(z + 1) - relu(z)`` said 0 (a helper's counterexamples, listed
    dtypes all: bfloat16 wrong on 351 of 510 inputs). Over at most 4 literals it is now a truth
    table; over more, exact_dtypes leaves out the dtypes its preactivations exceed."""
    cases = [
        ("bfloat16", '199 * #[j == i] "a" + 198 * #[j == i] pos[i % 2 == 0] + 198 * #[j == i] pos[i % 3 == 0] >= 200'),
        ("bfloat16", '199 * #[j == i - 1] "a" + 198 * #[j == i - 2] "a" + 198 * #[j == i - 3] "a" >= 200'),
        ("float16", '2047 * #[j == i - 1] "a" + 2046 * #[j == i - 2] "a" + 2046 * #[j == i - 3] "a" >= 2048'),
        ("float32", '8388607 * #[j == i - 1] "a" + 8388606 * #[j == i - 2] "a" + 8388605 * #[j == i - 3] "a"'
                    ' + 8388605 * #[j == i - 4] "a" >= 8388608'),
        ("float16", '255 * #[j == i - 1] "a" + 254 * #[j == i - 2] "a" + 252 * #[j == i - 3] "a"'
                    ' + 248 * #[j == i - 4] "a" + 240 * #[j == i - 5] "b" >= 256'),
    ]
    for dt, cmp in cases:
        p = rasp.parse(f"alphabet a b\nX = {cmp}\n")
        m = compiler.compile(p)
        assert dt in m.exact_dtypes, (cmp, m.exact_dtypes)
        inputs = [list(t) for n in range(1, 8) for t in itertools.product("ab", repeat=n)]
        outs = m.outputs(inputs, dtype=dt)
        for toks, out in zip(inputs, outs):
            assert [bool(x) for x in out[:, 0]] == list(p.evaluate([toks])["X"][0]), (cmp, dt, toks)
    five = compiler.compile(rasp.parse(f"alphabet a b\nX = {cases[-1][1]}\n"))
    # five literals: every weight is a bfloat16, but the preactivation reaches 1249 - 256 > 2^8
    assert "bfloat16" not in five.exact_dtypes


def test_exact_sum_positions_bounds_the_float64_running_sums(tmp_path, capsys):
    """A head's running sum is exact in float64 while |BOS constant| + (t - 1) * (its largest value
    after BOS) <= 2^52 (``exact_sum_positions``). Coefficients near 2^31 with a constant near 2^52 pass
    it within two tokens: a prefix that first falls past -2^52 loses the 1/2, and a tie reached after
    2^21 tokens comes out wrong even in float64 (found by a helper's audit at 2,097,156 tokens); the
    same tie reached without the detour is exact. ``rasp compile`` says so."""
    src = ('alphabet a b c\n'
           'OUT = 2147483647 * #"a" + #"c" >= 2147483647 * #"b" + 2097151 * 2147483647 + 1\n')
    p = rasp.parse(src)
    m = compiler.compile(p)
    assert m.exact_dtypes == ["float64"] and m.exact_sum_positions == {"scan": 2, "sdpa": 0}
    n = 2097151
    straight = ["a"] * n + ["c"]  # the prefix sums only shrink toward the tie
    assert rasp.run(p, straight) is True and m.run(straight, dtype="float64") is True
    detour = ["b", "b"] + ["a"] * (n + 2) + ["c"]
    assert rasp.run(p, detour) is True and m.run(detour, dtype="float64") is False
    small = compiler.compile(rasp.parse('alphabet a b\nX = #"a" > #"b"\n'))
    assert small.exact_sum_positions == {"scan": 2**52, "sdpa": 2**23}  # 1/2 at BOS, then 1 per position
    # local heads copy one position's value and never sum: no bound without a uniform head
    local = compiler.compile(rasp.parse('alphabet a b\nX = exists[j == i - 1] "a"\n'))
    assert local.exact_sum_positions == {"scan": None, "sdpa": None}
    assert local.model("cpu", "float32").sum_positions == {"scan": None, "sdpa": None}
    from rasp.cli import main

    (tmp_path / "big.rasp").write_text(src)
    assert main(["compile", str(tmp_path / "big.rasp")]) == 0
    assert "exact in float64 (the scan backend) for sequences of up to 1 token;" in capsys.readouterr().out
    assert main(["compile", str(tmp_path / "big.rasp"), "-o", str(tmp_path / "m"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["exact_sum_positions"] == {"scan": 2, "sdpa": 0}
    assert compiler.load(tmp_path / "m").exact_sum_positions == {"scan": 2, "sdpa": 0}
    # verify notes rows beyond the bound; a generator's rows reach further by their generated tokens
    gen = src.replace("OUT = ", "BIG = ") + 'NEXT[x] = x == "a" && #true < 3 && !BIG\noutput generate NEXT\n'
    (tmp_path / "gen.rasp").write_text(gen)
    for target, lengths in ((tmp_path / "big.rasp", "1,2"), (tmp_path / "gen.rasp", "1")):
        assert main(["verify", str(target), "--lengths", lengths, "--samples", "2", "--dtype", "float64"]) == 0
        out = capsys.readouterr().out
        assert ("length 2 is beyond it" if target.name == "big.rasp" else "length 1 is beyond it") in out, out
    # find-limit: lengths past the bound agree on sampled inputs, which the summary says (a helper's
    # audit read "longest exact length 4,194,304" as a claim for every input)
    assert main(["verify", str(tmp_path / "big.rasp"), "--find-limit", "--start", "4", "--max-length", "16",
                 "--samples", "1", "--dtype", "float64"]) == 0
    out = capsys.readouterr().out
    assert "longest exact length 16 (stopped: max length 16;" in out
    assert "on sampled inputs: the weights are exact on every input only up to 1 token)" in out
    assert main(["verify", str(tmp_path / "big.rasp"), "--find-limit", "--start", "4", "--max-length", "8",
                 "--samples", "1", "--dtype", "float64", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["limits"][0]["exact_tokens"] == 1


def test_float16_quotients_underflow_at_2_to_the_24_positions(tmp_path, capsys, monkeypatch):
    """A uniform head's smallest quotient is (1/2)/P at P positions; float16's smallest subnormal is
    2^-24, so 2^-25 (P = 2^24) rounds to 0 (ties to even) and the sign unit reads 1/2 (a helper's
    audit: ``#"a" >= #"b"`` at a tie after 16,777,215 tokens). The model says it: exact_tokens, and
    rasp verify's note."""
    half = torch.tensor(0.5, dtype=torch.float16)
    assert float(half / 2**24) == 0.0 and float(half / (2**24 - 1)) > 0
    m = compiler.compile(rasp.parse('alphabet a b c\nX = #"a" >= #"b"\n'))
    assert m.exact_tokens() == {"float64": 2**52 - 1, "float32": 2**52 - 1, "bfloat16": 2**52 - 1,
                                "float16": 2**24 - 2}
    local = compiler.compile(rasp.parse('alphabet a b\nX = exists[j == i - 1] "a"\n'))
    assert set(local.exact_tokens().values()) == {None}  # no uniform head: no quotient
    from compiler import weights
    from rasp.cli import main

    monkeypatch.setitem(weights.QUOTIENT_POSITIONS, "float16", 11)  # so that a short length passes it
    (tmp_path / "m.rasp").write_text('alphabet a b c\nX = #"a" >= #"b"\n')
    assert main(["verify", str(tmp_path / "m.rasp"), "--lengths", "8,16", "--samples", "1", "--dtype", "float16"]) == 0
    out = capsys.readouterr().out
    assert "in float16 a uniform head's smallest quotient" in out and "up to 10 tokens; length 16 is beyond it" in out


def test_auto_takes_sdpa_only_where_its_float32_accumulator_is_exact(monkeypatch):
    """On CUDA below float64, auto picks the fused kernels only while a prefix sum of head values
    stays <= 2^23 (their float32 accumulator holds the sums exactly): ``sum_positions["sdpa"]``, a
    head's BOS constant once plus its coefficients per later position; beyond, scan (float64
    accumulation). The decision is
    tested here with the device faked: the kernels themselves run in the CUDA tests."""
    m = compiler.compile(rasp.parse('alphabet a b\nX = 4194303 * #"a" - 4194304 * #"b" + 2 >= 0\n'))
    t = m.model("cpu", "float32")
    small = compiler.compile(rasp.load("programs/dyck1.cr")).model("cpu", "float32")
    assert t.pick_backend("auto", 4) == small.pick_backend("auto", 4) == "scan"  # on CPU always scan
    monkeypatch.setattr(CompiledTransformer, "device", property(lambda self: torch.device("cuda")))
    assert t.pick_backend("auto", 2) == "sdpa" and t.pick_backend("auto", 3) == "scan"
    assert t.sum_positions["sdpa"] == 2  # 2.5 at BOS + 4194304 per later position passes 2^23 at 3
    limit = 2**23  # Dyck's heads: 1/2 at BOS + (limit - 1) * 1 <= 2^23
    assert small.sum_positions["sdpa"] == limit
    assert small.pick_backend("auto", limit) == "sdpa" and small.pick_backend("auto", limit + 1) == "scan"
    # a large constant is added at BOS only: it no longer sends every input past 5 tokens to scan
    big = compiler.compile(rasp.parse('alphabet a b\nX = #"a" > 1000000\n')).model("cpu", "float32")
    assert big.sum_positions["sdpa"] == 7388608  # 1000000.5 + (t - 1) * 1 <= 2^23
    assert big.pick_backend("auto", 7388608) == "sdpa" and big.pick_backend("auto", 7388609) == "scan"
    assert t.pick_backend("sdpa", 10**6) == "sdpa"  # asked for by name: as asked


def test_labels_of_gates_on_gates_stay_short():
    """A gate's label names its inputs; nested uncut, 29 ``==`` of bools made labels of gigabytes (4
    times longer per level) and the compile ran out of memory. Names inside labels are cut, so the
    labels stay short, and the model is right at every length tried."""
    e = '"a"'
    for d in range(1, 30):
        e = f'({e} == exists[j == i - {d}] "b")'
    p = rasp.parse(f"alphabet a b\nX = {e}\n")
    m = compiler.compile(p)
    assert max(len(label) for label in m.residual_labels) < 1000
    rng = np.random.default_rng(0)
    for n in (1, 2, 29, 30, 31, 200):
        for _ in range(3):
            x = list(rng.choice(["a", "b"], size=n))
            assert bool(m.run(x)) == bool(p.run(x)), x


def test_exact_positions_per_backend():
    """auto is scan's bound (it leaves sdpa before sdpa's); an unknown backend is an error, not 'any
    length' (a review found 'dense' and 'bogus' answered None)."""
    m = compiler.compile(rasp.parse('alphabet a b c\nX = #"a" >= #"b"\n'))
    assert m.exact_positions("float32", "scan") == m.exact_positions("float32", "auto") == 2**52
    assert m.exact_positions("float32", "sdpa") == 2**23 and m.exact_positions("float16", "sdpa") == 2**23
    for bad in ("dense", "bogus"):
        with pytest.raises(rasp.RaspError, match="knows the backends scan, sdpa and auto"):
            m.exact_positions("float32", bad)


class _TokenCtx(_Ctx):
    """_Ctx where nodes 2..5 are tokens: exactly one holds at a position, so two of them exclude each
    other (as the graph builder says of token literals)."""

    TOKENS = (2, 3, 4, 5)

    def exclusive(self, a, b):
        if a[0] == b[0]:
            return a[1] != b[1]
        return a[0] in self.TOKENS and b[0] in self.TOKENS and not a[1] and not b[1]


@pytest.mark.parametrize("seed", range(60))
def test_a_conditional_over_token_cases_is_exact(seed):
    """``a if t else b`` where b is an exclusive sum of terms, each requiring a token (the cases of a
    lowered value compared with a constant): the result is the conditional at every assignment with
    one token, and where every term of b excludes t (another token), b's terms are in it as they are."""
    rnd = random.Random(seed)
    ctx = _TokenCtx()
    free = [6, 7, 8]

    def conj(token):
        lits = {(token, False): 1}
        for v in rnd.sample(free, rnd.randint(0, 2)):
            lits[(v, rnd.random() < 0.5)] = 1
        return B.make_thr(lits, len(lits))

    toks = rnd.sample(_TokenCtx.TOKENS, rnd.randint(2, 4))
    b = B.Form(tuple(conj(k) for k in toks))
    t = B.thr_form(conj(rnd.choice(_TokenCtx.TOKENS)))
    a = rnd.choice([B.FALSE, B.TRUE, B.lit_form((rnd.choice(free), False)), B.thr_form(conj(rnd.choice(toks)))])
    f = B.f_cond(ctx, t, a, b)
    for token in _TokenCtx.TOKENS:
        for bits in itertools.product((0, 1), repeat=len(free)):
            assign = {n: int(n == token) for n in _TokenCtx.TOKENS} | dict(zip(free, bits))
            want = a.eval(assign) if t.eval(assign) else b.eval(assign)
            assert ctx.value(f, assign) == want
    if a == B.FALSE and all(ctx.test_excludes(t.terms[0], u) for u in b.terms):
        assert f == B.norm(b)
