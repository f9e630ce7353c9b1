"""A small GPT-style causal transformer for learning tasks from scratch.

Pre-layer-norm blocks (attention + 4x GELU MLP), dropout 0, GPT-2 initialization (normal, std 0.02).
Positional information, chosen by ``positional``:

- ``ape``: learned absolute positional embeddings, one row per position up to ``n_pos`` (default);
- ``rope``: rotary embeddings on queries and keys (Su et al.), no learned position rows;
- ``nope``: no positional information at all (causal masking only).

``forward`` takes the token ids and, optionally, the position of every token (the training loop
shifts positions by a random offset so that every APE row up to the longest test length is
trained). With ``return_attn=True`` it also returns every layer's attention pattern
(batch, heads, query, key), which the mechanistic scores read.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F

POSITIONAL = ("ape", "rope", "nope")


@dataclass(frozen=True)
class ModelConfig:
    vocab: int          # input token ids 0 .. vocab-1
    n_out: int          # output logits per position
    n_pos: int          # positions 0 .. n_pos-1 (APE rows; RoPE/NoPE: only a sanity bound)
    layers: int = 2
    heads: int = 4
    dim: int = 64
    positional: str = "ape"

    def __post_init__(self):
        if self.positional not in POSITIONAL:
            raise ValueError(f"positional must be one of {POSITIONAL}, not {self.positional!r}")
        if self.dim % self.heads:
            raise ValueError(f"dim {self.dim} is not divisible by heads {self.heads}")
        if self.positional == "rope" and (self.dim // self.heads) % 2:
            raise ValueError("rope needs an even head dimension")

    def to_dict(self) -> dict:
        return asdict(self)


def _rope(x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """Rotate pairs of channels of x (B, H, T, Dh) by angles pos * theta_k (pos: (B, T))."""
    dh = x.shape[-1]
    inv = 1.0 / (10000 ** (torch.arange(0, dh, 2, device=x.device, dtype=torch.float32) / dh))
    ang = pos.to(torch.float32)[:, None, :, None] * inv  # (B, 1, T, Dh/2)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.heads, self.dh, self.rope = cfg.heads, cfg.dim // cfg.heads, cfg.positional == "rope"
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim)
        self.proj = nn.Linear(cfg.dim, cfg.dim)

    def forward(self, x, pos, return_attn: bool):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, self.dh).permute(2, 0, 3, 1, 4)
        if self.rope:
            q, k = _rope(q, pos), _rope(k, pos)
        if not return_attn:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            att = None
        else:
            logits = (q @ k.transpose(-2, -1)) / math.sqrt(self.dh)
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            att = logits.masked_fill(~mask, float("-inf")).softmax(-1)
            y = att @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, D)), att


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(cfg.dim), nn.LayerNorm(cfg.dim)
        self.attn = Attention(cfg)
        self.mlp = nn.Sequential(nn.Linear(cfg.dim, 4 * cfg.dim), nn.GELU(), nn.Linear(4 * cfg.dim, cfg.dim))

    def forward(self, x, pos, return_attn: bool):
        a, att = self.attn(self.ln1(x), pos, return_attn)
        x = x + a
        return x + self.mlp(self.ln2(x)), att


class GPT(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab, cfg.dim)
        self.pos = nn.Embedding(cfg.n_pos, cfg.dim) if cfg.positional == "ape" else None
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.n_out)
        self.apply(self._init)
        for name, p in self.named_parameters():  # GPT-2: scale residual projections by depth
            if name.endswith("proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.layers))

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx: torch.Tensor, positions: torch.Tensor | None = None, return_attn: bool = False):
        """idx: (B, T) token ids; positions: (B, T) position ids (default 0..T-1).

        Returns logits (B, T, n_out), and with ``return_attn`` also a list of (B, H, T, T) patterns.
        """
        B, T = idx.shape
        if positions is None:
            positions = torch.arange(T, device=idx.device).expand(B, T)
        if int(positions.max()) >= self.cfg.n_pos:
            raise ValueError(f"position {int(positions.max())} is beyond the model's {self.cfg.n_pos} positions")
        x = self.tok(idx)
        if self.pos is not None:
            x = x + self.pos(positions)
        atts = []
        for blk in self.blocks:
            x, att = blk(x, positions, return_attn)
            atts.append(att)
        logits = self.head(self.ln_f(x))
        return (logits, atts) if return_attn else logits
