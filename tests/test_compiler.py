"""The compiler on every program in programs/: in-class programs compile and agree with the
interpreter (float32, CPU) on random inputs up to length 2,000; the dense reference forward equals the
fast paths; cached generation equals recomputation. Programs outside the class are a located error."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import compiler
import rasp
from compiler import verify as V
from rasp.checker import check

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = sorted(p for p in (ROOT / "programs").iterdir() if p.suffix in (".cr", ".rasp"))
#: programs over larger alphabets are compiled with this many symbols here (|alphabet|^2 definitions;
#: the full alphabets are compiled by benchmarks/compiled.py)
TEST_ALPHABET = 6


pytestmark = pytest.mark.usefixtures("one_thread")  # (tests/conftest.py)


_LOADED: dict = {}


def _program(path: Path) -> rasp.Program:
    if path not in _LOADED:
        p = rasp.load(path)
        if len(p.alphabet) > 30:
            p = p.with_alphabet([str(k) for k in range(TEST_ALPHABET)])
        _LOADED[path] = p
    return _LOADED[path]


def _task(path: Path):
    try:
        from rasp.tasks import task_for_program
    except ImportError:
        return None
    return task_for_program(path)


_COMPILED: dict = {}


def _compiled(path: Path):
    if path not in _COMPILED:
        p = _program(path)
        if not check(p, with_task=False).in_class:
            _COMPILED[path] = None
        else:  # RASP-L programs that lower compile through their lowering (compiler.bounded)
            from compiler.bounded import compile_raspl

            _COMPILED[path] = compile_raspl(p)
    return _COMPILED[path]


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_program_compiles_and_agrees(path):
    p = _program(path)
    verdict = check(p, with_task=False)
    if not verdict.in_class:
        with pytest.raises(rasp.RaspError) as info:
            compiler.compile(p)
        assert "not in C-RASP[periodic, local]" in info.value.message
        assert info.value.line is not None  # located
        return
    model = _compiled(path)
    rng = np.random.default_rng(0)
    inputs, targets = [], []
    # uniform inputs: many short ones, and long ones up to 2,000 tokens
    for n in list(rng.integers(1, 13, size=24)) + [100, 2000]:
        inputs.append([str(s) for s in rng.choice(list(p.alphabet), size=int(n))])
        targets.append(None)
    # the task's own inputs where a task is registered
    task = _task(path)
    if task is not None and tuple(task.alphabet) == tuple(p.alphabet):
        lo, hi = task.min_length(), task.max_length()
        for n in sorted({lo, lo + 1, lo + 5, 50, 300}):  # (some samplers are slow at 2,000)
            if n >= lo and (hi is None or n <= hi):
                for _ in range(3):
                    s = task.sample(rng, n)
                    inputs.append(s.tokens)
                    targets.append(s.target)
    same, ref_ok, _, _, _ = V.check_inputs(model, inputs, targets, dtype="float32", device="cpu",
                                           max_new=64 if model.kind == "generate" else None)
    bad = [i for i, ok in enumerate(same) if not ok]
    assert not bad, f"model != interpreter on {len(bad)} inputs, first: {inputs[bad[0]][:30]}"
    bad = [i for i, ok in enumerate(ref_ok) if not ok]
    assert not bad, f"model != task reference on {inputs[bad[0]][:30]}"


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_dense_reference_equals_fast_paths(path):
    model = _compiled(path)
    if model is None:
        pytest.skip("not in the class")
    p = model.program
    rng = np.random.default_rng(1)
    inputs = [[str(s) for s in rng.choice(list(p.symbols), size=int(n))] for n in (1, 3, 7, 12)]
    for tokens in inputs:
        ref = model.residual(tokens, dtype="float64", backend="dense")
        for backend in ("scan", "sdpa"):
            got = model.residual(tokens, dtype="float64", backend=backend)
            np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)
    for dtype in ("float64", "float32", "bfloat16"):
        outs = {b: model.outputs(inputs, dtype=dtype, backend=b) for b in ("dense", "scan", "sdpa")}
        for b in ("scan", "sdpa"):
            for a, c in zip(outs["dense"], outs[b]):
                assert np.array_equal(a, c), (dtype, b)


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_weights_keep_the_documented_invariants(path):
    """docs/compiler.md, "Invariants": (1) every sublayer reads only residual dimensions that the
    embedding or an earlier sublayer writes (read off the weights themselves, not the plan that
    asserts it); (2) every head's value row is an integer combination of bool and flag dimensions,
    plus a half-integer multiple of bos for a uniform head (the sign of its average is then exact);
    (3) every bool dimension is exactly 0 or 1, and 0 at BOS, on random inputs in float64."""
    from compiler.weights import bos_column

    model = _compiled(path)
    if model is None:
        pytest.skip("not in the class")
    tensors, arch = model._weights, model.config["architecture"]
    enc = np.array([r["encoding"] for r in model.config["residual"]])
    bos = bos_column(tensors)
    assert bos is not None and enc[bos] == "flag"

    def cols(name):
        shape, idx, v = tensors[name]
        return set(np.asarray(idx[1])[np.asarray(v) != 0].tolist())

    def rows(name):
        shape, idx, v = tensors[name]
        return set(np.asarray(idx[0])[np.asarray(v) != 0].tolist())

    written = cols("embed.token") | {c for name in tensors if name.startswith("embed.periodic_") for c in cols(name)}
    for l, spec in enumerate(arch["layers"]):
        p = f"layers.{l}."
        for reads, writes in ((("attn.W_Q", "attn.W_K", "attn.W_V"), "attn.W_O"), (("sign.W_in",), "sign.W_out"),
                              (("mlp.W_1",), "mlp.W_2")):
            if p + writes not in tensors:
                continue
            read = set().union(*(cols(p + r) for r in reads if p + r in tensors))
            assert read <= written, (l, writes, sorted(read - written)[:5])
            written |= rows(p + writes)
        if p + "attn.W_V" in tensors:
            shape, idx, v = tensors[p + "attn.W_V"]
            idx, v = np.asarray(idx), np.asarray(v)
            for h, head in enumerate(spec["heads"]):
                sel = idx[0] == h
                for c, x in zip(idx[1][sel].tolist(), v[sel].tolist()):
                    if c == bos and head["kind"] == "uniform":
                        assert (2 * x) % 2 == 1, (l, h, x)  # a half-integer
                    else:
                        assert float(x).is_integer() and enc[c] in ("bool", "flag"), (l, h, c, enc[c], x)
    bools = np.flatnonzero(enc == "bool")
    rng = np.random.default_rng(3)
    p = model.program
    for n in (1, 4, 9, 17):
        res = model.residual([str(t) for t in rng.choice(list(p.symbols), size=n)], dtype="float64")
        assert res.shape[0] == n + 1
        assert np.all((res[:, bools] == 0) | (res[:, bools] == 1)) and not res[0, bools].any()


def test_the_plan_refuses_an_operation_before_its_inputs():
    """The plan's own check (an AssertionError, an internal error) fires when a node's slot is not
    after every input's."""
    from compiler.graph import build_graph
    from compiler.plan import plan_layers
    from rasp.rewrite import rewrite_core

    p = rasp.load(ROOT / "programs" / "dyck1.cr")
    graph = build_graph(rewrite_core(p.core))
    plan_layers(graph)
    late = next(n for n in graph.nodes if n.inputs and n.slot > 0)
    late.slot = max(graph.nodes[i].slot for i in late.inputs)
    with pytest.raises(AssertionError, match="of a later or equal slot"):
        plan_layers(graph)


GENERATORS = [p for p in PROGRAMS if "output generate" in p.read_text()]


@pytest.mark.parametrize("path", GENERATORS, ids=lambda p: p.name)
def test_cached_generation_equals_recomputation(path):
    model = _compiled(path)
    if model is None:
        pytest.skip("not in the class")
    m = model.model("cpu", "float32")
    task = _task(path)
    rng = np.random.default_rng(2)
    if task is not None and tuple(task.alphabet) == tuple(model.alphabet):
        prompts = [task.sample(rng, n).tokens for n in sorted({task.min_length(), task.min_length() + 3})]
    else:
        prompts = [[str(s) for s in rng.choice(list(model.symbols), size=n)] for n in (3, 6)]
    seqs = [model.encode(t) for t in prompts]
    cached = m.generate(seqs, [12] * len(seqs))
    assert model.model("cpu", "float64").generate(seqs, [12] * len(seqs)) == cached
    for s, g in zip(seqs, cached):
        cur, out = list(s), []
        while len(out) < 12:
            o = m(torch.as_tensor([cur]))[0, -1]
            hits = torch.nonzero(o).flatten()
            if len(hits) == 0:
                break
            cur.append(int(hits[0]))
            out.append(int(hits[0]))
        assert out == g


@pytest.mark.parametrize("path", GENERATORS, ids=lambda p: p.name)
def test_prefill_prompt_outputs_equal_the_forward(path):
    """Verification reads a generator's output bools at every prompt position from generation's
    prefill (``generate_with_prompt_outputs``) instead of a second forward: they are the forward's, for prompts of
    several lengths in one batch (several length groups, padded rows) and in each backend."""
    model = _compiled(path)
    if model is None:
        pytest.skip("not in the class")
    rng = np.random.default_rng(4)
    prompts = [[str(s) for s in rng.choice(list(model.symbols), size=n)] for n in (1, 2, 5, 7, 16, 40)]
    seqs = [model.encode(t) for t in prompts]
    for dtype, backend in (("float64", "dense"), ("float32", "scan"), ("float32", "sdpa"), ("bfloat16", "scan")):
        gen, got = model.model("cpu", dtype).generate_with_prompt_outputs(seqs, [3] * len(seqs), backend)
        assert gen == model.model("cpu", dtype).generate(seqs, [3] * len(seqs), backend)
        want = model.outputs(prompts, dtype=dtype, backend=backend)
        assert len(got) == len(prompts) and len(gen) == len(prompts)
        for g, w in zip(got, want):
            assert g.shape == w.shape and np.array_equal(g, w), (dtype, backend)


@pytest.mark.parametrize("far", [None, 2000000000])
def test_cached_local_heads_keep_a_ring_of_the_last_offsets(far):
    """The local heads' cache is a ring of W = min(largest offset, last position + 1) values: offsets
    up to 9 wrap around it several times over 40 tokens, and an offset of 2*10^9 (which once made a
    buffer of 2*10^9 rows, 16 GB) reads BOS at every position; each cached step's residual is the
    dense forward's, and generation gives the interpreter's tokens."""
    extra = f' && #[j == i - {far}] "a" == 0' if far else ""
    p = rasp.parse('alphabet a b c\nL[x] = exists[j == i - 1] Q[x] && exists[j == i - 2] "b" || '
                   f'exists[j == i - 5] Q[x] && !exists[j == i - 9] "a"{extra}\n'
                   'N[x] = L[x] && #"a" + #[j == i - 3] "c" <= #"b" + 20\noutput generate N')
    model = compiler.compile(p)
    m = model.model("cpu", "float64")
    rng = np.random.default_rng(4)
    tokens = [str(s) for s in rng.choice(list(model.symbols), size=40)]
    ids = torch.as_tensor([model.encode(tokens)])
    with torch.no_grad():
        dense = m.residual_fm(ids, "dense")
        for start in (1, 4, 12):
            collect: list = []
            m.residual_fm(ids[:, :start], "scan", collect)
            state = m._prefill_state(collect, torch.as_tensor([start]), ids.shape[1])
            rings = [s["ring"].shape[1] for s in state if s is not None and "ring" in s]
            assert rings and max(rings) == (9 if far is None else ids.shape[1] + 1)
            for t in range(start + 1, ids.shape[1] + 1):
                x = m._step(state, ids[:, t - 1], torch.as_tensor([t]))
                np.testing.assert_allclose(x[0, :, 0].numpy(), dense[0, :, t].numpy(), rtol=0, atol=1e-12)
    prompts = [tokens[:n] for n in (1, 2, 7, 15)]
    assert model.run_batch(prompts, max_new=12) == [p.run(x, max_new=12) for x in prompts]


@pytest.mark.parametrize("path", GENERATORS, ids=lambda p: p.name)
def test_cached_steps_compute_the_dense_residual(path):
    """The key/value cache is a fast path too: prefill a prompt of 1 to 3 tokens, then feed the rest of
    the input one token at a time through the cached step; the residual at every new position is
    the dense reference forward's (float64), so the cache holds what attention would compute (a
    scaled running mean would still give the same outputs)."""
    model = _compiled(path)
    if model is None:
        pytest.skip("not in the class")
    m = model.model("cpu", "float64")
    rng = np.random.default_rng(3)
    tokens = [str(s) for s in rng.choice(list(model.symbols), size=9)]
    ids = torch.as_tensor([model.encode(tokens)])
    with torch.no_grad():
        dense = m.residual_fm(ids, "dense")  # (1, d, T + 1), t = 0 is BOS
        for start in (1, 2, 3):
            collect: list = []
            m.residual_fm(ids[:, :start], "scan", collect)
            state = m._prefill_state(collect, torch.as_tensor([start]), ids.shape[1])
            for t in range(start + 1, ids.shape[1] + 1):
                x = m._step(state, ids[:, t - 1], torch.as_tensor([t]))
                np.testing.assert_allclose(x[0, :, 0].numpy(), dense[0, :, t].numpy(), rtol=0, atol=1e-12)
