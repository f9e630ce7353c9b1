"""Training from scratch, following the papers' protocol (theory.md sections 2 and 3).

- Train on lengths ``train_min .. train_max`` (default: the task's minimum .. 50), fresh samples
  every step, batch 64, AdamW (weight decay 0.01, betas 0.9/0.999), gradient clipping at 1.0,
  linear warm-up over the first 5% of the steps then cosine decay to 10% of the learning rate
  (``schedule="constant"``: no decay; the cpu preset's short runs stop long before a decay would help).
- APE models see every sequence at a random position offset: positions ``o .. o+len-1`` with
  ``o`` uniform such that the last position fits, so every positional row up to the longest test
  sequence is trained. Tests use offset 0 (positions 0..len-1). RoPE and NoPE ignore offsets.
- Every ``eval_every`` steps the in-distribution accuracy is measured on a fixed held-out set of
  lengths up to ``train_max``; training stops early when it is 100%.
- A seed is *successful* when its final in-distribution accuracy is at least ``success``
  (default 1.0, as in the papers). The summary is the mean over successful seeds; when no seed
  succeeds it is the mean over all seeds, flagged ``"all_failed": true``.
- Test sets (``test_samples`` per bin, lengths uniform in the bin) come from a fixed data seed, so
  every seed and model is tested on the same inputs.
- Deterministic for a seed on CPU (same torch version and thread count): the model initialization
  comes from ``torch.manual_seed(seed)``, the training data from ``numpy.random.default_rng([seed, 0])``.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch

from ..errors import RaspError
from . import data as D
from .model import GPT, ModelConfig
from .report import PAPER_BINS

DATA_SEED = 20250521  # fixed seed of the in-distribution and test sets (arXiv 2505.21785)
DEFAULT_BINS = PAPER_BINS  # the papers' test bins, so that the report can set the published numbers beside

# Task groups of the seed paper (theory.md section 2): model sizes and learning rates per group.
GROUPS = {
    "unique": ("UR", "UL", "UF", "UB"),
    "first": ("NRFirst", "NLFirst"),
    "hard": ("NRLast", "NLLast", "NF", "NB"),
}


def task_group(name: str) -> str:
    for g, names in GROUPS.items():
        if name in names:
            return g
    return "other"


@dataclass(frozen=True)
class TrainConfig:
    layers: int = 2
    heads: int = 4
    dim: int = 64
    lr: float = 1e-3
    steps: int = 30000
    batch: int = 64
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    warmup_frac: float = 0.05
    schedule: str = "cosine"          # after warm-up: "cosine" (decay to 10%) or "constant"
    eval_every: int = 500
    id_samples: int = 500
    test_samples: int = 2000
    eval_batch: int = 256
    train_min: int | None = None
    train_max: int = 50
    bins: tuple[tuple[int, int], ...] = DEFAULT_BINS
    positional: str = "ape"
    seeds: int = 3
    first_seed: int = 0
    success: float = 1.0
    score_samples: int = 64
    alphabet: tuple[str, ...] | None = None  # another data alphabet for the task's sampler (None: its own)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["bins"] = [list(b) for b in self.bins]
        d["alphabet"] = None if self.alphabet is None else list(self.alphabet)
        return d


# ---- presets ------------------------------------------------------------------------------

def preset_config(preset: str, task_name: str) -> TrainConfig:
    """The configuration of a preset for one task.

    - ``paper``: theory.md's settings: 2 layers / 4 heads / 64 dims, lr 1e-3 for the unique tasks;
      4/4/64, lr 1e-3 for N*First; 4/4/256, lr 1e-4 for N*Last, NF, NB; up to 30k steps, 2000 test
      samples per bin, 3 seeds. Other tasks: 2/4/64, lr 1e-3. Meant for a GPU.
    - ``cpu``: the ten seed tasks on 2 CPU cores in at most an hour together (``rasp learn --all
      --preset cpu --jobs 2``: two tasks at a time, one thread each): the paper's depth and heads, but
      64 dims for every group (the 256-dim lr-1e-4 models learn nothing in a CPU budget), lr 1e-3
      everywhere and constant after the warm-up (a cosine decay over so few steps ends training before
      the slow tasks leave their plateau), at most 3000 steps (4000 for UR and UL, whose steps cost about
      half as much), 1 seed, 200 test samples per bin: 47 minutes on 2 cores (measured). It is a reduced
      run: see README, "Learning from scratch".
    - ``smoke``: a tiny model and a few steps (well under a minute on 2 CPU cores), for CI.
    """
    g = task_group(task_name)
    if preset == "paper":
        size = {"unique": (2, 4, 64, 1e-3), "first": (4, 4, 64, 1e-3), "hard": (4, 4, 256, 1e-4)}
        L, H, Dm, lr = size.get(g, (2, 4, 64, 1e-3))
        return TrainConfig(layers=L, heads=H, dim=Dm, lr=lr, steps=30000, eval_every=500,
                           id_samples=500, test_samples=2000, seeds=3)
    if preset == "cpu":
        size = {"unique": (2, 4, 64), "first": (4, 4, 64), "hard": (4, 4, 64)}
        L, H, Dm = size.get(g, (2, 4, 64))
        steps = 4000 if task_name in ("UR", "UL") else 3000  # their steps cost half of the others'
        return TrainConfig(layers=L, heads=H, dim=Dm, lr=1e-3, steps=steps, eval_every=250, schedule="constant",
                           id_samples=200, test_samples=200, seeds=1)
    if preset == "smoke":
        return TrainConfig(layers=1, heads=2, dim=32, lr=3e-3, steps=40, eval_every=20,
                           id_samples=32, test_samples=32, eval_batch=64, seeds=1, score_samples=8)
    raise ValueError(f"unknown preset {preset!r} (smoke, cpu, paper)")


PRESETS = ("smoke", "cpu", "paper")


def pick_device(name: str = "auto") -> torch.device:
    """``auto``: CUDA, then MPS, then the CPU; else a device that exists here
    (:func:`rasp.devices.resolve_device`, shared with compiled models; MPS allowed), else a
    :class:`~rasp.errors.RaspError`."""
    from ..devices import resolve_device

    return resolve_device(name, ("cpu", "cuda", "mps"), "training runs")


def device_name(dev: torch.device) -> str:
    if dev.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(dev)})"
    return dev.type


# ---- data sets ----------------------------------------------------------------------------

@dataclass
class DataSets:
    train_range: tuple[int, int]
    id_set: list                      # Encoded samples, lengths in the training range
    bins: list[tuple[int, int] | None]  # each configured bin clipped to what the task can sample
    tests: list[list]                 # Encoded samples per bin ([] for an empty bin)
    n_pos: int                        # positions the model needs (longest test or training sequence)


def build_datasets(task, vocab: D.Vocab, cfg: TrainConfig) -> DataSets:
    lo = cfg.train_min if cfg.train_min is not None else task.min_length()
    tr = D.clip_range(task, lo, cfg.train_max)
    if tr is None:
        raise RaspError(f"task {task.name} has no inputs of a length from {lo} to {cfg.train_max}"
                        + (f" over the alphabet {' '.join(cfg.alphabet)}" if cfg.alphabet else ""),
                        hint=(f"give a --train-max of at least {lo} (the task's shortest input)" if cfg.train_max < lo
                              else "give a larger --alphabet (over fewer symbols the task's inputs are shorter)")
                        + f"; rasp tasks sample {task.name} --length N shows its inputs")
    rng = np.random.default_rng([DATA_SEED, 0])
    enc = lambda samples: [D.encode_sample(task.kind, vocab, s) for s in samples]  # noqa: E731
    id_set = enc(D.make_samples(task, rng, *tr, cfg.id_samples))
    bins, tests = [], []
    for k, (blo, bhi) in enumerate(cfg.bins):
        r = D.clip_range(task, blo, bhi)
        bins.append(r)
        tests.append([] if r is None else enc(D.make_samples(task, np.random.default_rng([DATA_SEED, k + 1]),
                                                             *r, cfg.test_samples)))
    if all(r is None for r in bins):
        raise RaspError(f"task {task.name} has no test inputs in any bin ({', '.join(f'{a}-{b}' for a, b in cfg.bins)}): "
                        f"its inputs are {task.min_length()} tokens or more"
                        + (f" and at most {task.max_length()}" if task.max_length() is not None else ""),
                        hint="give --bins that reach its lengths")
    # the longest sequences: a few samples at the longest training length and at each bin's longest
    tops = [tr[1]] + [r[1] for r in bins if r is not None]
    probe = enc([task.sample(np.random.default_rng([DATA_SEED, 99, i]), n) for n in tops for i in range(4)])
    n_pos = max(len(e.ids) for e in id_set + probe + [e for t in tests for e in t])
    return DataSets(tr, id_set, bins, tests, n_pos)


def _within_positions(task, vocab: D.Vocab, rng: np.random.Generator, samples: list, n_pos: int) -> list:
    """The encoded samples, a sample longer than the model's ``n_pos`` positions drawn again at its
    input length. ``n_pos`` comes from the test sets and a few probes; a task whose answer's length
    varies at one input length (addition: the longer operand's digits) can draw a longer training
    sequence than any of them, when the bins end at the training lengths (--bins 50): NoPE and RoPE
    models raised, APE reused its last position row. With the default bins this never happens (the
    random stream, hence every result, is unchanged)."""
    out = []
    for s in samples:
        e = D.encode_sample(task.kind, vocab, s)
        for _ in range(1000):
            if len(e.ids) <= n_pos:
                break
            e = D.encode_sample(task.kind, vocab, task.sample(rng, len(s.tokens)))
        else:
            raise RaspError(f"task {task.name}: training inputs of {len(s.tokens)} tokens need more than the "
                            f"model's {n_pos} positions", hint="give --bins that reach past the training lengths")
        out.append(e)
    return out


# ---- evaluation ---------------------------------------------------------------------------

@torch.no_grad()
def accuracy(model, kind: str, vocab: D.Vocab, encoded: list, device, batch: int = 256) -> float | None:
    if not encoded:
        return None
    model.eval()
    ok = 0
    # sort by length so that batches pad little; accuracy does not depend on the order
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].ids))
    for s in range(0, len(order), batch):
        b = D.collate(kind, vocab, [encoded[i] for i in order[s:s + batch]]).to(device)
        ok += int(D.correct(kind, model(b.ids), b).sum())
    model.train()
    return ok / len(encoded)


# ---- training -----------------------------------------------------------------------------

def lr_at(step: int, cfg: TrainConfig) -> float:
    warm = max(1, int(cfg.warmup_frac * cfg.steps))
    if step < warm:
        return cfg.lr * (step + 1) / warm
    if cfg.schedule == "constant":
        return cfg.lr
    t = (step - warm) / max(1, cfg.steps - warm)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))


def make_model(task, vocab: D.Vocab, cfg: TrainConfig, n_pos: int) -> GPT:
    mc = ModelConfig(vocab=len(vocab), n_out=D.n_outputs(task.kind, vocab), n_pos=n_pos,
                     layers=cfg.layers, heads=cfg.heads, dim=cfg.dim, positional=cfg.positional)
    return GPT(mc)


def train_seed(task, vocab: D.Vocab, ds: DataSets, cfg: TrainConfig, seed: int, device,
               progress: bool = True, log=None):
    """Train one model; returns (model, result dict)."""
    from tqdm.auto import tqdm

    torch.manual_seed(seed)
    rng = np.random.default_rng([seed, 0])
    model = make_model(task, vocab, cfg, ds.n_pos).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.999))
    t0 = time.time()
    id_acc, step, loss_v, history = 0.0, 0, float("nan"), []
    bar = tqdm(total=cfg.steps, desc=f"{task.name} seed {seed}", leave=False, disable=not progress,
               dynamic_ncols=True)
    model.train()
    for step in range(1, cfg.steps + 1):
        for g in opt.param_groups:
            g["lr"] = lr_at(step - 1, cfg)
        samples = D.make_samples(task, rng, *ds.train_range, cfg.batch)
        b = D.collate(task.kind, vocab, _within_positions(task, vocab, rng, samples, ds.n_pos))
        pos = None
        if cfg.positional == "ape":
            T = b.ids.shape[1]
            span = (ds.n_pos - b.lengths).clamp(min=0) + 1
            off = torch.from_numpy((rng.random(len(span)) * span.numpy()).astype(np.int64))
            pos = (off[:, None] + torch.arange(T)[None, :]).clamp(max=ds.n_pos - 1)
        b = b.to(device)
        logits = model(b.ids, None if pos is None else pos.to(device))
        loss = D.loss_fn(task.kind, logits, b)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        loss_v = float(loss.detach())
        bar.update(1)
        if step % cfg.eval_every == 0 or step == cfg.steps:
            id_acc = accuracy(model, task.kind, vocab, ds.id_set, device, cfg.eval_batch)
            history.append({"step": step, "loss": round(loss_v, 6), "id_acc": id_acc})
            bar.set_postfix(loss=f"{loss_v:.4f}", id_acc=f"{id_acc:.3f}")
            if log and not progress:
                log(f"  {task.name} seed {seed} step {step}: loss {loss_v:.4f}, in-distribution {id_acc:.3f}, "
                    f"{time.time() - t0:.0f}s")
            if id_acc >= 1.0:
                break
    bar.close()
    train_s = time.time() - t0
    bins_acc = [accuracy(model, task.kind, vocab, t, device, cfg.eval_batch) for t in ds.tests]
    res = {
        "seed": seed, "steps": step, "final_loss": loss_v, "id_acc": id_acc,
        "success": id_acc >= cfg.success, "bins_acc": bins_acc,
        "train_s": round(train_s, 2), "eval_s": round(time.time() - t0 - train_s, 2),
        "history": history,
    }
    if log:
        accs = " ".join("n/a" if a is None else f"{a:.3f}" for a in bins_acc)
        log(f"{task.name} seed {seed}: {step} steps, {train_s:.0f}s, id {id_acc:.3f}, bins {accs}")
    return model, res


def summarize(seeds: list[dict], n_bins: int) -> dict:
    ok = [s for s in seeds if s["success"]]
    use = ok or seeds
    mean = []
    for k in range(n_bins):
        vals = [s["bins_acc"][k] for s in use if s["bins_acc"][k] is not None]
        mean.append(None if not vals else float(np.mean(vals)))
    return {"mean_acc": mean, "n_successful": len(ok), "n_seeds": len(seeds), "all_failed": not ok}


def run_task(task, cfg: TrainConfig, device="auto", progress: bool = True, log=None,
             scores: bool = True) -> dict:
    """Train ``cfg.seeds`` models on ``task`` and return the JSON-ready result."""
    from . import scores as S

    dev = pick_device(device) if isinstance(device, str) else device
    if cfg.alphabet is not None:
        task = D.AlphabetView(task, cfg.alphabet)
    vocab = D.Vocab.for_task(task)
    t0 = time.time()
    ds = build_datasets(task, vocab, cfg)
    seeds, head_scores = [], []
    # a property of the task, not of the alphabet: over one symbol every copy reads both ways
    direction = S.copy_direction(getattr(task, "base", task)) if task.kind == "generate" else None
    for seed in range(cfg.first_seed, cfg.first_seed + cfg.seeds):
        model, res = train_seed(task, vocab, ds, cfg, seed, dev, progress, log)
        if scores and direction is not None:
            res["scores"] = S.copy_scores(model, task, vocab, direction, cfg, dev)
        seeds.append(res)
    n_params = make_model(task, vocab, cfg, ds.n_pos).n_params()
    labels = [bin_label(b) for b in cfg.bins]
    # the compiled construction (predecessor and bigram heads) of every generator task with a program
    extra = {"compiled_heads": S.compiled_heads(task)} if scores and task.kind == "generate" else {}
    return {
        "task": task.name, "kind": task.kind, "config": cfg.to_dict(),
        "bins": [list(b) for b in cfg.bins], "bin_labels": labels,
        "bins_effective": [None if b is None else list(b) for b in ds.bins],
        "train_range": list(ds.train_range), "n_pos": ds.n_pos, "n_params": n_params,
        "vocab": list(vocab.tokens), "copy_direction": direction,
        "seeds": seeds, **summarize(seeds, len(cfg.bins)),
        "published_in_class": getattr(task, "published_in_class", None),
        "published_accuracy": dict(getattr(task, "published_accuracy", {}) or {}),
        "citation": getattr(task, "citation", ""),
        "device": device_name(dev), "torch": torch.__version__, "threads": torch.get_num_threads(),
        "time_s": round(time.time() - t0, 1), **extra,
    }


def bin_label(b) -> str:
    lo, hi = b
    return f"<={hi}" if lo <= 1 else f"{lo}-{hi}"


def with_overrides(cfg: TrainConfig, **kw) -> TrainConfig:
    return replace(cfg, **{k: v for k, v in kw.items() if v is not None})
