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

EMBED_KINDS = ("bos", "real", "token", "periodic")


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
    for n in nodes:
        if n.inputs and max(map(slots.__getitem__, n.inputs)) >= n.slot:
            i = next(i for i in n.inputs if slots[i] >= n.slot)
            raise AssertionError(f"node {n.id} ({n.label}) reads node {i} of a later or equal slot")
    n_layers = max((n.slot // 3 + 1 for n in nodes if n.slot >= 0), default=0)
    layers = [LayerPlan() for _ in range(n_layers)]
    embed = []
    for n in nodes:
        if n.kind in EMBED_KINDS:
            embed.append(n.id)
            continue
        layer = layers[n.slot // 3]
        if n.kind in ("uniform", "local"):
            layer.heads.append(n.id)
        elif n.kind == "sign":
            layer.signs.append(n.id)
        elif n.kind == "gate":
            layer.gates.append(n.id)
        else:
            raise AssertionError(n.kind)
    for layer in layers:
        layer.heads.sort(key=lambda i: (nodes[i].kind != "uniform", nodes[i].params.get("offset", 0), i))
        index: dict = {}
        for g in layer.gates:
            for pre, coeff in nodes[g].params["neurons"]:
                if pre not in index:
                    index[pre] = len(layer.neurons)
                    layer.neurons.append(pre)
                layer.writes.append((g, index[pre], coeff))
    return Plan(graph, embed, layers)
