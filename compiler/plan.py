"""Pass 2: operation graph -> layer plan.

Every node of the graph already has its **slot** (computed when it was created, by
:func:`compiler.graph.next_slot`): embedding features -1; layer l owns slots 3l (attention),
3l + 1 (sign) and 3l + 2 (MLP). A node sits in the earliest slot of its kind after all the nodes it
reads, so the plan is as-soon-as-possible and the number of layers is the length of the longest
chain of dependent operations. This pass groups the nodes of each slot into one sublayer:

* all heads of equal depth share the layer's attention sublayer (uniform heads first, then local);
* all sign groups of the layer share its sign sublayer;
* all gates of equal depth are **fused** into the layer's single MLP: their neurons are
  concatenated, and identical neurons (the same preactivation, e.g. the ``relu(real)`` pass-through
  of negated forms) are merged, their output coefficients added per written dimension.

It checks the invariant that every node reads only nodes of strictly earlier slots.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .graph import Graph

EMBED_KINDS = ("bos", "real", "token", "tokenset", "periodic")


@dataclass
class LayerPlan:
    heads: list[int] = field(default_factory=list)  # node ids: uniform heads, then local heads
    signs: list[int] = field(default_factory=list)
    gates: list[int] = field(default_factory=list)
    neurons: list[tuple] = field(default_factory=list)  # preactivation Lin per hidden neuron
    writes: list[tuple[int, int, object]] = field(default_factory=list)  # (gate node, neuron, coeff)


@dataclass
class Plan:
    graph: Graph
    embed: list[int]
    layers: list[LayerPlan]

    @property
    def n_heads(self) -> int:
        return sum(len(l.heads) for l in self.layers)

    @property
    def mlp_width(self) -> int:
        return max((len(l.neurons) for l in self.layers), default=0)

    @property
    def sign_width(self) -> int:
        return max((len(l.signs) for l in self.layers), default=0)


def plan_layers(graph: Graph) -> Plan:
    nodes = graph.nodes
    slots = [n.slot for n in nodes]
    n_layers = max(slots, default=-1) // 3 + 1
    layers = [LayerPlan() for _ in range(n_layers)]
    embed = []
    local: list[list[int]] = [[] for _ in range(n_layers)]
    for n in nodes:
        kind, slot = n.kind, n.slot
        if n.inputs and max(map(slots.__getitem__, n.inputs)) >= slot:
            i = next(i for i in n.inputs if slots[i] >= slot)
            raise AssertionError(f"node {n.id} ({n.label}) reads node {i} of a later or equal slot")
        if kind == "gate":
            layers[slot // 3].gates.append(n.id)
        elif kind == "uniform":
            layers[slot // 3].heads.append(n.id)
        elif kind == "sign":
            layers[slot // 3].signs.append(n.id)
        elif kind == "local":
            local[slot // 3].append(n.id)
        elif kind in EMBED_KINDS:
            embed.append(n.id)
        else:
            raise AssertionError(kind)
    for layer, loc in zip(layers, local):
        # uniform heads in node order (as appended), then local heads by offset (a stable sort)
        layer.heads.extend(sorted(loc, key=lambda i: nodes[i].params["offset"]))
        index: dict = {}
        for g in layer.gates:
            for pre, coeff in nodes[g].params["neurons"]:
                k = index.get(pre)
                if k is None:
                    k = index[pre] = len(layer.neurons)
                    layer.neurons.append(pre)
                layer.writes.append((g, k, coeff))
    return Plan(graph, embed, layers)
