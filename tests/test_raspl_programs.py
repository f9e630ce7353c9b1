"""The RASP-L programs in programs/: each agrees with its task's reference, and carries the verdict its
opening comment states (out-of-class tasks never "guaranteed").

Registry tasks (rasp.tasks): NRLast, NLLast, NF, NB, copy_repeat, parity, addition, and the classic
RASP-L programs for registry tasks (mode = 'majority', sort = 'sort'), plus two in-class tasks written
in RASP-L that lower to C-RASP (UR, bin_majority). Non-registry classic programs (count, histogram,
addition with index hints) have their samplers and references here.

Agreement is checked on ~100 samples per length bin (<= 50, 51-100, 101-150; fewer where the task's
lengths do not reach a bin), **teacher-forced**: the program runs once on input + reference output and
at every output position the first symbol (alphabet order) whose NEXT holds must be the reference's
next token, and at the end none may hold. By induction this is exactly what greedy generation
(``rasp.run``) produces, in one evaluation instead of one per generated token; ``test_generation``
also runs true generation on a few samples of each task.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import rasp
from rasp import tasks
from rasp.raspl import lower, verdict_for_raspl

ROOT = Path(__file__).resolve().parent.parent
PER_BIN = 100


@dataclass(frozen=True)
class Sample:
    tokens: list
    target: list


# --------------------------------------------------------------------------- non-registry tasks
N150 = tuple(str(i) for i in range(150))


def count_sample(rng, length: int) -> Sample:
    """Count: 'a b <sep>' -> a, a+1, ..., b. ``length`` is the output length b - a + 1."""
    a = int(rng.integers(0, 150 - length + 1))
    b = a + length - 1
    return Sample([str(a), str(b), "<sep>"], count_reference([str(a), str(b), "<sep>"]))


def count_reference(tokens: list) -> list:
    a, b = int(tokens[0]), int(tokens[1])
    return [str(k) for k in range(a, b + 1)]


HIST_LETTERS = ("a", "b", "c", "d")


def histogram_sample(rng, length: int) -> Sample:
    """Histogram: x1 .. xn <sep> over a b c d -> for each k, how often x_k occurs in x1 .. xn."""
    xs = [HIST_LETTERS[k] for k in rng.integers(0, 4, size=length - 1)]
    return Sample(xs + ["<sep>"], histogram_reference(xs + ["<sep>"]))


def histogram_reference(tokens: list) -> list:
    xs = tokens[: tokens.index("<sep>")]
    return [str(xs.count(x)) for x in xs]


HINTS = tuple(f"h{k}" for k in range(40))


def hints_sample(rng, length: int) -> Sample:
    """Addition with index hints (after Zhou et al.): two n-digit decimal operands (leading zeros
    allowed), every digit preceded by its hint; hints are consecutive symbols h(o) .. h(o+n-1) from
    the most significant digit, the same for both operands, at a random offset o >= 1. Output: the
    n + 1 digits of the sum (the carry first, possibly 0), each preceded by its hint, the carry's
    hint being h(o-1). ``length`` = 4n + 2 tokens of input."""
    n = max(1, (length - 2) // 4)
    o = int(rng.integers(1, len(HINTS) - n + 1))
    a = [str(d) for d in rng.integers(0, 10, size=n)]
    b = [str(d) for d in rng.integers(0, 10, size=n)]
    toks = []
    for k, d in enumerate(a):
        toks += [HINTS[o + k], d]
    toks.append("+")
    for k, d in enumerate(b):
        toks += [HINTS[o + k], d]
    toks.append("=")
    return Sample(toks, hints_reference(toks))


def hints_reference(tokens: list) -> list:
    p = tokens.index("+")
    a, b = tokens[:p], tokens[p + 1:-1]
    hints = a[0::2]
    n = len(hints)
    total = int("".join(a[1::2])) + int("".join(b[1::2]))
    digits = str(total).rjust(n + 1, "0")
    first = HINTS[HINTS.index(hints[0]) - 1]
    out = []
    for h, d in zip([first] + hints, digits):
        out += [h, d]
    return out


# --------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Entry:
    program: str
    fragment: str  # the verdict the program's comment states
    task: str | None = None  # registry task, or None (then sample/lengths below)
    sample: Callable | None = None
    lengths: tuple = ((1, 50), (51, 100), (101, 150))
    per_bin: int = PER_BIN
    uncapped: bool = False  # outputs longer than the default generation cap (2n + 8): pass max_new


ENTRIES = {
    "nrlast": Entry("programs/nrlast.rasp", "none", task="NRLast"),
    "nllast": Entry("programs/nllast.rasp", "none", task="NLLast"),
    "nf": Entry("programs/nf.rasp", "RASP-L", task="NF"),
    "nb": Entry("programs/nb.rasp", "RASP-L", task="NB"),
    "copy_repeat": Entry("programs/copy_repeat.rasp", "RASP-L", task="copy_repeat"),
    "parity": Entry("programs/parity.rasp", "none", task="parity"),
    "mode": Entry("programs/raspl_mode.rasp", "RASP-L", task="majority"),
    "sort": Entry("programs/raspl_sort.rasp", "RASP-L", task="sort"),
    "count": Entry("programs/raspl_count.rasp", "C-RASP[local]", sample=count_sample, uncapped=True),
    "ur": Entry("programs/raspl_ur.rasp", "C-RASP[local]", task="UR"),
    "bin_majority": Entry("programs/raspl_bin_majority.rasp", "C-RASP", task="bin_majority"),
    "histogram": Entry("programs/raspl_histogram.rasp", "RASP-L", sample=histogram_sample),
    "addition_hints": Entry("programs/raspl_addition_hints.rasp", "RASP-L", sample=hints_sample,
                            lengths=((6, 50), (51, 100), (101, 150))),
    "addition": Entry("programs/addition.rasp", "RASP-L", task="addition"),
}

_LOADED: dict = {}


def program(name: str) -> rasp.Program:
    if name not in _LOADED:
        _LOADED[name] = rasp.load(ROOT / ENTRIES[name].program)
    return _LOADED[name]


def samples(name: str, bin_: tuple, count: int, seed: int = 0) -> list:
    e = ENTRIES[name]
    rng = np.random.default_rng([seed, bin_[0]])
    if e.task is not None:
        task = tasks.TASKS[e.task]
        lengths = task.lengths(*bin_)
        if not len(lengths):
            return []
        out = []
        for _ in range(count):
            s = task.sample(rng, int(lengths[int(rng.integers(len(lengths)))]))
            out.append(Sample(list(s.tokens), list(s.target)))
        return out
    return [e.sample(rng, int(rng.integers(bin_[0], bin_[1] + 1))) for _ in range(count)]


def teacher_forced_mismatches(p: rasp.Program, batch: list, uncapped: bool = False) -> list:
    """[(sample, output step, expected, got)] where greedy decoding would leave the reference
    (``uncapped``: the caller passes max_new, so the default cap 2n + 8 does not apply)."""
    seqs = [s.tokens + s.target for s in batch]
    values = p.evaluate(seqs)
    nxt = np.stack([values[n] for n in p.core.output.names], axis=2)  # (B, N, |alphabet|)
    bad = []
    for r, s in enumerate(batch):
        n = len(s.tokens)
        limit = rasp.program.default_max_new(n)
        assert uncapped or len(s.target) <= limit
        for k in range(len(s.target) + 1):
            hits = np.flatnonzero(nxt[r, n - 1 + k])
            got = p.alphabet[hits[0]] if len(hits) else None
            want = s.target[k] if k < len(s.target) else None
            if got != want:
                bad.append((" ".join(s.tokens), k, want, got))
                break
    return bad


def _bins(name):
    return [(name, b) for b in ENTRIES[name].lengths]


@pytest.mark.parametrize("name,bin_", [x for name in ENTRIES for x in _bins(name)],
                         ids=lambda x: x if isinstance(x, str) else f"{x[0]}-{x[1]}")
def test_agrees_with_reference(name, bin_):
    p = program(name)
    batch = samples(name, bin_, ENTRIES[name].per_bin)
    if not batch:
        pytest.skip(f"no lengths of {name} in {bin_}")
    for chunk in range(0, len(batch), 25):
        bad = teacher_forced_mismatches(p, batch[chunk: chunk + 25], ENTRIES[name].uncapped)
        assert not bad, bad[:3]


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_generation(name):
    """True greedy generation (rasp.run) on a few short samples equals the reference."""
    p = program(name)
    batch = samples(name, ENTRIES[name].lengths[0], 12, seed=7)
    batch = sorted(batch, key=lambda s: len(s.tokens) + len(s.target))[:2 if len(p.symbols) < 100 else 1]
    for s in batch:
        max_new = len(s.target) + 4 if ENTRIES[name].uncapped else None
        assert rasp.run(p, s.tokens, max_new=max_new) == s.target, s.tokens


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_streaming_generation(name):
    """Generation streams RASP-L programs too (a select keeps its keys, an aggregate its values):
    re-evaluation, streaming and the switches between them give the reference's tokens; and the
    streaming evaluator's values equal the interpreter's at every position."""
    from generations import same_generations

    from rasp import interp, stream

    p = program(name)
    assert stream.supports(p)  # count's maps sit in a family but read no variable of it
    batch = sorted(samples(name, ENTRIES[name].lengths[0], 12, seed=3), key=lambda s: len(s.tokens))[:4]
    seqs = [p.encode(s.tokens) for s in batch]
    max_new = max(len(s.target) for s in batch) + 4 if ENTRIES[name].uncapped else None
    assert same_generations(p, seqs, max_new) == [s.target for s in batch]
    full = [p.encode(s.tokens + s.target) for s in batch]
    want = interp.evaluate(p.core, interp.make_batch(full))
    got = stream.evaluate(p, full)
    assert set(got) == {k for k, v in want.items() if isinstance(v, np.ndarray)}
    for k, v in got.items():
        assert np.array_equal(v, want[k]), k


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_verdict(name):
    e = ENTRIES[name]
    v = verdict_for_raspl(program(name))
    assert v.fragment == e.fragment, [(r.line, r.col, r.message) for r in v.reasons]
    if e.task is not None and not tasks.TASKS[e.task].published_in_class:
        assert v.guarantee != "guaranteed"  # out-of-class tasks: never guaranteed
    if e.fragment == "none":
        assert v.reasons and all(r.condition.startswith("RASP-L") for r in v.reasons)


def test_comments_state_the_verdict():
    for name, e in ENTRIES.items():
        text = (ROOT / e.program).read_text()
        head = "\n".join(line for line in text.splitlines() if line.startswith("//"))
        assert f"Verdict: {e.fragment}" in head, name
        assert head.startswith("//") and "Why it is correct" in head, name


def test_sort_lowers_over_a_small_alphabet():
    small = program("sort").with_alphabet(["0", "1", "2", "3", "4"])
    low = lower(small)
    assert low is not None
    inputs = [["3", "0", "4", "<sep>"], ["2", "<sep>"], ["4", "1", "3", "0", "2", "<sep>"]]
    assert [rasp.run(low, t) for t in inputs] == [rasp.run(small, t) for t in inputs] == [
        ["0", "3", "4"], ["2"], ["0", "1", "2", "3", "4"]]
    assert verdict_for_raspl(small).fragment == "C-RASP"


def test_count_lowered_agrees():
    """The proof of count's verdict: its lowered C-RASP program generates the same numbers (over
    numbers 0..19, to keep the lowered program small)."""
    small = program("count").with_alphabet([str(k) for k in range(20)])
    low = lower(small)
    assert low is not None
    for a, b in [(3, 9), (0, 0), (17, 19), (0, 19)]:
        toks = [str(a), str(b), "<sep>"]
        assert rasp.run(low, toks, max_new=30) == rasp.run(small, toks, max_new=30) == count_reference(toks)


def test_registered_paths():
    """Where the registry names a program for these tasks, it is ours."""
    for name, e in ENTRIES.items():
        if e.task is None:
            continue
        registered = tasks.TASKS[e.task].program
        if registered is not None and e.task not in ("majority", "sort", "UR", "bin_majority"):
            assert registered == e.program, (e.task, registered)


def test_addition_file_is_generated():
    import gen_addition

    assert (ROOT / "programs/addition.rasp").read_text() == gen_addition.source()


def test_addition_is_exact_within_the_lookahead():
    """Operands of at most R digits: every carry chain fits the look-ahead, so the program is exact
    (including the worst case, a chain through every column)."""
    import gen_addition

    p = program("addition")
    R = gen_addition.R
    cases = [("1" * R, "1"), ("1" + "0" * (R - 1), "1" * R), ("1" * R, "1" * R), ("10" * (R // 2), "1" * (R - 1))]
    batch = []
    for a, b in cases:
        toks = list(a) + ["+"] + list(b) + ["="]
        batch.append(Sample(toks, tasks.TASKS["addition"].reference(toks)))
    assert not teacher_forced_mismatches(p, batch)
    # beyond the bound: a carry chain longer than R columns is missed
    a, b = "1" * (R + 2), "1"
    toks = list(a) + ["+"] + list(b) + ["="]
    assert teacher_forced_mismatches(p, [Sample(toks, tasks.TASKS["addition"].reference(toks))])


def test_addition_hints_lower_with_few_hints():
    """With 6 hints instead of 40 the index-hint program lowers to C-RASP[local]; the lowered program
    agrees with the reference (teacher-forced)."""
    small_alphabet = [str(d) for d in range(10)] + [f"h{k}" for k in range(6)]
    small = program("addition_hints").with_alphabet(small_alphabet)
    low = lower(small)
    assert low is not None
    assert verdict_for_raspl(small).fragment == "C-RASP[local]"
    batch = []
    for toks in (["h1", "9", "h2", "5", "+", "h1", "0", "h2", "7", "="],
                 ["h1", "9", "h2", "9", "h3", "9", "+", "h1", "0", "h2", "0", "h3", "1", "="],
                 ["h4", "3", "+", "h4", "4", "="],
                 ["h2", "5", "h3", "5", "h4", "5", "h5", "5", "+", "h2", "4", "h3", "4", "h4", "4", "h5", "5", "="]):
        batch.append(Sample(toks, hints_reference(toks)))
    assert not teacher_forced_mismatches(low, batch)
    assert not teacher_forced_mismatches(small, batch)


@pytest.mark.parametrize("name", ["ur", "bin_majority"])
def test_lowered_program_agrees(name):
    """The proof behind a guaranteed verdict: the lowered C-RASP program generates the reference too."""
    low = lower(program(name))
    assert low is not None
    batch = samples(name, (1, 50), 20, seed=3)
    assert not teacher_forced_mismatches(low, batch)
