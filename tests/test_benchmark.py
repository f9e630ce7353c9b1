"""The interpreter benchmark script still runs (tiny sizes) and counts operations as documented."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import rasp

ROOT = Path(__file__).resolve().parent.parent


def _load():
    spec = importlib.util.spec_from_file_location("bench_interpreter", ROOT / "benchmarks" / "interpreter.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_benchmark_smoke():
    mod = _load()
    p = rasp.load(ROOT / "programs" / "dyck1.cr")
    assert mod.count_operations(p.core) == (16, 10)
    r = mod.bench(p, batch=3, length=50, repeat=1)
    assert r["pos_ops_per_s"] > 0 and r["operations"] == 16


def _script(name: str, *argv: str, timeout: int = 600):
    import subprocess
    import sys

    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *argv], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def test_compiled_benchmark_runs_and_measures_what_it_says(tmp_path):
    """benchmarks/compiled.py on two programs (the benchmarks helper's audit): a RASP-L program over
    150 symbols is checked over the 16 it is measured with (raspl_sort was left out as not in the
    class: it lowers over 16 symbols, not 150), every forward has its own peak memory, the JSON is
    where --json-out says, the table has a row per program, and an unknown name is refused."""
    import json

    out = tmp_path / "c.json"
    done = _script("compiled.py", "--programs", "tomita1", "raspl_sort", "--budget", "0", "--sizes", "64,256",
                   "--dtypes", "float32", "--json-out", str(out))
    assert done.returncode == 0, done.stderr
    rows = {r["program"]: r for r in json.loads(out.read_text())["results"]}
    assert set(rows) == {"tomita1.rasp", "raspl_sort.rasp"}
    assert rows["raspl_sort.rasp"]["in_class"] and rows["raspl_sort.rasp"]["alphabet"] == 16
    for r in rows.values():
        assert "error" not in r, r
        assert all(v["peak_bytes"] >= 0 and v["tokens_per_s"] > 0 for v in r["throughput"].values())
    table = [ln for ln in done.stdout.splitlines() if ln.startswith("| ") and ".rasp" in ln]
    assert len(table) == 2 and all(ln.count("|") == table[0].count("|") for ln in table)
    bad = _script("compiled.py", "--programs", "nosuch", "--budget", "0")
    assert bad.returncode == 2 and "no program nosuch" in bad.stderr


def test_compile_time_benchmark_subset_keeps_the_committed_json(tmp_path):
    """A run over some programs writes JSON only where --json-out says (the default overwrote the
    committed 41-row benchmarks/compile_time.json with the subset)."""
    committed = (ROOT / "benchmarks" / "compile_time.json").read_bytes()
    done = _script("compile_time.py", "--programs", "dyck1", "--repeats", "1")
    assert done.returncode == 0, done.stderr
    assert "dyck1.cr" in done.stdout
    assert (ROOT / "benchmarks" / "compile_time.json").read_bytes() == committed


def test_family_replay_experiment_still_builds_the_builders_graph():
    """benchmarks/family_replay.py (docs/compiler.md, "What the 0.1 s target needs", point 3) keeps a
    measured negative result reproducible: its replayed graph must stay the builder's, node for node."""
    done = _script("family_replay.py", "programs/ur.rasp", "--symbols", "5", "--repeats", "1", timeout=300)
    assert done.returncode == 0, done.stderr
    assert "the same graph, node for node: True" in done.stdout
    replayed = [line for line in done.stdout.splitlines() if line.startswith("instances replayed:")]
    assert replayed and not replayed[0].startswith("instances replayed: 0 "), done.stdout


def test_recorded_benchmark_rows_describe_the_models_the_compiler_builds():
    """Every row of benchmarks/compiled.json and compiled_generators.json (which the README's tables
    quote) describes the model the compiler builds now: layers, heads, d_model, nonzero weights, sign
    and MLP width. A change to the compiler that changes a model must measure its rows again (dyck1's
    and three others had gone stale for a day before this test)."""
    import json

    from compiler.bounded import compile_raspl

    stale = []
    for name in ("compiled.json", "compiled_generators.json"):
        for row in json.loads((ROOT / "benchmarks" / name).read_text())["results"]:
            if not row.get("in_class", True) or "layers" not in row:
                continue
            p = rasp.load(ROOT / "programs" / row["program"])
            if len(p.alphabet) != row["alphabet"]:
                p = p.with_alphabet([str(k) for k in range(row["alphabet"])])
            s = compile_raspl(p).size
            keys = ("layers", "heads", "d_model", "nonzero", "sign_width", "mlp_width")
            if any(s[k] != row[k] for k in keys if k in row):
                stale.append((name, row["program"], {k: (row.get(k), s[k]) for k in keys if row.get(k) != s[k]}))
    assert not stale, stale
