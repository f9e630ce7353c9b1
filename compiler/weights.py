"""Pass 4: layer plan + residual allocation -> named weight arrays and the architecture.

Each operation writes its own block (rows and columns indexed by the residual allocation); all
other entries are 0. With ``one = bos + real`` (1 everywhere) and ``e_n`` the unit vector of node n:

============  ==========================================================================================
operation     weights
============  ==========================================================================================
token         ``embed.token[s] = e_real + e_token(s)``; the BOS row is ``e_bos``
periodic      ``embed.periodic_M[r] = sum of e_n over periodic nodes n of period M with r in residues``
uniform head  ``W_Q = W_K = 0``; ``W_V`` = the value (an integer combination of bools plus a half-integer
              times ``bos``); ``W_O = e_head``
local head    offset d; ``W_Q = one`` (q = 1), ``W_K = -1024 e_bos`` (the BOS key's logit), ``W_V`` =
              the literal (``x`` or ``real - x``); ``W_O = e_head``
sign group    ``W_in = e_head - (|c| + 1) e_bos``; gamma = beta = 1/2; ``W_out = e_sign``
gate          one row of ``W_1`` per neuron (its preactivation), ``W_2[e_gate, neuron]`` = its coefficient
readout       ``W_U`` row = the output literal (``x`` or ``real - x``); output bool = ``W_U x > 1/2``
============  ==========================================================================================

Tensors are built and stored sparse (coordinates and values): a model with d_model in the tens of
thousands (|alphabet|^2 definitions) has only a few nonzeros per row. Every entry is an integer, a
half-integer or -1024. Whether a dtype holds them all exactly depends on the program's constants:
:func:`exact_dtypes` says which dtypes do (a half-integer head constant needs |c| < 128 in bfloat16,
< 2^23 in float32, and a head's coefficients may add up to 2^8 and 2^24); a cast to any other dtype warns
(:meth:`compiler.model.CompiledTransformer.cast`).
"""
from __future__ import annotations

import itertools

import numpy as np

from . import boolean as B
from .alloc import Allocation
from .graph import LOCAL_BOS_LOGIT
from .plan import Plan


class COO:
    """A weight tensor under construction, kept sparse: its shape and a list of (flat index, value)
    entries, summed where an index repeats. Almost every entry of a compiled model is 0 (each
    operation writes its own small block), so models with tens of thousands of residual dimensions
    stay small in memory and on disk. Whole rows given as linear forms over graph nodes are kept as
    they are and flattened with NumPy at the end (most entries of a model come in such rows)."""

    def __init__(self, *shape: int) -> None:
        self.shape = tuple(int(x) for x in shape)
        self._stride = self.shape[1] if len(self.shape) == 2 else None
        self._flat: list[int] = []  # row-major positions (ints convert to an array fast; tuples do not)
        self._value: list[float] = []
        self._rows: list[int] = []  # row r of self._lins[k] is self._rows[k]
        self._lins: list[tuple] = []  # ((graph node, coefficient), ...): columns are node dimensions
        self._chunks: list[tuple[np.ndarray, np.ndarray]] = []  # (flat positions, values) arrays

    def add(self, index: tuple, value) -> None:
        if value:
            if self._stride is not None:
                self._flat.append(index[0] * self._stride + index[1])
            elif len(index) == 1:
                self._flat.append(index[0])
            else:
                self._flat.append(int(np.ravel_multi_index(index, self.shape)))
            self._value.append(float(value))

    def entries(self, rows, cols, value) -> None:
        """Entries ``(rows[k], cols[k]) = value[k]`` (arrays; ``value`` may be one number), or
        ``index[k] = value[k]`` with ``cols`` None for a vector."""
        rows = np.asarray(rows, dtype=np.int64)
        flat = rows if cols is None else rows * self._stride + np.asarray(cols, dtype=np.int64)
        self._chunks.append((flat, np.broadcast_to(np.asarray(value, dtype=np.float64), flat.shape)))

    def rows(self, lins) -> None:
        """Row k gets the linear form ``lins[k]`` for every k (column: the residual dimension of each
        node; an empty form adds nothing)."""
        self._rows.extend(range(len(lins)))
        self._lins.extend(lins)

    def arrays(self, dims: np.ndarray | None = None) -> tuple[tuple, np.ndarray, np.ndarray]:
        """(shape, indices (ndim, nnz) int64, values (nnz,) float64): repeated indices summed, zeros
        dropped, entries in row-major order. ``dims[node]`` is a node's residual dimension (needed
        when rows were given)."""
        nd = len(self.shape)
        flat = np.concatenate([np.array(self._flat, dtype=np.int64)] + [f for f, _ in self._chunks])
        value = np.concatenate([np.array(self._value, dtype=np.float64)] + [v for _, v in self._chunks])
        if self._lins:
            # (node, coefficient) pairs flattened to one run of numbers (np.array over a list of
            # pairs would inspect every pair as a sequence, 2.5 times slower)
            chain = itertools.chain.from_iterable
            pairs = np.fromiter(chain(chain(self._lins)), dtype=np.float64).reshape(-1, 2)
            counts = np.fromiter(map(len, self._lins), dtype=np.int64, count=len(self._lins))
            rows = np.repeat(np.array(self._rows, dtype=np.int64), counts)
            flat = np.concatenate([flat, rows * self._stride + dims[pairs[:, 0].astype(np.int64)]])
            value = np.concatenate([value, pairs[:, 1]])
        if not len(flat):
            return self.shape, np.zeros((nd, 0), dtype=np.int64), np.zeros(0, dtype=np.float64)
        keys, where = np.unique(flat, return_inverse=True)
        vals = np.bincount(where.ravel(), weights=value, minlength=len(keys))
        keep = vals != 0.0
        out = np.array(np.unravel_index(keys[keep], self.shape), dtype=np.int64).reshape(nd, -1)
        return self.shape, out, vals[keep]


def build_weights(plan: Plan, alloc: Allocation) -> tuple[dict, dict[str, tuple]]:
    """(architecture, tensors): the architecture as JSON-ready data; tensors named like the module's
    weights, each ``(shape, indices, values)`` (COO, float64 values)."""
    g = plan.graph
    d = alloc.d_model
    ix = alloc.index
    nodes = g.nodes
    bos, real = ix[B.BOS], ix[B.REAL]
    dims = np.zeros(len(nodes), dtype=np.int64)  # node id -> residual dimension
    dims[np.fromiter(ix.keys(), dtype=np.int64, count=len(ix))] = np.fromiter(ix.values(), dtype=np.int64, count=len(ix))
    W: dict[str, COO] = {}

    tok = W["embed.token"] = COO(len(g.symbols) + 1, d)
    for k in range(len(g.symbols)):
        tok.add((k, real), 1.0)
    tok.add((len(g.symbols), bos), 1.0)
    sym_index = {s: k for k, s in enumerate(g.symbols)}
    for n in nodes:
        if n.kind == "token":
            tok.add((sym_index[n.params["symbol"]], ix[n.id]), 1.0)
        elif n.kind == "tokenset":
            for s in n.params["symbols"]:
                tok.add((sym_index[s], ix[n.id]), 1.0)
    for M in g.periods:
        table = W[f"embed.periodic_{M}"] = COO(M, d)
        for n in nodes:
            if n.kind == "periodic" and n.params["period"] == M:
                for r in n.params["residues"]:
                    table.add((r, ix[n.id]), 1.0)

    layers = []
    for l, layer in enumerate(plan.layers):
        H = len(layer.heads)
        p = f"layers.{l}."
        WQ, WK, WV, WO = (W.setdefault(p + "attn." + k, COO(*shape)) for k, shape in
                          (("W_Q", (H, d)), ("W_K", (H, d)), ("W_V", (H, d)), ("W_O", (d, H))))
        heads = []
        WO.entries(dims[layer.heads], np.arange(H), 1.0)
        WV.rows([nodes[i].params["value"] for i in layer.heads])
        for h, i in enumerate(layer.heads):
            n = nodes[i]
            if n.kind == "local":
                WQ.add((h, bos), 1.0)
                WQ.add((h, real), 1.0)
                WK.add((h, bos), -LOCAL_BOS_LOGIT)
                heads.append({"kind": "local", "offset": int(n.params["offset"])})
            else:
                heads.append({"kind": "uniform"})
        k = len(layer.signs)
        Win, gamma, beta, Wout = (W.setdefault(p + "sign." + name, COO(*shape)) for name, shape in
                                  (("W_in", (k, d)), ("gamma", (k,)), ("beta", (k,)), ("W_out", (d, k))))
        Win.rows([nodes[i].params["input"] for i in layer.signs])
        gamma.entries(np.arange(k), None, 0.5)
        beta.entries(np.arange(k), None, 0.5)
        Wout.entries(dims[layer.signs], np.arange(k), 1.0)
        h = len(layer.neurons)
        W1, W2 = W.setdefault(p + "mlp.W_1", COO(h, d)), W.setdefault(p + "mlp.W_2", COO(d, h))
        W1.rows(layer.neurons)
        if layer.writes:
            writes = np.array(layer.writes, dtype=np.float64)  # (gate node, neuron, coefficient)
            W2.entries(dims[writes[:, 0].astype(np.int64)], writes[:, 1].astype(np.int64), writes[:, 2])
        layers.append({"heads": heads, "sign": k, "mlp": h})

    WU = W["readout.W_U"] = COO(len(g.outputs), d)
    for o, (_, lit) in enumerate(g.outputs):
        for n, c in B.lit_lin(lit).items():
            WU.add((o, ix[n]), c)

    arch = {
        "d_model": d,
        "n_symbols": len(g.symbols),
        "bos_id": len(g.symbols),
        "periods": list(g.periods),
        "local_bos_logit": LOCAL_BOS_LOGIT,
        "layers": layers,
        "n_outputs": len(g.outputs),
    }
    return arch, {name: m.arrays(dims) for name, m in W.items()}


#: significand bits (the implicit bit included) of the dtypes a model can run in
SIGNIFICAND_BITS = {"float64": 53, "float32": 24, "bfloat16": 8, "float16": 11}


def head_value_bound(tensors: dict[str, tuple], skip_column: int | None = None) -> float:
    """The most any head's value can be in magnitude at one position: its inputs are 0/1, so the
    larger of the sums of its ``W_V`` row's positive and of its negative entries (NumPy arrays).
    ``skip_column``: leave that input out (the ``bos`` flag, 0 at every position but BOS: the bound
    at the other positions, where a head's BOS constant ``c + 1/2`` is not added)."""
    bound = 0.0
    for name, (shape, idx, v) in tensors.items():
        if name.endswith("attn.W_V") and len(v):
            if skip_column is not None:
                keep = idx[1] != skip_column
                idx, v = idx[:, keep], v[keep]
            if len(v):
                bound = max(bound, _row_reach(shape, idx, v))
    return bound


#: the accumulators of a uniform head's sum: scan adds in float64, the fused CUDA kernels in
#: float32; each holds every half-integer up to this magnitude exactly
ACCUMULATOR_EXACT = {"scan": 2.0 ** 52, "sdpa": 2.0 ** 23}


def bos_column(tensors: dict[str, tuple]) -> int | None:
    """The residual dimension of the ``bos`` flag: the one entry of the token embedding's BOS row
    (its last row)."""
    shape, idx, _ = tensors["embed.token"]
    cols = np.asarray(idx[1])[np.asarray(idx[0]) == shape[0] - 1]
    return int(cols[0]) if len(cols) == 1 else None


def uniform_value_rows(tensors: dict[str, tuple], arch: dict) -> dict[str, tuple]:
    """The ``W_V`` tensors restricted to the rows of uniform heads (local heads copy one position's
    value and never sum), plus the token embedding (for :func:`bos_column`)."""
    out = {"embed.token": tensors["embed.token"]}
    for l, layer in enumerate(arch["layers"]):
        name = f"layers.{l}.attn.W_V"
        if name not in tensors:
            continue
        shape, idx, v = tensors[name]
        uniform = np.array([h["kind"] == "uniform" for h in layer["heads"]] or [False], dtype=bool)
        idx, v = np.asarray(idx), np.asarray(v)
        keep = uniform[idx[0]] if len(v) else np.zeros(0, dtype=bool)
        out[name] = (shape, idx[:, keep], v[keep])
    return out


def exact_sum_positions(tensors: dict[str, tuple], arch: dict) -> dict[str, int | None]:
    """Per backend, the longest sequence (positions, BOS included) over which every uniform head's
    running sum stays exact in that backend's accumulator (:data:`ACCUMULATOR_EXACT`); None: any
    length (no uniform head reads anything but its BOS constant).

    Every bool is 0 at BOS (the tested invariant of docs/compiler.md), so at BOS a head's value is
    its ``bos`` weight, at most ``b`` in magnitude, and at a later position at most ``a`` (its
    ``W_V`` row without the ``bos`` column, :func:`head_value_bound`): a sum over t positions stays
    within ``b + (t - 1) a``, exact while that is at most the accumulator's bound. Beyond, a sum can
    round (a comparison with coefficients near 2^31 and a constant near 2^52 rounds in float64 within
    a few tokens: a tie reached after the prefix sum went past 2^52 comes out wrong)."""
    tensors = uniform_value_rows(tensors, arch)
    col = bos_column(tensors)
    if col is None:  # not a compiled model's embedding: the whole row at every position
        a = b = head_value_bound(tensors)
    else:
        a = head_value_bound(tensors, skip_column=col)
        b = max((float(np.abs(v[np.asarray(idx[1]) == col]).max(initial=0.0))
                 for name, (_, idx, v) in tensors.items() if name.endswith("attn.W_V")), default=0.0)
    out: dict[str, int | None] = {}
    for backend, cap in ACCUMULATOR_EXACT.items():
        if a == 0:
            out[backend] = None if b <= cap else 0
        else:
            out[backend] = max(0, int((cap - b) // a) + 1) if b <= cap else 0
    return out


#: per dtype, the most positions (BOS included) at which a uniform head's quotient keeps its sign: its
#: smallest magnitude is (1/2)/P at P positions, and in float16 (smallest subnormal 2^-24) 2^-25 at
#: P = 2^24 rounds to 0 (ties to even), where the sign unit reads neither 0 nor 1. float32 and
#: bfloat16 reach P = 2^148, float64 2^1073: no limit a sequence can meet.
QUOTIENT_POSITIONS = {"float16": 2 ** 24 - 1}


def exact_positions(arch: dict, sum_positions: dict, dtype: str, backend: str = "scan") -> int | None:
    """The most positions (BOS included) over which the model is exact on every input in ``dtype``
    with ``backend``: the running sums' bound (:func:`exact_sum_positions`) and, where there is a
    uniform head, the quotient's (:data:`QUOTIENT_POSITIONS`); None: any length. (Whether ``dtype``
    holds the weights at all is :func:`exact_dtypes`'.)"""
    limits = [sum_positions.get(backend)]
    if any(h["kind"] == "uniform" for layer in arch["layers"] for h in layer["heads"]):
        limits.append(QUOTIENT_POSITIONS.get(dtype))
    limits = [x for x in limits if x is not None]
    return min(limits) if limits else None


def exact_dtypes(tensors: dict[str, tuple]) -> list[str]:
    """The dtypes (of :data:`SIGNIFICAND_BITS`) in which the construction's exactness argument holds:
    every weight is exactly representable, and so is every value a head can carry at one position
    and every partial sum on the way to it. Every bool is 0 at BOS, so at BOS a head's value is its
    ``bos`` weight (a weight: representable); at a later position the ``bos`` input is 0 and the value
    is a sum of some of the row's other entries, integers (the inputs being 0/1, at most the sum of
    the positive entries or minus the sum of the negative ones in magnitude), and with p significand
    bits every integer up to 2^p is exact (``200 * #"a" > 199 * #"b"`` is exact in bfloat16, whose
    p = 8). Where the ``bos`` dimension cannot be told from the token embedding, the whole row is
    bounded, as half-integers below 2^(p-1). Outside these dtypes a constant of the program is
    rounded and comparisons near it can come out wrong (``#"a" > 301`` in bfloat16 stores 301.5 as
    302). NumPy only: ``rasp compile`` never imports torch. bfloat16 is float32 with the low 16 bits
    of the bit pattern zero."""
    values = [v for _, _, v in tensors.values() if len(v)]
    vals = np.concatenate(values) if values else np.zeros(0)
    # an MLP neuron's preactivation (0/1 inputs, integer weights) and every partial sum on the way:
    # integers within the larger of its row's positive and negative sums, exact up to 2^p
    neuron_sum = max((_row_reach(shape, idx, v) for name, (shape, idx, v) in tensors.items()
                      if name.endswith("mlp.W_1") and len(v)), default=0.0)
    col = bos_column(tensors) if "embed.token" in tensors else None
    if col is None:
        row_sum, limit_bits = head_value_bound(tensors), -1  # half-integers: 2^(p-1)
    else:
        row_sum, limit_bits = head_value_bound(tensors, skip_column=col), 0  # integers: 2^p
    f32 = vals.astype(np.float32)
    exact = {
        "float64": True,
        "float32": bool(np.all(f32 == vals)),
        "bfloat16": bool(np.all(f32 == vals) and np.all((f32.view(np.uint32) & 0xFFFF) == 0)),
        "float16": bool(np.all(np.abs(vals) <= 65504) and np.all(vals.astype(np.float16) == vals)),
    }
    return [d for d, bits in SIGNIFICAND_BITS.items()
            if exact[d] and row_sum <= 2.0 ** (bits + limit_bits) and neuron_sum <= 2.0 ** bits]


def _row_reach(shape, idx, v) -> float:
    """The most any row of a weight matrix can sum to in magnitude over 0/1 inputs."""
    idx = np.asarray(idx)
    pos = np.bincount(idx[0], weights=np.maximum(v, 0), minlength=shape[0])
    neg = np.bincount(idx[0], weights=np.minimum(v, 0), minlength=shape[0])
    return max(float(pos.max()), float(-neg.min()))
