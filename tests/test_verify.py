"""Verification's verdicts, given models and references that are wrong on purpose.

Every other test hands verification a correct model, so a check that always said "agree" would pass
them all. Here each way of being wrong (a wrong generated token, a generation that stops early, a
wrong reference, a short predictor output, a partial disagreement during find-limit) must be
reported, and find-limit's stopping rules are pinned down with a fake step.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import compiler
import rasp
from compiler import verify as V
from compiler.model import CompiledTransformer

ROOT = Path(__file__).resolve().parent.parent
DYCK = str(ROOT / "programs" / "dyck1.cr")

#: after the separator, generate the first symbol seen so far (one token, then stop)
GEN = 'alphabet a b\nspecial "<s>"\nNEXT[x] = "<s>" && #Q[x] > 0\noutput generate NEXT\n'


@pytest.fixture
def gen_model():
    return compiler.compile(rasp.parse(GEN))


def _tampered(monkeypatch, change):
    """Make every compiled model's cached generation return ``change(generated ids)``."""
    original = CompiledTransformer._generate

    def generate(self, seqs, limits, backend, want_prompt_outputs):
        generated, prompt_outputs = original(self, seqs, limits, backend, want_prompt_outputs)
        return [change(g) for g in generated], prompt_outputs

    monkeypatch.setattr(CompiledTransformer, "_generate", generate)


def test_generator_checks_pass_an_honest_model(gen_model):
    inputs = [["b", "<s>"], ["a", "b", "<s>"], ["a", "b"]]
    assert gen_model.run(inputs[0]) == ["b"] and gen_model.run(inputs[2]) == []
    same, ref_ok, values, _, _ = V.check_inputs(gen_model, inputs, [None] * 3, dtype="float64")
    assert same == [True] * 3 and ref_ok == [True] * 3 and values == [["b"], ["a"], []]


def test_a_wrong_generated_token_is_a_disagreement(gen_model, monkeypatch):
    _tampered(monkeypatch, lambda g: [1 - t if t in (0, 1) else t for t in g])  # a <-> b
    same, _, values, _, _ = V.check_inputs(gen_model, [["b", "<s>"], ["a", "b"]], [None] * 2, dtype="float64")
    assert values[0] == ["a"]
    assert same == [False, True]  # the second prompt generates nothing: nothing to swap


def test_a_generation_that_stops_early_is_a_disagreement(gen_model, monkeypatch):
    _tampered(monkeypatch, lambda g: g[:-1])
    same, _, values, _, _ = V.check_inputs(gen_model, [["b", "<s>"]], [None], dtype="float64")
    assert values == [[]] and same == [False]  # the interpreter would have generated "b"
    # also when the model stops one token short of a cap (--max-new 1): the cap does not excuse it
    same, _, _, _, _ = V.check_inputs(gen_model, [["b", "<s>"]], [None], dtype="float64", max_new=1)
    assert same == [False]


def test_a_wrong_reference_is_reported():
    m = compiler.compile(rasp.load(DYCK))
    inputs = [["(", ")"], ["(", "("]]
    same, ref_ok, values, _, _ = V.check_inputs(m, inputs, [True, False], dtype="float64")
    assert same == [True, True] and ref_ok == [True, True] and values == [True, False]
    same, ref_ok, _, _, _ = V.check_inputs(m, inputs, [False, True], dtype="float64")
    assert same == [True, True] and ref_ok == [False, False]


def test_predictor_values_compare_position_by_position():
    assert V._same_value([["a"], ["a", "b"]], [["a"], ["b", "a"]])  # sets: order does not matter
    assert not V._same_value([["a"]], [["a"], ["b"]])  # one position short
    assert not V._same_value([["a"], ["b"]], [["a"], ["a"]])


def test_verify_length_counts_reference_disagreements(monkeypatch):
    """A model that agrees with the interpreter but not with the task's reference is not exact."""
    m = compiler.compile(rasp.load(DYCK))
    inputs = [["(", ")"], ["(", "("], [")", "("]]
    truth = [True, False, False]

    monkeypatch.setattr(V, "sample_inputs", lambda *a, **k: (inputs, [not t for t in truth[:2]] + truth[2:]))
    row = V.verify_length(m, None, 2, 3, np.random.default_rng(0), dtype="float64")
    assert row.agree_interpreter == 1.0 and row.agree_reference == pytest.approx(1 / 3)
    assert row.agree == pytest.approx(1 / 3) and row.example == ["(", ")"]


def _fake_steps(monkeypatch, agree_at=lambda n: 1.0):
    ran = []

    def step(model, task, n, samples, rng, **kw):
        ran.append(n)
        a = agree_at(n)
        return V.Row(length=n, samples=samples, agree=a, agree_interpreter=a, agree_reference=None,
                     model_seconds=0.0, interp_seconds=0.0, dtype="float32", device="cpu", backend="scan")

    monkeypatch.setattr(V, "verify_length", step)
    return ran


def test_find_limit_stops_at_a_partial_disagreement(monkeypatch):
    ran = _fake_steps(monkeypatch, lambda n: 0.9 if n >= 64 else 1.0)
    m = compiler.compile(rasp.load(DYCK))
    lim = V.find_limit(m, None, "float32", samples=10, rng=np.random.default_rng(0), start=16, budget_s=60)
    assert ran == [16, 32, 64]
    assert (lim["longest_exact"], lim["first_failure"], lim["stopped"]) == (32, 64, "disagreement at 64")


def test_find_limit_takes_rows_already_measured(monkeypatch):
    """Rows rasp verify measured for --lengths are reused (not run or reported again), and one that
    disagreed stops the search there."""
    ran = _fake_steps(monkeypatch)
    m = compiler.compile(rasp.load(DYCK))
    done = {32: V.verify_length(m, None, 32, 1, None)}
    ran.clear()
    rows, shown = [], []
    lim = V.find_limit(m, None, "float32", samples=1, rng=np.random.default_rng(0), start=16, budget_s=60,
                       max_length=128, rows=rows, on_row=shown.append, done=done)
    assert ran == [16, 64, 128] and [r.length for r in rows] == [r.length for r in shown] == [16, 64, 128]
    assert lim["longest_exact"] == 128
    bad = {32: V.Row(length=32, samples=1, agree=0.0, agree_interpreter=0.0, agree_reference=None, model_seconds=0.0,
                     interp_seconds=0.0, dtype="float32", device="cpu", backend="scan")}
    ran.clear()
    lim = V.find_limit(m, None, "float32", samples=1, rng=np.random.default_rng(0), start=16, budget_s=60, done=bad)
    assert ran == [16] and lim["stopped"] == "disagreement at 32" and lim["longest_exact"] == 16
    # a row measured already is taken without the memory budget (it ran: the budget's guess is moot);
    # the budget stopped the search at that very length before
    monkeypatch.setattr(V, "predict_bytes", lambda model, n, *a: (n, 0))
    monkeypatch.setattr(V, "memory_stop", lambda dev, need, host: {"need_bytes": need} if need >= 32 else None)
    ran.clear()
    lim = V.find_limit(m, None, "float32", samples=1, rng=np.random.default_rng(0), start=16, budget_s=60,
                       done={32: V.verify_length(m, None, 32, 1, None)})
    assert ran == [32, 16] and lim["longest_exact"] == 32 and lim["stopped"] == "memory budget"
    assert lim["memory"]["length"] == 64


def test_find_limit_runs_the_tasks_longest_length(monkeypatch):
    """The task's longest input is a length find-limit reaches by doubling: it is verified, then the
    search stops."""
    ran = _fake_steps(monkeypatch)
    monkeypatch.setattr(V, "task_max_length", lambda task, program: 64)
    m = compiler.compile(rasp.load(DYCK))
    lim = V.find_limit(m, None, "float32", samples=1, rng=np.random.default_rng(0), start=16, budget_s=60)
    assert ran == [16, 32, 64]
    assert lim["longest_exact"] == 64 and lim["stopped"] == "the task's longest input (64)"


def test_find_limit_always_verifies_the_start_length():
    """A zero time budget still verifies the start length (a real run): the budget only stops the
    doubling."""
    m = compiler.compile(rasp.load(DYCK))
    lim = V.find_limit(m, None, "float32", samples=1, rng=np.random.default_rng(0), start=16, budget_s=0)
    assert lim["longest_exact"] == 16 and lim["first_failure"] is None
    assert lim["stopped"] == "time budget (0 s)"


def test_a_generation_cut_by_its_cap_is_compared_with_the_references_first_tokens():
    """--max-new shorter than the task's answer: the model stops at the cap, and the reference (which
    does not know the cap) is compared on its first tokens; a wrong first token still fails."""
    m = compiler.compile(rasp.load(str(ROOT / "programs" / "uf.rasp"), alphabet=list("abcd") + ["<sep>"]))
    prompt = ["b", "d", "a", "<sep>"]
    assert m.run(prompt) == ["b", "d", "a"]
    same, ref_ok, values, _, _ = V.check_inputs(m, [prompt] * 3, [["b", "d", "a"], ["b", "a", "a"], ["d"]],
                                                dtype="float64", max_new=2)
    assert values == [["b", "d"]] * 3 and same == [True] * 3
    assert ref_ok == [True, False, False]
    _, ref_ok, _, _, _ = V.check_inputs(m, [prompt], [["b", "d"]], dtype="float64")  # uncut: all of it
    assert ref_ok == [False]
