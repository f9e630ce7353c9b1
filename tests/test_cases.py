"""Every case of the shared table (tests/cases.py): the interpreter and the naive evaluator both
give the hand-written expected output."""
from __future__ import annotations

import pytest

import rasp
from cases import CASES
from naive import naive_output


def test_names_unique():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
    assert len(CASES) >= 30


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_interpreter(case):
    program = rasp.parse(case.source)
    assert rasp.run(program, case.token_list) == case.expected


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_naive(case):
    program = rasp.parse(case.source)
    assert naive_output(program.core, case.token_list) == case.expected
