"""Task programs vs references (issue 3): every registered program against its task's reference
implementation on sampled inputs, per length bin (<= 50, 51-100, 101-150).

    python3 benchmarks/tasks.py                 # 1,000 samples per bin per task (the full check)
    python3 benchmarks/tasks.py --samples 50    # quicker
    python3 benchmarks/tasks.py --tasks UR UF   # some tasks only

Lengths are drawn uniformly from each bin (restricted to the lengths the task can sample: distinct-token
tasks need |alphabet| >= length - 1, so their default 150-token vocabulary covers every bin). Prints a
markdown table: agreements / samples per bin, seconds per task (load + sample + run). Exit status 1 if
any sample disagrees.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import rasp  # noqa: E402
from rasp import tasks as T  # noqa: E402


def check_task(name: str, samples: int, seed: int) -> dict:
    t = T.get(name)
    t0 = time.time()
    program = rasp.load(ROOT / t.program)
    load = time.time() - t0
    row = {"task": name, "kind": t.kind, "program": t.program, "alphabet": len(t.alphabet), "bins": [],
           "load": load, "core_defs": len(program.core.defs)}
    for k, (lo, hi) in enumerate(T.BINS):
        rng = np.random.default_rng([seed, k])
        lengths = t.lengths(lo, hi)
        if not len(lengths):
            row["bins"].append(None)
            continue
        batch = [t.sample(rng, int(rng.choice(lengths))) for _ in range(samples)]
        t1 = time.time()
        outs = program.run_batch([s.tokens for s in batch])
        run = time.time() - t1
        bad = [s for s, o in zip(batch, outs) if o != s.target]
        row["bins"].append({"agree": len(batch) - len(bad), "n": len(batch), "seconds": run,
                            "first_bad": " ".join(bad[0].tokens) if bad else None})
        print(f"  {name} bin {k}: {len(batch) - len(bad)}/{len(batch)} in {run:.1f}s", file=sys.stderr, flush=True)
    row["seconds"] = time.time() - t0
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=1000, help="samples per bin per task (default 1000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tasks", nargs="*", help="task names (default: every task with a program that is "
                    "published in the class)")
    args = ap.parse_args(argv)
    names = args.tasks or [n for n, t in T.TASKS.items() if t.program and t.published_in_class]
    for name in names:
        try:
            T.get(name)
        except rasp.RaspError as exc:
            ap.error(f"{exc.message} ({exc.hint})")
    rows = []
    start = time.time()
    for name in names:
        rows.append(check_task(T.get(name).name, args.samples, args.seed))
    total = time.time() - start
    print(f"{args.samples} samples per bin and task, seed {args.seed}; "
          f"{os.cpu_count()} CPUs, numpy {np.__version__}; total {total:.0f} s\n")
    print("| task | kind | program | core defs | <= 50 | 51-100 | 101-150 | seconds |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    failed = False
    for r in rows:
        cells = []
        for b in r["bins"]:
            if b is None:
                cells.append("-")
            else:
                cells.append(f"{b['agree']}/{b['n']}")
                failed |= b["agree"] != b["n"]
        print(f"| {r['task']} | {r['kind']} | {r['program']} | {r['core_defs']} | {' | '.join(cells)} | "
              f"{r['seconds']:.1f} |")
    bad = [(r["task"], b["first_bad"]) for r in rows for b in r["bins"] if b and b["first_bad"]]
    for task, toks in bad:
        print(f"\nfirst disagreement in {task}: {toks}")
    print(f"\n{'all agree' if not failed else 'DISAGREEMENTS'}: "
          f"{sum(b['agree'] for r in rows for b in r['bins'] if b)} / {sum(b['n'] for r in rows for b in r['bins'] if b)}"
          " samples")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
