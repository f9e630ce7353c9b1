"""The task registry: the seed paper's retrieval and copying family (Jobanputra et al. 2025) and
Huang et al.'s (2025) algorithmic tasks and formal languages.

Every :class:`Task` has a name, an output kind, a default alphabet, an input sampler that follows the
papers' data conventions, a reference implementation in plain Python (the ground truth, independent of
any program), the published theory label with its citation and statement, and the path of its
C-RASP program where the task is in the class.

**Lengths.** ``length`` is the number of tokens the program reads (``Sample.tokens``), special tokens
included and no BOS: retrieval ``x1 .. x_{N-1} <sep> q`` has length N + 1; copying ``x1 .. xN <sep>``
has length N + 1. (The papers bin by the length of the content, so our bins are shifted by one or
two tokens.) Every length in ``[min_length(), max_length()]`` can be sampled; anything else is a
:class:`~rasp.RaspError` that says why.

**Output kinds.**

* ``generate`` (a list of tokens: the greedy continuation): retrieval (one token), copying, sort,
  addition, and Huang et al.'s majority-type tasks and parity, which the papers pose as
  ``x1 .. xn <sep> answer`` (their data code appends the answer after ``<sep>``);
* ``predict`` (one list of allowed next symbols per position, in alphabet order): the formal
  languages, as character prediction (theory.md section 1). **The end of the string is an explicit
  data symbol ``<eos>``**, the last symbol of every formal-language alphabet: ``<eos>`` is allowed
  after a prefix iff the prefix is itself in the language. Inputs never contain ``<eos>``. Without it,
  (aa)* would be trivial (``a`` can always follow); with it, the target at every prefix is the exact
  set of continuations. (The papers' datasets encode the end differently per language; this is the
  uniform version.) A predict sample is a valid prefix of the language: with probability 1/2 a
  complete member (when a member of that length exists), otherwise a valid prefix drawn uniformly
  (Boolean expressions and Shuffle-2: one symbol at a time, uniformly among those that keep the
  prefix valid, which is not uniform over the prefixes; a Shuffle-2 member interleaves two uniform
  Dyck words), which is itself a member as often as members are among the valid prefixes of that length. So at a
  length where members exist they are at least half of the samples and often more (at length 50, 4,000 samples:
  ab_d_bc .98, tomita3 .89, d2 .75, anbn .52; tomita1, 4 and 7 have no other valid prefixes: 1.0);
  over a range of lengths, where many have no member (anbn at odd lengths), fewer (2,000 training draws over lengths 1 to 50:
  anbn .29, anbncn .18).
* ``accept`` (bool): Dyck-1 only, because the bundled ``programs/dyck1.cr`` is an acceptor; its
  sampler gives balanced members and hard negatives about half and half.

**Published labels.** ``published_in_class`` is the papers' verdict for C-RASP[periodic, local].
``published_nope`` is membership in plain C-RASP (no positional relations): False where the task is
out of the class, or where the papers say it needs periodic or local positional information; True
where Huang et al. list it in the class with no positional requirement (read off theory.md section 3:
an inference from their table, flagged in the statement); None where the papers do not say.
``published_accuracy`` maps a positional encoding to the papers' test accuracy per bin
(<= 50, 51-100, 101-150) as fractions, None where a bin is not reported.
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from .errors import RaspError

REPO_ROOT = Path(__file__).resolve().parent.parent

SEP = "<sep>"
EOS = "<eos>"
LETTERS = tuple("abcdefghijklmnopqrstuvwxyz")
NUMBERS150 = tuple(str(i) for i in range(150))

JOBANPUTRA = "Jobanputra et al. 2025"
HUANG = "Huang et al. 2025"
CITE_J = ("Jobanputra, Veitsman, Sarrof, Bakalova, Demberg, Pavlick, Hahn: Born a Transformer -- Always a "
          "Transformer? NeurIPS 2025, arXiv 2505.21785")
CITE_H = ("Huang, Yang, Bhattamishra, Sarrof, Krebs, Zhou, Nakkiran, Hahn: A Formal Framework for "
          "Understanding Length Generalization in Transformers. ICLR 2025, arXiv 2410.02140")

BINS = ((1, 50), (51, 100), (101, 150))


@dataclass(frozen=True)
class Sample:
    """One input and its reference output.

    ``tokens``: what the program reads, no BOS (retrieval ``x1 .. x_{N-1} <sep> q``; copying
    ``x1 .. xN <sep>``). ``target``: the reference output in exactly the form :func:`rasp.run` returns:
    bool (acceptor), list[str] (generator continuation), list[list[str]] (character predictor: the
    allowed symbols after every prefix, in alphabet order).
    """

    tokens: list[str]
    target: object


@dataclass(frozen=True)
class Task:
    """A task: data, ground truth and published labels. See the module docstring for conventions."""

    name: str
    kind: str  # "accept" | "generate" | "predict"
    alphabet: tuple[str, ...]  # default data alphabet (special tokens excluded)
    special: tuple[str, ...]
    program: str | None  # path relative to the repository root, or None
    published_in_class: bool  # in C-RASP[periodic, local] as published
    published_nope: bool | None  # in plain C-RASP (NoPE) where the papers say
    citation: str
    statement: str
    source: str
    published_accuracy: dict
    description: str = ""  # the task and its input format, in a sentence or two
    variable_alphabet: bool = False  # whether ``alphabet=`` may replace the default
    #: the encodings (keys of ``published_accuracy``) whose figures theory.md gives only roughly ("~100",
    #: "mostly 100", one figure for every bin): shown as ~1.00 (the statement says how)
    published_approximate: tuple[str, ...] = ()
    # implementation (not part of the public interface)
    _sample: Callable = field(default=None, repr=False, compare=False)  # (rng, length, alphabet) -> tokens
    _reference: Callable = field(default=None, repr=False, compare=False)  # (tokens, alphabet) -> target
    _min_length: Callable = field(default=None, repr=False, compare=False)  # alphabet -> int
    _max_length: Callable = field(default=None, repr=False, compare=False)  # alphabet -> int | None

    def __hash__(self) -> int:  # published_accuracy is a dict: hash by name (names are unique)
        return hash(self.name)

    # ------------------------------------------------------------------ alphabet and lengths
    def resolve_alphabet(self, alphabet: Sequence[str] | None = None) -> tuple[str, ...]:
        """The data alphabet to use: the default, or ``alphabet`` where the task allows it."""
        if alphabet is None:
            return self.alphabet
        alph = tuple(str(s) for s in alphabet)
        if alph == self.alphabet:
            return alph
        if not self.variable_alphabet and alph == self.input_symbols():  # parity's 0 1 (e o only answer)
            return self.alphabet
        if not self.variable_alphabet:
            raise RaspError(
                f"task {self.name} has a fixed alphabet ({' '.join(self.alphabet)})",
                hint="tasks whose alphabet can change: " + ", ".join(n for n, t in TASKS.items() if t.variable_alphabet),
            )
        if not alph:
            raise RaspError(f"task {self.name}: the alphabet is empty", hint="list symbols: --alphabet a,b,c")
        if len(set(alph)) != len(alph):
            twice = next(x for x in alph if alph.count(x) > 1)
            raise RaspError(f"task {self.name}: the alphabet lists a symbol twice ({twice})",
                            hint="list each symbol once")
        clash = [s for s in alph if s in self.special]
        if clash:
            raise RaspError(f"task {self.name}: {clash[0]} is a special token, not a data symbol",
                            hint=f"list only data symbols; the task adds {' '.join(self.special)} itself")
        return alph

    def min_length(self, alphabet: Sequence[str] | None = None) -> int:
        """The shortest input (in tokens) the sampler can produce."""
        return self._min_length(self.resolve_alphabet(alphabet))

    def max_length(self, alphabet: Sequence[str] | None = None) -> int | None:
        """The longest input the sampler can produce (None: unbounded), e.g. |alphabet| + 1 for
        copying distinct tokens."""
        return self._max_length(self.resolve_alphabet(alphabet))

    # ------------------------------------------------------------------ data
    def sample(self, rng: np.random.Generator, length: int, alphabet: Sequence[str] | None = None) -> Sample:
        """One random input of exactly ``length`` tokens and its reference output."""
        alph = self.resolve_alphabet(alphabet)
        length = int(length)
        self._check_length(length, alph)
        tokens = self._sample(rng, length, alph)
        assert len(tokens) == length, (self.name, length, tokens)
        return Sample(list(tokens), self._reference(list(tokens), alph))

    def check_length(self, length: int, alphabet: Sequence[str] | None = None) -> None:
        """Raise the :class:`~rasp.RaspError` :meth:`sample` raises for a length it cannot make."""
        self._check_length(int(length), self.resolve_alphabet(alphabet))

    def _check_length(self, length: int, alph) -> None:
        lo, hi = self._min_length(alph), self._max_length(alph)
        if length < lo or (hi is not None and length > hi):
            rng_text = (f"its inputs have {lo} to {hi} tokens" if hi is not None and hi >= lo
                        else "it has no inputs over so few symbols" if hi is not None
                        else f"its inputs have at least {lo} tokens")
            # the reason a length is too long (an alphabet too small) says nothing about one too short
            why = LENGTH_REASONS.get(self.name) if hi is not None and length > hi else None
            raise RaspError(
                f"task {self.name} cannot make an input of length {length} with an alphabet of "
                f"{len(alph)} symbol{'' if len(alph) == 1 else 's'}: {rng_text}",
                hint=why or (f"give a length from {lo}" + (f" to {hi}" if hi is not None else " on")
                             if hi is None or hi >= lo else "use a larger alphabet"),
            )

    def reference(self, tokens: Sequence[str] | str, alphabet: Sequence[str] | None = None) -> object:
        """The ground truth for ``tokens`` in plain Python (no program involved). Inputs that are not
        of the task's form raise :class:`~rasp.RaspError`."""
        toks = tokens.split() if isinstance(tokens, str) else [str(t) for t in tokens]
        return self._reference(toks, self.resolve_alphabet(alphabet))

    def lengths(self, lo: int, hi: int, alphabet: Sequence[str] | None = None) -> range:
        """The lengths in [lo, hi] this task can sample (possibly empty)."""
        mn, mx = self.min_length(alphabet), self.max_length(alphabet)
        return range(max(lo, mn), (hi if mx is None else min(hi, mx)) + 1)

    def input_symbols(self, alphabet: Sequence[str] | None = None) -> tuple[str, ...]:
        """The data symbols that occur in inputs (``<eos>`` and answer-only symbols excluded)."""
        alph = self.resolve_alphabet(alphabet)
        return tuple(s for s in alph if s not in ANSWER_ONLY.get(self.name, ()) and s != EOS)

    def to_json(self) -> dict:
        """The registry entry as JSON-friendly data (what ``rasp tasks --json`` prints)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "program": self.program,
            "alphabet": list(self.alphabet),
            "special": list(self.special),
            "published_in_class": self.published_in_class,
            "published_nope": self.published_nope,
            "source": self.source,
            "citation": self.citation,
            "statement": self.statement,
            "published_accuracy": self.published_accuracy,
            "description": self.description,
            "variable_alphabet": self.variable_alphabet,
            "published_approximate": list(self.published_approximate),
            "min_length": self.min_length(),
            "max_length": self.max_length(),
        }


# symbols that only ever appear in answers, never in inputs
ANSWER_ONLY = {"parity": ("e", "o")}
# why a length is impossible, per task (the sampler's error hint)
LENGTH_REASONS: dict[str, str] = {}


# ============================================================================ helpers
def _bad(task: str, msg: str) -> RaspError:
    return RaspError(f"not a valid {task} input: {msg}")


def _split_sep(task: str, toks: list[str]) -> int:
    if toks.count(SEP) != 1:
        raise _bad(task, f"expected exactly one {SEP}, found {toks.count(SEP)}")
    return toks.index(SEP)


def _check_symbols(task: str, toks: list[str], alphabet: Sequence[str]) -> None:
    ok = set(alphabet)
    for p, t in enumerate(toks):
        if t not in ok:
            raise _bad(task, f"token '{t}' at position {p} is not a data symbol ({' '.join(alphabet)})")


def _choice(rng: np.random.Generator, seq: Sequence) -> object:
    return seq[int(rng.integers(len(seq)))]


def _weighted_index(rng: np.random.Generator, weights: Sequence[int]) -> int:
    """An index drawn with probability proportional to (possibly huge) integer weights."""
    total = sum(weights)
    if total <= 0:
        raise ValueError("no choice has positive weight")
    # a uniform integer in [0, total) from 62-bit chunks, 64 bits more than the total has (bias below
    # 2^-64): drawn in one call (the same numbers as one call per chunk, so the same samples)
    bits = total.bit_length() + 64
    r = _join_chunks(rng.integers(0, 1 << 62, size=(bits + 61) // 62))
    r %= total
    for k, w in enumerate(weights):
        if r < w:
            return k
        r -= w
    raise AssertionError("unreachable")


_SHIFTS = np.arange(61, -1, -1, dtype=np.uint64)


def _join_chunks(chunks: np.ndarray) -> int:
    """``sum(c_k 2^(62 (m - 1 - k)))`` for 62-bit chunks c_0 .. c_{m-1}, the first the most
    significant: their bits laid end to end and read as one integer (linear time; folding them one by
    one with shifts is quadratic in m)."""
    bits = ((chunks.astype(np.uint64)[:, None] >> _SHIFTS) & np.uint64(1)).astype(np.uint8).ravel()
    pad = (-len(bits)) % 8  # leading zeros up to whole bytes
    return int.from_bytes(np.packbits(np.concatenate([np.zeros(pad, np.uint8), bits])).tobytes(), "big")


def _float_index(rng: np.random.Generator, weights: Sequence[float]) -> int:
    """An index drawn with probability proportional to non-negative float weights (one uniform
    float: each probability is right to about 2^-53)."""
    total = math.fsum(weights)
    if not total > 0:
        raise ValueError("no choice has positive weight")
    u = rng.random() * total
    acc = 0.0
    for k, w in enumerate(weights):
        acc += w
        if u < acc and w > 0:
            return k
    return max(k for k, w in enumerate(weights) if w > 0)  # rounding left u past every boundary


# ============================================================================ seed: retrieval
def _retrieval_reference(name: str, side: str, which: str, unique: bool):
    def ref(toks: list[str], alphabet) -> list[str]:
        s = _split_sep(name, toks)
        if s != len(toks) - 2:
            raise _bad(name, f"the input ends with {SEP} q (one query token after {SEP})")
        ctx, q = toks[:s], toks[-1]
        _check_symbols(name, ctx + [q], alphabet)
        occ = [p for p, t in enumerate(ctx) if t == q]
        if unique and len(occ) != 1:
            raise _bad(name, f"the query '{q}' occurs {len(occ)} times in the context (needs exactly once)")
        if not unique and len(occ) < 2:
            raise _bad(name, f"the query '{q}' occurs {len(occ)} times in the context (needs at least twice)")
        p = occ[0] if which == "first" else occ[-1]
        p += 1 if side == "right" else -1
        if not 0 <= p < len(ctx):
            raise _bad(name, f"the answer position {p} is outside the context")
        return [ctx[p]]

    return ref


def _sample_unique_retrieval(rng, length, alphabet):
    """q once, strictly inside the context (a predecessor and a successor in the context); the other
    context tokens drawn with replacement from the rest of the alphabet (as in the authors' code)."""
    C = length - 2
    q = _choice(rng, alphabet)
    others = [s for s in alphabet if s != q]
    ctx = [_choice(rng, others) for _ in range(C - 1)]
    pos = int(rng.integers(1, C - 1))  # 1 .. C-2: both neighbours inside the context
    ctx.insert(pos, q)
    return ctx + [SEP, q]


def _nonunique_t_max(length: int) -> int:
    N = length - 1  # the paper's N: x1 .. x_{N-1} <sep> q
    C = length - 2
    return max(2, min(max(2, N // 5), (C - 1) // 2))


def _sample_nonunique_retrieval(rng, length, alphabet):
    """q occurs t times, t uniform in 2 .. max(2, N/5), never adjacent, every occurrence strictly inside
    the context; the other tokens drawn with replacement from the rest of the alphabet."""
    C = length - 2
    t = int(rng.integers(2, _nonunique_t_max(length) + 1))
    q = _choice(rng, alphabet)
    others = [s for s in alphabet if s != q]
    ctx = [_choice(rng, others) for _ in range(C)]
    # t positions in 1 .. C-2 with gaps >= 2: choose t of (C-2) - (t-1) slots, then spread them
    slots = np.sort(rng.choice((C - 2) - (t - 1), size=t, replace=False))
    for k, s in enumerate(slots):
        ctx[1 + int(s) + k] = q
    return ctx + [SEP, q]


# ============================================================================ seed: copying
def _copy_reference(name: str, reverse: bool, unique: bool):
    def ref(toks: list[str], alphabet) -> list[str]:
        s = _split_sep(name, toks)
        if s != len(toks) - 1:
            raise _bad(name, f"the input ends with {SEP}")
        xs = toks[:s]
        if not xs:
            raise _bad(name, "nothing to copy")
        _check_symbols(name, xs, alphabet)
        if unique and len(set(xs)) != len(xs):
            raise _bad(name, "the tokens must be distinct")
        return xs[::-1] if reverse else list(xs)

    return ref


def _sample_copy(unique: bool):
    def sample(rng, length, alphabet):
        n = length - 1
        if unique:
            xs = [alphabet[int(k)] for k in rng.choice(len(alphabet), size=n, replace=False)]
        else:
            xs = [alphabet[int(k)] for k in rng.integers(0, len(alphabet), size=n)]
        return xs + [SEP]

    return sample


# ============================================================================ Huang: algorithmic
def _content(name: str, toks: list[str], alphabet) -> list[str]:
    s = _split_sep(name, toks)
    if s != len(toks) - 1:
        raise _bad(name, f"the input ends with {SEP}")
    xs = toks[:s]
    _check_symbols(name, xs, alphabet)
    return xs


def _majority_of(name: str, xs: list[str], alphabet) -> str:
    if not xs:
        raise _bad(name, "no tokens before <sep>")
    counts = {a: 0 for a in alphabet}
    for x in xs:
        counts[x] += 1
    top = max(counts.values())
    winners = [a for a in alphabet if counts[a] == top]
    if len(winners) != 1:
        raise _bad(name, f"the most frequent symbol is tied ({' '.join(winners)})")
    return winners[0]


def _ref_majority(name):
    def ref(toks, alphabet):
        return [_majority_of(name, _content(name, toks, alphabet), alphabet)]

    return ref


def _sample_bin_majority(rng, length, alphabet):
    n = length - 1
    while True:
        zeros = int(rng.integers(0, n + 1))
        if 2 * zeros != n:
            break
    xs = [alphabet[0]] * zeros + [alphabet[1]] * (n - zeros)
    rng.shuffle(xs)
    return xs + [SEP]


def _sample_majority(rng, length, alphabet):
    n = length - 1
    while True:
        xs = [alphabet[int(k)] for k in rng.integers(0, len(alphabet), size=n)]
        counts = sorted((xs.count(a) for a in set(xs)), reverse=True)
        if len(counts) < 2 or counts[0] > counts[1]:
            return xs + [SEP]


INTERLEAVE_PERIOD = 3


def _ref_interleave(toks, alphabet):
    xs = _content("bin_majority_interleave", toks, alphabet)
    if len(xs) < INTERLEAVE_PERIOD:
        raise _bad("bin_majority_interleave", f"needs at least {INTERLEAVE_PERIOD} tokens before <sep>")
    return [_majority_of("bin_majority_interleave", xs[r::INTERLEAVE_PERIOD], alphabet)
            for r in range(INTERLEAVE_PERIOD)]


def _sample_interleave(rng, length, alphabet):
    n = length - 1
    xs = [None] * n
    for r in range(INTERLEAVE_PERIOD):
        m = len(range(r, n, INTERLEAVE_PERIOD))
        while True:
            zeros = int(rng.integers(0, m + 1))
            if 2 * zeros != m:
                break
        sub = [alphabet[0]] * zeros + [alphabet[1]] * (m - zeros)
        rng.shuffle(sub)
        xs[r::INTERLEAVE_PERIOD] = sub
    return xs + [SEP]


def _ref_sort(toks, alphabet):
    xs = _content("sort", toks, alphabet)
    if not xs:
        raise _bad("sort", "nothing to sort")
    if len(set(xs)) != len(xs):
        raise _bad("sort", "the tokens must be distinct")
    order = {a: k for k, a in enumerate(alphabet)}
    return sorted(xs, key=order.__getitem__)


def _ref_parity(toks, alphabet):
    xs = _content("parity", toks, ("0", "1"))
    return ["e" if xs.count("1") % 2 == 0 else "o"]


def _sample_parity(rng, length, alphabet):
    n = length - 1
    ones = int(rng.integers(0, n + 1))
    xs = ["1"] * ones + ["0"] * (n - ones)
    rng.shuffle(xs)
    return xs + [SEP]


def _ref_addition(toks, alphabet):
    name = "addition"
    if toks.count("+") != 1 or toks.count("=") != 1 or toks[-1] != "=":
        raise _bad(name, "expected A + B = with binary numbers A and B")
    p = toks.index("+")
    a, b = toks[:p], toks[p + 1:-1]
    if not a or not b:
        raise _bad(name, "an operand is empty")
    _check_symbols(name, a + b, ("0", "1"))
    return list(bin(int("".join(a), 2) + int("".join(b), 2))[2:])


def _sample_addition(rng, length, alphabet):
    n = length - 2  # digits of both operands
    n1 = int(rng.integers(1, n))
    n2 = n - n1

    def operand(k):
        if k == 1:
            return [_choice(rng, ("0", "1"))]
        return ["1"] + [_choice(rng, ("0", "1")) for _ in range(k - 1)]

    return operand(n1) + ["+"] + operand(n2) + ["="]


# ============================================================================ formal languages
class Language:
    """A formal language for character prediction. ``allowed`` gives, after every prefix, the set of
    symbols (``EOS`` included) that can follow it; after an invalid prefix nothing can follow."""

    symbols: tuple[str, ...]  # data symbols, without EOS

    def allowed(self, toks: list[str]) -> list[set[str]]:
        raise NotImplementedError

    def member(self, rng, n: int) -> list[str] | None:
        """A random member of length n, or None when there is none."""
        raise NotImplementedError

    def prefix(self, rng, n: int) -> list[str]:
        """A random valid prefix of length n (extendable to a member)."""
        raise NotImplementedError


#: longest draw whose path counts are exact integers (the same samples as ever); longer ones count in
#: logarithms: exact counts of length n have O(n) bits, so a table costs O(n^2) time and memory
#: (tomita4 at 65,536 tokens: about 35 s and 750 MB)
EXACT_LENGTH = 4096


class DFALanguage(Language):
    """A regular language given by a DFA; missing transitions go to a dead state. Members and prefixes
    are drawn uniformly by counting paths: a walk from the start takes symbol s with probability
    count(k - 1, delta(q, s)) / count(k, q), where count(k, q) is the number of k-symbol paths from
    q to an accepting state (members) or to a live one (prefixes). Up to ``EXACT_LENGTH`` symbols the
    counts are exact integers; beyond, :meth:`_log_walk` uses their logarithms."""

    def __init__(self, symbols, start, accept, delta):
        self.symbols = tuple(symbols)
        self.start = start
        self.accept = frozenset(accept)
        self.delta = dict(delta)  # (state, symbol) -> state
        self.states = sorted({start} | {q for q, _ in delta} | set(delta.values()) | set(accept), key=str)
        # live states: an accepting state is reachable
        live = set(self.accept)
        changed = True
        while changed:
            changed = False
            for (q, _), r in self.delta.items():
                if r in live and q not in live:
                    live.add(q)
                    changed = True
        self.live = frozenset(live)
        self._member_counts = [{q: int(q in self.accept) for q in self.states}]  # k -> state -> #members
        self._prefix_counts = [{q: int(q in self.live) for q in self.states}]  # k -> state -> #live paths
        self._log_tables: dict = {}  # (n, ends) -> _log_table's, the last two (members, prefixes)

    def step(self, q, s):
        return self.delta.get((q, s))

    def allowed(self, toks):
        out, q = [], self.start
        for t in toks:
            q = None if q is None else self.step(q, t)
            if q is None or q not in self.live:
                q = None
                out.append(set())
                continue
            nxt = {s for s in self.symbols if self.step(q, s) in self.live}
            if q in self.accept:
                nxt.add(EOS)
            out.append(nxt)
        return out

    def _counts(self, table, k):
        while len(table) <= k:
            prev = table[-1]
            table.append({q: sum(prev[r] for s in self.symbols if (r := self.step(q, s)) is not None)
                          for q in self.states})
        return table

    def _walk(self, rng, n, table):
        if n > EXACT_LENGTH:
            return self._log_walk(rng, n, self.accept if table is self._member_counts else self.live)
        self._counts(table, n)
        q, out = self.start, []
        if table[n][q] == 0:
            return None
        for k in range(n, 0, -1):
            opts = [(s, r) for s in self.symbols if (r := self.step(q, s)) is not None]
            i = _weighted_index(rng, [table[k - 1][r] for _, r in opts])
            out.append(opts[i][0])
            q = opts[i][1]
        return out

    def _log_walk(self, rng, n: int, ends: frozenset) -> list[str] | None:
        """The walk of :meth:`_walk` with ``L(k, q) = log count(k, q) - S_k``: S_k an integer offset per
        length that keeps the largest entry in [0, 1), so every entry is a float of modest size and
        its rounding error relative (about 1e-16 per step; a count of 0 is exactly -inf). The table
        takes O(n |states|) floats and O(n |states| |symbols|) time, where exact integers take
        O(n^2) bits. The walk needs only ratios between the counts of one length, where S_k cancels;
        the probabilities are right to about n 1e-16 relative (and a uniform float's 2^-53)."""
        key = (n, ends)
        if key not in self._log_tables:  # samples of one length share it
            while len(self._log_tables) >= 2:
                del self._log_tables[next(iter(self._log_tables))]
            self._log_tables[key] = self._log_table(n, ends)
        succ, logs = self._log_tables[key]
        q = self.states.index(self.start)
        if logs[n, q] == -math.inf:
            return None
        out = []
        for k in range(n, 0, -1):
            w = [float(logs[k - 1, r]) for _, r in succ[q]]
            m = max(w)
            i = _float_index(rng, [math.exp(v - m) for v in w])
            out.append(succ[q][i][0])
            q = succ[q][i][1]
        return out

    def _log_table(self, n: int, ends: frozenset) -> tuple[list, np.ndarray]:
        """``(succ, L)``: succ[q] the (symbol, next state index) pairs of state index q (``states``
        order), L (n + 1, |states|) the log counts of :meth:`_log_walk`."""
        states = self.states
        index = {q: k for k, q in enumerate(states)}
        succ = [[(s, index[r]) for s in self.symbols if (r := self.step(q, s)) is not None] for q in states]
        targets = [[r for _, r in opts] for opts in succ]
        inf, exp, log, log1p = math.inf, math.exp, math.log, math.log1p
        row = [0.0 if q in ends else -inf for q in states]
        logs = np.empty((n + 1, len(states)))
        logs[0] = row
        for k in range(1, n + 1):
            new = []
            for rs in targets:  # log of a sum of counts, from their logs (one, two or more terms)
                if len(rs) == 1:
                    new.append(row[rs[0]])
                elif len(rs) == 2:
                    a, b = row[rs[0]], row[rs[1]]
                    if a < b:
                        a, b = b, a
                    new.append(a if b == -inf else a + log1p(exp(b - a)))
                else:
                    m = max([row[r] for r in rs], default=-inf)
                    new.append(m if m == -inf else m + log(sum([exp(row[r] - m) for r in rs])))
            top = max(new)
            if top != -inf:
                shift = math.floor(top)
                new = [v - shift for v in new]
            logs[k] = row = new
        return succ, logs

    def member(self, rng, n):
        return self._walk(rng, n, self._member_counts)

    def prefix(self, rng, n):
        return self._walk(rng, n, self._prefix_counts)


class BoundedDyck(Language):
    """Dyck-1 over ( ) with depth at most ``bound`` (None: unbounded). Members and prefixes are
    uniform (by counting paths)."""

    def __init__(self, bound: int | None):
        self.symbols = ("(", ")")
        self.bound = bound
        # with a bound it is regular: the depth is the state (a DFA walk draws uniformly)
        self._dfa = None if bound is None else DFALanguage(
            self.symbols, 0, {0}, {**{(d, "("): d + 1 for d in range(bound)}, **{(d, ")"): d - 1 for d in range(1, bound + 1)}})

    def depth_ok(self, d):
        return d >= 0 and (self.bound is None or d <= self.bound)

    def allowed(self, toks):
        out, d, ok = [], 0, True
        for t in toks:
            d += 1 if t == "(" else -1 if t == ")" else 0
            ok = ok and t in self.symbols and self.depth_ok(d)
            if not ok:
                out.append(set())
                continue
            nxt = set()
            if self.bound is None or d < self.bound:
                nxt.add("(")
            if d > 0:
                nxt.add(")")
            if d == 0:
                nxt.add(EOS)
            out.append(nxt)
        return out

    def _walk(self, rng, n, to_zero):
        if self.bound is None:
            return _unbounded_dyck_walk(rng, n, to_zero)
        return self._dfa.member(rng, n) if to_zero else self._dfa.prefix(rng, n)

    def member(self, rng, n):
        return self._walk(rng, n, True)

    def prefix(self, rng, n):
        return self._walk(rng, n, False)


def _unbounded_dyck_walk(rng: np.random.Generator, n: int, to_zero: bool) -> list[str] | None:
    """A uniform Dyck-1 word (``to_zero``) or uniform valid prefix of length ``n``, in O(n) time and memory.

    Counting-path tables cost O(n^2) big integers (out of memory near n = 8192), so the unbounded case
    uses closed forms instead. By the ballot theorem the walks of k steps from depth d down to 0 that
    never go below 0 number g(k, d) = (d+1)/(k+1) * C(k+1, (k-d)/2) (k - d even, else 0). Walking
    uniformly means stepping up with probability g(k-1, d+1) / g(k, d), which simplifies to
    (d+2)(k-d) / (2k(d+1)). A valid prefix of length n ending at depth e, read backwards, is such a walk
    from e to 0, and there are g(n, e) of them: draw e with weight g(n, e), draw the walk from e to 0,
    and reverse it.
    """
    if n == 0:
        return []
    if to_zero:
        if n % 2:
            return None
        start = 0
    else:
        es = np.arange(n % 2, n + 1, 2, dtype=np.float64)
        m = (n - es) / 2  # log g(n, e) up to a constant: log(e+1) + log C(n+1, m)
        logw = np.log(es + 1) - np.array([math.lgamma(mm + 1) + math.lgamma(n + 2 - mm) for mm in m])
        w = np.exp(logw - logw.max())
        start = int(es[int(rng.choice(len(es), p=w / w.sum()))])
    u = rng.random(n)
    d, steps = start, []
    for k in range(n, 0, -1):
        # d == 0 forces a step up (probability 1); the guard keeps float rounding from saying otherwise
        up = d == 0 or u[n - k] * (2 * k * (d + 1)) < (d + 2) * (k - d)
        steps.append(up)
        d += 1 if up else -1
    if to_zero:
        return ["(" if up else ")" for up in steps]
    # reversed: a down step of the walk from e to 0 is an opening bracket read from the start
    return ["(" if not up else ")" for up in reversed(steps)]


class CounterBlocks(Language):
    """a^n b^n (c^n (d^n)), n >= 1: the blocks in order, every block as long as the first."""

    def __init__(self, k: int):
        self.symbols = tuple("abcd"[:k])
        self.k = k

    def allowed(self, toks):
        out, ok = [], True
        counts = [0] * self.k
        phase = 0  # index of the current block
        for t in toks:
            if ok and t in self.symbols:
                j = self.symbols.index(t)
                if j == phase and (j == 0 or counts[j] < counts[0]):
                    counts[j] += 1
                elif j == phase + 1 and counts[phase] == counts[0] and counts[0] > 0:
                    phase = j
                    counts[j] += 1
                else:
                    ok = False
            else:
                ok = False
            if not ok:
                out.append(set())
                continue
            nxt = set()
            if phase == 0:
                nxt.add(self.symbols[0])
            if phase > 0 and counts[phase] < counts[0]:
                nxt.add(self.symbols[phase])
            if phase + 1 < self.k and counts[phase] == counts[0]:
                nxt.add(self.symbols[phase + 1])
            if phase == self.k - 1 and counts[phase] == counts[0]:
                nxt.add(EOS)
            out.append(nxt)
        return out

    def member(self, rng, n):
        if n % self.k:
            return None
        return [s for s in self.symbols for _ in range(n // self.k)]

    def prefix(self, rng, n):
        # every valid prefix of length n: a^n, or blocks 1..p-1 full (length m each) and block p with r
        shapes = [(0, n, 0)]
        for p in range(1, self.k):
            for m in range(1, n + 1):
                r = n - p * m
                if 1 <= r <= m:
                    shapes.append((p, m, r))
        p, m, r = shapes[int(rng.integers(len(shapes)))]
        if p == 0:
            return [self.symbols[0]] * n
        return [s for s in self.symbols[:p] for _ in range(m)] + [self.symbols[p]] * r


#: longest Boolean expression drawn from the exact count table (O(n^2) big integers: 2,000 tokens
#: took 3.7 s); longer ones by the cycle lemma (BooleanExpressions._cycle_member)
EXACT_BOOLEAN_LENGTH = 1024

BOOL_OPERATORS = {3: (("~", 1), ("+", 2), (">", 3)), 5: (("~", 1), ("+", 2), (">", 3), ("*", 4), ("&", 5))}


class BooleanExpressions(Language):
    """n-ary Boolean expressions in prefix (Polish) notation: operands 0 1, operators of arity 1..n.
    The counter 1 + sum(arity - 1) is the number of operands still needed; a prefix is valid while it
    stays positive, and complete when it reaches 0."""

    def __init__(self, n: int):
        self.ops = BOOL_OPERATORS[n]
        self.arity = {"0": 0, "1": 0, **dict(self.ops)}
        self.symbols = ("0", "1") + tuple(s for s, _ in self.ops)
        self.n = n

    def allowed(self, toks):
        out, c = [], 1
        for t in toks:
            if c <= 0 or t not in self.arity:
                c = -1
                out.append(set())
                continue
            c += self.arity[t] - 1
            out.append(set(self.symbols) if c > 0 else {EOS})
        return out

    def _member_counts(self, n):
        return _boolean_counts(self.n, n)

    def member(self, rng, n):
        if n > EXACT_BOOLEAN_LENGTH:
            return self._cycle_member(rng, n)
        counts = self._member_counts(n)
        if counts[n][1] == 0:
            return None
        c, out = 1, []
        for k in range(n, 0, -1):
            opts = [(s, c + self.arity[s] - 1) for s in self.symbols]
            w = [counts[k - 1][e] if 0 <= e <= k - 1 else 0 for _, e in opts]
            i = _weighted_index(rng, w)
            out.append(opts[i][0])
            c = opts[i][1]
        return out

    @cached_property
    def _tilted(self) -> tuple[np.ndarray, np.ndarray]:
        """Each symbol's step and its probability ``theta^step / Z``, theta the root of the mean step
        ``sum(step theta^step)`` (increasing in theta: -inf near 0, positive at 1; bisection)."""
        steps = np.array([self.arity[s] - 1 for s in self.symbols])
        lo, hi = 1e-9, 1.0
        for _ in range(200):
            mid = (lo + hi) / 2
            if float(np.sum(steps * mid ** steps.astype(float))) < 0:
                lo = mid
            else:
                hi = mid
        p = lo ** steps.astype(float)
        return steps, p / p.sum()

    def _cycle_member(self, rng, n: int) -> list[str]:
        """A uniform member of length n without the O(n^2)-entry count table, by the cycle lemma.

        Give token t the step ``arity(t) - 1`` (operands -1, an operator of arity a: a - 1): a member is a
        sequence of total -1 whose proper prefixes all sum to 0 or more. Every sequence of total -1
        has exactly one rotation that is a member (the cycle lemma: start right after the first
        prefix that reaches the minimum; steps are at least -1), and the n rotations of the n-token
        sequences of total -1 pair them n to one with members. So a uniform sequence of total -1,
        rotated, is a uniform member. Such a sequence: token counts drawn multinomially with
        probabilities ``theta^step`` (normalized), kept when the steps sum to -1, then shuffled; given
        the counts' sum of steps every sequence has the same probability ``theta^-1 / Z^n``, so the one
        kept is uniform (up to the floats' rounding of the probabilities, about n 1e-16 relative).
        theta makes the mean step 0, where a total of -1 is likeliest: about 1 / (sigma sqrt(2 pi n)),
        so some sigma sqrt(n) draws of counts, each O(|symbols|))."""
        steps, p = self._tilted
        while True:
            counts = rng.multinomial(n, p, size=1024)
            ok = np.flatnonzero(counts @ steps == -1)
            if len(ok):
                break
        seq = rng.permutation(np.repeat(np.arange(len(self.symbols)), counts[ok[0]]))
        prefix = np.cumsum(steps[seq])
        start = int(np.argmin(prefix)) + 1  # np.argmin: the first minimum
        return [self.symbols[t] for t in np.roll(seq, -start)]

    def prefix(self, rng, n):
        c, out = 1, []
        for k in range(n, 0, -1):
            opts = [s for s in self.symbols if c + self.arity[s] - 1 > 0 or (k == 1 and c + self.arity[s] - 1 == 0)]
            s = _choice(rng, opts)
            out.append(s)
            c += self.arity[s] - 1
        return out


#: per operator set, the largest count table made so far (a table for n serves every length up to n:
#: its entries do not depend on n; 32 cached tables of up to 1,024 took 1 GB)
_BOOLEAN_TABLES: dict[int, list[list[int]]] = {}


def _boolean_counts(nmax_arity: int, n: int) -> list[list[int]]:
    """counts[k][c] (k, c <= n at least): token sequences of length k taking counter c (>= 1) to
    exactly 0 at the end and staying positive before it (counts[0][0] = 1); c <= k."""
    table = _BOOLEAN_TABLES.get(nmax_arity)
    if table is None or len(table) <= n:
        table = _BOOLEAN_TABLES[nmax_arity] = _make_boolean_counts(nmax_arity, n)
    return table


def _make_boolean_counts(nmax_arity: int, n: int) -> list[list[int]]:
    arities = [0, 0] + [a for _, a in BOOL_OPERATORS[nmax_arity]]
    counts = [[1] + [0] * n]
    for k in range(1, n + 1):
        prev = counts[-1]
        row = [0] * (n + 1)
        for c in range(1, k + 1):
            total = 0
            for a in arities:
                e = c + a - 1
                if e == 0:
                    total += int(k == 1)
                elif e <= k - 1:
                    total += prev[e]
            row[c] = total
        counts.append(row)
    return counts


class Shuffle2(Language):
    """The shuffle of two Dyck-1 languages, over ( ) and [ ]: each bracket type balanced on its own."""

    symbols = ("(", ")", "[", "]")

    def allowed(self, toks):
        out, d1, d2, ok = [], 0, 0, True
        for t in toks:
            d1 += {"(": 1, ")": -1}.get(t, 0)
            d2 += {"[": 1, "]": -1}.get(t, 0)
            ok = ok and t in self.symbols and d1 >= 0 and d2 >= 0
            if not ok:
                out.append(set())
                continue
            nxt = {"(", "["}
            if d1 > 0:
                nxt.add(")")
            if d2 > 0:
                nxt.add("]")
            if d1 == d2 == 0:
                nxt.add(EOS)
            out.append(nxt)
        return out

    def _interleave(self, rng, u, v):
        slots = set(int(k) for k in rng.choice(len(u) + len(v), size=len(u), replace=False))
        it_u, it_v = iter(u), iter(v)
        return [next(it_u) if k in slots else next(it_v) for k in range(len(u) + len(v))]

    def member(self, rng, n):
        if n % 2:
            return None
        n1 = 2 * int(rng.integers(0, n // 2 + 1))
        dyck = BoundedDyck(None)
        u = dyck.member(rng, n1) if n1 else []
        v = [{"(": "[", ")": "]"}[s] for s in (dyck.member(rng, n - n1) if n - n1 else [])]
        return self._interleave(rng, u, v)

    def prefix(self, rng, n):
        n1 = int(rng.integers(0, n + 1))
        dyck = BoundedDyck(None)
        u = dyck.prefix(rng, n1) if n1 else []
        v = [{"(": "[", ")": "]"}[s] for s in (dyck.prefix(rng, n - n1) if n - n1 else [])]
        return self._interleave(rng, u, v)


def _dfa(symbols, start, accept, table):
    """A DFA from ``{state: {symbol: next}}``."""
    delta = {(q, s): r for q, row in table.items() for s, r in row.items()}
    return DFALanguage(symbols, start, accept, delta)


LANGUAGES: dict[str, Language] = {
    "d2": BoundedDyck(2),
    "d3": BoundedDyck(3),
    "d4": BoundedDyck(4),
    "d12": BoundedDyck(12),
    # Tomita 1: 1*
    "tomita1": _dfa("01", 0, {0}, {0: {"1": 0}}),
    # Tomita 2: (10)*
    "tomita2": _dfa("01", 0, {0}, {0: {"1": 1}, 1: {"0": 0}}),
    # Tomita 3: no odd-length run of 1s immediately followed by an odd-length run of 0s. States:
    # 0 even 1-run (or 0s after one), 1 odd 1-run, 3 odd 1-run then odd 0s (not accepting),
    # 2 odd 1-run then even 0s; 3 --1--> dead.
    "tomita3": _dfa("01", 0, {0, 1, 2}, {0: {"0": 0, "1": 1}, 1: {"0": 3, "1": 0}, 2: {"0": 3, "1": 1},
                                         3: {"0": 2}}),
    # Tomita 4: no 000 (state = trailing zeros)
    "tomita4": _dfa("01", 0, {0, 1, 2}, {0: {"0": 1, "1": 0}, 1: {"0": 2, "1": 0}, 2: {"1": 0}}),
    # Tomita 5: an even number of 0s and an even number of 1s
    "tomita5": _dfa("01", (0, 0), {(0, 0)}, {(a, b): {"0": (1 - a, b), "1": (a, 1 - b)} for a in (0, 1) for b in (0, 1)}),
    # Tomita 6: #0 - #1 divisible by 3
    "tomita6": _dfa("01", 0, {0}, {r: {"0": (r + 1) % 3, "1": (r - 1) % 3} for r in range(3)}),
    # Tomita 7: 0*1*0*1* (state = block index)
    "tomita7": _dfa("01", 0, {0, 1, 2, 3}, {0: {"0": 0, "1": 1}, 1: {"1": 1, "0": 2}, 2: {"0": 2, "1": 3},
                                             3: {"1": 3}}),
    "aa_star": _dfa("a", 0, {0}, {0: {"a": 1}, 1: {"a": 0}}),
    "aaaa_star": _dfa("a", 0, {0}, {r: {"a": (r + 1) % 4} for r in range(4)}),
    "abab_star": _dfa("ab", 0, {0}, {0: {"a": 1}, 1: {"b": 2}, 2: {"a": 3}, 3: {"b": 0}}),
    "anbn": CounterBlocks(2),
    "anbncn": CounterBlocks(3),
    "anbncndn": CounterBlocks(4),
    # aa*bb*cc*dd*ee*
    "aabbccddee": _dfa("abcde", "S", {"e"}, {"S": {"a": "a"}, "a": {"a": "a", "b": "b"}, "b": {"b": "b", "c": "c"},
                                              "c": {"c": "c", "d": "d"}, "d": {"d": "d", "e": "e"}, "e": {"e": "e"}}),
    # {a,b}*d{b,c}*
    "ab_d_bc": _dfa("abcd", "pre", {"post"}, {"pre": {"a": "pre", "b": "pre", "d": "post"},
                                               "post": {"b": "post", "c": "post"}}),
    # {0,1,2}*02*: z = the string ends in 0 2*
    "012_02": _dfa("012", "s", {"z"}, {"s": {"0": "z", "1": "s", "2": "s"}, "z": {"0": "z", "1": "s", "2": "z"}}),
    "boolean3": BooleanExpressions(3),
    "boolean5": BooleanExpressions(5),
    "shuffle2": Shuffle2(),
}


def _predict_reference(name: str):
    lang = LANGUAGES[name]

    def ref(toks, alphabet):
        if not toks:
            raise _bad(name, "empty input")
        _check_symbols(name, toks, lang.symbols)
        sets = lang.allowed(toks)
        for p, s in enumerate(sets):
            if not s:
                raise _bad(name, f"the prefix of length {p + 1} is not a prefix of any member of the language")
        return [[a for a in alphabet if a in s] for s in sets]

    return ref


def _predict_sampler(name: str):
    lang = LANGUAGES[name]

    def sample(rng, length, alphabet):
        if rng.random() < 0.5:
            m = lang.member(rng, length)
            if m is not None:
                return m
        return lang.prefix(rng, length)

    return sample


# ============================================================================ Dyck-1 (acceptor)
def _ref_dyck1(toks, alphabet):
    _check_symbols("dyck1", toks, ("(", ")"))
    d = 0
    for t in toks:
        d += 1 if t == "(" else -1
        if d < 0:
            return False
    return d == 0


def _sample_dyck1(rng, length, alphabet):
    dyck = BoundedDyck(None)
    if length % 2 == 0 and rng.random() < 0.5:
        return dyck.member(rng, length)
    # hard negatives: a valid prefix that ends unbalanced, or balanced counts that dip below zero
    if length % 2 == 0 and length >= 2 and rng.random() < 0.5:
        while True:
            xs = ["("] * (length // 2) + [")"] * (length // 2)
            rng.shuffle(xs)
            if not _ref_dyck1(xs, alphabet):
                return xs
    while True:
        xs = dyck.prefix(rng, length)
        if not _ref_dyck1(xs, alphabet):
            return xs
        # a balanced prefix: flip one symbol (changes the balance by 2)
        k = int(rng.integers(length))
        xs[k] = "(" if xs[k] == ")" else ")"
        return xs


# ============================================================================ the registry
def _const(v):
    return lambda alphabet: v


def _acc(**bins):
    return {k: list(v) for k, v in bins.items()}


NOPE_INFERRED = ("NoPE: in plain C-RASP by inference from Huang et al.'s table (listed in the class with no "
                 "periodic or local requirement).")


def _seed_tasks() -> list[Task]:
    tasks = []
    construction = ("Construction (theory.md section 2): PREV_a(i) = the token before i is a (predecessor "
                    "relation, >= 1); BIGRAM_ab = some j has PREV_a(j) and token b")
    for name, side, which, unique, in_class, acc, stmt in [
        ("UR", "right", "first", True, True, _acc(APE=[None, None, .99], RoPE=[None, None, 1.0]),
         "In C-RASP[periodic, local] (induction): NEXT_a holds at the query when the query symbol s has BIGRAM_sa. "),
        ("UL", "left", "first", True, True, _acc(APE=[None, None, .99], RoPE=[None, None, 1.0]),
         "In C-RASP[periodic, local] (anti-induction): NEXT_a holds at the query when BIGRAM_as. "),
        ("NRFirst", "right", "first", False, True, _acc(APE=[None, None, 1.0], RoPE=[None, None, 1.0]),
         "In C-RASP[periodic, local]: UR restricted to the first occurrence, FIRST(i) = the token at i occurs "
         "for the first time at i (its count is 1). "),
        ("NLFirst", "left", "first", False, True, _acc(APE=[None, None, .99], RoPE=[None, None, .99]),
         "In C-RASP[periodic, local]: UL restricted to the first occurrence of the query. "),
        ("NRLast", "right", "last", False, False, _acc(APE=[None, .86, .47], RoPE=[None, .45, .34]),
         "Not in C-RASP[periodic, local]: NRLast reduces to a language of the form (a|b|e)*ae*, which is not in "
         "C-RASP[pos] (Jobanputra et al., Lemma 6; Huang et al., Lemmas 35/36 in the arXiv version); it equals "
         "the Flip-Flop task of Liu et al. 2023. "),
        ("NLLast", "left", "last", False, False, _acc(APE=[None, .77, .47], RoPE=[None, .32, .34]),
         "Not in C-RASP[periodic, local]: like NRLast, it reduces to a language of the form (a|b|e)*ae* "
         "(Jobanputra et al., Lemma 6). "),
    ]:
        desc = (f"retrieval: input x1 .. x_(N-1) <sep> q; the answer is the token "
                f"{'after' if side == 'right' else 'before'} the {which if not unique else 'only'} occurrence of q "
                f"in the context. q occurs {'once' if unique else '2..max(2, N/5) times, never adjacent'}, "
                f"every occurrence with a predecessor and a successor in the context; the other context tokens "
                f"are drawn with replacement from the rest of the alphabet.")
        nope = None if in_class else False
        nope_note = ("NoPE: not stated by the papers; the construction uses the local predecessor relation."
                     if in_class else "Not in NoPE C-RASP either (a subclass).")
        tasks.append(Task(
            name=name, kind="generate", alphabet=LETTERS, special=(SEP,),
            program=f"programs/{name.lower()}.rasp",  # out-of-class: a RASP-L program (issue 7)
            published_in_class=in_class, published_nope=nope, citation=CITE_J,
            statement=stmt + (construction + ". " if in_class else "") + nope_note +
            " Accuracy: trained from scratch on lengths <= 50; the papers report bins 51-100 only for the "
            "out-of-class tasks (in-class tasks >= .99 there).",
            source=JOBANPUTRA, published_accuracy=acc, description=desc, variable_alphabet=True,
            _sample=_sample_unique_retrieval if unique else _sample_nonunique_retrieval,
            _reference=_retrieval_reference(name, side, which, unique),
            _min_length=_const(5) if unique else _const(7),
            _max_length=lambda alphabet: None if len(alphabet) >= 2 else 0,
        ))
        LENGTH_REASONS[name] = (
            "the context needs >= 3 tokens (the query with a predecessor and a successor) and a second symbol"
            if unique else "the query occurs at least twice, never adjacent, each with both neighbours: "
                           "the context needs >= 5 tokens")
    for name, reverse, unique, in_class, acc, stmt in [
        ("UF", False, True, True, _acc(APE=[None, None, .97], RoPE=[None, None, .99]),
         "In C-RASP[periodic, local]: iterate UR from the separator (the first token follows <sep>; each generated "
         "token s is followed by the b with BIGRAM_sb) and stop at the end marker (no bigram continues x_N). "
         "Needs the local predecessor relation: Huang et al. report NoPE failing on copy unique."),
        ("UB", True, True, True, _acc(APE=[None, None, .97], RoPE=[None, None, .99]),
         "In C-RASP[periodic, local]: iterate UL from the separator (x_N precedes <sep>; each generated s is "
         "followed by the a with BIGRAM_as within the context) and stop at x_1."),
        ("NF", False, False, False, _acc(APE=[None, .47, .13], RoPE=[None, .13, 0.0]),
         "Not in C-RASP[periodic, local]: copying with repeated tokens needs linear communication when the "
         "string is split in halves, while every C-RASP[pos] function has logarithmic communication complexity "
         "(Huang et al., Theorem 12 in the arXiv version)."),
        ("NB", True, False, False, _acc(APE=[None, .27, .05], RoPE=[None, .05, 0.0]),
         "Not in C-RASP[periodic, local]: as NF, by the communication-complexity bound for C-RASP[pos] "
         "(Huang et al., Theorem 12 in the arXiv version)."),
    ]:
        desc = (f"copying: input x1 .. xN <sep>; output x{'N .. x1' if reverse else '1 .. xN'}, generated token "
                f"by token; tokens {'all distinct' if unique else 'drawn with replacement (repeats allowed)'}.")
        alph = NUMBERS150 if unique else LETTERS
        tasks.append(Task(
            name=name, kind="generate", alphabet=alph, special=(SEP,),
            program=f"programs/{name.lower()}.rasp",  # out-of-class: a RASP-L program (issue 7)
            published_in_class=in_class, published_nope=False, citation=CITE_J,
            statement=stmt + (" NoPE: copy unique needs the local relation (Huang et al.)." if in_class else ""),
            source=JOBANPUTRA, published_accuracy=acc, description=desc, variable_alphabet=True,
            _sample=_sample_copy(unique), _reference=_copy_reference(name, reverse, unique),
            _min_length=_const(2),
            _max_length=(lambda alphabet: len(alphabet) + 1) if unique else _const(None),
        ))
        if unique:
            LENGTH_REASONS[name] = "the tokens are distinct: length <= |alphabet| + 1 (pass a larger alphabet)"
    return tasks


def _huang_algorithmic() -> list[Task]:
    H = dict(citation=CITE_H, source=HUANG, kind="generate", special=(SEP,))
    return [
        Task(name="bin_majority", alphabet=("0", "1"), program="programs/bin_majority.rasp",
             published_in_class=True, published_nope=True,
             statement="In C-RASP: the answer a is the symbol with #a > #b (plain counting). " + NOPE_INFERRED,
             published_accuracy=_acc(APE=[1.0, 1.0, 1.0], NoPE=[1.0, 1.0, 1.0]),
             description="binary majority: input x1 .. xn <sep> over 0 1 (never tied); output the majority bit.",
             _sample=_sample_bin_majority, _reference=_ref_majority("bin_majority"),
             _min_length=_const(2), _max_length=_const(None), **H),
        Task(name="majority", alphabet=LETTERS, program="programs/majority.rasp",
             published_in_class=True, published_nope=True, variable_alphabet=True,
             statement="In C-RASP: the answer is the a with #b <= #a for every b (plain counting; the most "
                       "frequent symbol is unique by construction of the data). " + NOPE_INFERRED,
             published_accuracy=_acc(APE=[1.0, .996, .978], NoPE=[1.0, .999, .985]),
             description="majority: input x1 .. xn <sep> over 26 letters, the most frequent letter unique; "
                         "output that letter.",
             _sample=_sample_majority, _reference=_ref_majority("majority"),
             _min_length=_const(2), _max_length=_const(None), **H),
        Task(name="bin_majority_interleave", alphabet=("0", "1"), program="programs/bin_majority_interleave.rasp",
             published_in_class=True, published_nope=False,
             statement="In C-RASP[periodic]: the majority of each of the 3 interleaved subsequences counts the "
                       "positions with i mod 3 = r (a periodic predicate). Huang et al. present it as needing "
                       "periodic positional information (NoPE models fail beyond the training lengths).",
             published_accuracy=_acc(APE=[1.0, .968, .847], NoPE=[.962, .688, .395]),
             description="binary majority interleave: input x1 .. xn <sep> over 0 1; output 3 bits, the majority "
                         "of the positions 1, 4, 7, ...; 2, 5, 8, ...; 3, 6, 9, ... (each never tied). The paper "
                         "uses n a multiple of 3; here any n >= 3 (subsequence lengths differ by at most one).",
             _sample=_sample_interleave, _reference=_ref_interleave,
             _min_length=_const(INTERLEAVE_PERIOD + 1), _max_length=_const(None), **H),
        Task(name="sort", alphabet=NUMBERS150, program="programs/sort.rasp",
             published_in_class=True, published_nope=True, variable_alphabet=True,
             statement="In C-RASP: the next output is the smallest present symbol above the last one; with one "
                       "definition per symbol the alphabet order is fixed at expansion and only counting is "
                       "needed. " + NOPE_INFERRED,
             published_accuracy=_acc(APE=[1.0, 1.0, .994], NoPE=[1.0, .998, .806]),
             description="sort: input x1 .. xn <sep>, distinct tokens; output them in alphabet order "
                         "(0 < 1 < ... < 149, as in the paper's vocabulary).",
             _sample=_sample_copy(True), _reference=_ref_sort,
             _min_length=_const(2), _max_length=lambda alphabet: len(alphabet) + 1, **H),
        Task(name="copy_unique", alphabet=NUMBERS150, program="programs/copy_unique.rasp",
             published_in_class=True, published_nope=False, variable_alphabet=True,
             statement="In C-RASP[local]: induction with the predecessor relation (as UF). Huang et al. mark it "
                       "as needing the local relation; NoPE models fail beyond the training lengths.",
             published_accuracy=_acc(APE=[1.0, .999, .987], NoPE=[1.0, .18, 0.0]),
             description="copy unique: input x1 .. xn <sep>, distinct tokens; output x1 .. xn (same data as UF).",
             _sample=_sample_copy(True), _reference=_copy_reference("copy_unique", False, True),
             _min_length=_const(2), _max_length=lambda alphabet: len(alphabet) + 1, **H),
        Task(name="copy_repeat", alphabet=("a", "b"), program="programs/copy_repeat.rasp",
             published_in_class=False, published_nope=False, variable_alphabet=True,
             statement="Not in C-RASP[periodic, local]: copying with repeated tokens has linear communication "
                       "complexity, every C-RASP[pos] function logarithmic (Huang et al., Theorem 12 in the arXiv "
                       "version).",
             published_accuracy=_acc(APE=[1.0, .256, 0.0], NoPE=[1.0, .28, 0.0]),
             description="copy repeat: input x1 .. xn <sep> over a b (repeats); output x1 .. xn.",
             _sample=_sample_copy(False), _reference=_copy_reference("copy_repeat", False, False),
             _min_length=_const(2), _max_length=_const(None), **H),
        Task(name="parity", alphabet=("0", "1", "e", "o"), program="programs/parity.rasp",
             published_in_class=False, published_nope=False,
             statement="Not in C-RASP (and not in C-RASP[periodic, local]); also not computable by NoPE "
                       "average-hard attention (Köcher et al. 2025).",
             published_accuracy=_acc(APE=[1.0, .83, .621], NoPE=[.975, .745, .633]),
             description="parity: input x1 .. xn <sep> over 0 1; output e (even number of 1s) or o (odd).",
             _sample=_sample_parity, _reference=_ref_parity,
             _min_length=_const(2), _max_length=_const(None), **H | {"special": (SEP,)}),
        Task(name="addition", alphabet=("0", "1"), program="programs/addition.rasp",
             published_in_class=False, published_nope=False,
             statement="Not in C-RASP[periodic, local] as published (Huang et al.; the theory gives no "
                       "guarantee and the trained models fail beyond the training lengths).",
             published_accuracy=_acc(APE=[.997, .268, 0.0], NoPE=[.995, .277, 0.0]),
             description="binary addition: input A + B = (binary, no leading zeros); output the binary sum.",
             _sample=_sample_addition, _reference=_ref_addition,
             _min_length=_const(4), _max_length=_const(None),
             **H | {"special": ("+", "=")}),
    ]


# (name, in_class, nope, accuracy, program?, statement, description)
_FORMAL = [
    ("d2", True, True, _acc(APE=[1.0, 1.0, 1.0], NoPE=[1.0, 1.0, 1.0]),
     "In C-RASP: the depth #( - #) decides every continuation. ",
     "bounded-depth Dyck-1 D-2 (depth <= 2) over ( )"),
    ("d3", True, True, _acc(APE=[1.0, 1.0, 1.0], NoPE=[1.0, 1.0, 1.0]),
     "In C-RASP: the depth #( - #) decides every continuation. ", "bounded-depth Dyck-1 D-3 over ( )"),
    ("d4", True, True, _acc(APE=[1.0, 1.0, 1.0], NoPE=[1.0, 1.0, 1.0]),
     "In C-RASP: the depth #( - #) decides every continuation. ", "bounded-depth Dyck-1 D-4 over ( )"),
    ("d12", True, True, _acc(APE=[1.0, 1.0, 1.0], NoPE=[1.0, 1.0, 1.0]),
     "In C-RASP: the depth #( - #) decides every continuation. ", "bounded-depth Dyck-1 D-12 over ( )"),
    ("tomita1", True, True, _acc(APE=[1.0, 1.0, 1.0], NoPE=[1.0, 1.0, 1.0]),
     "In C-RASP: 1* (only 1 can follow; every valid prefix is a member). ", "Tomita 1: 1*"),
    ("tomita2", True, True, _acc(APE=[1.0, 1.0, 1.0], NoPE=[1.0, 1.0, 1.0]),
     "In C-RASP: (10)*; the continuation depends only on the current token. ", "Tomita 2: (10)*"),
    ("tomita3", False, False, {},
     "Not in C-RASP[periodic, local]; Huang et al. report that models fail to length-generalize. ",
     "Tomita 3: no odd-length run of 1s immediately followed by an odd-length run of 0s"),
    ("tomita4", True, False, _acc(APE=[1.0, .854, .844], NoPE=[1.0, .165, 0.0]),
     "In C-RASP[local]: 0 may follow unless the last two tokens are 0 0 (the predecessor relation). ",
     "Tomita 4: no 000"),
    ("tomita5", False, False, {},
     "Not in C-RASP[periodic, local] (parity of both counts); models fail. ",
     "Tomita 5: even number of 0s and even number of 1s"),
    ("tomita6", False, False, {},
     "Not in C-RASP[periodic, local] (counting modulo 3); models fail. ", "Tomita 6: #0 - #1 divisible by 3"),
    ("tomita7", True, True, _acc(APE=[1.0, .942, .932], NoPE=[1.0, .875, .762]),
     "In C-RASP: 0 may follow unless the prefix contains 1 0 1 as a subsequence (nested existentials). ",
     "Tomita 7: 0*1*0*1*"),
    ("aa_star", True, False, _acc(APE=[1.0, 1.0, 1.0], NoPE=[1.0, 0.0, 0.0]),
     "In C-RASP[periodic]: the end may follow iff the position is odd (0-based): needs periodic relations, "
     "not in NoPE C-RASP. ", "(aa)*"),
    ("aaaa_star", True, False, _acc(APE=[1.0, .923, .867], NoPE=[1.0, 0.0, 0.0]),
     "In C-RASP[periodic]: the end may follow iff i mod 4 = 3 (0-based): needs periodic relations. ", "(aaaa)*"),
    ("abab_star", True, False, _acc(APE=[1.0, .894, .823], NoPE=[1.0, 0.0, 0.0]),
     "In C-RASP[periodic]: the next letter alternates with the current token, the end may follow iff "
     "i mod 4 = 3: needs periodic relations. ", "(abab)*"),
    ("anbn", True, True, _acc(APE=[1.0, .994, .923], NoPE=[1.0, 1.0, 1.0]),
     "In C-RASP: counts of a and b decide every continuation. ", "a^n b^n (n >= 1)"),
    ("anbncn", True, True, _acc(APE=[1.0, .912, .874], NoPE=[1.0, 1.0, 1.0]),
     "In C-RASP: the counts of a, b, c decide every continuation. ", "a^n b^n c^n (n >= 1)"),
    ("anbncndn", True, True, _acc(APE=[1.0, .864, .752], NoPE=[1.0, 1.0, 1.0]),
     "In C-RASP: the counts of a, b, c, d decide every continuation. ", "a^n b^n c^n d^n (n >= 1)"),
    ("aabbccddee", True, True, {},
     "In C-RASP: the continuation depends only on the current token (x or the next letter; the end after e). ",
     "aa*bb*cc*dd*ee*"),
    ("ab_d_bc", True, True, {},
     "In C-RASP: whether a d occurred decides every continuation. ", "{a,b}*d{b,c}*"),
    ("012_02", False, False, {},
     "Not in C-RASP[periodic, local] (Huang et al.); models fail to length-generalize. ", "{0,1,2}*02*"),
    ("boolean3", True, True, {},
     "In C-RASP: the counter 1 + sum(arity - 1) is a linear combination of symbol counts. ",
     "Boolean-3: Boolean expressions in prefix notation, operands 0 1, operators ~ (1), + (2), > (3)"),
    ("boolean5", True, True, {},
     "In C-RASP: the counter 1 + sum(arity - 1) is a linear combination of symbol counts. ",
     "Boolean-5: Boolean expressions in prefix notation, operands 0 1, operators ~ + > * & of arity 1..5 "
     "(the symbols for arities 4 and 5 are ours; uncertain how the original names them)"),
    ("shuffle2", True, True, {},
     "In C-RASP: two independent depths #( - #) and #[ - #] decide every continuation. ",
     "Shuffle-2: the shuffle of Dyck-1 over ( ) and Dyck-1 over [ ]"),
]

_APPROX = {"d2", "d3", "d4", "d12", "tomita1", "tomita2"}
_MOSTLY = {"aabbccddee", "ab_d_bc", "boolean3", "boolean5", "shuffle2"}
_NOPE_ONE_FIGURE = {"anbn", "anbncn", "anbncndn"}


def _formal_tasks() -> list[Task]:
    tasks = []
    for name, in_class, nope, acc, stmt, desc in _FORMAL:
        lang = LANGUAGES[name]
        note = ""
        if name in _APPROX:
            note = " Accuracy: theory.md gives ~100% for APE and NoPE (approximate)."
        elif name in _MOSTLY:
            note = " Accuracy: theory.md says 'mostly 100' for APE and NoPE, without figures per language."
        elif name in _NOPE_ONE_FIGURE:
            note = " Accuracy: theory.md gives a single '100' for NoPE, read here as every bin (uncertain)."
        elif not acc:
            note = " Accuracy: the models fail (theory.md gives no figures)."
        nope_note = (" " + NOPE_INFERRED) if nope else ""
        tasks.append(Task(
            name=name, kind="predict", alphabet=lang.symbols + (EOS,), special=(),
            program=f"programs/{name}.rasp" if in_class else None,
            published_in_class=in_class, published_nope=nope, citation=CITE_H,
            statement=stmt.strip() + nope_note + note, source=HUANG, published_accuracy=acc,
            published_approximate=(("APE", "NoPE") if name in _APPROX or name in _MOSTLY
                                   else ("NoPE",) if name in _NOPE_ONE_FIGURE else ()),
            description=f"{desc}; character prediction: after every prefix, the symbols that can follow "
                        f"({EOS} = the string may end here).",
            _sample=_predict_sampler(name), _reference=_predict_reference(name),
            _min_length=_const(1), _max_length=_const(None),
        ))
    dyck1 = Task(
        name="dyck1", kind="accept", alphabet=("(", ")"), special=(), program="programs/dyck1.cr",
        published_in_class=True, published_nope=True, citation=CITE_H,
        statement="In C-RASP: balanced iff the depth #( - #) never goes negative and ends at 0 (plain counting). "
                  + NOPE_INFERRED + " Posed here as an acceptor (the bundled dyck1.cr); Huang et al. evaluate "
                  "Dyck-1 as character prediction. Accuracy: theory.md gives ~100% (approximate).",
        source=HUANG, published_accuracy=_acc(APE=[1.0, 1.0, 1.0], NoPE=[1.0, 1.0, 1.0]),
        published_approximate=("APE", "NoPE"),
        description="Dyck-1 over ( ), acceptor: balanced or not. Samples: about half balanced members (even "
                    "lengths), half hard negatives (valid prefixes that end unbalanced, balanced counts that "
                    "dip below zero, one flipped symbol).",
        _sample=_sample_dyck1, _reference=_ref_dyck1, _min_length=_const(1), _max_length=_const(None),
    )
    return [dyck1] + tasks


TASKS: dict[str, Task] = {t.name: t for t in _seed_tasks() + _huang_algorithmic() + _formal_tasks()}
for _n in ("sort", "copy_unique"):
    LENGTH_REASONS[_n] = "the tokens are distinct: length <= |alphabet| + 1 (pass a larger alphabet)"


def get(name: str) -> Task:
    """The task called ``name``; an unknown name is a :class:`~rasp.RaspError` with a did-you-mean hint."""
    if name in TASKS:
        return TASKS[name]
    folded = {n.lower(): n for n in TASKS}
    if name.lower() in folded:
        return TASKS[folded[name.lower()]]
    close = difflib.get_close_matches(name, list(TASKS), n=3, cutoff=0.5) or difflib.get_close_matches(
        name.lower(), list(folded), n=3, cutoff=0.5)
    close = [folded.get(c, c) for c in close]
    hint = f"did you mean {' or '.join(close)}?" if close else "list the tasks with: rasp tasks"
    raise RaspError(f"unknown task '{name}'", hint=hint)


def task_for_program(path, source: str | None = None) -> Task | None:
    """The registered task whose bundled program is ``path`` (absolute, or relative to the current
    directory, as it was loaded), or a file with exactly its text (``source``, else the file's text,
    is compared): a copy of ``programs/`` elsewhere still samples its task's inputs. Else None: a
    user's own ``programs/nf.rasp`` in another folder that differs from the bundled NF program is not
    it (it got NF's published result and a warning that it cannot compute the task). ``path`` None:
    by the text alone (a saved model records the file name relative to where it was compiled, which
    says nothing about the current directory)."""
    if path is None:
        return _bundled_texts().get(source) if source is not None else None
    p = (Path.cwd() / Path(path)).resolve()
    for t in TASKS.values():
        if t.program and (REPO_ROOT / t.program).resolve() == p:
            return t
    if source is None:
        longest = max(map(len, _bundled_texts()), default=0)
        try:  # at most one character more than the longest bundled program (a longer file is none of
            # them; /dev/zero was read until memory ran out)
            with open(p, encoding="utf-8") as f:
                source = f.read(longest + 1)
        except (OSError, UnicodeDecodeError, ValueError):
            return None
    return _bundled_texts().get(source)


@lru_cache(maxsize=None)
def _bundled_texts() -> dict[str, Task]:
    """Each bundled program's text -> its task (the first task that names the file)."""
    out: dict[str, Task] = {}
    for t in TASKS.values():
        if t.program:
            try:
                out.setdefault((REPO_ROOT / t.program).read_text(encoding="utf-8"), t)
            except OSError:  # an installed copy without programs/: match by path only
                pass
    return out


def bin_of(length: int) -> int:
    """The index of the length bin (<= 50, 51-100, 101-150) that ``length`` falls in; 3 beyond 150."""
    for k, (lo, hi) in enumerate(BINS):
        if length <= hi:
            return k
    return len(BINS)


__all__ = ["Sample", "Task", "TASKS", "get", "task_for_program", "BINS", "EOS", "SEP", "LANGUAGES"]
