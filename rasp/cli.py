"""The ``rasp`` command line: one subcommand per module in :mod:`rasp.commands`.

Exit codes: 0 success, 2 user error (a located message on stderr; with ``--json`` also
``{"error": {...}}`` on stdout), 1 internal error or a failed verification (each command documents which).
"""
from __future__ import annotations

import argparse
import errno
import importlib
import json
import os
import pkgutil
import sys
import traceback

from . import __version__, commands
from .errors import RaspError


class _Parser(argparse.ArgumentParser):
    """argparse's parser, remembering the message of a usage error (``main`` prints it as JSON for
    ``--json``; argparse itself only writes usage text to stderr). Subparsers are made of this class
    too (``add_subparsers`` uses the parent's class)."""

    usage_error: tuple[str, str, str] | None = None  # (message, usage, prog) of the parser that failed

    def error(self, message: str):  # type: ignore[override]
        _Parser.usage_error = (message, self.format_usage().strip(), self.prog)
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rasp",
        description="C-RASP / RASP-L programs: run, check length-generalization guarantees, "
        "compile to transformer weights, verify, learn.",
    )
    parser.add_argument("--version", action="version", version=f"rasp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(sub)
    return parser


def _subparser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser | None:
    """The parser of command ``name`` (its usage is the one to show for its arguments)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            return action.choices[name]
    return None


def _tolerant_output() -> None:
    """Symbols the terminal's encoding cannot show (a C locale with UTF-8 coercion turned off) are
    printed as backslash escapes, not an internal error after half the output."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure") and (stream.encoding or "").lower().replace("-", "") != "utf8":
            try:
                stream.reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a stream that cannot change (already closed, detached)
                pass


def main(argv: list[str] | None = None) -> int:
    _Parser.usage_error = None
    if sys.stdout is None:  # started with stdout closed (`rasp run ... >&-`): print() would drop every line
        _emit("rasp: error: cannot write the output: standard output is closed", sys.stderr)
        return 1
    _tolerant_output()
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args, extra = parser.parse_known_args(words)
        has_tokens = isinstance(getattr(args, "tokens", None), list)
        # argparse cannot take positional tokens after an option (`run P --alphabet 5 a b`): a
        # command with a `tokens` list gets the leftover non-option words, and every word after `--`,
        # which marks tokens that look like options (`run P --json -- -1 a`); anything else is an error
        if has_tokens and "--" in words and "--" in words[words.index("--") + 1:]:
            # argparse and the split below each drop a `--`: a token that is exactly `--` would vanish
            (_subparser(parser, getattr(args, "command", None)) or parser).error(
                "a token that is exactly -- cannot be given on the command line (give such inputs on stdin)")
        if extra and has_tokens:
            cut = extra.index("--") if "--" in extra else len(extra)
            if not any(x.startswith("-") for x in extra[:cut]):
                args.tokens += extra[:cut] + extra[cut + 1:]
                extra = []
        if extra:
            command = _subparser(parser, getattr(args, "command", None))
            tip = " (tokens that begin with '-' go after --)" if has_tokens else ""
            (command or parser).error(f"unrecognized arguments: {' '.join(extra)}{tip}")
    except SystemExit as exc:  # argparse: usage errors are user errors (exit 2), --help is 0
        # argparse takes unambiguous prefixes of a flag (--js); none of --json's begins another flag;
        # after `--` the words are tokens, not options
        opts = words[: words.index("--")] if "--" in words else words
        if exc.code == 2 and _Parser.usage_error and any(len(w) > 3 and "--json".startswith(w.partition("=")[0])
                                                   for w in opts):  # (--json=x: argparse's error, as JSON too)
            message, usage, prog = _Parser.usage_error
            print(json.dumps({"error": {"message": message, "file": None, "line": None, "column": None,
                                        "hint": usage, "text": f"{usage}\n{prog}: error: {message}"}}))
        return int(exc.code or 0)
    if not getattr(args, "command", None):  # a usage error: on stderr, as argparse's are
        parser.print_help(sys.stderr)
        return 2
    try:
        try:
            return int(args.func(args) or 0)
        except MemoryError as exc:  # the input's size, not a bug in rasp
            raise _out_of_memory(args, exc) from None
        except RuntimeError as exc:
            if type(exc).__name__ != "OutOfMemoryError":  # torch's (CUDA), not a MemoryError
                raise
            raise _out_of_memory(args, exc) from None
    except RaspError as exc:
        _emit(exc.render(), sys.stderr)
        # scripts reading --json get the error as JSON on stdout too (subcommands of `tasks` keep their
        # own flag: `sample_json`, `show_json`)
        if any(v is True for k, v in vars(args).items() if k == "json" or k.endswith("_json")):
            _emit(json.dumps({"error": exc.to_dict()}), sys.stdout)
        return 2
    except KeyboardInterrupt:
        _emit("interrupted", sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        if exc.errno in _OUTPUT_ERRNOS:  # a full disk, a device behind stdout: not a bug in rasp
            what = f"{exc.filename}: " if exc.filename else "cannot write the output: "  # (no file: stdout)
            _emit(f"rasp: error: {what}{exc.strerror or exc}", sys.stderr)
            return 1
        return _internal(exc)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: exit 1, not a traceback
        return _internal(exc)


def _out_of_memory(args, exc: BaseException) -> RaspError:
    detail = str(exc).splitlines()[0] if str(exc) else ""
    return RaspError(f"out of memory: `rasp {args.command}` needed more memory than is free here"
                     f"{f' ({detail})' if detail else ''}", hint="try shorter inputs, or fewer at once")


#: write errors that come from where the output goes, not from rasp
_OUTPUT_ERRNOS = (errno.ENOSPC, errno.EIO, errno.EBADF, errno.EDQUOT, errno.EFBIG)


def _internal(exc: BaseException) -> int:
    if os.environ.get("RASP_DEBUG"):
        traceback.print_exc()
    _emit(f"internal error (a bug in rasp): {type(exc).__name__}: {exc}", sys.stderr)
    _emit("hint: rerun with RASP_DEBUG=1 for the traceback, and report it", sys.stderr)
    return 1


def _emit(text: str, stream) -> None:
    """Print to a stream that may be gone (stderr closed: None; stdout on a full device): the exit
    status still says what happened."""
    if stream is None:
        return
    try:
        print(text, file=stream, flush=True)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
