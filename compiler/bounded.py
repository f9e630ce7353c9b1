"""RASP-L programs to transformers: exact when they lower to C-RASP, bounded by a declared maximum
length when they do not.

:func:`compile_raspl` is what ``rasp compile`` calls for a program that uses RASP-L primitives:

* the program **lowers** (:func:`rasp.raspl.lower`): the lowered C-RASP[periodic, local] program is
  compiled by :func:`compiler.compile`, exactly like any C-RASP program: one set of weights, exact at
  every length (up to the floating-point limits of ``docs/compiler.md``);
* it **does not lower**: a maximum length N must be declared (``--max-length N``). Then
  :func:`rasp.raspl.lower_bounded` turns it into a C-RASP[periodic, local] program that computes the
  same on every sequence of at most N tokens: positions become the absolute-position features
  ``pos[i % N == p]`` (p < N; the compiler embeds them as a one-hot table of N positions, its
  periodic embedding of period N), counts become the finite values they can take up to length N, and
  everything else lowers as before. That program is compiled as usual. Such a model is a **bounded
  construction**: exact on every sequence (prompt plus generated tokens) of at most N tokens, and
  with no claim beyond: positions wrap around modulo N and counts leave their enumerated range, so
  it is wrong there in general (:func:`verify_bounded` shows where). Any construction that uses
  absolute positions has such a bound; that is why these programs carry no length-generalization
  guarantee.

The model's ``config["raspl"]`` records ``{"lowered": "exact" | "bounded", "max_length": N or None,
"lowered_source": ...}``; ``config["program"]`` keeps the original RASP-L source, so
:attr:`CompiledModel.program` (and ``rasp verify``, which compares the model with the interpreter
running that program) checks the model against the RASP-L program itself, not its lowering.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Iterable

import numpy as np

from rasp import ast as A
from rasp.errors import OutsideClassError, RaspError
from rasp.printer import module_to_str
from rasp.program import Program, load as load_program
from rasp.raspl import MAX_BOUNDED_LENGTH, lower_explained, uses_raspl

from .api import CompiledModel, compile as compile_exact


def compile_raspl(program: Program | str | Path, *, max_length: int | None = None,
                  alphabet: Iterable[str] | None = None) -> CompiledModel:
    """Compile a program that may use RASP-L primitives.

    Without RASP-L primitives this is :func:`compiler.compile`. A RASP-L program that lowers compiles
    exactly (``max_length`` is then not needed, and ignored). One that does not lower needs
    ``max_length`` and compiles to a model exact up to that many tokens; without it, a
    :class:`RaspError` located at the first part that does not lower says so. With ``max_length``, a
    program outside C-RASP[periodic, local] only for its guards or ``pos[...]`` of absolute positions
    past the rewrite's caps (``#[j <= 2000000] P``; small ones such as ``#[j <= 3] P`` and
    ``pos[i == 1]`` are eventually periodic and compile exactly), with or without RASP-L primitives,
    compiles bounded too: those relations are enumerated below N."""
    if max_length is not None and (type(max_length) is bool or not isinstance(max_length, (int, np.integer))
                                   or max_length < 1):  # (above MAX_BOUNDED_LENGTH: the lowering says why)
        raise RaspError(f"max_length must be None or an integer >= 1 (at most {MAX_BOUNDED_LENGTH}), got {max_length!r}")
    max_length = None if max_length is None else int(max_length)  # (np.int64 is not JSON)
    if not isinstance(program, Program):
        program = load_program(program)
    if alphabet is not None:
        program = program.with_alphabet(alphabet)
    raspl = uses_raspl(program)
    if not raspl and max_length is None:
        try:
            return compile_exact(program)
        except OutsideClassError as exc:
            raise _bound_hint(exc) from None
    t0 = time.perf_counter()
    # exact first: a RASP-L program's lowering, a C-RASP program as it is
    lowered, why = lower_explained(program) if raspl else (program, None)
    lower_s = time.perf_counter() - t0
    mode, model = "exact", None
    if lowered is not None:
        try:
            model = compile_exact(lowered)
        except OutsideClassError as exc:
            # outside the class after all (a guard of absolute positions, which RASP-L may write as
            # one select comparison): with a bound, bounded mode enumerates those positions; any
            # other failure (a table too large) is the user's to see as it is
            if max_length is None:
                raise _bound_hint(exc) from None
    if model is not None and not raspl:
        return model
    if model is None:
        if lowered is None and max_length is None:
            raise OutsideClassError(
                f"this RASP-L program does not lower to C-RASP: {why.message}", why.span,
                why.hint or "compile a bounded model with --max-length N (exact on sequences of at most N tokens)",
            ).located(program.source, program.filename)
        t0 = time.perf_counter()
        lowered, why_b = lower_explained(program, max_length)
        lower_s += time.perf_counter() - t0
        if lowered is None:
            raise RaspError(
                f"cannot compile even up to length {max_length}: {why_b.message}", why_b.span,
                why_b.hint or "try a smaller --max-length, or a smaller --alphabet",
            ).located(program.source, program.filename)
        mode = "bounded"
        model = compile_exact(lowered)
    t1 = time.perf_counter()
    try:
        lowered_source = module_to_str(lowered.module)
    except RecursionError:  # the printer loops over chains; anything else this deep is refused
        raise A.too_deep("the lowered program nests too deeply to print into config.json",
                         program.module).located(program.source, program.filename) from None
    config = dict(model.config)
    config["program"] = {
        "source": program.source if program.source is not None else str(program),
        "filename": program.filename,
        "alphabet": list(program.alphabet),
        "special": list(program.special),
    }
    config["raspl"] = {
        "lowered": mode,
        "max_length": max_length if mode == "bounded" else None,
        "lowered_source": lowered_source,
    }
    # the reported time includes the lowering and the lowered program's text in config.json, so
    # RASP-L and C-RASP programs compare; the passes still add up to it
    passes = {"lower": lower_s, **model.compile_passes}
    passes["config"] += time.perf_counter() - t1
    return model.with_config(config, program, sum(passes.values()), passes)


def _bound_hint(exc: OutsideClassError) -> OutsideClassError:
    """The error of a program outside the class, with a hint that a bounded model would compile it."""
    more = "compile a model exact up to N tokens: --max-length N"
    exc.hint = f"{exc.hint}; or {more}" if exc.hint else more
    return exc


def max_length_of(model: CompiledModel) -> int | None:
    """The declared maximum length of a bounded model, None for exact ones."""
    info = model.config.get("raspl") or {}
    return info.get("max_length")


def verify_bounded(model: CompiledModel, *, lengths: Iterable[int] | None = None, samples: int = 20,
                   seed: int = 0, task=None, device=None, dtype: str = "float64") -> list[dict]:
    """Model against the interpreter running the original RASP-L program (and against the task's
    reference where there is one: ``task`` is a registered task name or object, by default the task
    whose program file this is) on ``samples`` inputs per prompt length.

    By default the prompt lengths are N/4 and N/2 (inside the bound, where the model is exact: a
    generator's prompt and generated tokens together stop at N there) and 2N and 4N (beyond it, to show
    what happens there). One dict per length: ``length``, ``samples``,
    ``agree`` (model == interpreter, and == reference where there is one), ``agree_interpreter``,
    ``agree_reference``, ``within_bound`` (every sequence, prompt plus the tokens the model generated,
    has at most N tokens; None for exact models), ``longest`` (the longest such sequence) and
    ``example`` (a disagreeing input, shortened)."""
    from .verify import as_task, check_inputs, sample_inputs, task_for

    N = max_length_of(model)
    program = model.program
    task = as_task(task)
    task = task if task is not None else task_for(program, loaded=model.loaded_from is not None)
    if lengths is None:
        lengths = [8, 32, 128] if N is None else sorted({max(1, N // 4), max(1, N // 2), 2 * N, 4 * N})
    rng = np.random.default_rng(seed)
    rows = []
    for n in lengths:
        try:
            inputs, targets = sample_inputs(program, task, rng, n, samples)
        except RaspError:  # the task has no input of this length
            continue
        # inside the bound a generation stops at N tokens in all (where the model is exact, as rasp verify
        # does); beyond it, it runs as it would (that is what the rows beyond show)
        cap = max(0, N - n) if N is not None and n <= N and model.kind == "generate" else None
        same, ref_ok, values, _, _ = check_inputs(model, inputs, targets, device=device, dtype=dtype, max_new=cap)
        totals = [len(x) + (len(v) if model.kind == "generate" else 0) for x, v in zip(inputs, values)]
        both = [a and b for a, b in zip(same, ref_ok)]
        bad = [x for x, ok in zip(inputs, both) if not ok]
        example = None
        if bad:
            example = bad[0] if len(bad[0]) <= 40 else bad[0][:20] + ["..."] + bad[0][-20:]
        rows.append({
            "length": n, "samples": len(inputs), "agree": sum(both) / max(1, len(inputs)),
            "agree_interpreter": sum(same) / max(1, len(inputs)),
            "agree_reference": None if all(t is None for t in targets) else sum(ref_ok) / max(1, len(inputs)),
            "within_bound": None if N is None else max(totals) <= N, "longest": max(totals),
            "example": example,
        })
    return rows


__all__ = ["compile_raspl", "max_length_of", "verify_bounded"]
