"""``rasp learn TASK``: train transformers from scratch on a task and test them on longer inputs."""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shlex
import sys
from pathlib import Path

from ..errors import RaspError
from ..memory import free_host_bytes
from ._common import utf8_arg

SEED_TASKS = ("UR", "UL", "NRFirst", "NLFirst", "UF", "UB", "NRLast", "NLLast", "NF", "NB")


def add_training_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--preset", choices=("auto", "smoke", "cpu", "paper"), default="auto",
                   help="smoke: tiny model, seconds (CI); cpu: reduced steps for 2 CPU cores; paper: the papers' "
                   "sizes and 30k steps (for a GPU). auto (default): paper on a CUDA GPU, cpu otherwise")
    p.add_argument("--seeds", type=int, metavar="K", help="number of seeds (models trained)")
    p.add_argument("--first-seed", type=int, metavar="S", help="seeds S .. S+K-1 (default 0)")
    p.add_argument("--steps", type=int, metavar="N", help="maximum training steps per seed")
    p.add_argument("--positional", choices=("ape", "rope", "nope"), help="positional encoding (default ape: learned absolute)")
    p.add_argument("--layers", type=int, help="override the preset's number of layers")
    p.add_argument("--heads", type=int, help="override the preset's number of heads")
    p.add_argument("--dim", type=int, help="override the preset's model width")
    p.add_argument("--lr", type=float, help="override the preset's learning rate")
    p.add_argument("--batch", type=int, help="batch size (default 64)")
    p.add_argument("--schedule", choices=("cosine", "constant"),
                   help="learning rate after the warm-up: cosine decay to 10%% (paper, smoke) or constant (cpu)")
    p.add_argument("--alphabet", metavar="SYMBOLS", type=utf8_arg,
                   help="train and test on another data alphabet: 'a,b,c' or 'a b c', or N for the first N of "
                   "a-z A-Z 0-9 (tasks with a variable alphabet; published numbers are for the default one)")
    p.add_argument("--test-samples", type=int, metavar="N", help="test samples per bin")
    p.add_argument("--train-max", type=int, metavar="N", help="longest training length (default 50)")
    p.add_argument("--bins", metavar="B", help="test bins as upper edges, e.g. 50,100,150 (default) -> <=50, 51-100, 101-150")
    p.add_argument("--device", default="auto", help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:1, ...")
    p.add_argument("--threads", type=int, metavar="N",
                   help="CPU threads for torch (default: torch's choice). On a shared machine 1 is often fastest: "
                   "idle threads spin while they wait for each other")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the result as JSON (one object; with --list or --all, and for rasp report, a list with "
                   "one object per task)")


def register(sub) -> None:
    p = sub.add_parser(
        "learn",
        help="train transformers from scratch on a task; accuracy per test-length bin",
        description="Train GPT-style causal transformers from scratch on TASK (a task name such as UR, NF, "
        "or a program file of a registered task), following the papers' protocol: train on lengths <= 50, "
        "test on the bins <=50, 51-100, 101-150, loss on answer tokens only, AdamW, early stop at 100% "
        "in-distribution accuracy, the mean over successful seeds. Writes OUT/TASK.json and OUT/TASK.png. "
        "With --all: the ten seed tasks and a report (as rasp report).",
    )
    p.add_argument("task", nargs="?", help="task name (see rasp learn --list) or program file")
    p.add_argument("--all", action="store_true", help="run the seed paper's ten tasks and write a report")
    p.add_argument("--list", action="store_true", help="list the registered tasks")
    p.add_argument("--out", default="runs/learn", metavar="DIR", help="output folder (default runs/learn)")
    p.add_argument("--jobs", type=int, default=1, metavar="J",
                   help="with --all: train J tasks at once in separate processes (see rasp report --jobs)")
    add_training_options(p)
    p.set_defaults(func=run)


# ---- shared helpers ------------------------------------------------------------------------

def load_tasks():
    try:
        from .. import tasks
    except ImportError as exc:
        raise RaspError(f"the task registry rasp/tasks.py is not available ({exc})") from None
    return tasks


def resolve_task(name: str):
    tasks = load_tasks()
    if name in tasks.TASKS:
        return tasks.TASKS[name]
    p = Path(name)
    try:
        exists, is_file = p.exists() or p.is_symlink(), p.is_file()  # (a symlink loop exists, as no file)
    except OSError:  # a name too long for the file system, a folder that cannot be searched
        exists = is_file = False
    if p.suffix in (".cr", ".rasp") or exists:
        if not exists:
            raise RaspError(f"{name}: no such file", hint="give a task name (rasp learn --list) or a program file")
        if not is_file:
            raise RaspError(f"{name}: not a program file", hint="give a task name (rasp learn --list) or a program file")
        t = tasks.task_for_program(str(p))
        if t is None:
            from ..errors import EmptyAlphabetError
            from ..program import load

            try:
                load(str(p))  # a program with an error: that error, located (not "no task uses it")
            except EmptyAlphabetError:
                pass  # not an error of the text (every task's program declares its alphabet)
            raise RaspError(f"{name}: no registered task uses this program",
                            hint="rasp learn trains on a task's sampler: give its name (rasp learn --list), or "
                            "its bundled program file, or a copy with exactly that text")
        return t
    return tasks.get(name)  # any case (nf is NF), else a did-you-mean hint


def parse_bins(text: str):
    try:
        edges = [int(x) for x in text.replace(" ", "").split(",")]  # int("") refuses 50,,100 too
    except ValueError:
        raise RaspError(f"--bins {text}: expected increasing integers such as 50,100,150",
                        hint="the upper ends of the test length bins, e.g. --bins 50,100,150") from None
    if not edges or any(b <= a for a, b in zip(edges, edges[1:])) or edges[0] < 1:
        raise RaspError(f"--bins {text}: expected increasing positive integers such as 50,100,150",
                        hint="the upper ends of the test length bins, e.g. --bins 50,100,150")
    lows = [1] + [e + 1 for e in edges[:-1]]
    return tuple(zip(lows, edges))


def resolve_preset(args) -> str:
    check_device(args.device)
    if args.preset != "auto":
        return args.preset
    from ..learn.train import pick_device
    return "paper" if pick_device(args.device).type == "cuda" else "cpu"


#: the largest --lr: AdamW divides it by its first bias correction (1 - 0.9) and converts it to the
#: parameters' float32, which overflowed (an internal error) from about 3.4e37 on
LR_CAP = 1e30

#: the most torch threads --threads sets (many more crash the process when it starts them)
MAX_THREADS = 1024

#: what each count option of learn and report means, for the hint of a refused value
_COUNT_HINTS = {
    "seeds": "how many models to train (one per seed), e.g. --seeds 3",
    "steps": "optimizer steps per model, e.g. --steps 1000",
    "layers": "transformer layers, e.g. --layers 2",
    "heads": "attention heads per layer, e.g. --heads 4",
    "dim": "the model width, a multiple of --heads, e.g. --dim 64",
    "batch": "training sequences per step, e.g. --batch 64",
    "test_samples": "test inputs per length bin, e.g. --test-samples 200",
    "train_max": "the longest training input, e.g. --train-max 50",
}


def config_for(args, preset: str, task_name: str):
    from ..learn.train import preset_config, with_overrides
    for opt in ("seeds", "steps", "layers", "heads", "dim", "batch", "test_samples", "train_max"):
        v = getattr(args, opt, None)
        if v is not None and v < 1:
            raise RaspError(f"--{opt.replace('_', '-')} must be at least 1, got {v}", hint=_COUNT_HINTS[opt])
    if args.lr is not None and not (math.isfinite(args.lr) and args.lr > 0):
        raise RaspError(f"--lr must be a positive number, got {args.lr}", hint="the presets use 1e-3 to 1e-4")
    if args.lr is not None and args.lr > LR_CAP:  # AdamW failed converting it to the parameters' float32
        raise RaspError(f"--lr {args.lr:g}: at most {LR_CAP:g} (AdamW's first step takes lr / 0.1 in float32, "
                        "the parameters' type, which overflows past about 3.4e37)",
                        hint="the presets use 1e-3 to 1e-4 (rasp learn --help)")
    if getattr(args, "first_seed", None) is not None and args.first_seed < 0:
        raise RaspError(f"--first-seed must be at least 0, got {args.first_seed}",
                        hint="seeds run from --first-seed up, e.g. --first-seed 0")
    if getattr(args, "threads", None) is not None:
        if not 1 <= args.threads <= MAX_THREADS:  # (99,999 threads crashed the process)
            raise RaspError(f"--threads must be from 1 to {MAX_THREADS:,}, got {args.threads:,}",
                            hint=f"the torch threads to train with; this machine has {os.cpu_count() or 1} cores")
        import torch
        torch.set_num_threads(args.threads)
    alphabet = None
    if args.alphabet is not None:  # (an empty one is an error, not the default)
        from ..expand import parse_alphabet_option
        alphabet = parse_alphabet_option(args.alphabet)
        task = resolve_task(task_name)
        if tuple(task.resolve_alphabet(alphabet)) == tuple(task.resolve_alphabet(None)):
            alphabet = None  # the task's own alphabet: the papers' setting (and the same saved result)
    cfg = preset_config(preset, task_name)
    cfg = with_overrides(cfg, seeds=args.seeds, first_seed=args.first_seed, steps=args.steps,
                         positional=args.positional, layers=args.layers, heads=args.heads, dim=args.dim,
                         lr=args.lr, batch=args.batch, schedule=args.schedule, test_samples=args.test_samples,
                         train_max=args.train_max,
                         bins=parse_bins(args.bins) if args.bins is not None else None, alphabet=alphabet)
    if cfg.first_seed + cfg.seeds - 1 >= 2 ** 63:  # torch.manual_seed takes a 64-bit signed seed
        raise RaspError(f"--first-seed {cfg.first_seed} with {cfg.seeds} seeds passes 2^63 - 1, the largest seed torch takes",
                        hint=f"give a --first-seed of at most {2 ** 63 - cfg.seeds:,}")
    if cfg.dim % cfg.heads:
        raise RaspError(f"--dim {cfg.dim} is not divisible by --heads {cfg.heads}",
                        hint="every head gets --dim / --heads dimensions: choose a --dim that --heads divides")
    if cfg.positional == "rope" and (cfg.dim // cfg.heads) % 2:
        raise RaspError(f"--positional rope rotates pairs of dimensions: the head dimension --dim / --heads "
                        f"= {cfg.dim // cfg.heads} must be even", hint="choose --dim and --heads with an even quotient")
    model_bytes, data_bytes = least_training_bytes(cfg)
    dev = _training_device(args)
    if dev is not None and dev.type == "cuda":  # the model on the GPU, the test sets in host memory
        import torch

        checks = [(model_bytes, int(torch.cuda.mem_get_info(dev)[0]), f" on {dev}"),
                  (data_bytes, free_host_bytes(), " in host memory")]
    else:
        checks = [(model_bytes + data_bytes, free_host_bytes(), "")]
    for need, free, where in checks:
        if need > free:
            raise RaspError(f"this training needs at least {need / 2**30:,.1f} GiB{where} (model, optimizer, one batch "
                            f"and the test sets) and {free / 2**30:.1f} GiB are free",
                            hint="use a smaller --dim, --layers, --batch, --test-samples, --train-max or --bins")
    return cfg


def _training_device(args):
    """The device training will use, or None when it cannot be told here (a bad name is refused later,
    by check_device, with its own message)."""
    from ..learn.train import pick_device

    try:
        return pick_device(getattr(args, "device", None) or "auto")
    except RaspError:  # check_device reports it
        return None


def least_training_bytes(cfg) -> tuple[int, int]:
    """Lower bounds of the memory a training run takes, (on the training device, in host memory): it
    refuses only what cannot fit (--dim 10000000 failed inside PyTorch's allocator, --batch 1000000000
    sampled for minutes first). On the device: float32 parameters with their gradients and two Adam
    moments, one batch's activations (a residual per layer and the attention weights); on the host:
    the test sets' tokens (8 bytes each); sequences of about twice the input length (a prompt and its
    answer)."""
    longest = max([cfg.train_max] + [hi for _, hi in cfg.bins])
    T, Tt = 2 * longest + 2, 2 * cfg.train_max + 2
    params = 12 * cfg.layers * cfg.dim ** 2 + T * cfg.dim
    train = cfg.batch * Tt * cfg.layers * (cfg.dim + cfg.heads * Tt)
    tests = (cfg.test_samples * len(cfg.bins) + cfg.id_samples) * T
    return 16 * params + 4 * train, 8 * tests


def check_device(name: str) -> None:
    """A device that does not exist here is an error before any training starts."""
    from ..learn.train import pick_device
    try:
        pick_device(name)
    except RaspError as exc:  # the same resolution as rasp verify's, named after the flag
        raise RaspError(f"--device: {exc.message}", hint=exc.hint) from None


def out_dir(text: str, files: tuple[str, ...] = ()) -> Path:
    """``--out``: a folder that exists (or is made) and is writable, as are the ``files`` it will hold
    (:func:`check_out_dir`)."""
    if not text.strip():
        raise RaspError("--out is empty", hint="name a folder, e.g. --out runs/learn")
    out = Path(text)
    check_out_dir(out, files)
    return out


def check_out_dir(out: Path, files: tuple[str, ...] = ()) -> None:
    """The output folder must be creatable and writable before hours of training, not after, and so
    must the ``files`` it will hold (a folder of that name, or a read-only file, failed at the end)."""
    try:
        if out.exists() and not out.is_dir():
            raise RaspError(f"--out {out}: a file, not a folder", hint="name a folder (it is made if missing)")
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".rasp-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise RaspError(f"--out {out}: cannot write there ({exc.strerror or exc})",
                        hint="choose a folder you can write to, e.g. --out runs/learn") from None
    for name in files:
        path = out / name
        if path.is_dir():
            raise RaspError(f"--out {out}: {name} there is a folder, where the result file goes",
                            hint="remove or rename it, or choose another --out")
        if path.exists() and not os.access(path, os.W_OK):
            raise RaspError(f"--out {out}: {name} there is not writable", hint="choose another --out")


def strict_json(value, **kwargs) -> str:
    """JSON text without NaN or Infinity, which standard JSON has not (a diverged run's loss is NaN):
    a float that is not finite is written as null."""
    return json.dumps(_finite(value), allow_nan=False, **kwargs)


def _finite(v):
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite(x) for x in v]
    return v


def _stderr_open() -> bool:
    """Whether stderr is open for writing (the progress bar writes there; with `2>&-` it ended the run:
    the descriptor may even be taken by a file opened for reading since, so fstat is not enough)."""
    try:
        import fcntl

        return (fcntl.fcntl(sys.stderr.fileno(), fcntl.F_GETFL) & os.O_ACCMODE) in (os.O_WRONLY, os.O_RDWR)
    except ImportError:  # no fcntl (Windows): assume it is
        return True
    except (OSError, ValueError, AttributeError):
        return False


def log_stderr(msg: str) -> None:
    """A progress line on stderr; none when stderr is closed (`2>&-`: the training and its files
    matter, not the log; a failed write ended the run with exit 1 and no output)."""
    try:
        print(msg, file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):  # closed, detached, or None
        pass


def train_and_save(task, cfg, preset: str, args, out: Path) -> dict:
    from ..learn.report import plot_task
    from ..learn.train import run_task
    result = run_task(task, cfg, device=args.device, progress=not args.no_progress and _stderr_open(),
                      log=log_stderr)
    result["preset"] = preset
    result["command"] = "rasp " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv else ""
    result["date"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{task.name}.json").write_text(strict_json(result, indent=1))
    plot_task(result, out / f"{task.name}.png")
    return result


def print_result(result: dict) -> None:
    from ..learn.report import (PAPER_TRAIN_MAX, fmt, published_approximate, published_bins, published_fmt,
                                published_from_sweep)
    from ..learn.scores import top_heads
    c = result["config"]
    print(f"{result['task']} ({result['kind']}): {c['layers']} layers / {c['heads']} heads / {c['dim']} dims, "
          f"{c['positional'].upper()}, lr {c['lr']:g}, {result['n_params']} parameters, device {result['device']}")
    for s in result["seeds"]:
        accs = "  ".join(f"{lab} {fmt(a)}" for lab, a in zip(result["bin_labels"], s["bins_acc"]))
        print(f"  seed {s['seed']}: {s['steps']} steps, in-distribution {s['id_acc']:.3f}"
              f"{'' if s['success'] else ' (failed)'}  {accs}")
        if "scores" in s:
            sc = s["scores"]
            parts = []
            for key, name in (("induction", "induction"), ("anti_induction", "anti-induction")):
                if sc[key] is None:  # no (query, key) pair at these lengths: not a measured 0
                    parts.append(f"top {name} heads: n/a (no pairs)")
                    continue
                tops = ", ".join(f"{h} {v:.4f}" for h, v in top_heads(sc, key))
                parts.append(f"top {name} heads: {tops} (uniform attention: {sc['uniform'][key]:.4f})")
            print("    " + "; ".join(parts))
    if "compiled_heads" in result:
        from ..learn.scores import compiled_heads_text
        for line in compiled_heads_text(result["compiled_heads"]):
            print("  " + line)
    pub = published_bins(result, c["positional"])
    mean = "  ".join(f"{lab} {fmt(a)}" for lab, a in zip(result["bin_labels"], result["mean_acc"]))
    which = "all seeds, none successful" if result["all_failed"] else f"{result['n_successful']} successful seeds"
    print(f"  mean ({which}): {mean}")
    if pub:
        approx = published_approximate(result["task"], c["positional"])  # theory.md's "~100"
        sweep = " (the best of Huang et al.'s sweep; this run trained one configuration)" \
            if published_from_sweep(result["task"]) else ""
        print("  published: " + "  ".join(f"{lab} {published_fmt(a, approx)}"
                                          for lab, a in zip(result["bin_labels"], pub)) + sweep)
    elif published_bins(result, c["positional"], any_setting=True):  # figures, but for another setting
        print("  published: not shown (the papers trained over the task's own alphabet on lengths up to "
              f"{PAPER_TRAIN_MAX}; this run used {_setting_text(c)})")


def _setting_text(c: dict) -> str:
    from ..learn.report import PAPER_TRAIN_MAX

    parts = []
    if c.get("alphabet") is not None:
        parts.append(f"the alphabet {' '.join(c['alphabet'])}")
    if c.get("train_max") not in (None, PAPER_TRAIN_MAX):
        parts.append(f"training lengths up to {c['train_max']}")
    return " and ".join(parts)


# ---- the command ---------------------------------------------------------------------------

def run(args: argparse.Namespace) -> int:
    if args.list:
        from ..learn.report import published_label

        if args.task or args.all:  # a task named beside --list would be silently ignored
            raise RaspError("--list lists every task: give it alone, without a TASK or --all",
                            hint="rasp learn --list, then rasp learn TASK")

        tasks = load_tasks()
        if args.json:
            print(json.dumps([{"name": name, "task": name, "kind": t.kind, "published_in_class": t.published_in_class}
                              for name, t in tasks.TASKS.items()]))
            return 0
        for name, t in tasks.TASKS.items():
            print(f"{name}\t{t.kind}\t{published_label(t.published_in_class)}")
        return 0
    if args.all:
        from .report import run_report
        if args.task:
            raise RaspError("give either TASK or --all, not both",
                            hint="rasp learn UR (one task), or rasp learn --all (every seed task)")
        return run_report(args, list(SEED_TASKS))
    if not args.task:
        raise RaspError("no task given", hint="rasp learn UR --preset smoke   (rasp learn --list shows the tasks)")
    if args.jobs != 1:  # one task trains in one process: a silently ignored --jobs misleads
        raise RaspError(f"--jobs {args.jobs} needs --all (one task trains in one process)",
                        hint="rasp learn --all --jobs 2, or rasp report TASK ... --jobs 2")
    task = resolve_task(args.task)
    preset = resolve_preset(args)
    cfg = config_for(args, preset, task.name)
    out = out_dir(args.out, (f"{task.name}.json", f"{task.name}.png"))
    result = train_and_save(task, cfg, preset, args, out)
    if args.json:
        print(strict_json(result))
    else:
        print_result(result)
        print(f"wrote {out / (task.name + '.json')} and {out / (task.name + '.png')}")
    return 0
