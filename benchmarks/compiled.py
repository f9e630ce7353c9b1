"""Benchmark the compiler on every in-class program in programs/.

For each program: compile time, layers, heads, d_model, parameters (dense count and nonzeros), CPU
forward throughput (tokens/s, one input, float32, scan backend) at n = 4,096 and 65,536 with the peak
memory of that forward, and the longest exact length per dtype found by find-limit (model against
interpreter on uniform random inputs, doubling from --start until the first disagreement or the time
budget per dtype).

Each program runs in its own process (so the peak resident memory is the program's own). Programs
over more than 30 symbols (|alphabet|^2 definitions) are measured with ``--big-alphabet`` symbols;
their full-alphabet compile time and size are listed in a second table.

    python benchmarks/compiled.py                      # everything, markdown tables on stdout
    python benchmarks/compiled.py --programs dyck1 ur --budget 10
    python benchmarks/compiled.py --device cuda --dtypes float32,bfloat16 --max-length 1048576

Results are also written as JSON after each program (--json-out; a run over every program writes
benchmarks/compiled.json by default, a run with --programs only where --json-out says). The peak
memory of a forward is its own (``compiler.verify.PeakMemory``, as ``rasp verify`` measures it): on
Linux freed heap memory is returned to the system and the process's peak (VmHWM) reset before it.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one(args) -> dict:
    """Measure one program (runs in a child process)."""
    import numpy as np
    import torch

    import rasp
    from compiler import verify as V
    from compiler.bounded import compile_raspl  # C-RASP as is; RASP-L through its exact lowering
    from rasp.checker import check

    torch.set_num_threads(args.threads)
    path = Path(args.one)
    program = rasp.load(path)
    full_program = program
    if len(program.alphabet) > 30:  # checked as measured (raspl_sort lowers over 16 symbols, not 150)
        program = program.with_alphabet([str(k) for k in range(args.big_alphabet)])
    out = {"program": path.name, "alphabet": len(program.alphabet)}
    if not check(program, with_task=False).in_class:
        out["in_class"] = False
        return out
    out["in_class"] = True
    if len(full_program.alphabet) > 30:
        if args.full_alphabet:
            t0 = time.perf_counter()
            m = compile_raspl(full_program)
            out["full"] = {"compile_s": time.perf_counter() - t0, "alphabet": len(full_program.alphabet), **m.size}
            del m
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        model = compile_raspl(program)
        times.append(time.perf_counter() - t0)
        if times[-1] > 1.0:
            break
    out["compile_s"] = statistics.median(times)
    out.update(model.size)
    device = args.device
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    m = model.model(device, "float32")
    rng = np.random.default_rng(0)
    out["throughput"] = {}
    for n in [int(x) for x in args.sizes.split(",")]:
        ids = torch.as_tensor(rng.integers(0, len(program.symbols), size=(1, n)), device=m.device)
        # the forward's own peak (compiler.verify.PeakMemory: freed heap returned to the system and the
        # peak reset first on CPU, the allocator's peak on CUDA): above the memory in use before it
        best = float("inf")
        with V.PeakMemory(m.device) as mem:
            for _ in range(2):
                sync()
                t0 = time.perf_counter()
                m(ids)
                sync()
                best = min(best, time.perf_counter() - t0)
        peak = mem.device_bytes if mem.device_bytes is not None else 0
        out["throughput"][str(n)] = {"tokens_per_s": n / best, "seconds": best, "peak_bytes": max(0, peak)}
    if args.check_length:
        out["check"] = {}
        for dt in args.dtypes.split(","):
            row = V.verify_length(model, None, args.check_length, 1, np.random.default_rng(2), device=device,
                                  dtype=dt, max_new=16)
            out["check"][dt] = {"length": args.check_length, "exact": row.agree == 1.0,
                                "model_s": row.model_seconds, "interp_s": row.interp_seconds}
    out["limits"] = []
    for dt in args.dtypes.split(",") if args.budget > 0 else []:
        lim = V.find_limit(model, None, dt, samples=args.samples, rng=np.random.default_rng(1), device=device,
                           start=args.start, budget_s=args.budget, max_length=args.max_length, max_new=16)
        out["limits"].append(lim)
    return out


def _fmt_bytes(b: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if b < 1024:
            return f"{b:.0f} {unit}"
        b /= 1024
    return f"{b:.1f} TB"


def _fmt_rate(r: float) -> str:
    return f"{r / 1e6:.2f}M" if r >= 1e6 else f"{r / 1e3:.0f}k"


def table(results: list[dict], dtypes: list[str], sizes: list[str]) -> str:
    head = ("| program | \\|Σ\\| | compile | layers | heads | d_model | parameters (nonzero) | "
            + " | ".join(f"tok/s @{int(n):,}" for n in sizes) + f" | peak mem @{int(sizes[-1]):,} | "
            + " | ".join(f"exact ≤ ({d})" for d in dtypes) + " |")
    lines = [head, "|" + "---|" * (8 + len(sizes) + len(dtypes))]
    for r in results:
        if not r.get("in_class"):
            continue
        if "error" in r:
            lines.append(f"| {r['program']} | | error: {r['error']} |" + " |" * (5 + len(sizes) + len(dtypes)))
            continue
        th = r["throughput"]
        lims = {x["dtype"]: x for x in r["limits"]}
        cells = []
        for d in dtypes:
            x = lims.get(d)
            chk = (r.get("check") or {}).get(d)
            if x is None and chk is not None:
                cells.append(f"{chk['length']:,}: {'exact' if chk['exact'] else 'NOT exact'}")
            elif x is None:
                cells.append("")
            else:
                mark = "" if x["first_failure"] is None else f" (fails {x['first_failure']:,})"
                cells.append(f"{x['longest_exact']:,}{mark}" if x["longest_exact"] else f"none{mark}")
        lines.append(
            f"| {r['program']} | {r['alphabet']} | {r['compile_s'] * 1000:.0f} ms | {r['layers']} | {r['heads']} | "
            f"{r['d_model']} | {r['parameters']:,} ({r['nonzero']:,}) | "
            + " | ".join(_fmt_rate(th[n]['tokens_per_s']) for n in sizes)
            + f" | {_fmt_bytes(th[sizes[-1]]['peak_bytes'])} | " + " | ".join(cells) + " |")
    full = [r for r in results if r.get("full")]
    if full:
        lines += ["", "Full alphabets (compile only):", "",
                  "| program | \\|Σ\\| | compile | layers | heads | d_model | parameters (nonzero) |", "|---|---|---|---|---|---|---|"]
        for r in full:
            f = r["full"]
            lines.append(f"| {r['program']} | {f.get('alphabet', '')} | {f['compile_s']:.1f} s | {f['layers']} | {f['heads']} | "
                         f"{f['d_model']} | {f['parameters']:,} ({f['nonzero']:,}) |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", nargs="*", help="program names (stem) to run; default: all in programs/")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtypes", default="float64,float32,bfloat16")
    ap.add_argument("--budget", type=float, default=20.0, help="find-limit seconds per dtype (default 20)")
    ap.add_argument("--start", type=int, default=1024)
    ap.add_argument("--max-length", type=int, default=1 << 22)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sizes", default="4096,65536", help="input lengths for the throughput columns")
    ap.add_argument("--check-length", type=int, default=0,
                    help="also check one uniform input of this length per dtype (model == interpreter)")
    ap.add_argument("--big-alphabet", type=int, default=16)
    ap.add_argument("--full-alphabet", action="store_true", help="also compile large alphabets in full")
    ap.add_argument("--json-out", help="write the results as JSON here (default: benchmarks/compiled.json "
                    "for a run over all programs; a run with --programs writes no JSON unless given one)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        try:
            print(json.dumps(one(args)))
        except Exception as exc:  # noqa: BLE001
            print(json.dumps({"program": Path(args.one).name, "in_class": True, "error": f"{type(exc).__name__}: {exc}"}))
        return 0
    paths = sorted(p for p in (ROOT / "programs").iterdir() if p.suffix in (".cr", ".rasp"))
    if args.programs:
        unknown = sorted(set(args.programs) - {p.stem for p in paths})
        if unknown:
            ap.error(f"no program {', '.join(unknown)} in programs/ (give file stems: dyck1 ur ...)")
        paths = [p for p in paths if p.stem in args.programs]
    elif args.json_out is None:  # the committed figures are those of a run over every program
        args.json_out = str(ROOT / "benchmarks" / "compiled.json")
    meta = {"date": time.strftime("%Y-%m-%d"), "device": args.device, "threads": args.threads,
            "torch": __import__("torch").__version__, "budget_s": args.budget, "start": args.start,
            "max_length": args.max_length, "samples": args.samples, "cpu_count": os.cpu_count(),
            "peak": "the forward's own (compiler.verify.PeakMemory): heap trimmed and VmHWM reset before it (CPU), max_memory_allocated (CUDA)"}
    results = []
    for p in paths:
        cmd = [sys.executable, __file__, "--one", str(p), "--device", args.device, "--dtypes", args.dtypes,
               "--budget", str(args.budget), "--start", str(args.start), "--max-length", str(args.max_length),
               "--samples", str(args.samples), "--threads", str(args.threads), "--sizes", args.sizes,
               "--big-alphabet", str(args.big_alphabet), "--check-length", str(args.check_length)] + (
                   ["--full-alphabet"] if args.full_alphabet else [])
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        line = (proc.stdout.strip().splitlines() or [""])[-1]
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            r = {"program": p.name, "in_class": True, "error": (proc.stderr.strip().splitlines() or ["?"])[-1][:120]}
        r["wall_s"] = time.perf_counter() - t0
        results.append(r)
        print(f"# {p.name}: {'in class' if r.get('in_class') else 'outside the class'} ({r['wall_s']:.0f} s)",
              file=sys.stderr, flush=True)
        if args.json_out:  # after every program: a run cut short (a time limit) keeps what it measured
            Path(args.json_out).write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    print(table(results, args.dtypes.split(","), args.sizes.split(",")))
    print(f"\n{meta}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
