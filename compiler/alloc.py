"""Pass 3: layer plan -> residual allocation.

Every node gets its own residual dimension, never reused, so every intermediate value can be read
off the final residual stream (``CompiledModel.residual``). Order: the embedding features (``bos``,
``real``, tokens in alphabet order, token sets, periodic predicates), then the nodes of each layer by slot
(heads, signs, gates). Each dimension carries a label (the program value) and its encoding:

* ``flag``: ``bos`` / ``real``;
* ``bool``: exactly 0 or 1 at real positions, 0 at BOS (tokens, token sets, periodic, local heads, signs,
  gates);
* ``frac``: a uniform head's output, ``(E + 1/2) / (t + 1)`` for an integer E (t = position + 1).
"""
from __future__ import annotations

from dataclasses import dataclass

from .plan import Plan

ENCODING = {"bos": "flag", "real": "flag", "token": "bool", "tokenset": "bool", "periodic": "bool", "local": "bool",
            "sign": "bool", "gate": "bool", "uniform": "frac"}


@dataclass
class Allocation:
    index: dict[int, int]  # node id -> residual dimension
    nodes: list[int]  # dimension -> node id
    labels: list[str]
    encodings: list[str]

    @property
    def d_model(self) -> int:
        return len(self.nodes)


def allocate(plan: Plan) -> Allocation:
    g = plan.graph
    symbols = {s: k for k, s in enumerate(g.symbols)}

    def embed_key(i):
        n = g.nodes[i]
        order = {"bos": 0, "real": 1, "token": 2, "tokenset": 3, "periodic": 4}[n.kind]
        if n.kind == "token":
            return (order, symbols.get(n.params["symbol"], 0), 0)
        if n.kind == "tokenset":
            return (order, tuple(symbols[s] for s in n.params["symbols"]), 0)
        if n.kind == "periodic":
            return (order, n.params["period"], n.params["residues"])
        return (order, 0, 0)

    order = sorted(plan.embed, key=embed_key)
    for layer in plan.layers:
        order += layer.heads + layer.signs + layer.gates
    labels, encodings = [], []
    for i in order:
        n = g.nodes[i]
        labels.append(n.label)
        encodings.append(ENCODING[n.kind])
    return Allocation({i: k for k, i in enumerate(order)}, order, labels, encodings)
