"""rasp learn: data masking, scores, determinism, and the smoke preset end to end (all fast)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

import numpy as np
import pytest
import torch

from rasp.cli import main
from rasp.learn import data as D
from rasp.learn import scores as S
from rasp.learn import train as T


# ---- a tiny fake task registry with the interface of rasp/tasks.py -------------------------

@dataclass(frozen=True)
class Sample:
    tokens: list
    target: object


@dataclass(frozen=True)
class FakeTask:
    name: str
    kind: str
    alphabet: tuple
    mode: str
    special: tuple = ("<sep>",)
    program: str | None = None
    published_in_class: bool = True
    published_nope: bool | None = None
    citation: str = "test"
    statement: str = ""
    source: str = ""
    published_accuracy: dict = field(default_factory=lambda: {"APE": [1.0, 0.99, 0.97]})

    def min_length(self, alphabet=None):
        return 3

    def max_length(self, alphabet=None):
        return len(self.alphabet) if self.mode in ("copyF", "copyB", "UR") else None

    def sample(self, rng, length, alphabet=None):
        a = list(self.alphabet)
        if self.mode in ("copyF", "copyB"):
            xs = [a[i] for i in rng.permutation(len(a))[:length]]
            return Sample(xs + ["<sep>"], xs if self.mode == "copyF" else xs[::-1])
        if self.mode == "UR":
            xs = [a[i] for i in rng.permutation(len(a))[: length - 1]]
            j = int(rng.integers(0, len(xs) - 1))
            return Sample(xs + ["<sep>", xs[j]], [xs[j + 1]])
        if self.mode == "acc":
            xs = [str(x) for x in rng.choice(a, size=length)]
            return Sample(xs, xs.count(a[0]) > xs.count(a[1]))
        if self.mode == "pred":
            xs = [str(x) for x in rng.choice(a, size=length)]
            return Sample(xs, [[t for t in a if t != x] for x in xs])
        raise ValueError(self.mode)

    def reference(self, tokens):
        raise NotImplementedError


ALPHA = tuple(f"t{i}" for i in range(12))
UF = FakeTask("FakeF", "generate", ALPHA, "copyF")
UB = FakeTask("FakeB", "generate", ALPHA, "copyB")
UR = FakeTask("FakeR", "generate", ALPHA, "UR")
ACC = FakeTask("ACC", "accept", ("a", "b"), "acc", special=())
PRED = FakeTask("PRED", "predict", ("a", "b", "c"), "pred", special=())

TINY = T.TrainConfig(layers=1, heads=2, dim=16, steps=6, eval_every=3, id_samples=8, test_samples=8,
                     eval_batch=8, batch=8, seeds=1, bins=((1, 6), (7, 12)), train_max=6, score_samples=4)


# ---- data: loss only on answer tokens --------------------------------------------------------

def test_generate_masks_only_the_answer_tokens():
    v = D.Vocab.for_task(UF)
    s = Sample(["t1", "t2", "t3", "<sep>"], ["t1", "t2", "t3"])
    e = D.encode_sample("generate", v, s)
    ix = v.index
    # input: <bos> t1 t2 t3 <sep> t1 t2   (teacher forcing: the last target token is not input)
    assert e.ids == [1, ix["t1"], ix["t2"], ix["t3"], ix["<sep>"], ix["t1"], ix["t2"]]
    assert e.loss_pos == [4, 5, 6]                      # <sep> -> t1, t1 -> t2, t2 -> t3
    b = D.collate("generate", v, [e, D.encode_sample("generate", v, Sample(["t4", "<sep>"], ["t4"]))])
    assert b.loss_mask[0].tolist() == [False] * 4 + [True] * 3
    assert b.labels[0].tolist() == [-100] * 4 + [ix["t1"], ix["t2"], ix["t3"]]
    assert b.loss_mask[1].tolist() == [False, False, True] + [False] * 4     # padded row
    assert b.ids[1].tolist()[3:] == [0, 0, 0, 0]


def test_retrieval_has_one_loss_position_at_the_query():
    v = D.Vocab.for_task(UR)
    e = D.encode_sample("generate", v, Sample(["t1", "t2", "t3", "<sep>", "t2"], ["t3"]))
    assert e.loss_pos == [5] and len(e.ids) == 6 and e.target == [v.index["t3"]]


def test_loss_ignores_non_answer_positions():
    v = D.Vocab.for_task(UF)
    b = D.collate("generate", v, [D.encode_sample("generate", v, Sample(["t1", "t2", "<sep>"], ["t1", "t2"]))])
    logits = torch.zeros(1, b.ids.shape[1], len(v))
    base = D.loss_fn("generate", logits, b)
    logits2 = logits.clone()
    logits2[0, :3] = torch.randn(3, len(v)) * 10       # change only non-answer positions
    assert torch.allclose(D.loss_fn("generate", logits2, b), base)
    logits2[0, 3, 0] = 5.0                              # an answer position changes the loss
    assert not torch.allclose(D.loss_fn("generate", logits2, b), base)


def test_accept_and_predict_targets():
    v = D.Vocab.for_task(ACC)
    e = D.encode_sample("accept", v, Sample(["a", "a", "b"], True))
    assert e.loss_pos == [3] and e.target == [1]
    vp = D.Vocab.for_task(PRED)
    e = D.encode_sample("predict", vp, Sample(["a", "b"], [["b", "c"], ["a", "c"]]))
    assert e.loss_pos == [1, 2]
    b = D.collate("predict", vp, [e])
    ix = vp.index
    assert b.labels[0, 1].tolist() == [1.0 if t in ("b", "c") else 0.0 for t in vp.tokens]
    assert b.loss_mask[0].tolist() == [False, True, True]
    # exact match per sample: all positions' sets right
    logits = (b.labels * 2 - 1) * 5
    assert D.correct("predict", logits, b).tolist() == [True]
    logits[0, 2, ix["a"]] = -5
    assert D.correct("predict", logits, b).tolist() == [False]


def test_teacher_forced_accuracy_equals_greedy_decoding():
    torch.manual_seed(0)
    v = D.Vocab.for_task(UF)
    model = T.make_model(UF, v, T.TrainConfig(layers=1, heads=2, dim=16), n_pos=40)
    rng = np.random.default_rng(1)
    samples = D.make_samples(UF, rng, 3, 8, 20)
    enc = [D.encode_sample("generate", v, s) for s in samples]
    b = D.collate("generate", v, enc)
    tf = D.correct("generate", model(b.ids), b).tolist()
    greedy = [D.greedy_generate(model, v, s.tokens, len(s.target)) == list(s.target) for s in samples]
    assert tf == greedy
    # a model that copies perfectly: force logits by a hand-made module
    class Oracle(torch.nn.Module):
        def forward(self, ids, positions=None):
            out = torch.full((*ids.shape, len(v)), -10.0)
            for bi in range(ids.shape[0]):
                row = ids[bi].tolist()
                sep = row.index(v.index["<sep>"])
                for p in range(sep, len(row)):
                    k = p - sep
                    if k + 1 < sep:
                        out[bi, p, row[1 + k]] = 10.0
            return out
    assert all(D.correct("generate", Oracle()(b.ids), b).tolist())


# ---- mechanistic scores on a hand-built attention pattern ----------------------------------

def test_scores_on_hand_built_attention():
    N = 4                                   # <bos> x1..x4 <sep> y1..y3 : T = 9 inputs
    T_ = 2 * N + 1
    att = np.zeros((1, 3, T_, T_))
    for q in range(T_):
        att[0, :, q, 0] = 1.0               # default: everything on <bos>
    for k in range(1, N):                   # y_k at index N+1+k
        q = N + 1 + k
        att[0, 0, q] = 0; att[0, 0, q, k + 1] = 1.0          # head 0: next source token (forward)
        att[0, 1, q] = 0; att[0, 1, q, k] = 1.0              # head 1: same source token (forward)
        att[0, 2, q] = 0; att[0, 2, q, k] = 0.5; att[0, 2, q, k + 1] = 0.5
    sc = S.head_scores([att], [N], "forward")
    assert sc["induction"][0] == [1.0, 0.0, 0.5]
    assert sc["anti_induction"][0] == [0.0, 1.0, 0.5]
    assert sc["pairs"] == {"induction": 3, "anti_induction": 3}
    assert S.top_heads(sc, "induction", 1) == [("L0H0", 1.0)]
    assert S.top_heads(sc, "anti_induction", 1) == [("L0H1", 1.0)]


def test_score_positions_backward():
    # backward copy of x1..x3: y1 = x3 (index 3), y2 = x2 (index 2); queries y1, y2 at 5, 6
    assert S.score_positions(3, "backward") == [(5, None, 3), (6, 3, 2)]
    assert S.score_positions(3, "forward") == [(5, 2, 1), (6, 3, 2)]


def test_scores_without_pairs_are_none_not_zero():
    # N = 1: no query at all; a backward copy of N = 2: one query, whose induction key is <sep>
    one = S.head_scores([np.ones((1, 1, 3, 3)) / 3], [1], "forward")
    assert one["induction"] is None and one["anti_induction"] is None
    assert one["uniform"] == {"induction": None, "anti_induction": None}
    assert one["pairs"] == {"induction": 0, "anti_induction": 0}
    assert S.top_heads(one, "induction") == []
    two = S.head_scores([np.ones((1, 2, 5, 5)) / 5], [2], "backward")
    assert two["induction"] is None and two["uniform"]["induction"] is None
    assert two["anti_induction"] == [[0.2, 0.2]] and two["uniform"]["anti_induction"] == 0.2
    json.dumps(one), json.dumps(two)  # null in the report


def test_score_direction_is_checked():
    for bad in ("Forward", "nonsense"):
        with pytest.raises(ValueError, match="direction"):
            S.score_positions(3, bad)
        with pytest.raises(ValueError, match="direction"):
            S.head_scores([np.ones((1, 1, 7, 7)) / 7], [3], bad)


def test_compiled_head_ranges():
    info = {"program": "uf.rasp", "alphabet": ["a", "b"], "summary": "s",
            "layers": [{"layer": 1, "predecessor": [], "separator": [], "other": [],
                        "bigram": [[1, "x"], [2, "x"], [3, "x"], [5, "y"], [7, "z"]],
                        "start": [[0, "s"], [4, "s"], [6, "s"]]}]}
    line = S.compiled_heads_text(info)[1]
    assert "5 bigram heads (H1-3,5,7, e.g. x)" in line and "3 start heads (H0,4,6, e.g. s)" in line


def test_copy_direction():
    assert S.copy_direction(UF) == "forward"
    assert S.copy_direction(UB) == "backward"
    assert S.copy_direction(UR) is None


# ---- training ------------------------------------------------------------------------------

def test_training_is_deterministic_for_a_seed():
    a = T.run_task(UF, TINY, device="cpu", progress=False)
    b = T.run_task(UF, TINY, device="cpu", progress=False)
    assert a["seeds"][0]["scores"] == b["seeds"][0]["scores"]
    strip = lambda r: [{k: v for k, v in s.items() if k not in ("train_s", "eval_s")} for s in r["seeds"]]  # noqa: E731
    assert strip(a) == strip(b)
    c = T.run_task(UF, replace(TINY, first_seed=1), device="cpu", progress=False, scores=False)
    assert strip(c)[0]["final_loss"] != strip(a)[0]["final_loss"]


@pytest.mark.parametrize("task", [UR, ACC, PRED], ids=lambda t: t.name)
def test_other_kinds_train(task):
    r = T.run_task(task, TINY, device="cpu", progress=False)
    assert len(r["mean_acc"]) == 2 and all(a is None or 0 <= a <= 1 for a in r["mean_acc"])


def test_bins_clip_to_the_task_and_positions_cover_the_longest_test():
    cfg = replace(TINY, bins=((1, 6), (7, 12), (13, 20)))
    v = D.Vocab.for_task(UF)
    ds = T.build_datasets(UF, v, cfg)
    assert ds.bins == [(3, 6), (7, 12), None] and ds.tests[2] == []
    assert ds.n_pos == 1 + 12 + 1 + 12 - 1       # <bos> x1..x12 <sep> y1..y11
    r = T.run_task(UF, cfg, device="cpu", progress=False, scores=False)
    assert r["mean_acc"][2] is None


def test_training_samples_fit_the_model_positions():
    """A training sample longer than the model's positions is drawn again at its input length (the
    learn helper's audit: addition with --bins 50 drew answers longer than every probe; NoPE raised,
    APE reused its last row), samples that fit are kept as drawn, and an impossible bound is a
    RaspError."""
    import rasp
    from rasp import tasks as RT

    add = RT.get("addition")
    v = D.Vocab.for_task(add)
    rng = np.random.default_rng(0)
    samples = [add.sample(rng, 30) for _ in range(200)]
    lengths = [len(D.encode_sample(add.kind, v, s).ids) for s in samples]
    bound = sorted(lengths)[len(lengths) // 2]  # half the samples are longer
    got = T._within_positions(add, v, np.random.default_rng(1), samples, bound)
    assert all(len(e.ids) <= bound for e in got) and len(got) == len(samples)
    kept = [e for e, s, n in zip(got, samples, lengths) if n <= bound]
    assert all(e.ids == D.encode_sample(add.kind, v, s).ids for e, s in zip(kept, [s for s, n in zip(samples, lengths) if n <= bound]))
    assert T._within_positions(add, v, rng, samples, max(lengths)) == [D.encode_sample(add.kind, v, s) for s in samples]
    with pytest.raises(rasp.RaspError, match="positions"):
        T._within_positions(add, v, rng, samples, 5)


def test_an_easy_task_is_learned():
    cfg = T.TrainConfig(layers=1, heads=1, dim=16, lr=1e-2, steps=150, eval_every=25, id_samples=64,
                        test_samples=64, seeds=1, bins=((1, 10),), train_max=10, batch=32)
    r = T.run_task(ACC, cfg, device="cpu", progress=False)
    assert r["seeds"][0]["id_acc"] > 0.8


# ---- the CLI -------------------------------------------------------------------------------

@pytest.fixture
def fake_registry(monkeypatch):
    # import both before patching: report.py binds learn.resolve_task at import time, and a first import
    # after the patch would make the fake its "original", which the undo would then restore
    import rasp.commands.learn as L
    import rasp.commands.report as R
    reg = {t.name: t for t in (UF, UB, UR)}
    monkeypatch.setattr(L, "resolve_task", lambda n: reg[n])
    monkeypatch.setattr(R, "resolve_task", lambda n: reg[n])
    return reg


def test_cli_smoke_writes_json_and_plot(tmp_path, fake_registry, capsys):
    rc = main(["learn", "FakeF", "--preset", "smoke", "--out", str(tmp_path), "--no-progress", "--device", "cpu"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "top induction heads" in out and "published" in out
    res = json.loads((tmp_path / "FakeF.json").read_text())
    assert res["preset"] == "smoke" and len(res["mean_acc"]) == 3 and "scores" in res["seeds"][0]
    assert (tmp_path / "FakeF.png").stat().st_size > 1000


def test_cli_report_reuses_results(tmp_path, fake_registry, capsys):
    args = ["report", "FakeF", "FakeR", "--preset", "smoke", "--steps", "4", "--test-samples", "4", "--out",
            str(tmp_path), "--no-progress", "--device", "cpu"]
    assert main(args) == 0
    md = (tmp_path / "report.md").read_text()
    assert "| FakeF |" in md and "| FakeR |" in md
    assert (tmp_path / "report.png").exists()
    capsys.readouterr()
    assert main(args + ["--json"]) == 0
    captured = capsys.readouterr()
    assert "using" in captured.err and json.loads(captured.out)[0]["task"] in ("FakeF", "FakeR")


def test_cli_report_takes_a_program_file_as_its_task(tmp_path, capsys, monkeypatch):
    """`rasp report programs/ur.rasp UR`: one row, with UR's program and checker verdict (the row had
    program none and verdict n/a, and a name and a path of one task made two rows; the learn helper's
    audit)."""
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    args = ["report", "programs/ur.rasp", "UR", "--preset", "smoke", "--steps", "2", "--test-samples", "2",
            "--out", str(tmp_path), "--no-progress", "--device", "cpu", "--json"]
    assert main(args) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["task"], r["program"], r["fragment"], r["guarantee"]) for r in rows] == [
        ("UR", "programs/ur.rasp", "C-RASP[local]", "guaranteed")]


def test_cli_learn_refuses_empty_bins_and_an_empty_alphabet(tmp_path, capsys):
    """--bins that no input of the task reaches, and --alphabet '', are user errors (both ran: the
    first with every accuracy n/a, the second with the default alphabet)."""
    for extra, word in ((["--bins", "2"], "no test inputs in any bin"), (["--alphabet", ""], "--alphabet is empty")):
        assert main(["learn", "UR", "--preset", "smoke", "--steps", "1", "--no-progress", "--out", str(tmp_path),
                     *extra]) == 2, extra
        err = capsys.readouterr().err
        assert word in err and "internal error" not in err, err


def test_cli_user_errors(tmp_path, fake_registry, capsys):
    assert main(["learn", "FakeF", "--bins", "100,50", "--out", str(tmp_path)]) == 2
    assert main(["learn", "FakeF", "--steps", "0", "--out", str(tmp_path)]) == 2
    assert main(["learn", "--out", str(tmp_path)]) == 2
    # caught before any training: bad numbers, devices that are not here, an output folder that
    # cannot be written (these were internal errors, or came after training)
    (tmp_path / "afile").write_text("")
    for extra, word in ((["--lr", "nan"], "--lr"), (["--lr", "inf"], "--lr"), (["--first-seed", "-1"], "--first-seed"),
                        (["--device", "bogus"], "--device"), (["--device", "cuda:7"], "--device"),
                        (["--out", str(tmp_path / "afile")], "--out")):
        argv = ["learn", "FakeF", "--preset", "smoke", "--steps", "1", "--no-progress"] + extra
        if "--out" not in extra:
            argv += ["--out", str(tmp_path)]
        assert main(argv) == 2, extra
        err = capsys.readouterr().err
        assert word in err and "internal error" not in err, extra


def test_cli_settings_no_task_can_meet_are_user_errors(tmp_path, capsys):
    """No training length in range, an alphabet too small for the task, an empty --out or --bins,
    --jobs 0, --fresh with --no-train: exit 2 before any training (they were internal errors, or
    were quietly replaced by defaults)."""
    base = ["--preset", "smoke", "--steps", "1", "--no-progress", "--device", "cpu"]
    for argv, word in ((["learn", "UR", "--train-max", "2", "--out", str(tmp_path)], "--train-max"),
                       (["learn", "UR", "--alphabet", "1", "--out", str(tmp_path)], "--alphabet"),
                       (["learn", "UR", "--out", ""], "--out is empty"),
                       (["learn", "UR", "--bins", "", "--out", str(tmp_path)], "--bins"),
                       (["learn", "UR", "--bins", "50,,100", "--out", str(tmp_path)], "--bins"),
                       (["report", "UR", "--jobs", "0", "--out", str(tmp_path)], "--jobs"),
                       (["report", "UR", "--fresh", "--no-train", "--out", str(tmp_path)], "--no-train"),
                       (["learn", "UF", "--positional", "rope", "--dim", "30", "--heads", "2", "--out", str(tmp_path)],
                        "head dimension")):
        assert main(argv + base) == 2, argv
        err = capsys.readouterr().err
        assert word in err and "internal error" not in err, (argv, err)
    assert not list(tmp_path.glob("*.json"))


def test_cli_out_names_and_arguments_the_audit_found(tmp_path, capsys):
    """A --out name too long for the file system was an internal error (exit 1) in learn and report;
    report --no-train said "no such folder" of a file; --list ignored a task named beside it; a
    program without an alphabet line said "pass --alphabet" instead of "no task uses it"; a symlink
    loop was an "unknown task" (helper 96's audit)."""
    long = str(tmp_path / ("x" * 300))
    for argv in (["learn", "UR", "--out", long, "--steps", "1"], ["learn", "UR", "--out", long, "--json"],
                 ["report", "UR", "--out", long, "--no-train"], ["report", "UR", "--out", long, "--steps", "1"]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "--out" in err and "internal error" not in err, (argv, err)
    afile = tmp_path / "afile"
    afile.write_text("")
    assert main(["report", "UR", "--no-train", "--out", str(afile)]) == 2
    assert "not a folder" in capsys.readouterr().err
    assert main(["learn", "--list", "UR"]) == 2
    assert "give it alone" in capsys.readouterr().err
    assert main(["learn", "UR", "--all"]) == 2
    assert "hint: " in capsys.readouterr().err
    noalpha = tmp_path / "noalpha.cr"
    noalpha.write_text("F[x] = exists Q[x]\nok = any(x, F[x])\n")
    assert main(["learn", str(noalpha)]) == 2
    assert "no registered task uses this program" in capsys.readouterr().err
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert main(["learn", str(loop)]) == 2
    assert "not a program file" in capsys.readouterr().err


def test_cli_report_refuses_a_damaged_result_with_no_train(tmp_path, capsys):
    import rasp.commands.report as R

    for text, word in (("{bad", "UR.json:1:2: error: not readable JSON"), ("{}", "its task is None"),
                       ("[]", "not a JSON object")):  # malformed JSON located where it breaks
        (tmp_path / "UR.json").write_text(text)
        assert main(["report", "UR", "--no-train", "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert "UR.json" in err and word in err and "internal error" not in err
    good = {"task": "UR", "config": {"positional": "ape"}, "bins": [[1, 50]], "bin_labels": ["<=50"],
            "mean_acc": [1.0], "seeds": [{"steps": 3}], "n_successful": 1, "n_seeds": 1, "all_failed": False,
            "time_s": 1.0}
    assert R._result_problem(good, "UR") is None
    assert "differ in length" in R._result_problem(dict(good, mean_acc=[1.0, 0.5]), "UR")
    assert "'time_s'" in R._result_problem({k: v for k, v in good.items() if k != "time_s"}, "UR")
    # the types the report prints: each of these was an internal error in the table or the plot
    for bad, word in ((dict(good, mean_acc=["x"]), "accuracy"), (dict(good, mean_acc=[float("nan")]), "accuracy"),
                      (dict(good, bin_labels=[1]), "bin label"), (dict(good, config={"positional": 5}), "positional"),
                      (dict(good, bins=[[1]]), "bin"), (dict(good, n_seeds="1"), "n_seeds"),
                      # helper 68: no bins failed in the plot; accuracies past 1 and an infinite time
                      # went into the table (and --json wrote Infinity, which is not JSON)
                      (dict(good, bins=[], bin_labels=[], mean_acc=[]), "no test bins"),
                      (dict(good, mean_acc=[5]), "accuracy"), (dict(good, mean_acc=[-3.0]), "accuracy"),
                      (dict(good, time_s=float("inf")), "time_s")):
        assert word in R._result_problem(bad, "UR")
        (tmp_path / "UR.json").write_text(json.dumps(bad))
        assert main(["report", "UR", "--no-train", "--out", str(tmp_path), "--json"]) == 2
        out, err = capsys.readouterr()
        assert "internal error" not in out + err and json.loads(out)["error"]["message"], out
    (tmp_path / "UR.json").write_text("[" * 100000 + "]" * 100000)
    assert main(["report", "UR", "--no-train", "--out", str(tmp_path)]) == 2
    assert "not readable JSON (nested too deeply)" in capsys.readouterr().err
    # --no-train makes no folder (a failed report left an empty --out behind)
    assert main(["report", "UR", "--no-train", "--out", str(tmp_path / "none")]) == 2
    assert "no such folder" in capsys.readouterr().err and not (tmp_path / "none").exists()
    assert main(["report", "NoSuchTask", "--out", str(tmp_path / "none")]) == 2
    assert not (tmp_path / "none").exists()


def test_cli_files_in_the_way_and_large_learning_rates_are_refused_before_training(tmp_path, capsys, monkeypatch):
    """A folder named like a result file, a file given as --out and a learning rate past float32 are
    user errors before any training (they were internal errors after it); a diverged run's NaN loss
    is written as null (standard JSON has no NaN)."""
    import os

    import rasp.commands.learn as L
    import rasp.commands.report as R

    for module in (L, R):  # (report imported it by name)
        monkeypatch.setattr(module, "train_and_save", lambda *a, **k: pytest.fail("trained"))
    base = ["--preset", "smoke", "--steps", "1", "--no-progress", "--device", "cpu"]
    (tmp_path / "w" / "UR.json").mkdir(parents=True)
    (tmp_path / "r" / "report.md").mkdir(parents=True)
    (tmp_path / "u").mkdir()
    (tmp_path / "u" / "UR.json").write_text("{}")  # not a result: UR trains, and cannot write it
    (tmp_path / "f").write_text("")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: not str(p).endswith("UR.json") and real_access(p, mode))
    for argv, word in ((["learn", "UR", "--out", str(tmp_path / "w")], "UR.json there is a folder"),
                       (["report", "UR", "--out", str(tmp_path / "r")], "report.md there is a folder"),
                       (["report", "UR", "--out", str(tmp_path / "u")], "UR.json there is not writable"),
                       (["learn", "UR", "--out", str(tmp_path / "f")], "a file, not a folder"),
                       (["learn", "UR", "--lr", "1e38", "--out", str(tmp_path / "x")], "--lr")):
        assert main(argv + base) == 2, argv
        err = capsys.readouterr().err
        assert word in err and "internal error" not in err, (argv, err)
    assert L.strict_json({"loss": float("nan"), "h": [1.5, float("inf")]}) == '{"loss": null, "h": [1.5, null]}'


def test_cli_report_no_train_refuses_results_with_different_bins(tmp_path, capsys):
    """Results read with --no-train made with other --bins or --positional cannot share one table
    (the plot indexed one task's bins with another's: IndexError)."""
    good = {"task": "UR", "config": {"positional": "ape"}, "bins": [[1, 50], [51, 100]],
            "bin_labels": ["1-50", "51-100"], "mean_acc": [1.0, 0.5], "seeds": [{"steps": 3}],
            "n_successful": 1, "n_seeds": 1, "all_failed": False, "time_s": 1.0}
    (tmp_path / "UR.json").write_text(json.dumps(good))
    for other, word in ((dict(good, task="UL", bins=[[1, 50]], bin_labels=["1-50"], mean_acc=[1.0]), "test bins"),
                        (dict(good, task="UL", config={"positional": "rope"}), "positional encoding")):
        (tmp_path / "UL.json").write_text(json.dumps(other))
        assert main(["report", "UR", "UL", "--no-train", "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert word in err and "UR and UL" in err and "internal error" not in err, err
    (tmp_path / "UL.json").write_text(json.dumps(dict(good, task="UL")))
    assert main(["report", "UR", "UL", "--no-train", "--out", str(tmp_path), "--json"]) == 0
    assert [r["task"] for r in json.loads(capsys.readouterr().out)] == ["UR", "UL"]
    assert (tmp_path / "report.png").stat().st_size > 1000
    # a setting given with --no-train that the results were not made with is refused (--positional
    # rope printed the APE results as they were); the one they were made with is fine
    assert main(["report", "UR", "UL", "--no-train", "--positional", "rope", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "UR.json: made with positional ape, not rope (--positional)" in err and "drop --positional" in err
    assert main(["report", "UR", "UL", "--no-train", "--positional", "ape", "--out", str(tmp_path), "--json"]) == 0
    capsys.readouterr()
    for name in ("UR", "UL"):  # and the preset, where the result records it
        (tmp_path / f"{name}.json").write_text(json.dumps(dict(good, task=name, preset="smoke")))
    assert main(["report", "UR", "UL", "--no-train", "--preset", "paper", "--out", str(tmp_path)]) == 2
    assert "UR.json: made with preset smoke, not paper (--preset)" in capsys.readouterr().err
    assert main(["report", "UR", "UL", "--no-train", "--preset", "smoke", "--out", str(tmp_path), "--json"]) == 0
    capsys.readouterr()


def test_published_numbers_follow_the_bins_measured():
    """--bins other than the papers': the published figure only for bins that are the papers' (a plot
    with two bins used to fail on the three published ones)."""
    from rasp.learn.report import published_bins

    r = {"published_accuracy": {"APE": [0.9, 0.5, 0.1]}, "bins": [[1, 50], [51, 100]]}
    assert published_bins(r, "ape") == [0.9, 0.5]
    assert published_bins(dict(r, bins=[[1, 50], [51, 80]]), "ape") == [0.9, None]
    assert published_bins(dict(r, bins=[[1, 10]]), "ape") is None
    assert published_bins(dict(r, bins=[[1, 50], [51, 100], [101, 150]]), "ape") == [0.9, 0.5, 0.1]


def test_published_numbers_only_beside_the_papers_setting():
    """Another --alphabet or --train-max answers another question: no published figure beside it
    (NF over one symbol scored 1.00 next to the published 0.13)."""
    from rasp.learn.report import published_bins

    r = {"published_accuracy": {"APE": [0.9, 0.5, 0.1]}, "bins": [[1, 50], [51, 100], [101, 150]],
         "config": {"alphabet": None, "train_max": 50}}
    assert published_bins(r, "ape") == [0.9, 0.5, 0.1]
    assert published_bins(dict(r, config={"alphabet": ["a"], "train_max": 50}), "ape") is None
    assert published_bins(dict(r, config={"alphabet": None, "train_max": 30}), "ape") is None
    # --alphabet naming the task's own alphabet is the papers' setting (UR: the 26 letters)
    from rasp.cli import build_parser
    from rasp.commands import learn as L

    for option, own in (("26", True), ("a,b,c,d,e", False)):
        args = build_parser().parse_args(["learn", "UR", "--alphabet", option, "--preset", "smoke"])
        assert (L.config_for(args, L.resolve_preset(args), "UR").alphabet is None) == own


def test_report_takes_published_facts_from_the_registry():
    """A result saved before the registry's published numbers were corrected shows the registry's."""
    from rasp.learn.report import report_rows
    from rasp.tasks import TASKS

    ur = TASKS["UR"]
    r = {"task": "UR", "config": {"positional": "ape", "alphabet": None, "train_max": 50},
         "bins": [[1, 50], [51, 100], [101, 150]], "bin_labels": ["<=50", "51-100", "101-150"],
         "mean_acc": [1.0, 1.0, 1.0], "seeds": [{"steps": 3}], "n_successful": 1, "n_seeds": 1,
         "all_failed": False, "time_s": 1.0, "published_accuracy": {"APE": [0.1, 0.1, 0.1]},
         "published_in_class": False}
    (row,) = report_rows([r], {"UR": ur})
    assert row["published_acc"] == list(ur.published_accuracy["APE"]) and row["in_class"] is True


def test_cli_learn_with_two_bins_writes_its_plot(tmp_path, fake_registry, capsys):
    rc = main(["learn", "FakeF", "--preset", "smoke", "--steps", "2", "--test-samples", "2", "--bins", "20,40",
               "--out", str(tmp_path), "--no-progress", "--device", "cpu"])
    assert rc == 0 and (tmp_path / "FakeF.png").stat().st_size > 1000


def test_cli_learn_list_json(capsys):
    assert main(["learn", "--list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {"name": "UR", "task": "UR", "kind": "generate", "published_in_class": True} in rows


def test_real_registry_smoke(tmp_path):
    tasks = pytest.importorskip("rasp.tasks")
    name = "UR" if "UR" in tasks.TASKS else next(iter(tasks.TASKS))
    rc = main(["learn", name, "--preset", "smoke", "--out", str(tmp_path), "--no-progress", "--device", "cpu"])
    assert rc == 0 and (tmp_path / f"{name}.json").exists() and (tmp_path / f"{name}.png").exists()


def test_copy_direction_over_small_alphabets():
    """Distinct-token copies over 4 symbols are at most 5 tokens long: the direction is found at
    that length (it sampled length 6 and stopped `rasp learn UF --alphabet 4` before training)."""
    tasks = pytest.importorskip("rasp.tasks")
    from rasp.learn.data import AlphabetView

    assert S.copy_direction(AlphabetView(tasks.TASKS["UF"], ["a", "b", "c", "d"])) == "forward"
    assert S.copy_direction(AlphabetView(tasks.TASKS["UB"], ["a", "b"])) == "backward"
    assert S.copy_direction(AlphabetView(tasks.TASKS["UF"], ["a"])) is None  # one copied token: no direction


def test_compiled_heads_roles():
    tasks = pytest.importorskip("rasp.tasks")
    pytest.importorskip("compiler.api")
    if "UF" not in tasks.TASKS:
        pytest.skip("no UF task")
    info = S.compiled_heads(tasks.TASKS["UF"], n_symbols=3)
    if "error" in info:
        pytest.skip(f"compiler: {info['error']}")
    roles = {r: sum(len(layer[r]) for layer in info["layers"]) for r in S.ROLES}
    # UF over 3 symbols: a predecessor head per symbol, a bigram head per pair; the start test
    # ("true at i-1") and FIRSTTOK's heads (#(!(true at i-1) && y): the input starts with y) are
    # not bigram heads (they were counted as such); the separator count is "other"
    assert roles == {"predecessor": 3, "separator": 0, "bigram": 9, "start": 1 + 3, "other": 1}
    assert S.head_role("uniform", None, '(#("a" && "b" at i-1) - 1/2)/(i+1)') == "bigram"
    assert S.head_role("uniform", None, '(#(!("b" at i-1) && "a") - 1/2)/(i+1)') == "other"
    assert S.head_role("local", 1, "FIRST[a] at i-1") == "predecessor"
    # offsets 12, 13 are not offset 1
    assert S.head_role("uniform", None, '(#("a" at i-12 && "b") - 5/2)/(i+1)') == "other"
    assert S.head_role("uniform", None, '(#(!(true at i-13) && "b") - 5/2)/(i+1)') == "other"
    assert S.compiled_heads(replace(UR, name="NoSuchTask"))["error"] == "no program"
    # UR's QUERY = exists[j == i - 1] "<sep>" is the separator test, not a predecessor step (an audit
    # found it counted among UR's predecessor heads and printed as their example)
    ur = S.compiled_heads(tasks.TASKS["UR"], n_symbols=3)
    assert [[label for _, label in layer["separator"]] for layer in ur["layers"]][0] == ['"<sep>" at i-1']
    assert all('"<sep>"' not in label for layer in ur["layers"] for _, label in layer["predecessor"])
    assert S.head_role("local", 1, '"<sep>" at i-1', ("<sep>",)) == "separator"
    assert S.head_role("local", 1, '"a" at i-1', ("<sep>",)) == "predecessor"
    assert S.head_role("local", 1, '!("<sep>" at i-1)', ("<sep>",)) == "predecessor"  # not a separator test


def test_report_jobs_gives_the_same_results_as_one_job(tmp_path, capsys):
    """--jobs 2 trains in separate processes; each task's result equals the sequential one."""
    base = ["report", "UL", "NF", "--preset", "smoke", "--steps", "6", "--test-samples", "4", "--threads", "1",
            "--no-progress", "--device", "cpu", "--json"]
    assert main(base + ["--out", str(tmp_path / "seq")]) == 0
    assert main(base + ["--out", str(tmp_path / "par"), "--jobs", "2"]) == 0
    capsys.readouterr()
    for name in ("UL", "NF"):
        a = json.loads((tmp_path / "seq" / f"{name}.json").read_text())
        b = json.loads((tmp_path / "par" / f"{name}.json").read_text())
        assert a["seeds"][0]["history"] == b["seeds"][0]["history"]
        assert a["seeds"][0]["bins_acc"] == b["seeds"][0]["bins_acc"]
        assert a["seeds"][0]["final_loss"] == b["seeds"][0]["final_loss"]


def test_learning_rate_schedules():
    cos = T.TrainConfig(lr=1e-3, steps=1000, warmup_frac=0.1)
    const = T.TrainConfig(lr=1e-3, steps=1000, warmup_frac=0.1, schedule="constant")
    for cfg in (cos, const):  # the same linear warm-up over 100 steps
        assert T.lr_at(0, cfg) == pytest.approx(1e-5) and T.lr_at(99, cfg) == pytest.approx(1e-3)
    assert T.lr_at(999, cos) == pytest.approx(1e-4, rel=1e-3)  # cosine ends at 10%
    assert T.lr_at(550, cos) == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5), rel=1e-2)
    assert all(T.lr_at(s, const) == 1e-3 for s in (100, 550, 999, 5000))
    assert T.preset_config("cpu", "UR").schedule == "constant"
    assert T.preset_config("paper", "UR").schedule == "cosine"


def test_learn_on_another_alphabet(tmp_path, capsys):
    rc = main(["learn", "UR", "--preset", "smoke", "--steps", "3", "--test-samples", "4", "--alphabet", "5",
               "--out", str(tmp_path), "--no-progress", "--device", "cpu", "--threads", "1"])
    assert rc == 0
    res = json.loads((tmp_path / "UR.json").read_text())
    assert res["vocab"] == ["<pad>", "<bos>", "<sep>", "a", "b", "c", "d", "e"]
    assert res["config"]["alphabet"] == ["a", "b", "c", "d", "e"]
    capsys.readouterr()
    # a task whose alphabet is fixed: a user error (exit 2), not a traceback
    assert main(["learn", "dyck1", "--preset", "smoke", "--alphabet", "x,y", "--out", str(tmp_path)]) == 2
    assert "fixed alphabet" in capsys.readouterr().err


@pytest.mark.parametrize("flag", [["--dim", "10000000"], ["--test-samples", "1000000000000"], ["--batch", "1000000000"],
                                  ["--bins", "1000000000000"], ["--train-max", "100000000000"]])
def test_cli_learn_refuses_a_training_that_cannot_fit(flag, tmp_path, capsys):
    """Sizes no machine holds are refused before anything is built or sampled (--dim 10^7 failed in
    PyTorch's allocator, --batch 10^9 sampled for minutes, --test-samples 10^12 ran out of memory)."""
    argv = ["learn", "UR", "--preset", "smoke", "--steps", "1", "--out", str(tmp_path), "--threads", "1"] + flag
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "this training needs at least" in err and "internal error" not in err
