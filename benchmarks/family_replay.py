"""An experiment on the graph pass, kept so that its figures can be reproduced (docs/compiler.md,
"What the 0.1 s target needs at 150 symbols", point 3): family instances built as images of a
representative instance under a renaming of the symbols, instead of by the builder.

The first instance of each family and equality pattern of its symbols (``BIGRAM[a,b]`` with a != b,
``BIGRAM[a,a]``) is built as usual and becomes the representative; for every later instance the
expanded definition is checked to be the representative's under the renaming sigma (references to
other definitions followed, with a memo), and the representative's nodes whose tokens sigma moves
are re-keyed (token nodes renamed, the node ids inside keys mapped, each key looked up or made, in
the order they were made). Nodes compute what their keys say, so the result is exact whatever the
builder decided; the graphs are also the same as the builder's node for node. It was not faster
(1,586M against 1,405M instructions per graph of ``uf.rasp`` over 60 symbols), so the compiler does
not use it.

    python benchmarks/family_replay.py programs/uf.rasp --symbols 60 --repeats 3

prints the build time of both graphs (alternating), how many instances were replayed, and whether the
two graphs are the same (kind, label, parameters, inputs, slot and origin of every node, in order).
"""
from __future__ import annotations

import argparse
import gc
import re
import time
from pathlib import Path
import sys

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import rasp  # noqa: E402
from rasp import ast as A  # noqa: E402
from rasp import raspl  # noqa: E402
from rasp.expand import instance_key  # noqa: E402
from rasp.printer import expr_to_str  # noqa: E402
from rasp.rewrite import only_local_counts, rewrite_core  # noqa: E402
from compiler import boolean as B  # noqa: E402
from compiler import graph as G  # noqa: E402
from compiler.graph import _Builder, _const_text, _lin_text  # noqa: E402

_INST = re.compile(r"^([^\[\]\"]+)\[([^\"\[\]]*)\]$")


def parse(name):
    """(family, symbols) of an instance's core name (``rasp.expand.instance_key``); None for a plain
    definition and for names with quoted symbols (this experiment leaves those to the builder)."""
    m = _INST.match(name)
    if not m:
        return None
    return m.group(1), tuple(m.group(2).split(","))


def pattern(args):
    first = {}
    return tuple(first.setdefault(a, len(first)) for a in args)


class Rep:
    """A representative instance: its expansion and form, the definitions built while it was, the
    nodes it reads that depend on a token (by id, in the order they were made), and its record."""

    __slots__ = ("name", "args", "expr", "form", "closure", "ok", "fails", "hits", "nested")


class ReplayBuilder(_Builder):
    def __init__(self, core):
        super().__init__(core)
        self.inst = {}
        for d in core.defs:
            p = parse(d.name)
            if p is not None:
                self.inst[d.name] = p
        self.reps = {}
        self.gate_form = {}
        self.sign_hint = {}
        self.supp = {}
        self.def_supp = {}
        self.sub_syms = {}
        self.checked = {}

    # recording
    def materialize(self, f):
        lit = super().materialize(f)
        if lit[0] not in self.gate_form and self.nodes[lit[0]].kind == "gate":
            self.gate_form[lit[0]] = f
        return lit

    def sign_lit(self, F, off, hint, ftext):
        lit = super().sign_lit(F, off, hint, ftext)
        if lit[0] > 1 and lit[0] not in self.sign_hint:
            self.sign_hint[lit[0]] = hint
        return lit

    def node_supp(self, n):
        s = self.supp.get(n)
        if s is None:
            node = self.nodes[n]
            if node.kind == "token":
                s = frozenset((node.params["symbol"],))
            else:
                s = frozenset()
                for x in node.inputs:
                    s = s | self.node_supp(x)
            self.supp[n] = s
        return s

    def def_form(self, name):
        f = self.def_forms.get(name)
        if f is not None:
            return f
        inst = self.inst.get(name)
        if inst is None:
            return super().def_form(name)
        fam, args = inst
        key = (fam, pattern(args))
        rep = self.reps.get(key)
        if rep is not None and rep.ok and rep.fails < 8 + 4 * rep.hits:
            f = self.replay(rep, name, args)
            if f is not None:
                rep.hits += 1
                self.def_forms[name] = f
                self.form_names.setdefault(f, name)
                return f
            rep.fails += 1
        n0 = len(self.nodes)
        before = set(self.def_forms) if rep is None else None
        f = super().def_form(name)
        if rep is None:
            rep = Rep()
            rep.name, rep.args, rep.expr, rep.form = name, args, self.defs[name].expr, f
            rep.fails = rep.hits = 0
            rep.nested = [(d, self.def_forms[d]) for d in self.def_forms if d not in before and d != name]
            seen = set()
            stack = [l[0] for g in [f] + [g for _, g in rep.nested] for t in g.terms for l, _ in t.lits]
            stack.extend(range(n0, len(self.nodes)))
            while stack:
                n = stack.pop()
                if n in seen:
                    continue
                seen.add(n)
                stack.extend(self.nodes[n].inputs)
            rep.closure = sorted(n for n in seen if self.node_supp(n))
            rep.ok = all(self.nodes[n].kind in ("token", "local", "uniform", "sign")
                         or (self.nodes[n].kind == "gate" and n in self.gate_form) for n in rep.closure)
            self.reps[key] = rep
        return f

    # checks
    def dsupp(self, name):
        s = self.def_supp.get(name)
        if s is None:
            self.def_supp[name] = frozenset()  # (no cycles in a core program)
            s = self.def_supp[name] = self.esupp(self.defs[name].expr)
        return s

    def esupp(self, e):
        h = self.sub_syms.get(id(e))
        if h is not None:
            return h[1]
        k = type(e)
        if k is A.Tok:
            s = frozenset((e.symbol.value,))
        elif k is A.Ref:
            s = self.dsupp(e.name)
        else:
            s = frozenset()
            for c in A.children(e):
                s = s | self.esupp(c)
        self.sub_syms[id(e)] = (e, s)
        return s

    def same(self, a, b, sig, moved, corr):
        if a is b:
            return self.esupp(a).isdisjoint(moved)
        k = type(a)
        if k is not type(b):
            return False
        if k is A.Tok:
            v = a.symbol.value
            return sig.get(v, v) == b.symbol.value
        if k is A.Ref:
            if a.name == b.name:
                return self.dsupp(a.name).isdisjoint(moved)
            pa, pb = self.inst.get(a.name), self.inst.get(b.name)
            if pa is None or pb is None or pa[0] != pb[0]:
                return False
            if tuple(sig.get(s, s) for s in pa[1]) != pb[1]:
                return False
            sup = self.dsupp(a.name)
            key = (a.name, b.name, tuple(sorted((u, sig.get(u, u)) for u in sup)))
            hit = self.checked.get(key)
            if hit is None:
                hit = self.checked[key] = self.same(self.defs[a.name].expr, self.defs[b.name].expr, sig, moved, corr)
            return hit
        if k is A.And or k is A.Or or k is A.Add or k is A.Sub or k is A.Min or k is A.Max:
            return self.same(a.left, b.left, sig, moved, corr) and self.same(a.right, b.right, sig, moved, corr)
        if k is A.Compare:
            corr[id(a)] = b
            return a.op == b.op and self.same(a.left, b.left, sig, moved, corr) and self.same(a.right, b.right, sig, moved, corr)
        if k is A.Count:
            return a.guard == b.guard and self.same(a.body, b.body, sig, moved, corr)
        if k is A.Not:
            return self.same(a.operand, b.operand, sig, moved, corr)
        if k is A.IntConst or k is A.BoolConst:
            return a.value == b.value
        if k is A.Cond:
            return all(self.same(x, y, sig, moved, corr) for x, y in ((a.test, b.test), (a.then, b.then), (a.other, b.other)))
        if k is A.Scale:
            return a.k == b.k and self.same(a.operand, b.operand, sig, moved, corr)
        if k is A.PosPred:
            return a == b
        return False

    def map_origin(self, o, rep, name, sig):
        if o == rep.name:
            return name
        pi = self.inst.get(o)
        if pi is not None:
            return instance_key(pi[0], tuple(sig.get(s, s) for s in pi[1]))
        return o

    def replay(self, rep, name, args):
        sig = {}
        for s, t in zip(rep.args, args):
            sig[s] = t
        dom, img = set(sig), set(sig.values())
        for s, t in zip(sorted(img - dom), sorted(dom - img)):
            sig[s] = t
        moved = frozenset(s for s, t in sig.items() if s != t)
        corr = {}
        if not self.same(rep.expr, self.defs[name].expr, sig, moved, corr):
            return None
        m = {}
        mp = m.get
        nodes = self.nodes
        keys = self.keys
        supp = self.supp
        saved = self.origin
        for n in rep.closure:
            if supp[n].isdisjoint(moved):
                continue
            node = nodes[n]
            k = node.kind
            if k == "token":
                m[n] = self.token(sig[node.params["symbol"]]).id
                continue
            if k == "gate":
                fr = self.gate_form[n]
                f = map_form(fr, mp)
                hit = self.materialized.get(f)
                if hit is not None:
                    m[n] = hit[0]
                    continue
                nm = self.form_names.get(fr)
                pi = self.inst.get(nm) if nm is not None else None
                if pi is not None:
                    self.form_names.setdefault(f, instance_key(pi[0], tuple(sig.get(s, s) for s in pi[1])))
                self.origin = self.map_origin(node.origin, rep, name, sig)
                m[n] = self.materialize(f)[0]
                continue
            if k == "uniform":
                v = node.params["value"]
                vlin = (v[0], *sorted((mp(x, x), c) for x, c in v[1:]))
                key = ("uniform", vlin)
            elif k == "sign":
                y0, (h, one) = node.params["input"]
                y = (y0, (mp(h, h), one))
                key = ("sign", y)
            else:  # local
                d = node.params["offset"]
                value = tuple(sorted((mp(x, x), c) for x, c in node.params["value"]))
                key = ("local", d, value)
            hit = keys.get(key)
            if hit is not None:
                m[n] = hit
                continue
            self.origin = self.map_origin(node.origin, rep, name, sig)
            if k == "uniform":
                new = self._node("uniform", key,
                                 lambda: f"({_lin_text(dict(vlin[1:]), nodes)}{_const_text(vlin[0][1])})/(i+1)",
                                 {"value": vlin}, [x for x, _ in vlin])
            elif k == "sign":
                hint = self.sign_hint.get(n)
                hb = corr.get(id(hint)) if hint is not None else None
                hv = nodes[y[1][0]].params["value"]

                def lab(hb=hb, hv=hv):
                    if hb is not None:
                        return expr_to_str(hb)
                    return f"{_lin_text(dict(hv[1:]), nodes)}{_const_text(hv[0][1] - 0.5)} >= 0"
                new = self._node("sign", key, lab, {"input": y}, [y[1][0], B.BOS])
                self.sign_hint.setdefault(new.id, hb)
            else:
                lit = (value[0][0], False) if len(value) == 1 else (value[1][0], True)
                new = self._node("local", key, lambda: f"{self.lit_name(lit)} at i-{d}",
                                 {"offset": d, "value": value}, [x for x, _ in value])
            m[n] = new.id
        self.origin = saved
        for d, g in rep.nested:
            pi = self.inst.get(d)
            if pi is None:
                continue
            di = instance_key(pi[0], tuple(sig.get(s, s) for s in pi[1]))
            if di != d and di in self.defs and di not in self.def_forms:
                g2 = self.def_forms[di] = map_form(g, mp)
                self.form_names.setdefault(g2, di)
        return map_form(rep.form, mp)


def map_thr(t, mp):
    lits = tuple(sorted(((mp(n, n), neg), w) for (n, neg), w in t.lits))
    return B.Thr(lits, t.theta)


def map_form(f, mp):
    return B.Form(tuple(map_thr(t, mp) for t in f.terms), f.neg)


def _fields(n) -> tuple:
    return (n.kind, n.label, n.params, n.inputs, n.slot, n.origin)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("program")
    ap.add_argument("--symbols", type=int, default=0, help="re-expand over this many symbols (0: the program's)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    p = rasp.load(args.program)
    if args.symbols:
        p = p.with_alphabet([str(k) for k in range(args.symbols)])
    if raspl.uses_raspl(p):
        lowered, why = raspl.lower_explained(p)
        if lowered is None:
            sys.exit(f"{args.program} does not lower to C-RASP ({why.message}); its model is bounded, "
                     "which this experiment leaves out")
        p = lowered
    normal = only_local_counts(p.module)
    core = p.core if normal else rewrite_core(p.core)
    made: list = []

    class Counted(ReplayBuilder):
        def __init__(self, c) -> None:
            super().__init__(c)
            made.append(self)

    gc.disable()
    graphs = {}
    for _ in range(args.repeats):
        for name, cls in (("builder", _Builder), ("replay", Counted)):
            G._Builder = cls
            try:
                t = time.perf_counter()
                graphs[name] = G.build_graph(core, normal=normal)
                dt = time.perf_counter() - t
            finally:
                G._Builder = _Builder
            print(f"{name:8s} {dt:7.3f} s  {len(graphs[name].nodes):,} nodes")
    hits = sum(r.hits for r in made[-1].reps.values())
    print(f"instances replayed: {hits:,} of {sum(1 for d in core.defs if d.name in made[-1].inst):,}")
    a, b = graphs["builder"], graphs["replay"]
    same = (len(a.nodes) == len(b.nodes) and all(_fields(x) == _fields(y) for x, y in zip(a.nodes, b.nodes))
            and a.outputs == b.outputs)
    print("the same graph, node for node:", same)


if __name__ == "__main__":
    main()
