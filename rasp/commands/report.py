"""``rasp report``: learn a set of tasks and set the measured accuracy beside the theory's prediction."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import RaspError
from .learn import (SEED_TASKS, add_training_options, config_for, log_stderr, resolve_preset, resolve_task,
                    train_and_save)


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
    p.add_argument("tasks", nargs="*", help="task names (default: UR UL NRFirst NLFirst UF UB NRLast NLLast NF NB)")
    p.add_argument("--out", default="runs/report", metavar="DIR", help="output folder (default runs/report)")
    p.add_argument("--fresh", action="store_true", help="retrain even when OUT/TASK.json has the same settings")
    p.add_argument("--no-train", action="store_true", help="build the report from the existing OUT/*.json only")
    add_training_options(p)
    p.set_defaults(func=lambda a: run_report(a, a.tasks or list(SEED_TASKS)))


def run_report(args: argparse.Namespace, names: list[str]) -> int:
    from ..learn.report import markdown, plot_report, print_rows, report_rows

    out = Path(args.out)
    preset = resolve_preset(args)
    tasks = {n: resolve_task(n) for n in names}
    results = []
    for name, task in tasks.items():
        cfg = config_for(args, preset, task.name)
        path = out / f"{task.name}.json"
        old = json.loads(path.read_text()) if path.exists() else None
        if old is not None and (getattr(args, "no_train", False) or
                                (not getattr(args, "fresh", False) and old.get("config") == cfg.to_dict())):
            log_stderr(f"{task.name}: using {path}")
            results.append(old)
            continue
        if getattr(args, "no_train", False):
            raise RaspError(f"{path}: no result to report", hint="run without --no-train first")
        results.append(train_and_save(task, cfg, preset, args, out))
    rows = report_rows(results, tasks)
    md = markdown(rows)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(md)
    (out / "report.json").write_text(json.dumps(rows, indent=1))
    plot_report(rows, out / "report.png")
    if args.json:
        print(json.dumps(rows))
    else:
        print_rows(rows)
        print(f"wrote {out / 'report.md'}, {out / 'report.png'}, {out / 'report.json'}")
    return 0
