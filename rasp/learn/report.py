"""Results of ``rasp learn`` as tables and plots, beside the published numbers and the checker.

- ``checker_verdict(task)``: the fragment and guarantee ``rasp.checker`` gives the task's program
  (imported lazily; "n/a" when the checker or the program is missing -- never made up);
- ``report_rows(results, tasks)``: one row per task: measured accuracy per bin, published label
  and published accuracy per bin for the same positional encoding;
- ``markdown(rows)``, ``print_rows(rows)``: the table as markdown / on the terminal (rich);
- ``plot_task(result, path)``: accuracy per bin for one task (each seed, the mean, published);
- ``plot_report(rows, path)``: published vs measured per task and bin, in-class tasks first.
"""
from __future__ import annotations

from pathlib import Path

#: the test bins of the papers' tables (theory.md): published accuracies are per these bins
PAPER_BINS = ((1, 50), (51, 100), (101, 150))

POS_KEYS = {"ape": ("APE", "ape"), "rope": ("RoPE", "rope", "ROPE"), "nope": ("NoPE", "nope", "NOPE")}


ROOT = Path(__file__).resolve().parents[2]  # the repository root (programs/ lives there)


def program_path(task) -> Path | None:
    """The task's program: ``task.program``, or else ``programs/<name>.rasp`` (``.cr``) when the registry
    lists none (the out-of-class seed tasks have RASP-L programs there), or None."""
    prog = getattr(task, "program", None)
    cands = [Path(prog), ROOT / prog] if prog else []
    cands += [ROOT / "programs" / f"{task.name.lower()}{ext}" for ext in (".rasp", ".cr")]
    return next((p for p in cands if p.is_file()), None)


def checker_verdict(task) -> tuple[str, str]:
    """(fragment, guarantee) of the task's program according to ``rasp.checker``, or "n/a"."""
    try:
        from .. import checker  # noqa: PLC0415 - optional, written separately
    except ImportError:
        return "n/a", "n/a"
    path = program_path(task)
    if path is None:
        return "n/a (no program)", "n/a"
    try:
        from ..program import load
        program = load(str(path))
        fn = getattr(checker, "check_program", None) or getattr(checker, "check")
        verdict = fn(program)
    except Exception as exc:  # noqa: BLE001 - the report must not die on one program
        return f"n/a ({type(exc).__name__})", "n/a"
    get = (lambda k: verdict.get(k)) if isinstance(verdict, dict) else (lambda k: getattr(verdict, k, None))
    frag = get("fragment")
    guar = get("guarantee")
    return (str(frag) if frag is not None else "n/a"), (str(guar) if guar is not None else "n/a")


#: both papers train on lengths up to 50 (theory.md sections 2 and 3)
PAPER_TRAIN_MAX = 50


def paper_setting(result: dict) -> bool:
    """Whether a result was trained as the papers trained: the task's own alphabet and training
    lengths up to :data:`PAPER_TRAIN_MAX` (results without a config say nothing against it)."""
    cfg = result.get("config")
    if not isinstance(cfg, dict):
        return True
    return cfg.get("alphabet") is None and cfg.get("train_max", PAPER_TRAIN_MAX) == PAPER_TRAIN_MAX


def published_bins(task_or_result, positional: str = "ape", *, any_setting: bool = False):
    """The papers' accuracies per test bin for this positional encoding, or None. For a result, one
    entry per bin it was measured on (``--bins``): the published figure where the bin is one of the
    papers' (:data:`PAPER_BINS`), None elsewhere; None in all when no bin is, and None when the
    result was not trained in the papers' setting (another ``--alphabet``, or training lengths up to
    another ``--train-max`` than :data:`PAPER_TRAIN_MAX`): its numbers answer another question
    (``any_setting``: whatever the setting, to say that there are figures not shown)."""
    if not any_setting and isinstance(task_or_result, dict) and not paper_setting(task_or_result):
        return None
    pub = (task_or_result.get("published_accuracy") if isinstance(task_or_result, dict)
           else getattr(task_or_result, "published_accuracy", None)) or {}
    vals = next((list(pub[k]) for k in POS_KEYS.get(positional, (positional,)) if k in pub), None)
    if vals is None or not (isinstance(task_or_result, dict) and "bins" in task_or_result):
        return vals
    paper = {b: v for b, v in zip(PAPER_BINS, vals)}
    out = [paper.get(tuple(b)) for b in task_or_result["bins"]]
    return out if any(v is not None for v in out) else None


def published_label(in_class) -> str:
    return "n/a" if in_class is None else ("in class" if in_class else "not in class")


def fmt(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def report_rows(results: list[dict], tasks: dict | None = None) -> list[dict]:
    rows = []
    for r in results:
        task = (tasks or {}).get(r["task"])
        if task is not None:  # the registry's published facts, not the copy saved with an older result
            r = dict(r, published_accuracy=getattr(task, "published_accuracy", None),
                     published_in_class=getattr(task, "published_in_class", None))
        frag, guar = checker_verdict(task) if task is not None else ("n/a", "n/a")
        prog = program_path(task) if task is not None else None
        pos = r["config"]["positional"]
        rows.append({
            "task": r["task"], "fragment": frag, "guarantee": guar,
            "program": None if prog is None else (str(prog.relative_to(ROOT)) if prog.is_relative_to(ROOT) else str(prog)),
            "published": published_label(r.get("published_in_class")),
            "in_class": r.get("published_in_class"),
            "published_acc": published_bins(r, pos), "measured_acc": r["mean_acc"],
            "seeds": f"{r['n_successful']}/{r['n_seeds']}", "all_failed": r["all_failed"],
            "steps": [s["steps"] for s in r["seeds"]], "time_s": r["time_s"],
            "bin_labels": r["bin_labels"], "positional": pos,
            "published_approximate": published_approximate(r["task"], pos),
            "published_from_sweep": published_from_sweep(r["task"]),
        })
    # in-class tasks first (as in the papers' tables), then out-of-class, then unknown
    order = {True: 0, False: 1, None: 2}
    return sorted(rows, key=lambda x: order[x["in_class"]])


def published_fmt(v, approximate: bool) -> str:
    """A published figure: ``fmt``, with ``~`` where theory.md gives it only roughly."""
    return ("~" if approximate and v is not None else "") + fmt(v)


def _bins_cell(vals, n, approximate: bool = False) -> str:
    if vals is None:
        return " / ".join(["n/a"] * n)
    return " / ".join(published_fmt(v, approximate) for v in vals)


def published_approximate(task_name: str, positional: str) -> bool:
    """Whether the registry's published accuracies of this task for this positional encoding are
    approximate (theory.md's "~100")."""
    from ..tasks import TASKS

    task = TASKS.get(task_name)
    return task is not None and any(k in task.published_approximate for k in POS_KEYS.get(positional, (positional,)))


def published_from_sweep(task_name: str) -> bool:
    """Whether the published figure is the best model of Huang et al.'s sweep (their tasks), where
    ``rasp learn`` trains one configuration."""
    from ..tasks import HUANG, TASKS

    task = TASKS.get(task_name)
    return task is not None and task.source == HUANG


#: the markdown report's note on rows marked "+" (published_from_sweep)
SWEEP_NOTE = ("+ Huang et al. report the best model of a sweep (layers {1,2,4} x heads {1,2,4} x width "
              "{16,64,256} x lr {1e-3,1e-4}, with a regularizer on position-position attention logits; "
              "theory.md section 3); rasp learn trains one configuration per task.")


def markdown(rows: list[dict]) -> str:
    if not rows:
        return "(no results)\n"
    labels = " / ".join(rows[0]["bin_labels"])
    pos = rows[0]["positional"].upper()
    head = (f"| task | program | checker fragment | guarantee | published | published acc {pos} ({labels}) "
            f"| measured acc ({labels}) | successful seeds | steps |\n|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in rows:
        n = len(r["bin_labels"])
        meas = _bins_cell(r["measured_acc"], n) + (" (no seed reached 100% in-distribution)" if r["all_failed"] else "")
        lines.append(f"| {r['task']} | {r['program'] or 'none'} | {r['fragment']} | {r['guarantee']} | {r['published']} | "
                     f"{_published_cell(r, n)} | {meas} | {r['seeds']} | "
                     f"{', '.join(str(s) for s in r['steps'])} |")
    note = "\n" + SWEEP_NOTE + "\n" if any(r["published_from_sweep"] and r["published_acc"] for r in rows) else ""
    return head + "\n".join(lines) + "\n" + note


def _published_cell(r: dict, n: int) -> str:
    mark = " +" if r["published_from_sweep"] and r["published_acc"] else ""
    return _bins_cell(r["published_acc"], n, r["published_approximate"]) + mark


def print_rows(rows: list[dict], console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    if not rows:
        console.print("(no results)")
        return
    if not console.is_terminal:  # piped or logged: the markdown table reads better than a wrapped box
        print(markdown(rows), end="")
        print(f"bins: {' / '.join(rows[0]['bin_labels'])}")
        return
    t = Table(title="learning from scratch: published vs measured accuracy per test bin")
    for c in ("task", "fragment", "guarantee", "published", "published acc", "measured acc", "seeds ok"):
        t.add_column(c)
    for r in rows:
        n = len(r["bin_labels"])
        t.add_row(r["task"], r["fragment"], r["guarantee"], r["published"], _published_cell(r, n),
                  _bins_cell(r["measured_acc"], n) + (" *" if r["all_failed"] else ""), r["seeds"])
    console.print(t)
    console.print(f"bins: {' / '.join(rows[0]['bin_labels'])}; * = no seed reached 100% in-distribution "
                  "(mean over all seeds)")
    if any(r["published_from_sweep"] and r["published_acc"] for r in rows):
        console.print(SWEEP_NOTE)


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_task(result: dict, path) -> None:
    plt = _plt()
    labels = result["bin_labels"]
    x = list(range(len(labels)))
    fig, ax = plt.subplots(figsize=(5, 3.4))
    for s in result["seeds"]:
        ys = [float("nan") if a is None else a for a in s["bins_acc"]]
        ax.plot(x, ys, "o-", color="0.75", lw=1, label=f"seed {s['seed']}" + ("" if s["success"] else " (failed)"))
    ys = [float("nan") if a is None else a for a in result["mean_acc"]]
    ax.plot(x, ys, "o-", color="C0", lw=2.5,
            label="measured (mean of all seeds: none successful)" if result.get("all_failed") else "measured (mean)")
    pub = published_bins(result, result["config"]["positional"])
    if pub:
        ax.plot(x[: len(pub)], [float("nan") if v is None else v for v in pub], "s--", color="C3", lw=1.5,
                label="published")
    ax.set_xticks(x, labels)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("test length bin")
    ax.set_ylabel("accuracy (exact match)")
    ax.set_title(f"{result['task']} ({result['config']['positional'].upper()}, "
                 f"{published_label(result.get('published_in_class'))})")
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_report(rows: list[dict], path) -> None:
    """One panel per bin; per task two bars: published (hatched) and measured; green = in class."""
    plt = _plt()
    if not rows:
        return
    labels = rows[0]["bin_labels"]
    fig, axes = plt.subplots(1, len(labels), figsize=(4.2 * len(labels), 3.6), sharey=True, squeeze=False)
    names = [r["task"] for r in rows]
    xs = list(range(len(rows)))
    colors = ["tab:green" if r["in_class"] else ("tab:red" if r["in_class"] is False else "tab:gray") for r in rows]
    for k, ax in enumerate(axes[0]):
        pub = [float("nan") if not r["published_acc"] or r["published_acc"][k] is None else r["published_acc"][k] for r in rows]
        meas = [float("nan") if r["measured_acc"][k] is None else r["measured_acc"][k] for r in rows]
        ax.bar([x - 0.2 for x in xs], pub, 0.4, color=colors, alpha=0.35, hatch="//", edgecolor="0.3", label="published")
        ax.bar([x + 0.2 for x in xs], meas, 0.4, color=colors, edgecolor="0.2", label="measured")
        ax.set_xticks(xs, names, rotation=60, fontsize=8)
        ax.set_title(f"test lengths {labels[k]}")
        ax.set_ylim(0, 1.05)
        n_in = sum(1 for r in rows if r["in_class"])
        if 0 < n_in < len(rows):
            ax.axvline(n_in - 0.5, color="0.5", ls=":")
    axes[0][0].set_ylabel("accuracy")
    handles, labs = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labs, fontsize=7, loc="upper right")
    fig.suptitle("predicted (green: in C-RASP[pos], red: not) vs observed; hatched = published, solid = measured",
                 fontsize=9, x=0.4)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=120)
    plt.close(fig)
