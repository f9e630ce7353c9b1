"""Pass 5: weights + architecture -> ``nn.Module``; the forward paths and cached generation.

**The transformer.** Input token ids (no BOS) become positions t = 1..n after a BOS at t = 0. The
residual ``x`` (batch, n + 1, d_model) starts as the token embedding plus, at t >= 1, the periodic
tables ``E_M[(t - 1) mod M]``. Each layer adds three sublayers, ``x += sublayer(x)``:

* **attention**: heads with query/key/value dimension 1. Head h's logit from query t to key s is
  ``q_h(t) k_h(s) + phi_h(t, s)`` with ``phi_h = 0`` on the allowed keys and ``-inf`` elsewhere:
  a *uniform* head allows every s <= t (and has W_Q = W_K = 0, so all logits are equal and it
  averages its value over 0..t); a *local* head at offset d allows s = t - d and s = 0 (BOS), and
  its content term puts -1024 on BOS, so it reads the value at t - d exactly (and BOS's value when
  t <= d). Output ``sum_h W_O[:, h] * softmax(...) v_h``.
* **sign**: ``y = W_in x``; the mean-zero pair (y, -y) is layer-normalized, ``(y, -y) / rms`` with
  ``rms = sqrt(mean(y^2, y^2)) = |y|``, giving (sgn y, -sgn y) at **any** scale of y; then
  ``gamma * sgn y + beta`` with gamma = beta = 1/2 is the bool [y > 0], written by ``W_out``. The rms
  of the pair is evaluated in its exact closed form |y| (torch's CPU float32 ``sqrt(y * y)`` is
  off by one ulp in about 1e-5 of cases, which would make the bool 0.99999994); rms is clamped
  below by the dtype's smallest subnormal number (``tiny * eps``), which matters only for y = 0, which the compiler
  never produces (every sign input is a half-integer over t + 1).
* **MLP**: ``W_2 relu(W_1 x)``.

Readout: ``W_U x > 1/2`` per position.

**Backends** (all the same function):

* ``dense``: the reference: explicit Q, K, V, the (n+1) x (n+1) logits with the positional term,
  softmax; for tests at small n;
* ``scan`` (CPU default): a uniform head is ``cumsum(v) / (t + 1)``, the causal uniform average,
  accumulated in float64 (exact for half-integer sums up to 2^52) and then cast to the
  model dtype; a local head is v shifted by d (BOS's value in front); O(n d) memory;
* ``sdpa`` (CUDA default for float32/bfloat16/float16): all uniform heads of a layer share one
  attention pattern (W_Q = W_K = 0), so they run as one ``scaled_dot_product_attention`` call with
  ``is_causal=True`` and the value dimensions side by side, restricted to the fused kernels (flash,
  memory-efficient) so no n x n matrix is built; local heads by shifting. float64 on CUDA uses
  ``scan`` (no fused kernel takes float64), and so does a forward whose head values could pass 2^23
  in the kernels' float32 accumulator (:meth:`CompiledTransformer.pick_backend`).

``dense`` computes in the model's dtype: below float64 each softmax weight 1/(t+1) and each product
with a value is rounded, so it equals ``scan`` only while the values are small against 2^p (the tests
compare them in float64, and in lower precision on programs with small constants); ``scan`` and
``sdpa`` round once, at the end.

**Generation** keeps, per layer, the running float64 sum of each uniform head's value (its cache is
one number per head) and a ring of the last W values of the local heads, W = min(max(d), the last
position generation can reach + 1), so a new token costs one position's worth of work.
"""
from __future__ import annotations

import warnings

import torch
from torch import nn
import torch.nn.functional as F

from rasp.program import length_groups as _length_groups

DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16,
          "float16": torch.float16}
BACKENDS = ("auto", "dense", "scan", "sdpa")


def normalized_pair(y: torch.Tensor) -> torch.Tensor:
    """The layer norm (no affine part) of each mean-zero pair (y, -y), first coordinate: y / |y|,
    exactly +1 or -1 for every nonzero y in every dtype (in place). The floor on |y| (which only
    matters for y = 0) is the dtype's smallest *subnormal*: |y| = (1/2)/(t + 1) is subnormal in
    float16 from t = 8,192 on, and a floor at the smallest normal number would shrink y / |y| below 1
    there (float16 was exact only to 8,192 tokens)."""
    fi = torch.finfo(y.dtype)
    return y.div_(y.abs().clamp_min(fi.tiny * fi.eps))


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``auto`` (or None): CUDA when present, else the CPU; otherwise ``cpu``, ``cuda`` or ``cuda:N``
    (:func:`rasp.devices.resolve_device`, shared with training). Anything else, or a CUDA device that
    is not here, is a :class:`RaspError`."""
    from rasp.devices import resolve_device as resolve

    return resolve(device, ("cpu", "cuda"), "compiled models run")


def resolve_dtype(dtype) -> torch.dtype:
    """A name of :data:`DTYPES` (or one of its torch dtypes; None: float32), else a :class:`RaspError`."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    from rasp.errors import RaspError
    raise RaspError(f"unknown dtype {dtype!r}", hint="choose float64, float32, bfloat16 or float16")


def dtype_name(dtype) -> str:
    """The name (a key of :data:`DTYPES`) of a dtype given by name or as a torch dtype."""
    return str(resolve_dtype(dtype)).removeprefix("torch.")


#: a product with at most this many dense entries is computed densely
DENSE_MAX = 1 << 16
#: ... and so is one whose sparse work (nnz times this factor) would exceed the dense work
SPARSE_FACTOR = 32
#: a product restricted to the rows and columns it uses is computed densely up to this size ...
SUBDENSE_MAX = 1 << 24
#: ... and this many times its number of nonzeros (a BLAS product beats a gather by about this much)
SUBDENSE_FACTOR = 64
#: reads of at most this many contiguous feature runs are slices (no copy)
MAX_RUNS = 8
#: the gather path handles at most this many (row, nonzero) products at once
GATHER_CHUNK = 1 << 24


def _matmul(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``w @ x`` for w (out, in) and x (batch, in, positions), as one matrix product over the batch:
    broadcasting ``w @ x`` runs one product per row, a matrix-vector product per row when decoding
    one position (measured, one thread, w 22650 x 304 float32, batch 8: 136 ms broadcast, 12 ms as one
    product). Every compiled product sums exactly representable terms whose partial sums are exact
    (the weights' construction), so the order the two ways sum in does not change a value."""
    B, C, T = x.shape
    if B == 1:
        return (w @ x[0])[None]
    y = w @ x.transpose(0, 1).reshape(C, B * T)
    return y.reshape(w.shape[0], B, T).transpose(0, 1).contiguous()


class SparseMatrix(nn.Module):
    """A weight tensor stored as coordinates (``indices``, (ndim, nnz) int64) and ``values``.

    The model keeps activations **feature-major**, (batch, features, positions), so reading a few
    features is a copy of contiguous rows. Products ``W x`` use one of three equivalent strategies:
    ``dense`` (small or dense tensors), ``subdense`` (a dense product of the features the matrix
    reads, written to the features it writes: a typical MLP or value matrix reads a few hundred of
    tens of thousands of dimensions), or ``gather`` (``index_select`` of the read features, scaled,
    ``index_add_`` into the written ones)."""

    def __init__(self, shape, indices: torch.Tensor, values: torch.Tensor) -> None:
        super().__init__()
        self.shape = tuple(int(x) for x in shape)
        self.register_buffer("indices", indices.to(torch.long).reshape(len(self.shape), -1))
        self.register_buffer("values", values)
        numel = 1
        for x in self.shape:
            numel *= x
        nnz = int(values.numel())
        self.mode = "dense"
        if len(self.shape) == 2:
            rows, cols = self.indices
            self.rows_used = torch.unique(rows)
            self.cols_used = torch.unique(cols)
            sub = len(self.rows_used) * len(self.cols_used)
            if nnz and numel > DENSE_MAX and numel > SPARSE_FACTOR * nnz:
                self.mode = "subdense" if sub <= SUBDENSE_MAX and sub <= SUBDENSE_FACTOR * nnz else "gather"
        self._dense = None
        self._sub = None
        self._rows = None
        self._runs = None
        self._plain = None

    @property
    def nnz(self) -> int:
        return int(self.values.numel())

    def dense(self) -> torch.Tensor:
        d = self._dense
        if d is None or d.dtype != self.values.dtype or d.device != self.values.device:
            d = torch.zeros(self.shape, dtype=self.values.dtype, device=self.values.device)
            if self.nnz:
                d.index_put_(tuple(self.indices), self.values, accumulate=True)
            self._dense = d
        return d

    def _subdense(self):
        if self._sub is None or self._sub[2].dtype != self.values.dtype:
            rows, cols = self.indices
            r_ix = torch.searchsorted(self.rows_used, rows)
            c_ix = torch.searchsorted(self.cols_used, cols)
            sub = torch.zeros((len(self.rows_used), len(self.cols_used)), dtype=self.values.dtype,
                              device=self.values.device)
            sub.index_put_((r_ix, c_ix), self.values, accumulate=True)
            self._sub = (self.rows_used.to(self.values.device), self.cols_used.to(self.values.device), sub)
        return self._sub

    def _read(self, sub: torch.Tensor, c: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``sub @ x[:, c]``; when c is a few contiguous runs of features, as slices (no copy)."""
        if self._runs is None:
            cl = c.tolist()
            runs, start = [], 0
            for k in range(1, len(cl) + 1):
                if k == len(cl) or cl[k] != cl[k - 1] + 1:
                    runs.append((start, k, cl[start]))
                    start = k
            self._runs = runs if len(runs) <= MAX_RUNS else []
        if len(c) == x.shape[1]:
            return _matmul(sub, x)
        if not self._runs:
            return _matmul(sub, x.index_select(1, c))
        out = None
        for a, b, f in self._runs:
            part = _matmul(sub[:, a:b], x[:, f:f + (b - a)])
            out = part if out is None else out.add_(part)
        return out

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """``W x`` for W of shape (out, in) and x of shape (batch, in, positions): (batch, out, positions)."""
        out_dim = self.shape[0]
        if self.nnz == 0:
            return x.new_zeros(x.shape[0], out_dim, x.shape[2])
        if self.mode == "dense":
            return _matmul(self.dense(), x)
        if self.mode == "subdense":
            r, c, sub = self._subdense()
            z = self._read(sub, c, x)
            if len(r) == out_dim:
                return z
            out = x.new_zeros(x.shape[0], out_dim, x.shape[2])
            return out.index_copy_(1, r, z)
        return self._gather_into(x.new_zeros(x.shape[0], out_dim, x.shape[2]), x)

    def add_apply(self, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``y + W x``, in place on y (only the rows W writes are touched)."""
        if self.nnz == 0:
            return y
        if self.mode == "gather":
            return self._gather_into(y, x)
        r, c, sub = self._subdense()
        return y.index_add_(1, r, self._read(sub, c, x))

    def _gather_into(self, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        rows, cols = self.indices
        if self._plain is None:  # W writes column k of x to row rows[k] (a sublayer's output map)
            self._plain = bool(torch.equal(cols, torch.arange(len(cols), device=cols.device))
                               and len(cols) == self.shape[1] and bool((self.values == 1).all()))
        if self._plain:
            return y.index_add_(1, rows, x)
        vals = self.values[None, :, None]
        nz = max(1, GATHER_CHUNK // max(1, x.shape[0] * x.shape[2]))  # nonzeros per chunk (the whole batch)
        for s in range(0, self.nnz, nz):
            g = x.index_select(1, cols[s:s + nz])
            g.mul_(vals[:, s:s + nz])
            y.index_add_(1, rows[s:s + nz], g)
        return y

    def lookup(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows ``W[ids]`` as feature-major vectors: ids (batch, positions) -> (batch, d, positions)."""
        if self._rows is None or self._rows[1].dtype != self.values.dtype:
            rows, cols = self.indices
            counts = torch.bincount(rows, minlength=self.shape[0])
            E = int(counts.max()) if self.nnz else 1
            pc = torch.zeros((self.shape[0], E), dtype=torch.long, device=rows.device)
            pv = torch.zeros((self.shape[0], E), dtype=self.values.dtype, device=rows.device)
            start = torch.cumsum(counts, 0) - counts
            slot = torch.arange(self.nnz, device=rows.device) - start[rows]
            pc[rows, slot] = cols
            pv[rows, slot] = self.values
            self._rows = (pc, pv)
        pc, pv = self._rows
        B, T = ids.shape
        out = torch.zeros((B, self.shape[1], T), dtype=self.values.dtype, device=ids.device)
        out.scatter_add_(1, pc[ids].transpose(1, 2), pv[ids].transpose(1, 2))
        return out


class _Mats(nn.Module):
    def __init__(self, mats: dict) -> None:
        super().__init__()
        for k, (shape, idx, vals) in mats.items():
            self.add_module(k, SparseMatrix(shape, idx, vals))


def _as_tensor(a):
    return a if isinstance(a, torch.Tensor) else torch.from_numpy(a)


class CompiledTransformer(nn.Module):
    """The compiled transformer. ``arch`` is the architecture dict of :mod:`compiler.weights`,
    ``tensors`` maps each weight name to ``(shape, indices, values)`` (coordinates, see
    :class:`SparseMatrix`). Activations are feature-major internally: (batch, d_model, positions)."""

    def __init__(self, arch: dict, tensors: dict) -> None:
        super().__init__()
        self.arch = arch
        tensors = {k: (tuple(shape), _as_tensor(idx), _as_tensor(vals)) for k, (shape, idx, vals) in tensors.items()}
        self.embed = _Mats({k.split(".", 1)[1]: v for k, v in tensors.items() if k.startswith("embed.")})
        self.layers = nn.ModuleList()
        for l, spec in enumerate(arch["layers"]):
            prefix = f"layers.{l}."
            sub = nn.Module()
            for part in ("attn", "sign", "mlp"):
                p = prefix + part + "."
                sub.add_module(part, _Mats({k[len(p):]: v for k, v in tensors.items() if k.startswith(p)}))
            kinds = spec["heads"]
            sub.uniform = [h for h, s in enumerate(kinds) if s["kind"] == "uniform"]
            groups: dict[int, list[int]] = {}
            for h, s in enumerate(kinds):
                if s["kind"] == "local":
                    groups.setdefault(int(s["offset"]), []).append(h)
            sub.local_groups = sorted(groups.items())
            sub.local = [h for h, s in enumerate(kinds) if s["kind"] == "local"]
            sub.local_offsets = [int(s["offset"]) for s in kinds if s["kind"] == "local"]
            sub.n_heads = len(kinds)
            # contiguous runs are slices (cheaper than index lists)
            sub.uniform_ix = _slice_or_index(sub.uniform)
            self.layers.append(sub)
        self.readout = _Mats({"W_U": tensors["readout.W_U"]})
        from .weights import exact_sum_positions

        values_and_bos = {k: (shape, idx.cpu().numpy(), vals.to(torch.float64).cpu().numpy())
                          for k, (shape, idx, vals) in tensors.items() if k.endswith("attn.W_V") or k == "embed.token"}
        #: per backend, the most positions over which every head's running sum is exact
        #: (:func:`compiler.weights.exact_sum_positions`; None: any)
        self.sum_positions = exact_sum_positions(values_and_bos, self.arch)

    def weights(self) -> dict[str, tuple]:
        """Every weight as (shape, indices, values), named as in the files."""
        out = {}
        for name, m in self.named_modules():
            if isinstance(m, SparseMatrix):
                out[name] = (m.shape, m.indices, m.values)
        return out

    # ------------------------------------------------------------------ properties
    @property
    def dtype(self) -> torch.dtype:
        return self.embed.token.values.dtype

    @property
    def device(self) -> torch.device:
        return self.embed.token.values.device

    def cast(self, device=None, dtype=None) -> "CompiledTransformer":
        """A copy on ``device`` in ``dtype``; warns when a weight is not exactly representable."""
        dtype = resolve_dtype(dtype) if dtype is not None else self.dtype
        device = resolve_device(device) if device is not None else self.device
        w = self.weights()
        inexact = [k for k, (_, _, v) in w.items() if not torch.equal(v.to(dtype).to(v.dtype), v)]
        if inexact:
            warnings.warn(f"weights not exactly representable in {dtype}: {', '.join(inexact[:4])} "
                          "(a constant of the program is too large for this dtype)", stacklevel=2)
        return CompiledTransformer(self.arch, {k: (shape, idx.to(device), v.to(device=device, dtype=dtype))
                                               for k, (shape, idx, v) in w.items()})

    def pick_backend(self, backend: str = "auto", positions: int | None = None) -> str:
        """The backend ``auto`` means for a forward over ``positions`` positions (BOS included; None:
        any): ``sdpa`` on CUDA below float64 where it is exact, else ``scan``.

        The fused kernels sum a uniform head's values (half-integers) in a float32 accumulator with
        weight exp(0) = 1 and divide by the exact count once, so they equal ``scan`` while every
        partial sum is a float32 half-integer: for up to ``sum_positions["sdpa"]`` positions (a head's
        BOS constant once, plus at most the sum of its coefficients' magnitudes on one side per later
        position, stays <= 2^23). Beyond (more than about 2^23 / max|coefficient| positions, or a
        constant near 2^23) ``auto`` uses ``scan``, whose accumulator is float64."""
        if backend not in BACKENDS:
            from rasp.errors import RaspError
            raise RaspError(f"unknown backend {backend!r}", hint="choose " + ", ".join(BACKENDS))
        if backend != "auto":
            return backend
        if self.device.type == "cuda" and self.dtype != torch.float64:
            limit = self.sum_positions["sdpa"]
            if positions is None or limit is None or positions <= limit:
                return "sdpa"
        return "scan"

    # ------------------------------------------------------------------ pieces (feature-major)
    def embed_tokens(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Embedding of token ids (B, T) at input positions p (0-based; BOS gets no positional part):
        (B, d_model, T)."""
        x = self.embed.token.lookup(ids)
        not_bos = (ids != self.arch["bos_id"]).unsqueeze(1).to(x.dtype)
        for M in self.arch["periods"]:
            table = getattr(self.embed, f"periodic_{M}")
            x += table.lookup(torch.remainder(positions, M)) * not_bos
        return x

    def embed_sequence(self, ids: torch.Tensor) -> torch.Tensor:
        B, n = ids.shape
        bos = torch.full((B, 1), self.arch["bos_id"], dtype=torch.long, device=self.device)
        full = torch.cat([bos, ids.to(self.device)], dim=1)
        pos = torch.arange(-1, n, device=self.device).expand(B, n + 1)
        return self.embed_tokens(full, pos)

    @staticmethod
    def sign(sub, x: torch.Tensor) -> torch.Tensor:
        if sub.sign.W_in.shape[0] == 0:
            return x
        s = normalized_pair(sub.sign.W_in.apply(x))  # (B, k, T)
        s = s.mul_(sub.sign.gamma.dense()[:, None]).add_(sub.sign.beta.dense()[:, None])
        return sub.sign.W_out.add_apply(x, s)

    @staticmethod
    def mlp(sub, x: torch.Tensor) -> torch.Tensor:
        if sub.mlp.W_1.shape[0] == 0:
            return x
        return sub.mlp.W_2.add_apply(x, torch.relu_(sub.mlp.W_1.apply(x)))

    def attention(self, sub, x: torch.Tensor, backend: str, collect: list | None = None) -> torch.Tensor:
        a = sub.attn
        if sub.n_heads == 0:
            if collect is not None:
                collect.append(None)
            return x
        v = a.W_V.apply(x)  # (B, H, T)
        if collect is not None:
            collect.append(v)  # (the backends below never modify v in place)
        if backend == "dense":
            return a.W_O.add_apply(x, self._attention_dense(sub, x, v))
        B, H, T = v.shape
        parts = torch.zeros_like(v) if sub.local else None
        if sub.uniform:
            vu = v[:, sub.uniform_ix]
            mean = None
            if backend == "sdpa":
                try:
                    mean = _sdpa_uniform(vu.transpose(1, 2)).transpose(1, 2)
                except RuntimeError as exc:  # no fused kernel for this device/dtype/shape
                    warnings.warn(f"fused attention unavailable ({str(exc).splitlines()[0][:120]}); "
                                  "using the scan backend for uniform heads", stacklevel=2)
            if mean is None:
                denom = torch.arange(1, T + 1, device=x.device, dtype=torch.float64)
                mean = vu.to(torch.float64, copy=True).cumsum_(dim=2).div_(denom).to(x.dtype)
            if parts is None:
                parts = mean if len(sub.uniform) == H else torch.zeros_like(v).index_copy_(
                    1, torch.as_tensor(sub.uniform, device=x.device), mean)
            else:
                parts[:, sub.uniform_ix] = mean
        for d, idx in sub.local_groups:
            vl = v[:, idx]
            k = min(d, T)
            parts[:, idx] = torch.cat([vl[:, :, :1].expand(B, len(idx), k), vl[:, :, : T - k]], dim=2)
        return a.W_O.add_apply(x, parts)

    def _attention_dense(self, sub, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The reference: explicit logits with the positional term, softmax, weighted values."""
        a = sub.attn
        q, k = a.W_Q.apply(x), a.W_K.apply(x)  # (B, H, T)
        B, H, T = v.shape
        t = torch.arange(T, device=x.device)
        rel = t[:, None] - t[None, :]  # query - key
        bias = torch.full((H, T, T), float("-inf"), dtype=x.dtype, device=x.device)
        local = dict(zip(sub.local, sub.local_offsets))
        for h in range(H):
            if h in local:
                allowed = (rel == local[h]) | ((t[None, :] == 0) & (rel >= 0))
            else:
                allowed = rel >= 0
            bias[h][allowed] = 0
        logits = q[..., :, None] * k[..., None, :] + bias  # (B, H, T, T)
        probs = torch.softmax(logits, dim=-1)
        return (probs @ v[..., None]).squeeze(-1)  # (B, H, T)

    # ------------------------------------------------------------------ forward
    def residual_fm(self, ids: torch.Tensor, backend: str = "auto", collect: list | None = None) -> torch.Tensor:
        """The final residual stream, feature-major: (B, d_model, n + 1), BOS at position 0."""
        backend = self.pick_backend(backend, ids.shape[1] + 1)
        x = self.embed_sequence(ids)
        for sub in self.layers:
            x = self.attention(sub, x, backend, collect)
            x = self.sign(sub, x)
            x = self.mlp(sub, x)
        return x

    def residual(self, ids: torch.Tensor, backend: str = "auto") -> torch.Tensor:
        """The final residual stream (B, n + 1, d_model), BOS at index 0."""
        with torch.no_grad():
            return self.residual_fm(ids, backend).transpose(1, 2)

    def forward(self, ids: torch.Tensor, backend: str = "auto") -> torch.Tensor:
        """Output bools (B, n, n_outputs) at every input position."""
        with torch.no_grad():
            return self.readout_bools(self.residual_fm(ids, backend))

    def readout_bools(self, x: torch.Tensor) -> torch.Tensor:
        """The output bools (B, n, n_outputs) of a feature-major residual (B, d_model, n + 1), BOS
        left out: ``W_U x > 1/2`` at every input position."""
        return (self.readout.W_U.apply(x[:, :, 1:]) > 0.5).transpose(1, 2)

    # ------------------------------------------------------------------ generation
    @torch.no_grad()
    def generate(self, seqs: list[list[int]], limits: list[int], backend: str = "auto") -> list[list[int]]:
        """Greedy decoding: append the first output index whose bool holds at the last position
        (output k belongs to token id k), until none holds or ``limits[r]`` tokens were added."""
        return self._generate(seqs, limits, backend, False)[0]

    @torch.no_grad()
    def generate_with_prompt_outputs(self, seqs: list[list[int]], limits: list[int],
                                     backend: str = "auto") -> tuple[list[list[int]], list]:
        """:meth:`generate`, and each prompt's output bools at every prompt position ((n_r, n_outputs)
        NumPy arrays, in the order of ``seqs``), read from the prefill's residual: what
        :meth:`forward` returns for the prompt, without running the prompt a second time
        (verification compares them with the interpreter)."""
        return self._generate(seqs, limits, backend, True)

    def _generate(self, seqs, limits, backend: str, want_prompt_outputs: bool):
        self.pick_backend(backend)  # a bad name fails here; each prefill picks for its own length
        B = len(seqs)
        prompt_bools: list = [None] * B
        # prefill in groups of similar length (padding a short prompt to a long one wastes memory)
        lasts, states, order = [], [], []
        # the last position generation can reach: every group's caches are sized by it, so they join
        last_t = max((len(s) + n for s, n in zip(seqs, limits)), default=0)
        for group in length_groups([len(s) for s in seqs]):
            n = max(len(seqs[r]) for r in group)
            ids = torch.zeros((len(group), n), dtype=torch.long, device=self.device)
            for k, r in enumerate(group):
                ids[k, : len(seqs[r])] = torch.as_tensor(seqs[r], dtype=torch.long)
            lengths = torch.as_tensor([len(seqs[r]) for r in group], device=self.device)
            collect: list = []
            x = self.residual_fm(ids, backend, collect)
            rows = torch.arange(len(group), device=self.device)
            lasts.append(x[rows, :, lengths])  # the last token sits at t = length: (group, d)
            if want_prompt_outputs:
                bools = self.readout_bools(x).cpu().numpy()
                for k, r in enumerate(group):
                    prompt_bools[r] = bools[k, : len(seqs[r])]
            states.append(self._prefill_state(collect, lengths, last_t))
            order += group
            del x, collect
        inv = torch.empty(B, dtype=torch.long, device=self.device)
        inv[torch.as_tensor(order, device=self.device)] = torch.arange(B, device=self.device)
        last = torch.cat(lasts)[inv][:, :, None]  # (B, d, 1)
        state = [None if parts[0] is None else {k: torch.cat([p[k] for p in parts])[inv] for k in parts[0]}
                 for parts in zip(*states)]
        lengths = torch.as_tensor([len(s) for s in seqs], device=self.device)
        generated: list[list[int]] = [[] for _ in seqs]
        active = list(range(B))
        t = lengths.clone()  # t of the last token of each (active) row
        while True:
            out = self.readout.W_U.apply(last)[:, :, 0] > 0.5  # (len(active), n_out)
            keep, toks = [], []
            for k, r in enumerate(active):
                if len(generated[r]) >= limits[r]:
                    continue
                hits = torch.nonzero(out[k]).flatten()
                if len(hits) == 0:
                    continue
                tok = int(hits[0])
                generated[r].append(tok)
                keep.append(k)
                toks.append(tok)
            if not keep:
                break
            if len(keep) < len(active):  # rows that stopped leave the caches (a copy: only then)
                sel = torch.as_tensor(keep, device=self.device)
                state = [None if s is None else {k2: v[sel] for k2, v in s.items()} for s in state]
                active = [active[k] for k in keep]
                t = t[sel]
            t = t + 1
            last = self._step(state, torch.as_tensor(toks, device=self.device), t)
        return generated, prompt_bools

    def _prefill_state(self, collect: list, lengths: torch.Tensor, last_t: int) -> list:
        """Each layer's cache after the prompt: a uniform head's running sum, and for the local heads
        a ring of the last W values (position p in slot p mod W) with the value at BOS. W is the
        largest offset, or ``last_t`` + 1 when that is smaller (an offset beyond every position that
        generation reaches reads BOS: #[j == i - 2000000000] once made a buffer of 2*10^9 rows)."""
        state = []
        B = len(lengths)
        rows = torch.arange(B, device=self.device)
        for sub, v in zip(self.layers, collect):
            if v is None:
                state.append(None)
                continue
            s = {}
            if sub.uniform:
                cs = v[:, sub.uniform_ix].to(torch.float64).cumsum(dim=2)
                s["sum"] = cs[rows, :, lengths]  # sum over t' = 0..length: (B, n_uniform)
            if sub.local:
                W = min(max(sub.local_offsets), last_t + 1)
                vl = v[:, sub.local].transpose(1, 2)  # (B, T, n_local)
                # the prompt's last W positions p (those <= 0 read BOS, never the ring; when there are
                # such, every real p < W and has a slot of its own)
                p = (lengths[:, None] - torch.arange(W, device=self.device)[None, :]).clamp_min(0)
                ring = torch.zeros((B, W, len(sub.local)), dtype=v.dtype, device=self.device)
                ring[rows[:, None], p.remainder(W)] = vl[rows[:, None], p]
                s["ring"], s["bos"] = ring, vl[:, 0]
            state.append(s)
        return state

    def _step(self, state: list, toks: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Residual (B, d, 1) at new position t (per row) for new tokens; updates the caches."""
        x = self.embed_tokens(toks[:, None], (t - 1)[:, None])
        for sub, s in zip(self.layers, state):
            a = sub.attn
            if s is not None:
                v = a.W_V.apply(x)[:, :, 0]  # (B, H)
                parts = torch.zeros_like(v)
                if sub.uniform:
                    s["sum"] = s["sum"] + v[:, sub.uniform_ix].to(torch.float64)
                    parts[:, sub.uniform_ix] = (s["sum"] / (t.to(torch.float64) + 1)[:, None]).to(x.dtype)
                if sub.local:
                    # the ring holds positions t - W .. t - 1 (those > 0), slot p mod W; every offset
                    # d > W reaches no position > 0 by the last t (see _prefill_state)
                    ring = s["ring"]
                    W = ring.shape[1]
                    rows = torch.arange(len(t), device=t.device)
                    for j, d in enumerate(sub.local_offsets):
                        src = t - d
                        got = ring[rows, src.remainder(W), j]
                        parts[:, sub.local[j]] = torch.where(src <= 0, s["bos"][:, j], got)
                    ring[rows, t.remainder(W)] = v[:, sub.local]
                x = a.W_O.add_apply(x, parts[:, :, None])
            x = self.sign(sub, x)
            x = self.mlp(sub, x)
        return x


def _slice_or_index(ix: list[int]):
    if ix and ix == list(range(ix[0], ix[-1] + 1)):
        return slice(ix[0], ix[-1] + 1)
    return ix


#: inputs are run in groups of at most this many (padded) tokens
GROUP_TOKENS = 1 << 20


def length_groups(lengths: list[int], max_tokens: int = GROUP_TOKENS) -> list[list[int]]:
    """:func:`rasp.program.length_groups` with groups of at most ``max_tokens`` padded tokens."""
    return _length_groups(lengths, max_tokens)


def _sdpa_uniform(vu: torch.Tensor) -> torch.Tensor:
    """Causal uniform attention of the value columns ``vu`` (B, T, H) with fused SDPA kernels."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    B, T, H = vu.shape
    width = 8 if H <= 8 else 64
    G = -(-H // width)
    pad = G * width - H
    v = F.pad(vu, (0, pad)).reshape(B, T, G, width).permute(0, 2, 1, 3)  # (B, G, T, width)
    q = torch.zeros_like(v)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
        o = F.scaled_dot_product_attention(q, q, v, is_causal=True)
    return o.permute(0, 2, 1, 3).reshape(B, T, G * width)[..., :H]
