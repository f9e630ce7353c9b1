"""The public object: a parsed, type-checked, expanded program, and the functions that run it."""
from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from . import ast as A
from .errors import RaspError, Span, listing, not_utf8, quoted
from .expand import expand
from .gcpause import paused_gc
from .interp import evaluate, fold_constants, make_batch, output_at_last
from .memory import free_host_bytes
from .parser import parse_module
from .printer import module_to_str
from .typecheck import Checked, check_module

Tokens = Sequence[str] | str


@dataclass(frozen=True)
class Program:
    """A C-RASP program: its surface syntax (``module``), types (``checked``) and the core program
    for the current alphabet (``core``). ``str(program)`` is its canonical source."""

    module: A.Module
    checked: Checked
    core: A.CoreProgram
    source: str | None = None
    filename: str | None = None

    # -------------------------------------------------------------------- description
    def __str__(self) -> str:
        return module_to_str(self.module)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Program) and self.module == other.module and self.core.alphabet == other.core.alphabet

    def __hash__(self) -> int:
        return hash((self.module, self.core.alphabet))

    @functools.cached_property
    def folded_core(self) -> A.CoreProgram:
        """The core with its operations over constants folded (:func:`rasp.interp.fold_constants`):
        what generation re-evaluates after every token."""
        return fold_constants(self.core)

    @property
    def alphabet(self) -> tuple[str, ...]:
        """The data alphabet (what families range over)."""
        return self.core.alphabet

    @property
    def special(self) -> tuple[str, ...]:
        return self.core.special

    @property
    def symbols(self) -> tuple[str, ...]:
        """Every token an input may contain."""
        return self.core.symbols

    @property
    def output_kind(self) -> str:
        return self.core.output.kind

    def with_alphabet(self, alphabet: Iterable[str]) -> "Program":
        """The same program with families re-expanded over another data alphabet."""
        try:
            with paused_gc():
                core = expand(self.module, self.checked, alphabet)
        except RaspError as exc:
            raise exc.located(self.source, self.filename) from None
        except RecursionError:
            raise A.too_deep("an expression is nested too deeply to process", self.module).located(
                self.source, self.filename) from None
        return Program(self.module, self.checked, core, self.source, self.filename)

    # -------------------------------------------------------------------- running
    def encode(self, tokens: Tokens, *, line: int | None = None, columns: Sequence[int] | None = None,
               source: str | None = None, filename: str | None = None) -> np.ndarray:
        """Token strings -> ids; a token outside the alphabet is a located :class:`RaspError`."""
        toks = split_tokens(tokens)
        if not toks:
            span = Span(line, 1, line, 2) if line else None
            raise RaspError("empty input", span, "give at least one token", source=source, filename=filename)
        index = {s: k for k, s in enumerate(self.symbols)}
        ids = np.empty(len(toks), dtype=np.int64)
        for p, t in enumerate(toks):
            k = index.get(t)
            if k is None:
                span = None
                if line is not None and columns is not None:
                    span = Span(line, columns[p], line, columns[p] + len(t))
                raise RaspError(
                    f"token {quoted(t)} at position {p} is not in the alphabet: {listing(self.symbols)}",
                    span,
                    "declare it in 'alphabet'/'special', or pass --alphabet",
                    source=source,
                    filename=filename,
                )
            ids[p] = k
        return ids

    def evaluate(self, inputs: Sequence[Tokens]) -> dict[str, np.ndarray]:
        """Every definition at every position for a batch: name -> (B, N) array (rows right-padded);
        a RASP-L selector definition's value is an ``interp._Selector`` (its ``masks()`` give the
        selected keys chunk by chunk, not an (B, N, N) array)."""
        check_batch(inputs, None, "evaluate")  # a string was a batch of one-character inputs
        return evaluate(self.core, make_batch(self.encode_batch(inputs)))

    def encode_batch(self, inputs: Sequence[Tokens]) -> list[np.ndarray]:
        """:meth:`encode` of each input; in a batch of several, an error says which input (0-based)."""
        out = []
        for k, t in enumerate(inputs):
            try:
                out.append(self.encode(t))
            except RaspError as exc:
                if len(inputs) > 1:
                    exc.message = f"input {k} (of {len(inputs)}, counted from 0): {exc.message}"
                    exc.args = (exc.message,)
                raise
        return out

    def run(self, tokens: Tokens, *, max_new: int | None = None):
        """The output value for one input (see :func:`run`)."""
        return self.run_batch([tokens], max_new=max_new)[0]

    def run_batch(self, inputs: Sequence[Tokens], *, max_new: int | None = None) -> list:
        """Output values for many inputs at once (vectorized over the batch)."""
        check_batch(inputs, max_new)
        if len(inputs) == 0:
            return []
        seqs = self.encode_batch(inputs)
        out: list = [None] * len(seqs)
        # inputs of similar lengths together: a batch is padded to its longest input, and one line of
        # 100,000 tokens among 200 short ones made 200 rows of 100,000 positions (695 MB for dyck1)
        for rows in length_groups([len(s) for s in seqs], BATCH_BYTES // max(1, self._reevaluate_bytes)):
            for r, o in zip(rows, self._run_ids([seqs[r] for r in rows], max_new)):
                out[r] = o
        return out

    def _run_ids(self, seqs: list[np.ndarray], max_new: int | None) -> list:
        kind = self.core.output.kind
        if kind == "generate":
            return self._generate(seqs, max_new)
        batch = make_batch(seqs)
        values = evaluate(self.core, batch)
        if kind == "accept":
            return [bool(v) for v in output_at_last(self.core, values, batch.lengths)[:, 0]]
        # predict: the set of allowed symbols at every position
        allowed = np.stack([values[n] for n in self.core.output.names], axis=2)  # (B, N, |alphabet|)
        return [allowed_sets(allowed[r, :n], self.alphabet) for r, n in enumerate(batch.lengths)]

    def _generate(self, seqs: list[np.ndarray], max_new: int | None) -> list[list[str]]:
        """Greedy decoding: append the first symbol whose NEXT holds at the last position.

        Two equivalent strategies: re-evaluating the whole program after every token (vectorized over
        the positions: a step costs O(N) per core definition) and incremental evaluation
        (:mod:`rasp.stream`: one position at a time, vectorized over the batch and over family
        instances, so it first walks the whole prompt and then costs O(1) per token). Which is cheaper
        depends on how many tokens come, which is not known in advance; so re-evaluation goes on while
        the time it has taken, plus the next step's, stays under what streaming from the start would
        cost (:func:`stream_estimate`), then the rows still generating stream (the rule of renting
        until the rent paid reaches the price of buying: never more than about twice the cheaper
        strategy's cost, whatever the answer's length). A retrieval or majority answer after a long
        prompt is a few re-evaluations; a copy over a large family streams at once. Both strategies
        give the same tokens (the tests compare them); only the time differs."""
        from . import stream

        limits = generation_limits(seqs, max_new)
        if not stream.supports(self):
            return self._ids_to_symbols(self._reevaluate_ids(seqs, limits))
        n = max((len(s) for s in seqs), default=0)
        # a re-evaluation holds every core definition at every position: where that would not fit in
        # half the free memory (uf over 150 symbols: 22,952 bools, 23 KB per token), stream from the start
        # (its memory does not grow with the prompt, but for RASP-L selects' keys), and switch to the
        # stream at the step that would not fit (the generated tokens add positions)
        room = free_host_bytes() // 2
        if self._reevaluate_bytes * n * len(seqs) > room:
            return self._ids_to_symbols(stream.generate(self, seqs, limits))
        budget = stream_estimate(self, n)
        # the first step's cost from the program's size, each next one's from the last step's time
        step = REEVALUATE_STEP_S * len(self.core.defs)
        spent = 0.0
        clock: float | None = None

        def go_on(cells: int) -> bool:
            nonlocal step, spent, clock
            now = _clock()
            if clock is not None:
                step = now - clock
                spent += step
            clock = now
            # the generated tokens add positions: a step that would not fit streams from there on
            return spent + step <= budget and self._reevaluate_bytes * cells <= room

        first, active = self._reevaluate_ids(seqs, limits, go_on=go_on, with_active=True)
        more = [r for r in active if len(first[r]) < limits[r]]
        if more:
            rest = stream.generate(self, [np.concatenate([seqs[r], np.asarray(first[r], dtype=np.int64)])
                                          for r in more], [limits[r] - len(first[r]) for r in more])
            for r, g in zip(more, rest):
                first[r] = first[r] + g
        return self._ids_to_symbols(first)

    @functools.cached_property
    def _reevaluate_bytes(self) -> int:
        """Bytes a re-evaluation holds per position: every core definition's value (bools 1 byte,
        counts and RASP-L values 8, a selector's keys and queries 16) and, for a program with a RASP-L
        ``select``, the working memory of one query chunk per key position (:class:`rasp.interp._Selector`
        narrows its chunks to one query once a batch has more than ``SELECT_CELLS / 2`` positions, so the
        mask and the aggregate's copies then grow with the positions: about 35 bytes per cell beyond the
        stored values, measured with tracemalloc on a ``max`` aggregate over 2.1M cells in one-query
        chunks, 52 bytes per position in all; below, they stay under about 140 MB whatever the length
        (``raspl_sort.rasp`` at 100,000 tokens: 138 MB peak), which the estimate leaves out)."""
        per = sum(1 if d.type == A.BOOL else 16 if d.type == A.SELECTOR else 8 for d in self.core.defs)
        if self.checked.raspl and any(isinstance(n, A.Select) for d in self.core.defs for n in A.walk(d.expr)):
            per += SELECT_BYTES_PER_CELL
        return per

    def _generate_reevaluate(self, seqs: list[np.ndarray], max_new: int | None) -> list[list[str]]:
        """Greedy decoding by re-evaluating the whole program after every generated token."""
        limits = generation_limits(seqs, max_new)
        return self._ids_to_symbols(self._reevaluate_ids(seqs, limits))

    def _ids_to_symbols(self, generated: list[list[int]]) -> list[list[str]]:
        return [[self.symbols[k] for k in g] for g in generated]

    def _reevaluate_ids(self, seqs: list[np.ndarray], limits: list[int], go_on=None, with_active: bool = False):
        """Greedy decoding by re-evaluation. ``go_on(cells)``, asked before every step with the number
        of positions the step's batch holds (rows times the longest), may stop it early: then (with
        ``with_active``) the rows still generating are returned beside the tokens."""
        generated: list[list[int]] = [[] for _ in seqs]
        active = list(range(len(seqs)))
        current = [list(s) for s in seqs]
        while active:
            active = [r for r in active if len(generated[r]) < limits[r]]
            if not active or (go_on is not None and not go_on(len(active) * max(len(current[r]) for r in active))):
                break
            batch = make_batch([current[r] for r in active])
            values = evaluate(self.folded_core, batch)
            nxt = output_at_last(self.core, values, batch.lengths)  # (len(active), |alphabet|)
            still = []
            for row, r in enumerate(active):
                hits = np.flatnonzero(nxt[row])
                if len(hits) == 0:
                    continue
                sid = int(hits[0])  # output names follow the data alphabet, whose ids come first
                current[r].append(sid)
                generated[r].append(sid)
                still.append(r)
            active = still
        return (generated, active) if with_active else generated


#: a RASP-L selector's working memory per (query, key) cell: a bool mask and an aggregate's int64
#: copies of it (about 35 bytes measured, see :meth:`Program._reevaluate_bytes`), rounded up
SELECT_BYTES_PER_CELL = 40

#: the cost model of :meth:`Program._generate`, measured on one core of the 2-core container (uf over
#: 150 symbols, ur, a one-definition program; prompts of 16 to 20,000 tokens): a re-evaluation step
#: costs about 30 microseconds per core definition plus 15 ns per position and definition ...
REEVALUATE_STEP_S = 30e-6
#: ... and streaming about 50 microseconds per position and surface definition (the stream evaluates
#: a family as one array, so its cost hardly depends on the alphabet)
STREAM_POSITION_S = 50e-6


_clock = time.perf_counter  # (tests replace it with a fake clock to choose where the switch falls)


def stream_estimate(program, n: int) -> float:
    """Seconds that streaming a batch whose longest prompt has ``n`` tokens costs before its first
    new token (the stream walks the prompt position by position): the price re-evaluation is weighed
    against."""
    return STREAM_POSITION_S * max(1, len(program.checked.signatures)) * n


#: the most bytes one batch of :meth:`Program.run_batch` may hold in definition values (inputs of
#: similar lengths go together; an input longer than that is a batch of its own)
BATCH_BYTES = 1 << 28


def length_groups(lengths: Sequence[int], max_cells: int) -> list[list[int]]:
    """Indices grouped for batching (a batch is padded to its longest input): sorted by length, each
    group within a factor 2 of its shortest length and at most ``max_cells`` padded positions (a
    single longer input is its own group). Shared with the compiled model's forward."""
    groups: list[list[int]] = []
    for r in sorted(range(len(lengths)), key=lambda r: lengths[r]):
        g = groups[-1] if groups else None
        if g and lengths[r] <= 2 * max(1, lengths[g[0]]) and (len(g) + 1) * lengths[r] <= max_cells:
            g.append(r)
        else:
            groups.append([r])
    return groups


def allowed_sets(allowed: np.ndarray, alphabet: Sequence[str]) -> list[list[str]]:
    """A predictor's output from its (n, |alphabet|) bools: the allowed symbols at each position, each
    distinct set built once (a list per position: 10^6 positions took 8 s one by one)."""
    if len(allowed) == 0:
        return []
    m = allowed.shape[1]
    distinct, which = np.unique(np.packbits(allowed, axis=1), axis=0, return_inverse=True)
    sets = [[alphabet[k] for k in np.flatnonzero(np.unpackbits(d)[:m])] for d in distinct]
    return [list(sets[i]) for i in which.ravel().tolist()]


def default_max_new(n: int) -> int:
    """Generation cap when none is given: twice the prompt plus 8 (a copy needs at most the prompt)."""
    return 2 * n + 8


#: the least memory a generated token takes (a list slot and the symbol's reference in the output,
#: before any working memory): what :func:`check_max_new` weighs against the free memory
GENERATED_BYTES_PER_TOKEN = 16


def check_max_new(max_new: int | None, inputs: int, name: str = "max_new") -> None:
    """Refuse a generation cap whose tokens alone cannot fit in the free memory (a generator that never
    stops would otherwise run for years with slowly growing memory: ``--max-new 10**12``)."""
    if max_new is None or inputs == 0:
        return
    need = GENERATED_BYTES_PER_TOKEN * int(max_new) * inputs
    free = free_host_bytes()
    if need > free:
        most = free // (GENERATED_BYTES_PER_TOKEN * inputs)
        raise RaspError(f"{name} {int(max_new):,}: {inputs:,} generation{'s' if inputs > 1 else ''} of up to that many "
                        f"tokens need{'' if inputs > 1 else 's'} at least {need / 2**30:,.1f} GiB here and "
                        f"{free / 2**30:.1f} GiB are free",
                        hint=f"at most about {most:,} new tokens per input on this machine")


def generation_limits(seqs, max_new: int | None) -> list[int]:
    """The generation cap of each prompt: ``max_new``, or :func:`default_max_new` of its length. Every
    generator (the interpreter's and a compiled model's) takes its caps from here, so a ``max_new``
    that cannot fit is refused here (:func:`check_max_new`)."""
    check_max_new(max_new, len(seqs))
    # a Python int: a NumPy integer (np.uint8(250)) would overflow in the sums made from it
    return [default_max_new(len(s)) if max_new is None else int(max_new) for s in seqs]


def split_tokens(tokens: Tokens) -> list[str]:
    if isinstance(tokens, str):
        return tokens.split()
    try:
        return list(tokens)
    except TypeError:
        raise RaspError(f"an input is a string of tokens or a sequence of them, not {type(tokens).__name__}",
                        hint='e.g. "a b a" or ["a", "b", "a"]') from None


def check_batch(inputs, max_new, what: str = "run_batch") -> None:
    """The arguments of a ``run_batch`` (the interpreter's and a compiled model's; ``what`` names the
    method): a sequence of inputs (a single string is one input: use ``run``) and ``max_new`` None or
    an int >= 0."""
    if isinstance(inputs, str):
        one = f"run({inputs[:20]!r})" if what == "run_batch" else f"{what}([{inputs[:20]!r}])"
        raise RaspError(f"{what} takes a list of inputs, not one string (its characters would be inputs)",
                        hint=f"one input: {one}; several: {what}([...])")
    try:
        len(inputs)
    except TypeError:
        raise RaspError(f"{what} takes a list of inputs, not {type(inputs).__name__}") from None
    if max_new is not None and (isinstance(max_new, bool) or not isinstance(max_new, (int, np.integer))
                                or max_new < 0):
        raise RaspError(f"max_new must be None or an integer >= 0, got {max_new!r}")


def token_columns(line: str) -> tuple[list[str], list[int]]:
    """Whitespace-separated tokens of a line with their 1-based columns."""
    toks, cols = [], []
    for m in re.finditer(r"\S+", line):
        toks.append(m.group())
        cols.append(m.start() + 1)
    return toks, cols


def parse(text: str, *, filename: str | None = None, alphabet: Iterable[str] | None = None) -> Program:
    """Parse, type-check and expand program text. Raises :class:`RaspError` on any user error. Lines
    end at ``\n``, ``\r\n`` or a lone ``\r``, as in program files (:func:`load`)."""
    if isinstance(text, str) and "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    module = None
    try:
        with paused_gc():
            module = parse_module(text, filename)
            checked = check_module(module)
            core = expand(module, checked, alphabet)
    except RaspError as exc:
        raise exc.located(text, filename) from None
    except RecursionError:
        raise A.too_deep("an expression is nested too deeply to process", module).located(
            text, filename) from None
    return Program(module, checked, core, text, filename)


#: the largest program file :func:`load` reads
MAX_PROGRAM_BYTES = 64 * 2**20


def load(path: str | Path, *, alphabet: Iterable[str] | None = None) -> Program:
    """Read and parse a program file (``.cr`` or ``.rasp``: one language); with ``alphabet``, its
    families are expanded over those data symbols (a file without an alphabet line needs them)."""
    text, filename = read_source(path)
    return parse(text, filename=filename, alphabet=alphabet)


def read_source(path: str | Path) -> tuple[str, str]:
    """(text, file name) of a program file: UTF-8 (a byte-order mark dropped), line ends as
    ``\n``; every failure to read it is a :class:`RaspError` with a hint."""
    if not isinstance(path, (str, Path)):
        raise RaspError(f"a program is loaded from a path (str or Path), not {type(path).__name__}",
                        hint="for program text use rasp.parse(text)")
    if str(path) == "":  # Path("") is the current directory
        raise RaspError("cannot read program: the path is empty", hint="give the path of a program file (.rasp or .cr)")
    p = Path(path)
    try:
        with open(p, "rb") as f:  # at most the cap and a byte: /dev/zero would be read until memory ran out
            data = f.read(MAX_PROGRAM_BYTES + 1)
        if len(data) > MAX_PROGRAM_BYTES:
            raise RaspError(f"cannot read program: larger than {MAX_PROGRAM_BYTES // 2**20} MiB", filename=str(p),
                            hint="programs are small text files (.cr or .rasp); families keep large alphabets short")
        # a byte-order mark is not part of the program; line ends as text mode reads them (\r\n, \r -> \n)
        text = data.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    except OSError as exc:
        looks_like_source = isinstance(path, str) and ("\n" in path or " = " in path)
        try:  # (these may fail too: a name too long for the file system, a folder that cannot be searched)
            is_dir = p.is_dir()
            is_model = is_dir and (p / "config.json").is_file()
        except OSError:
            is_dir = is_model = False
        if looks_like_source:
            hint = "this looks like program text: use rasp.parse(text) (or compiler.compile(rasp.parse(text)))"
        elif is_model:
            hint = "this is a compiled model: rasp verify DIR runs it against its program (compiler.load(DIR) in Python)"
        elif is_dir:
            hint = "give a program file (.rasp or .cr), not a directory"
        else:
            hint = "give the path of a program file (.rasp or .cr); programs/ has one per task"
        raise RaspError(f"cannot read program: {exc.strerror}",
                        filename=str(p) if not looks_like_source else None, hint=hint) from None
    except UnicodeDecodeError as exc:
        data = exc.object
        raise not_utf8(data, exc.start, f"cannot read program: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                       f"{exc.start})", filename=str(p), hint="programs are UTF-8 text files (.cr or .rasp)") from None
    return text, str(p)


def run(program: Program, tokens: Tokens, *, max_new: int | None = None):
    """Run ``program`` on one input and return its output value, as ``rasp run --json`` prints it:

    * acceptor: ``True``/``False`` (the output bool at the last position);
    * generator: the generated continuation, a list of symbols;
    * character predictor: one list of allowed symbols per position.
    """
    return program.run(tokens, max_new=max_new)
