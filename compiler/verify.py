"""Checking a compiled model against the interpreter (and the task's reference) on sampled inputs.

**Inputs** come from the task's sampler when the program file belongs to a registered task
(:func:`rasp.tasks.task_for_program`), else uniformly from the data alphabet.

**What is compared.** Acceptors and character predictors: the output bools at **every** position
(every prefix), model against interpreter (``Program.evaluate``), which the model computes in one
pass anyway. Generators: the model decodes greedily with its key/value cache; the interpreter is then
run once on prompt + continuation and must choose the same token at every step and stop where the
model stopped (teacher forcing: equivalent to running the interpreter's own greedy loop, but O(n)
instead of O(n^2)). Where a task is registered, the output value must also equal its reference.

**find-limit** doubles the length until the first disagreement, the task's longest input, the time
budget (the next length would not finish within it) or the memory budget, and reports the longest
length at which every sample agreed, per dtype.

**Memory budget.** Every step's memory is measured (:class:`PeakMemory`: how far the process's
resident memory rose above its level at the start of the step on CPU, the caching allocator's peak
on CUDA), and the next length is tried only if the larger per-token figure of the last two steps,
scaled linearly to the next length (memory is linear in n for every backend but ``dense``) with a
margin of ``MEMORY_MARGIN``, fits in ``MEMORY_FRACTION`` of the memory free now (:func:`free_memory`);
on CUDA the host's part (sampling, interpreter) must fit in the host's free memory as well. Until a
step has used ``MEASURE_FLOOR`` bytes, and where nothing can be measured (no ``/proc``),
:func:`estimate_bytes`, an analytic bound, takes its place. A search the budget stopped says
``"stopped": "memory budget"`` and, under ``"memory"``, the length refused, its predicted need and
the free memory.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from rasp.errors import RaspError
from rasp.interp import evaluate, make_batch
from rasp.memory import free_host_bytes
from rasp.program import Program, default_max_new, generation_limits

from .api import CompiledModel
from .bounded import max_length_of
from .model import dtype_name, resolve_dtype

#: interpreter batches hold at most this many tokens
INTERP_CHUNK = 1 << 20


@dataclass
class Row:
    length: int
    samples: int
    agree: float  # fraction of inputs where model == interpreter (== reference where there is one)
    agree_interpreter: float
    agree_reference: float | None
    model_seconds: float
    interp_seconds: float
    dtype: str
    device: str
    backend: str
    example: list | None = None  # the first disagreeing input (shortened), if any
    #: measured peak memory the step added (bytes; see PeakMemory), None where it cannot be measured:
    #: on the model's device, and on the host (the same figure on CPU)
    peak_bytes: int | None = None
    host_peak_bytes: int | None = None
    #: whether the dtype holds every weight exactly (CompiledModel.exact_dtypes); where it does not, a
    #: disagreement measures the rounding of a constant, not the construction
    weights_exact: bool = True

    def to_json(self) -> dict:
        return asdict(self)


def as_task(task):
    """A registered task, given as itself, by name, or None."""
    if isinstance(task, str):
        from rasp import tasks

        return tasks.get(task)  # an unknown name is a RaspError with a suggestion
    return task


def task_for(program: Program, loaded: bool = False):
    """The registered task of a program file, or None (the registry is optional). ``loaded``: the
    program of a saved model, matched by its text alone (its recorded file name is relative to the
    directory it was compiled in: from the repository root, a user's own ``programs/dyck1.cr`` was
    the bundled one and was checked against the Dyck-1 reference)."""
    if not program.filename and not loaded:
        return None
    try:
        from rasp import tasks
    except Exception:  # noqa: BLE001 - no registry: uniform sampling
        return None
    fn = getattr(tasks, "task_for_program", None)
    if fn is None:
        return None
    try:
        return fn(None if loaded else program.filename, program.source)
    except Exception:  # noqa: BLE001
        return None


def sampler_alphabet(task, program: Program):
    return None if tuple(program.alphabet) == tuple(task.alphabet) else tuple(program.alphabet)


def sample_inputs(program: Program, task, rng: np.random.Generator, length: int, k: int):
    """k inputs of ``length`` tokens and their reference outputs (None without a task)."""
    if task is not None:
        alph = sampler_alphabet(task, program)
        out = [task.sample(rng, length, alphabet=alph) for _ in range(k)]
        return [list(s.tokens) for s in out], [s.target for s in out]
    symbols = list(program.symbols)  # special tokens too: a separator is what starts most generators
    toks = [[symbols[i] for i in rng.integers(0, len(symbols), size=length)] for _ in range(k)]
    return toks, [None] * k


def task_max_length(task, program: Program) -> int | None:
    if task is None:
        return None
    try:
        return task.max_length(sampler_alphabet(task, program))
    except Exception:  # noqa: BLE001
        return None


def _interp_values(program: Program, seqs: list[np.ndarray], names) -> list[np.ndarray]:
    """Per input: (n_i, len(names)) bools of the named definitions at every position."""
    out: list = [None] * len(seqs)
    order = sorted(range(len(seqs)), key=lambda r: len(seqs[r]))
    chunk: list[int] = []

    def flush():
        if not chunk:
            return
        batch = make_batch([seqs[r] for r in chunk])
        vals = evaluate(program.core, batch)
        arr = np.stack([vals[n] for n in names], axis=2)
        for k, r in enumerate(chunk):
            out[r] = arr[k, : len(seqs[r])]
        chunk.clear()

    for r in order:
        if chunk and (len(chunk) + 1) * len(seqs[r]) > INTERP_CHUNK:
            flush()
        chunk.append(r)
    flush()
    return out


def check_inputs(model: CompiledModel, inputs: list, targets: list, *, device=None, dtype="float32",
                 backend: str = "auto", max_new: int | None = None) -> tuple[list[bool], list[bool], list, float, float]:
    """Compare model, interpreter and reference on inputs. Returns (model == interpreter per input,
    model == reference per input (True where there is none), model outputs, model seconds,
    interpreter seconds)."""
    program = model.program
    names = list(program.core.output.names)
    kind = model.kind
    seqs = [program.encode(t) for t in inputs]
    dev = str(model.model(device, dtype).device)
    sync = (lambda: torch.cuda.synchronize()) if dev.startswith("cuda") else (lambda: None)
    if kind == "generate":
        limits = generation_limits(seqs, max_new)
        sync()
        t0 = time.perf_counter()
        # and the output bools at every prompt position, as for acceptors (read from the prefill): a
        # prompt that never triggers generation (no separator in it) would otherwise compare nothing
        gen, prompt_outs = model.model(device, dtype).generate_with_prompt_outputs(
            [list(map(int, s)) for s in seqs], limits, backend)
        sync()
        t_model = time.perf_counter() - t0
        t0 = time.perf_counter()
        full = [np.concatenate([s, np.asarray(g, dtype=np.int64)]) for s, g in zip(seqs, gen)]
        vals = _interp_values(program, full, names)
        t_interp = time.perf_counter() - t0
        same = []
        for s, g, v, lim, o in zip(seqs, gen, vals, limits, prompt_outs):
            n = len(s)
            ok = bool(np.array_equal(o, v[:n]))
            for k, tok in enumerate(g):  # the interpreter's greedy choice after n + k tokens
                hits = np.flatnonzero(v[n - 1 + k])
                if len(hits) == 0 or int(hits[0]) != tok:
                    ok = False
                    break
            if ok and len(g) < lim and np.any(v[n - 1 + len(g)]):
                ok = False  # the interpreter would have continued
            same.append(ok)
        values = [[program.symbols[k] for k in g] for g in gen]
    else:
        sync()
        t0 = time.perf_counter()
        outs = model.outputs(inputs, device=device, dtype=dtype, backend=backend)
        sync()
        t_model = time.perf_counter() - t0
        t0 = time.perf_counter()
        vals = _interp_values(program, seqs, names)
        t_interp = time.perf_counter() - t0
        same = [bool(np.array_equal(o, v)) for o, v in zip(outs, vals)]
        if kind == "accept":
            values = [bool(o[-1, 0]) for o in outs]
        else:
            values = [[[program.alphabet[k] for k in np.flatnonzero(row)] for row in o] for o in outs]
    if kind == "generate":
        # a generation stopped by its cap (--max-new, a bounded model's length) is compared with the
        # reference's first tokens: the reference does not know the cap
        cut = [len(v) >= lim for v, lim in zip(values, limits)]
        ref_ok = [t is None or _same_value(v, list(t)[:len(v)] if c else t) for v, t, c in zip(values, targets, cut)]
    else:
        ref_ok = [t is None or _same_value(v, t) for v, t in zip(values, targets)]
    return same, ref_ok, values, t_model, t_interp


def _same_value(value, target) -> bool:
    if isinstance(target, (bool, np.bool_)):
        return bool(value) == bool(target)
    if isinstance(target, list) and target and isinstance(target[0], (list, set, tuple)):
        return len(value) == len(target) and all(sorted(a) == sorted(b) for a, b in zip(value, target))
    return list(value) == list(target)


def verify_length(model: CompiledModel, task, length: int, samples: int, rng: np.random.Generator, *,
                  device=None, dtype="float32", backend: str = "auto", max_new: int | None = None) -> Row:
    """One row of ``rasp verify``: ``samples`` inputs of ``length`` tokens (the task's sampler, else
    uniform over every symbol), model against interpreter and reference. A generator decodes at most
    ``max_new`` tokens (default 2n + 8), and a bounded model (``rasp compile --max-length N``) at most
    up to N tokens in all, where it is claimed exact."""
    task = as_task(task)
    if length < 1 or samples < 1:
        raise RaspError(f"verify needs a length and a number of samples of at least 1, got {length} and {samples}")
    program = model.program
    bound = max_length_of(model)
    if bound and model.kind == "generate":
        # a bounded model (compiler.bounded) is exact on sequences of at most `bound` tokens, the
        # generated ones included: generation stops there
        cap = max(0, bound - length)
        max_new = min(default_max_new(length) if max_new is None else max_new, cap)
    m = model.model(device, dtype)
    with PeakMemory(m.device) as peak:
        inputs, targets = sample_inputs(program, task, rng, length, samples)
        same, ref_ok, _, t_model, t_interp = check_inputs(model, inputs, targets, device=device, dtype=dtype,
                                                          backend=backend, max_new=max_new)
    both = [a and b for a, b in zip(same, ref_ok)]
    example = None
    if not all(both):
        bad = inputs[both.index(False)]
        example = bad if len(bad) <= 40 else bad[:20] + ["..."] + bad[-20:]
    return Row(
        length=length, samples=samples, agree=sum(both) / max(1, samples),
        agree_interpreter=sum(same) / max(1, samples),
        agree_reference=None if all(t is None for t in targets) else sum(ref_ok) / max(1, samples),
        model_seconds=round(t_model, 6), interp_seconds=round(t_interp, 6), dtype=dtype_name(dtype),
        device=str(m.device), backend=m.pick_backend(backend, length + 1), example=example,
        peak_bytes=peak.device_bytes, host_peak_bytes=peak.host_bytes,
        weights_exact=dtype_name(dtype) in model.exact_dtypes,
    )


#: find-limit tries a length only if its predicted peak fits in this fraction of the free memory
MEMORY_FRACTION = 0.5
#: measured peaks are scaled to the next length with this margin
MEMORY_MARGIN = 1.5
#: steps that added less than this are too small to extrapolate from
MEASURE_FLOOR = 16 * 2**20


def _proc_status_bytes(field: str) -> int | None:
    """A ``kB`` field of /proc/self/status (VmRSS, VmHWM) in bytes, or None without /proc."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _trim_heap() -> None:
    """Give the heap memory freed earlier back to the system (glibc's ``malloc_trim``; nothing where
    there is none): a block that reuses retained free pages would not grow the resident size, and its
    peak came out too small (44 MB for a forward that needs about 150 MB, after other work in the
    same process)."""
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        try:
            import ctypes

            _MALLOC_TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _MALLOC_TRIM = False
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)


_MALLOC_TRIM = None


class PeakMemory:
    """The memory a block adds at its peak, measured (``with PeakMemory(device) as p: ...``).

    ``host_bytes``: the process's peak resident memory during the block minus its resident memory at
    the start (after freed heap memory is returned to the system, :func:`_trim_heap`). The peak
    (VmHWM) is reset to the current resident size at the start by writing 5 to
    /proc/self/clear_refs (Linux); where that is impossible the figure is None. The reset is for the
    whole process (``getrusage``'s ru_maxrss follows it), so blocks must not nest.
    ``device_bytes``: on CUDA the caching allocator's peak during the block minus what was allocated
    at its start (``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``); on other
    devices the same figure as ``host_bytes``. Both stay None when the block raises."""

    def __init__(self, device) -> None:
        self.device = torch.device(device) if not isinstance(device, torch.device) else device
        self.host_bytes: int | None = None
        self.device_bytes: int | None = None

    def __enter__(self) -> "PeakMemory":
        if self.device.type == "cuda":  # first: initializing CUDA costs host memory that is not the block's
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._dev0 = torch.cuda.memory_allocated(self.device)
        self._host0 = None
        _trim_heap()
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self._host0 = _proc_status_bytes("VmRSS")
        except OSError:
            pass
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None:  # measure nothing (a synchronize here could mask the error)
            return False
        if self._host0 is not None:
            peak = _proc_status_bytes("VmHWM")
            self.host_bytes = None if peak is None else max(0, peak - self._host0)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.device_bytes = max(0, torch.cuda.max_memory_allocated(self.device) - self._dev0)
        else:
            self.device_bytes = self.host_bytes
        return False


def free_memory(device) -> int:
    """Bytes a step may still use on the device. CUDA: free device memory plus what PyTorch's caching
    allocator holds unused; CPU: MemAvailable, or less under a cgroup memory limit."""
    dev = torch.device(device) if not isinstance(device, torch.device) else device
    if dev.type == "cuda":
        cached = torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev)
        return int(torch.cuda.mem_get_info(dev)[0]) + int(cached)
    return free_host_bytes()


def estimate_bytes(model: CompiledModel, length: int, samples: int, dtype="float32", backend: str = "auto") -> int:
    """An analytic bound on the peak memory of one verification step at ``length``, used before any
    step has been measured. Per token and input: two copies of every residual, head, MLP and sign
    dimension at 4 bytes or more (the forward holds the residual and one sublayer's activations, the
    uniform heads' running sums are float64), plus two int64 per definition for the interpreter; a
    generator's sequence counted at three times the prompt (``default_max_new`` is 2n + 8); the
    ``dense`` backend adds its (n + 1)^2 logits per head three times. Measured on CPU (2026-11-30,
    ``verify_length`` with 8 inputs): the true peak is 1.4 to 1.5 times smaller for acceptors and
    predictors (dyck1, anbncn) and 3.6 to 7.1 times for generators (majority, ur, uf), which rarely
    generate the 2n + 8 tokens counted here."""
    s = model.size
    item = max(resolve_dtype(dtype).itemsize, 4)
    width = s["d_model"] + s["heads"] + max(s["mlp_width"], 1) + s["sign_width"]
    n = length * (3 if model.kind == "generate" else 1)
    per_token = width * item * 2 + len(model.program.core.defs) * 8 * 2
    total = samples * n * per_token
    if backend == "dense":  # (auto never picks the dense reference)
        total += samples * 3 * (n + 1) ** 2 * max(s["heads"], 1) * item
    return total


def predict_bytes(model: CompiledModel, length: int, samples: int, dtype, backend: str,
                  measured: list) -> tuple[int, int]:
    """(device bytes, host bytes) that the step at ``length`` is expected to add.

    ``measured`` holds ``(length, device bytes, host bytes)`` of the steps so far. The prediction is
    the larger per-token rate of the last two steps that used at least ``MEASURE_FLOOR`` bytes
    (bytes / length, / length^2 for the dense backend) times ``length``, times ``MEMORY_MARGIN``:
    two steps, because a step may reuse memory the allocator kept from the one before and look
    cheaper than it is; the floor, because a small step's figure is mostly noise (often 0). Where
    no such step was measured it is the analytic :func:`estimate_bytes`, for the host as well.
    A generator's rate is per prompt token: a step whose generation runs much longer than the one
    before (a model that does not stop) can exceed the prediction; the margin covers part of that."""
    power = 2 if backend == "dense" else 1

    def scaled(k: int) -> int | None:
        done = [m for m in measured if m[k] is not None and m[k] >= MEASURE_FLOOR][-2:]
        if not done:
            return None
        return int(MEMORY_MARGIN * length ** power * max(m[k] / m[0] ** power for m in done))

    dev, host = scaled(1), scaled(2)
    if dev is None or host is None:
        est = estimate_bytes(model, length, samples, dtype, backend)
        dev, host = (est if dev is None else dev), (est if host is None else host)
    return dev, host


def memory_stop(device, need_dev: int, need_host: int, free=None) -> dict | None:
    """Why a step needing ``need_dev`` bytes on ``device`` (and ``need_host`` on the host, checked
    separately for CUDA) does not fit in ``MEMORY_FRACTION`` of the free memory, or None when it
    fits. ``free`` (device -> bytes) defaults to :func:`free_memory`."""
    free = free or free_memory
    dev = torch.device(device) if not isinstance(device, torch.device) else device
    checks = [(dev, need_dev)] + ([(torch.device("cpu"), need_host)] if dev.type != "cpu" else [])
    for d, need in checks:
        avail = free(d)
        if need > MEMORY_FRACTION * avail:
            return {"memory": str(d), "need_bytes": int(need), "free_bytes": int(avail)}
    return None


def find_limit(model: CompiledModel, task, dtype: str, *, samples: int, rng: np.random.Generator, device=None,
               backend: str = "auto", start: int = 16, budget_s: float = 60.0, max_length: int | None = None,
               max_new: int | None = None, rows: list | None = None, on_row=None, done: dict | None = None) -> dict:
    """Double the length from ``start`` until a disagreement or a budget; the longest exact length. The
    last length allowed (``max_length``, the task's longest input) is tested when doubling would pass it.
    Each step's :class:`Row` is appended to ``rows`` and passed to ``on_row`` as soon as it is done.
    ``done``: rows already measured in this dtype, by length (``rasp verify``'s ``--lengths`` rows),
    taken as they are instead of being run again."""
    task = as_task(task)
    if samples < 1 or start < 1:
        raise RaspError(f"find_limit needs samples and a start length of at least 1, got {samples} and {start}")
    t_start = time.perf_counter()
    longest, failed, stopped = None, None, "max length"
    n = start
    tmax = task_max_length(task, model.program)
    last = 0.0
    dev = model.model(device, dtype).device
    measured: list = []  # (length, device bytes, host bytes) per step
    memory = None  # what the memory budget refused, if it stopped the search
    while True:
        if max_length is not None and n > max_length:
            stopped = f"max length {max_length}"
            break
        if tmax is not None and n > tmax:
            stopped = f"the task's longest input ({tmax})"
            break
        row = (done or {}).get(n)
        if row is not None:  # measured already (no budget to pass): its times predict the next step's
            last = row.model_seconds + row.interp_seconds
        else:
            memory = memory_stop(dev, *predict_bytes(model, n, samples, dtype, backend, measured))
            if memory is not None:
                stopped = "memory budget"
                memory["length"] = n
                break
            spent = time.perf_counter() - t_start
            if longest is not None and spent + 2.5 * last > budget_s:
                stopped = f"time budget ({budget_s:g} s)"
                break
            t0 = time.perf_counter()
            try:
                row = verify_length(model, task, n, samples, rng, device=device, dtype=dtype, backend=backend,
                                    max_new=max_new)
            except (torch.cuda.OutOfMemoryError, MemoryError):
                stopped = "out of memory"
                break
            last = time.perf_counter() - t0
            if rows is not None:
                rows.append(row)
            if on_row is not None:
                on_row(row)
        measured.append((n, row.peak_bytes, row.host_peak_bytes))
        if row.agree < 1.0:
            failed = n
            stopped = f"disagreement at {n}"
            break
        longest = n
        # doubling, but the last length allowed is tested itself (a bounded model's N = 12 stopped at 8)
        cap = min((x for x in (max_length, tmax) if x is not None), default=None)
        n = cap if cap is not None and n < cap < 2 * n else 2 * n
    # what the weights claim for every input with this backend (dense: the scan bound, the fast path's)
    bound = model.exact_positions(dtype, backend if backend in ("scan", "sdpa") else "scan")
    out = {"dtype": str(dtype), "longest_exact": longest, "first_failure": failed, "stopped": stopped,
           "exact_tokens": None if bound is None else max(0, bound - 1),
           "seconds": round(time.perf_counter() - t_start, 3)}
    if memory is not None:  # which memory, the length refused, its predicted need and what was free
        out["memory"] = memory
    return out
