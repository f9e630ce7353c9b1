"""Compiled models on disk and on the command line: save/load round trip, corrupted and foreign
files, ``rasp compile`` and ``rasp verify``, and the CUDA paths (skipped without a GPU)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import compiler
import rasp
from compiler import verify as V
from rasp.cli import main

ROOT = Path(__file__).resolve().parent.parent
DYCK = str(ROOT / "programs" / "dyck1.cr")
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


pytestmark = pytest.mark.usefixtures("one_thread")  # (tests/conftest.py)


@pytest.fixture(scope="module")
def ur_model():
    return compiler.compile(rasp.load(ROOT / "programs" / "ur.rasp").with_alphabet(["a", "b", "c", "d"]))


def test_save_load_round_trip(tmp_path, ur_model):
    path = ur_model.save(tmp_path / "m")
    assert {p.name for p in path.iterdir()} == {"model.safetensors", "config.json"}
    cfg = json.loads((path / "config.json").read_text())
    for key in ("architecture", "residual", "program", "output", "compiler_version", "size", "weights_sha256"):
        assert key in cfg
    assert cfg["program"]["alphabet"] == ["a", "b", "c", "d"] and cfg["output"]["kind"] == "generate"
    assert "PREV[x]" in cfg["program"]["source"]
    loaded = compiler.load(path)
    a, b = ur_model.module.weights(), loaded.module.weights()
    assert a.keys() == b.keys()
    for k in a:
        assert a[k][0] == b[k][0] and torch.equal(a[k][1], b[k][1]) and torch.equal(a[k][2], b[k][2])
    rng = np.random.default_rng(0)
    task_inputs = [["a", "b", "c", "d", "<sep>", s] for s in "abcd"]
    inputs = task_inputs + [[str(s) for s in rng.choice(list(ur_model.symbols), size=n)] for n in (1, 5, 30)]
    for dtype in ("float64", "float32", "bfloat16"):
        assert ur_model.run_batch(inputs, dtype=dtype) == loaded.run_batch(inputs, dtype=dtype)
    assert loaded.run(task_inputs[1]) == rasp.run(ur_model.program, task_inputs[1]) == ["c"]


def _saved(tmp_path) -> Path:
    return compiler.compile(rasp.load(DYCK)).save(tmp_path / "dyck")


def test_corrupted_weights_are_a_clear_error(tmp_path):
    path = _saved(tmp_path)
    data = bytearray((path / "model.safetensors").read_bytes())
    data[-3] ^= 0xFF  # flip bits in the tensor data: the header still parses
    (path / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(rasp.RaspError, match="corrupted") as info:
        compiler.load(path)
    assert info.value.hint.startswith("recompile it: rasp compile PROGRAM -o DIR")
    (path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(rasp.RaspError):
        compiler.load(path)


def test_a_coordinate_listed_twice_is_refused(tmp_path):
    """A sparse tensor whose coordinate appears twice (its values would add up) is not a file rasp
    compile writes: refused, even with the hash in config.json updated to match."""
    import hashlib

    from safetensors import safe_open
    from safetensors.torch import save_file

    path = _saved(tmp_path)
    with safe_open(str(path / "model.safetensors"), framework="pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    k = next(k for k in tensors if k.endswith(".indices") and tensors[k].shape[1] >= 2)
    tensors[k] = tensors[k].clone()
    tensors[k][:, 1] = tensors[k][:, 0]
    save_file(tensors, str(path / "model.safetensors"), metadata=meta)
    cfg = json.loads((path / "config.json").read_text())
    cfg["weights_sha256"] = hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(rasp.RaspError, match="lists a coordinate twice"):
        compiler.load(path)


def test_foreign_files_are_a_clear_error(tmp_path):
    from safetensors.torch import save_file

    path = _saved(tmp_path)
    cfg = json.loads((path / "config.json").read_text())
    # a foreign weights file (other tensors), with the hash updated so that the content check runs
    from safetensors import safe_open

    with safe_open(str(path / "model.safetensors"), framework="pt") as f:
        meta = f.metadata()
    save_file({"weight": torch.zeros(3, 3)}, str(path / "model.safetensors"))
    import hashlib
    cfg["weights_sha256"] = hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(rasp.RaspError, match="does not record the shapes"):
        compiler.load(path)
    # the same foreign tensors under the model's own metadata
    save_file({"weight": torch.zeros(3, 3)}, str(path / "model.safetensors"), metadata=meta)
    cfg["weights_sha256"] = hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(rasp.RaspError, match=r"do not match the architecture \(missing: .*; unexpected: weight\)"):
        compiler.load(path)
    # a foreign config
    (path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(rasp.RaspError, match="not a compiled rasp model"):
        compiler.load(path)
    (path / "config.json").write_text("{broken")
    with pytest.raises(rasp.RaspError, match="JSON"):
        compiler.load(path)
    with pytest.raises(rasp.RaspError, match="not a directory"):
        compiler.load(tmp_path / "nowhere")
    (path / "config.json").unlink()
    with pytest.raises(rasp.RaspError, match="missing"):
        compiler.load(path)


def _damage(cfg: dict, what: str) -> None:
    if what == "no program":
        del cfg["program"]
    elif what == "program not an object":
        cfg["program"] = "x"
    elif what == "source not text":
        del cfg["program"]["source"]
    elif what == "alphabet not a list":
        cfg["program"]["alphabet"] = 5
    elif what == "unknown output kind":
        cfg["output"]["kind"] = "bogus"
    elif what == "output kind of another program":
        cfg["output"]["kind"] = "generate"
    elif what == "residual labels missing":
        cfg["residual"] = cfg["residual"][:-1]
    elif what == "no weights hash":
        del cfg["weights_sha256"]
    elif what == "size incomplete":
        del cfg["size"]["d_model"]


DAMAGE = {"no program": "'program' is not an object", "program not an object": "'program' is not an object",
          "source not text": "source", "alphabet not a list": "alphabet", "unknown output kind": "output.kind",
          "output kind of another program": "output kind", "residual labels missing": "residual labels",
          "no weights hash": "weights_sha256", "size incomplete": "size"}


@pytest.mark.parametrize("what", list(DAMAGE))
def test_damaged_config_is_a_clear_error(tmp_path, capsys, what):
    """Every part of config.json that loading and running read is checked: a damaged one is a
    RaspError naming it, and ``rasp verify DIR`` exits 2 (not a traceback, not a disagreement)."""
    path = _saved(tmp_path)
    cfg = json.loads((path / "config.json").read_text())
    _damage(cfg, what)
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(rasp.RaspError, match=DAMAGE[what]) as info:
        compiler.load(path)
    assert info.value.hint  # what to do about it (most had none: helper 77)
    assert main(["verify", str(path), "--lengths", "8", "--samples", "2"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "\nhint: " in err


def test_malformed_config_json_is_located_and_a_byte_order_mark_is_allowed(tmp_path, capsys):
    """config.json that is not JSON: a located error (file:line:col, the line, a caret), as a
    program's syntax error is; one that starts with a UTF-8 byte-order mark loads (programs may too)."""
    path = _saved(tmp_path)
    text = (path / "config.json").read_text()
    (path / "config.json").write_text('{"format": \n  oops')
    assert main(["verify", str(path), "--lengths", "8", "--samples", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{path / 'config.json'}:2:3: error: not readable JSON") and "  oops\n    ^" in err, err
    (path / "config.json").write_text(text, encoding="utf-8-sig")
    assert compiler.load(path).run("( )") is True


def test_consistent_edits_of_special_tokens_and_outputs_are_refused(tmp_path):
    """config.json edited and saved again, so that both digests agree (a helper forged them so):
    special tokens or output names that are not the stored program's are refused on loading."""
    import copy

    base = compiler.compile(rasp.load(ROOT / "programs" / "ur.rasp"), alphabet=["a", "b", "c"])
    names = ["nosuch"] + base.config["output"]["names"][1:]  # as many as before (else n_outputs differs)
    for key, value, word in (("special", ["<x>"], "program.special"), ("names", names, "output.names")):
        m = copy.copy(base)
        m.config = copy.deepcopy(base.config)
        (m.config["program"] if key == "special" else m.config["output"])[key] = value
        path = m.save(tmp_path / key)
        with pytest.raises(rasp.RaspError, match=word):
            compiler.load(path)
    assert compiler.load(base.save(tmp_path / "ok")).run("a b c <sep> a") == base.run("a b c <sep> a")


def test_weights_of_another_architecture_are_a_clear_error(tmp_path):
    """Another model's weights under this config (its hash updated, so the content check passes):
    the dense shapes saved with the weights do not match the config's architecture."""
    import hashlib

    path = _saved(tmp_path)
    other = compiler.compile(rasp.load(ROOT / "programs" / "bin_majority.rasp")).save(tmp_path / "bm")
    (path / "model.safetensors").write_bytes((other / "model.safetensors").read_bytes())
    cfg = json.loads((path / "config.json").read_text())
    cfg["weights_sha256"] = hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(rasp.RaspError, match="another architecture"):
        compiler.load(path)
    # files written before the shapes were recorded (metadata: the format name only) are refused:
    # nothing would tie them to this config.json
    from safetensors.numpy import load_file, save_file

    fresh = _saved(tmp_path / "old")
    save_file(load_file(str(fresh / "model.safetensors")), str(fresh / "model.safetensors"),
              metadata={"format": "rasp-compiled-transformer"})
    cfg = json.loads((fresh / "config.json").read_text())
    cfg["weights_sha256"] = hashlib.sha256((fresh / "model.safetensors").read_bytes()).hexdigest()
    (fresh / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(rasp.RaspError, match="does not record the shapes"):
        compiler.load(fresh)


BAD_FLAGS = [  # (argv after the program, a word the message must contain)
    (["verify", "--lengths", "16", "--seed", "-1"], "--seed"),
    (["verify", "--find-limit", "--start", "0", "--inputs", "uniform"], "--start"),
    (["verify", "--find-limit", "--max-length", "0"], "--max-length"),
    (["verify", "--find-limit", "--budget", "-1"], "--budget"),
    (["verify", "--max-new", "-1"], "--max-new"),
    (["verify", "--dtype", ","], "--dtype"),
    (["verify", "--device", "tpu"], "--device"),
    (["verify", "--device", ""], "--device"),
    (["verify", "--lengths", "1000000000000", "--samples", "1"], "would need about"),
    (["verify", "--lengths", "1000000000", "--samples", "3"], "would need about"),  # before memory runs out
    # refused before any row runs (a row measured first was thrown away with the refusal)
    (["verify", "--lengths", "16,1000000000", "--samples", "3", "--dtype", "float64,float32"], "would need about"),
    (["verify", "--find-limit", "--budget", "nan"], "--budget"),
    (["verify", "--find-limit", "--budget", "inf"], "finite"),  # it searched until memory ran out
    (["verify", "--find-limit", "--start", "100", "--max-length", "50"], "below --start"),
    (["verify", "--start", "64"], "--find-limit"),
    (["verify", "--budget", "5", "--max-length", "64"], "--find-limit"),
    (["compile", "-o", ""], "-o"),
    (["compile", "--alphabet", ""], "--alphabet"),
    (["compile", "--alphabet", "-1"], "--alphabet"),
    # a doubled or trailing comma is a typo, not an item to drop (they were dropped silently)
    (["compile", "--alphabet", "(,,)"], "an empty symbol between commas"),
    (["verify", "--lengths", "16,,32"], "an empty length between commas"),
    (["verify", "--lengths", "16,"], "an empty length between commas"),
    (["verify", "--lengths", ""], "no length given"),
    (["verify", "--lengths", "16,-3"], "positive integers, got '16,-3'"),
    (["verify", "--dtype", "float32,,float64"], "an empty dtype between commas"),
    # torch takes cpu:1 and runs on the one CPU
    (["verify", "--device", "cpu:1"], "one CPU device"),
]


@pytest.mark.parametrize("argv,word", BAD_FLAGS, ids=[" ".join(a) for a, _ in BAD_FLAGS])
def test_bad_flag_values_exit_2(argv, word, capsys):
    assert main([argv[0], DYCK] + argv[1:]) == 2
    err = capsys.readouterr().err
    assert word in err and "Traceback" not in err and "internal error" not in err
    # every refusal says what to give instead: a hint, or argparse's usage (helper 70 found six without)
    assert "\nhint: " in err or err.startswith("usage: "), err


def test_verify_refuses_a_row_too_big_before_running_any(capsys):
    """Every row's memory is checked first: the 16-token row once ran, then the refusal of the next
    threw it away (no row in the output, nothing in --json)."""
    assert main(["verify", DYCK, "--lengths", "16,1000000000", "--samples", "3"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "1,000,000,000 tokens would need about" in err


def test_cli_special_token_in_alphabet_and_nothing_to_verify(capsys):
    ur = str(ROOT / "programs" / "ur.rasp")
    assert main(["compile", ur, "--alphabet", "<sep>,a"]) == 2
    assert "special token" in capsys.readouterr().err
    # UF's inputs have distinct tokens: over 4 symbols at most 5 tokens; a longer length checks nothing
    assert main(["verify", str(ROOT / "programs" / "uf.rasp"), "--alphabet", "4", "--lengths", "50"]) == 2
    assert "nothing was verified" in capsys.readouterr().err


def test_binary_program_file_exit_2(tmp_path, capsys):
    f = tmp_path / "bin.cr"
    f.write_bytes(bytes(range(128, 256)))
    assert main(["compile", str(f)]) == 2
    assert "not UTF-8" in capsys.readouterr().err
    bom = tmp_path / "bom.cr"  # a UTF-8 byte-order mark (some editors write one) is not part of the program
    bom.write_bytes(b"\xef\xbb\xbf" + Path(DYCK).read_bytes())
    assert rasp.load(bom).run("( )") is True


def test_too_deep_programs_are_user_errors(monkeypatch):
    """A lowering or a graph that exceeds Python's recursion limit is a RaspError, not a crash; a
    bounded lowering beyond MAX_BOUNDED_LENGTH is refused at once."""
    from compiler import api
    from compiler.bounded import compile_raspl
    from rasp import raspl

    mode = rasp.load(ROOT / "programs" / "raspl_mode.rasp")
    with pytest.raises(rasp.RaspError, match="too large for a bounded model"):
        compile_raspl(mode, max_length=raspl.MAX_BOUNDED_LENGTH + 1)

    def deep(*a, **k):
        raise RecursionError

    with monkeypatch.context() as m:
        m.setattr(raspl._Lowerer, "run", deep)
        with pytest.raises(rasp.RaspError, match="nests too deeply") as info:
            compile_raspl(mode, max_length=8)
        # located at the deepest definition; a smaller --max-length is named only for a bounded model
        deepest = rasp.ast.deepest_definition(mode.module)
        assert info.value.span == deepest.span and "smaller --max-length" in info.value.hint
        with pytest.raises(rasp.RaspError, match="nests too deeply") as info:
            compile_raspl(mode)
        assert info.value.span == deepest.span and "--max-length" not in info.value.hint
        assert "split" in info.value.hint and "--alphabet" in info.value.hint
    with monkeypatch.context() as m:  # the lowered program's own type check (long token disjunctions)
        m.setattr(raspl, "check_module", deep)
        with pytest.raises(rasp.RaspError, match="nests too deeply"):
            compile_raspl(mode, max_length=8)
    with monkeypatch.context() as m:
        m.setattr(api, "build_graph", deep)
        with pytest.raises(rasp.RaspError, match="nests too deeply"):
            compiler.compile(rasp.load(DYCK))


def test_a_long_chain_of_definitions_compiles():
    """``D_k = D_(k-1) && (...)`` 300 times: the graph pass worked the chain out one definition inside
    the other and passed Python's recursion limit at about 170 ("nests too deeply" for a program
    already split into definitions); it now starts afresh every DEF_DEPTH definitions."""
    from compiler.graph import DEF_DEPTH

    lines = ["alphabet a b", 'D0 = "a"']
    lines += [f'D{k} = D{k - 1} {"&&" if k % 2 else "||"} (#"a" > #"b" + {k % 7 - 3})' for k in range(1, 300)]
    program = rasp.parse("\n".join(lines))
    assert 300 > 5 * DEF_DEPTH
    m = compiler.compile(program)
    rng = np.random.default_rng(0)
    inputs = [list(rng.choice(["a", "b"], size=n)) for n in (1, 2, 5, 9, 30, 30, 100)]
    assert [m.run(x) for x in inputs] == [program.run(x) for x in inputs]


def test_a_long_chain_of_count_definitions_compiles():
    """``C_k = C_(k-1) + #P`` 1,500 times, with differences and multiples on the way: count
    definitions are read into the comparison that uses them, and that reading recursed once per
    definition ("nests too deeply to compile" at about 500, with a hint to split what was split)."""
    lines = ["alphabet a b c", 'C0 = #"a"']
    for k in range(1, 1500):
        step = ['#"b"', '- #"c"', '+ 2 * #"c"', '- 0 * #"a"'][k % 4]
        lines.append(f"C{k} = C{k - 1} {step if step[0] in '+-' else '+ ' + step}")
    lines += ['Y = C1499 > 3 * #"b" + 2', "output accept Y"]
    program = rasp.parse("\n".join(lines))
    m = compiler.compile(program)
    assert m.size["heads"] == 1  # one linear atom: a + 371 b + 375 c - 3 >= 0
    rng = np.random.default_rng(1)
    inputs = [list(rng.choice(["a", "b", "c"], size=n)) for n in (1, 2, 5, 9, 30, 30, 100)]
    inputs += [["b"] * 5, ["a", "a", "a"], ["b", "b", "b", "c"]]
    assert [m.run(x) for x in inputs] == [program.run(x) for x in inputs]


def test_cli_compile_to_unwritable_places(tmp_path, capsys):
    import os

    (tmp_path / "a" / "model.safetensors").mkdir(parents=True)  # the weights' path is a directory
    assert main(["compile", DYCK, "-o", str(tmp_path / "a")]) == 2
    assert "cannot write the model" in capsys.readouterr().err
    # the message names the file, and nothing is written when either file cannot be (the weights
    # were written before the config's rename failed, and the message named the folder)
    (tmp_path / "c" / "config.json").mkdir(parents=True)
    assert main(["compile", DYCK, "-o", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert f"cannot write the model to {tmp_path / 'c' / 'config.json'}: Is a directory" in err and "hint: " in err
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["config.json"]
    old = os.umask(0o022)
    try:
        assert main(["compile", DYCK, "-o", str(tmp_path / "b")]) == 0
    finally:
        os.umask(old)
    for name in ("model.safetensors", "config.json"):  # both readable by others, as the umask allows
        assert (tmp_path / "b" / name).stat().st_mode & 0o044 == 0o044, name


def test_cli_compile(tmp_path, capsys):
    out = tmp_path / "m"
    assert main(["compile", DYCK, "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "2 layers, 4 heads, d_model 13" in text and "parameters" in text
    assert (out / "model.safetensors").is_file()
    assert main(["compile", DYCK, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["layers"] == 2 and info["heads"] == 4 and info["d_model"] == 13 and info["parameters"] > 0
    assert info["mlp_width"] == 1 and info["output_kind"] == "accept"
    passes = info["compile_passes_s"]
    assert list(passes) == ["rewrite", "graph", "plan", "alloc", "weights", "config", "gc"]
    # the passes account for the whole compile (building config.json and the collector's catch-up included)
    assert all(v >= 0 for v in passes.values()) and abs(sum(passes.values()) - info["compile_seconds"]) < 1e-5
    bad = tmp_path / "bad.rasp"
    bad.write_text('alphabet a b\nX = #[2 * j <= i] "a" > 1\n')  # (#[j <= 3] is C-RASP through #true)
    assert main(["compile", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.rasp:2:" in err and "not in C-RASP[periodic, local]" in err


def test_cli_verify_program_and_directory(tmp_path, capsys):
    assert main(["verify", DYCK, "--lengths", "8,64", "--samples", "3", "--json", "--device", "auto"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["exact"] is True and [r["length"] for r in res["rows"]] == [8, 64]
    assert all(r["agree"] == 1.0 and r["samples"] == 3 for r in res["rows"])
    assert res["rows"][0]["device"] == ("cuda:0" if torch.cuda.is_available() else "cpu")
    out = tmp_path / "m"
    assert main(["compile", DYCK, "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["verify", str(out), "--lengths", "16", "--samples", "2", "--dtype", "float32,bfloat16"]) == 0
    text = capsys.readouterr().out
    assert "exact: yes" in text and "bfloat16" in text
    assert main(["verify", str(out), "--alphabet", "a,b"]) == 2


def test_a_saved_model_finds_its_task_by_its_text(tmp_path, capsys, monkeypatch):
    """A saved model records its file name relative to where it was compiled: a user's own
    programs/dyck1.cr, verified from the repository root, was taken for the bundled one and checked
    against Dyck-1's reference (a false "not exact"); the bundled program's model, verified anywhere,
    samples Dyck-1's inputs."""
    (tmp_path / "programs").mkdir()
    (tmp_path / "programs" / "dyck1.cr").write_text('D = #"(" - #")"\nok = D >= 0\n')
    monkeypatch.chdir(tmp_path)
    assert main(["compile", "programs/dyck1.cr", "-o", "own"]) == 0
    assert main(["compile", DYCK, "-o", "bundled"]) == 0
    capsys.readouterr()
    for where in (ROOT, tmp_path):
        monkeypatch.chdir(where)
        assert main(["verify", str(tmp_path / "own"), "--lengths", "8", "--samples", "8", "--json"]) == 0
        assert "uniform" in json.loads(capsys.readouterr().out)["sampler"]
        assert main(["verify", str(tmp_path / "bundled"), "--lengths", "8", "--samples", "8", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["sampler"] == "task dyck1"


def test_verify_arguments_that_were_misread(tmp_path, capsys):
    """Found by an audit: an empty target verified the current directory; a model's file instead of its
    directory was parsed as a program; a fixed-alphabet task over a reordered alphabet hinted at other
    tasks; a task without inputs over the model's alphabet hinted "--lengths up to 0"; repeated dtypes
    and lengths gave repeated rows; an empty directory name saved into the current directory."""
    assert main(["verify", ""]) == 2
    assert "empty name" in capsys.readouterr().err
    out = tmp_path / "m"
    assert main(["compile", DYCK, "-o", str(out)]) == 0
    capsys.readouterr()
    for f in ("config.json", "model.safetensors"):
        assert main(["verify", str(out / f)]) == 2
        assert f"verify the directory: rasp verify {out}" in capsys.readouterr().err
    assert main(["compile", DYCK, "--alphabet", "),(", "-o", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    assert main(["verify", str(tmp_path / "r"), "--lengths", "8"]) == 2
    assert "hint: verify with --inputs uniform" in capsys.readouterr().err
    assert main(["verify", str(tmp_path / "r"), "--lengths", "8", "--inputs", "uniform"]) == 0
    capsys.readouterr()
    assert main(["verify", str(ROOT / "programs" / "ur.rasp"), "--alphabet", "1", "--lengths", "2,8"]) == 2
    err = capsys.readouterr().err
    assert "has no input over this model's alphabet" in err and "up to 0" not in err
    assert main(["verify", DYCK, "--lengths", "8,8,16", "--dtype", "float32,float32", "--samples", "1", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [r["length"] for r in res["rows"]] == [8, 16] and res["dtypes"] == ["float32"]
    assert res["compiler_version"] == compiler.api.COMPILER_VERSION
    m = compiler.compile(DYCK)
    for bad in ("", None):
        with pytest.raises(rasp.RaspError, match="a model directory is a non-empty path"):
            m.save(bad)
        with pytest.raises(rasp.RaspError, match="a model directory is a non-empty path"):
            compiler.load(bad)


def test_find_limit_tests_the_last_length_allowed():
    """Doubling from 4 under a cap of 12 tests 12 itself (it stopped at 8)."""
    m = compiler.compile(DYCK)
    out = V.find_limit(m, None, "float32", samples=1, rng=np.random.default_rng(0), start=4, max_length=12)
    assert out["longest_exact"] == 12 and out["stopped"] == "max length 12"


def test_cli_verify_find_limit(capsys):
    assert main(["verify", str(ROOT / "programs" / "bin_majority.rasp"), "--lengths", "16", "--samples", "2",
                 "--find-limit", "--start", "64", "--max-length", "1024", "--budget", "20", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    (lim,) = res["limits"]
    assert lim["dtype"] == "float32" and lim["longest_exact"] == 1024 and "max length" in lim["stopped"]
    assert [r["length"] for r in res["rows"]] == [16, 64, 128, 256, 512, 1024]


def _clear_refs_writable() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def test_peak_memory_measures_an_allocation():
    """PeakMemory sees a 256 MiB array that lives only inside the block (on CPU, device = host), not
    a larger one freed before it (the peak is reset at the start); a block that raises reports
    nothing; where /proc/self/clear_refs cannot be written the figures are None, not wrong."""
    big = np.ones(64 * 2**20)  # 512 MiB, touched, then freed: the process's peak is now above it
    del big
    with V.PeakMemory("cpu") as small:
        x = np.ones(2**20)  # 8 MiB
        del x
    with V.PeakMemory("cpu") as p:
        a = np.ones(32 * 2**20)  # 256 MiB
        del a
    with pytest.raises(ZeroDivisionError):
        with V.PeakMemory("cpu") as failed:
            np.ones(2**20)
            1 / 0
    assert failed.host_bytes is None and failed.device_bytes is None
    if not _clear_refs_writable():
        assert p.host_bytes is None and p.device_bytes is None
        return
    assert 250 * 2**20 <= p.host_bytes < 2**30
    assert p.device_bytes == p.host_bytes
    assert small.host_bytes < 100 * 2**20


def test_predict_bytes_scales_the_last_two_steps():
    """Linear in the length from the larger per-token rate of the last two steps above the floor,
    with the margin; quadratic for the dense backend; the analytic estimate before any step reached
    the floor (or where nothing was measured), for the host too."""
    m = compiler.compile(rasp.load(DYCK))
    M, F = V.MEMORY_MARGIN, V.MEASURE_FLOOR
    steps = [(512, 9 * F, 9 * F), (1024, 10 * F, 10 * F)]
    assert V.predict_bytes(m, 2048, 1, "float32", "scan", steps) == (int(M * 2048 * 9 * F / 512),) * 2
    steps = [(1, 10**12, None), (512, F, None), (1024, 4 * F, None)]  # the first is not among the last two
    est = V.estimate_bytes(m, 2048, 1, "float32")
    assert V.predict_bytes(m, 2048, 1, "float32", "scan", steps) == (int(M * 8 * F), est)
    assert V.predict_bytes(m, 64, 1, "float32", "dense", [(32, F, F)]) == (int(M * 4 * F),) * 2
    est = V.estimate_bytes(m, 4096, 3, "float32")
    assert V.predict_bytes(m, 4096, 3, "float32", "scan", []) == (est, est)
    assert V.predict_bytes(m, 4096, 3, "float32", "scan", [(16, None, None), (32, 0, 0), (64, F - 1, F - 1)]) == (est, est)
    assert V.estimate_bytes(m, 64, 1, "float32", "dense") > V.estimate_bytes(m, 64, 1, "float32") + 3 * 65**2


def test_memory_stop_checks_the_device_and_on_cuda_the_host():
    free = {"cpu": 1000, "cuda": 10_000}.get
    fake = lambda d: free(d.type)  # noqa: E731
    assert V.memory_stop("cpu", 500, 500, fake) is None
    assert V.memory_stop("cpu", 501, 0, fake) == {"memory": "cpu", "need_bytes": 501, "free_bytes": 1000}
    assert V.memory_stop(torch.device("cuda"), 5000, 500, fake) is None
    assert V.memory_stop(torch.device("cuda"), 5001, 0, fake)["memory"] == "cuda"
    assert V.memory_stop(torch.device("cuda"), 10, 501, fake) == {"memory": "cpu", "need_bytes": 501, "free_bytes": 1000}


def test_find_limit_stops_on_the_measured_memory_budget(monkeypatch):
    """Steps that measure 2^20 bytes per token, 10^11 bytes free: the step at n runs while
    1.5 * 2^20 * n <= 0.5 * 10^11: up to 16,384; 32,768 is refused (no step is run for it)."""
    m = compiler.compile(rasp.load(DYCK))
    ran = []

    def fake_step(model, task, n, samples, rng, **kw):
        ran.append(n)
        return V.Row(length=n, samples=samples, agree=1.0, agree_interpreter=1.0, agree_reference=None,
                     model_seconds=0.0, interp_seconds=0.0, dtype="float32", device="cpu", backend="scan",
                     peak_bytes=2**20 * n, host_peak_bytes=2**20 * n)

    monkeypatch.setattr(V, "verify_length", fake_step)
    monkeypatch.setattr(V, "free_memory", lambda dev: 10**11)
    lim = V.find_limit(m, None, "float32", samples=1, rng=np.random.default_rng(0), start=16, budget_s=60)
    assert lim["longest_exact"] == 16384 and ran[-1] == 16384 and lim["stopped"] == "memory budget"
    assert lim["memory"] == {"memory": "cpu", "need_bytes": int(1.5 * 2**20 * 32768), "free_bytes": 10**11,
                             "length": 32768}


def test_verify_json_rows_report_peak_memory(capsys):
    assert main(["verify", str(ROOT / "programs" / "majority.rasp"), "--lengths", "4096", "--samples", "2",
                 "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["peak_bytes"] == row["host_peak_bytes"]  # CPU
    if _clear_refs_writable():
        assert row["peak_bytes"] > 50 * 2**20  # about 150 MB: two 4,096-token inputs of a d_model 1,355 model
    else:
        assert row["peak_bytes"] is None


def test_verify_reports_disagreement(capsys, monkeypatch):
    """A model that disagrees makes verify exit 1 with the first disagreeing input."""
    from compiler import api

    def broken(self, inputs, **kw):
        return [np.zeros((len(t), 1), dtype=bool) for t in inputs]

    monkeypatch.setattr(api.CompiledModel, "outputs", broken)
    assert main(["verify", DYCK, "--lengths", "4", "--samples", "20", "--json"]) == 1
    res = json.loads(capsys.readouterr().out)
    assert res["exact"] is False and res["rows"][0]["agree"] < 1 and res["rows"][0]["example"]


def test_device_auto_and_backends_on_cpu():
    from compiler.model import resolve_device

    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    m = compiler.compile(rasp.load(DYCK)).model("cpu", "float32")
    assert m.pick_backend("auto") == "scan"
    with pytest.raises(rasp.RaspError):
        m.pick_backend("flash")


@cuda
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_cuda_matches_cpu(dtype, ur_model):
    rng = np.random.default_rng(1)
    inputs = [[str(s) for s in rng.choice(list(ur_model.symbols), size=n)] for n in (1, 7, 300, 3000)]
    cpu = ur_model.outputs(inputs, device="cpu", dtype=dtype)
    for backend in ("auto", "scan", "dense" if dtype != "bfloat16" else "scan"):
        gpu = ur_model.outputs(inputs[:3] if backend == "dense" else inputs, device="cuda", dtype=dtype,
                               backend=backend)
        for a, b in zip(cpu, gpu):
            assert np.array_equal(a, b)
    assert ur_model.model("cuda", dtype).pick_backend("auto") == ("scan" if dtype == "float64" else "sdpa")
    same, _, _, _, _ = V.check_inputs(ur_model, inputs, [None] * len(inputs), device="cuda", dtype=dtype)
    assert all(same)


@cuda
@pytest.mark.cuda
def test_cuda_long_input_sdpa_is_exact():
    p = rasp.load(ROOT / "programs" / "bin_majority.rasp")
    m = compiler.compile(p)
    rng = np.random.default_rng(2)
    toks = [p.alphabet[int(b)] for b in rng.random(1 << 18) < 0.5]
    for dtype in ("float32", "bfloat16"):
        same, _, _, _, _ = V.check_inputs(m, [toks], [None], device="cuda", dtype=dtype, backend="sdpa", max_new=4)
        assert all(same)


@cuda
@pytest.mark.cuda
def test_cuda_auto_keeps_large_head_values_exact():
    """Head values near 2^22: the fused kernels' float32 accumulator would round their sums within a
    few tokens, so auto takes scan there, and agrees with the interpreter in float32."""
    p = rasp.parse('alphabet a b\nX = 4194303 * #"a" - 4194304 * #"b" + 2 >= 0\n')
    m = compiler.compile(p)
    assert m.model("cuda", "float32").pick_backend("auto", 5) == "scan"
    rng = np.random.default_rng(3)
    inputs = [[str(s) for s in rng.choice(["a", "b"], size=n)] for n in (4, 11, 64, 500)]
    same, _, _, _, _ = V.check_inputs(m, inputs, [None] * len(inputs), device="cuda", dtype="float32")
    assert all(same)


@cuda
@pytest.mark.cuda
def test_cuda_peak_memory_and_free_memory():
    """On CUDA, PeakMemory reports the allocator's peak of a 256 MiB tensor made inside the block;
    free_memory counts what the caching allocator holds unused as free; a find-limit row on CUDA
    carries both figures."""
    dev = torch.device("cuda")
    with V.PeakMemory(dev) as p:
        x = torch.ones(64 * 2**20, device=dev)  # 256 MiB
        del x
    assert 256 * 2**20 <= p.device_bytes < 300 * 2**20
    assert V.free_memory(dev) >= torch.cuda.mem_get_info(dev)[0]
    m = compiler.compile(rasp.load(DYCK))
    lim_rows: list = []
    lim = V.find_limit(m, None, "float32", samples=1, rng=np.random.default_rng(0), device="cuda", start=1024,
                       max_length=4096, rows=lim_rows)
    assert lim["longest_exact"] == 4096 and all(r.peak_bytes is not None for r in lim_rows)


def test_compile_and_save_do_not_need_torch(tmp_path):
    """`rasp compile -o` builds and writes the weights with NumPy; the nn.Module (and PyTorch, whose
    import alone takes seconds) is only built when the model runs. The file is the same either way."""
    code = ("import sys; from rasp.cli import main; "
            f"rc = main(['compile', {DYCK!r}, '-o', {str(tmp_path / 'a')!r}]); "
            "print(rc, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.split()[-2:] == ["0", "False"], out.stdout + out.stderr
    m = compiler.load(tmp_path / "a")  # runs with torch
    m.save(tmp_path / "b")  # saved again from the module's tensors
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (tmp_path / "b" / "model.safetensors").read_bytes()
    assert m.run("( ( ) )") is True


def test_consistent_config_edits_are_refused(tmp_path):
    """config.json is not covered by the weights' hash, but the parts that decide what the weights
    compute are: their digest is stored with the weights. Edits the field checks cannot see (the
    symbols reordered together with the program's alphabet, a head's offset, the BOS id) are refused;
    a field that does not matter (the recorded compile time) is not; a non-numeric format_version is
    a clear error."""
    program = rasp.parse('alphabet a b\nP = exists[j == i - 1] "a"\nok = P && #"b" > #"a"\n')
    path = compiler.compile(program).save(tmp_path / "m")
    good = json.loads((path / "config.json").read_text())

    def edited(change):
        cfg = json.loads(json.dumps(good))
        change(cfg)
        (path / "config.json").write_text(json.dumps(cfg))

    def reorder(c):
        c["symbols"] = c["symbols"][::-1]
        c["program"]["alphabet"] = c["program"]["alphabet"][::-1]

    def offset(c):
        layer = next(l for l in c["architecture"]["layers"] if any(h["kind"] == "local" for h in l["heads"]))
        next(h for h in layer["heads"] if h["kind"] == "local")["offset"] += 1

    for change in (reorder, offset, lambda c: c["architecture"].update(bos_id=0)):
        edited(change)
        with pytest.raises(rasp.RaspError):
            compiler.load(path)
    edited(reorder)
    with pytest.raises(rasp.RaspError, match="config.json and model.safetensors do not belong together"):
        compiler.load(path)
    edited(lambda c: c.update(format_version="x"))
    with pytest.raises(rasp.RaspError, match="format_version 'x' is not a format version"):
        compiler.load(path)
    edited(lambda c: c.update(compile_seconds=123.0))
    assert compiler.load(path).run("b a b") is True is program.run("b a b")


def test_edited_raspl_bounds_and_broken_architectures_are_refused(tmp_path):
    """A bounded RASP-L model's ``raspl`` record is bound to its weights (an edited max_length made
    rasp verify run it past its bound and report it wrong; a string there was an internal error);
    an architecture field deleted is refused as an edit, not a KeyError from the reads that use it;
    JSON nested 10^5 deep is unreadable JSON, not a RecursionError. Every one is a RaspError."""
    from compiler.bounded import compile_raspl

    prog = rasp.parse('alphabet a b\nok = aggregate(select(indices, indices, ==), tokens, max, 0) == '
                      'aggregate(select(indices, map(x -> x / 2, indices), ==), tokens, max, 0)\n')
    path = compile_raspl(prog, max_length=12).save(tmp_path / "m")
    good = json.loads((path / "config.json").read_text())
    assert good["raspl"]["lowered"] == "bounded" and good["raspl"]["max_length"] == 12

    def edited(change):
        cfg = json.loads(json.dumps(good))
        change(cfg)
        (path / "config.json").write_text(json.dumps(cfg))

    for change, what in [
            (lambda c: c["raspl"].update(max_length=10 ** 6), "'raspl' is not"),
            (lambda c: c["raspl"].update(max_length=100), "do not belong together"),
            (lambda c: c["raspl"].update(max_length="abc"), "'raspl' is not"),
            (lambda c: c.update(raspl="x"), "'raspl' is not"),
            (lambda c: c.update(raspl=None), "do not belong together"),
            (lambda c: c["raspl"].update(lowered="exact", max_length=None), "do not belong together"),
            (lambda c: next(l for l in c["architecture"]["layers"] if l["heads"])["heads"][0].pop("kind"),
             "kind None is not uniform or local")]:
        edited(change)
        with pytest.raises(rasp.RaspError, match=what):
            compiler.load(path)
    (path / "config.json").write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(rasp.RaspError, match="not readable JSON"):
        compiler.load(path)
    # the same nesting in the weights file's metadata
    import hashlib

    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(path / "model.safetensors"), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": '{"x": ' + "[" * 100000 + "]" * 100000 + "}"})
    edited(lambda c: c.update(weights_sha256=hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()))
    with pytest.raises(rasp.RaspError, match="does not record the shapes"):
        compiler.load(path)
    compile_raspl(prog, max_length=12).save(path)
    edited(lambda c: None)
    loaded = compiler.load(path)
    assert [loaded.run(x) for x in ("a b a a", "a b b b", "b a b")] == [prog.run(x) for x in ("a b a a", "a b b b", "b a b")]


def _resign(path, change_config, change_meta=None):
    """Edit config.json and re-sign both digests, as a forger would (the weights' hash in config.json,
    the config digest in the weights' metadata)."""
    import hashlib

    from safetensors import safe_open
    from safetensors.numpy import save_file

    from compiler.api import config_digest

    cfg = json.loads((path / "config.json").read_text())
    change_config(cfg)
    with safe_open(str(path / "model.safetensors"), framework="np") as f:
        meta = json.loads(f.metadata()["format"])
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    meta["config_sha256"] = config_digest(cfg, tuple(meta["config_bound"]))
    if change_meta:
        change_meta(meta, cfg)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": json.dumps(meta)})
    cfg["weights_sha256"] = hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()
    (path / "config.json").write_text(json.dumps(cfg))


def _saved_local(path) -> Path:
    """A model with a local head, a uniform head, a sign and an MLP in its first layer."""
    return compiler.compile(rasp.parse('alphabet a b\nP = exists[j == i - 1] "a"\nok = P && #"b" > #"a"\n')).save(path)


def test_forged_architectures_are_user_errors(tmp_path, capsys):
    """A config.json edited and re-signed (both digests recomputed) with a malformed architecture is a
    user error naming the field (they were KeyError, ValueError, IndexError or a 480 GB allocation:
    internal errors); an infinite width from plain JSON (1e400) too, before any digest is read; an
    edited 'size' (shown by rasp verify, used by its memory guard) is refused; version fields checked."""
    def local_head(c):
        return next(h for l in c["architecture"]["layers"] for h in l["heads"] if h["kind"] == "local")

    cases = [
        (lambda c: local_head(c).pop("offset"), "'offset' is not an integer >= 1"),
        (lambda c: local_head(c).update(offset="x"), "'offset' is not an integer >= 1"),
        (lambda c: local_head(c).update(offset=-5), "'offset' is not an integer >= 1"),
        (lambda c: local_head(c).update(kind="bogus"), "kind 'bogus' is not uniform or local"),
        (lambda c: c["architecture"].update(bos_id=99), "'bos_id' is not a token id"),
        (lambda c: c["architecture"].update(bos_id="x"), "'bos_id' is not a token id"),
        (lambda c: c["architecture"]["layers"][0].update(mlp=-1), "'sign' or 'mlp' is not an integer"),
        (lambda c: c["architecture"].update(periods=[1e400]), "'periods' is not a list of distinct integers"),
        (lambda c: c["architecture"].update(d_model=float("inf")), "'d_model' is not an integer"),
        (lambda c: c["architecture"].update(periods=[2, 2]), "'periods' is not a list of distinct integers"),
        (lambda c: c["architecture"].update(periods=[10 ** 10]), "a period above 4,194,304"),
        # widths the program fixes (helper 83: a 128 GB readout, an 8 GB embedding per call, at run time)
        (lambda c: c["architecture"].update(n_outputs=10 ** 9), "n_outputs is 1,000,000,000, not 1 .the model.s number of outputs"),
        (lambda c: c["architecture"].update(n_symbols=10 ** 9), "n_symbols is 1,000,000,000, not 2 .the model.s number of symbols"),
        (lambda c: c["architecture"].update(bos_id=0), "bos_id is 0, not 2"),
        (lambda c: c["output"].update(names="ok"), "'output.names' is not a list of names"),
    ]
    for change, what in cases:
        path = _saved_local(tmp_path / str(len(what)) / what[:8].replace("'", "").replace(" ", "_"))
        _resign(path, change)
        with pytest.raises(rasp.RaspError, match=what):
            compiler.load(path)
        assert main(["verify", str(path), "--lengths", "4", "--samples", "1"]) == 2
        capsys.readouterr()
    # a sign layer 10^10 wide, shapes and all re-signed: refused before anything is allocated
    path = _saved_local(tmp_path / "wide")

    def wide(meta, cfg):
        meta["shapes"]["layers.0.sign.W_in"][0] = 10 ** 10
        for k in ("gamma", "beta"):
            meta["shapes"][f"layers.0.sign.{k}"][0] = 10 ** 10
        meta["shapes"]["layers.0.sign.W_out"][1] = 10 ** 10
    _resign(path, lambda c: c["architecture"]["layers"][0].update(sign=10 ** 10), wide)
    with pytest.raises(rasp.RaspError, match="layer 0 sign is 10,000,000,000, but the weights touch at most"):
        compiler.load(path)
    # plain JSON edits, no re-signing
    for key, value, what in [("size", None, "'size' lacks"), ("compiler_version", None, "compiler_version None is not a version"),
                             ("format_version", True, "format_version True is not a format version"),
                             ("format_version", 10 ** 400, r"format version 1000000000000000000000000000000000000\.\.\. is newer")]:
        path = _saved_local(tmp_path / f"plain_{key}_{value is None}")
        cfg = json.loads((path / "config.json").read_text())
        if value is None:
            cfg.pop(key)
        else:
            cfg[key] = value
        (path / "config.json").write_text(json.dumps(cfg))
        with pytest.raises(rasp.RaspError, match=what):
            compiler.load(path)
    path = _saved_local(tmp_path / "size")
    cfg = json.loads((path / "config.json").read_text())
    cfg["size"].update(d_model=10 ** 9, layers=77)
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(rasp.RaspError, match="'size' says .* but the model has"):
        compiler.load(path)
    path = _saved_local(tmp_path / "inf")
    (path / "config.json").write_text((path / "config.json").read_text().replace('"periods": []', '"periods": [1e400]'))
    assert main(["verify", str(path), "--lengths", "4", "--samples", "1"]) == 2
    assert "'periods' is not a list of distinct integers" in capsys.readouterr().err


def test_a_failed_save_leaves_the_model_there(tmp_path, monkeypatch):
    """Both files are written under temporary names and renamed: a write that fails (a full disk) leaves
    the model already in the directory loadable, and no temporary file behind."""
    from pathlib import Path as P

    path = _saved(tmp_path)
    before = {f: (path / f).read_bytes() for f in ("config.json", "model.safetensors")}
    other = compiler.compile(rasp.parse('alphabet a b\nok = #"a" > #"b"\n'))
    real = P.write_bytes

    def full(self, data):
        if "config.json" in self.name:
            raise OSError(28, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(P, "write_bytes", full)
    with pytest.raises(rasp.RaspError, match="No space left on device"):
        other.save(path)
    monkeypatch.undo()
    assert {f: (path / f).read_bytes() for f in ("config.json", "model.safetensors")} == before
    assert sorted(f.name for f in path.iterdir()) == ["config.json", "model.safetensors"]
    compiler.load(path)


def test_weights_without_a_config_digest_are_refused(tmp_path):
    """A weights file whose metadata lacks the config digest (shapes only) is refused, even when
    everything else is consistent: with it missing, an edited config.json would load unchecked."""
    import hashlib

    from safetensors import safe_open
    from safetensors.numpy import save_file

    path = _saved(tmp_path)
    with safe_open(str(path / "model.safetensors"), framework="np") as f:
        meta = json.loads(f.metadata()["format"])
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    assert meta.pop("config_sha256")
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": json.dumps(meta)})
    cfg = json.loads((path / "config.json").read_text())
    cfg["weights_sha256"] = hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(rasp.RaspError, match="does not record the shapes and the configuration"):
        compiler.load(path)


def test_verify_ctrl_c_reports_the_rows_measured(capsys, monkeypatch):
    """Ctrl-C during a sweep (a long --find-limit) prints the rows measured so far, as JSON with
    ``"interrupted": true`` under --json, and exits 130; before the first row it is plain "interrupted"."""
    real = V.verify_length
    calls = []

    def stop_on_second(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(V, "verify_length", stop_on_second)
    assert main(["verify", DYCK, "--lengths", "4,8,16", "--samples", "3", "--json"]) == 130
    res = json.loads(capsys.readouterr().out)
    assert res["interrupted"] is True and [r["length"] for r in res["rows"]] == [4] and res["exact"] is True
    calls.clear()
    assert main(["verify", DYCK, "--lengths", "4,8,16", "--samples", "3"]) == 130
    out = capsys.readouterr().out
    assert "interrupted" in out and "exact: yes" in out
    calls[:] = [1]
    assert main(["verify", DYCK, "--lengths", "4,8", "--samples", "3", "--json"]) == 130
    captured = capsys.readouterr()
    assert captured.out == "" and "interrupted" in captured.err
    calls.clear()
    assert main(["verify", DYCK, "--lengths", "4", "--samples", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["interrupted"] is False
