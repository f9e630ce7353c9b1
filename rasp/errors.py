"""User-facing errors: a message located in the source, rendered with a caret and a hint.

Every mistake a user can make (syntax, unknown name, type mismatch, token outside the alphabet,
empty input) is a :class:`RaspError`. The CLI prints :meth:`RaspError.render` and exits 2.
"""
from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """A source range; lines and columns are 1-based, ``end_column`` exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int

    def __repr__(self) -> str:  # keeps AST reprs short
        return f"Span({self.line}:{self.column})"


def loads_json(text: str):
    """``json.loads``, with JSON nested too deeply for it (``[`` 10^5 times: a RecursionError) a
    ``ValueError`` like any other malformed JSON, for the loaders that turn those into user errors."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def read_json_file(path, hint: str | None = None):
    """A JSON file's value (a leading byte-order mark is allowed, as in program files). Malformed JSON
    is a :class:`RaspError` located at the line and column the parser stopped at, with ``hint``;
    a file that cannot be read or decoded, or JSON nested too deeply, is one without a location."""
    try:
        text = open(path, encoding="utf-8-sig").read()
    except (OSError, UnicodeDecodeError) as exc:
        raise RaspError(f"{path}: not readable JSON ({getattr(exc, 'strerror', None) or exc})", hint=hint) from None
    try:
        return loads_json(text)
    except json.JSONDecodeError as exc:
        span = Span(exc.lineno, exc.colno, exc.lineno, exc.colno + 1)
        raise RaspError(f"not readable JSON: {exc.msg}", span, hint, source=text, filename=str(path)) from None
    except ValueError as exc:
        raise RaspError(f"{path}: not readable JSON ({exc})", hint=hint) from None


def quoted(value, limit: int = 40) -> str:
    """User text (or a value read from a file) for a message: quoted and escaped (control and bidi
    characters as escapes, so they cannot reorder the terminal line), and cut after ``limit``
    characters (a 100,000-character token was repeated whole; a 400-digit version number)."""
    if not isinstance(value, str):
        text = repr(value)
        return text if len(text) <= limit else text[:limit - 3] + "..."
    if len(value) <= limit:
        return repr(value)
    shown = repr(value[:limit])  # quoted with ' or " (whichever repr chose): close it with the same
    return f"{shown[:-1]}...{shown[-1]} ({len(value):,} characters)"


def listing(symbols, limit: int = 30) -> str:
    """An alphabet for a message: the first ``limit`` symbols and how many there are in all."""
    symbols = list(symbols)
    if len(symbols) <= limit:
        return " ".join(symbols)
    return " ".join(symbols[:limit]) + f" ... ({len(symbols):,} symbols)"


def source_lines(source: str | None) -> list[str]:
    """The lines of a text as spans number them: split at ``\n`` only (``str.splitlines`` also splits
    at form feeds, U+2028 and others, and the excerpt under a message was then another line), a
    CRLF line without its ``\r``."""
    return [line[:-1] if line.endswith("\r") else line for line in (source or "").split("\n")]


#: the most characters of a line shown on each side of an error's place (a token at column 600,001
#: of an input line once printed the whole line and as much caret padding)
EXCERPT_CONTEXT = 60


def caret_lines(source: str | None, span: "Span | None", indent: str = "  ") -> list[str]:
    """The line of ``source`` a span starts on (a window of it when long) and a caret line under the
    span's place; [] when the span or the line is not there."""
    lines = source_lines(source)
    if span is None or not 1 <= span.line <= len(lines):
        return []
    text = lines[span.line - 1]
    start = max(span.column - 1, 0)
    width = max(span.end_column - span.column if span.end_line == span.line else len(text) - start, 1)
    text, start, width = _excerpt(text, start, width)
    shown, cols = _display(text)
    # the caret goes under the span's display columns: wide characters take 2, combining ones 0,
    # a tab up to the next multiple of 8 (expanded here, in the line too, so that both agree)
    lo = cols[min(start, len(text))] + max(start - len(text), 0)
    hi = cols[min(start + width, len(text))] + max(start + width - len(text), 0)
    return [indent + shown, indent + " " * lo + "^" * max(hi - lo, 1)]


#: shown as escapes in a quoted source line, with control characters, line or paragraph separators
#: and lone surrogates (undecodable bytes): they would reorder, hide or break what the terminal prints
_INVISIBLE = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
TAB_STOP = 8


def _display(text: str) -> tuple[str, list[int]]:
    """A source line as printed under a message (tabs expanded, control and bidi characters as
    escapes) and the display column where each of its characters starts (one entry more: the end),
    by the terminal widths of :func:`wcwidth.wcwidth`."""
    from wcwidth import wcwidth

    out, cols, col = [], [], 0
    for c in text:
        cols.append(col)
        if c == "\t":
            piece = " " * (TAB_STOP - col % TAB_STOP)
            w = len(piece)
        else:
            w = -1 if c in _INVISIBLE or unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") else wcwidth(c)
            piece = c if w >= 0 else c.encode("unicode_escape").decode("ascii")
            w = w if w >= 0 else len(piece)
        out.append(piece)
        col += w
    cols.append(col)
    return "".join(out), cols


def _excerpt(text: str, start: int, width: int) -> tuple[str, int, int]:
    """(the part of a long line around columns start .. start + width, the place in it, its width)."""
    width = min(width, 2 * EXCERPT_CONTEXT)
    lo = max(start - EXCERPT_CONTEXT, 0)
    hi = min(start + width + EXCERPT_CONTEXT, len(text))
    if lo == 0 and hi == len(text):
        return text, start, width
    left = "..." if lo > 0 else ""
    return left + text[lo:hi] + ("..." if hi < len(text) else ""), start - lo + len(left), width


class RaspError(Exception):
    """A user error with a location. ``source`` and ``filename`` are filled in by whoever knows them."""

    def __init__(
        self,
        message: str,
        span: Span | None = None,
        hint: str | None = None,
        *,
        source: str | None = None,
        filename: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.span = span
        self.hint = hint
        self.source = source
        self.filename = filename

    def located(self, source: str | None, filename: str | None) -> "RaspError":
        """Attach the text and file name the span refers to (keeps any already set)."""
        if self.source is None:
            self.source = source
        if self.filename is None:
            self.filename = filename
        return self

    @property
    def line(self) -> int | None:
        return self.span.line if self.span else None

    @property
    def column(self) -> int | None:
        return self.span.column if self.span else None

    def to_dict(self) -> dict:
        """The error for ``--json`` output: message, file, line, column (1-based, or null), hint, and
        the rendered text with its caret."""
        return {"message": self.message, "file": self.filename, "line": self.line, "column": self.column,
                "hint": self.hint, "text": self.render()}

    def render(self) -> str:
        # no file and no place: an error about options or inputs as a whole, reported by the tool
        name = self.filename or ("<input>" if self.span is not None or self.source else "rasp")
        if self.span is None:
            out = [f"{name}: error: {self.message}"]
        else:
            out = [f"{name}:{self.span.line}:{self.span.column}: error: {self.message}"]
            out += caret_lines(self.source, self.span)
        if self.hint:
            out.append(f"hint: {self.hint}")
        return "\n".join(out)

    def to_json(self) -> dict:
        return {
            "error": self.message,
            "file": self.filename,
            "line": self.line,
            "col": self.column,
            "hint": self.hint,
        }

    def __str__(self) -> str:
        return self.render()


class OutsideClassError(RaspError):
    """A construct outside C-RASP[periodic, local] met by the compiler (:func:`compiler.graph.check_class`):
    bounded mode (``--max-length N``) compiles some of these, so callers tell it from other errors."""


class EmptyAlphabetError(RaspError):
    """A program with no data symbols, declared or written, and none given: the text may be fine
    (``load(path, alphabet=...)`` and ``--alphabet`` supply them), so callers that only want the
    text's own errors tell it from them by this class."""


class TooLargeError(RaspError):
    """A program the tool refuses for its size, not its meaning: RASP-L lowering tells such a refusal
    of its lowered program from a lowering bug by this class."""


class MagnitudeError(TooLargeError):
    """A count expression whose value could leave exact 64-bit arithmetic
    (:func:`rasp.expand.check_magnitudes`)."""


class ExpansionError(TooLargeError):
    """A program whose families expand past :data:`rasp.expand.EXPANSION_CAP` copies."""


def not_utf8(data: bytes, start: int, message: str, *, filename: str, hint: str, first_line: int = 1) -> RaspError:
    """The error for ``data`` (text read as bytes, its first line numbered ``first_line``) whose byte
    at ``start`` is not UTF-8: located at that byte's line and column (characters before it on its
    line, each undecodable byte counted as one), with the text decoded leniently for the caret."""
    # lines end as text mode reads them (\r\n, \r, \n: a CR-only file was one line here)
    before = data[:start].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    line_start = before.rfind(b"\n") + 1
    col = len(before[line_start:].decode("utf-8", errors="replace")) + 1
    line = first_line + before.count(b"\n")
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    return RaspError(message, Span(line, col, line, col + 1), hint,
                     source="\n" * (first_line - 1) + text, filename=filename)
