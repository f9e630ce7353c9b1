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
  below by the dtype's smallest normal number, which matters only for y = 0, which the compiler
  never produces (every sign input is a half-integer over t + 1).
* **MLP**: ``W_2 relu(W_1 x)``.

Readout: ``W_U x > 1/2`` per position.

**Backends** (all the same function):

* ``dense``: the reference: explicit Q, K, V, the (n+1) x (n+1) logits with the positional term,
  softmax; for tests at small n;
* ``scan`` (CPU default): a uniform head is ``cumsum(v) / (t + 1)``, the causal uniform average,
  accumulated in float64 (exact for integer and half-integer values up to 2^53) and then cast to the
  model dtype; a local head is v shifted by d (BOS's value in front); O(n d) memory;
* ``sdpa`` (CUDA default for float32/bfloat16/float16): all uniform heads of a layer share one
  attention pattern (W_Q = W_K = 0), so they run as one ``scaled_dot_product_attention`` call with
  ``is_causal=True`` and the value dimensions side by side, restricted to the fused kernels (flash,
  memory-efficient) so no n x n matrix is built; local heads by shifting. float64 on CUDA uses
  ``scan`` (no fused kernel takes float64).

**Generation** keeps, per layer, the running float64 sum of each uniform head's value (its cache is
one number per head) and the last max(d) values of the local heads, so a new token costs one
position's worth of work.
"""
from __future__ import annotations

import warnings

import torch
from torch import nn
import torch.nn.functional as F

DTYPES = {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16,
          "float16": torch.float16}
BACKENDS = ("auto", "dense", "scan", "sdpa")


def resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_dtype(dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype is None:
        return torch.float32
    try:
        return DTYPES[str(dtype)]
    except KeyError:
        from rasp.errors import RaspError
        raise RaspError(f"unknown dtype {dtype!r}", hint="choose float64, float32 or bfloat16") from None


#: a product with at most this many dense entries is computed densely
DENSE_MAX = 1 << 16
#: ... and so is one whose sparse work (nnz times this factor) would exceed the dense work
SPARSE_FACTOR = 32
#: the gather path handles at most this many (row, nonzero) products at once
GATHER_CHUNK = 1 << 24


class SparseMatrix(nn.Module):
    """A weight tensor stored as coordinates (``indices``, (ndim, nnz) int64) and ``values``. Products
    are dense matmuls for small or dense tensors and gather/``index_add_`` otherwise (the same linear
    map; almost all entries of a compiled model are 0)."""

    def __init__(self, shape, indices: torch.Tensor, values: torch.Tensor) -> None:
        super().__init__()
        self.shape = tuple(int(x) for x in shape)
        self.register_buffer("indices", indices.to(torch.long).reshape(len(self.shape), -1))
        self.register_buffer("values", values)
        numel = 1
        for x in self.shape:
            numel *= x
        self.use_dense = numel <= DENSE_MAX or numel <= SPARSE_FACTOR * values.numel()
        self._dense = None
        self._rows = None

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

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ W.T`` for a matrix W of shape (out, in)."""
        out_dim = self.shape[0]
        if self.nnz == 0:
            return x.new_zeros(*x.shape[:-1], out_dim)
        if self.use_dense:
            return x @ self.dense().T
        return self._gather_into(x.new_zeros(*x.shape[:-1], out_dim), x)

    def add_apply(self, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``y + x @ W.T`` (in place on y when sparse)."""
        if self.nnz == 0:
            return y
        if self.use_dense:
            return y + x @ self.dense().T
        return self._gather_into(y, x)

    def _gather_into(self, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        rows, cols = self.indices
        X = x.reshape(-1, x.shape[-1])
        Y = y.reshape(-1, y.shape[-1])
        step = max(1, GATHER_CHUNK // self.nnz)
        for s in range(0, X.shape[0], step):
            Y[s:s + step].index_add_(1, rows, X[s:s + step, cols] * self.values)
        return Y.reshape(y.shape)

    def lookup(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows ``W[ids]`` as dense vectors (embedding lookup)."""
        if self.use_dense:
            return self.dense()[ids]
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
        flat = ids.reshape(-1)
        out = torch.zeros((flat.numel(), self.shape[1]), dtype=self.values.dtype, device=ids.device)
        out.scatter_add_(1, pc[flat], pv[flat])
        return out.reshape(*ids.shape, self.shape[1])


class _Mats(nn.Module):
    def __init__(self, mats: dict) -> None:
        super().__init__()
        for k, (shape, idx, vals) in mats.items():
            self.add_module(k, SparseMatrix(shape, idx, vals))


def _as_tensor(a, dtype=None):
    return a if isinstance(a, torch.Tensor) else torch.from_numpy(a)


class CompiledTransformer(nn.Module):
    """The compiled transformer. ``arch`` is the architecture dict of :mod:`compiler.weights`,
    ``tensors`` maps each weight name to ``(shape, indices, values)`` (coordinates, see
    :class:`SparseMatrix`)."""

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
            self.layers.append(sub)
        self.readout = _Mats({"W_U": tensors["readout.W_U"]})

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

    @property
    def n_parameters(self) -> int:
        """Dense parameter count (every entry of every weight matrix)."""
        total = 0
        for shape, _, _ in self.weights().values():
            n = 1
            for x in shape:
                n *= x
            total += n
        return total

    @property
    def n_nonzero(self) -> int:
        return sum(int((v != 0).sum()) for _, _, v in self.weights().values())

    def pick_backend(self, backend: str = "auto") -> str:
        if backend not in BACKENDS:
            from rasp.errors import RaspError
            raise RaspError(f"unknown backend {backend!r}", hint="choose " + ", ".join(BACKENDS))
        if backend != "auto":
            return backend
        if self.device.type == "cuda" and self.dtype != torch.float64:
            return "sdpa"
        return "scan"

    # ------------------------------------------------------------------ pieces
    def embed_tokens(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Embedding of token ids at input positions p (0-based; the BOS id gets no positional part)."""
        x = self.embed.token.lookup(ids)
        not_bos = (ids != self.arch["bos_id"]).unsqueeze(-1).to(x.dtype)
        for M in self.arch["periods"]:
            table = getattr(self.embed, f"periodic_{M}")
            x = x + table.lookup(torch.remainder(positions, M)) * not_bos
        return x

    def embed_sequence(self, ids: torch.Tensor) -> torch.Tensor:
        B, n = ids.shape
        bos = torch.full((B, 1), self.arch["bos_id"], dtype=torch.long, device=self.device)
        full = torch.cat([bos, ids.to(self.device)], dim=1)
        pos = torch.arange(-1, n, device=self.device).expand(B, n + 1)
        return self.embed_tokens(full, pos)

    @staticmethod
    def sign(sub, x: torch.Tensor) -> torch.Tensor:
        k = sub.sign.W_in.shape[0]
        if k == 0:
            return x
        y = sub.sign.W_in.apply(x)
        rms = y.abs().clamp_min(torch.finfo(y.dtype).tiny)  # rms of the mean-zero pair (y, -y)
        s = y / rms
        return sub.sign.W_out.add_apply(x, sub.sign.gamma.dense() * s + sub.sign.beta.dense())

    @staticmethod
    def mlp(sub, x: torch.Tensor) -> torch.Tensor:
        if sub.mlp.W_1.shape[0] == 0:
            return x
        return sub.mlp.W_2.add_apply(x, torch.relu(sub.mlp.W_1.apply(x)))

    def attention(self, sub, x: torch.Tensor, backend: str, collect: list | None = None) -> torch.Tensor:
        a = sub.attn
        if sub.n_heads == 0:
            if collect is not None:
                collect.append(None)
            return x
        v = a.W_V.apply(x)  # (B, T, H)
        if collect is not None:
            collect.append(v)
        if backend == "dense":
            return a.W_O.add_apply(x, self._attention_dense(sub, x, v))
        B, T, _ = x.shape
        parts = torch.zeros_like(v)
        if sub.uniform:
            vu = v[..., sub.uniform]
            if backend == "sdpa":
                parts[..., sub.uniform] = _sdpa_uniform(vu)
            else:
                denom = torch.arange(1, T + 1, device=x.device, dtype=torch.float64).unsqueeze(-1)
                parts[..., sub.uniform] = (vu.to(torch.float64).cumsum(dim=1) / denom).to(x.dtype)
        for d, idx in sub.local_groups:
            vl = v[..., idx]
            k = min(d, T)
            parts[..., idx] = torch.cat([vl[:, :1].expand(B, k, len(idx)), vl[:, : T - k]], dim=1)
        return a.W_O.add_apply(x, parts)

    def _attention_dense(self, sub, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """The reference: explicit logits with the positional term, softmax, weighted values."""
        a = sub.attn
        B, T, _ = x.shape
        q, k = a.W_Q.apply(x), a.W_K.apply(x)  # (B, T, H)
        H = v.shape[-1]
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
        logits = q.permute(0, 2, 1)[..., :, None] * k.permute(0, 2, 1)[..., None, :] + bias  # (B, H, T, T)
        probs = torch.softmax(logits, dim=-1)
        return (probs @ v.permute(0, 2, 1)[..., None]).squeeze(-1).permute(0, 2, 1)  # (B, T, H)

    # ------------------------------------------------------------------ forward
    def residual(self, ids: torch.Tensor, backend: str = "auto", collect: list | None = None) -> torch.Tensor:
        """The final residual stream (B, n + 1, d_model), BOS at index 0."""
        backend = self.pick_backend(backend)
        x = self.embed_sequence(ids)
        for sub in self.layers:
            x = self.attention(sub, x, backend, collect)
            x = self.sign(sub, x)
            x = self.mlp(sub, x)
        return x

    def forward(self, ids: torch.Tensor, backend: str = "auto") -> torch.Tensor:
        """Output bools (B, n, n_outputs) at every input position."""
        with torch.no_grad():
            x = self.residual(ids, backend)
            return self.readout.W_U.apply(x[:, 1:]) > 0.5

    # ------------------------------------------------------------------ generation
    @torch.no_grad()
    def generate(self, seqs: list[list[int]], limits: list[int], backend: str = "auto") -> list[list[int]]:
        """Greedy decoding: append the first output index whose bool holds at the last position
        (output k belongs to token id k), until none holds or ``limits[r]`` tokens were added."""
        backend = self.pick_backend(backend)
        B = len(seqs)
        # prefill in groups of similar length (padding a short prompt to a long one wastes memory)
        lasts, states, order = [], [], []
        for group in length_groups([len(s) for s in seqs]):
            n = max(len(seqs[r]) for r in group)
            ids = torch.zeros((len(group), n), dtype=torch.long, device=self.device)
            for k, r in enumerate(group):
                ids[k, : len(seqs[r])] = torch.as_tensor(seqs[r], dtype=torch.long)
            lengths = torch.as_tensor([len(seqs[r]) for r in group], device=self.device)
            collect: list = []
            x = self.residual(ids, backend, collect)
            lasts.append(x[torch.arange(len(group), device=self.device), lengths])  # last token: t = length
            states.append(self._prefill_state(collect, lengths))
            order += group
            del x, collect
        inv = torch.empty(B, dtype=torch.long, device=self.device)
        inv[torch.as_tensor(order, device=self.device)] = torch.arange(B, device=self.device)
        last = torch.cat(lasts)[inv]
        state = [None if parts[0] is None else {k: torch.cat([p[k] for p in parts])[inv] for k in parts[0]}
                 for parts in zip(*states)]
        lengths = torch.as_tensor([len(s) for s in seqs], device=self.device)
        generated: list[list[int]] = [[] for _ in seqs]
        active = list(range(B))
        t = lengths.clone()  # t of the last token of each (active) row
        while True:
            out = self.readout.W_U.apply(last) > 0.5  # (len(active), n_out)
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
            sel = torch.as_tensor(keep, device=self.device)
            state = [None if s is None else {k2: v[sel] for k2, v in s.items()} for s in state]
            active = [active[k] for k in keep]
            t = t[sel] + 1
            last = self._step(state, torch.as_tensor(toks, device=self.device), t)
        return generated

    def _prefill_state(self, collect: list, lengths: torch.Tensor) -> list:
        state = []
        B = len(lengths)
        rows = torch.arange(B, device=self.device)
        for sub, v in zip(self.layers, collect):
            if v is None:
                state.append(None)
                continue
            s = {}
            if sub.uniform:
                cs = v[..., sub.uniform].to(torch.float64).cumsum(dim=1)
                s["sum"] = cs[rows, lengths]  # sum over t' = 0..length
            if sub.local:
                D = max(sub.local_offsets)
                # buf[:, k] = value at t - k (k = 0..D-1), clamped to BOS for t - k <= 0
                pos = (lengths[:, None] - torch.arange(D, device=self.device)[None, :]).clamp_min(0)
                vl = v[..., sub.local]
                s["buf"] = vl[rows[:, None], pos]  # (B, D, n_local)
            state.append(s)
        return state

    def _step(self, state: list, toks: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Residual at new position t (per row) for new tokens; updates the caches in place."""
        x = self.embed_tokens(toks, t - 1)
        for sub, s in zip(self.layers, state):
            a = sub.attn
            if s is not None:
                v = a.W_V.apply(x)  # (B, H)
                parts = torch.zeros_like(v)
                if sub.uniform:
                    s["sum"] = s["sum"] + v[:, sub.uniform].to(torch.float64)
                    parts[:, sub.uniform] = (s["sum"] / (t.to(torch.float64) + 1)[:, None]).to(x.dtype)
                if sub.local:
                    # before the push buf[:, k] holds the value at (t - 1) - k, so t - d is buf[d - 1]
                    for j, d in enumerate(sub.local_offsets):
                        parts[:, sub.local[j]] = s["buf"][:, d - 1, j]
                    s["buf"] = torch.cat([v[:, sub.local][:, None], s["buf"][:, :-1]], dim=1)
                x = a.W_O.add_apply(x, parts)
            x = self.sign(sub, x)
            x = self.mlp(sub, x)
        return x


#: inputs are run in groups of at most this many (padded) tokens
GROUP_TOKENS = 1 << 20


def length_groups(lengths: list[int], max_tokens: int = GROUP_TOKENS) -> list[list[int]]:
    """Indices grouped for batching: sorted by length, each group within a factor 2 of its
    shortest length and at most ``max_tokens`` padded tokens (a single longer input is its own group)."""
    order = sorted(range(len(lengths)), key=lambda r: lengths[r])
    groups: list[list[int]] = []
    for r in order:
        g = groups[-1] if groups else None
        if g and lengths[r] <= 2 * max(1, lengths[g[0]]) and (len(g) + 1) * lengths[r] <= max_tokens:
            g.append(r)
        else:
            groups.append([r])
    return groups


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
