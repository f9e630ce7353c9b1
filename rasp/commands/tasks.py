"""``rasp tasks``: the task registry (:mod:`rasp.tasks`).

* ``rasp tasks``: a table of every task (program, published label, source); ``--json``: a list of
  objects (``name``, ``kind``, ``program``, ``alphabet``, ``published_in_class``, ``published_nope``,
  ``citation``, ``statement``, ``published_accuracy``, ...);
* ``rasp tasks show NAME``: one task in full;
* ``rasp tasks sample NAME --length N --count K --seed S [--alphabet ...]``: random inputs, one per
  line in the format ``rasp run`` reads; ``--json``: one object per line with ``tokens`` and the
  reference output ``target``.
"""
from __future__ import annotations

import argparse
import json
import re
import sys

import numpy as np

from .. import tasks as T
from ..errors import RaspError
from ..expand import parse_alphabet_option
from ..memory import free_host_bytes
from ._common import utf8_arg


def register(sub) -> None:
    p = sub.add_parser(
        "tasks",
        help="list the tasks (seed retrieval/copying, Huang et al.); sample inputs with reference outputs",
        description="Without a subcommand: a table of every registered task with its program, the published "
        "theory label (in C-RASP[periodic, local] or not) and the source. 'rasp tasks sample NAME' prints "
        "random inputs in the format 'rasp run' reads; 'rasp tasks show NAME' prints one task in full.",
    )
    p.add_argument("--json", action="store_true", help="print JSON: a list of task objects")
    sp = p.add_subparsers(dest="tasks_command", metavar="SUBCOMMAND")

    s = sp.add_parser("sample", help="random inputs of a task, one per line",
                      description="Random inputs of task NAME, one per line (tokens separated by spaces), "
                      "ready for 'rasp run PROGRAM'. With --json: one object per line with the tokens and "
                      "the reference output (target), as 'rasp run --json' prints outputs.")
    s.add_argument("name", help="the task (see 'rasp tasks')")
    s.add_argument("--length", required=True, metavar="N",
                   help="tokens per input (special tokens included), or a range LO-HI drawn uniformly")
    s.add_argument("--count", type=int, default=1, metavar="K", help="how many inputs (default 1)")
    s.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    s.add_argument("--alphabet", metavar="SYMBOLS", type=utf8_arg,
                   help="another data alphabet: 'a,b,c' or 'a b c', or N for the first N of a-z A-Z 0-9 "
                   "(tasks with a variable alphabet only)")
    s.add_argument("--json", action="store_true", dest="sample_json",
                   help="one JSON object per line: task, length, tokens, target")

    sh = sp.add_parser("show", help="one task in full", description="Every field of task NAME.")
    sh.add_argument("name", help="the task")
    sh.add_argument("--json", action="store_true", dest="show_json", help="print JSON")
    p.set_defaults(func=run)


def _label(v) -> str:
    return {True: "yes", False: "no", None: "?"}[v]


def _rows() -> list[list[str]]:
    rows = []
    for t in T.TASKS.values():
        rows.append([t.name, t.kind, t.program or "-", _label(t.published_in_class), _label(t.published_nope),
                     t.source])
    return rows


HEADER = ["task", "kind", "program", "in class", "NoPE", "source"]


def print_table(out=None) -> None:
    out = out or sys.stdout
    rows = _rows()
    widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(HEADER)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    print(fmt.format(*HEADER).rstrip(), file=out)
    for r in rows:
        print(fmt.format(*r).rstrip(), file=out)


#: the memory one sampled token may take while sampling and printing it: about 40 bytes measured
#: (``rasp tasks sample ur --length 4000000``: 200 MB peak, 44 MB at length 10; dyck1, copy_repeat and
#: addition alike, 2026-11-30), doubled for the JSON text and for samplers not measured
SAMPLE_BYTES_PER_TOKEN = 96
#: ... and for a formal language's, whose reference is the set of symbols allowed after every prefix:
#: 950 bytes per token measured (boolean5, the most symbols, --length 1000000: 948 MB peak; d12 400 MB,
#: tomita3 400 MB, with the samplers' log-count tables; 2026-12-01), doubled
PREDICT_SAMPLE_BYTES_PER_TOKEN = 2048


def _lengths(text: str, rng: np.random.Generator, count: int, task, alphabet) -> list[int]:
    """``count`` lengths drawn uniformly from ``--length`` (N, or LO-HI clipped to the lengths the
    task can sample, with a note on stderr)."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:[-:]\s*(\d+)\s*)?", text)
    if not m:
        raise RaspError(f"--length {text}: give a number N or a range LO-HI", hint="e.g. --length 20 or --length 51-100")
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) else lo
    if hi < lo:
        raise RaspError(f"--length {text}: the range is empty", hint=f"write the smaller length first: --length {hi}-{lo}")
    if hi == lo:  # checked even when --count is 0
        task.check_length(lo, alphabet)
    else:  # a range: the lengths the task has
        ok = task.lengths(lo, hi, alphabet)
        if not ok:
            mn, mx = task.min_length(alphabet), task.max_length(alphabet)
            if mx is not None and mx < mn:  # no input at all over this alphabet: the sampler says why
                task.check_length(lo, alphabet)
            raise RaspError(f"--length {text}: task {task.name} has no inputs of these lengths (its inputs have "
                            f"{f'at least {mn}' if mx is None else f'{mn} to {mx}'} tokens)",
                            hint=f"give lengths from {mn}" + (" on" if mx is None else f" to {mx}"))
        if (ok.start, ok.stop - 1) != (lo, hi):
            print(f"note: --length {text} clipped to {ok.start}-{ok.stop - 1}, the lengths task {task.name} can sample",
                  file=sys.stderr)
            lo, hi = ok.start, ok.stop - 1
    free = free_host_bytes()
    per_token = PREDICT_SAMPLE_BYTES_PER_TOKEN if task.kind == "predict" else SAMPLE_BYTES_PER_TOKEN
    most = free // per_token
    if hi > most:  # before drawing (numpy cannot even draw lengths past 2^63), rather than run for hours
        # and fail (or swap) at the end
        raise RaspError(f"--length {text}: an input of {hi:,} tokens needs about {hi * per_token / 2**30:,.1f} "
                        f"GiB here and {free / 2**30:.1f} GiB are free",
                        hint=f"at most about {most:,} tokens per input on this machine")
    if count * 8 > free // 2:
        raise RaspError(f"--count {count:,}: too many inputs to draw at once on this machine",
                        hint="ask for fewer, and run the command several times with different --seed")
    return [int(x) for x in rng.integers(lo, hi + 1, size=count)]


def run_sample(args: argparse.Namespace) -> int:
    task = T.get(args.name)
    if args.count < 0:
        raise RaspError(f"--count must be at least 0, got {args.count}", hint="how many inputs to print")
    if args.seed < 0:
        raise RaspError(f"--seed must be at least 0, got {args.seed}", hint="any integer from 0 picks the random inputs")
    alphabet = parse_alphabet_option(args.alphabet) if args.alphabet is not None else None  # ("" is an error)
    rng = np.random.default_rng(args.seed)
    lengths = _lengths(args.length, rng, args.count, task, alphabet)  # (refuses what cannot fit in memory)
    for n in lengths:
        s = task.sample(rng, n, alphabet)
        if args.sample_json or args.json:
            print(json.dumps({"task": task.name, "length": n, "tokens": s.tokens, "target": s.target,
                              "kind": task.kind}))
        else:
            print(" ".join(s.tokens))
    return 0


def run_show(args: argparse.Namespace) -> int:
    t = T.get(args.name)
    data = t.to_json()
    if args.show_json or args.json:
        print(json.dumps(data))
        return 0
    for k, v in data.items():
        if k == "published_accuracy":
            v = "; ".join(f"{enc}: " + " ".join("n/a" if a is None else str(a) for a in accs)
                          for enc, accs in v.items()) or "none published"
        elif k == "published_nope" and v is None:
            v = "? (not stated)"
        elif k == "max_length" and v is None:
            v = "any"
        elif isinstance(v, (list, tuple)) and len(v) > 30:
            v = " ".join(map(str, v[:12])) + f" ... ({len(v)} symbols)"
        elif isinstance(v, (list, tuple)):
            v = " ".join(map(str, v))
        print(f"{k}: {v}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.tasks_command == "sample":
        return run_sample(args)
    if args.tasks_command == "show":
        return run_show(args)
    if args.json:
        print(json.dumps([t.to_json() for t in T.TASKS.values()]))
        return 0
    print_table()
    return 0
