"""Mistakes made through the Python API are RaspErrors, as on the command line (found by probing the
API, 2026-11-30: these were IndexError, TypeError, AssertionError, torch RuntimeErrors, or silently
accepted with outputs that disagreed between the model and the interpreter)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import compiler
import rasp
from rasp.errors import RaspError

ROOT = Path(__file__).resolve().parent.parent
UR, DYCK = str(ROOT / "programs" / "ur.rasp"), str(ROOT / "programs" / "dyck1.cr")


@pytest.fixture(scope="module")
def ur():
    p = rasp.load(UR, alphabet=list("abcd"))
    return p, compiler.compile(p)


def test_empty_batch_is_an_empty_answer(ur):
    p, m = ur
    assert m.run_batch([]) == [] and p.run_batch([]) == []  # the generator's batch of 0 crashed
    dyck = compiler.compile(DYCK)
    assert dyck.run_batch([]) == []


@pytest.mark.parametrize("max_new", [-1, 1.5, True, "3"])
def test_max_new_must_be_a_count(ur, max_new):
    p, m = ur
    for run in (p.run, m.run):
        with pytest.raises(RaspError, match="max_new must be None or an integer >= 0"):
            run("a b c a <sep> b", max_new=max_new)
    assert m.run("a b c a <sep> b", max_new=0) == p.run("a b c a <sep> b", max_new=0) == []


def test_a_batch_error_names_its_input(ur):
    p, m = ur
    for run_batch in (p.run_batch, m.run_batch, p.evaluate):
        with pytest.raises(RaspError, match=r"error: input 1 \(of 3, counted from 0\): empty input"):
            run_batch(["a <sep> a", "", "b"])
        with pytest.raises(RaspError, match=r"error: input 2 \(of 3, counted from 0\): token 'z'"):
            run_batch(["a <sep> a", "b", "a z"])
    for run in (p.run, m.run):  # one input: nothing to name
        with pytest.raises(RaspError, match="error: empty input"):
            run("")


def test_inputs_of_the_wrong_type(ur):
    p, m = ur
    # Program.evaluate too (helper 69: it took "ab" as the two inputs "a" and "b")
    for call in (lambda: m.run_batch("a b"), lambda: p.run_batch("a b"), lambda: p.evaluate("a b")):
        with pytest.raises(RaspError, match="not one string"):
            call()
    with pytest.raises(RaspError, match="evaluate takes a list of inputs, not int"):
        p.evaluate(5)
    assert p.evaluate(["a b c a <sep> b"]).keys() == p.evaluate([["a", "b", "c", "a", "<sep>", "b"]]).keys()
    for call in (lambda: rasp.run(p, None), lambda: m.run(5), lambda: p.run_batch([None])):
        with pytest.raises(RaspError, match="an input is a string of tokens or a sequence"):
            call()
    assert m.run(("a", "b", "c", "a", "<sep>", "b")) == p.run("a b c a <sep> b") == ["c"]


@pytest.mark.parametrize("alphabet, message", [
    (["b", "a", "b"], "lists a symbol twice: b"),
    ("a b c", "not one string"),
    (["a", None], "non-empty string without whitespace"),
    (["", "a"], "non-empty string without whitespace"),
    (["b c"], "non-empty string without whitespace"),
])
def test_replacement_alphabets_are_checked_as_declared_ones(alphabet, message):
    """with_alphabet / alphabet= take the checks of a declared alphabet (a repeated symbol made the
    model and the interpreter disagree; a special token was dropped silently)."""
    for call in (lambda: rasp.load(UR).with_alphabet(alphabet),
                 lambda: rasp.load(UR, alphabet=alphabet),
                 lambda: compiler.compile(UR, alphabet=alphabet)):
        with pytest.raises(RaspError, match=message):
            call()
    assert rasp.load(UR).with_alphabet(iter(["x", "y"])).alphabet == ("x", "y")
    # a task's alphabet plus its special tokens: the specials stay special
    assert rasp.load(UR).with_alphabet(["x", "<sep>", "y"]).alphabet == ("x", "y")


@pytest.mark.parametrize("kwargs, message", [
    ({"device": "tpu"}, "unknown device"),
    ({"device": "CPU"}, "unknown device"),
    ({"device": "meta"}, "run on cpu or cuda"),
    ({"device": "cpu:1"}, "one CPU device"),
    ({"dtype": torch.int64}, "unknown dtype"),
    ({"dtype": "float8"}, "unknown dtype"),
])
def test_devices_and_dtypes(kwargs, message):
    m = compiler.compile(DYCK)
    with pytest.raises(RaspError, match=message):
        m.run("( )", **kwargs)
    assert m.run("( )", dtype=torch.float16) is True


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message where there is no GPU")
def test_cuda_where_there_is_none():
    with pytest.raises(RaspError, match="CUDA is not available here"):
        compiler.compile(DYCK).run("( )", device="cuda")


def test_one_device_resolution_for_models_and_training():
    """Compiled models and training resolve device names with one function (rasp.devices): the
    same names are refused in the same words; training also takes MPS, compiled models do not."""
    from rasp.devices import resolve_device
    from rasp.learn.train import pick_device

    assert resolve_device("cpu").type == pick_device("cpu").type == "cpu"
    assert resolve_device("auto") == compiler.model.resolve_device(None)
    for name in ("tpu", "CPU", ""):
        with pytest.raises(RaspError, match="unknown device"):
            pick_device(name)
    with pytest.raises(RaspError, match="compiled models run on cpu or cuda"):
        compiler.model.resolve_device("mps")
    with pytest.raises(RaspError, match="training runs on cpu, cuda or mps"):
        pick_device("meta")
    if not torch.cuda.is_available():
        for resolve in (resolve_device, pick_device):
            with pytest.raises(RaspError, match="CUDA is not available here"):
                resolve("cuda:1")
    else:
        with pytest.raises(RaspError, match="no such CUDA device here"):
            resolve_device(f"cuda:{torch.cuda.device_count()}")
    mps = getattr(torch.backends, "mps", None)
    if mps is None or not mps.is_available():
        with pytest.raises(RaspError, match="MPS is not available here"):
            pick_device("mps")


def test_compile_and_load_arguments():
    for bad, message in ((5, "loaded from a path"), (None, "loaded from a path"),
                         ('alphabet a b\nX = "a"', "looks like program text")):
        with pytest.raises(RaspError) as e:
            compiler.compile(bad)
        assert message in e.value.message + (e.value.hint or "")
    with pytest.raises(RaspError, match="RASP-L operation") as e:
        compiler.compile(str(ROOT / "programs" / "raspl_count.rasp"))
    assert "compile_raspl" in e.value.hint


def test_verify_api_arguments():
    import numpy as np

    from compiler import verify as V

    m = compiler.compile(DYCK)
    rng = np.random.default_rng(0)
    assert V.verify_length(m, "dyck1", 32, 2, rng).agree == 1.0  # a task by name
    assert V.verify_length(m, None, 32, 2, rng, dtype=torch.float32).weights_exact is True
    for call in (lambda: V.verify_length(m, None, 32, 0, rng), lambda: V.verify_length(m, None, -3, 2, rng),
                 lambda: V.find_limit(m, None, "float32", samples=0, rng=rng)):
        with pytest.raises(RaspError, match="at least 1"):
            call()
    with pytest.raises(RaspError, match="unknown task"):
        V.verify_length(m, "dyckk", 8, 1, rng)


def test_alphabet_option_values_and_undeclared_alphabets():
    """``--alphabet N`` takes 1 to 62 (the standard symbols) and refuses a negative N rather than
    reading it as a symbol; a program without an ``alphabet`` line gets the quoted symbols in order of
    first appearance, those written only as a family's index (``P["b"]``) included and its special
    tokens left out."""
    from rasp.expand import STANDARD_SYMBOLS, parse_alphabet_option

    assert parse_alphabet_option(str(len(STANDARD_SYMBOLS))) == STANDARD_SYMBOLS
    assert parse_alphabet_option("1") == ("a",)
    assert parse_alphabet_option("\u0663") == ("\u0663",)  # an Arabic-Indic 3 is a symbol, not "3 symbols"
    assert parse_alphabet_option("\uff10,x") == ("\uff10", "x")
    for text in (str(len(STANDARD_SYMBOLS) + 1), "0", "-3"):
        with pytest.raises(RaspError, match=f"--alphabet {int(text)}: choose 1..{len(STANDARD_SYMBOLS)} symbols"):
            parse_alphabet_option(text)
    p = rasp.parse('special "<s>"\nP[x] = Q[x] && #Q[x] > 1\nA = "<s>" && (#P["b"] > 0 || #"a" > 0)\noutput accept A\n')
    assert p.alphabet == ("b", "a") and p.special == ("<s>",)
    assert p.run("b b <s>") is True and p.run("a <s>") is True and p.run("b <s>") is False


def test_symbol_comparisons_order_data_then_specials_and_the_constant_cap():
    """Symbols compare by position: the data alphabet in order, then the special tokens (so every data
    symbol is below every special one); ``<=`` holds for equal symbols. A constant part of exactly
    2^61 is accepted, one more is refused (exact 64-bit arithmetic)."""
    p = rasp.parse('alphabet a b c\nspecial "<s>"\nLE[x, y] = x <= y\nLT[x] = x < "<s>" && "a" < x\n'
                   'GE[x] = x >= "<s>"\noutput predict LT\n')
    v = {k: bool(a[0, 0]) for k, a in p.evaluate(["a"]).items()}
    assert v["LE[a,a]"] and v["LE[a,c]"] and not v["LE[b,a]"]
    assert not v["LT[a]"] and v["LT[b]"] and v["LT[c]"] and not any(v[f"GE[{x}]"] for x in "abc")
    cap = 'alphabet a b\nX = #"a" > 1073741824 * (1073741824 * 2)'
    assert rasp.parse(cap).run("a b") is False
    with pytest.raises(RaspError, match="constant part can reach 2,305,843,009,213,693,953"):
        rasp.parse(cap + " + 1")
    # a negative factor scales the magnitude, and max/min carry the larger constant part of each side
    c = "1073741824 * (1073741824 * 2)"
    assert rasp.parse(f'alphabet a b\nX = #"a" > -1 * ({c})').run("a") is True
    for src, reach in ((f'alphabet a b\nX = #"a" > -3 * ({c})', "6,917,529,027,641,081,856"),
                       (f'alphabet a b\nX = #"a" > max(#"b", {c}) + min(#"b", {c})', "4,611,686,018,427,387,904")):
        with pytest.raises(RaspError, match=f"constant part can reach {reach}"):
            rasp.parse(src)
