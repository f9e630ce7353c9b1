"""The public API: ``compile(program) -> CompiledModel``, ``CompiledModel.run/save``, ``load(dir)``.

Files written by :meth:`CompiledModel.save` (read by :func:`load`, which never unpickles):

* ``model.safetensors``: every weight tensor W as two tensors, ``W.indices`` (its nonzero
  coordinates, int64, shape (ndim, nnz)) and ``W.values`` (float64); the dense shape of W follows
  from the architecture in config.json and is also recorded in the file's metadata (``format``: a
  JSON object with the format name and every tensor's shape), so that weights paired with another
  model's config.json are an error;
* ``config.json``: format and compiler version, the architecture (layers, heads with their kind,
  offset and label, sign and MLP widths), the residual labels and encodings, the alphabet and
  special tokens, the output kind, the source program text, the size, and the SHA-256 of the
  weights file (so a corrupted or replaced file is an error, not a silently different model).
"""
from __future__ import annotations

import errno
import gc
import hashlib
import json
import math
import os
import time
import warnings
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from rasp import ast as A
from rasp.ast import OUTPUT_KINDS
from rasp.errors import RaspError, loads_json, quoted, read_json_file
from rasp.gcpause import paused_gc
from rasp.guards import TABLE_CAP
from rasp.program import Program, allowed_sets, check_batch, generation_limits, load as load_program, parse
from rasp.rewrite import only_local_counts, rewrite_core

from .alloc import allocate
from .graph import build_graph, realized_by
from .plan import plan_layers
from .symmetry import lift_program
from .weights import build_weights, exact_dtypes, exact_sum_positions

COMPILER_VERSION = "0.1.0"
FORMAT = "rasp-compiled-transformer"
FORMAT_VERSION = 1
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"


def compile(program: Program | str | Path, *, alphabet: Iterable[str] | None = None) -> "CompiledModel":  # noqa: A001
    """Compile a C-RASP[periodic, local] program (a :class:`rasp.Program` or a path) into a
    transformer. Programs outside the class raise a :class:`RaspError` naming the offending span."""
    if not isinstance(program, Program):
        program = load_program(program)
    if alphabet is not None:
        program = program.with_alphabet(alphabet)
    t0 = time.perf_counter()
    passes: dict[str, float] = {}  # seconds per pass, in order

    def lap(name: str) -> None:
        passes[name] = time.perf_counter() - t0 - sum(passes.values())

    with paused_gc():  # see rasp.gcpause
        try:
            # a program that treats its symbols alike: its graph lifted from a few symbols' (checked
            # against the builder there; None for any other program or when a check fails)
            graph = lift_program(program)
            if graph is None:
                # written counts all plain or local: the core is in normal form as it is (no walk
                # over the tens of thousands of definitions of a family to find that out)
                normal = only_local_counts(program.module)
                core = program.core if normal else rewrite_core(program.core)
                lap("rewrite")
                graph = build_graph(core, normal=normal)
                del core  # (a rewritten core is garbage now: see the del below)
            else:
                passes["rewrite"] = 0.0  # (the small graphs were built from rewritten cores)
            lap("graph")
        except RaspError as exc:
            raise exc.located(program.source, program.filename) from None
        except RecursionError:
            raise A.too_deep("the program nests too deeply to compile", program.module).located(
                program.source, program.filename) from None
        plan = plan_layers(graph)
        lap("plan")
        alloc = allocate(plan)
        lap("alloc")
        arch, tensors = build_weights(plan, alloc)
        lap("weights")
        config = model_config(program, graph, plan, alloc, arch, tensors)
        lap("config")
        # the graph and the plan (an object per residual dimension) are garbage now: reference
        # counting frees them here, so the collector does not scan them when it resumes
        del graph, plan, alloc
        # the collector's first run after the pause scans what the pause let pile up: it belongs to
        # compiling (it would otherwise run at the caller's next allocation). Run here, inside the
        # pause, it is a collection of the youngest generation; left to the first allocation after the
        # pause it may be an older generation's, which scans the whole heap (the loaded program too:
        # 0.12 s of uf.rasp's 150-symbol compile, one run in three)
        gc.collect(0)
    lap("gc")
    seconds = time.perf_counter() - t0
    # the nn.Module is built when first used (CompiledModel.module): printing the size or saving
    # the weights needs neither it nor PyTorch, whose import alone takes seconds
    return CompiledModel(config, None, program, compile_seconds=seconds, compile_passes=passes, weights=tensors)


def model_config(program: Program, graph, plan, alloc, arch: dict, tensors: dict) -> dict:
    """config.json of a compiled model: what the passes made, in words and numbers (the head labels
    and residual dimensions are filled into ``arch``)."""
    for spec, layer in zip(arch["layers"], plan.layers):
        for h, node in zip(spec["heads"], layer.heads):
            h["label"] = graph.nodes[node].label
            h["dim"] = alloc.index[node]
    definitions = {}
    for name, how in graph.definitions.items():
        by = realized_by(how)
        if by is not None:
            how = f"{by[0]}dim {alloc.index[by[1]]}"
        definitions[name] = how
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "compiler_version": COMPILER_VERSION,
        "program": {
            "source": program.source if program.source is not None else str(program),
            "filename": program.filename,
            "alphabet": list(program.alphabet),
            "special": list(program.special),
        },
        "symbols": list(program.symbols),
        "output": {"kind": program.output_kind, "names": [n for n, _ in graph.outputs]},
        "architecture": arch,
        "residual": [{"index": k, "label": lab, "encoding": enc}
                     for k, (lab, enc) in enumerate(zip(alloc.labels, alloc.encodings))],
        "definitions": definitions,
        # the graph lifted from this many placeholder symbols' (compiler.symmetry), or null
        "lifted_from": graph.lifted_from,
        "exact_dtypes": exact_dtypes(tensors),
        "exact_sum_positions": exact_sum_positions(tensors, arch),
        "size": size_of(arch, tensors),
    }


def size_of(arch: dict, tensors: dict) -> dict:
    """The model's size (what ``rasp compile`` prints) from its architecture and weights: layers, heads,
    d_model, the widest MLP and sign sublayer, parameters (dense count) and nonzero weights. Loading
    recomputes it: config.json's copy is not covered by any hash."""
    layers = arch["layers"]
    return {
        "layers": len(layers),
        "heads": sum(len(spec["heads"]) for spec in layers),
        "d_model": int(arch["d_model"]),
        "mlp_width": max((int(spec["mlp"]) for spec in layers), default=0),
        "sign_width": max((int(spec["sign"]) for spec in layers), default=0),
        "parameters": int(sum(int(np.prod(shape)) for shape, _, _ in tensors.values())),
        "nonzero": int(sum(len(vals) for _, _, vals in tensors.values())),
    }


class CompiledModel:
    """A compiled program: the transformer (float64 master weights on CPU), its configuration and
    the source program (for encoding tokens and for checking against the interpreter)."""

    def __init__(self, config: dict, module=None, program: Program | None = None,
                 compile_seconds: float | None = None, compile_passes: dict | None = None,
                 weights: dict | None = None) -> None:
        if module is None and weights is None:
            raise ValueError("CompiledModel needs the module or its weights")
        self.config = config
        self._module = module  # a CompiledTransformer, built from ``weights`` when first needed
        self._weights = weights  # name -> (shape, indices, values) as NumPy arrays (from compile)
        self._program = program
        self.compile_seconds = compile_seconds
        #: seconds per compiler pass (rewrite, graph, plan, alloc, weights, config, gc; lower first for
        #: RASP-L programs); empty for a loaded model
        self.compile_passes = dict(compile_passes or {})
        self._casts: dict = {}
        #: the directory :func:`load` read the model from (None: compiled in this process)
        self.loaded_from: Path | None = None

    @property
    def module(self):
        """The transformer (:class:`compiler.model.CompiledTransformer`, float64 master weights on CPU)."""
        if self._module is None:
            from .model import CompiledTransformer

            self._module = CompiledTransformer(self.config["architecture"], self._weights)
        return self._module

    def with_config(self, config: dict, program: Program, compile_seconds: float | None,
                    compile_passes: dict | None) -> "CompiledModel":
        """The same weights under another configuration and source program (RASP-L models keep the
        program that was lowered, see :mod:`compiler.bounded`)."""
        return CompiledModel(config, self._module, program, compile_seconds=compile_seconds,
                             compile_passes=compile_passes, weights=self._weights)

    # ------------------------------------------------------------------ description
    @property
    def program(self) -> Program:
        if self._program is None:
            p = self.config["program"]
            self._program = parse(p["source"], filename=p.get("filename"), alphabet=p["alphabet"])
        return self._program

    @property
    def kind(self) -> str:
        return self.config["output"]["kind"]

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(self.config["symbols"])

    @property
    def alphabet(self) -> tuple[str, ...]:
        return tuple(self.config["program"]["alphabet"])

    @property
    def size(self) -> dict:
        return dict(self.config["size"])

    @property
    def exact_sum_positions(self) -> dict:
        """Per backend (``scan``: float64 sums, ``sdpa``: the fused kernels' float32 sums), the longest
        sequence, in positions with BOS, over which every uniform head's running sum is exact
        (:func:`compiler.weights.exact_sum_positions`; None: any length). Beyond it a comparison at a
        tie can round even in float64; ``--backend auto`` leaves sdpa for scan before its bound."""
        return dict(self.config["exact_sum_positions"])

    def exact_positions(self, dtype="float32", backend: str = "scan") -> int | None:
        """The most positions (BOS included: tokens + 1, generated tokens too) over which the model is
        exact on every input in ``dtype`` with ``backend`` (:func:`compiler.weights.exact_positions`:
        the running sums' bound and float16's quotient underflow at 2^24 positions); None: any length.
        ``auto`` is scan's (it leaves sdpa for scan before sdpa's bound); the dense reference forward
        has no such bound (it rounds every softmax weight: exact in float64 at the lengths tests use).
        A bounded RASP-L model (``compile_raspl(..., max_length=N)``) is exact on at most N tokens, so at
        most N + 1 positions."""
        from .model import dtype_name
        from .weights import exact_positions

        if backend not in ("scan", "sdpa", "auto"):
            raise RaspError(f"exact_positions knows the backends scan, sdpa and auto, not {quoted(backend)}")
        backend = "scan" if backend == "auto" else backend
        p = exact_positions(self.config["architecture"], self.exact_sum_positions, dtype_name(dtype), backend)
        bound = (self.config.get("raspl") or {}).get("max_length")
        if bound is not None:  # no claim past the declared maximum length (the weights' own bound was shown)
            p = bound + 1 if p is None else min(p, bound + 1)
        return p

    def exact_tokens(self) -> dict[str, int | None]:
        """Per dtype the model holds exactly, the longest sequence (tokens: a prompt plus what a
        generator adds) on which it is exact for every input with the scan backend (None: any length):
        :meth:`exact_positions` less BOS."""
        out = {}
        for d in self.exact_dtypes:
            p = self.exact_positions(d)
            out[d] = None if p is None else max(0, p - 1)
        return out

    @property
    def exact_dtypes(self) -> list[str]:
        """The dtypes that hold every weight exactly (:func:`compiler.weights.exact_dtypes`; computed by
        compile and by load); in another dtype a constant of the program is rounded and the model may
        disagree with the interpreter."""
        return list(self.config["exact_dtypes"])

    @property
    def residual_labels(self) -> list[str]:
        return [r["label"] for r in self.config["residual"]]

    def summary(self) -> str:
        s = self.size

        def n(k: int, what: str) -> str:
            return f"{k} {what}" if k == 1 else f"{k} {what}s"

        return (f"{n(s['layers'], 'layer')}, {n(s['heads'], 'head')}, d_model {s['d_model']}, MLP width {s['mlp_width']}, "
                f"sign width {s['sign_width']}, {n(s['parameters'], 'parameter')} ({s['nonzero']} nonzero)")

    def __repr__(self) -> str:
        return f"CompiledModel({self.kind}: {self.summary()})"

    # ------------------------------------------------------------------ running
    def model(self, device=None, dtype="float32"):
        """The transformer on ``device`` (``auto``: CUDA when present) in ``dtype`` (cached)."""
        from .model import resolve_device, resolve_dtype

        dev, dt = resolve_device(device or "cpu"), resolve_dtype(dtype)
        key = (str(dev), dt)
        if key not in self._casts:
            self._casts[key] = self.module.cast(dev, dt)
        return self._casts[key]

    def encode(self, tokens) -> list[int]:
        return [int(x) for x in self.program.encode(tokens)]

    def encode_batch(self, inputs) -> list[list[int]]:
        """:meth:`encode` of each input; an error in a batch of several says which one."""
        return [[int(x) for x in s] for s in self.program.encode_batch(inputs)]

    def outputs(self, inputs: Sequence, *, device=None, dtype="float32", backend: str = "auto") -> list[np.ndarray]:
        """The output bools at every position: one (n_i, n_outputs) array per input."""
        return self._outputs(self.encode_batch(inputs), device, dtype, backend)

    def _outputs(self, seqs: list[list[int]], device, dtype, backend: str) -> list[np.ndarray]:
        import torch

        from .model import length_groups

        m = self.model(device, dtype)
        out: list = [None] * len(seqs)
        for group in length_groups([len(s) for s in seqs]):
            n = max(len(seqs[r]) for r in group)
            ids = torch.zeros((len(group), n), dtype=torch.long)
            for k, r in enumerate(group):
                ids[k, : len(seqs[r])] = torch.as_tensor(seqs[r], dtype=torch.long)
            res = m(ids.to(m.device), backend).cpu().numpy()
            for k, r in enumerate(group):
                out[r] = res[k, : len(seqs[r])]
        return out

    def run(self, tokens, *, max_new: int | None = None, device=None, dtype="float32", backend: str = "auto"):
        """The output value for one input, as :func:`rasp.run` returns it."""
        return self.run_batch([tokens], max_new=max_new, device=device, dtype=dtype, backend=backend)[0]

    def run_batch(self, inputs: Sequence, *, max_new: int | None = None, device=None, dtype="float32",
                  backend: str = "auto") -> list:
        check_batch(inputs, max_new)
        if len(inputs) == 0:
            return []
        from .bounded import max_length_of  # (bounded builds on this module)

        kind = self.kind
        bound = max_length_of(self)  # a bounded RASP-L model's N
        seqs = self.encode_batch(inputs)
        if bound is not None and max(map(len, seqs)) > bound:
            warnings.warn(f"an input is longer than this bounded model's {bound} tokens: its output there is not "
                          "the program's (rasp verify shows where it differs)", RuntimeWarning, stacklevel=2)
        if kind == "generate":
            limits = generation_limits(seqs, max_new)
            caps = [None] * len(seqs)
            if bound is not None:  # exact on sequences of at most N tokens, generated ones included: the
                # choice of token N + 1 is still read at token N (exact), so one more is asked for, to
                # tell whether the program goes on (a prompt already longer runs as it is, warned above)
                caps = [bound - len(s) if len(s) <= bound and n > bound - len(s) else None
                        for s, n in zip(seqs, limits)]
                limits = [n if c is None else c + 1 for n, c in zip(limits, caps)]
            m = self.model(device, dtype)
            gen = m.generate(seqs, limits, backend)
            if any(c is not None and len(g) > c for g, c in zip(gen, caps)):
                gen = [g if c is None else g[:c] for g, c in zip(gen, caps)]
                warnings.warn(f"generation stopped at this bounded model's {bound} tokens (prompt plus generated), "
                              "where the program goes on: the model is exact only up to them", RuntimeWarning,
                              stacklevel=2)
            return [[self.symbols[k] for k in g] for g in gen]
        outs = self._outputs(seqs, device, dtype, backend)
        if kind == "accept":
            return [bool(o[-1, 0]) for o in outs]
        return [allowed_sets(np.asarray(o, dtype=bool), self.alphabet) for o in outs]

    def residual(self, tokens, *, device=None, dtype="float64", backend: str = "auto") -> np.ndarray:
        """The final residual stream for one input: (n + 1, d_model), BOS first; columns are
        labelled by :attr:`residual_labels`."""
        import torch

        m = self.model(device, dtype)
        ids = torch.as_tensor([self.encode(tokens)], dtype=torch.long, device=m.device)
        with torch.no_grad():
            return m.residual(ids, backend)[0].to(torch.float64).cpu().numpy()

    # ------------------------------------------------------------------ files
    def save(self, directory: str | Path) -> Path:
        from safetensors.numpy import save

        path = _directory(directory)
        weights = self._weights if self._weights is not None else {
            k: (shape, idx.detach().cpu().numpy(), vals.detach().cpu().numpy())
            for k, (shape, idx, vals) in self._module.weights().items()}
        try:
            path.mkdir(parents=True, exist_ok=True)
            tensors = {}
            for k, (_, idx, vals) in weights.items():
                tensors[k + ".indices"] = np.ascontiguousarray(idx, dtype=np.int64)
                tensors[k + ".values"] = np.ascontiguousarray(vals, dtype=np.float64)
            # one metadata entry: safetensors writes several in an order that changes from run to run,
            # and the same model must give the same file
            meta = json.dumps({"format": FORMAT, "shapes": {k: [int(x) for x in shape]
                                                            for k, (shape, _, _) in sorted(weights.items())},
                               "config_sha256": config_digest(self.config), "config_bound": list(CONFIG_BOUND)})
            # serialized here and written by Python: an unwritable path is then an OSError, and the file
            # gets the usual permissions (safetensors' own writer makes it readable by its owner only)
            blob = save(tensors, metadata={"format": meta})
            digest = hashlib.sha256(blob).hexdigest()
            config = dict(self.config, weights_sha256=digest)
            # both files are written in full under temporary names first and then renamed over the old
            # ones: a write that fails (a full disk) leaves a model already there as it was
            parts = [(WEIGHTS_FILE, blob), (CONFIG_FILE, (json.dumps(config, indent=1) + "\n").encode())]
            for name, _ in parts:  # before either file is written: not one model file of two
                if (path / name).is_dir():
                    raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path / name))
            temps = []
            try:
                for name, content in parts:
                    tmp = path / f".{name}.{os.getpid()}.tmp"
                    temps.append(tmp)
                    tmp.write_bytes(content)
                for (name, _), tmp in zip(parts, temps):
                    os.replace(tmp, path / name)
            finally:
                for tmp in temps:
                    tmp.unlink(missing_ok=True)
        except OSError as exc:
            where = exc.filename2 or exc.filename  # the file that failed (a rename's target), else the folder
            where = path if where is None or Path(where).name.endswith(".tmp") else where
            hint = ("-o names a directory (made if missing), not a file" if exc.errno in (errno.EEXIST, errno.ENOTDIR)
                    else f"remove {where} or choose another -o" if exc.errno == errno.EISDIR
                    else "check that the folder is writable and the disk has room")
            raise RaspError(f"cannot write the model to {where}: {exc.strerror or exc}", hint=hint) from None
        self.config = config
        return path


def expected_shapes(arch: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor a model with this architecture has, and its shape."""
    d = int(arch["d_model"])
    shapes = {"embed.token": (int(arch["n_symbols"]) + 1, d), "readout.W_U": (int(arch["n_outputs"]), d)}
    for M in arch["periods"]:
        shapes[f"embed.periodic_{int(M)}"] = (int(M), d)
    for l, spec in enumerate(arch["layers"]):
        H, k, h = len(spec["heads"]), int(spec["sign"]), int(spec["mlp"])
        p = f"layers.{l}."
        shapes.update({p + "attn.W_Q": (H, d), p + "attn.W_K": (H, d), p + "attn.W_V": (H, d),
                       p + "attn.W_O": (d, H), p + "sign.W_in": (k, d), p + "sign.gamma": (k,),
                       p + "sign.beta": (k,), p + "sign.W_out": (d, k), p + "mlp.W_1": (h, d),
                       p + "mlp.W_2": (d, h)})
    return shapes


#: the hint of a refused model directory whose own message has none
LOAD_HINT = "recompile it: rasp compile PROGRAM -o DIR (load reads the two files that writes, unchanged)"


def load(directory: str | Path) -> CompiledModel:
    """Load a model written by :meth:`CompiledModel.save` (safetensors + JSON; nothing is unpickled).
    Anything missing, corrupted or foreign is a :class:`RaspError`, with a hint."""
    try:
        return _load(directory)
    except RaspError as exc:
        if not exc.hint:
            exc.hint = LOAD_HINT
        raise


def _load(directory: str | Path) -> CompiledModel:
    import safetensors.torch as safetensors_torch
    import torch

    from .model import CompiledTransformer

    path = _directory(directory)
    where = str(path)
    try:
        is_dir = path.is_dir()
    except OSError as exc:  # a name too long, a folder that cannot be searched
        raise RaspError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    if not is_dir:
        raise RaspError(f"{where}: not a directory with a compiled model",
                        hint="write one with: rasp compile PROGRAM -o DIR")
    cfg_file, w_file = path / CONFIG_FILE, path / WEIGHTS_FILE
    for f in (cfg_file, w_file):
        try:
            missing = None if f.is_file() else "not a file" if f.exists() else "missing"
        except OSError as exc:
            raise RaspError(f"{where}: cannot read {f.name}: {exc.strerror or exc}") from None
        if missing:
            raise RaspError(f"{where}: {f.name} is {missing}", hint="write the model with: rasp compile PROGRAM -o DIR")
    config = read_json_file(cfg_file, hint="write the model again with: rasp compile PROGRAM -o DIR")
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise RaspError(f"{cfg_file}: not a compiled rasp model (format {config.get('format') if isinstance(config, dict) else None!r})",
                        hint="write one with: rasp compile PROGRAM -o DIR")
    version = config.get("format_version")
    if type(version) is not int or version < 1:
        raise RaspError(f"{cfg_file}: format_version {quoted(version)} is not a format version (1 to {FORMAT_VERSION})",
                        hint="rewrite the model with: rasp compile PROGRAM -o DIR")
    if version > FORMAT_VERSION:
        raise RaspError(f"{cfg_file}: format version {quoted(version)} is newer than this compiler "
                        f"reads ({FORMAT_VERSION})")
    if not isinstance(config.get("compiler_version"), str):
        raise RaspError(f"{cfg_file}: compiler_version {quoted(config.get('compiler_version'))} is not a version",
                        hint="rewrite the model with: rasp compile PROGRAM -o DIR")
    data = w_file.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if not isinstance(config.get("weights_sha256"), str):
        raise RaspError(f"{cfg_file}: no weights_sha256 (every model rasp compile -o writes has one)",
                        hint="rewrite the model with: rasp compile PROGRAM -o DIR")
    if config["weights_sha256"] != digest:
        raise RaspError(f"{w_file}: the weights do not match config.json (corrupted or replaced): "
                        f"sha256 {digest[:16]}..., expected {config['weights_sha256'][:16]}...")
    problem = _config_problem(config)
    if problem:
        raise RaspError(f"{cfg_file}: not a valid model configuration: {problem}",
                        hint="rewrite the model with: rasp compile PROGRAM -o DIR")
    try:  # the bytes that were hashed, not a second read of the file (it may have changed since)
        tensors = safetensors_torch.load(data)
        meta = _safetensors_metadata(data)
    except Exception as exc:  # noqa: BLE001 - safetensors raises several types for bad files
        raise RaspError(f"{w_file}: not a readable safetensors file ({type(exc).__name__}: {exc})") from None
    arch = config.get("architecture")
    problem = _architecture_problem(arch)
    if problem:
        raise RaspError(f"{cfg_file}: the architecture is malformed: {problem}",
                        hint="rewrite the model with: rasp compile PROGRAM -o DIR")
    # the widths the program fixes: a forged count would only size a dense buffer at run time
    # (n_outputs = 10^9 asked for 128 GB in the readout, n_symbols = 10^9 for 8 GB per embedding)
    for what, n, want in (("n_symbols", arch["n_symbols"], len(config["symbols"])),
                          ("bos_id", arch["bos_id"], len(config["symbols"])),
                          ("n_outputs", arch["n_outputs"], len(config["output"]["names"]))):
        if n != want:
            raise RaspError(f"{cfg_file}: the architecture's {what} is {n:,}, not {want:,} (the model's number of "
                            f"{'outputs' if what == 'n_outputs' else 'symbols'}; edited)",
                            hint="rewrite the model with: rasp compile PROGRAM -o DIR")
    shapes = expected_shapes(arch)
    if len(config["residual"]) != shapes["readout.W_U"][1]:
        raise RaspError(f"{cfg_file}: {len(config['residual'])} residual labels for d_model {shapes['readout.W_U'][1]}")
    saved = _saved_meta(meta.get("format", ""))
    if saved is None or "config_sha256" not in saved:  # the checks below need both records
        raise RaspError(f"{w_file}: the weights file does not record the shapes and the configuration it was "
                        "saved with (not written by rasp compile, or by a version before 2026-11-30)",
                        hint="rewrite the model with: rasp compile PROGRAM -o DIR")
    if _saved_shapes(saved) != shapes:
        raise RaspError(f"{w_file}: the weights were saved for another architecture than config.json describes",
                        hint="keep a model's two files together, as rasp compile -o wrote them")
    names = {k.rsplit(".", 1)[0] for k in tensors if k.endswith((".indices", ".values"))}
    missing = sorted(set(shapes) - names)
    extra = sorted(names - set(shapes)) + sorted(k for k in tensors if not k.endswith((".indices", ".values")))
    if missing or extra:
        parts = [f"{what}: {', '.join(ks[:3])}{' ...' if len(ks) > 3 else ''}"
                 for what, ks in (("missing", missing), ("unexpected", extra)) if ks]
        raise RaspError(f"{w_file}: tensors do not match the architecture ({'; '.join(parts)})")
    weights = {}
    for k, shape in shapes.items():
        idx, vals = tensors.get(k + ".indices"), tensors.get(k + ".values")
        if idx is None or vals is None:
            raise RaspError(f"{w_file}: tensor {k} lacks its indices or values")
        ok = (idx.dtype == torch.int64 and vals.dtype == torch.float64 and idx.dim() == 2
              and idx.shape[0] == len(shape) and vals.dim() == 1 and idx.shape[1] == vals.shape[0])
        if ok and vals.numel():
            ok = bool((idx >= 0).all()) and all(int(idx[a].max()) < shape[a] for a in range(len(shape)))
        if not ok:
            raise RaspError(f"{w_file}: tensor {k} is malformed (indices {tuple(idx.shape)} {idx.dtype}, values "
                            f"{tuple(vals.shape)} {vals.dtype}; expected coordinates into shape {shape} and float64)")
        if not torch.isfinite(vals).all():
            raise RaspError(f"{w_file}: tensor {k} has non-finite values")
        if vals.numel() > 1:  # a coordinate twice would add its values: not a file rasp compile writes
            flat = torch.zeros(idx.shape[1], dtype=torch.int64)
            for a in range(len(shape)):
                flat = flat * shape[a] + idx[a]
            if torch.unique(flat).numel() != flat.numel():
                raise RaspError(f"{w_file}: tensor {k} lists a coordinate twice")
        weights[k] = (shape, idx, vals)
    tensors = weights
    # every residual dimension and every neuron of a compiled model is read or written by some weight,
    # so a width beyond the nonzero weights is an edit (it would only allocate: 10^10 sign neurons)
    nnz = {k: int(v[2].numel()) for k, v in tensors.items()}
    wide = [(what, n, limit) for what, n, limit in
            [("d_model", int(arch["d_model"]), sum(nnz.values()))]
            + [(f"layer {l} sign", int(spec["sign"]), nnz[f"layers.{l}.sign.W_in"]) for l, spec in enumerate(arch["layers"])]
            + [(f"layer {l} mlp", int(spec["mlp"]), nnz[f"layers.{l}.mlp.W_1"]) for l, spec in enumerate(arch["layers"])]
            if n > limit]
    if wide:
        what, n, limit = wide[0]
        raise RaspError(f"{cfg_file}: {what} is {n:,}, but the weights touch at most {limit:,} of them (edited)",
                        hint="rewrite the model with: rasp compile PROGRAM -o DIR")
    bound = saved.get("config_bound", list(CONFIG_BOUND_BEFORE))
    if not (isinstance(bound, list) and all(isinstance(k, str) for k in bound) and set(CONFIG_BOUND_BEFORE) <= set(bound)):
        raise RaspError(f"{w_file}: the weights file's record of the configuration is malformed",
                        hint="rewrite the model with: rasp compile PROGRAM -o DIR")
    edited = saved["config_sha256"] != config_digest(config, tuple(bound))
    try:
        # recomputed, not read: config.json is not covered by the weights' hash, and older files lack it
        arrays = {k: (shape, idx.numpy(), vals.numpy()) for k, (shape, idx, vals) in tensors.items()}
        config["exact_dtypes"] = exact_dtypes(arrays)
        config["exact_sum_positions"] = exact_sum_positions(arrays, arch)
        if config["size"] != size_of(arch, arrays):
            raise RaspError(f"{cfg_file}: 'size' says {config['size']}, but the model has {size_of(arch, arrays)} "
                            "(config.json was edited)", hint="rewrite the model with: rasp compile PROGRAM -o DIR")
        module = CompiledTransformer(arch, tensors)
        model = CompiledModel(config, module)
        model.loaded_from = path
        try:
            model.program  # noqa: B018 - parse the source now so that a broken config fails here
        except RaspError as exc:
            raise RaspError(f"{cfg_file}: the stored program does not parse: {exc.message}",
                            hint="the file was changed after rasp compile wrote it: compile the program again") from None
        if tuple(model.program.symbols) != model.symbols:
            raise RaspError(f"{cfg_file}: the stored program's symbols do not match the model's")
        if model.program.output_kind != model.kind:
            raise RaspError(f"{cfg_file}: output kind {model.kind!r}, but the stored program outputs "
                            f"{model.program.output_kind!r}")
        # the stored program's own special tokens and outputs (an edit that kept both digests consistent
        # could name others: they are read from config.json only here)
        if tuple(model.program.special) != tuple(config["program"].get("special", ())):
            raise RaspError(f"{cfg_file}: 'program.special' is not the stored program's special tokens")
        if list(model.program.core.output.names) != list(config["output"].get("names", [])):
            raise RaspError(f"{cfg_file}: 'output.names' are not the stored program's outputs")
    except RaspError:
        raise
    except Exception:  # noqa: BLE001 - an edited architecture can fail anywhere in these reads
        if not edited:
            raise
    # last, so that the checks above name what is wrong; this one catches consistent edits they cannot
    # (and edits that broke the reads above)
    if edited:
        raise RaspError(f"{cfg_file}: config.json and {w_file.name} do not belong together: one of them was edited "
                        "or replaced (the architecture, symbols, program, output, residual labels or RASP-L bound "
                        "differ from the ones the weights were built for)",
                        hint="keep a model's two files together, as rasp compile -o wrote them")
    return model


#: the parts of config.json that decide what the weights compute or claim: their digest is stored
#: with the weights (with these names), so an edited config.json (reordered symbols, another program
#: or head offset, a RASP-L model's bound) is refused
CONFIG_BOUND = ("architecture", "symbols", "program", "output", "residual", "raspl")
#: what files written before the names were stored bound (``raspl`` is then checked by its form only)
CONFIG_BOUND_BEFORE = ("architecture", "symbols", "program", "output", "residual")


def config_digest(config: dict, keys: tuple[str, ...] = CONFIG_BOUND) -> str:
    return hashlib.sha256(json.dumps({k: config.get(k) for k in keys}, sort_keys=True).encode()).hexdigest()


def _directory(directory) -> Path:
    """A model directory argument as a Path: a non-empty str or path (``""`` would be the current
    directory, None a TypeError)."""
    if isinstance(directory, (str, os.PathLike)) and str(directory):
        return Path(directory)
    raise RaspError(f"a model directory is a non-empty path, not {directory!r}", hint='e.g. model.save("out/ur")')


def _safetensors_metadata(data: bytes) -> dict:
    """The ``__metadata__`` of a safetensors file's bytes: the format is an 8-byte little-endian
    header length, then the JSON header (safetensors.torch.load, which reads the tensors from the
    same bytes, does not return it)."""
    n = int.from_bytes(data[:8], "little")
    header = loads_json(data[8:8 + n].decode("utf-8"))
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    return meta if isinstance(meta, dict) else {}


def _architecture_problem(arch) -> str | None:
    """What is wrong with the types and ranges of config.json's architecture, or None (its numbers
    size every tensor; a forged one failed as KeyError, OverflowError or a 480 GB allocation)."""
    def count(v, low=0) -> bool:
        return type(v) is int and v >= low

    if not isinstance(arch, dict):
        return "not an object"
    for key, low in (("d_model", 1), ("n_symbols", 1), ("n_outputs", 0)):
        if not count(arch.get(key), low):
            return f"'{key}' is not an integer >= {low}"
    if not count(arch.get("bos_id")) or arch["bos_id"] > arch["n_symbols"]:
        return "'bos_id' is not a token id (0 to n_symbols)"
    periods = arch.get("periods")
    if not isinstance(periods, list) or not all(count(M, 1) for M in periods) or len(set(periods)) != len(periods):
        return "'periods' is not a list of distinct integers >= 1"
    if any(M > TABLE_CAP for M in periods):  # (the analysis of relations allows no larger period)
        return f"a period above {TABLE_CAP:,}"
    logit = arch.get("local_bos_logit", 0.0)
    if not isinstance(logit, (int, float)) or isinstance(logit, bool) or not math.isfinite(logit):
        return "'local_bos_logit' is not a finite number"
    layers = arch.get("layers")
    if not isinstance(layers, list) or not all(isinstance(spec, dict) for spec in layers):
        return "'layers' is not a list of objects"
    for l, spec in enumerate(layers):
        if not count(spec.get("sign")) or not count(spec.get("mlp")):
            return f"layer {l}: 'sign' or 'mlp' is not an integer >= 0"
        heads = spec.get("heads")
        if not isinstance(heads, list) or not all(isinstance(h, dict) for h in heads):
            return f"layer {l}: 'heads' is not a list of objects"
        for h, head in enumerate(heads):
            if head.get("kind") not in ("uniform", "local"):
                return f"layer {l} head {h}: kind {quoted(head.get('kind'))} is not uniform or local"
            if head["kind"] == "local" and not count(head.get("offset"), 1):
                return f"layer {l} head {h}: a local head's 'offset' is not an integer >= 1"
    return None


def _saved_meta(meta: str) -> dict | None:
    """What a weights file's metadata records (``shapes``, ``config_sha256``), or None when it is not
    a JSON record (files written before 2026-11-30 have just the format name); {} when unreadable."""
    if not meta.startswith("{"):
        return None
    try:
        out = loads_json(meta)
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def _saved_shapes(saved: dict) -> dict:
    try:
        return {k: tuple(v) for k, v in saved["shapes"].items()}
    except (TypeError, KeyError, AttributeError):
        return {}


def _config_problem(config: dict) -> str | None:
    """What is wrong with the parts of a config.json that loading and running read, or None."""
    def symbols(v) -> bool:
        return isinstance(v, list) and all(isinstance(x, str) for x in v)

    prog = config.get("program")
    if not isinstance(prog, dict):
        return "'program' is not an object"
    if not isinstance(prog.get("source"), str):
        return "'program.source' is not text"
    if not symbols(prog.get("alphabet")) or not symbols(prog.get("special", [])):
        return "'program.alphabet' or 'program.special' is not a list of symbols"
    if not symbols(config.get("symbols")):
        return "'symbols' is not a list of symbols"
    out = config.get("output")
    if not isinstance(out, dict) or out.get("kind") not in OUTPUT_KINDS:
        return f"'output.kind' is not one of {', '.join(OUTPUT_KINDS)}"
    if not symbols(out.get("names")):
        return "'output.names' is not a list of names"
    size = config.get("size")
    keys = ("layers", "heads", "d_model", "mlp_width", "sign_width", "parameters", "nonzero")
    if not isinstance(size, dict) or not all(isinstance(size.get(k), int) for k in keys):
        return "'size' lacks " + ", ".join(keys)
    res = config.get("residual")
    if not isinstance(res, list) or not all(isinstance(r, dict) and isinstance(r.get("label"), str) for r in res):
        return "'residual' is not a list of labelled dimensions"
    raspl = config.get("raspl")
    if raspl is not None:
        from rasp.raspl import MAX_BOUNDED_LENGTH

        n = raspl.get("max_length") if isinstance(raspl, dict) else None
        bounded = isinstance(raspl, dict) and raspl.get("lowered") == "bounded"
        if (not isinstance(raspl, dict) or raspl.get("lowered") not in ("exact", "bounded")
                or not isinstance(raspl.get("lowered_source"), (str, type(None)))
                or (bounded and not (type(n) is int and 1 <= n <= MAX_BOUNDED_LENGTH))
                or (not bounded and n is not None)):
            return ("'raspl' is not {\"lowered\": \"exact\" or \"bounded\", \"max_length\": null or 1 to "
                    f"{MAX_BOUNDED_LENGTH} (bounded), \"lowered_source\": text}}")
    return None
