"""Interpreter throughput on the Dyck-1 program (programs/dyck1.cr).

    python3 benchmarks/interpreter.py [--program FILE] [--repeat K] [--json]

Throughput is **position-operations per second**: batch x length x operations / seconds, where
*operations* is the number of AST nodes of the core program, each evaluated once at every position
(for Dyck-1: 16 nodes -- 2 token tests, 3 counts, 3 comparisons, 1 subtraction, 1 and, 3 references,
3 integer constants; leaving out references and constants, 10). The time is the best of K runs of
``rasp.interp.evaluate`` on an already encoded batch of random tokens (all definitions at all
positions); the ``end-to-end`` column also includes turning token strings into ids
(``Program.evaluate``). Runs on one core: BLAS/OpenMP threads are pinned to 1 before NumPy loads.
"""
from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import rasp  # noqa: E402
from rasp import ast as A  # noqa: E402
from rasp.interp import evaluate, make_batch  # noqa: E402

#: (batch, length) settings the issue asks for
SETTINGS = [(1, 10**3), (1, 10**5), (1, 10**6), (1000, 10**3)]


def count_operations(core: A.CoreProgram) -> tuple[int, int]:
    """(all AST nodes, nodes other than references and constants) of the core program."""
    nodes = [n for d in core.defs for n in A.walk(d.expr)]
    real = [n for n in nodes if not isinstance(n, (A.Ref, A.IntConst, A.BoolConst))]
    return len(nodes), len(real)


def best_time(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench(program: rasp.Program, batch: int, length: int, repeat: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    n_sym = len(program.symbols)
    ids = rng.integers(0, n_sym, size=(batch, length), dtype=np.int64)
    b = make_batch(list(ids))
    ops, real_ops = count_operations(program.core)
    t = best_time(lambda: evaluate(program.core, b), repeat)
    # end to end from token strings (encoding included), fewer repeats for the big inputs
    strings = [[program.symbols[k] for k in row] for row in ids]
    t_e2e = best_time(lambda: program.evaluate(strings), max(1, repeat // 2))
    work = batch * length * ops
    return {
        "batch": batch, "length": length, "operations": ops, "operations_no_leaves": real_ops,
        "seconds": t, "pos_ops_per_s": work / t, "pos_ops_per_s_no_leaves": batch * length * real_ops / t,
        "seconds_end_to_end": t_e2e, "pos_ops_per_s_end_to_end": work / t_e2e,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--program", default=str(ROOT / "programs" / "dyck1.cr"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="one JSON object per setting")
    args = ap.parse_args(argv)
    program = rasp.load(args.program)
    ops, real_ops = count_operations(program.core)
    if not args.json:
        shown = os.path.relpath(args.program, ROOT) if Path(args.program).resolve().is_relative_to(ROOT) else args.program
        print(f"program: {shown} ({len(program.core.defs)} definitions, {ops} AST nodes, "
              f"{real_ops} without references/constants)")
        print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs visible, Python {platform.python_version()}, "
              f"NumPy {np.__version__}; one thread")
        print(f"{'batch':>6} {'length':>9} {'seconds':>10} {'pos-ops/s':>10} {'(no leaves)':>11} "
              f"{'end-to-end s':>12} {'pos-ops/s':>10}")
    for batch, length in SETTINGS:
        r = bench(program, batch, length, args.repeat)
        if args.json:
            print(json.dumps(r))
        else:
            print(f"{batch:>6} {length:>9} {r['seconds']:>10.5f} {r['pos_ops_per_s']:>10.2e} "
                  f"{r['pos_ops_per_s_no_leaves']:>11.2e} {r['seconds_end_to_end']:>12.5f} "
                  f"{r['pos_ops_per_s_end_to_end']:>10.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
