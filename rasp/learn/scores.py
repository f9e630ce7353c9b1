"""Mechanistic induction / anti-induction scores on the copying tasks (Jobanputra et al.).

Input layout (0-based sequence indices): ``<bos>`` at 0, source tokens x_1 .. x_N at 1 .. N,
``<sep>`` at N+1, copied tokens y_1 .. y_N at N+2 .. 2N+1. The copied token y_k is the copy of
source position ``src(k) = k`` (forward copy) or ``N + 1 - k`` (backward copy).

The score of a head is its mean attention, over samples and over the generated tokens y_k that are
model input (y_1 .. y_{N-1}: each one's position predicts the next copied token), to

- the **next** source token ``x_{src(k)+1}`` (induction: the token after the match carries the
  "previous token was y_k" feature, which forward copying reads), or
- the **same** source token ``x_{src(k)}`` (anti-induction: the match itself, whose predecessor
  backward copying reads).

Pairs whose key would fall outside the source (x_{N+1} is ``<sep>``) are left out. The mean is
pooled over all (sample, query) pairs, so a longer sample weighs more. For comparison, ``uniform`` is
the score a head that attends uniformly over its prefix (``<bos>`` included) would get, per score: the
two differ for backward copies, where the induction score leaves the query y_1 out. A score with no
pair at all (N <= 2 for a backward copy's induction score, N = 1 for both) is ``None``, not 0.
"""
from __future__ import annotations

import re

import numpy as np
import torch

from . import data as D


def copy_direction(task, n: int = 6) -> str | None:
    """'forward' or 'backward' when the task's generated target is the copy of its source tokens."""
    rng = np.random.default_rng(7)
    lo = max(task.min_length(), 6)
    hi = task.max_length()
    if hi is not None:  # distinct-token copies over a small alphabet are short
        lo = min(lo, hi)
    if lo < 3 or (hi is not None and hi < task.min_length()):  # no two copied tokens to compare
        return None
    dirs = set()
    for _ in range(n):
        s = task.sample(rng, lo)
        tgt = list(s.target)
        src = list(s.tokens[: len(tgt)])
        if len(tgt) < 2 or len(s.tokens) != len(tgt) + 1:
            return None
        fwd, bwd = tgt == src, tgt == src[::-1]
        if fwd and not bwd:
            dirs.add("forward")
        elif bwd and not fwd:
            dirs.add("backward")
        elif not fwd and not bwd:
            return None
    return dirs.pop() if len(dirs) == 1 else None


DIRECTIONS = ("forward", "backward")


def score_positions(n_source: int, direction: str) -> list[tuple[int, int | None, int]]:
    """(query index, induction key index or None, anti-induction key index) for one sample.

    The source of the generated y_k is the source token at its position (the k-th, or the k-th from
    the end for a backward copy), not any token equal to it: with repeats (NF, NB) a head that
    attends to every equal token splits its attention and scores below 1."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
    out = []
    for k in range(1, n_source):                      # y_1 .. y_{N-1}
        q = n_source + 1 + k
        src = k if direction == "forward" else n_source + 1 - k
        ind = src + 1 if src + 1 <= n_source else None
        out.append((q, ind, src))
    return out


def _sums(attn: list[np.ndarray], n_sources: list[int], direction: str) -> dict:
    L, H = len(attn), attn[0].shape[1]
    acc = {"ind": np.zeros((L, H)), "anti": np.zeros((L, H)), "ni": 0, "na": 0, "ui": 0.0, "ua": 0.0}
    for b, n in enumerate(n_sources):
        for q, ki, ka in score_positions(n, direction):
            for layer in range(L):
                acc["anti"][layer] += attn[layer][b, :, q, ka]
                if ki is not None:
                    acc["ind"][layer] += attn[layer][b, :, q, ki]
            acc["na"] += 1
            acc["ua"] += 1.0 / (q + 1)
            if ki is not None:
                acc["ni"] += 1
                acc["ui"] += 1.0 / (q + 1)
    return acc


def _merge(a: dict | None, b: dict) -> dict:
    return b if a is None else {k: a[k] + b[k] for k in a}


def _finish(acc: dict, direction: str) -> dict:
    """Means over the pairs; None (JSON null) for a score without pairs (not a measured 0)."""
    ni, na = acc["ni"], acc["na"]
    return {
        "direction": direction,
        "induction": (acc["ind"] / ni).round(4).tolist() if ni else None,
        "anti_induction": (acc["anti"] / na).round(4).tolist() if na else None,
        "uniform": {"induction": round(acc["ui"] / ni, 4) if ni else None,
                    "anti_induction": round(acc["ua"] / na, 4) if na else None},
        "pairs": {"induction": ni, "anti_induction": na},
    }


def head_scores(attn: list[np.ndarray], n_sources: list[int], direction: str) -> dict:
    """Scores from attention patterns: ``attn[l]`` is (B, H, T, T); sample b has ``n_sources[b]``
    source tokens. Returns {"induction": L x H, "anti_induction": L x H, "uniform": {...}, ...}
    (a score without pairs is None). ``direction``: "forward" or "backward" (else a ValueError from
    :func:`score_positions`)."""
    return _finish(_sums(attn, n_sources, direction), direction)


@torch.no_grad()
def copy_scores(model, task, vocab: D.Vocab, direction: str, cfg, device) -> dict:
    """Scores of every head of ``model`` on ``cfg.score_samples`` in-distribution copy samples."""
    rng = np.random.default_rng([4242, 1])
    lo = max(task.min_length(), 2)
    hi = cfg.train_max if task.max_length() is None else min(cfg.train_max, task.max_length())
    samples = D.make_samples(task, rng, lo, max(lo, hi), cfg.score_samples)
    model.eval()
    acc = None
    for s in range(0, len(samples), 32):
        chunk = samples[s:s + 32]
        b = D.collate(task.kind, vocab, [D.encode_sample(task.kind, vocab, x) for x in chunk]).to(device)
        _, atts = model(b.ids, return_attn=True)
        acc = _merge(acc, _sums([a.float().cpu().numpy() for a in atts], [len(x.target) for x in chunk], direction))
    model.train()
    out = _finish(acc, direction)
    out["samples"] = len(samples)
    return out


def top_heads(scores: dict, key: str, k: int = 3) -> list[tuple[str, float]]:
    """The k heads with the highest score ``key`` as ("L{layer}H{head}", score), layers 0-based;
    none when the score has no pairs."""
    if scores[key] is None:
        return []
    m = np.array(scores[key])
    flat = sorted(((float(m[l, h]), l, h) for l in range(m.shape[0]) for h in range(m.shape[1])), reverse=True)
    return [(f"L{l}H{h}", v) for v, l, h in flat[:k]]


#: the roles :func:`compiled_heads` sorts heads into, in print order
ROLES = ("predecessor", "separator", "bigram", "start", "other")
_AT_PREV = re.compile(r'(!\()?((?:"[^"]*"|[A-Za-z_][\w]*(?:\[[^\]]*\])?)) at i-1(?!\d)')


def head_role(kind, offset, label: str, special=()) -> str:
    """A compiled head's role from its kind and label (labels name what a head reads: ``"a" at i-1``
    is the local head's bool "the token at i-1 is a"):

    * ``predecessor``: a local head at offset 1 reading a token or a bool of position i-1;
    * ``separator``: a local head at offset 1 reading only special tokens (``special``) at i-1:
      where the input's parts meet, e.g. the query right after ``<sep>`` in the retrieval tasks
      (``QUERY = exists[j == i - 1] "<sep>"``), not a step of the bigram construction;
    * ``bigram``: a uniform head counting positions where some (not negated) ``X at i-1`` holds
      together with a test at that position (``#("a" at i-1 && "b")``);
    * ``start``: the heads of the "i is the first position" test (``true at i-1``, the only thing a
      local head reads when it asks whether i has a predecessor; ``#(!(true at i-1) && "b")``:
      the input starts with b);
    * ``other``: everything else (counting heads over tokens, comparisons)."""
    reads = [(bool(neg), what) for neg, what in _AT_PREV.findall(label)]
    if kind == "local" and offset == 1:
        if reads and all(what == "true" for _, what in reads):
            return "start"
        if reads and all(not neg and what.startswith('"') and what[1:-1] in special for neg, what in reads):
            return "separator"
        return "predecessor"
    if kind == "uniform" and any(not neg and what != "true" for neg, what in reads):
        return "bigram"
    if kind == "uniform" and any(what == "true" for _, what in reads):
        return "start"
    return "other"


def compiled_heads(task, n_symbols: int = 4) -> dict:
    """Which heads of the *compiled* model of the task's program implement the predecessor step
    (local heads reading position i-1) and the bigram step (uniform counting heads whose counted
    predicate involves the token at i-1), per layer.

    The program is compiled over the first ``n_symbols`` symbols of the task's alphabet (the roles do
    not depend on the alphabet's size; the number of heads grows with it: |alphabet| predecessor
    heads, up to |alphabet|^2 bigram heads). Returns {"error": ...} when there is no program or the
    compiler is unavailable or fails -- never made-up roles.
    """
    from .report import program_path

    path = program_path(task)
    if path is None:
        return {"error": "no program"}
    try:
        from compiler.api import compile as compile_program  # noqa: PLC0415 - optional, heavy
        alph = list(task.alphabet[:n_symbols])
        model = compile_program(str(path), alphabet=alph)
        layers = model.config["architecture"]["layers"]
        special = tuple(model.config["program"]["special"])
    except Exception as exc:  # noqa: BLE001 - out-of-class programs do not compile; report why
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    out = []
    for li, spec in enumerate(layers):
        roles: dict[str, list] = {role: [] for role in ROLES}
        for hi, h in enumerate(spec.get("heads", [])):
            label = str(h.get("label", ""))
            roles[head_role(h.get("kind"), h.get("offset"), label, special)].append([hi, label])
        out.append({"layer": li, **roles})
    return {"program": str(path.name), "alphabet": alph, "summary": model.summary(), "layers": out}


def _index_ranges(heads: list[int]) -> str:
    """Head indices as ranges: ``H1-4,6-9,11`` (a role's heads interleave with another's)."""
    runs: list[list[int]] = []
    for h in sorted(heads):
        if runs and h == runs[-1][1] + 1:
            runs[-1][1] = h
        else:
            runs.append([h, h])
    return "H" + ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def compiled_heads_text(info: dict) -> list[str]:
    if "error" in info:  # out-of-class tasks have no exact model to compare with: not a failure
        why = info["error"].split(": ", 1)[-1] if info["error"] != "no program" else "the task has no program"
        return [f"compiled model: none to compare with ({why})"]
    lines = [f"compiled model of {info['program']} over {' '.join(info['alphabet'])}: {info['summary']}"]
    for layer in info["layers"]:
        parts = []
        for role in ROLES:
            hs = layer[role]
            if hs:
                parts.append(f"{len(hs)} {role} head{'s' if len(hs) > 1 else ''} "
                             f"({_index_ranges([h for h, _ in hs])}, e.g. {hs[0][1]})")
        lines.append(f"  layer {layer['layer']}: " + ("; ".join(parts) if parts else "no heads"))
    return lines
