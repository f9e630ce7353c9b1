"""``rasp verify PROGRAM|DIR``: run a compiled model against the interpreter on sampled inputs."""
from __future__ import annotations

import argparse
import json
import shlex
import warnings
from pathlib import Path

from ..errors import OutsideClassError, RaspError, listing
from ..expand import comma_items
from ..program import check_max_new, default_max_new
from ._common import add_alphabet_option, add_json_option, load_program, note_unused_max_new, sum_limit_text


def _ints(text: str) -> list[int]:
    items = comma_items(text)
    if items is None:
        raise argparse.ArgumentTypeError(f"an empty length between commas in {text!r}")
    try:
        vals = [int(x) for item in items for x in item.split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 16,256,4096, got {text!r}") from None
    if not vals:
        raise argparse.ArgumentTypeError("no length given: list lengths like 16,256,4096")
    if any(v < 1 for v in vals):
        raise argparse.ArgumentTypeError(f"lengths must be positive integers, got {text!r}")
    return vals


#: what each numeric flag means, for the hint of a value below its least
_FLAG_HINTS = {
    "--start": "the first length --find-limit tries, e.g. --start 16",
    "--max-length": "the longest length --find-limit tries, e.g. --max-length 1048576",
    "--max-new": "the most tokens a generator may add; 0 generates none",
    "--seed": "any integer from 0, e.g. --seed 0",
    "--budget": "seconds per dtype for --find-limit, e.g. --budget 60",
}


def register(sub) -> None:
    p = sub.add_parser(
        "verify",
        help="check a compiled model against the interpreter at many lengths",
        description="Compile PROGRAM (or load a model written by rasp compile -o DIR) and compare its outputs "
        "with the interpreter's, and with the task's reference where the program belongs to a registered "
        "task, on sampled inputs (the task's sampler, else uniform over every symbol, special tokens included). Acceptors and "
        "predictors are compared at every position. Prints one row per length; exit 1 unless every sample "
        "agrees.",
    )
    p.add_argument("target", help="a .cr/.rasp program, or a directory written by rasp compile -o")
    p.add_argument("--lengths", type=_ints, default=None,
                   help="input lengths (default 16,256,4096; for a bounded model N/4, N/2 and N)")
    p.add_argument("--samples", type=int, default=8, help="inputs per length (default 8)")
    p.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (CUDA when present; default)")
    p.add_argument("--dtype", default="float32",
                   help="float64, float32, bfloat16 or float16; a comma-separated list runs each (default float32)")
    p.add_argument("--backend", default="auto", choices=["auto", "dense", "scan", "sdpa"],
                   help="attention implementation (default auto: sdpa on CUDA, scan on CPU)")
    p.add_argument("--find-limit", action="store_true",
                   help="double the length until the first disagreement or a budget; report the longest exact "
                   "length per dtype")
    p.add_argument("--budget", type=float, default=None,
                   help="find-limit: seconds per dtype for the search (default 60; the --lengths rows and the "
                   "search's first step always run)")
    p.add_argument("--start", type=int, default=None, help="find-limit: first length (default 16)")
    p.add_argument("--max-length", type=int, default=None, help="find-limit: stop after this length")
    p.add_argument("--max-new", type=int, default=None, help="generators: tokens to generate at most")
    p.add_argument("--inputs", choices=["task", "uniform"], default="task",
                   help="task: the registered task's sampler when there is one (default); uniform: uniform over "
                   "all symbols, special tokens included (any length, also beyond a task's longest input)")
    p.add_argument("--seed", type=int, default=0, help="random seed for the inputs (default 0)")
    add_alphabet_option(p)
    add_json_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with warnings.catch_warnings():  # the cast's warning about inexact weights is the note printed per dtype
        warnings.filterwarnings("ignore", message="weights not exactly representable")
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    import numpy as np

    import compiler
    from compiler import verify as V
    from compiler.bounded import max_length_of
    from compiler.model import DTYPES, resolve_device

    if args.samples < 1:
        raise RaspError("--samples must be at least 1", hint="the inputs drawn per length, e.g. --samples 10")
    given = [f for f, v in (("--start", args.start), ("--budget", args.budget), ("--max-length", args.max_length))
             if v is not None]
    if given and not args.find_limit:
        raise RaspError(f"{', '.join(given)} only {'applies' if len(given) == 1 else 'apply'} with --find-limit", hint=f"add --find-limit, or drop {'it' if len(given) == 1 else 'them'}")
    start_given = args.start is not None
    args.start = 16 if args.start is None else args.start
    args.budget = 60.0 if args.budget is None else args.budget
    for flag, value, least in (("--start", args.start, 1), ("--max-length", args.max_length, 1),
                               ("--max-new", args.max_new, 0), ("--seed", args.seed, 0), ("--budget", args.budget, 0)):
        if value is not None and not value >= least:  # not >=: NaN is refused too
            raise RaspError(f"{flag} must be at least {least}, got {value:g}", hint=_FLAG_HINTS[flag])
    if args.budget == float("inf"):  # the search would run until memory runs out
        raise RaspError("--budget must be a finite number of seconds", hint=_FLAG_HINTS["--budget"])
    items = comma_items(args.dtype)
    if items is None:
        raise RaspError(f"--dtype {args.dtype}: an empty dtype between commas",
                        hint="float64, float32, bfloat16 or float16, or a comma-separated list")
    dtypes = list(dict.fromkeys(d for d in items if d))  # each once
    if args.lengths is not None:
        args.lengths = list(dict.fromkeys(args.lengths))
    if not dtypes:
        raise RaspError("--dtype is empty", hint="float64, float32, bfloat16 or float16, or a comma-separated list")
    for d in dtypes:
        if d not in DTYPES:
            raise RaspError(f"--dtype {d}: not a dtype the models run in",
                            hint="float64, float32, bfloat16 or float16, or a comma-separated list")
    try:
        device = resolve_device(args.device)  # unknown, or CUDA where there is none: a RaspError
    except RaspError as exc:
        raise RaspError(f"--device: {exc.message}", hint=exc.hint) from None
    if not args.target:
        raise RaspError("the program or model directory to verify is an empty name",
                        hint="rasp verify programs/dyck1.cr, or a directory written by rasp compile -o DIR")
    target = Path(args.target)
    try:
        is_dir = target.is_dir()
        model_file = target.is_file() and target.name in ("config.json", "model.safetensors") and \
            (target.parent / "config.json").is_file() and (target.parent / "model.safetensors").is_file()
    except OSError:  # a name too long, a folder that cannot be searched: loading the program says so
        is_dir = model_file = False
    if model_file:
        raise RaspError(f"{args.target} is one file of a compiled model", hint=f"verify the directory: rasp verify {target.parent}")
    if is_dir:
        if args.alphabet:
            raise RaspError("--alphabet cannot change a compiled model", hint="recompile: rasp compile PROGRAM --alphabet ... -o DIR")
        model = compiler.load(target)
    else:
        from compiler.bounded import compile_raspl  # plain C-RASP: compiler.compile; RASP-L: its lowering

        try:
            model = compile_raspl(load_program(args.target, args.alphabet))
        except OutsideClassError as exc:
            # a RASP-L program that does not lower, or one outside the class (bounded mode takes both):
            # here --max-length is find-limit's, so say how to make a bounded model instead
            alphabet = f" --alphabet {shlex.quote(args.alphabet)}" if args.alphabet else ""
            exc.hint = (f"compile a bounded model first (exact on sequences of at most N tokens): rasp compile "
                        f"{args.target}{alphabet} --max-length N -o DIR, then rasp verify DIR")
            raise
    program = model.program
    if model.kind == "generate":
        check_max_new(args.max_new, args.samples, "--max-new")
    note_unused_max_new(args.max_new, model.kind)
    task = V.task_for(program, loaded=model.loaded_from is not None) if args.inputs == "task" else None
    sampler = f"task {task.name}" if task is not None else "uniform over all symbols (special tokens included)"
    rng = np.random.default_rng(args.seed)
    rows, limits = [], []
    if task is not None and V.sampler_alphabet(task, program) is not None and not task.variable_alphabet:
        raise RaspError(f"task {task.name} has a fixed alphabet ({listing(task.alphabet)}): its sampler cannot make "
                        f"inputs over this model's alphabet ({listing(program.alphabet)})",
                        hint="verify with --inputs uniform")
    tmax = V.task_max_length(task, program)
    if tmax is not None and tmax < 1:
        raise RaspError(f"task {task.name} has no input over this model's alphabet ({listing(program.alphabet)})",
                        hint="verify with --inputs uniform, or compile over a larger --alphabet")
    bound = max_length_of(model)  # a bounded RASP-L model
    if bound:
        tmax = bound if tmax is None else min(tmax, bound)
        if not start_given and args.start > bound:  # the search starts at the bound itself, not past it
            args.start = min(bound, args.max_length or bound)
    if args.max_length is not None and args.max_length < args.start:  # (after the bound lowered --start)
        raise RaspError(f"--max-length {args.max_length} is below --start {args.start}: find-limit would test nothing",
                        hint="give a --max-length of at least --start")
    if args.lengths is None:  # the defaults, inside a bounded model's bound
        args.lengths = [16, 256, 4096] if not bound else sorted({max(1, bound // 4), max(1, bound // 2), bound})
    max_len = min((x for x in (args.max_length, bound) if x), default=None)  # find-limit's last length
    skipped = []
    interrupted = False

    def refuse_if_too_big(n: int, dt: str) -> None:
        need = V.estimate_bytes(model, n, args.samples, dt, args.backend)
        free = V.free_memory(device)
        if need > free:  # an analytic bound (1.4 to 7 times the measured peak): refuse only what cannot fit
            raise RaspError(f"--lengths {n}: {args.samples} inputs of {n:,} tokens would need about "
                            f"{need / 2**30:.1f} GiB, and {free / 2**30:.1f} GiB is free",
                            hint="use shorter --lengths or fewer --samples; --find-limit stops before "
                            "memory runs out")

    for dt in dtypes:  # every row first: a refusal after rows were measured threw them away
        for n in args.lengths:
            if tmax is None or n <= tmax:
                refuse_if_too_big(n, dt)
    try:
        for dt in dtypes:
            if dt not in model.exact_dtypes and not args.json:
                print(f"note: {dt} cannot run this model exactly (a weight, or a sum a head or an MLP neuron forms, needs "
                      f"more significant bits; exact in {', '.join(model.exact_dtypes) or 'no dtype'}): its rows measure that rounding")
            for n in args.lengths:
                if tmax is not None and n > tmax:
                    skipped.append(n)
                    continue
                refuse_if_too_big(n, dt)  # again: the free memory may have changed since
                try:
                    rows.append(V.verify_length(model, task, n, args.samples, rng, device=device, dtype=dt,
                                                backend=args.backend, max_new=args.max_new))
                except (MemoryError, V.torch.cuda.OutOfMemoryError):
                    raise RaspError(f"--lengths {n}: out of memory for {args.samples} inputs of {n:,} tokens",
                                    hint="use shorter --lengths or fewer --samples; --find-limit stops before "
                                    "memory runs out") from None
                if not args.json:
                    _print_row(rows[-1], header=len(rows) == 1, model=model, target=args.target, sampler=sampler)
            if args.find_limit:
                def show(r):  # each step as it finishes: a search runs for up to --budget seconds per dtype
                    if not args.json:
                        _print_row(r, header=len(rows) == 1, model=model, target=args.target, sampler=sampler)

                limits.append(V.find_limit(model, task, dt, samples=args.samples, rng=rng, device=device,
                                           backend=args.backend, start=args.start, budget_s=args.budget,
                                           max_length=max_len, max_new=args.max_new, rows=rows, on_row=show,
                                           done={r.length: r for r in rows if r.dtype == V.dtype_name(dt)}))
    except KeyboardInterrupt:  # Ctrl-C: report what was measured (the rows so far), exit 130
        if not rows:
            raise
        interrupted = True
    if not rows:
        raise RaspError(f"nothing was verified: every length is longer than "
                        f"{'the bounded model' if bound and tmax == bound else 'the task'} allows ({tmax})",
                        hint=f"give --lengths up to {tmax}" + ("" if bound and tmax == bound else
                                                               ", or --inputs uniform for any length"))
    exact = all(r.agree == 1.0 for r in rows)
    if args.json:
        print(json.dumps({
            "target": args.target, "compiler_version": model.config.get("compiler_version"), "size": model.size, "output_kind": model.kind, "sampler": sampler,
            "device": str(device), "dtypes": dtypes, "rows": [r.to_json() for r in rows], "exact": exact,
            "limits": limits, "skipped_lengths": sorted(set(skipped)), "interrupted": interrupted,
            "exact_sum_positions": model.exact_sum_positions, "exact_tokens": model.exact_tokens(),
        }))
    else:
        scan_limit = model.exact_sum_positions.get("scan")
        def extent(n: int) -> int:  # positions a row's sequences can reach: BOS, prompt, generated tokens
            if model.kind != "generate":
                return n + 1
            cap = default_max_new(n) if args.max_new is None else args.max_new
            return n + 1 + (min(cap, bound - n) if bound else cap)

        def are(lengths) -> str:
            return f"length{'s' if len(lengths) > 1 else ''} {', '.join(map(str, lengths))} " \
                   f"{'are' if len(lengths) > 1 else 'is'} beyond it"

        beyond = sorted({r.length for r in rows if scan_limit is not None and extent(r.length) > scan_limit})
        if beyond:
            print(f"note: {sum_limit_text(scan_limit)}: {are(beyond)}")
        from compiler.weights import QUOTIENT_POSITIONS

        quotient = QUOTIENT_POSITIONS["float16"]
        half = sorted({r.length for r in rows if r.dtype == "float16" and extent(r.length) > quotient
                       and model.exact_positions("float16") == quotient})
        if half:
            print(f"note: in float16 a uniform head's smallest quotient, (1/2)/(t + 1), rounds to 0 from "
                  f"{quotient + 1:,} positions on: the model is exact on inputs of up to {quotient - 1:,} "
                  f"tokens; {are(half)}")
        if skipped:
            why = "the model's bound (compiled with --max-length)" if bound and tmax == bound else "the task's longest input"
            print(f"skipped lengths {', '.join(map(str, sorted(set(skipped))))}: longer than {why} ({tmax})")
        for lim in limits:
            why = lim["stopped"]
            if "memory" in lim:
                m = lim["memory"]
                why += (f": length {m['length']:,} would need about {m['need_bytes'] / 2**30:.2f} GiB of "
                        f"{m['memory']} memory, {m['free_bytes'] / 2**30:.2f} GiB free")
            longest = "none" if lim["longest_exact"] is None else f"{lim['longest_exact']:,}"
            claim = lim.get("exact_tokens")
            past = ("" if claim is None or lim["longest_exact"] is None or extent(lim["longest_exact"]) <= claim + 1
                    else f"; on sampled inputs: the weights are exact on every input only up to {claim:,} "
                         f"token{'' if claim == 1 else 's'}")
            print(f"find-limit {lim['dtype']}: longest exact length {longest} "
                  f"(stopped: {why}; {lim['seconds']:.1f} s{past})")
        print("exact: yes" if exact else "exact: NO")
        if interrupted:
            print("interrupted: the rows above are the lengths measured before Ctrl-C")
    if interrupted:
        return 130
    return 0 if exact else 1


def _print_row(r, *, header: bool, model, target: str, sampler: str) -> None:
    if header:
        print(f"{target}: {model.summary()}; inputs: {sampler}")
        print(f"{'length':>9} {'dtype':>9} {'device':>7} {'samples':>7} {'agree':>7} {'model s':>9} {'interp s':>9} "
              f"{'peak MiB':>9}")
    agree = f"{round(r.agree * r.samples)}/{r.samples}"
    print(f"{r.length:>9} {r.dtype:>9} {r.device:>7} {r.samples:>7} {agree:>7} {r.model_seconds:>9.3f} "
          f"{r.interp_seconds:>9.3f} {'-' if r.peak_bytes is None else f'{r.peak_bytes / 2**20:.0f}':>9}"
          + ("" if r.example is None else f"   first disagreement: {' '.join(r.example)}"))
