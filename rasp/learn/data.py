"""Turning task samples into training and test batches.

Every sequence starts with ``<bos>``; batches are right-padded with ``<pad>`` (all attention is
causal, so padding never changes a real position). The vocabulary is ``<pad> <bos>``, then the
task's special tokens, then its alphabet.

Where the loss goes (``loss_mask``) -- only on answer tokens:

- **generate** (retrieval, copying): the model reads ``<bos> tokens target`` with teacher forcing
  (input = the sequence without its last token) and is trained with cross-entropy to predict each
  target token from the position before it. Retrieval: one loss position (the query ``q`` predicts the
  answer). Copying: one per copied token (``<sep>`` predicts x1, the copy of x1 predicts x2, ...).
  The context tokens x1 .. xN carry no loss.
- **accept**: a single logit at the last position, binary cross-entropy against the label.
- **predict**: one logit per vocabulary symbol at every position, binary cross-entropy against the
  multi-hot set of allowed next symbols (multi-label); positions without a target set (``<bos>``
  when the task gives one set per token) carry no loss.

Accuracy is exact match of the whole answer. For generators it is the accuracy of greedy decoding
of ``len(target)`` tokens, computed with teacher forcing in one forward pass: greedy decoding
reproduces the target exactly iff the argmax at every answer position, given the correct prefix, is
the correct token (up to the first error both see the same prefix). ``greedy_generate`` does the
step-by-step decoding; a test checks that the two agree.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..ast import OUTPUT_KINDS

PAD, BOS = "<pad>", "<bos>"
KINDS = OUTPUT_KINDS


@dataclass(frozen=True)
class Vocab:
    tokens: tuple[str, ...]

    @classmethod
    def for_task(cls, task) -> "Vocab":
        seen: list[str] = [PAD, BOS]
        for t in list(task.special) + list(task.alphabet):
            if t not in seen:
                seen.append(t)
        return cls(tuple(seen))

    @property
    def index(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.tokens)}

    def encode(self, toks) -> list[int]:
        idx = self.index
        try:
            return [idx[t] for t in toks]
        except KeyError as exc:
            raise ValueError(f"token {exc.args[0]!r} is not in the task's vocabulary") from None

    def __len__(self) -> int:
        return len(self.tokens)


def n_outputs(kind: str, vocab: Vocab) -> int:
    return 1 if kind == "accept" else len(vocab)


@dataclass
class Encoded:
    """One sample as model input plus where (and what) the loss is."""
    ids: list[int]
    loss_pos: list[int]
    target: list          # generate: token id per loss position; accept: [0/1]; predict: list of id sets


def encode_sample(kind: str, vocab: Vocab, sample) -> Encoded:
    toks = list(sample.tokens)
    if kind == "generate":
        tgt = vocab.encode(sample.target)
        seq = [1] + vocab.encode(toks) + tgt
        start = len(toks)  # index of the last prompt token (<bos> is at 0)
        return Encoded(seq[:-1], list(range(start, start + len(tgt))), tgt)
    ids = [1] + vocab.encode(toks)
    if kind == "accept":
        return Encoded(ids, [len(ids) - 1], [1 if sample.target else 0])
    if kind == "predict":
        sets = [set(vocab.encode(s)) for s in sample.target]
        if len(sets) == len(ids):        # one set after <bos> and after every token
            pos = list(range(len(ids)))
        elif len(sets) == len(toks):     # one set after every token
            pos = list(range(1, len(ids)))
        else:
            raise ValueError(f"predictor target has {len(sets)} sets for {len(toks)} tokens")
        return Encoded(ids, pos, sets)
    raise ValueError(f"unknown task kind {kind!r}")


@dataclass
class Batch:
    ids: torch.Tensor        # (B, T) long, right-padded
    lengths: torch.Tensor    # (B,) real lengths
    loss_mask: torch.Tensor  # (B, T) bool: positions that carry loss / are scored
    labels: torch.Tensor     # generate: (B, T) long (-100 elsewhere); accept: (B, T, 1); predict: (B, T, V) float

    def to(self, device) -> "Batch":
        return Batch(self.ids.to(device), self.lengths.to(device), self.loss_mask.to(device), self.labels.to(device))


def collate(kind: str, vocab: Vocab, encoded: list[Encoded]) -> Batch:
    B, T = len(encoded), max(len(e.ids) for e in encoded)
    ids = torch.zeros(B, T, dtype=torch.long)
    mask = torch.zeros(B, T, dtype=torch.bool)
    if kind == "generate":
        labels = torch.full((B, T), -100, dtype=torch.long)
    else:
        labels = torch.zeros(B, T, n_outputs(kind, vocab))
    for b, e in enumerate(encoded):
        ids[b, : len(e.ids)] = torch.tensor(e.ids)
        mask[b, e.loss_pos] = True
        for p, t in zip(e.loss_pos, e.target):
            if kind == "generate":
                labels[b, p] = t
            elif kind == "accept":
                labels[b, p, 0] = float(t)
            else:
                labels[b, p, list(t)] = 1.0
    lengths = torch.tensor([len(e.ids) for e in encoded])
    return Batch(ids, lengths, mask, labels)


def loss_fn(kind: str, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Mean loss over the answer positions only."""
    m = batch.loss_mask
    if kind == "generate":
        return torch.nn.functional.cross_entropy(logits[m], batch.labels[m])
    return torch.nn.functional.binary_cross_entropy_with_logits(logits[m], batch.labels[m])


def correct(kind: str, logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    """(B,) bool: the whole answer of each sample is right (see the module docstring)."""
    m = batch.loss_mask
    if kind == "generate":
        ok_pos = logits.argmax(-1) == batch.labels
    elif kind == "accept":
        ok_pos = (logits[..., 0] > 0) == (batch.labels[..., 0] > 0.5)
    else:
        pred = logits[..., 2:] > 0           # never score <pad>/<bos>
        ok_pos = (pred == (batch.labels[..., 2:] > 0.5)).all(-1)
    return (ok_pos | ~m).all(-1)


def sample_lengths(rng: np.random.Generator, lo: int, hi: int, n: int) -> np.ndarray:
    return rng.integers(lo, hi + 1, size=n)


def clip_range(task, lo: int, hi: int) -> tuple[int, int] | None:
    """The part of [lo, hi] the task can sample, or None when it is empty."""
    lo = max(lo, task.min_length())
    mx = task.max_length()
    if mx is not None:
        hi = min(hi, mx)
    return (lo, hi) if lo <= hi else None


class AlphabetView:
    """A task whose sampler uses another data alphabet (``rasp learn --alphabet``); everything else is
    the task's. Only tasks with a variable alphabet allow it (``task.resolve_alphabet`` says why not)."""

    def __init__(self, task, alphabet):
        self.base = task  # the task itself (what does not depend on the alphabet: the copy direction)
        self.alphabet = task.resolve_alphabet(alphabet)

    def __getattr__(self, name):
        return getattr(self.base, name)

    def _own(self, alphabet):
        return self.alphabet if alphabet is None else alphabet

    def sample(self, rng, length, alphabet=None):
        return self.base.sample(rng, length, self._own(alphabet))

    def reference(self, tokens, alphabet=None):
        return self.base.reference(tokens, self._own(alphabet))

    def min_length(self, alphabet=None):
        return self.base.min_length(self._own(alphabet))

    def max_length(self, alphabet=None):
        return self.base.max_length(self._own(alphabet))


def make_samples(task, rng: np.random.Generator, lo: int, hi: int, n: int) -> list:
    return [task.sample(rng, int(L)) for L in sample_lengths(rng, lo, hi, n)]


@torch.no_grad()
def greedy_generate(model, vocab: Vocab, tokens, n_new: int, device="cpu") -> list[str]:
    """Step-by-step greedy decoding of ``n_new`` tokens after ``<bos> tokens`` (positions 0..)."""
    ids = [1] + vocab.encode(tokens)
    for _ in range(n_new):
        logits = model(torch.tensor([ids], device=device))
        ids.append(int(logits[0, -1].argmax()))
    return [vocab.tokens[i] for i in ids[len(tokens) + 1:]]
