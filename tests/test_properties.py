"""Property tests on generated programs (rasp.strategies): printer round trips, interpreter against
the naive evaluator, guard rewrites, parser robustness, and coverage of the strategies.

Profiles (tests/conftest.py): ``HYPOTHESIS_PROFILE=ci`` (default, fast) or ``thorough``.
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import rasp
from rasp import ast as A
from rasp.parser import parse_module
from rasp.printer import module_to_str
from rasp.rewrite import rewrite_core, rewrite_module
from rasp.strategies import OPERATION_KINDS, FRAGMENTS, inputs, kinds, programs
from naive import naive_output, naive_values

FRAGMENT_NAMES = ["C-RASP", "C-RASP[local]", "C-RASP[periodic]", "C-RASP[periodic,local]"]
MAX_NEW = 4  # generators: tokens generated per input (naive generation is quadratic per step)

any_fragment = st.sampled_from(FRAGMENT_NAMES + ["any"]).flatmap(lambda f: programs(fragment=f))
in_class = st.sampled_from(FRAGMENT_NAMES).flatmap(lambda f: programs(fragment=f))


def batches(program: rasp.Program, max_size: int = 14):
    return st.lists(inputs(program, max_size=max_size), min_size=1, max_size=3)


# ----------------------------------------------------------------------------- printer
@given(any_fragment)
def test_parse_print_roundtrip(p):
    text = str(p)
    q = rasp.parse(text)
    assert q.module == p.module
    assert q == p
    assert str(q) == text  # printing is idempotent


@given(in_class)
def test_rewritten_module_roundtrip(p):
    """The checker's proof (the rewritten surface program) prints to source that parses back."""
    m = rewrite_module(p.module)
    text = module_to_str(m)
    assert parse_module(text) == m
    assert module_to_str(parse_module(text)) == text


# ----------------------------------------------------------------------------- interpreter
def _check_against_naive(p: rasp.Program, batch: list[list[str]]):
    values = p.evaluate(batch)
    for r, tokens in enumerate(batch):
        want = naive_values(p.core, tokens)
        for name, column in want.items():
            got = values[name][r, : len(tokens)].tolist()
            assert got == column, (name, tokens)
    got = p.run_batch(batch, max_new=MAX_NEW)
    assert got == [naive_output(p.core, t, max_new=MAX_NEW) for t in batch]


@given(st.data())
def test_interpreter_equals_naive(data):
    p = data.draw(any_fragment, label="program")
    _check_against_naive(p, data.draw(batches(p), label="inputs"))


@given(st.data())
def test_rewrite_preserves_values(data):
    """rewrite_core (the normal form the checker proves and the compiler compiles) changes no value."""
    p = data.draw(in_class, label="program")
    batch = data.draw(batches(p), label="inputs")
    rewritten = rewrite_core(p.core)
    q = rasp.Program(p.module, p.checked, rewritten)
    before, after = p.evaluate(batch), q.evaluate(batch)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)


# ----------------------------------------------------------------------------- parser robustness
def _assert_located(err: rasp.RaspError, text: str):
    assert err.span is not None, f"no location: {err.message}"
    lines = text.split("\n")
    assert 1 <= err.line <= len(lines), (err.line, len(lines))
    assert 1 <= err.column <= len(lines[err.line - 1]) + 1, (err.column, lines[err.line - 1])
    err.render()
    err.to_json()


def _parse_or_located_error(text: str):
    try:
        rasp.parse(text)
    except rasp.RaspError as err:
        _assert_located(err, text)


_PIECES = [
    "#", "[", "]", "(", ")", "=", "==", "!", "&&", "||", "-", "+", "*", "/", "%", ",", '"', '"a"',
    '"b"', "a", "x", "i", "j", "0", "3", " ", "\n", "if", "else", "exists", "pos", "any", "sum",
    "min", "output", "accept", "alphabet", "#import", "pred", "P0", "C1", "Q[x]", "true", "->",
    "{", "}", ":", "map", "select", "tokens",
]

text_like_programs = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)


@given(st.one_of(st.text(max_size=60), text_like_programs))
def test_parser_arbitrary_text(text):
    _parse_or_located_error(text)


@st.composite
def mutated_programs(draw):
    text = str(draw(any_fragment))
    for _ in range(draw(st.integers(1, 3))):
        pos = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["delete", "insert", "replace", "duplicate-line"]))
        if kind == "delete":
            end = draw(st.integers(pos, min(len(text), pos + 6)))
            text = text[:pos] + text[end:]
        elif kind == "insert":
            text = text[:pos] + draw(st.sampled_from(_PIECES)) + text[pos:]
        elif kind == "replace":
            end = min(len(text), pos + 1)
            text = text[:pos] + draw(st.sampled_from(_PIECES)) + text[end:]
        else:
            lines = text.split("\n")
            k = draw(st.integers(0, len(lines) - 1))
            lines.insert(k, lines[k])
            text = "\n".join(lines)
    return text


@given(mutated_programs())
def test_parser_mutated_programs(text):
    _parse_or_located_error(text)


# ----------------------------------------------------------------------------- strategies
def test_strategies_cover_every_operation_kind():
    """Over 1,000 draws the program strategy generates every operation kind at least once, and each
    fragment stays inside its limits."""
    seen: set[str] = set()
    outside: list[str] = []

    @settings(max_examples=1000, database=None, phases=[Phase.generate], derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(FRAGMENT_NAMES).flatmap(lambda f: st.tuples(st.just(f), programs(fragment=f))))
    def draw(pair):
        fragment, p = pair
        found = kinds(p)
        seen.update(found)
        f = FRAGMENTS[fragment]
        positional = {"pos", "pos-name", "pos-ref"} & found
        guarded = {"count-guard", "exists-guard"} & found
        if (positional and not f.periodic) or (guarded and not (f.local or f.periodic)):
            outside.append(f"{fragment}: {p}")

    draw()
    assert not outside, outside[:3]
    missing = sorted(set(OPERATION_KINDS) - seen)
    assert not missing, f"never generated: {missing}"


@settings(max_examples=20)
@given(programs(alphabet=("x", "y", "z"), max_depth=2, max_size=8), st.data())
def test_programs_follow_the_alphabet(p, data):
    assert p.alphabet == ("x", "y", "z")
    tokens = data.draw(inputs(("x", "y", "z"), min_size=2, max_size=5))
    assert 2 <= len(tokens) <= 5 and set(tokens) <= {"x", "y", "z"}
    rasp.run(p, tokens, max_new=2)


def test_unknown_fragment():
    import pytest

    with pytest.raises(ValueError, match="unknown fragment"):
        programs(fragment="C-RASP[global]")


def test_whole_program_errors_are_located():
    """Shrunk from test_parser_arbitrary_text: these errors had no location."""
    for text in ["", "// nothing\n", "alphabet a b\n", "X = true\n"]:
        try:
            rasp.parse(text)
        except rasp.RaspError as err:
            _assert_located(err, text)
        else:
            raise AssertionError(f"{text!r} parsed")
