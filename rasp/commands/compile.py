"""``rasp compile PROGRAM [-o DIR]``: compile a C-RASP[periodic, local] program to transformer weights."""
from __future__ import annotations

import argparse
import json

from ..errors import RaspError
from ._common import SUM_NOTE_POSITIONS, add_alphabet_option, add_json_option, load_program, sum_limit_text


def register(sub) -> None:
    p = sub.add_parser(
        "compile",
        help="compile a program to transformer weights (exact at every length; with --max-length N, up to N)",
        description="Compile PROGRAM (C-RASP[periodic, local]) into a causal transformer whose outputs equal "
        "the interpreter's at every length. Prints the size (layers, heads, d_model, MLP width, parameters); "
        "with -o DIR writes DIR/model.safetensors and DIR/config.json (architecture, residual labels, "
        "alphabet, output kind, source program). Programs outside the class are an error that names the "
        "offending span (see rasp check), unless --max-length N is given: then a RASP-L program that does not "
        "lower, or a program with guards or pos[...] of absolute positions, compiles to a model exact on "
        "sequences of at most N tokens.",
    )
    p.add_argument("program", help="a .cr or .rasp file")
    p.add_argument("-o", "--output", metavar="DIR", help="write model.safetensors and config.json to DIR")
    p.add_argument("--max-length", type=int, metavar="N",
                   help="programs outside C-RASP[periodic, local] (RASP-L that does not lower, guards or pos[...] "
                   "of absolute positions): compile a bounded model, exact on sequences of at most N tokens "
                   "(absolute position features up to N)")
    add_alphabet_option(p)
    add_json_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import compiler  # torch is imported only when a command needs it

    from compiler.bounded import compile_raspl, max_length_of

    if args.max_length is not None and args.max_length < 1:
        raise RaspError("--max-length must be at least 1",
                        hint="the longest sequence (tokens) a bounded RASP-L model must be exact on, e.g. --max-length 64")
    if args.output is not None and not args.output.strip():
        raise RaspError("-o is empty", hint="name the directory to write: -o DIR")
    program = load_program(args.program, args.alphabet)
    # (a program outside the class: its error says that --max-length N would compile a bounded model)
    model = compile_raspl(program, max_length=args.max_length)  # plain C-RASP: compiler.compile
    bound = max_length_of(model)
    files = []
    if args.output:
        path = model.save(args.output)
        files = [str(path / "model.safetensors"), str(path / "config.json")]
    size = model.size
    if args.json:
        print(json.dumps({"program": args.program, **size, "compile_seconds": round(model.compile_seconds, 6),
                          "compile_passes_s": {k: round(v, 6) for k, v in model.compile_passes.items()},
                          "output_kind": model.kind, "files": files, "max_length": bound,
                          "exact_dtypes": model.exact_dtypes, "exact_sum_positions": model.exact_sum_positions,
                          "exact_tokens": model.exact_tokens(),
                          # the graph lifted from this many placeholder symbols' (compiler.symmetry), or null
                          "lifted_from": model.config.get("lifted_from")}))
    else:
        print(f"{args.program}: {model.summary()} (compiled in {model.compile_seconds:.3f} s)")
        inexact = [d for d in ("float32", "bfloat16", "float16") if d not in model.exact_dtypes]
        if inexact:
            print(f"note: {', '.join(inexact)} cannot run this model exactly (a weight, or a sum a head or an MLP "
                  f"neuron forms, needs more significant bits): the model is exact in "
                  f"{', '.join(model.exact_dtypes) or 'no dtype'} only")
        scan_limit = model.exact_sum_positions.get("scan")
        if scan_limit is not None and scan_limit < SUM_NOTE_POSITIONS:
            print(f"note: {sum_limit_text(scan_limit)}")
        if bound is not None:
            print(f"bounded model: exact on sequences of at most {bound} tokens, no claim beyond (see rasp check)")
        elif args.max_length is not None:
            print(f"note: --max-length {args.max_length} was not needed: the program compiles to a model exact at "
                  "every length")
        if files:
            print(f"wrote {files[0]} and {files[1]}")
    return 0
