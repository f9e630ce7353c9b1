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
