"""User errors: every malformed program gives a located message (FILE:LINE:COL: error: ...), the
source line, a caret under the problem, a hint, and exit code 2; bad inputs are located in the
input; anything unexpected is an internal error with exit code 1 and never a traceback."""
from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import rasp
from rasp.cli import main

ROOT = Path(__file__).resolve().parent.parent
DYCK = str(ROOT / "programs" / "dyck1.cr")


@dataclass(frozen=True)
class Bad:
    name: str
    source: str
    line: int
    col: int
    message: str  # a fragment of the message
    hint: str  # a fragment of the hint
    width: int | None = None  # caret width, when it matters


BAD_PROGRAMS = [
    # ---- syntax
    Bad("missing-operand", 'alphabet a b\nX = #"a" -\nok = X == 0\n', 2, 11, "unexpected end of line",
        "incomplete"),
    Bad("unclosed-paren", 'alphabet a b\nok = (#"a" == 1\n', 2, 16, "unexpected end of line",
        "'(' at column 6 is never closed"),
    Bad("unclosed-guard", 'alphabet a b\nX = #[j == i - 1 "a"\nok = X == 1\n', 2, 18, "unexpected '\"a\"'",
        "'[' at column 6 is not closed", 3),
    # a call in a guard is not an unclosed '[' (helper 70: the hint said "is ']' missing?")
    Bad("call-in-guard", 'alphabet a b\nX = #[j == selector_width(select(tokens, tokens, ==))] "a" > 0\n', 2, 26,
        "unexpected '('", "relate the positions i and j"),
    Bad("side-by-side", 'alphabet a b\nok = #"a" #"b"\n', 2, 11, "unexpected '#'", "operator missing"),
    Bad("predict-count-family", 'alphabet a b\nF[x] = #Q[x]\noutput predict F\n', 3, 16,
        "'output predict' needs a bool family", "'F' is a count family over 1 symbol"),
    # min and max take two arguments: a third or a missing second is not an unclosed '(' (helper 77)
    Bad("max-three", 'alphabet a b\nok = max(1, 2, 3) > 0\n', 2, 14, "unexpected ','", "max(a, max(b, c))"),
    Bad("min-one", 'alphabet a b\nok = min(#"a") > 0\n', 2, 14, "unexpected ')'", "min takes two arguments"),
    Bad("single-amp", 'alphabet a b\nok = "a" & "b"\n', 2, 10, "unexpected character '&'", "&&"),
    Bad("single-pipe", 'alphabet a b\nok = "a" | "b"\n', 2, 10, "unexpected character '|'", "||"),
    Bad("eq-for-compare", 'alphabet a b\nok = #"a" = 1\n', 2, 11, "unexpected '='", "compare with '=='"),
    Bad("eqeq-for-define", 'alphabet a b\nP[x] == Q[x]\n', 2, 7, "unexpected '='", "one '='"),
    Bad("single-quote", "alphabet a b\nok = 'a'\n", 2, 6, "unexpected character", 'double quotes'),
    Bad("unterminated-string", 'alphabet a b\nok = "a\n', 2, 6, "unterminated quoted symbol", "close the quote"),
    Bad("and-word", 'alphabet a b\nok = "a" and "b"\n', 2, 10, "unexpected 'and'", "&&", 3),
    Bad("chained-compare", 'alphabet a b\nok = 0 < #"a" < 3\n', 2, 15, "unexpected '<'", "do not chain"),
    Bad("missing-equals", 'alphabet a b\nok #"a" == 1\n', 2, 4, "unexpected '#'", "NAME = expression"),
    Bad("semicolon", 'alphabet a b\nok = "a" ; X = 1\n', 2, 10, "unexpected character ';'", "one statement per line"),
    Bad("stray-char", 'alphabet a b\nok = #"a" == 1 @\n', 2, 16, "unexpected character '@'", "not part of the language"),
    Bad("division-of-counts", 'alphabet a b\nok = #"a" / 2 == 1\n', 2, 11, "unexpected '/'", "only inside guards"),
    Bad("alphabet-comma", 'alphabet a, b\nok = "a"\n', 1, 11, "unexpected ','", "separated by spaces"),
    Bad("output-no-name", 'alphabet a b\nok = "a"\noutput accept\n', 3, 14, "unexpected end of line",
        "output accept NAME"),
    Bad("keyword-as-name", 'alphabet a b\nexists = #"a" == 1\n', 2, 1, "'exists' is a keyword", "another name", 6),
    Bad("keyword-as-reference", 'alphabet a b\nok = sum > 1\n', 2, 10, "unexpected '>'", "'sum' is a keyword"),
    Bad("product-of-counts", 'alphabet a b\nok = #"a" * #"b" == 1\n', 2, 6, "multiplication needs an integer constant",
        "k * C"),
    # ---- names
    Bad("unknown-name", 'alphabet a b\nCOUNT_A = #"a"\nok = COUNT_B == 1\n', 3, 6, "unknown name 'COUNT_B'",
        "did you mean 'COUNT_A'?", 7),
    # the caret marks the second definition's name, not the whole definition
    Bad("duplicate", 'alphabet a b\nXY = #"a"\nXY = #"b"\nok = XY == 1\n', 3, 1,
        "'XY' is defined twice (first defined on line 2)", "rename", 2),
    # a rebound quantifier variable: the caret marks the inner binding, not the whole any(...)
    Bad("rebound-variable", 'alphabet a b\nok = any(xy, Q[xy] && any(xy, Q[xy]))\n', 2, 27,
        "'xy' is already bound here", "another variable name", 2),
    Bad("quantifier-rebinds-family-variable", 'alphabet a b\nP[x] = all(x, Q[x])\nok = P["a"]\n', 2, 12,
        "'x' is already bound here", "another variable name", 1),
    Bad("builtin-name", 'alphabet a b\n#import pred4\npred4 = #"a" > 0\n', 3, 1, "'pred4' is a built-in predicate name",
        "another name", 5),
    Bad("cycle", 'alphabet a b\nX = Y + 1\nY = X - 1\nok = X == 1\n', 3, 5, "cycle: X -> Y -> X", "depend on it"),
    Bad("self-reference", 'alphabet a b\nX = #(X > 0)\nok = X == 1\n', 2, 7, "cycle: X -> X", "depend on it"),
    Bad("reserved-Q", 'alphabet a b\nQ = "a"\n', 2, 1, "'Q' is reserved", "token test"),
    Bad("bad-import", '#import succ\nok = #"a" == 1\n', 1, 9, "unknown predicate 'succ'", "pred, pred4"),
    Bad("not-imported", 'alphabet a b\nX = #[pred] "a"\nok = X == 1\n', 2, 7, "'pred' is not imported", "#import pred"),
    Bad("unknown-guard-name", 'alphabet a b\nX = #[prev] "a"\nok = X == 1\n', 2, 7, "unknown guard predicate 'prev'",
        "j == i - 1"),
    # ---- families and symbols
    Bad("family-too-many", 'alphabet a b\nP[x] = Q[x]\nok = P["a", "b"]\n', 3, 6, "'P' takes 1 symbol index, got 2",
        "P[x]"),
    Bad("family-no-index", 'alphabet a b\nP[x] = Q[x]\nok = P\n', 3, 6, "'P' takes 1 symbol index, got 0", "P[x]"),
    Bad("plain-with-index", 'alphabet a b\nX = "a"\nok = X["a"]\n', 3, 6, "'X' takes 0 symbol indices, got 1",
        "write X"),
    Bad("unbound-variable", 'alphabet a b\nok = Q[x]\n', 2, 8, "unbound symbol variable 'x'", "any(x, ...)"),
    Bad("symbol-not-in-alphabet", 'alphabet a b\nok = #"c" == 1\n', 2, 7, 'symbol "c" is not in the alphabet',
        "alphabet", 3),
    Bad("literal-family-param", 'alphabet a b\nP["a"] = "a"\nok = P["a"]\n', 2, 3, "family parameters are variables",
        "P[x]"),
    # ---- types
    Bad("bool-plus", 'alphabet a b\nok = "a" + 1 == 2\n', 2, 6, "left operand of + must be a count, but this is a bool",
        "count it with #P", 3),
    Bad("count-and", 'alphabet a b\nX = #"a"\nok = X && "b"\n', 3, 6, "left side of && must be a bool, but this is a count",
        "C >= 1"),
    Bad("not-count", 'alphabet a b\nok = !#"a"\n', 2, 7, "operand of ! must be a bool", "C >= 1"),
    Bad("bool-less", 'alphabet a b\nok = "a" < "b"\n', 2, 6, "'<' compares counts, not bools", "== and !="),
    Bad("branches-differ", 'alphabet a b\nok = (#"a" if "a" else "b") == 1\n', 2, 7, "branches of 'if' differ",
        "same type"),
    Bad("any-of-count", 'alphabet a b\nok = any(x, #Q[x])\n', 2, 13, "any(...) needs a bool body", "sum takes a count"),
    # ---- positions
    Bad("division-by-position", 'alphabet a b\nX = #[j == i / j] "a"\nok = X == 1\n', 2, 16,
        "'/' needs a positive integer constant", "i / 3"),
    Bad("modulo-zero", 'alphabet a b\nX = #[(i - j) % 0 == 0] "a"\nok = X == 1\n', 2, 17,
        "'%' needs a positive integer constant", "% 2"),
    Bad("j-in-pos", 'alphabet a b\nok = pos[j == 1]\n', 2, 10, "unknown position 'j'", "predicate of i alone"),
    Bad("i-outside-guard", 'alphabet a b\nok = i == 1\n', 2, 6, "position 'i' can only be used inside a guard",
        "positional predicates"),
    Bad("guard-is-number", 'alphabet a b\nX = #[i - j] "a"\nok = X == 1\n', 2, 7, "a guard needs a condition",
        "j == i - 1"),
    # ---- outputs and whole programs
    Bad("output-accept-count", 'alphabet a b\nX = #"a"\nok = X > 1\noutput accept X\n', 4, 15,
        "'output accept' needs a plain bool definition", "'X' is a count"),
    Bad("output-generate-plain", 'alphabet a b\nX = #"a" > 1\noutput generate X\n', 3, 17,
        "'output generate' needs a bool family over one symbol", "'X' is a bool"),
    Bad("output-unknown-kind", 'alphabet a b\nok = "a"\noutput classify ok\n', 3, 8, "unknown output kind 'classify'",
        "output accept NAME"),
    Bad("output-unknown-name", 'alphabet a b\nok = "a"\noutput accept okk\n', 3, 15, "unknown name 'okk'",
        "did you mean 'ok'?"),
    Bad("last-is-count", 'alphabet a b\nX = #"a"\n', 2, 1, "the last definition 'X' is the output and must be a plain bool",
        "output accept NAME"),
    Bad("alphabet-twice", 'alphabet a b\nalphabet a b\nok = "a"\n', 2, 1, "the alphabet is declared twice",
        "declare it once"),
    Bad("only-comments", "// nothing here\n\n", 1, 1, "the program defines nothing", "at least one definition"),
    # ---- found by probing (2026-11-30): these were exit 1 (KeyError, OverflowError) or a silent overflow
    Bad("family-at-special-token", 'alphabet a b\nspecial "<s>"\nF[x] = exists Q[x]\nG = F["<s>"]\n', 4, 7,
        "a family over the data alphabet", 'Q["<s>"]', 5),
    Bad("pair-family-at-special-token", 'alphabet a b\nspecial "<s>"\nF[x, y] = Q[x] && Q[y]\nG = F["a", "<s>"]\n',
        4, 12, "\"<s>\" is a special token", "families range over: a b"),
    Bad("constant-beyond-int64", 'alphabet a\nX = #"a" + 9223372036854775807 > 0\n', 2, 12,
        "integer constant 9223372036854775807 is too large", "64-bit", 19),
    Bad("constant-in-guard", 'alphabet a\nX = #[j == i - 99999999999999999999999] "a" == 0\n', 2, 16,
        "is too large (the limit is 2^31 - 1", "smaller constant"),
    Bad("constant-in-map", 'alphabet a\nM = map(x -> x * 10000000000, tokens)\nok = M == 0\n', 2, 18,
        "integer constant 10000000000 is too large", "64-bit"),
    Bad("magnitude-of-a-count", 'alphabet a b\nX = 2000000000 * (2000000000 * #"a") > 0\n', 2, 5,
        "can reach 4,000,000,000,000,000,000 times the input length", "smaller constants"),
    Bad("family-variable-twice", 'alphabet a b\nF[x, x] = Q[x]\nX = F["a", "b"]\n', 2, 6,
        "uses the variable x twice", "P[x, y]"),
    Bad("alphabet-symbol-twice", 'alphabet a b a\nX = exists "a"\n', 1, 14, "lists a symbol twice: a", "each symbol once"),
    # 64-bit evaluation and the exact analysis of relations agree only within int64
    Bad("guard-arithmetic-overflow", 'alphabet a b\nX = #[(i - j) * (2147483647 * 2147483647 * 4) > 0] "a" > 0\n',
        2, 18, "can reach 18,446,744,056,529,682,436 at positions up to 2^31", "smaller constants"),
    Bad("pos-arithmetic-overflow", 'alphabet a b\nX = pos[i * i * i % 7 == 1]\n', 2, 9,
        "this arithmetic in pos[...] can reach", "smaller constants", 9),
    Bad("special-token-twice", 'alphabet a b\nspecial "<s>" "<s>"\nX = exists "a"\n', 2, 15,
        "special tokens list a token twice: <s>", "each token once"),
    Bad("alphabet-and-special", 'alphabet a b\nspecial a\nF[x] = exists Q[x]\nX = F["a"] && map(x -> x, tokens) == 0\n',
        2, 9, "'a' is declared both in the alphabet and as a special token", "either data (alphabet) or special"),
    Bad("output-unknown-no-suggestion", 'alphabet a b\nG = exists "a"\noutput accept H\n', 3, 15, "unknown name 'H'",
        "names a definition"),
    Bad("symbol-with-space", 'alphabet a "x y"\nX = exists "a"\n', 1, 12, "contains whitespace", "without spaces", 5),
    Bad("empty-symbol", 'alphabet a ""\nX = exists "a"\n', 1, 12, "is empty", "without spaces", 2),
    Bad("magnitude-through-reference", 'alphabet a b\nC = 2000000000 * #"a"\nX = C + C + 2000000000 > 0\n', 3, 5,
        "times the input length", "smaller constants"),
    # a map's value is bounded through its function: 2147483647 * indices is a count expression's
    # worth; scaling it again wrapped around 2^63 silently (a helper's find)
    Bad("magnitude-of-a-map", 'alphabet a b\nM = map(x -> x * 2147483647, indices)\nY = 2147483647 * M > 0\n', 3, 5,
        "times the input length", "smaller constants"),
    Bad("arithmetic-on-an-unbounded-map", 'alphabet a b\nM = map(x -> x * x, indices)\nY = M + 1 > 0\n', 3, 5,
        "'M' is a RASP-L value with no bound", "inside the map"),
    Bad("sum-of-an-unbounded-aggregate", 'alphabet a b\nF[y] = aggregate(select(indices, indices, <=), '
        'map(x -> x * x, indices), max, 0) if Q[y] else 0\nY = sum(y, F[y]) > 3\n', 3, 5, "no bound", "inside the map"),
]


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def check_located(err: str, path: str, bad_line: int, bad_col: int, source: str | None):
    lines = err.rstrip("\n").split("\n")
    head = re.escape(f"{path}:{bad_line}:{bad_col}: error: ")
    assert re.match(head, lines[0]), err
    assert "Traceback" not in err
    hint = [x for x in lines if x.startswith("hint: ")]
    assert len(hint) == 1, err
    if source is not None:
        text = source.splitlines()[bad_line - 1]
        assert lines[1] == "  " + text, err
        caret = lines[2]
        assert caret.startswith("  " + " " * (bad_col - 1) + "^"), err
        assert set(caret.strip()) == {"^"}, err
    return lines


@pytest.mark.parametrize("bad", BAD_PROGRAMS, ids=lambda b: b.name)
def test_malformed_program(bad: Bad, tmp_path, capsys):
    path = tmp_path / f"{bad.name}.cr"
    path.write_text(bad.source)
    code, out, err = run_cli(capsys, "run", str(path), "a")
    assert code == 2, err
    assert out == ""
    lines = check_located(err, str(path), bad.line, bad.col, bad.source)
    assert bad.message in lines[0], err
    assert bad.hint in [x for x in lines if x.startswith("hint: ")][0], err
    if bad.width is not None:
        assert lines[2].strip() == "^" * bad.width, err


def test_enough_distinct_malformed_programs():
    assert len({b.name for b in BAD_PROGRAMS}) == len(BAD_PROGRAMS) >= 15
    assert len({b.source for b in BAD_PROGRAMS}) == len(BAD_PROGRAMS)


@pytest.mark.parametrize("bad", BAD_PROGRAMS, ids=lambda b: b.name)
def test_api_raises_located_rasp_error(bad: Bad):
    with pytest.raises(rasp.RaspError) as info:
        rasp.parse(bad.source)
    exc = info.value
    assert (exc.line, exc.column) == (bad.line, bad.col)
    assert exc.hint


def test_empty_program(tmp_path, capsys):
    path = tmp_path / "empty.cr"
    path.write_text("")
    code, _, err = run_cli(capsys, "run", str(path), "a")
    assert code == 2
    assert err.startswith(f"{path}:1:1: error: the program defines nothing"), err
    assert "hint: " in err and "Traceback" not in err


def test_missing_program_file(tmp_path, capsys):
    code, _, err = run_cli(capsys, "run", str(tmp_path / "nope.cr"), "a")
    assert code == 2
    assert "cannot read program" in err and "Traceback" not in err and "hint: give the path of a program" in err
    # a directory, a compiled model's directory, an empty path: each says what to give instead
    import compiler

    compiler.compile(rasp.parse('alphabet a b\nX = exists "a"')).save(tmp_path / "model")
    for path, hint in ((tmp_path, "not a directory"), (tmp_path / "model", "rasp verify DIR"), ("", "program file")):
        code, _, err = run_cli(capsys, "run", str(path), "a")
        assert code == 2 and hint in err and ("the path is empty" in err) == (path == ""), err


# ---------------------------------------------------------------------- bad inputs
def test_token_outside_alphabet_argv(capsys):
    code, out, err = run_cli(capsys, "run", DYCK, "(", "x", ")")
    assert code == 2 and out == ""
    lines = check_located(err, "<argv>", 1, 3, "( x )")
    assert "token 'x' at position 1 is not in the alphabet" in lines[0]


def test_token_outside_alphabet_stdin(capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("( )\n// a comment\n\n( (  yy )\n"))
    code, out, err = run_cli(capsys, "run", DYCK)
    assert code == 2 and out == ""
    lines = check_located(err, "<stdin>", 4, 6, None)
    assert lines[1] == "  ( (  yy )" and lines[2] == "       ^^", err
    assert "token 'yy' at position 2" in lines[0]


def test_empty_input_argv(capsys):
    code, out, err = run_cli(capsys, "run", DYCK, "")
    assert code == 2 and out == ""
    assert "empty input" in err and "hint: " in err


def test_empty_input_stdin(capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("// only a comment\n\n"))
    code, out, err = run_cli(capsys, "run", DYCK)
    assert code == 2 and out == ""
    assert "empty input" in err and "hint: " in err and "Traceback" not in err


def test_api_token_outside_alphabet():
    p = rasp.load(DYCK)
    with pytest.raises(rasp.RaspError, match="token 'a' at position 2"):
        rasp.run(p, "( ) a")
    with pytest.raises(rasp.RaspError, match="empty input"):
        rasp.run(p, "")


@pytest.mark.parametrize("argv, fragment", [
    (["--alphabet", "a,a"], "--alphabet: the alphabet lists a symbol twice: a"),
    (["--max-new", "-1"], "--max-new must be at least 0"),
    (["--trace", "out.pdf"], "must end in .html or .txt"),
    (["--alphabet", "a,b"], 'symbol "(" is not in the alphabet'),
])
def test_bad_options(argv, fragment, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "run", DYCK, "( )", *argv)
    assert code == 2, err
    assert fragment in err and "Traceback" not in err


def test_trace_unwritable(capsys, tmp_path):
    code, _, err = run_cli(capsys, "run", DYCK, "( )", "--trace", str(tmp_path / "no" / "dir" / "t.txt"))
    assert code == 2
    assert "cannot write the trace" in err and "Traceback" not in err


def test_usage_error_exit_2(capsys):
    code, _, err = run_cli(capsys, "run")
    assert code == 2 and "Traceback" not in err


# ---------------------------------------------------------------------- internal errors
def test_internal_error_exit_1(capsys, monkeypatch):
    import rasp.program

    def boom(*args, **kwargs):
        raise ZeroDivisionError("simulated bug")

    monkeypatch.setattr(rasp.program.Program, "run_batch", boom)
    monkeypatch.delenv("RASP_DEBUG", raising=False)
    code, out, err = run_cli(capsys, "run", DYCK, "( )")
    assert code == 1
    assert "internal error" in err and "ZeroDivisionError" in err and "simulated bug" in err
    assert "Traceback" not in err


def test_subprocess_user_error_and_no_traceback(tmp_path):
    path = tmp_path / "bad.cr"
    path.write_text('alphabet a b\nok = "a" & "b"\n')
    proc = subprocess.run([sys.executable, "-m", "rasp", "run", str(path), "a"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith(f"{path}:2:10: error: unexpected character '&'")
    assert "Traceback" not in proc.stderr


DEEP = [  # (expression, the commands it is too deep for)
    ("!" * 5000 + '"a"', {"run", "check", "compile"}),
    (" || ".join(['"a"'] * 700), {"run", "check", "compile"}),
    ("(" + '"a" if "b" else ' * 700 + '"a")', {"run", "check", "compile"}),  # (lark wrapped it: exit 1)
    ('min(#"a", ' * 700 + '#"b"' + ")" * 700 + " > 0", {"run", "check", "compile"}),  # (the same)
    # parses, runs and compiles (it was too deep to compile while the printer recursed once per +)
    ('#"a"' + ' + #"b"' * 400 + " > 0", set()),
    ("exists " * 250 + '"a"', {"compile"}),
]


@pytest.mark.parametrize("command", ["run", "check", "compile"])
@pytest.mark.parametrize("expr, too_deep", DEEP)
def test_deep_nesting_is_a_located_user_error(tmp_path, capsys, command, expr, too_deep):
    """An expression nested deeper than a pass can recurse: exit 2, located at the definition that
    nests most deeply (line 3 here, not the shallow one before it)."""
    path = tmp_path / "deep.rasp"
    path.write_text('alphabet a b\nY = #"a" > 0\nok = ' + expr + "\nZ = ok\n")
    argv = {"run": ["run", str(path), "a"], "check": ["check", str(path)],
            "compile": ["compile", str(path), "-o", str(tmp_path / "out")]}[command]
    code, out, err = run_cli(capsys, *argv)
    if command not in too_deep:
        assert code == 0, err
        return
    assert code == 2, err
    assert err.startswith(f"{path}:3:1: error: ") and "deeply" in err, err
    assert "hint: split it into several definitions" in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["run", "check", "compile"])
def test_json_user_errors_are_json_on_stdout_too(tmp_path, capsys, command):
    """With --json a user error still exits 2 with the located text on stderr, and stdout carries
    {"error": {...}} for scripts (file, 1-based line and column, message, hint, rendered text)."""
    import json

    bad = tmp_path / "bad.cr"
    bad.write_text('alphabet a b\nok = (#"a" == 1\n')
    argv = {"run": ["run", str(bad), "a b", "--json"], "check": ["check", str(bad), "--json"],
            "compile": ["compile", str(bad), "-o", str(tmp_path / "out"), "--json"]}[command]
    assert main(argv) == 2
    cap = capsys.readouterr()
    assert f"{bad}:2:16: error" in cap.err
    err = json.loads(cap.out.strip().splitlines()[-1])["error"]
    assert (err["file"], err["line"], err["column"]) == (str(bad), 2, 16)
    assert "unexpected end of line" in err["message"] and "never closed" in err["hint"]
    assert "^" in err["text"]


def test_largest_constants_still_run(tmp_path, capsys):
    """The limits refuse only what could overflow: 2^31 - 1 as a constant, and a count expression of up
    to 2^31 times the length, run (the interpreter then agrees with exact integer arithmetic)."""
    path = tmp_path / "big.rasp"
    path.write_text('alphabet a b\nX = 2147483647 * #"a" > 2147483646 + #"b"\n')
    code, out, err = run_cli(capsys, "run", str(path), "a", "a")
    assert code == 0 and out.endswith("accept\n"), err  # 2 (2^31 - 1) > 2^31 - 2
    code, out, err = run_cli(capsys, "run", str(path), "a", "b")
    assert code == 0 and out.endswith("reject\n"), err  # 2^31 - 1 > 2^31 - 1: the boundary, false


def test_check_nested_too_deeply_is_a_user_error(tmp_path, capsys, monkeypatch):
    """`rasp check` when its analysis recurses too deeply (every program that parses is analysed
    iteratively now, so the recursion is simulated): exit 2 (was exit 1), located at the deepest
    definition."""
    import rasp.checker

    def deep(*a, **k):
        raise RecursionError

    monkeypatch.setattr(rasp.checker, "_depths", deep)
    path = tmp_path / "deep.rasp"
    path.write_text('alphabet a b\nY = "a"\nX = ' + "exists " * 40 + '"a"\n')
    code, _, err = run_cli(capsys, "check", str(path))
    assert code == 2, err
    assert err.startswith(f"{path}:3:1: error: the program nests too deeply to analyse"), err
    assert "hint: " in err and "Traceback" not in err


@pytest.mark.parametrize("text, where, what, fragment", [
    # a count with a period-300 relation: 300 branches (was 3 s to check, 44 s to compile; period
    # 1,000 recursed too deeply)
    ('alphabet a b\nX = #[(i - j) % 300 == 1] "a" >= 1\n', (2, 7), "300 different branches", "C-RASP[periodic]"),
    # a window of 1,000 offsets: 1,000 local counts (was "nests too deeply", unlocated); 4,000 (a
    # chain of 4,000 terms would pass the recursion limit: the analysis writes balanced sums)
    ('alphabet a b\nX = #[j > i - 1000] "a" > 0\n', (2, 7), "needs 1,000 local counts", "C-RASP[local]"),
    ('alphabet a b\nX = #[j > i - 4000] "a" > 0\n', (2, 7), "needs 4,000 local counts", "C-RASP[local]"),
])
def test_relations_too_large_to_compile(text, where, what, fragment, tmp_path, capsys):
    """compile refuses a relation whose normal form is past the compiler's cap, at its span; check
    still gives the verdict, naming the count compile refuses; run answers, as the naive evaluator."""
    from naive import naive_output

    path = tmp_path / "big.rasp"
    path.write_text(text)
    code, _, err = run_cli(capsys, "compile", str(path))
    assert code == 2, err
    assert err.startswith(f"{path}:{where[0]}:{where[1]}: error: ") and what in err, err
    assert "too large to compile" in err and "rasp check gives the verdict" in err and "Traceback" not in err
    code, out, err = run_cli(capsys, "check", str(path))
    assert code == 0, err
    assert out.startswith(f"{path}: {fragment} (guaranteed")
    assert f"compile: {path}:{where[0]}:{where[1]}: " in out.replace("\n    ", " ") and what in out.replace("\n    ", " ")
    code, out, err = run_cli(capsys, "check", "--json", str(path))
    assert code == 0 and json.loads(out)["compile_limits"][0]["line"] == where[0]
    program = rasp.parse(text)
    for toks in (["a", "b", "a"], ["a"] * 7 + ["b"] * 5):
        assert program.run(toks) == naive_output(program.core, toks)


@pytest.mark.parametrize("text, where, what", [
    # a window past the analysis' cap too (4,096 local counts)
    ('alphabet a b\nX = #[j > i - 5000] "a" > 0\n', (2, 7), "needs 5,000 local counts"),
    # the interpreter's regular path would need a 9,000,000-entry table here: it takes the general one
    ('alphabet a b\nX = #[(i - j) % 3000 == 2] "a" >= 1\n', (2, 7), "period 3,000"),
    # a period of a million: a 10^12-entry table (was MemoryError, exit 1)
    ('alphabet a b\nX = #[(i - j) % 100000 == 99999] "a" == 0\n', (2, 7), "period 100,000"),
])
def test_relations_too_large_to_analyse(text, where, what, tmp_path, capsys):
    """check and compile refuse a relation whose normal form would be too large, at its span; run
    still answers (the interpreter counts such a guard on its general path), as the naive evaluator."""
    from naive import naive_output

    path = tmp_path / "big.rasp"
    path.write_text(text)
    for command in ("check", "compile"):
        code, _, err = run_cli(capsys, command, str(path))
        assert code == 2, err
        assert err.startswith(f"{path}:{where[0]}:{where[1]}: error: ") and what in err, err
        assert "too large to analyse" in err and "Traceback" not in err
    program = rasp.parse(text)
    for toks in (["a", "b", "a"], ["a"] * 7 + ["b"] * 5):
        assert program.run(toks) == naive_output(program.core, toks)


@pytest.mark.parametrize("text", [
    # a predicate of period 10^6 + 3 is M evaluations, not an M x M table (refused for a while; the
    # compiler took 259 s for period 5,000 before)
    'alphabet a b\nX = pos[i % 1000003 == 5] || pos[i % 97 == 3]\n',
    'alphabet a b\nX = #(pos[i % 3000 == 1] && "a") > 0\n',
    # period 300 with one branch: the relation does not depend on i (residues with equal branches merge)
    'alphabet a b\nX = #[j % 300 == 0] "a" > 0\n',
    'alphabet a b\nX = #[j > i - 256] "a" > 0\n',  # the widest window allowed
])
def test_large_periods_that_stay_small(text, tmp_path, capsys):
    """Programs whose large period or window has a small normal form: check, compile, and the model
    agrees with the interpreter and the naive evaluator across the period."""
    import compiler
    from compiler import verify as V
    from naive import naive_output

    path = tmp_path / "p.rasp"
    path.write_text(text)
    code, out, err = run_cli(capsys, "check", str(path))
    assert code == 0 and "guaranteed" in out, err
    program = rasp.parse(text)
    m = compiler.compile(program)
    rng = np.random.default_rng(0)
    inputs = [[str(s) for s in rng.choice(["a", "b"], size=n)] for n in (5, 301, 700)]
    same, _, _, _, _ = V.check_inputs(m, inputs, [None] * 3, dtype="float64", device="cpu")
    assert same == [True] * 3
    for toks in inputs[:2]:
        assert program.run(toks) == naive_output(program.core, toks)


@pytest.mark.parametrize("M", [300, 1000])
def test_merged_residues_keep_their_local_corrections(M):
    """Residues of i whose branches are equal share one branch. Equal table rows are
    not enough: at i = 1 (mod M) the far count ``j % M == 0`` already holds j = i - 1, at i = 5 it does
    not, so only residue 5 needs the local count ``#[j == i - 1]``. Grouping by table rows merged them
    and dropped it (model and checker alike: the verdict said C-RASP[periodic], the model disagreed
    at position 5 of every input of "a"s). The class of the other 999 residues of M = 1000 is one
    predicate, not a chain 999 deep."""
    import compiler
    from compiler import verify as V
    from naive import naive_values
    from rasp.checker import check
    from rasp.interp import evaluate, make_batch
    from rasp.rewrite import rewrite_core

    text = f'alphabet a b\nX = #[j % {M} == 0 || i - j == 1 && i % {M} == 5] "a"\nY = X >= 2\n'
    program = rasp.parse(text)
    assert check(program, with_task=False).fragment == "C-RASP[periodic,local]"
    toks = ["a"] * (M + 10)
    normal = rasp.Program(program.module, program.checked, rewrite_core(program.core))
    want = program.run_batch([toks])[0]
    assert want is True and normal.run_batch([toks])[0] is True  # X at the last position, M + 9: 2 (j = 0, M)
    batch = make_batch([program.encode(toks)])
    original, rewritten = evaluate(program.core, batch), evaluate(normal.core, batch)
    assert np.array_equal(original["X"], rewritten["X"])
    assert original["X"][0, 5] == 2 and original["X"][0, M + 5] == 3
    if M == 300:
        assert list(original["X"][0, : len(toks)]) == naive_values(program.core, toks)["X"]
    m = compiler.compile(program)
    same, _, _, _, _ = V.check_inputs(m, [toks, toks[:7]], [None, None], dtype="float64", device="cpu")
    assert same == [True, True]


def test_magnitude_limit_boundaries(tmp_path, capsys):
    """A count expression of exactly 2^31 times the length is allowed, one more is not; constants are
    bounded apart from the counts (``#"a" - 2000000000 - 2000000000`` is fine); the bound also covers
    a conditional's test and sum over the alphabet."""
    ok = 'alphabet a b\nX = 2147483647 * #"a" + #"b" > 0\n'  # 2^31 - 1 + 1
    assert rasp.parse(ok).run("a b") is True
    assert rasp.parse('alphabet a b\nX = #"a" - 2000000000 - 2000000000 > 0\n').run("a") is False
    with pytest.raises(rasp.RaspError, match="constant part can reach"):
        rasp.parse('alphabet a b\nX = 2147483647 * (2147483647 * 2) > #"a"\n')
    for text, where in (('alphabet a b\nX = 2147483647 * #"a" + 2 * #"b" > 0\n', (2, 5)),
                        ('alphabet a b\nX = (1 if 2147483647 * #"a" + 2 * #"b" > 0 else 0) > 0\n', (2, 11)),
                        ('alphabet a b\nC[x] = 1073741825 * #Q[x]\nX = sum(x, C[x]) + 1 > 0\n', (3, 5))):
        with pytest.raises(rasp.RaspError, match="times the input length") as e:
            rasp.parse(text)
        assert (e.value.line, e.value.column) == where, text


def test_a_product_of_constants_scales_a_count():
    """theory.md: integer constants and k*C follow; 2 * 3 * #"a" was "multiplication needs an integer
    constant on one side". A product past 2^31 - 1 stays a product (the magnitude checks apply)."""
    p = rasp.parse('alphabet a b\nX = 2 * 3 * #"a" > -2 * 3 + #"b" * 2 * 2\n')
    q = rasp.parse('alphabet a b\nX = 6 * #"a" > -6 + 4 * #"b"\n')
    for toks in ("a", "b", "a b b", "b b b b b b b a"):
        assert p.run(toks) == q.run(toks), toks
    assert str(p).splitlines()[1].startswith('X = 6 * #"a" > -6 + ')
    # a product of constants too large to be one constant scales the count factor by factor, as the
    # same factors after the count do: the magnitude check decides either way (it was "multiplication
    # needs an integer constant on one side" before the count and accepted after it)
    for src in ('X = 65536 * 65536 * #"a" > 0', 'X = #"a" * (65536 * -65536) > 0', 'X = #"a" * 65536 * 65536 > 0'):
        with pytest.raises(rasp.RaspError, match=r"can reach 4,294,967,296 times the input length"):
            rasp.parse(f"alphabet a b\n{src}\n")
    for src in ('X = 2 * 1073741824 * #"a" > 0', 'X = #"a" * 2 * 1073741824 > 0', 'X = 65536 * 65536 * 0 * #"a" < 1'):
        assert rasp.parse(f"alphabet a b\n{src}\n").run("a") is True, src
    assert rasp.parse('alphabet a b\nX = 65536 * 65536 > 0\n').run("a") is True  # a constant, no count


def test_an_expansion_past_the_cap_is_refused_before_it_is_made():
    """UR over 3,000 symbols made 18 million expression copies (minutes, then out of memory); the
    cap is checked before expanding, located at the largest family, and a family with a quantifier
    counts the quantifier's copies too."""
    from rasp.expand import EXPANSION_CAP

    ur = ROOT / "programs" / "ur.rasp"
    symbols = tuple(f"s{k}" for k in range(3000))
    with pytest.raises(rasp.RaspError, match="expands into about 18,003,001 copies") as e:
        rasp.load(ur, alphabet=symbols)
    assert e.value.span.line == 13 and "--alphabet" in e.value.hint
    # P[x, y] = any(z, ...) over 170 symbols: 170^3 copies of the body; 160^3 is under the cap
    src = (f'alphabet {" ".join(f"s{k}" for k in range(170))}\nP[x, y] = any(z, exists (Q[x] && Q[y] && Q[z]))\n'
           'G[x] = P[x, x]\noutput generate G\n')
    with pytest.raises(rasp.RaspError, match="P alone makes 4,913,000") as e:
        rasp.parse(src)
    assert e.value.span.line == 2
    assert 160 ** 3 < EXPANSION_CAP < 170 ** 3


def test_map_values_keep_exact_arithmetic():
    """What stays allowed: comparing an unbounded map value, choosing between such values, and
    arithmetic on a map whose function is linear in its bounded arguments (tokens, indices, tables,
    modulo, division); the values agree with the oracle (Python integers)."""
    from naive import naive_values

    for text in ['alphabet a b\nM = map(x -> x * x, indices)\nY = M > 3 || max(M, 2) == 2\n',
                 'alphabet a b\nM = map(x -> 1000 * x + 7, indices)\nY = 3 * M - #"a" > 5000\n',
                 'alphabet a b\nM = seqmap((x, y) -> (x * y) % 5 + {0: 9, 1: -4}[y], indices, tokens)\n'
                 'Y = 2 * M + #"b" > 4\n',
                 'alphabet a b\nM = map(x -> x / 3 + x * 3, aggregate(select(tokens, tokens, ==), indices, max, 7))\n'
                 'Y = 5 * M < #"b" + 20\n']:
        p = rasp.parse(text)
        toks = ["a", "b", "b", "a", "b", "a", "a"]
        want = naive_values(p.core, toks)
        got = p.evaluate([toks])
        assert all(list(np.asarray(got[k])[0]) == want[k] for k in want), text


def test_excerpt_is_the_numbered_line_and_a_window_of_a_long_one(tmp_path, capsys, monkeypatch):
    """Lines are numbered at ``\\n`` only: a form feed or U+2028 inside a line once made the excerpt
    another line (``str.splitlines`` splits at them). A place deep in a long line shows a window of
    it (an input of 600,000 characters printed itself and as much caret padding)."""
    f = tmp_path / "ff.rasp"
    f.write_text('alphabet a b\n// note\x0cpage break\nM = #"a" > N\n')
    assert main(["run", str(f), "a"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith(f"{f}:3:12:") and lines[1] == '  M = #"a" > N' and lines[2] == "  " + " " * 11 + "^"
    assert main(["run", DYCK, "(\u2028)", "x"]) == 2
    lines = capsys.readouterr().err.split("\n")
    # shown as an escape (a terminal may break the line there), the caret under x all the same
    assert lines[0].startswith("<argv>:1:5:") and lines[1] == "  (\\u2028) x" and lines[2] == "  " + " " * 9 + "^"
    monkeypatch.setattr(sys, "stdin", io.StringIO("( " * 300000 + "x )\n"))
    assert main(["run", DYCK]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("<stdin>:1:600001:") and len(lines[1]) < 200 and len(lines[2]) < 200
    assert lines[1][len(lines[2]) - 1] == "x" and lines[1].startswith("  ...") and lines[1].endswith(" )")


def test_caret_lines_up_under_tabs(tmp_path, capsys):
    """The excerpt and the caret line expand tabs alike (to multiples of 8 columns), so the caret sits
    under the offending text, and a span with tabs inside gets a caret per column it covers (it got
    one per character: 20 carets under 39 columns; helper 70)."""
    f = tmp_path / "tab.rasp"
    f.write_text('alphabet a b\n\tX =\t#"a" > Q\n')
    assert main(["check", str(f)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith(f"{f}:2:13:")
    src, caret = lines[1], lines[2]
    assert "\t" not in src + caret and src == "          X =     #\"a\" > Q"
    assert caret.index("^") == src.index("Q") and caret.strip() == "^"
    f.write_text('alphabet a b\nX = #"a"\tif\t"a"\telse\t"b"\n')
    assert main(["check", str(f)]) == 2
    src, caret = capsys.readouterr().err.splitlines()[1:3]
    assert caret.index("^") == src.index("#") and caret.rstrip().endswith("^") and len(caret) == len(src)


@pytest.mark.parametrize("symbol, width", [("中", 2), ("😀", 2), ("e\u0301", 1), ("ｘ", 2)])
def test_caret_counts_display_columns(tmp_path, capsys, symbol, width):
    """Wide characters take two terminal columns and combining ones none: the caret is placed and
    sized by display columns (by code points it sat one column left of the name after a CJK symbol,
    and under 4 of 6 columns; helper 70)."""
    f = tmp_path / "wide.rasp"
    f.write_text(f'alphabet a "{symbol}"\nX = "{symbol}" && Y\nZ = "{symbol}" + 1 > 0\n', encoding="utf-8")
    assert main(["check", str(f)]) == 2
    src, caret = capsys.readouterr().err.splitlines()[1:3]
    assert caret == " " * (len('  X = "') + width + len('" && ')) + "^", (src, caret)


def test_lone_surrogates_are_escapes_under_the_caret():
    """An undecodable argv byte arrives as a lone surrogate, which a terminal prints as its escape:
    the caret counts the escape's columns."""
    from rasp.errors import Span, caret_lines

    src, caret = caret_lines("a\udcffb c", Span(1, 1, 1, 4), indent="")
    assert src == "a\\udcffb c" and caret == "^" * 8


def test_bidi_controls_in_a_quoted_line_are_escapes(tmp_path, capsys):
    """A right-to-left override in a comment would reorder the printed line around the caret: it is
    shown as its escape, and the caret still sits under the name."""
    f = tmp_path / "bidi.rasp"
    f.write_text('alphabet a b\nX = #"a" > Q // \u202e hi\n', encoding="utf-8")
    assert main(["check", str(f)]) == 2
    src, caret = capsys.readouterr().err.splitlines()[1:3]
    assert "\u202e" not in src and "\\u202e" in src and caret.index("^") == src.index("Q")


def test_cr_only_line_ends_on_stdin_and_in_undecodable_files(tmp_path, capsys, monkeypatch):
    """A lone CR ends a line on stdin (it was one line: 'a b\\rb a' ran as one input) and when a
    byte that is not UTF-8 is located (program files already read CR as a line end)."""
    f = tmp_path / "ok.rasp"
    f.write_text('alphabet a b\nX = #"a" > #"b"\n')
    for stdin in (io.TextIOWrapper(io.BytesIO(b"a a\rb a\r")), io.StringIO("a a\rb a\r")):  # bytes or text only
        monkeypatch.setattr(sys, "stdin", stdin)
        assert main(["run", str(f)]) == 0
        assert capsys.readouterr().out.splitlines() == ["a a\taccept", "b a\treject"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a a\rb a\rb c\r")))
    assert main(["run", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("<stdin>:3:3:") and err.splitlines()[1] == "  b c"
    # program text given to rasp.parse too (a lone CR was an unexpected character there)
    assert rasp.parse('alphabet a b\rX = #"a" > #"b"\r').run("a a b") is True
    with pytest.raises(rasp.RaspError) as info:
        rasp.parse('alphabet a b\r\nX = #"a" > Q\r\n')
    assert (info.value.span.line, info.value.span.column) == (2, 12)
    bad = tmp_path / "bad8.rasp"
    bad.write_bytes(b"alphabet a b\rX = \xfe\r")
    assert main(["check", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"{bad}:2:5:")


def test_a_byte_that_is_not_utf8_is_located(tmp_path, capsys):
    f = tmp_path / "bad.rasp"
    f.write_bytes(b'alphabet a b\nX = #"a" \xff > 0\n')
    assert main(["check", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{f}:2:10: error: cannot read program: not UTF-8 text (byte 0xff")
    assert err.splitlines()[2] == "  " + " " * 9 + "^"


def test_a_period_too_large_to_tabulate_is_located_in_check_and_compile(tmp_path, capsys):
    """rasp run evaluates pos[...] of any period as written; check and compile tabulate it (M entries)
    and refuse a period over 2^22 where it is written (it used to run out of memory)."""
    f = tmp_path / "per.rasp"
    f.write_text('alphabet a b\nX = pos[i % 1000003 == 0 && i % 999983 == 0] && "a"\n')
    for cmd in ("check", "compile"):
        assert main([cmd, str(f)]) == 2, cmd
        err = capsys.readouterr().err
        assert err.startswith(f"{f}:2:9: error: this positional predicate has period 999,985,999,949"), err
    assert main(["run", str(f), "a", "b"]) == 0


def test_cli_with_stdout_closed_or_no_command(capsys, monkeypatch):
    """Started with stdout closed (``rasp run ... >&-``) every result would be dropped: exit 1 with the
    reason on stderr (it exited 0); ``rasp`` alone is a usage error with its usage on stderr."""
    import sys

    monkeypatch.setattr(sys, "stdout", None)
    assert main(["run", DYCK, "( )"]) == 1
    assert "standard output is closed" in capsys.readouterr().err
    monkeypatch.undo()
    code, out, err = run_cli(capsys)
    assert code == 2 and out == "" and err.startswith("usage: rasp")


@pytest.mark.parametrize("src, message, hint", [
    ("#import pred\nalphabet a b\nOUT = pred\n", "'pred' is a relation of two positions (a guard), not a value",
     "#[pred] P"),
    ("alphabet a b\nM = map(x -> y + 1, tokens)\nok = M > 1\n", "unknown name 'y' in a map function",
     "parameters (x)"),
    ('alphabet a b\nF[x] = map(t -> t == x, tokens)\noutput predict F\n', "unknown name 'x' in a map function",
     "compare outside the map"),
])
def test_names_in_the_wrong_place_say_where_they_belong(tmp_path, capsys, src, message, hint):
    """A guard used as a value, a name a map function cannot see (its parameters only: a family's symbol
    variable included): located, with what to write instead (they were 'unknown name' with the hint to
    define it, and 'unknown position')."""
    path = tmp_path / "p.rasp"
    path.write_text(src)
    code, out, err = run_cli(capsys, "check", str(path))
    assert code == 2 and message in err and hint in err and "Traceback" not in err, err


def test_nested_wide_windows_exhaust_the_analysis_budget(tmp_path, capsys):
    """A count's normal form copies its body into each of its terms: two nested windows of 1,001
    offsets are a million counts (193 s and 1.5 GB of checking once the checker took windows past
    the compiler's 256). check refuses them at once, located; with the inner count named, the same
    function is 2,002 counts and has its verdict."""
    nested = tmp_path / "nested.rasp"
    nested.write_text('alphabet a b\nok = #[i - j <= 1000] (#[i - j <= 1000] "a" >= 2) >= 3\n')
    code, _, err = run_cli(capsys, "check", str(nested))
    assert code == 2 and err.startswith(f"{nested}:2:8: error: ") and "would write 1,00" in err, err
    assert "at most 65,536 in all" in err and "hint: give an inner count" in err and "Traceback" not in err
    named = tmp_path / "named.rasp"
    named.write_text('alphabet a b\nIN = #[i - j <= 1000] "a" >= 2\nok = #[i - j <= 1000] IN >= 3\n')
    code, out, err = run_cli(capsys, "check", str(named))
    assert code == 0 and out.startswith(f"{named}: C-RASP[local] (guaranteed"), err
