"""Graphs lifted from a few symbols (compiler/symmetry.py): which programs qualify, that the lifted
graph is the builder's graph up to node order, that what cannot be lifted is refused, and that a
lifted model agrees with the interpreter."""
from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

import rasp
from compiler import symmetry as S
from compiler.api import compile as compile_model
from compiler.graph import Node
from rasp.strategies import programs

ROOT = Path(__file__).resolve().parent.parent
#: the programs in programs/ whose graphs lift (every symmetric one but majority's)
LIFTED = ["copy_unique", "nlfirst", "nrfirst", "ub", "uf", "ul", "ur"]


def load(name: str) -> rasp.Program:
    path = ROOT / "programs" / f"{name}.rasp"
    return rasp.load(path)


def symbols(n: int) -> list[str]:
    return [f"s{i}" for i in range(n)]


def orbits(program: rasp.Program) -> S.Orbits | None:
    k = S.small_size(program)
    return S.analyze(S.graph_of(program.with_alphabet(S.placeholders(k))), k)


pytestmark = pytest.mark.usefixtures("one_thread")  # (tests/conftest.py)


# ----------------------------------------------------------------------------- which programs
@pytest.mark.parametrize("name, reason", [
    ("uf", None),
    ("majority", None),
    ("sort", "RANK compares symbols by their order"),
    ("tomita1", "ALLOWED names the data symbol '<eos>'"),
    ("raspl_ur", "it uses RASP-L primitives"),
])
def test_symmetric_programs_in_programs(name, reason):
    assert S.symmetric(load(name)) == reason


@pytest.mark.parametrize("text, reason", [
    ('alphabet a b\nF[x] = exists Q[x]\nG = any(x, F[x])\noutput accept G', None),
    ('alphabet a b\nspecial "#"\nG = exists "#" && all(x, !(exists Q[x]))\noutput accept G', None),
    ('alphabet a b\nF[x] = exists Q[x]\nG = F["a"]\noutput accept G', "G names the data symbol 'a'"),
    ('alphabet a b\nF[x] = any(y, y < x && exists Q[y])\nG = any(x, F[x])\noutput accept G',
     "F compares symbols by their order"),
    ('alphabet a b\nF[x] = any(y, y != x && exists Q[y])\nG = any(x, F[x])\noutput accept G', None),
    ('alphabet a b\nG = sum(x, 1) > 5\noutput accept G', "G sums over the alphabet"),
    ('#import pos_even\nalphabet a b\nG = any(x, exists (Q[x] && pos_even))\noutput accept G', None),
])
def test_symmetric_verdicts(text, reason):
    assert S.symmetric(rasp.parse(text)) == reason


# ----------------------------------------------------------------------------- instance tuples
@pytest.mark.parametrize("n, m", [(n, m) for n in (1, 2, 3, 5, 8) for m in range(4) if m <= n])
def test_permutations_rank_and_complements(n, m):
    # lift numbers a representative's instances in itertools.permutations order and finds a term's
    # node by rank: both must agree with the obvious enumeration, with leading axes too
    expected = list(itertools.permutations(range(n), m))
    rows = S.permutations(n, m)
    assert rows.shape == (len(expected), m) and [tuple(r) for r in rows.tolist()] == expected
    assert S.rank(rows, n).tolist() == list(range(len(expected)))
    assert S.rank(rows[None], n).tolist() == [list(range(len(expected)))]
    rest = S.complements(rows, n)
    assert [list(r) for r in rest.tolist()] == [[x for x in range(n) if x not in t] for t in expected]


@pytest.mark.parametrize("kind, params, inputs", [
    ("uniform", {"value": ()}, ()), ("sign", {"input": ()}, ()), ("local", {"offset": 1, "value": ()}, ()),
    ("gate", {"neurons": ()}, ()), ("gate", {"neurons": (((), 1),)}, ()),
    ("gate", {"neurons": (((), 1), (((1, 1),), -1))}, (1,)),  # (node 1, real, keeps its id when lifted)
])
def test_lift_keeps_empty_linear_forms(kind, params, inputs):
    # the builder makes no empty form today, but lift takes any node of these kinds: an extra node
    # of empty support with an empty form (or an empty neuron) is lifted as it is
    program = load("uf").with_alphabet(symbols(4))
    o = orbits(program)
    g = o.graph
    n = len(g.nodes)
    extra = dataclasses.replace(g, nodes=g.nodes + [Node(n, kind, "extra", 5, params, inputs, None)])
    lifted = S.lift(S.Orbits(extra, o.k, o.rep + [n], o.tup + [()]), program.with_alphabet(symbols(o.k + 3)))
    last = lifted.nodes[-1]
    assert (last.kind, last.params, last.inputs) == (kind, params, inputs)


# ----------------------------------------------------------------------------- lifted == built
@pytest.mark.parametrize("name", LIFTED)
@pytest.mark.parametrize("n", [6, 9, 13])
def test_lifted_graph_is_the_builders(name, n):
    program = load(name).with_alphabet(symbols(n))
    o = orbits(program)
    assert o is not None
    lifted = S.lift(o, program)
    built = S.graph_of(program)
    assert lifted is not None and lifted.lifted_from == o.k
    assert len(lifted.nodes) == len(built.nodes)
    assert S.same_graph(lifted, built)
    assert [node.id for node in lifted.nodes] == list(range(len(lifted.nodes)))
    assert all(node.inputs == read_by_parameters(node) for node in lifted.nodes)


def test_lift_program_checks_and_lifts():
    program = load("uf").with_alphabet(symbols(40))  # 1,640 definitions: over LIFT_DEFINITIONS
    g = S.lift_program(program)
    assert g is not None and g.lifted_from == S.small_size(program)
    assert S.same_graph(g, S.graph_of(program))
    # below the threshold (or not symmetric) the builder builds it
    assert S.lift_program(load("uf").with_alphabet(symbols(8))) is None
    assert S.lift_program(load("sort").with_alphabet(symbols(40))) is None


def test_same_graph_tells_graphs_apart():
    g = S.graph_of(load("uf").with_alphabet(symbols(7)))
    assert S.same_graph(g, g)
    gate = next(n for n in g.nodes if n.kind == "gate" and len(n.params["neurons"]) > 1)
    (pre, c), *rest = gate.params["neurons"]

    def changed(node, **params):
        nodes = [dataclasses.replace(node, params={**node.params, **params}) if m is node else m
                 for m in g.nodes]
        return dataclasses.replace(g, nodes=nodes)

    assert not S.same_graph(g, changed(gate, neurons=((pre, c + 1), *rest)))  # a coefficient
    assert not S.same_graph(g, changed(gate, neurons=tuple(rest)))  # a neuron less
    sign = next(n for n in g.nodes if n.kind == "sign")
    (b, v), *terms = sign.params["input"]
    assert not S.same_graph(g, changed(sign, input=((b, v - 1), *terms)))  # a threshold
    tok = next(n for n in g.nodes if n.kind == "token" and n.params["symbol"] == "s0")
    assert not S.same_graph(g, changed(tok, symbol="s1"))  # a symbol (two nodes of one key)
    slot = [dataclasses.replace(n, slot=n.slot + 3) if n is gate else n for n in g.nodes]
    assert not S.same_graph(g, dataclasses.replace(g, nodes=slot))
    name, (i, neg) = g.outputs[0]
    assert not S.same_graph(g, dataclasses.replace(g, outputs=[(name, (i, not neg)), *g.outputs[1:]]))
    assert not S.same_graph(g, dataclasses.replace(g, outputs=g.outputs[1:] + g.outputs[:1]))
    defs = dict(g.definitions)
    some = next(d for d, how in defs.items() if " node " in how)
    defs[some] = "bool: node 2"
    assert not S.same_graph(g, dataclasses.replace(g, definitions=defs))


def read_by_parameters(n) -> tuple:
    """The nodes a node's parameters read, in id order, each once."""
    lins = {"local": ["value"], "uniform": ["value"], "sign": ["input"]}.get(n.kind, [])
    read = {i for key in lins for i, _ in n.params[key]}
    if n.kind == "gate":
        read = {i for pre, _ in n.params["neurons"] for i, _ in pre}
    return tuple(sorted(read))


def test_builder_inputs_are_the_nodes_its_parameters_read():
    # the lifting writes a node's inputs from its renamed parameters (what plan and _live_nodes
    # read); same_graph compares parameters, so test_lifted_graph_is_the_builders checks the lifted
    # inputs this way
    for path in sorted((ROOT / "programs").iterdir()):
        program = rasp.load(path)
        if S.symmetric(program) is not None:
            continue
        for n in S.graph_of(program.with_alphabet(symbols(4))).nodes:
            assert n.inputs == read_by_parameters(n), (path.name, n)


# ----------------------------------------------------------------------------- refused
def test_node_symmetric_in_two_symbols_is_not_lifted():
    # the token set {x, y} of P[x, y] is P[y, x]'s: fixed by swapping x and y
    program = rasp.parse('alphabet a b c\nspecial "#"\nP[x, y] = exists (Q[x] || Q[y])\n'
                         'NEXT[y] = "#" && any(x, Q[x] && P[x, y])\noutput generate NEXT')
    assert S.symmetric(program) is None
    assert orbits(program) is None


def test_graph_not_closed_under_renaming_is_not_lifted():
    # majority: [#a - #b >= 0] and [#b - #a >= 0] are one head and its negation (by node order)
    assert S.symmetric(load("majority")) is None
    assert orbits(load("majority")) is None


def test_sum_over_an_orbit_is_not_lifted():
    # one neuron reading exists Q[x] for every x: its bias counts them
    program = rasp.parse('alphabet a b c\nspecial "#"\nP0 = all(x, exists Q[x])\noutput accept P0')
    assert S.symmetric(program) is None
    o = orbits(program)
    assert o is not None
    assert S.lift(o, program.with_alphabet(symbols(o.k + 3))) is None


def test_order_dependent_or_chain_is_not_lifted():
    # the builder groups the operands of this any(x, ...) by their order: not closed under renaming
    program = rasp.parse('alphabet a b c\nspecial "#"\nF[x] = exists Q[x]\n'
                         'G = any(x, F[x] && exists[j == i - 1] Q[x])\noutput accept G')
    assert S.symmetric(program) is None
    assert orbits(program) is None


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(programs(alphabet=("a", "b", "c"), special=("#",), fragment="C-RASP[periodic,local]", max_depth=3,
                max_size=24, max_defs=5))
def test_lifted_equals_built_on_random_symmetric_programs(program):
    assume(S.symmetric(program) is None)
    o = orbits(program)
    assume(o is not None)
    for n in (o.k + 1, o.k + 3):
        big = program.with_alphabet(symbols(n))
        lifted = S.lift(o, big)
        assert lifted is None or S.same_graph(lifted, S.graph_of(big)), n


# ----------------------------------------------------------------------------- the compiled model
def test_lifted_model_agrees_with_the_interpreter(monkeypatch):
    program = load("uf").with_alphabet(symbols(40))
    model = compile_model(program)
    assert model.config["lifted_from"] == S.small_size(program)
    import compiler.api
    monkeypatch.setattr(compiler.api, "lift_program", lambda p: None)
    built = compile_model(program)
    assert built.config["lifted_from"] is None
    assert built.size == model.size  # layers, heads, d_model, MLP width, parameters, nonzeros
    rng = np.random.default_rng(0)
    for n in (5, 30, 39):
        for _ in range(3):
            prompt = [str(s) for s in rng.permutation(symbols(40))[:n]] + ["<sep>"]
            assert model.run(prompt, dtype="float32") == program.run(prompt)


def test_compile_json_says_whether_the_graph_was_lifted(capsys):
    import json

    from rasp.cli import main

    assert main(["compile", str(ROOT / "programs" / "ur.rasp"), "--json"]) == 0  # 729 definitions
    assert json.loads(capsys.readouterr().out)["lifted_from"] == 5
    assert main(["compile", str(ROOT / "programs" / "ur.rasp"), "--alphabet", "a,b,c,d", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["lifted_from"] is None


# ----------------------------------------------------------------------------- more shapes (review 93)
REST = 'alphabet a b c\nspecial "#"\nOTHERS[x] = #(any(y, y != x && Q[y])) > #Q[x]\nG = any(x, Q[x] && OTHERS[x])\noutput accept G'
LOCAL2 = ('alphabet a b c\nspecial "#"\nP1[x] = exists[j == i - 1] Q[x]\nP2[x] = exists[j == i - 2] Q[x]\n'
          'NEXT[y] = "#" && any(x, Q[x] && P1[x] && P2[y])\noutput generate NEXT')
PREDICT = ('#import pos_even\nalphabet a b c\nP[x] = exists[j == i - 1] Q[x]\n'
           'NEXT[y] = pos_even && any(x, Q[x] && P[y])\noutput predict NEXT')


@pytest.mark.parametrize("text", [REST, LOCAL2, PREDICT])
def test_token_sets_offsets_and_predict_lift(text, monkeypatch):
    program = rasp.parse(text)
    o = orbits(program)
    assert o is not None
    for n in (o.k + 1, o.k + 4):
        big = program.with_alphabet(symbols(n))
        lifted = S.lift(o, big)
        assert lifted is not None and S.same_graph(lifted, S.graph_of(big)), n
    monkeypatch.setattr(S, "LIFT_DEFINITIONS", 0)  # lift these small programs too
    big = program.with_alphabet(symbols(o.k + 4))
    model = compile_model(big)
    assert model.config["lifted_from"] == o.k
    rng = np.random.default_rng(1)
    for _ in range(20):
        w = [str(x) for x in rng.choice(symbols(o.k + 4) + (["#"] if 'special "#"' in text else []), 12)]
        assert model.run(w, dtype="float32") == big.run(w)


def test_symbols_that_instance_names_quote_are_not_lifted():
    program = load("uf").with_alphabet([f"x,{i}" for i in range(40)])
    assert S.lift_program(program) is None  # (NEXT["x,0"]: the builder's names)
    braces = load("uf").with_alphabet([f"{{{i}}}" for i in range(40)])
    g = S.lift_program(braces)
    assert g is not None and S.same_graph(g, S.graph_of(braces))
    assert [n.label for n in g.nodes if n.kind == "token"][:2] == ['"<sep>"', '"{0}"']


def test_a_lift_unequal_to_the_builders_graph_at_k_plus_1_is_refused(monkeypatch):
    program = load("uf").with_alphabet(symbols(40))
    real = S.lift

    def off_by_one(o, p):  # the lift with one output negated
        g = real(o, p)
        name, (i, neg) = g.outputs[0]
        return dataclasses.replace(g, outputs=[(name, (i, not neg)), *g.outputs[1:]])

    monkeypatch.setattr(S, "lift", off_by_one)
    assert S.lift_program(program) is None


def _uf_next_changed(change):
    """The orbits of uf's small graph with each per-x neuron of NEXT[y] (bos, real, Q[x], CTX,
    BIGRAM[x, y]'s sign) changed by ``change(pre, token ids)``, in every gate alike (still closed)."""
    program = load("uf")
    k = S.small_size(program)
    g = S.graph_of(program.with_alphabet(S.placeholders(k)))
    tokens = {n.params["symbol"]: n.id for n in g.nodes if n.kind == "token"}
    nodes = []
    for n in g.nodes:
        if n.kind == "gate" and n.label.startswith("NEXT["):
            neurons = tuple((change(pre, tokens) if len(pre) == 5 else pre, v) for pre, v in n.params["neurons"])
            n = dataclasses.replace(n, params={"neurons": neurons})
            n = dataclasses.replace(n, inputs=read_by_parameters(n))
        nodes.append(n)
    o = S.analyze(dataclasses.replace(g, nodes=nodes), k)
    assert o is not None
    return o, program.with_alphabet(symbols(k + 3))


def test_neuron_orbit_lifts_only_when_gated_by_its_token():
    o, big = _uf_next_changed(lambda pre, tokens: pre)
    assert S.lift(o, big) is not None
    placeholders = set(S.placeholders(o.k))
    # without its Q[x]
    o, big = _uf_next_changed(lambda pre, tokens: tuple(
        (i, c) for i, c in pre if i not in {tokens[s] for s in placeholders}))
    assert S.lift(o, big) is None
    # with its Q[x] but on without it: bias one higher, and reading -1 * "<sep>"
    o, big = _uf_next_changed(lambda pre, tokens: tuple(sorted(
        [(i, c + 1 if i == 1 else c) for i, c in pre] + [(tokens["<sep>"], -1)])))
    assert S.lift(o, big) is None
