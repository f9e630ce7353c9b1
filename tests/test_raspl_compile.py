"""Compiling RASP-L programs (compiler/bounded.py): programs that lower compile exactly, like C-RASP;
programs that do not lower compile with a declared maximum length and are exact up to it.

* every program of the lowering table (tests/test_raspl_lower.py, 16 programs) and the lowered
  classic count program compile and agree with the interpreter running the *original* RASP-L
  program, on random inputs far longer than anything special (up to 120 tokens);
* six programs that do not lower (NF, NB, copy_repeat, parity, NRLast, mode) compile with a max
  length and agree with the interpreter and the task's reference on every sampled input whose
  whole sequence (prompt plus output) fits, at every prompt length that fits; beyond the bound a copy
  model goes wrong (the bound is real, not an artefact of the test);
* save/load keeps the RASP-L source and the bound.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import rasp  # noqa: E402
from rasp import tasks  # noqa: E402
from compiler.bounded import compile_raspl, max_length_of, verify_bounded  # noqa: E402
from test_raspl_lower import LOWERS  # noqa: E402


def _inputs(program, rng, count, max_len):
    syms = program.symbols
    return [[syms[k] for k in rng.integers(0, len(syms), size=int(rng.integers(1, max_len + 1)))]
            for _ in range(count)]


@pytest.mark.parametrize("name", sorted(LOWERS))
def test_lowering_programs_compile_exactly(name):
    p = rasp.parse(LOWERS[name][0])
    m = compile_raspl(p)
    assert m.config["raspl"]["lowered"] == "exact" and max_length_of(m) is None
    rng = np.random.default_rng(len(name))
    inputs = _inputs(p, rng, 12, 120) + _inputs(p, rng, 12, 8)
    if p.output_kind == "generate":
        short = [x[:6] for x in inputs]
        assert m.run_batch(short, dtype="float64") == p.run_batch(short)
    else:
        assert m.run_batch(inputs, dtype="float64") == p.run_batch(inputs)
        # every prefix, not only the last position
        outs = m.outputs(inputs, dtype="float64")
        vals = p.evaluate(inputs)
        name_out = p.core.output.names[0]
        for r, x in enumerate(inputs):
            assert outs[r][:, 0].astype(bool).tolist() == vals[name_out][r, : len(x)].tolist()


def test_count_compiles_exactly():
    p = rasp.load("programs/raspl_count.rasp", alphabet=[str(k) for k in range(12)] + ["<sep>"])
    m = compile_raspl(p)
    assert m.config["raspl"]["lowered"] == "exact"
    assert list(m.compile_passes)[:3] == ["lower", "rewrite", "graph"]
    # the passes add up to the reported time (lowering and the lowered program's text included)
    assert m.compile_passes["config"] > 0 and abs(m.compile_seconds - sum(m.compile_passes.values())) < 1e-9
    for a, b in [(0, 11), (3, 7), (5, 5), (10, 11)]:
        toks = [str(a), str(b), "<sep>"]
        assert m.run(toks, max_new=20) == [str(k) for k in range(a, b + 1)]


def test_count_depth_does_not_grow_with_the_alphabet():
    """The lowered value chains (START, END: one conditional per symbol) compile to a constant number
    of layers: each branch of a chain is one conjunction of the tests' literals, not a gate per few
    levels (which made 16 layers over 40 symbols, 52 over 150). Since 2026-12-02 a max aggregate's
    chain tests "a selected value is w or more", each implied by the one above it, so the chain
    compared with a constant is two signs and the model is 3 layers deep (5 with the chain of exact
    cases, which compared with a constant was a conjunction over every value above it)."""
    p = rasp.load("programs/raspl_count.rasp")
    layers = {a: compile_raspl(p.with_alphabet([str(k) for k in range(a)])).size["layers"] for a in (8, 40)}
    assert layers[8] == layers[40] == 3
    m = compile_raspl(p.with_alphabet([str(k) for k in range(24)]))
    for a, b in [(0, 23), (7, 9), (22, 22)]:
        assert m.run([str(a), str(b), "<sep>"], max_new=30) == [str(k) for k in range(a, b + 1)]


def test_count_over_the_int8_codes():
    """Over 256 symbols (the int8 values RASP-L maps range over) ``tokens != END`` compares a
    258-branch chain under each of 257 tokens: about 66,000 branches, over the branch cap until
    2026-11-30 (65,536, now 2^18). The model counts from a to b like the interpreter."""
    p = rasp.load("programs/raspl_count.rasp").with_alphabet([str(k) for k in range(256)])
    m = compile_raspl(p)
    assert m.size["layers"] == 4  # (6 with the chain of exact cases: see the test above)
    rng = np.random.default_rng(0)
    for a, b in [(0, 3), (17, 17), (0, 255)] + [tuple(sorted(rng.integers(0, 256, 2))) for _ in range(3)]:
        toks = [str(a), str(b), "<sep>"]
        assert m.run(toks, max_new=300) == rasp.run(p, toks, max_new=300) == [str(k) for k in range(a, b + 1)]


# (program file, task, alphabet for a small model or None, max length)
BOUNDED = [
    ("programs/copy_repeat.rasp", "copy_repeat", None, 24),
    ("programs/nf.rasp", "NF", ["a", "b", "c"], 20),
    ("programs/nb.rasp", "NB", ["a", "b", "c"], 20),
    ("programs/parity.rasp", "parity", None, 24),
    ("programs/nrlast.rasp", "NRLast", ["a", "b", "c"], 16),
    ("programs/raspl_mode.rasp", "majority", ["a", "b", "c"], 16),
]


@pytest.mark.parametrize("path,task_name,alphabet,N", BOUNDED, ids=[b[1] for b in BOUNDED])
def test_bounded_compile_is_exact_up_to_the_bound(path, task_name, alphabet, N):
    task = tasks.TASKS[task_name]
    special = list(task.special)
    p = rasp.load(path, alphabet=(alphabet + special) if alphabet else None)
    with pytest.raises(rasp.RaspError, match="max-length"):
        compile_raspl(p)
    m = compile_raspl(p, max_length=N)
    assert m.config["raspl"]["lowered"] == "bounded" and max_length_of(m) == N
    # what the model claims is within the bound (exact_tokens said 2^52 for a model exact up to N: helper 78)
    assert all(t is not None and t <= N for t in m.exact_tokens().values()), m.exact_tokens()
    assert all(m.exact_positions(d, b) <= N + 1 for d in m.exact_dtypes for b in ("scan", "sdpa"))
    rng = np.random.default_rng(N)
    batch = []
    for n in task.lengths(1, N, alphabet):
        for _ in range(4):
            s = task.sample(rng, n, alphabet)
            if len(s.tokens) + len(s.target) <= N:
                batch.append(s)
    assert len(batch) >= 10
    # and inputs that fill the bound exactly (prompt plus generation = N), where a task's lengths allow
    for n in task.lengths(1, N, alphabet)[-3:]:
        for _ in range(6):
            s = task.sample(rng, n, alphabet)
            if len(s.tokens) + len(s.target) == N:
                batch.append(s)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # prompt plus output within the bound: nothing to say
        got = m.run_batch([s.tokens for s in batch], dtype="float64")
    for s, g in zip(batch, got):
        assert g == s.target == rasp.run(p, s.tokens), (s.tokens, g)


def test_bounded_copy_fails_beyond_the_bound():
    p = rasp.load("programs/copy_repeat.rasp")
    N = 16
    m = compile_raspl(p, max_length=N)
    task = tasks.TASKS["copy_repeat"]
    rng = np.random.default_rng(3)
    wrong = 0
    for _ in range(10):
        s = task.sample(rng, 3 * N, None)  # positions wrap around twice, counts pass N
        with pytest.warns(RuntimeWarning, match="longer than this bounded model's 16 tokens"):
            wrong += m.run(s.tokens, dtype="float64") != s.target
    assert wrong >= 1


def test_a_bounded_generator_stops_at_its_bound():
    """run() of a bounded generator stops at N tokens, prompt included, and says so when the program
    would go on: past them it went on with a wrong continuation (a helper's find: 56 of 200 prompts
    of at most N tokens). What it returns is a prefix of the program's output."""
    p = rasp.load("programs/copy_repeat.rasp").with_alphabet(("a", "b", "c"))
    m = compile_raspl(p, max_length=10)
    x = "a <sep> a a a a <sep> b a".split()
    want = p.run(x)
    assert len(want) > 1
    with pytest.warns(RuntimeWarning, match="generation stopped at this bounded model's 10 tokens .* goes on"):
        got = m.run(x, dtype="float64")
    assert got == want[:1]
    rng = np.random.default_rng(0)
    prompts = [list(rng.choice(["a", "b", "c"], size=k)) + ["<sep>"] for k in (1, 2, 3, 4)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = m.run_batch(prompts, dtype="float64")
    assert all(g == p.run(x)[:10 - len(x)] for g, x in zip(got, prompts))


def test_verify_bounded_rows():
    p = rasp.load("programs/parity.rasp")
    m = compile_raspl(p, max_length=24)
    rows = verify_bounded(m, samples=8, task="parity")
    inside = [r for r in rows if r["within_bound"]]
    assert inside and all(r["agree"] == 1.0 for r in inside)
    assert any(not r["within_bound"] for r in rows)


def test_verify_bounded_stops_generation_at_the_bound():
    """Inside the bound a row's generations stop at N tokens in all, as rasp verify's do (they ran
    past N, and rows inside the bound, where the model is exact, showed agree 0)."""
    p = rasp.parse('alphabet a b\nspecial "<sep>"\nH = map(x -> x / 2, indices)\nV = aggregate(select(H, H, ==), tokens, max, -1)\n'
                   'NEXT[x] = x == "a" && V != 0 || x == "b" && V == 0\noutput generate NEXT\n')
    m = compile_raspl(p, max_length=8)
    rows = verify_bounded(m, samples=20)
    inside = [r for r in rows if r["length"] <= 8]
    assert inside and all(r["within_bound"] and r["agree"] == 1.0 and r["longest"] <= 8 for r in inside), rows
    assert any(not r["within_bound"] for r in rows if r["length"] > 8)


def test_bounded_max_length_is_checked():
    """max_length of the wrong type was an internal TypeError, or True taken as 1 and a model that
    did not load; an np.int64 compiled and then could not be saved (not JSON)."""
    p = rasp.load("programs/parity.rasp")
    for bad in (True, 2.5, "8", 0, -1):
        with pytest.raises(rasp.RaspError, match="max_length must be None or an integer >= 1"):
            compile_raspl(p, max_length=bad)
    m = compile_raspl(p, max_length=np.int64(4))
    assert max_length_of(m) == 4 and type(max_length_of(m)) is int


def test_rasp_verify_on_a_small_bound(tmp_path, capsys):
    """A bound below the default lengths and --start: rasp verify checks N/4, N/2 and N, and find-limit
    starts at N (it tested nothing: "nothing was verified", or "longest exact length none")."""
    import json

    from rasp.cli import main

    out = tmp_path / "nf8"
    assert main(["compile", "programs/nf.rasp", "--alphabet", "a,b", "--max-length", "8", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["verify", str(out), "--find-limit", "--budget", "10", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [r["length"] for r in res["rows"]] == [2, 4, 8] and res["limits"][0]["longest_exact"] == 8
    assert main(["verify", str(out), "--find-limit", "--max-length", "8", "--budget", "10", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["limits"][0]["longest_exact"] == 8  # the bound given explicitly
    assert main(["verify", "programs/nf.rasp", "--alphabet", "a,b"]) == 2
    assert "rasp compile programs/nf.rasp --alphabet a,b --max-length N" in capsys.readouterr().err


@pytest.mark.parametrize("src", [
    # RASP-L conforming (a guard that is one select comparison), which did not compile bounded at all
    'alphabet a b\nW = selector_width(select(tokens, tokens, ==))\nMAXW = aggregate(select(indices, indices, true), W, max)\n'
    'A = #[j <= 2] "a" + MAXW >= 3\n',
    'alphabet a b\nW = selector_width(select(tokens, tokens, ==))\nA = exists[j <= i / 2] "a" && pos[i == 1] || W > 3\n',
    # plain C-RASP outside the class
    'alphabet a b\nC = #[j * j <= i] "b"\nA = C >= 2 || pos[i * i > 10] && exists[j <= 2] "a"\n',
    'alphabet a b\nspecial "<s>"\nC = #[j * 2 <= i] "b"\nNEXT[x] = x == "a" && C < 3 && exists "<s>" || x == "b" && pos[i == 4]\n'
    'output generate NEXT\n',
])
def test_bounded_mode_enumerates_absolute_positions(src):
    """Guards and pos[...] of absolute positions compile bounded: at query position q < N a count
    with guard g counts P over the positions j <= q where g(q, j) holds (a pos[...] of j), chained over
    pos[i % N == q]; checked on every input up to N."""
    import itertools

    p = rasp.parse(src)
    with pytest.raises(rasp.RaspError):
        compile_raspl(p)  # no bound: outside the class
    for N in (1, 2, 3, 6):
        m = compile_raspl(p, max_length=N)
        assert m.config["raspl"]["lowered"] == "bounded" and max_length_of(m) == N
        for n in range(1, N + 1):
            inputs = [list(t) for t in itertools.product(p.symbols, repeat=n)]
            cap = N - n if p.output_kind == "generate" else None
            assert m.run_batch(inputs, dtype="float64") == p.run_batch(inputs, max_new=cap), (N, n)


def test_bounded_guards_do_not_nest_with_the_bound():
    """The N branches of an enumerated guard are added as a balanced tree: as a chain of N nested
    conditionals the lowering was refused as nesting too deeply from about N = 500."""
    from rasp.raspl import lower_explained

    p = rasp.parse('alphabet a b\nA = #[j <= 2] "a" >= 2\n')
    low, why = lower_explained(p, 700)
    assert low is not None, why


def test_rasp_compile_of_an_out_of_class_program_mentions_the_bound(tmp_path, capsys):
    from rasp.cli import main

    f = tmp_path / "ab.rasp"
    f.write_text('alphabet a b\nA = #[2 * j <= i] "a" >= 2\n')  # (#[j <= 2] is C-RASP through #true)
    assert main(["compile", str(f)]) == 2
    assert "--max-length N" in capsys.readouterr().err
    assert main(["compile", str(f), "--max-length", "5"]) == 0
    capsys.readouterr()
    assert main(["verify", str(f)]) == 2  # verify's --max-length is find-limit's: it says how instead
    assert f"rasp compile {f} --max-length N -o DIR" in capsys.readouterr().err


def test_save_load_keeps_the_raspl_program(tmp_path):
    import compiler

    p = rasp.load("programs/parity.rasp")
    m = compile_raspl(p, max_length=12)
    m.save(tmp_path / "parity")
    back = compiler.load(tmp_path / "parity")
    assert back.config["raspl"] == m.config["raspl"]
    assert any(isinstance(n, rasp.ast.Map) for d in back.program.core.defs for n in rasp.ast.walk(d.expr))
    for toks in (["1", "0", "1", "<sep>"], ["0", "<sep>"], ["1", "1", "1", "0", "1", "<sep>"]):
        assert back.run(toks, dtype="float64") == m.run(toks, dtype="float64") == rasp.run(p, toks)


def test_plain_crasp_goes_to_the_exact_compiler():
    m = compile_raspl(rasp.load("programs/dyck1.cr"))
    assert "raspl" not in m.config
    assert m.run("( ( ) )") is True


def test_mean_of_negative_values_truncates_toward_zero_exactly():
    """A mean lowers to one case per quotient q: for q < 0, ``(q - 1) n < S <= q n`` (truncation toward
    zero). Values -3..0, every input of up to 3 tokens: means that are exact negative integers (``b b``:
    -2) sit on a case boundary, where a non-strict lower bound makes two cases hold."""
    import itertools

    p = rasp.parse("alphabet a b c d\nV = map(t -> t - 3, tokens)\n"
                   "M = aggregate(select(indices, indices, <=), V, mean, 0)\n"
                   "P[x] = map(m -> m == -2, M) && Q[x]\noutput predict P\n")
    m = compile_raspl(p)
    assert m.config["raspl"]["lowered"] == "exact"
    inputs = [list(w) for n in (1, 2, 3) for w in itertools.product("abcd", repeat=n)]
    assert m.run_batch(inputs, dtype="float64") == [p.run(t) for t in inputs]
    assert p.run("b b") == [["b"], ["b"]]  # the mean -2 exactly, at both positions


def test_map_negating_a_count_lowers_symbolically():
    """``map(c -> -c < -1, C)`` over a count lowers to a comparison of the negated count (a map body
    on counts is kept symbolic, not enumerated): every input of up to 4 tokens."""
    import itertools

    p = rasp.parse('alphabet a b\nC = #"a"\nX = map(c -> -c < -1, C)\noutput accept X\n')
    m = compile_raspl(p)
    assert m.config["raspl"]["lowered"] == "exact"
    inputs = [list(w) for n in (1, 2, 3, 4) for w in itertools.product("ab", repeat=n)]
    assert m.run_batch(inputs, dtype="float64") == [p.run(t) for t in inputs]
    assert p.run("a a") is True and p.run("a b") is False


def test_bounded_lowering_length_limits():
    """``max_length`` is 1 to MAX_BOUNDED_LENGTH (4,096): 0 and 4,097 are user errors; both ends are
    accepted (parity lowers at 1; at 4,096 the attempt is made and says why it does not lower)."""
    from rasp.raspl import MAX_BOUNDED_LENGTH, lower_explained

    p = rasp.load("programs/parity.rasp")
    for bad, message in ((0, "at least 1, got 0"), (MAX_BOUNDED_LENGTH + 1, "too large for a bounded model")):
        with pytest.raises(rasp.RaspError, match=message):
            lower_explained(p, bad)
    lowered, why = lower_explained(p, 1)
    assert why is None and lowered is not None
    lowered, why = lower_explained(p, MAX_BOUNDED_LENGTH)
    assert lowered is None and "4096 tokens" in why.message


@pytest.mark.parametrize("src", [
    'alphabet a b\nok = map(x -> x == 3, indices)\n',  # the last position, N - 1
    'alphabet a b\nX = map(x -> x % 5, #"a")\nok = X == 4\n',  # a count reaching N
    'alphabet a b\nX = map(x -> x % 3, -2 * #"a")\nok = X == 1\n',  # a negative factor's range
], ids=["last-position", "count-reaches-N", "negative-factor"])
def test_bounded_lowering_is_exact_at_the_bound(src):
    """A bounded lowering (N = 4) enumerates positions 0 .. N - 1 and counts 0 .. N (a negative
    factor flips the range): every input of up to N tokens, those of exactly N included."""
    import itertools

    from rasp.raspl import lower_bounded

    p = rasp.parse(src)
    low = lower_bounded(p, 4)
    inputs = [list(w) for n in range(1, 5) for w in itertools.product("ab", repeat=n)]
    assert [low.run(t) for t in inputs] == [p.run(t) for t in inputs]
    assert p.run("a a a a") is True


def test_verify_stays_inside_a_bounded_models_length():
    """A bounded model is exact on sequences of at most N tokens, generated ones included: uncapped
    generation from a 6-token prompt runs past N = 8 and disagrees, and verify_length (hence rasp
    verify and find-limit) stops generating at N, where every input agrees."""
    from compiler import verify as V

    p = rasp.load("programs/nf.rasp", alphabet=["a", "b", "c", "<sep>"])
    m = compile_raspl(p, max_length=8)
    inputs, _ = V.sample_inputs(p, None, np.random.default_rng(0), 6, 60)
    same, _, _, _, _ = V.check_inputs(m, inputs, [None] * 60, dtype="float64")
    assert not all(same)  # beyond the bound
    for n in (4, 6, 8):
        row = V.verify_length(m, None, n, 60, np.random.default_rng(1), dtype="float64")
        assert row.agree == 1.0, (n, row.example)
    row = V.verify_length(m, "NF", 6, 30, np.random.default_rng(1), dtype="float64")
    assert row.agree == 1.0 and row.agree_reference == 1.0  # the reference compared up to the cap


def test_a_bounded_models_cap_only_lowers_the_default(monkeypatch):
    """Generation in verify_length stops at the default 2n + 8 or at the bound N, whichever is first
    (the bound must not raise the default: memory estimates assume it)."""
    from compiler import verify as V

    p = rasp.load("programs/nf.rasp", alphabet=["a", "b", "c", "<sep>"])
    m = compile_raspl(p, max_length=40)
    seen = []
    real = V.check_inputs

    def spy(model, inputs, targets, **kw):
        seen.append(kw["max_new"])
        return real(model, inputs, targets, **kw)

    monkeypatch.setattr(V, "check_inputs", spy)
    for n, want in ((4, 16), (20, 20), (40, 0)):
        V.verify_length(m, None, n, 2, np.random.default_rng(0), dtype="float64")
        assert seen[-1] == want, n
    V.verify_length(m, None, 4, 2, np.random.default_rng(0), dtype="float64", max_new=3)
    assert seen[-1] == 3
