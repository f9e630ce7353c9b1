"""``rasp check PROGRAM...``: which length-generalizing fragment each program lies in, and why.

Exit codes: 0 when the analysis ran (whatever the verdicts); 1 with ``--require LEVEL`` when some
program's guarantee is weaker than LEVEL; 2 on user errors (a program that does not parse or type-check:
its located error is printed, the other programs are still checked).
"""
from __future__ import annotations

import argparse
import json
import sys

from ..checker import LEVELS, check, render
from ..errors import RaspError
from ..expand import parse_alphabet_option
from ._common import add_alphabet_option, add_json_option, load_program


def register(sub) -> None:
    p = sub.add_parser(
        "check",
        help="decide which length-generalizing fragment a program lies in",
        description="For each PROGRAM, decide the smallest fragment containing it -- C-RASP (NoPE), "
        "C-RASP[local], C-RASP[periodic], C-RASP[periodic,local], or none -- and the guarantee it "
        "earns (Huang et al. 2025, Theorem 7). Prints the theorem, the structural facts (local "
        "offsets, periods, depth, counting operations, alphabet size), and for programs outside, "
        "every offending relation with its location and the condition of the theorem it breaks.",
    )
    p.add_argument("programs", nargs="+", metavar="PROGRAM", help=".cr or .rasp files")
    add_json_option(p)
    add_alphabet_option(p)
    p.add_argument("--explain", action="store_true",
                   help="also print where each positional feature comes from and the rewritten program "
                   "(the proof of membership: it uses only #P, #[j == i - d] P and periodic pos[...])")
    p.add_argument("--require", choices=LEVELS[:2], metavar="LEVEL",
                   help="exit 1 unless every program's guarantee is LEVEL or stronger "
                   "(guaranteed > conjectured); for other projects' CI")
    p.add_argument("--task", metavar="NAME",
                   help="also print the published result about registered task NAME (by default: the task "
                   "whose bundled program PROGRAM is, if any)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # the options' own errors once, before any program (they were reported once per program file)
    if args.task is not None:
        from .. import tasks

        tasks.get(args.task)
    if args.alphabet is not None:
        parse_alphabet_option(args.alphabet)
    failed_user = False
    short = []
    first = True
    for path in args.programs:
        try:
            program = load_program(path, args.alphabet)
            verdict = check(program, name=path, task=args.task)
        except RaspError as exc:
            print(exc.render(), file=sys.stderr)
            if args.json:  # one JSON line per program, the failing ones included
                print(json.dumps({"program": path, "error": exc.to_dict()}))
            failed_user = True
            continue
        if args.json:
            print(json.dumps(verdict.to_json()))
        else:
            if not first:
                print()
            print(render(verdict, explain=args.explain))
        first = False
        if args.require and not verdict.meets(args.require):
            short.append(path)
    if failed_user:
        return 2
    if short:
        print(f"--require {args.require}: {len(short)} program(s) fall short: {', '.join(short)}", file=sys.stderr)
        return 1
    return 0
