"""Options and helpers shared by several commands."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Iterator

from ..errors import RaspError, not_utf8
from ..expand import parse_alphabet_option
from ..program import Program, load, parse, read_source, token_columns


def add_alphabet_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--alphabet",
        metavar="SYMBOLS",
        type=utf8_arg,
        help="replace the program's data alphabet: 'a,b,c' or 'a b c', or N for the first N of a-z A-Z 0-9",
    )


def add_json_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON (one object per line)")


def load_program(path: str, alphabet: str | None = None) -> Program:
    """Load a program file, applying ``--alphabet`` when given: its families are expanded once, over
    those symbols, so a file without an alphabet line runs with ``--alphabet`` (as the error for an
    empty alphabet advises)."""
    if alphabet is None:
        return load(path)
    symbols = parse_alphabet_option(alphabet)
    text, filename = read_source(path)
    try:
        program = parse(text, filename=filename, alphabet=symbols)  # checked as a declared alphabet
    except RaspError as exc:
        if exc.span is not None:  # the program's own error, or it does not fit the new alphabet: located in it
            raise
        raise RaspError(f"--alphabet: {exc.message}", hint=exc.hint) from None
    special = [s for s in symbols if s in program.special]
    if special:  # the API leaves them out of the data alphabet; on the command line it is a mistake
        raise RaspError(f"--alphabet lists {', '.join(special)}, a special token of {path}",
                        hint="list only data symbols; the program's special tokens are kept as declared")
    return program


STDIN_HINT = "inputs are lines of space-separated tokens in UTF-8"
READ_HINT = "give one input as tokens on the command line, or pipe inputs in, one per line"


def utf8_arg(word: str) -> str:
    """A command-line word as UTF-8 whatever the locale: in an ASCII locale Python hands non-ASCII argv
    bytes over as surrogate escapes ('é' was '\\udcc3\\udca9', not the alphabet's é). A word that
    is not UTF-8 either is left as it is (not in any alphabet, and said so)."""
    if not any("\udc80" <= ch <= "\udcff" for ch in word):
        return word
    try:
        return os.fsencode(word).decode("utf-8")
    except UnicodeDecodeError:
        return word


def read_inputs(tokens: list[str], comments: bool = True) -> Iterator[tuple[list[str], str, int, list[int], str]]:
    """Inputs from the command line (one input) or stdin (one per line; with ``comments``, lines
    that begin with ``//`` are skipped: pass False for an alphabet with a symbol that begins so).

    Yields (tokens, source name, line number, token columns, line text) so that errors can be located.
    """
    if tokens:
        line = " ".join(utf8_arg(t) for t in tokens)  # as UTF-8, like stdin, whatever the locale
        toks, cols = token_columns(line)
        yield toks, "<argv>", 1, cols, line
        return
    for n, line in _stdin_lines():
        line = line.rstrip("\r\n")  # the bytes are read as they are: a CRLF file's lines end in \r\n
        if not line.strip() or (comments and line.lstrip().startswith("//")):
            continue
        toks, cols = token_columns(line)
        yield toks, "<stdin>", n, cols, line


def _stdin_lines() -> Iterator[tuple[int, str]]:
    """(line number, text) per line of stdin, decoded as UTF-8 whatever the locale: the bytes are
    read and decoded here, so a byte that is not UTF-8 is located (line:col) whether Python's text
    layer would have raised (strict) or passed it on as a lone surrogate (a C/POSIX locale's
    ``surrogateescape``, which would then be reported as a token outside the alphabet). A byte-order
    mark before the first line is dropped (program files drop theirs too; columns count without it)."""
    if sys.stdin is None:  # started with stdin closed (`rasp run P <&-`)
        raise RaspError("cannot read standard input: it is closed", hint=READ_HINT)
    buffer = getattr(sys.stdin, "buffer", None)
    try:
        if buffer is None:  # a text stream with no bytes beneath (an embedding program's StringIO)
            yield from _numbered_lines(sys.stdin, "\ufeff", "\n", "\r")
            return
        for n, data in _numbered_lines(buffer, b"\xef\xbb\xbf", b"\n", b"\r"):
            try:
                yield n, data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise not_utf8(data, exc.start, f"standard input is not UTF-8 text (byte 0x{data[exc.start]:02x})",
                               filename="<stdin>", hint=STDIN_HINT, first_line=n) from None
    except OSError as exc:  # stdin opened for writing only (`0>/dev/null`), a device that fails
        raise RaspError(f"cannot read standard input: {exc.strerror or exc}", hint=READ_HINT) from None


def _numbered_lines(chunks, bom, lf, cr):
    """(number, line) of a stream read in \n-ended chunks (text or bytes: ``bom``, ``lf``, ``cr`` of
    that type): a line ends at \n, \r\n or a lone \r, as program files' lines do (CR-only input
    was one line), and a byte-order mark before the first is dropped."""
    n = 0
    for chunk in chunks:
        if n == 0:
            chunk = chunk.removeprefix(bom)
        for line in chunk.removesuffix(lf).removesuffix(cr).split(cr):
            n += 1
            yield n, line


def encode_located(program: Program, toks, name, line_no, cols, line_text):
    """Encode tokens, turning an alphabet error into one located in the input text (the located
    source is built only for an error: building it for every line of a long stdin was quadratic)."""
    try:
        return program.encode(toks)
    except RaspError:
        lines = [""] * (line_no - 1) + [line_text]
        return program.encode(toks, line=line_no, columns=cols, source="\n".join(lines), filename=name)


def require(cond: bool, message: str, hint: str | None = None) -> None:
    if not cond:
        raise RaspError(message, hint=hint)


#: below this many positions the float64 sums' limit is worth a note (2^31: the positions the
#: language's position arithmetic is checked for)
SUM_NOTE_POSITIONS = 2 ** 31


def sum_limit_text(positions: int) -> str:
    """The note for a model whose float64 running sums are exact only up to ``positions`` (BOS
    included: one token fewer)."""
    tokens = max(positions - 1, 0)
    return (f"the program's coefficients and constants are large: a head's running sum stays exact in float64 "
            f"(the scan backend) for sequences of up to {tokens:,} token{'' if tokens == 1 else 's'}; beyond, a "
            "comparison at a tie can round (inputs whose partial sums first grow and then return to the tie)")


def note_unused_max_new(max_new: int | None, kind: str) -> None:
    """``--max-new`` on a program that does not generate: said on stderr, not an error (scripts pass
    one flag set to every program; gpu.sh's find-limit runs do)."""
    if max_new is not None and kind != "generate":
        print(f"note: --max-new applies to generators (output generate); this program's output is {kind}: "
              "it is not used", file=sys.stderr)
