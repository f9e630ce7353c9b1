"""Every way ``Program.run_batch`` may generate, compared: re-evaluation, streaming, and the switch
from one to the other after a given number of steps (shared by the task and RASP-L tests)."""
from __future__ import annotations

import rasp.program as P
from rasp import stream


def generations(p, seqs, max_new) -> list:
    """The tokens of every way to generate: Program._generate as it chooses, only re-evaluation, only
    streaming, and the switch from one to the other after 0, 1, 2 and 5 steps (a fake clock)."""
    limits = P.generation_limits(seqs, max_new)
    outs = [p._generate(seqs, max_new), p._generate_reevaluate(seqs, max_new),
            p._ids_to_symbols(stream.generate(p, seqs, limits))]
    for k in (0, 1, 2, 5):
        ticks = iter(range(10 ** 6))
        saved = P._clock, P.stream_estimate, P.REEVALUATE_STEP_S
        # each step "takes" 1 s and streaming "costs" k + 1/2 s: k steps are re-evaluated
        P._clock, P.stream_estimate, P.REEVALUATE_STEP_S = (lambda: float(next(ticks))), (lambda prog, n: k + .5), 1.0 / len(p.core.defs)
        try:
            outs.append(p._generate(seqs, max_new))
        finally:
            P._clock, P.stream_estimate, P.REEVALUATE_STEP_S = saved
    return outs


def same_generations(p, seqs, max_new):
    outs = generations(p, seqs, max_new)
    assert all(o == outs[0] for o in outs), outs
    return outs[0]
