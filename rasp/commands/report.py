"""``rasp report``: learn a set of tasks and set the measured accuracy beside the theory's prediction."""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import multiprocessing
import os
from pathlib import Path

from ..errors import RaspError, read_json_file
from .learn import (SEED_TASKS, add_training_options, check_out_dir, config_for, log_stderr, out_dir, resolve_preset,
                    resolve_task, strict_json, train_and_save)


def register(sub) -> None:
    p = sub.add_parser(
        "report",
        help="learn a set of tasks; table of checker verdict, published and measured accuracy",
        description="Run rasp learn on TASKS (default: the seed paper's ten tasks) and print one table: task, "
        "the checker's fragment and guarantee for its program, the published label and accuracy per bin, the "
        "measured accuracy per bin. Writes OUT/report.md, OUT/report.png, OUT/report.json and each task's "
        "JSON and plot. A task whose OUT/TASK.json was made with the same settings is not trained again "
        "(--fresh retrains); --no-train only reads existing results.",
    )
    p.add_argument("tasks", nargs="*", default=[], help="task names (default: UR UL NRFirst NLFirst UF UB NRLast NLLast NF NB)")
    p.add_argument("--out", default="runs/report", metavar="DIR", help="output folder (default runs/report)")
    p.add_argument("--fresh", action="store_true", help="retrain even when OUT/TASK.json has the same settings")
    p.add_argument("--no-train", action="store_true", help="build the report from the existing OUT/*.json only")
    p.add_argument("--jobs", type=int, default=1, metavar="J",
                   help="train J tasks at once in separate processes (default 1). Each process gets "
                   "--threads threads (default: the CPU count divided by J); on 2 cores, --jobs 2 with one thread "
                   "each trains about 1.4x faster than one job with two threads")
    add_training_options(p)
    p.set_defaults(func=lambda a: run_report(a, a.tasks or list(SEED_TASKS)))


#: the files a report writes besides each task's TASK.json and TASK.png
REPORT_FILES = ("report.md", "report.json", "report.png")


def run_report(args: argparse.Namespace, names: list[str]) -> int:
    from ..learn.report import markdown, plot_report, print_rows, report_rows

    if getattr(args, "fresh", False) and getattr(args, "no_train", False):
        raise RaspError("--fresh retrains and --no-train trains nothing: give one of them",
                        hint="--fresh trains every task again; --no-train reports the results already in --out")
    jobs = getattr(args, "jobs", None)
    jobs = 1 if jobs is None else jobs
    if jobs < 1:
        raise RaspError(f"--jobs must be at least 1, got {jobs}", hint="tasks trained at once, in separate processes, e.g. --jobs 2")
    preset = resolve_preset(args)
    # keyed by the task's own name: a program file and a name of the same task are one row, and the
    # report finds each task's program and checker verdict by the name its result carries
    tasks = {}
    for n in names:
        task = resolve_task(n)
        tasks.setdefault(task.name, task)
    # the folder is made (and checked writable) only once the arguments are known good, and not at all
    # for --no-train, which only reads what is there (a failed report left an empty --out behind)
    if getattr(args, "no_train", False):
        out = Path(args.out)
        try:
            is_dir, exists = out.is_dir(), out.exists()
        except OSError as exc:  # a name too long for the file system, a folder that cannot be searched
            raise RaspError(f"--out {out}: cannot read there ({exc.strerror or exc})",
                            hint="give the folder of earlier results") from None
        if not is_dir:
            raise RaspError(f"--out {out}: {'not a folder' if exists else 'no such folder'} (--no-train reads "
                            "the results there)",
                            hint="run without --no-train first, or give the folder of earlier results")
    else:
        out = out_dir(args.out, REPORT_FILES)  # before any training (a folder in the way failed at the end)
    if jobs > 1 and args.threads is None:
        args.threads = max(1, (os.cpu_count() or 1) // jobs)
    results: dict[str, dict] = {}
    todo = []
    for name, task in tasks.items():
        cfg = config_for(args, preset, task.name)
        path = out / f"{task.name}.json"
        old = _read_result(path, task.name, must=getattr(args, "no_train", False))
        if old is not None and getattr(args, "no_train", False):
            _explicit_settings_match(args, cfg.to_dict(), old, path)
        if old is not None and (getattr(args, "no_train", False) or
                                (not getattr(args, "fresh", False) and old.get("config") == cfg.to_dict())):
            log_stderr(f"{task.name}: using {path}")
            results[name] = old
            continue
        if getattr(args, "no_train", False):
            raise RaspError(f"{path}: no result to report", hint="run without --no-train first")
        todo.append((name, cfg))
    # the files of the tasks that will train (a result only read may be read-only), before training
    check_out_dir(out, tuple(f"{name}.{ext}" for name, _ in todo for ext in ("json", "png")))
    if jobs == 1 or len(todo) <= 1:
        for name, cfg in todo:
            results[name] = train_and_save(tasks[name], cfg, preset, args, out)
    else:
        # one process per task at a time; a task's result does not depend on the others or on the order
        args.no_progress = True  # several progress bars would overwrite each other
        ctx = multiprocessing.get_context("spawn")
        wargs = argparse.Namespace(**{k: v for k, v in vars(args).items() if not callable(v)})
        with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futs = {name: pool.submit(_train_in_worker, name, cfg, preset, wargs, str(out)) for name, cfg in todo}
            for name, fut in futs.items():
                results[name] = fut.result()
    results = [results[n] for n in tasks]
    _same_table(results)
    rows = report_rows(results, tasks)
    md = markdown(rows)
    check_out_dir(out, REPORT_FILES)  # (--no-train: the folder of the results, which must take the report too)
    (out / "report.md").write_text(md)
    (out / "report.json").write_text(strict_json(rows, indent=1))
    plot_report(rows, out / "report.png")
    if args.json:
        print(strict_json(rows))
    else:
        print_rows(rows)
        print(f"wrote {out / 'report.md'}, {out / 'report.png'}, {out / 'report.json'}")
    return 0


#: training options and their keys in a result's config (what --no-train checks when they are given)
_SETTINGS = ("seeds", "first_seed", "steps", "positional", "layers", "heads", "dim", "lr", "batch", "schedule",
             "test_samples", "train_max", "bins", "alphabet")


def _explicit_settings_match(args, wanted: dict, old: dict, path) -> None:
    """``--no-train`` reads results as they are: a setting given on the command line that the stored
    result was not made with is refused (``--positional rope`` printed the APE results)."""
    stored = old.get("config") or {}
    if getattr(args, "preset", "auto") != "auto" and old.get("preset") not in (None, args.preset):
        raise RaspError(f"{path}: made with preset {old['preset']}, not {args.preset} (--preset): --no-train only "
                        "reports existing results", hint="drop --preset, or run without --no-train to train with it")
    for opt in _SETTINGS:
        if getattr(args, opt, None) is None or opt not in stored or stored[opt] == wanted.get(opt):
            continue
        flag = "--" + opt.replace("_", "-")
        raise RaspError(f"{path}: made with {opt.replace('_', ' ')} {_show(stored[opt])}, not {_show(wanted.get(opt))} "
                        f"({flag}): --no-train only reports existing results",
                        hint=f"drop {flag}, or run without --no-train to train with it")


def _same_table(results: list[dict]) -> None:
    """One table has one set of test bins and one positional encoding (its columns and header);
    results read with ``--no-train`` may have been made with different ``--bins`` or
    ``--positional`` (trained ones share the settings)."""
    if not results:
        return
    first = results[0]
    for r in results[1:]:
        for key, what, flag in ((lambda x: x["bin_labels"], "test bins", "--bins"),
                                (lambda x: x["config"]["positional"], "positional encoding", "--positional")):
            if key(r) != key(first):
                raise RaspError(
                    f"{first['task']} and {r['task']} were learned with different {what} "
                    f"({_show(key(first))} and {_show(key(r))}): one report table needs the same {what}",
                    hint=f"report them separately, or train again with one {flag} (without --no-train)")


def _show(v) -> str:
    return " / ".join(map(str, v)) if isinstance(v, list) else str(v)


def _read_result(path: Path, name: str, *, must: bool) -> dict | None:
    """A task's earlier result, or None when there is none. One that cannot be read or is not a
    result of this task is an error with ``--no-train`` (``must``: nothing else to report), and is
    trained over otherwise."""
    if not path.exists():
        return None
    if path.is_dir():  # not a result to train over: training could not write its file there either
        raise RaspError(f"--out {path.parent}: {path.name} there is a folder, where the result file goes",
                        hint="remove or rename it, or choose another --out")
    try:
        r = read_json_file(path, hint="run without --no-train to train it again (the file is replaced)")
        problem = _result_problem(r, name)
    except RaspError as exc:
        if must:  # located at the line and column where the JSON breaks
            raise
        at = f" at line {exc.span.line}, column {exc.span.column}" if exc.span is not None else ""
        problem = f"{exc.message.removeprefix(f'{path}: ')}{at}"
    if problem is None:
        return r
    if must:
        raise RaspError(f"{path}: not a result of rasp learn for {name}: {problem}",
                        hint="run without --no-train to train it again (the file is replaced)")
    log_stderr(f"{name}: {path} is not a usable result ({problem}); training again")
    return None


def _result_problem(r, name: str) -> str | None:
    """What keeps ``r`` from being a result of ``rasp learn`` for task ``name`` (the fields the
    report reads), or None."""
    if not isinstance(r, dict):
        return "not a JSON object"
    if r.get("task") != name:
        return f"its task is {r.get('task')!r}"
    lists = ("bins", "bin_labels", "mean_acc", "seeds")
    if not isinstance(r.get("config"), dict) or "positional" not in r["config"]:
        return "no config with a positional encoding"
    bad = [k for k in lists if not isinstance(r.get(k), list)]
    if bad:
        return f"no list {bad[0]!r}"
    if not len(r["bins"]) == len(r["bin_labels"]) == len(r["mean_acc"]):
        return "bins, bin_labels and mean_acc differ in length"
    if not r["bins"]:
        return "no test bins"
    if not all(isinstance(x, dict) and "steps" in x for x in r["seeds"]):
        return "a seed without its steps"
    missing = [k for k in ("n_successful", "n_seeds", "all_failed", "time_s") if k not in r]
    if missing:
        return f"no {missing[0]!r}"
    # the types the report prints and plots (a hand-edited file once failed deep inside them)
    from ..learn.model import POSITIONAL  # (imports torch: not at the CLI's start)

    if r["config"]["positional"] not in POSITIONAL:
        return f"positional encoding {r['config']['positional']!r} is not one of {', '.join(POSITIONAL)}"
    if not all(isinstance(b, list) and len(b) == 2 and all(type(x) is int for x in b) for b in r["bins"]):
        return "a bin that is not [low, high]"
    if not all(isinstance(x, str) for x in r["bin_labels"]):
        return "a bin label that is not text"
    if not all(a is None or (type(a) in (int, float) and 0 <= a <= 1) for a in r["mean_acc"]):
        return "an accuracy that is not a number from 0 to 1 or null"
    if not (type(r["n_successful"]) is int and type(r["n_seeds"]) is int and type(r["all_failed"]) is bool
            and type(r["time_s"]) in (int, float) and math.isfinite(r["time_s"]) and r["time_s"] >= 0):
        return "n_successful, n_seeds, all_failed or time_s of the wrong type (time_s: seconds, finite)"
    return None


def _train_in_worker(name: str, cfg, preset: str, args: argparse.Namespace, out: str) -> dict:
    """Train one task in a worker process (``rasp report --jobs``): same threads, same result."""
    import torch
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    return train_and_save(resolve_task(name), cfg, preset, args, Path(out))
