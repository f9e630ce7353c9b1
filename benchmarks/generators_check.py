"""Exactness of the compiled generator programs under the full check (every prompt position, plus
greedy decoding), on one uniform input that includes the special tokens.

    python3 benchmarks/generators_check.py ur.rasp,uf.rasp out.json

For each named program in programs/ whose output is ``generate`` and that compiles exactly (programs
over more than 30 symbols over 16 symbols): ``verify_length`` at 4,096 tokens in bfloat16 and at
65,536 tokens in float32 (decoding at most 16 tokens), one thread. Prints one line per program and
writes the results as JSON.
"""
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
    torch.set_num_threads(1)
    out = {}
    for name in sys.argv[1].split(","):
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
    if len(sys.argv) > 2:
        Path(sys.argv[2]).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
