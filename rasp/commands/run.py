"""``rasp run PROGRAM [TOKENS...]``: run a program on inputs and print its output."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import RaspError
from ..program import check_max_new, generation_limits
from ..trace import trace_html, trace_text
from ._common import (add_alphabet_option, add_json_option, encode_located, load_program, note_unused_max_new,
                      read_inputs)


def register(sub) -> None:
    p = sub.add_parser(
        "run",
        help="run a program on inputs",
        description="Run PROGRAM on TOKENS (whitespace-separated), or on one input per line of stdin "
        "(lines starting with // are skipped, unless a symbol of the alphabet starts with //). Acceptors "
        "print accept/reject, generators the generated continuation, character predictors the allowed "
        "symbols at every position.",
    )
    p.add_argument("program", help="a .cr or .rasp file")
    p.add_argument("tokens", nargs="*", default=[],
                   help="one input; without it, inputs are read from stdin; tokens that begin with '-' go after --")
    add_json_option(p)
    add_alphabet_option(p)
    p.add_argument("--trace", metavar="FILE", help="write every definition at every position to FILE (.html or .txt)")
    p.add_argument("--max-new", type=int, default=None,
                   help="generators: stop after this many tokens (default: 2 * input length + 8); a "
                   "generation that reaches it is flagged (a note on stderr, \"truncated\": true in --json)")
    p.set_defaults(func=run)


def format_output(kind: str, output) -> str:
    if kind == "accept":
        return "accept" if output else "reject"
    if kind == "generate":
        return " ".join(output) if output else "(nothing)"
    return " ".join("{" + ",".join(s) + "}" for s in output)


def run(args: argparse.Namespace) -> int:
    program = load_program(args.program, args.alphabet)
    if args.trace is not None and Path(args.trace).suffix.lower() not in (".html", ".htm", ".txt"):
        raise RaspError(f"--trace {args.trace}: the file must end in .html or .txt",
                        hint="--trace trace.html (a table per input) or --trace trace.txt")
    if args.max_new is not None and args.max_new < 0:
        raise RaspError("--max-new must be at least 0", hint="the most tokens a generator may add; 0 generates none")
    inputs, labels = [], []
    # a symbol that begins with // makes such lines inputs, not comments
    comments = not any(s.startswith("//") for s in program.symbols)
    for toks, name, line_no, cols, text in read_inputs(args.tokens, comments):
        encode_located(program, toks, name, line_no, cols, text)  # located alphabet errors
        inputs.append(toks)
        labels.append(f"{name} line {line_no}" if name == "<stdin>" else "input")
    if not inputs:
        raise RaspError("empty input: no tokens on the command line and no input lines on stdin",
                        hint="rasp run PROGRAM a b c   or   echo 'a b c' | rasp run PROGRAM")
    if program.output_kind == "generate":
        check_max_new(args.max_new, len(inputs), "--max-new")
    note_unused_max_new(args.max_new, program.output_kind)
    outputs = program.run_batch(inputs, max_new=args.max_new)
    if args.trace is not None:  # written first: a trace that cannot be written is an error before any output
        path = Path(args.trace)
        generated = outputs if program.output_kind == "generate" else None
        text = trace_text(program, inputs, labels=labels, generated=generated) if path.suffix.lower() == ".txt" \
            else trace_html(program, inputs, title=f"trace of {args.program}", labels=labels, generated=generated)
        try:
            path.write_text(text, encoding="utf-8")  # the HTML says utf-8, whatever the locale
        except OSError as exc:
            raise RaspError(f"cannot write the trace to {path}: {exc.strerror}",
                            hint="check that the folder exists and is writable") from None
    cut = 0  # generations that reached the cap: more tokens might have followed
    caps = generation_limits(inputs, args.max_new)
    for toks, out, cap in zip(inputs, outputs, caps):
        record = {"tokens": toks, "output": out, "kind": program.output_kind}
        if program.output_kind == "generate":
            record["truncated"] = len(out) >= cap
            cut += record["truncated"]
        if args.json:
            print(json.dumps(record))
        else:
            print(f"{' '.join(toks)}\t{format_output(program.output_kind, out)}")
    if cut:
        print(f"note: {cut} of {len(inputs)} generation{'s' if len(inputs) > 1 else ''} reached the cap of "
              f"{'--max-new' if args.max_new is not None else 'the default 2n + 8'} tokens: more may follow "
              "(\"truncated\": true in --json)", file=sys.stderr)
    return 0
