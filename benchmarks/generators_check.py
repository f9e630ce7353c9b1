"""Exactness of the compiled generator programs under the full check (every prompt position, plus
greedy decoding), on one uniform input that includes the special tokens.

    python3 benchmarks/generators_check.py ur.rasp,uf.rasp out.json

For each named program in programs/ whose output is ``generate`` and that compiles exactly (programs
over more than 30 symbols over 16 symbols): ``verify_length`` at 4,096 tokens in bfloat16 and at
65,536 tokens in float32 (decoding at most 16 tokens), one thread. Prints one line per program and
writes the results as JSON.
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

import rasp
from compiler import verify as V
from compiler.bounded import compile_raspl
from rasp.checker import check

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("programs", help="file names in programs/, comma-separated (ur.rasp,uf.rasp)")
    ap.add_argument("json_out", nargs="?", help="also write the results as JSON here")
    args = ap.parse_args()
    names = [x for x in args.programs.split(",") if x]
    missing = [x for x in names if not (ROOT / "programs" / x).is_file()]
    if missing:
        ap.error(f"no file {', '.join(missing)} in programs/")
    torch.set_num_threads(1)
    out = {}
    for name in names:
        p = rasp.load(ROOT / "programs" / name)
        if p.output_kind != "generate":
            continue
        if len(p.alphabet) > 30:
            p = p.with_alphabet([str(k) for k in range(16)])
        try:
            if not check(p, with_task=False).in_class:
                continue
            m = compile_raspl(p)
        except rasp.RaspError:
            continue
        rows = {}
        for n, dt in ((4096, "bfloat16"), (65536, "float32")):
            t = time.perf_counter()
            r = V.verify_length(m, None, n, 1, np.random.default_rng(5), dtype=dt, max_new=16)
            rows[f"{dt}@{n}"] = (r.agree, round(time.perf_counter() - t, 1))
        out[name] = {"alphabet": len(p.alphabet), **rows}
        print(name, out[name], flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
