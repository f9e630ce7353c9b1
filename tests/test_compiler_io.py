"""Compiled models on disk and on the command line: save/load round trip, corrupted and foreign
files, ``rasp compile`` and ``rasp verify``, and the CUDA paths (skipped without a GPU)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import compiler
import rasp
from compiler import verify as V
from rasp.cli import main

ROOT = Path(__file__).resolve().parent.parent
DYCK = str(ROOT / "programs" / "dyck1.cr")
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def ur_model():
    return compiler.compile(rasp.load(ROOT / "programs" / "ur.rasp").with_alphabet(["a", "b", "c", "d"]))


def test_save_load_round_trip(tmp_path, ur_model):
    path = ur_model.save(tmp_path / "m")
    assert {p.name for p in path.iterdir()} == {"model.safetensors", "config.json"}
    cfg = json.loads((path / "config.json").read_text())
    for key in ("architecture", "residual", "program", "output", "compiler_version", "size", "weights_sha256"):
        assert key in cfg
    assert cfg["program"]["alphabet"] == ["a", "b", "c", "d"] and cfg["output"]["kind"] == "generate"
    assert "PREV[x]" in cfg["program"]["source"]
    loaded = compiler.load(path)
    a, b = ur_model.module.weights(), loaded.module.weights()
    assert a.keys() == b.keys()
    for k in a:
        assert a[k][0] == b[k][0] and torch.equal(a[k][1], b[k][1]) and torch.equal(a[k][2], b[k][2])
    rng = np.random.default_rng(0)
    task_inputs = [["a", "b", "c", "d", "<sep>", s] for s in "abcd"]
    inputs = task_inputs + [[str(s) for s in rng.choice(list(ur_model.symbols), size=n)] for n in (1, 5, 30)]
    for dtype in ("float64", "float32", "bfloat16"):
        assert ur_model.run_batch(inputs, dtype=dtype) == loaded.run_batch(inputs, dtype=dtype)
    assert loaded.run(task_inputs[1]) == rasp.run(ur_model.program, task_inputs[1]) == ["c"]


def _saved(tmp_path) -> Path:
    return compiler.compile(rasp.load(DYCK)).save(tmp_path / "dyck")


def test_corrupted_weights_are_a_clear_error(tmp_path):
    path = _saved(tmp_path)
    data = bytearray((path / "model.safetensors").read_bytes())
    data[-3] ^= 0xFF  # flip bits in the tensor data: the header still parses
    (path / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(rasp.RaspError, match="corrupted"):
        compiler.load(path)
    (path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(rasp.RaspError):
        compiler.load(path)


def test_foreign_files_are_a_clear_error(tmp_path):
    from safetensors.torch import save_file

    path = _saved(tmp_path)
    cfg = json.loads((path / "config.json").read_text())
    # a foreign weights file (other tensors), with the hash updated so that the content check runs
    save_file({"weight": torch.zeros(3, 3)}, str(path / "model.safetensors"))
    import hashlib
    cfg["weights_sha256"] = hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(rasp.RaspError, match="do not match the architecture"):
        compiler.load(path)
    # a foreign config
    (path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(rasp.RaspError, match="not a compiled rasp model"):
        compiler.load(path)
    (path / "config.json").write_text("{broken")
    with pytest.raises(rasp.RaspError, match="JSON"):
        compiler.load(path)
    with pytest.raises(rasp.RaspError, match="not a directory"):
        compiler.load(tmp_path / "nowhere")
    (path / "config.json").unlink()
    with pytest.raises(rasp.RaspError, match="missing"):
        compiler.load(path)


def test_cli_compile(tmp_path, capsys):
    out = tmp_path / "m"
    assert main(["compile", DYCK, "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "2 layers, 4 heads, d_model 13" in text and "parameters" in text
    assert (out / "model.safetensors").is_file()
    assert main(["compile", DYCK, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["layers"] == 2 and info["heads"] == 4 and info["d_model"] == 13 and info["parameters"] > 0
    assert info["mlp_width"] == 1 and info["output_kind"] == "accept"
    passes = info["compile_passes_s"]
    assert list(passes) == ["rewrite", "graph", "plan", "alloc", "weights"]
    assert all(v >= 0 for v in passes.values()) and sum(passes.values()) <= info["compile_seconds"] + 1e-6
    bad = tmp_path / "bad.rasp"
    bad.write_text('alphabet a b\nX = #[j <= 3] "a" > 1\n')
    assert main(["compile", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.rasp:2:" in err and "not in C-RASP[periodic, local]" in err


def test_cli_verify_program_and_directory(tmp_path, capsys):
    assert main(["verify", DYCK, "--lengths", "8,64", "--samples", "3", "--json", "--device", "auto"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["exact"] is True and [r["length"] for r in res["rows"]] == [8, 64]
    assert all(r["agree"] == 1.0 and r["samples"] == 3 for r in res["rows"])
    assert res["rows"][0]["device"] == ("cuda:0" if torch.cuda.is_available() else "cpu")
    out = tmp_path / "m"
    assert main(["compile", DYCK, "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["verify", str(out), "--lengths", "16", "--samples", "2", "--dtype", "float32,bfloat16"]) == 0
    text = capsys.readouterr().out
    assert "exact: yes" in text and "bfloat16" in text
    assert main(["verify", str(out), "--alphabet", "a,b"]) == 2


def test_cli_verify_find_limit(capsys):
    assert main(["verify", str(ROOT / "programs" / "bin_majority.rasp"), "--lengths", "16", "--samples", "2",
                 "--find-limit", "--start", "64", "--max-length", "1024", "--budget", "20", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    (lim,) = res["limits"]
    assert lim["dtype"] == "float32" and lim["longest_exact"] == 1024 and "max length" in lim["stopped"]
    assert [r["length"] for r in res["rows"]] == [16, 64, 128, 256, 512, 1024]


def _clear_refs_writable() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def test_peak_memory_measures_an_allocation():
    """PeakMemory sees a 256 MiB array that lives only inside the block (on CPU, device = host), not
    a larger one freed before it (the peak is reset at the start); a block that raises reports
    nothing; where /proc/self/clear_refs cannot be written the figures are None, not wrong."""
    big = np.ones(64 * 2**20)  # 512 MiB, touched, then freed: the process's peak is now above it
    del big
    with V.PeakMemory("cpu") as small:
        x = np.ones(2**20)  # 8 MiB
        del x
    with V.PeakMemory("cpu") as p:
        a = np.ones(32 * 2**20)  # 256 MiB
        del a
    with pytest.raises(ZeroDivisionError):
        with V.PeakMemory("cpu") as failed:
            np.ones(2**20)
            1 / 0
    assert failed.host_bytes is None and failed.device_bytes is None
    if not _clear_refs_writable():
        assert p.host_bytes is None and p.device_bytes is None
        return
    assert 250 * 2**20 <= p.host_bytes < 2**30
    assert p.device_bytes == p.host_bytes
    assert small.host_bytes < 100 * 2**20


def test_predict_bytes_scales_the_last_two_steps():
    """Linear in the length from the larger per-token rate of the last two steps above the floor,
    with the margin; quadratic for the dense backend; the analytic estimate before any step reached
    the floor (or where nothing was measured), for the host too."""
    m = compiler.compile(rasp.load(DYCK))
    M, F = V.MEMORY_MARGIN, V.MEASURE_FLOOR
    steps = [(512, 9 * F, 9 * F), (1024, 10 * F, 10 * F)]
    assert V.predict_bytes(m, 2048, 1, "float32", "scan", steps) == (int(M * 2048 * 9 * F / 512),) * 2
    steps = [(1, 10**12, None), (512, F, None), (1024, 4 * F, None)]  # the first is not among the last two
    est = V.estimate_bytes(m, 2048, 1, "float32")
    assert V.predict_bytes(m, 2048, 1, "float32", "scan", steps) == (int(M * 8 * F), est)
    assert V.predict_bytes(m, 64, 1, "float32", "dense", [(32, F, F)]) == (int(M * 4 * F),) * 2
    est = V.estimate_bytes(m, 4096, 3, "float32")
    assert V.predict_bytes(m, 4096, 3, "float32", "scan", []) == (est, est)
    assert V.predict_bytes(m, 4096, 3, "float32", "scan", [(16, None, None), (32, 0, 0), (64, F - 1, F - 1)]) == (est, est)
    assert V.estimate_bytes(m, 64, 1, "float32", "dense") > V.estimate_bytes(m, 64, 1, "float32") + 3 * 65**2


def test_memory_stop_checks_the_device_and_on_cuda_the_host():
    free = {"cpu": 1000, "cuda": 10_000}.get
    fake = lambda d: free(d.type)  # noqa: E731
    assert V.memory_stop("cpu", 500, 500, fake) is None
    assert V.memory_stop("cpu", 501, 0, fake) == {"memory": "cpu", "need_bytes": 501, "free_bytes": 1000}
    assert V.memory_stop(torch.device("cuda"), 5000, 500, fake) is None
    assert V.memory_stop(torch.device("cuda"), 5001, 0, fake)["memory"] == "cuda"
    assert V.memory_stop(torch.device("cuda"), 10, 501, fake) == {"memory": "cpu", "need_bytes": 501, "free_bytes": 1000}


def test_find_limit_stops_on_the_measured_memory_budget(monkeypatch):
    """Steps that measure 2^20 bytes per token, 10^11 bytes free: the step at n runs while
    1.5 * 2^20 * n <= 0.5 * 10^11: up to 16,384; 32,768 is refused (no step is run for it)."""
    m = compiler.compile(rasp.load(DYCK))
    ran = []

    def fake_step(model, task, n, samples, rng, **kw):
        ran.append(n)
        return V.Row(length=n, samples=samples, agree=1.0, agree_interpreter=1.0, agree_reference=None,
                     model_seconds=0.0, interp_seconds=0.0, dtype="float32", device="cpu", backend="scan",
                     peak_bytes=2**20 * n, host_peak_bytes=2**20 * n)

    monkeypatch.setattr(V, "verify_length", fake_step)
    monkeypatch.setattr(V, "free_memory", lambda dev: 10**11)
    lim = V.find_limit(m, None, "float32", samples=1, rng=np.random.default_rng(0), start=16, budget_s=60)
    assert lim["longest_exact"] == 16384 and ran[-1] == 16384 and lim["stopped"] == "memory budget"
    assert lim["memory"] == {"memory": "cpu", "need_bytes": int(1.5 * 2**20 * 32768), "free_bytes": 10**11,
                             "length": 32768}


def test_verify_json_rows_report_peak_memory(capsys):
    assert main(["verify", str(ROOT / "programs" / "majority.rasp"), "--lengths", "4096", "--samples", "2",
                 "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert row["peak_bytes"] == row["host_peak_bytes"]  # CPU
    if _clear_refs_writable():
        assert row["peak_bytes"] > 50 * 2**20  # about 150 MB: two 4,096-token inputs of a d_model 1,355 model
    else:
        assert row["peak_bytes"] is None


def test_verify_reports_disagreement(capsys, monkeypatch):
    """A model that disagrees makes verify exit 1 with the first disagreeing input."""
    from compiler import api

    def broken(self, inputs, **kw):
        return [np.zeros((len(t), 1), dtype=bool) for t in inputs]

    monkeypatch.setattr(api.CompiledModel, "outputs", broken)
    assert main(["verify", DYCK, "--lengths", "4", "--samples", "20", "--json"]) == 1
    res = json.loads(capsys.readouterr().out)
    assert res["exact"] is False and res["rows"][0]["agree"] < 1 and res["rows"][0]["example"]


def test_device_auto_and_backends_on_cpu():
    from compiler.model import resolve_device

    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    m = compiler.compile(rasp.load(DYCK)).model("cpu", "float32")
    assert m.pick_backend("auto") == "scan"
    with pytest.raises(rasp.RaspError):
        m.pick_backend("flash")


@cuda
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_cuda_matches_cpu(dtype, ur_model):
    rng = np.random.default_rng(1)
    inputs = [[str(s) for s in rng.choice(list(ur_model.symbols), size=n)] for n in (1, 7, 300, 3000)]
    cpu = ur_model.outputs(inputs, device="cpu", dtype=dtype)
    for backend in ("auto", "scan", "dense" if dtype != "bfloat16" else "scan"):
        gpu = ur_model.outputs(inputs[:3] if backend == "dense" else inputs, device="cuda", dtype=dtype,
                               backend=backend)
        for a, b in zip(cpu, gpu):
            assert np.array_equal(a, b)
    assert ur_model.model("cuda", dtype).pick_backend("auto") == ("scan" if dtype == "float64" else "sdpa")
    same, _, _, _, _ = V.check_inputs(ur_model, inputs, [None] * len(inputs), device="cuda", dtype=dtype)
    assert all(same)


@cuda
@pytest.mark.cuda
def test_cuda_long_input_sdpa_is_exact():
    p = rasp.load(ROOT / "programs" / "bin_majority.rasp")
    m = compiler.compile(p)
    rng = np.random.default_rng(2)
    toks = [p.alphabet[int(b)] for b in rng.random(1 << 18) < 0.5]
    for dtype in ("float32", "bfloat16"):
        same, _, _, _, _ = V.check_inputs(m, [toks], [None], device="cuda", dtype=dtype, backend="sdpa", max_new=4)
        assert all(same)


@cuda
@pytest.mark.cuda
def test_cuda_peak_memory_and_free_memory():
    """On CUDA, PeakMemory reports the allocator's peak of a 256 MiB tensor made inside the block;
    free_memory counts what the caching allocator holds unused as free; a find-limit row on CUDA
    carries both figures."""
    dev = torch.device("cuda")
    with V.PeakMemory(dev) as p:
        x = torch.ones(64 * 2**20, device=dev)  # 256 MiB
        del x
    assert 256 * 2**20 <= p.device_bytes < 300 * 2**20
    assert V.free_memory(dev) >= torch.cuda.mem_get_info(dev)[0]
    m = compiler.compile(rasp.load(DYCK))
    lim_rows: list = []
    lim = V.find_limit(m, None, "float32", samples=1, rng=np.random.default_rng(0), device="cuda", start=1024,
                       max_length=4096, rows=lim_rows)
    assert lim["longest_exact"] == 4096 and all(r.peak_bytes is not None for r in lim_rows)


def test_compile_and_save_do_not_need_torch(tmp_path):
    """`rasp compile -o` builds and writes the weights with NumPy; the nn.Module (and PyTorch, whose
    import alone takes seconds) is only built when the model runs. The file is the same either way."""
    code = ("import sys; from rasp.cli import main; "
            f"rc = main(['compile', {DYCK!r}, '-o', {str(tmp_path / 'a')!r}]); "
            "print(rc, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.split()[-2:] == ["0", "False"], out.stdout + out.stderr
    m = compiler.load(tmp_path / "a")  # runs with torch
    m.save(tmp_path / "b")  # saved again from the module's tensors
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (tmp_path / "b" / "model.safetensors").read_bytes()
    assert m.run("( ( ) )") is True
