"""`rasp run`: every example in the README works (with and without --json and --trace), `python -m rasp`
is the same CLI as the `rasp` script, the CLI agrees with the case table, and printing is canonical
(parse(str(p)) == p, printing idempotent) on every case."""
from __future__ import annotations

import html
import io
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import compiler
import rasp
from cases import CASES
from rasp.cli import main
from rasp.commands.run import format_output

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


# ---------------------------------------------------------------------- README examples
def _blocks(text: str) -> list[tuple[str, list[str]]]:
    """Fenced code blocks: (language tag, lines)."""
    out, tag, lines, inside = [], "", [], False
    for line in text.splitlines():
        if line.startswith("```"):
            if inside:
                out.append((tag, lines))
                inside = False
            else:
                tag, lines, inside = line[3:].strip(), [], True
        elif inside:
            lines.append(line)
    return out


def readme_run_commands() -> list[tuple[str, list[str] | None]]:
    """(shell command, expected stdout lines or None) for every `rasp run` example in the README."""
    found = []
    for tag, lines in _blocks(README):
        k = 0
        while k < len(lines):
            line = lines[k]
            if line.startswith("$ ") and "rasp run" in line:
                expected = []
                k += 1
                while k < len(lines) and not lines[k].startswith("$ "):
                    expected.append(lines[k])
                    k += 1
                found.append((line[2:], expected))
                continue
            if tag == "bash" and "rasp run" in line:  # e.g. "pip install ... && rasp run ..."
                part = [p for p in line.split("&&") if "rasp run" in p][0].strip()
                found.append((part, None))
            k += 1
    return found


COMMANDS = readme_run_commands()


def readme_programs() -> list[str]:
    """Program texts shown in the README (untagged blocks that are not shell sessions)."""
    progs = []
    for tag, lines in _blocks(README):
        body = [x for x in lines if x.strip() and not x.strip().startswith("//")]
        if tag == "" and body and not body[0].startswith("$ ") and any(" = " in x for x in body):
            progs.append("\n".join(lines) + "\n")
    return progs


def test_readme_has_examples():
    assert len(COMMANDS) >= 3
    assert any("--json" in c for c, _ in COMMANDS)
    assert any("--trace" in c for c, _ in COMMANDS)
    assert len(readme_programs()) >= 2


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A scratch folder with a copy of programs/, as the README's commands expect."""
    shutil.copytree(ROOT / "programs", tmp_path / "programs")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _shell(command: str, cwd: Path, rasp_cmd: str) -> subprocess.CompletedProcess:
    cmd = re.sub(r"(^|\|\s*)rasp run", lambda m: f"{m.group(1)}{rasp_cmd} run", command)
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, capture_output=True, text=True, timeout=300)


def _split(command: str) -> tuple[str | None, list[str]]:
    """``printf ... | rasp run ARGS`` -> (the stdin-producing shell part, ARGS)."""
    left = None
    if "|" in command and "rasp run" in command.split("|", 1)[1]:
        left, command = command.split("|", 1)
    argv = shlex.split(command, comments=True)
    assert argv[:2] == ["rasp", "run"], command
    return left, argv[1:]


def _strip_output_options(argv: list[str]) -> list[str]:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a == "--json":
            continue
        if a == "--trace":
            skip = True
            continue
        out.append(a)
    return out


def _run_inprocess(argv: list[str], stdin_text: str | None, capsys, monkeypatch) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin_text or ""))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _stdin_for(left: str | None, cwd: Path) -> str | None:
    if left is None:
        return None
    return subprocess.run(["bash", "-c", left], cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("command, expected", COMMANDS, ids=[c for c, _ in COMMANDS])
def test_readme_command_as_written(command, expected, workdir):
    """The README command through bash, with `python -m rasp` and (when installed) the `rasp` script."""
    runners = [f"{shlex.quote(sys.executable)} -m rasp"]
    if shutil.which("rasp"):
        runners.append("rasp")
    outputs = []
    for runner in runners:
        proc = _shell(command, workdir, runner)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        if expected:
            assert proc.stdout.splitlines() == expected
        outputs.append(proc.stdout)
        for t in re.findall(r"--trace\s+(\S+)", command):
            assert (workdir / t).is_file()
    assert all(o == outputs[0] for o in outputs), "python -m rasp and the rasp script differ"


@pytest.mark.parametrize("command, expected", COMMANDS, ids=[c for c, _ in COMMANDS])
@pytest.mark.parametrize("variant", ["plain", "json", "trace-txt", "trace-html"])
def test_readme_command_variants(command, expected, variant, workdir, capsys, monkeypatch):
    left, argv = _split(command)
    argv = _strip_output_options(argv)
    stdin_text = _stdin_for(left, workdir)
    program = rasp.load(workdir / argv[1])
    if "--alphabet" in argv:
        from rasp.expand import parse_alphabet_option

        program = program.with_alphabet(parse_alphabet_option(argv[argv.index("--alphabet") + 1]))
    if variant == "json":
        argv = argv + ["--json"]
    if variant.startswith("trace"):
        trace = workdir / ("t.txt" if variant == "trace-txt" else "t.html")
        argv = argv + ["--trace", str(trace)]
    code, out, err = _run_inprocess(argv, stdin_text, capsys, monkeypatch)
    assert code == 0, err
    lines = out.splitlines()
    assert lines
    if variant == "json":
        objs = [json.loads(x) for x in lines]
        assert all(set(o) >= {"tokens", "output", "kind"} for o in objs)
        for o in objs:
            assert o["output"] == rasp.run(program, o["tokens"])
            assert o["kind"] == program.output_kind
        if expected and expected[0].startswith("{"):
            assert objs == [json.loads(x) for x in expected]
    else:
        for line in lines:
            toks, shown = line.split("\t")
            assert shown == format_output(program.output_kind, rasp.run(program, toks))
    if variant == "trace-txt":
        text = trace.read_text()
        for d in program.core.defs:
            assert re.search(rf"^{re.escape(d.name)}\s", text, re.M), d.name
    if variant == "trace-html":
        page = trace.read_text()
        assert_self_contained_html(page)
        for d in program.core.defs:
            assert f">{html.escape(d.name)}<" in page, d.name


def assert_self_contained_html(page: str) -> None:
    assert page.lstrip().lower().startswith("<!doctype html>")
    assert page.rstrip().endswith("</html>")
    low = page.lower()
    assert "<script" not in low
    assert "<link" not in low
    assert "src=" not in low
    assert "http://" not in low and "https://" not in low
    assert "@import" not in low and "url(" not in low


@pytest.mark.parametrize("k", range(2))
def test_readme_programs_run(k):
    progs = readme_programs()
    p = rasp.parse(progs[k])
    inputs = {"accept": "( ( ) )", "generate": "a b c <sep> b"}
    toks = inputs.get(p.output_kind)
    if toks and all(t in p.symbols for t in toks.split()):
        out = rasp.run(p, toks)
        assert out == (True if p.output_kind == "accept" else ["c"])
    assert rasp.parse(str(p)) == p


def test_readme_python_api(workdir):
    """The README's Python API block runs as written, and its comments hold."""
    block = [lines for tag, lines in _blocks(README) if tag == "python"][0]
    namespace: dict = {}
    exec(compile("\n".join(block), "<README.md>", "exec"), namespace)
    p = namespace["p"]
    assert rasp.run(p, "( ( ) )") is True
    assert rasp.parse(str(p)) == p
    values = p.evaluate(["( )", "( ( )"])
    assert all(v.shape == (2, 3) for v in values.values())


def test_python_m_rasp_is_the_cli():
    """`python -m rasp --help` lists the same commands as rasp.cli's parser."""
    proc = subprocess.run([sys.executable, "-m", "rasp", "--help"], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0
    from rasp.cli import build_parser

    assert proc.stdout == build_parser().format_help().replace("__main__.py", "rasp")


# ---------------------------------------------------------------------- CLI vs the case table
@pytest.mark.parametrize("case", [c for c in CASES if " " not in "".join(c.token_list)], ids=lambda c: c.name)
def test_cli_json_matches_table(case, tmp_path, capsys):
    path = tmp_path / "p.rasp"
    path.write_text(case.source)
    code = main(["run", str(path), *case.token_list, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    obj = json.loads(out)
    assert obj["tokens"] == case.token_list
    assert obj["output"] == case.expected


def test_text_output_formats(tmp_path, capsys):
    gen = tmp_path / "g.rasp"
    gen.write_text('alphabet a b\nNEXT[x] = #Q[x] < 2\noutput generate NEXT\n')
    assert main(["run", str(gen), "a"]) == 0
    assert capsys.readouterr().out == "a\ta b b\n"
    assert main(["run", str(gen), "a", "a", "b", "b"]) == 0
    assert capsys.readouterr().out == "a a b b\t(nothing)\n"
    assert main(["run", str(gen), "b", "--max-new", "1"]) == 0
    assert capsys.readouterr().out == "b\ta\n"
    pred = tmp_path / "p.rasp"
    pred.write_text('alphabet a b\nALLOWED[x] = !Q[x]\noutput predict ALLOWED\n')
    assert main(["run", str(pred), "a b"]) == 0
    assert capsys.readouterr().out == "a b\t{b} {a}\n"


def test_alphabet_option(tmp_path, capsys):
    path = tmp_path / "seen.rasp"
    path.write_text('alphabet a b\nSEEN[x] = exists Q[x]\nok = all(x, SEEN[x])\n')
    assert main(["run", str(path), "a b b", "--alphabet", "a,b,c", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["output"] is False
    assert main(["run", str(path), "c b a", "--alphabet", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["output"] is True


def test_alphabet_option_supplies_an_alphabet_the_file_lacks(tmp_path, capsys):
    """The empty-alphabet error says "or pass --alphabet", but --alphabet was applied after the file
    had been loaded (and refused) with its own empty alphabet (helper 96's audit)."""
    path = tmp_path / "noalpha.cr"
    path.write_text("F[x] = exists Q[x]\nok = any(x, F[x])\n")
    assert main(["run", str(path), "a"]) == 2
    assert "empty alphabet" in capsys.readouterr().err
    assert main(["run", str(path), "b", "--alphabet", "a,b", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["output"] is True
    assert main(["check", str(path), "--alphabet", "a,b", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["alphabet_size"] == 2
    assert main(["compile", str(path), "--alphabet", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["heads"] == 3  # one per symbol: --alphabet 3 is a b c
    # the alphabet's own errors keep their flag's name; a listed special token is still refused
    assert main(["run", str(path), "a", "--alphabet", "a,a"]) == 2
    assert "--alphabet: the alphabet lists a symbol twice: a" in capsys.readouterr().err
    assert main(["run", str(ROOT / "programs" / "ur.rasp"), "a", "--alphabet", "a,b,<sep>"]) == 2
    assert "--alphabet lists <sep>, a special token" in capsys.readouterr().err
    # a program error is still the program's, located, whatever --alphabet says
    bad = tmp_path / "bad.cr"
    bad.write_text("alphabet a b\nok = #\"c\" > 0\n")
    assert main(["run", str(bad), "a", "--alphabet", "a,b"]) == 2
    assert f"{bad}:2:" in capsys.readouterr().err


def test_max_new_on_a_program_that_does_not_generate_is_noted(capsys):
    """--max-new on an acceptor was ignored without a word; it is a note on stderr (not an error:
    benchmarks/gpu.sh passes one flag set to every program)."""
    dyck = str(ROOT / "programs" / "dyck1.cr")
    assert main(["run", dyck, "( )", "--max-new", "5"]) == 0
    out = capsys.readouterr()
    assert out.out == "( )\taccept\n" and "--max-new applies to generators" in out.err and "accept" in out.err
    assert main(["run", dyck, "( )"]) == 0
    assert capsys.readouterr().err == ""


def test_stdin_many_inputs_and_comments(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("// header\n( )\n\n) (\n  // indented comment\n( ( ) )\n"))
    assert main(["run", str(ROOT / "programs" / "dyck1.cr")]) == 0
    assert capsys.readouterr().out == "( )\taccept\n) (\treject\n( ( ) )\taccept\n"


# ---------------------------------------------------------------------- printing
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_print_round_trip(case):
    p = rasp.parse(case.source)
    text = str(p)
    q = rasp.parse(text)
    assert q == p
    assert q.module == p.module
    assert str(q) == text  # idempotent
    assert q.core == p.core


def test_cli_run_many_stdin_lines_and_bad_bytes(monkeypatch, capsys):
    """Every line of a long stdin is one input (the located source is built only for an error); a
    byte that is not UTF-8 is a user error."""
    import io

    from rasp.cli import main as cli

    dyck = str(Path(__file__).resolve().parent.parent / "programs" / "dyck1.cr")
    monkeypatch.setattr("sys.stdin", io.StringIO("( )\n" * 5000 + "( (\n"))
    assert cli(["run", dyck]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 5001 and out[-1].endswith("reject")
    raw = io.TextIOWrapper(io.BytesIO(b"( )\n( \xff (\n"), encoding="utf-8", errors="strict")
    monkeypatch.setattr("sys.stdin", raw)
    assert cli(["run", dyck]) == 2
    assert "<stdin>:2:3: error: standard input is not UTF-8 text (byte 0xff)" in capsys.readouterr().err
    # a byte-order mark before the first line is not a token (program files drop theirs too)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbf( )\n"), encoding="utf-8"))
    assert cli(["run", dyck]) == 0
    assert capsys.readouterr().out.split() == ["(", ")", "accept"]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbf( \xff )\n"), encoding="utf-8"))
    assert cli(["run", dyck]) == 2  # the column counts without the mark
    assert "<stdin>:1:3: error: standard input is not UTF-8 text" in capsys.readouterr().err
    # a CRLF stdin: each line is one input (the bytes are read as they are)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"( )\r\n( (\r\n"), encoding="utf-8"))
    assert cli(["run", dyck]) == 0
    assert [line.split()[-1] for line in capsys.readouterr().out.splitlines()] == ["accept", "reject"]
    # under a C/POSIX locale Python decodes stdin with surrogateescape: the byte arrives as a lone
    # surrogate; it is located (line:col) instead of reported as a token outside the alphabet
    raw = io.TextIOWrapper(io.BytesIO("( )\n( \u00e9\xff (\n".encode("utf-8").replace(b"\xc3\xbf", b"\xff")),
                           encoding="utf-8", errors="surrogateescape")
    monkeypatch.setattr("sys.stdin", raw)
    assert cli(["run", dyck]) == 2
    err = capsys.readouterr().err
    assert "<stdin>:2:4: error: standard input is not UTF-8 text (byte 0xff)" in err and "alphabet" not in err, err
    # an ASCII stdin (LC_ALL=C without UTF-8 mode) escapes every byte >= 0x80: valid UTF-8 is decoded
    # again, not refused (here the token is simply outside the alphabet)
    raw = io.TextIOWrapper(io.BytesIO("( )\n( \u00e9 (\n".encode("utf-8")), encoding="ascii",
                           errors="surrogateescape")
    monkeypatch.setattr("sys.stdin", raw)
    assert cli(["run", dyck]) == 2
    err = capsys.readouterr().err
    assert "token '\u00e9' at position 1 is not in the alphabet" in err and "UTF-8" not in err, err


def test_cli_tasks_json_is_one_line_and_seed_checked(capsys):
    from rasp.cli import main as cli

    assert cli(["tasks", "--json"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 1
    assert cli(["tasks", "show", "UR", "--json"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 1
    assert cli(["tasks", "sample", "UR", "--length", "5", "--seed", "-1"]) == 2
    assert "--seed" in capsys.readouterr().err


def test_cli_run_trace_errors_come_before_any_output(tmp_path, capsys):
    from rasp.cli import main as cli

    dyck = str(Path(__file__).resolve().parent.parent / "programs" / "dyck1.cr")
    assert cli(["run", dyck, "(", ")", "--trace", str(tmp_path / "no" / "t.html")]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "cannot write the trace" in out.err
    assert cli(["run", dyck, "(", ")", "--trace", ""]) == 2
    assert ".html or .txt" in capsys.readouterr().err


def test_cli_run_trace_selectors_generation_labels(tmp_path, capsys, monkeypatch):
    """The trace shows a named RASP-L selector (its selected keys per query; it was an internal
    error), a generator's generated tokens (marked ``gen``: the values that chose each next token),
    stdin line numbers as labels, the alphabet given with --alphabet, and is UTF-8 in any locale."""
    import io

    from rasp.cli import main as cli

    sel = tmp_path / "sel.rasp"
    sel.write_text('alphabet 0 1\nS = select(tokens, full(1), ==)\nT = select(indices, indices, true)\n'
                   'W = selector_width(S)\nok = W == 1\n')
    for name in ("s.txt", "s.html"):
        assert cli(["run", str(sel), "1", "0", "1", "1", "--trace", str(tmp_path / name)]) == 0, capsys.readouterr().err
    text = (tmp_path / "s.txt").read_text()
    assert re.search(r"^S\s+0\s+0\s+0,2\s+0,2-3$", text, re.M), text
    assert re.search(r"^T\s+0\s+0-1\s+0-2\s+0-3$", text, re.M), text
    assert ">0,2-3</td>" in (tmp_path / "s.html").read_text()

    root = Path(__file__).resolve().parent.parent
    uf = str(root / "programs" / "uf.rasp")
    prompt = ["3", "1", "2", "<sep>"]
    generated = rasp.run(rasp.load(uf).with_alphabet(["1", "2", "3"]), prompt)
    assert generated == ["3", "1", "2"]
    assert cli(["run", uf, "--alphabet", "1,2,3", "--trace", str(tmp_path / "g.txt"), "--", *prompt]) == 0
    capsys.readouterr()
    text = (tmp_path / "g.txt").read_text()
    lines = text.splitlines()
    assert lines[0] == "alphabet used (--alphabet): 1 2 3"
    assert re.search(r"^token\s+3\s+1\s+2\s+<sep>\s+3\s+1\s+2$", text, re.M), text
    assert re.search(r"^\s+gen\s+gen\s+gen$", text, re.M), text
    # at each position from <sep> on, the true NEXT[y] is the token generated next (none at the end)
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines if ln.startswith("NEXT[")}
    chosen = [[y for y in "123" if rows[f"NEXT[{y}]"][p] == "T"] for p in range(3, 7)]
    assert chosen == [["3"], ["1"], ["2"], []]

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"( )\n// a comment\n\n( ( ) )\n")))
    dyck = str(root / "programs" / "dyck1.cr")
    assert cli(["run", dyck, "--trace", str(tmp_path / "d.html")]) == 0
    page = (tmp_path / "d.html").read_text(encoding="utf-8")
    assert "<caption>&lt;stdin&gt; line 1: ( )</caption>" in page
    assert "<caption>&lt;stdin&gt; line 4: ( ( ) )</caption>" in page

    odd = tmp_path / "odd.rasp"
    odd.write_text('alphabet "\u00e9" a\nA = #"a" > 0\noutput accept A\n', encoding="utf-8")
    real_open = Path.write_text

    def ascii_default(self, data, encoding=None, errors=None, newline=None):  # a C locale's default
        return real_open(self, data, encoding=encoding or "ascii", errors=errors, newline=newline)

    monkeypatch.setattr(Path, "write_text", ascii_default)
    assert cli(["run", str(odd), "\u00e9", "a", "--trace", str(tmp_path / "o.html")]) == 0, capsys.readouterr().err
    assert "\u00e9" in (tmp_path / "o.html").read_text(encoding="utf-8")


def test_cli_run_prints_in_an_ascii_locale(tmp_path):
    """With the C locale and Python's UTF-8 coercion turned off, stdout is ASCII: a symbol it cannot
    show is printed as an escape (it was an internal error, exit 1)."""
    import os
    import subprocess
    import sys

    odd = tmp_path / "odd.rasp"
    odd.write_text('alphabet "\u00e9" a\nA = #"a" > 0\noutput accept A\n', encoding="utf-8")
    env = {**os.environ, "LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    env.pop("PYTHONIOENCODING", None)
    done = subprocess.run([sys.executable, "-m", "rasp", "run", str(odd)], input="\u00e9 a\n".encode(),
                          capture_output=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"\\xe9 a\taccept\n"


def test_cli_run_flags_generation_cut_at_the_cap(tmp_path, capsys):
    """A generation that reaches --max-new (or the default 2n + 8) is flagged: it may not be the
    program's whole output. One that stops because no symbol holds is not."""
    from rasp.cli import main as cli

    forever = tmp_path / "forever.rasp"
    forever.write_text('alphabet a b\nNEXT[x] = true\noutput generate NEXT\n')  # never stops
    assert cli(["run", str(forever), "a", "b", "--json"]) == 0
    out = capsys.readouterr()
    obj = json.loads(out.out)
    assert obj["output"] == ["a"] * 12 and obj["truncated"] is True  # 2 * 2 + 8
    assert "1 of 1 generation reached the cap of the default 2n + 8" in out.err
    assert cli(["run", str(forever), "a", "--max-new", "3"]) == 0
    out = capsys.readouterr()
    assert out.out == "a\ta a a\n" and "--max-new" in out.err
    # a cap whose tokens alone cannot fit in memory is refused at once (it ran for years)
    for argv in (["run", str(forever), "a"], ["verify", str(forever), "--lengths", "4", "--samples", "1"]):
        assert cli([*argv, "--max-new", str(10**15)]) == 2
        err = capsys.readouterr().err
        assert "--max-new 1,000,000,000,000,000: 1 generation of up to that many tokens needs" in err, err
        assert "hint: at most about" in err
    endless = rasp.parse('alphabet a b\nNEXT[x] = true\noutput generate NEXT\n')
    for run in (endless.run, compiler.compile(endless).run):  # the interpreter and a compiled model
        with pytest.raises(rasp.RaspError, match="max_new 1,000,000,000,000,000"):
            run("a", max_new=10**15)
    twice = tmp_path / "twice.rasp"
    twice.write_text('alphabet a b\nNEXT[x] = #Q[x] < 2\noutput generate NEXT\n')  # stops after a b b
    assert cli(["run", str(twice), "a", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["truncated"] is False and out.err == ""
    assert cli(["run", str(twice), "a", "--max-new", "3", "--json"]) == 0  # 3 tokens: exactly the cap
    assert json.loads(capsys.readouterr().out)["truncated"] is True
    assert cli(["run", str(ROOT / "programs" / "dyck1.cr"), "(", "--json"]) == 0
    assert "truncated" not in json.loads(capsys.readouterr().out)  # acceptors have no cap


def test_cli_usage_errors_under_json_are_json(capsys):
    """A usage error argparse finds (unknown option, missing argument) is exit 2 and, with --json, a
    JSON error object on stdout like any other user error."""
    from rasp.cli import main as cli

    dyck = str(ROOT / "programs" / "dyck1.cr")
    for argv, word in ((["run", dyck, "--json", "--bogus"], "--bogus"),
                       (["verify", "--json"], "target"),
                       (["tasks", "sample", "UR", "--json"], "--length"),
                       (["tasks", "sample", "UR", "--length", "5", "--count", "x", "--json"], "--count"),
                       (["run", dyck, "(", "--json=true"], "--json")):  # (was text only: helper 96)
        assert cli(argv) == 2
        out = capsys.readouterr()
        err = json.loads(out.out)["error"]
        assert word in err["message"] and err["hint"].startswith("usage: rasp") and word in out.err
    assert cli(["run", dyck, "--bogus"]) == 2
    assert capsys.readouterr().out == ""  # without --json, stderr only
    # the tokens are optional (read from stdin without them): only the program is named as missing
    assert cli(["run", "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["error"]["message"] == "the following arguments are required: program"


def test_cli_tasks_json_before_the_subcommand(capsys):
    """`rasp tasks --json sample ...` / `tasks --json show ...` mean the same as the flag after it."""
    from rasp.cli import main as cli

    assert cli(["tasks", "--json", "sample", "UR", "--length", "8", "--seed", "2"]) == 0
    first = capsys.readouterr().out
    assert cli(["tasks", "sample", "UR", "--length", "8", "--seed", "2", "--json"]) == 0
    assert capsys.readouterr().out == first and json.loads(first)["task"] == "UR"
    assert cli(["tasks", "--json", "show", "UR"]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == "UR"


def test_cli_tasks_sample_refuses_a_length_that_cannot_fit(capsys, monkeypatch):
    """A length whose input cannot fit in the free memory is refused before any sampling (it used to
    run for hours), with the largest length that would fit; lengths that fit are unaffected."""
    import rasp.commands.tasks as tasks_cmd
    from rasp.cli import main as cli

    monkeypatch.setattr(tasks_cmd, "free_host_bytes", lambda: 1000 * tasks_cmd.SAMPLE_BYTES_PER_TOKEN)
    assert cli(["tasks", "sample", "UR", "--length", "1001", "--json"]) == 2
    out = capsys.readouterr()
    err = json.loads(out.out)["error"]
    assert "1,001 tokens" in err["message"] and "at most about 1,000 tokens" in err["hint"]
    assert cli(["tasks", "sample", "UR", "--length", "10-5000", "--count", "20", "--seed", "1"]) == 2
    capsys.readouterr()
    assert cli(["tasks", "sample", "UR", "--length", "1000"]) == 0
    assert len(capsys.readouterr().out.split()) == 1000
    # past 2^63 numpy cannot even draw the lengths (it was an internal error)
    for length in ("99999999999999999999", "5-99999999999999999999"):
        assert cli(["tasks", "sample", "UR", "--length", length, "--json"]) == 2
        assert "99,999,999,999,999,999,999 tokens" in json.loads(capsys.readouterr().out)["error"]["message"]
    # a formal language's reference (the allowed symbols after every prefix) takes more per token
    assert cli(["tasks", "sample", "tomita3", "--length", "1000"]) == 2
    assert "at most about 46 tokens" in capsys.readouterr().err
    assert cli(["tasks", "sample", "tomita3", "--length", "46"]) == 0


def test_cli_tokens_that_look_like_options_go_after_a_double_dash(tmp_path, capsys):
    """Tokens may begin with '-': after ``--`` they are tokens wherever the options are (``run P
    --json -- -1 a`` was an unrecognized argument); one before ``--`` and after an option is a usage
    error under the command's own usage, saying where such tokens go. ``rasp learn --jobs`` without
    ``--all`` is refused rather than ignored."""
    from rasp.cli import main as cli

    f = tmp_path / "dash.rasp"
    f.write_text('alphabet "-" "-1" "--x" a\nX = exists "a"\n')
    for argv in (["run", str(f), "--", "-1", "a"], ["run", str(f), "--json", "--", "-1", "a"],
                 ["run", str(f), "-1", "--json", "--", "--x", "a"]):
        assert cli(argv) == 0, argv
        out = capsys.readouterr().out
        assert ("accept" in out or '"output": true' in out), out
    assert cli(["run", str(f), "a", "--json", "-1"]) == 2
    err = json.loads(capsys.readouterr().out)["error"]
    assert "go after --" in err["message"] and err["hint"].startswith("usage: rasp run")
    # after -- nothing is an option: not --json (a usage error stays text)
    assert cli(["run", str(f), "-z", "--", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "unrecognized arguments: -z" in err
    assert cli(["run", "--", str(f), "-1"]) == 0  # the program after -- too
    assert capsys.readouterr().out.split() == ["-1", "reject"]
    assert cli(["learn", "UR", "--jobs", "2", "--preset", "smoke"]) == 2
    assert "--jobs 2 needs --all" in capsys.readouterr().err


# ---- found by a CLI fuzzing audit (2026-12-01) ---------------------------------------------------

def _rasp(*args, env=None, stdout=subprocess.PIPE):
    return subprocess.run([sys.executable, "-m", "rasp", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, cwd=ROOT, env=env)


def test_learn_with_stderr_closed_trains_and_writes(tmp_path):
    """`rasp learn ... 2>&-`: the progress bar and log lines have nowhere to go, and the run still
    trains and writes its result (it exited 1 with no output: the first write to stderr failed)."""
    import shlex

    for extra in ("", "--no-progress"):
        out = tmp_path / f"out{extra}"
        cmd = (f"{shlex.quote(sys.executable)} -m rasp learn majority --preset smoke --steps 2 {extra} "
               f"--out {shlex.quote(str(out))} 2>&-")
        done = subprocess.run(["sh", "-c", cmd], stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert done.returncode == 0 and "wrote " in done.stdout, (extra, done.stdout)
        assert (out / "majority.json").is_file()


def test_output_to_a_full_device_is_not_a_bug():
    """stdout on /dev/full: a user error still exits 2 (its --json line was a traceback), a successful
    run exits 1 with "cannot write the output" (it was an internal error)."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        err = _rasp("run", "programs/dyck1.cr", "--json", "z", stdout=full)
        assert err.returncode == 2 and "Traceback" not in err.stderr and "not in the alphabet" in err.stderr
        ok = _rasp("check", "programs/dyck1.cr", stdout=full)
        assert ok.returncode == 1 and "cannot write the output" in ok.stderr and "internal error" not in ok.stderr


def test_paths_that_cannot_even_be_tested(tmp_path, capsys):
    """A path component over 255 characters made the hint code's is_dir() raise: an internal error."""
    long = str(tmp_path / ("x" * 300))
    for argv in (["check", long, "--json"], ["run", long, "a"], ["compile", long], ["verify", long], ["learn", long]):
        assert main(argv) == 2, argv
        assert "internal error" not in capsys.readouterr().err


def test_learn_arguments_that_crashed(capsys):
    """--threads 99999 crashed the process, --first-seed past 2^63 was an internal error, task names
    were case-sensitive without a suggestion, a directory 'used no registered task'."""
    base = ["learn", "dyck1", "--preset", "smoke", "--steps", "1", "--no-progress"]
    assert main(base + ["--threads", "99999"]) == 2
    assert "--threads must be from 1 to 1,024" in capsys.readouterr().err
    assert main(base + ["--first-seed", str(2 ** 63)]) == 2
    assert "2^63 - 1" in capsys.readouterr().err
    assert main(["learn", "ur2"]) == 2
    assert "did you mean UR?" in capsys.readouterr().err
    assert main(["learn", str(ROOT / "programs")]) == 2
    assert "not a program file" in capsys.readouterr().err


LEARN_BAD_VALUES = [["--steps", "0"], ["--seeds", "0"], ["--layers", "0"], ["--heads", "0"], ["--dim", "0"],
                    ["--batch", "0"], ["--test-samples", "0"], ["--train-max", "0"], ["--dim", "30", "--heads", "4"],
                    ["--lr", "-1"], ["--first-seed", "-1"], ["--threads", "0"], ["--bins", "5,3"], ["--bins", "x"],
                    ["--first-seed", str(2 ** 63 - 1), "--seeds", "2"]]


@pytest.mark.parametrize("flags", LEARN_BAD_VALUES, ids=" ".join)
def test_learn_refusals_have_a_hint(flags, capsys):
    """Every refused value of learn (and report, which shares the checks) says what to give instead."""
    assert main(["learn", "majority", "--preset", "smoke", "--no-progress", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rasp: error: {flags[0]}") and "\nhint: " in err, err


def test_report_refusals_have_a_hint(tmp_path, capsys):
    assert main(["report", "majority", "--preset", "smoke", "--jobs", "0", "--out", str(tmp_path / "r")]) == 2
    assert "--jobs must be at least 1, got 0\nhint: " in capsys.readouterr().err
    assert not (tmp_path / "r").exists()  # refused before the folder is made
    assert main(["report", "majority", "--fresh", "--no-train", "--out", str(tmp_path)]) == 2
    assert "give one of them\nhint: " in capsys.readouterr().err
    # a folder where a task's result goes: one message, before any training (it said "training
    # again" and then refused, after training the tasks before it)
    (tmp_path / "q" / "sort.json").mkdir(parents=True)
    assert main(["report", "majority", "sort", "--preset", "smoke", "--no-progress", "--out", str(tmp_path / "q")]) == 2
    err = capsys.readouterr().err
    assert "sort.json there is a folder" in err and "training again" not in err
    assert sorted(p.name for p in (tmp_path / "q").iterdir()) == ["sort.json"]


def test_learn_reports_a_program_files_own_error(tmp_path, capsys):
    """A program file with a syntax error says so, located (it said only "no registered task uses this
    program"); a valid program that is no task's says how a file names a task."""
    text = (ROOT / "programs" / "majority.rasp").read_text()
    broken = tmp_path / "majority.rasp"
    broken.write_text(text.replace("C[z] <= C[y])", "C[z] <= C[y]"))
    assert main(["learn", str(broken), "--preset", "smoke", "--steps", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{broken}:10:" in err and "is never closed" in err and "no registered task" not in err
    other = tmp_path / "other.rasp"
    other.write_text("\n".join(line for line in text.splitlines() if not line.startswith("//")))
    assert main(["learn", str(other), "--preset", "smoke", "--steps", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "no registered task uses this program" in err and "exactly that text" in err


def test_an_endless_program_file_is_refused(capsys):
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    assert main(["check", "/dev/zero"]) == 2
    assert "larger than 64 MiB" in capsys.readouterr().err


def test_messages_quote_user_text_short_and_escaped(tmp_path, capsys):
    """A 100,000-character token was repeated whole; a raw right-to-left override reordered the
    hint's line; an empty --alphabet for tasks sample was ignored; -o naming a file gave no hint."""
    assert main(["run", "programs/dyck1.cr", "y" * 100000]) == 2
    err = capsys.readouterr().err
    assert "(100,000 characters)" in err and len(err) < 2000
    f = tmp_path / "bidi.rasp"
    f.write_text('alphabet a\nX = #"a" \u202e> 0\n', encoding="utf-8")
    assert main(["check", str(f)]) == 2
    hint = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hint:")][0]
    assert "\u202e" not in hint and "'\\u202e' is not part of the language" in hint
    assert main(["tasks", "sample", "UR", "--length", "8", "--alphabet", ""]) == 2
    assert "--alphabet is empty" in capsys.readouterr().err
    assert main(["compile", "programs/dyck1.cr", "-o", str(ROOT / "README.md")]) == 2
    assert "-o names a directory" in capsys.readouterr().err


def test_quoted_text_closes_its_quote_and_crlf_files_read_as_text(tmp_path):
    """A cut text quoted with " ended in ' (review); a program file's \r\n line ends stay out of its
    source, as text mode read them (the stored source, excerpts, and a copy's match with a bundled
    program's text)."""
    from rasp.errors import quoted
    from rasp.tasks import task_for_program

    assert quoted("it's " * 20).startswith('"it\'s') and quoted("it's " * 20).endswith('..." (100 characters)')
    assert quoted("x" * 50).endswith("...' (50 characters)")
    f = tmp_path / "ur.rasp"
    f.write_bytes((ROOT / "programs" / "ur.rasp").read_bytes().replace(b"\n", b"\r\n"))
    p = rasp.load(str(f))
    assert "\r" not in p.source and task_for_program(None, p.source).name == "UR"
    assert task_for_program(str(f)).name == "UR"  # by path: the file's text, read as text mode reads it
    # a path's text is read up to the longest bundled program's length: a longer file (or /dev/zero,
    # read until memory ran out) is none of them
    (tmp_path / "long.rasp").write_text((ROOT / "programs" / "ur.rasp").read_text() + "\n" * 10**6)
    assert task_for_program(str(tmp_path / "long.rasp")) is None
    assert task_for_program("/dev/zero") is None


def test_non_ascii_tokens_in_an_ascii_locale(tmp_path):
    """In the C locale argv arrives as surrogate escapes: tokens are read as UTF-8, like stdin."""
    import os

    f = tmp_path / "enc.rasp"
    f.write_text('alphabet "é" "中"\nX = #"é" > 0\n', encoding="utf-8")
    env = dict(os.environ, PYTHONUTF8="0", LC_ALL="C", PYTHONCOERCECLOCALE="0")
    out = _rasp("run", str(f), "é", env=env)
    assert out.returncode == 0 and "accept" in out.stdout, out.stderr


def test_non_ascii_alphabet_option_in_an_ascii_locale(tmp_path):
    """--alphabet is read as UTF-8 like the tokens: in the C locale it arrived as surrogate escapes
    and no symbol matched ('symbol "\\xe9" is not in the alphabet: \\udcc3\\udca9 ...')."""
    import os

    f = tmp_path / "enc.rasp"
    f.write_text('alphabet "é" "ü"\nok = #"é" > #"ü"\noutput accept ok\n', encoding="utf-8")
    env = dict(os.environ, PYTHONUTF8="0", LC_ALL="C", PYTHONCOERCECLOCALE="0")
    out = _rasp("run", str(f), "--alphabet", "é,ü", "é", "é", "ü", env=env)
    assert out.returncode == 0 and "accept" in out.stdout, out.stderr
    out = _rasp("tasks", "sample", "majority", "--length", "5", "--alphabet", "é,ü", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert set(json.loads(out.stdout)["tokens"]) <= {"é", "ü", "<sep>"}


def test_unreadable_stdin_is_a_user_error(capsys, monkeypatch):
    """stdin closed (`<&-`: sys.stdin is None) or not readable (`0>/dev/null`) is a message and exit
    2; it was an internal error, and a failed read was reported as a failed write."""
    dyck = str(ROOT / "programs" / "dyck1.cr")
    monkeypatch.setattr(sys, "stdin", None)
    assert main(["run", dyck]) == 2
    assert "cannot read standard input: it is closed" in capsys.readouterr().err

    class Unreadable(io.RawIOBase):
        def readable(self):
            return True

        def readinto(self, b):
            raise OSError(9, "Bad file descriptor")

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(Unreadable())))
    assert main(["run", dyck, "--json"]) == 2
    out, err = capsys.readouterr()
    assert "cannot read standard input: Bad file descriptor" in err
    assert json.loads(out)["error"]["message"] == "cannot read standard input: Bad file descriptor"
    assert "write" not in err


def test_stdin_comment_lines_yield_to_a_symbol_that_begins_with_slashes(tmp_path, capsys, monkeypatch):
    """A line that begins with // is a comment, unless a symbol of the alphabet begins so: then it is
    an input (every line was dropped, and the run printed fewer outputs than inputs)."""
    f = tmp_path / "sl.rasp"
    f.write_text('alphabet "//" c\nok = #"//" > #"c"\noutput accept ok\n')
    monkeypatch.setattr(sys, "stdin", io.StringIO("// c\nc c\n// // c\n"))
    assert main(["run", str(f)]) == 0
    assert capsys.readouterr().out == "// c\treject\nc c\treject\n// // c\taccept\n"
    g = tmp_path / "c.rasp"
    g.write_text('alphabet "//" c\nok = #"c" > 1\noutput accept ok\n')
    monkeypatch.setattr(sys, "stdin", io.StringIO("// c\nc c\n"))
    assert main(["run", str(g), "--alphabet", "c,d"]) == 0  # no such symbol now: a comment again
    assert capsys.readouterr().out == "c c\taccept\n"


def test_a_second_double_dash_is_an_error(tmp_path, capsys):
    """A token that is exactly -- cannot be given on the command line: a second -- was dropped
    silently (`-- c -- c` ran on `c c`); it is a usage error, and stdin takes such inputs."""
    f = tmp_path / "dd.rasp"
    f.write_text('alphabet "--" "-x" c\nX = #"c" > 0\n')
    for tail in (["--", "c", "--", "c"], ["--", "--", "c"], ["c", "--", "--", "c"], ["--json", "--", "--"]):
        assert main(["run", str(f), *tail]) == 2, tail
        assert "exactly -- cannot be given" in capsys.readouterr().err
    assert main(["run", str(f), "--", "-x", "c"]) == 0
    assert capsys.readouterr().out.startswith("-x c\taccept")


def test_cli_out_of_memory_is_a_user_error(capsys, monkeypatch):
    """Running out of memory (an input too large for the machine) is a message and exit 2, with the
    error as JSON under --json; it was "internal error (a bug in rasp): MemoryError", exit 1."""
    from rasp.cli import main as cli

    def boom(self, inputs, max_new=None):
        raise MemoryError("Unable to allocate 2.3 GiB for an array with shape (22952, 100000)")

    monkeypatch.setattr(rasp.Program, "run_batch", boom)
    assert cli(["run", str(ROOT / "programs" / "dyck1.cr"), "(", ")"]) == 2
    err = capsys.readouterr().err
    assert "out of memory: `rasp run` needed more memory than is free here (Unable to allocate 2.3 GiB" in err
    assert "try shorter inputs, or fewer at once" in err and "internal error" not in err
    assert cli(["run", "--json", str(ROOT / "programs" / "dyck1.cr"), "(", ")"]) == 2
    assert json.loads(capsys.readouterr().out)["error"]["message"].startswith("out of memory")
