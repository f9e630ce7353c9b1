"""Which length-generalizing class a program lies in, why, and what the theory then promises.

``check(program) -> Verdict`` decides the **smallest fragment** containing the program:

=========================  ==============  ==============================================
fragment                   guarantee       positional operations after rewriting
=========================  ==============  ==============================================
``C-RASP``                 guaranteed      none (the NoPE setting)
``C-RASP[local]``          guaranteed      counts ``#[j == i - d] P`` with d >= 1
``C-RASP[periodic]``       guaranteed      periodic ``pos[...]`` (period >= 2)
``C-RASP[periodic,local]`` guaranteed      both
``none``                   none            a relation that is not (window, period)-regular
=========================  ==============  ==============================================

"guaranteed" is Huang et al. 2025 (arXiv 2410.02140), Theorem 7: a Limit Transformer with periodic
and local positional terms computes every C-RASP[periodic,local] program, and the idealized learner
(fit all inputs up to length n, minimize the regularizer) is correct at **all** lengths once n is
large enough. No bound on that n is printed: none is computable in general (theory.md, Bounds).

**Semantic, not syntactic.** Each guard and positional predicate is analysed exactly by
:mod:`rasp.guards` and rewritten by :mod:`rasp.rewrite` into the normal form (counts ``#P`` and
``#[j == i - d] P``, periodic ``pos[i % M == r]``, branches over ``i % M``) with the *minimal* window
and period. The fragment is read off the rewritten program, so ``#[j == i - 1]``, ``#[i - j == 1]``
and ``#[j + 1 == i]`` are one local relation, ``#[j <= i - 2] P`` is ``#P - #[j == i] P -
#[j == i - 1] P`` (local), ``#[(i - j) % 2 == 0]`` is a periodic case split, and ``#[true]``,
``#[j <= i]``, ``#[j >= 0]`` are plain counts. The rewritten program is the proof of membership
(``rasp check --explain`` prints it; the tests check it evaluates identically).

**Offset 0.** ``#[j == i] P`` counts only position i itself: it is ``1 if P else 0``, a C-RASP
conditional with constants that reads no positional information. It therefore does **not** make a
program local; the verdict reports such counts separately (``self_counts``), and ``local_offsets``
lists only d >= 1.

**Depth** is the nesting of counting operations in the rewritten core program: a leaf has depth 0,
``#[g] P`` has depth 1 + depth(P) (except ``#[j == i] P``, which is ``1 if P else 0`` and adds no
level), every other operation the maximum over its operands, and a
reference the depth of the definition it names (so depth propagates through definitions). The
program's depth is the maximum over all its definitions. Positional predicates and guards add
nothing. **counts** is the number of counting operations (count nodes) in the rewritten core
program, after families are expanded.

**Absolute positions.** A comparison of one position with constants that is periodic from some
position on is plain C-RASP written with ``#true`` (:func:`rasp.rewrite.absolute_predicate`):
``pos[i <= 5]`` is ``#true <= 6``, ``#[j <= 2] P`` is ``#(P && #true <= 3)``, and such comparisons
inside a guard of both positions split off it (:func:`rasp.rewrite.split_count`: ``#[j > 0 && j < i] P``
is ``#[j < i] (P && !(#true <= 1))``). A comparison of i and j that has one value at every j once i
is large (``i + j >= 7``: true for every j from i = 7 on; :func:`rasp.guards.eventually_constant`)
is that value from there on and, at each of the at most 64 positions before, a count of the
positions j where the guard holds, written with ``#true`` (:func:`rasp.rewrite.eventual_count`).

**Outside.** A relation that depends on absolute position in any other way (``j == i / 2``,
``i - 2 * j >= 0``, ``i + j <= 300`` past the 64 positions), multiplies positions (``j * j == i``),
or a ``pos[...]`` that is neither periodic nor periodic from some position on (``pos[i * i == 25]``;
``pos[i <= 5]`` is inside) puts the program outside every fragment: each such atom becomes a
:class:`Reason` with its exact source span and the condition of the theorem that fails
(``translation invariance``, ``locality``, ``periodicity``).
Operations that are not C-RASP at all (the RASP-L primitives ``select``, ``aggregate``, ``map``...)
are reasons with condition ``C-RASP operations``.

**Tasks.** A verdict is about a program: a program outside the class does not put its task outside.
When the program file belongs to a registered task (:func:`rasp.tasks.task_for_program`), the
verdict also carries the task's *published* result (:class:`TaskResult`), labelled as such.

**RASP-L.** :data:`FRAGMENTS` and :data:`GUARANTEES` list ``RASP-L``
(guarantee ``conjectured``: the RASP-L conjecture of Zhou et al., arXiv 2310.16028). Its analysis
is applied at the end of :func:`check`: a program outside every C-RASP fragment that uses RASP-L primitives
is handed to :func:`rasp.raspl.verdict_for_raspl`, which returns the verdict: the lowered C-RASP fragment, or
fragment ``RASP-L`` (or ``none`` with its own reasons).
"""
from __future__ import annotations

import dataclasses
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from . import ast as A
from .errors import RaspError, Span, caret_lines, source_lines
from .guards import NotRegular, analyze_relation, eventually_constant, periodic_residues
from .printer import expr_to_str, module_to_str, rel_to_str
from .program import Program
from .rewrite import (EVENTUAL_CAP, SPLIT_ATOM_CAP, absolute_atoms, absolute_count, absolute_predicate,
                      analysis_caps, eventual_atoms, local_offset, only_local_counts, past_absolute_limits,
                      rewrite_core, rewrite_module)

#: every fragment a verdict can name, from the strongest guarantee to none
FRAGMENTS: tuple[str, ...] = (
    "C-RASP", "C-RASP[local]", "C-RASP[periodic]", "C-RASP[periodic,local]", "RASP-L", "none",
)
CRASP_FRAGMENTS: tuple[str, ...] = FRAGMENTS[:4]

#: fragment -> what the theory promises
GUARANTEES: dict[str, str] = {
    "C-RASP": "guaranteed",
    "C-RASP[local]": "guaranteed",
    "C-RASP[periodic]": "guaranteed",
    "C-RASP[periodic,local]": "guaranteed",
    "RASP-L": "conjectured",
    "none": "none",
}

#: guarantee levels, strongest first (``--require LEVEL`` accepts LEVEL and anything stronger)
LEVELS: tuple[str, ...] = ("guaranteed", "conjectured", "none")

_HUANG = "Huang et al. 2025 (ICLR 2025, arXiv 2410.02140), Theorem 7"
_PROMISE = ("an idealized learner that fits all inputs up to some length while minimizing its regularizer "
            "is correct at every length (how long the training inputs must be is not bounded in general)")

#: fragment -> the result the verdict rests on, in one line
THEOREMS: dict[str, str] = {
    "C-RASP": f"{_HUANG}: {_PROMISE}. No positional relations: NoPE (no positional encoding) suffices.",
    "C-RASP[local]": f"{_HUANG}: {_PROMISE}. Needs local positional terms (relations j = i - d).",
    "C-RASP[periodic]": f"{_HUANG}: {_PROMISE}. Needs periodic positional encodings (i mod M).",
    "C-RASP[periodic,local]": f"{_HUANG}: {_PROMISE}. Needs periodic and local positional terms.",
    "RASP-L": "RASP-L conjecture (Zhou et al. 2023, \"What Algorithms can Transformers Learn?\", arXiv 2310.16028): "
              "transformers tend to length-generalize on tasks with a short RASP-L program. A conjecture, not a theorem.",
    "none": "No theorem applies: the program lies outside C-RASP[periodic,local]. This is about the program, "
            "not about the task it computes.",
}

#: what Theorem 7 asks of positional relations, per condition a reason can name
CONDITIONS: dict[str, str] = {
    "translation invariance": "guards that depend only on the distance i - j (and on i mod M)",
    "locality": "guards that single out finitely many distances i - j, up to periodic case splits",
    "periodicity": "positional predicates periodic in i (phi(i) = phi(i + M))",
    "C-RASP operations": "only C-RASP operations (counts, comparisons, Boolean and linear arithmetic)",
}

#: core node classes that C-RASP has (everything else, e.g. the RASP-L primitives, is outside)
CRASP_NODES = (
    A.Tok, A.BoolConst, A.IntConst, A.Ref, A.Not, A.And, A.Or, A.Compare, A.Count, A.Cond, A.Add,
    A.Sub, A.Scale, A.Min, A.Max, A.PosPred,
)
#: surface names of the RASP-L primitives (core class name -> keyword)
_PRIMITIVE = {"Select": "select", "Aggregate": "aggregate", "SelectorWidth": "selector_width", "Map": "map",
              "Tokens": "tokens", "Indices": "indices"}
#: relation node classes guards and predicates are made of
_REL_NODES = (A.PVar, A.PInt, A.PBool, A.PBin, A.PNeg, A.PCmp, A.PAnd, A.POr, A.PNot)


# ---------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Reason:
    """Why a program is outside: the theorem's condition that fails, and the exact source span."""

    condition: str  # a key of CONDITIONS
    message: str
    span: Span | None
    text: str = ""  # the offending relation or operation, as source text

    @property
    def line(self) -> int | None:
        return self.span.line if self.span else None

    @property
    def col(self) -> int | None:
        return self.span.column if self.span else None

    def to_json(self) -> dict:
        sp = self.span
        return {
            "line": sp.line if sp else None,
            "col": sp.column if sp else None,
            "end_line": sp.end_line if sp else None,
            "end_col": sp.end_column if sp else None,
            "condition": self.condition,
            "message": self.message,
            "text": self.text,
        }


@dataclass(frozen=True)
class TaskResult:
    """A *published* result about the task a program file belongs to (not about the program)."""

    name: str
    published_in_class: bool
    published_nope: bool | None
    citation: str
    statement: str
    source: str | None = None

    @property
    def label(self) -> str:
        if not self.published_in_class:
            return "not in C-RASP[periodic,local]"
        if self.published_nope is True:
            return "in C-RASP (NoPE suffices)"
        if self.published_nope is False:
            return "in C-RASP[periodic,local], not with NoPE"
        return "in C-RASP[periodic,local]"

    def to_json(self) -> dict:
        return {
            "name": self.name, "published_in_class": self.published_in_class,
            "published_nope": self.published_nope, "label": self.label, "citation": self.citation,
            "statement": self.statement, "source": self.source,
        }


@dataclass(frozen=True)
class Fact:
    """Where a positional feature of the verdict comes from (first occurrence in the source)."""

    span: Span | None
    text: str


@dataclass(frozen=True)
class Verdict:
    """The checker's answer for one program (see the module docstring for every field's meaning)."""

    program: str
    fragment: str
    guarantee: str
    theorem: str
    reasons: tuple[Reason, ...]
    local_offsets: tuple[int, ...]  # d >= 1 with a count #[j == i - d] after rewriting
    self_counts: int  # counts #[j == i] P (d = 0): no positional information, not local
    periods: tuple[int, ...]  # minimal periods >= 2 of pos[...] after rewriting
    depth: int
    counts: int
    alphabet_size: int
    special: tuple[str, ...]
    rewritten: A.Module | None  # the surface program after rewriting; None when nothing changed
    rewritten_core: A.CoreProgram
    rewrites: tuple[tuple[A.Definition, A.Definition], ...]  # (original, rewritten) definitions that changed
    task: TaskResult | None = None
    evidence: dict = field(default_factory=dict, compare=False)  # "local 1" / "period 2" -> Fact
    source: str | None = field(default=None, compare=False, repr=False)
    #: counts whose normal form is past the compiler's size cap (rasp.rewrite.BRANCH_CAP), as the
    #: located errors ``rasp compile`` gives: in the class, but not compiled
    compile_limits: tuple[RaspError, ...] = field(default=(), compare=False)

    @property
    def in_class(self) -> bool:
        return self.fragment in CRASP_FRAGMENTS

    @property
    def rewritten_source(self) -> str | None:
        return module_to_str(self.rewritten) if self.rewritten is not None else None

    def meets(self, level: str) -> bool:
        """Whether the guarantee is ``level`` or stronger (``guaranteed`` > ``conjectured`` > ``none``)."""
        return LEVELS.index(self.guarantee) <= LEVELS.index(level)

    def to_json(self) -> dict:
        return {
            "program": self.program,
            "fragment": self.fragment,
            "guarantee": self.guarantee,
            "theorem": self.theorem,
            "reasons": [r.to_json() for r in self.reasons],
            "local_offsets": list(self.local_offsets),
            "self_counts": self.self_counts,
            "periods": list(self.periods),
            "depth": self.depth,
            "counts": self.counts,
            "alphabet_size": self.alphabet_size,
            "special": list(self.special),
            "rewritten": self.rewritten_source,
            "task": self.task.to_json() if self.task else None,
            "compile_limits": [{"line": e.span.line if e.span else None, "col": e.span.column if e.span else None,
                                "message": e.message, "hint": e.hint} for e in self.compile_limits],
        }


# ---------------------------------------------------------------------------- the analysis
#: C-RASP leaves that neither analysis reads (no guard, no positional predicate, nothing outside):
#: :func:`_walk_core` does not yield them (half of an expanded family's nodes)
_SILENT = frozenset({A.Tok, A.BoolConst, A.IntConst, A.Ref})


def _walk_core(e):
    """(node, inside) for every node of a core expression but plain leaves (:data:`_SILENT`), pre-order;
    ``inside`` tells whether an enclosing node is not a C-RASP operation (so only the outermost such
    node becomes a reason). Iterative: family expansions make long chains (any/all/sum over large
    alphabets)."""
    stack = [(e, False)]
    while stack:
        node, inside = stack.pop()
        yield node, inside
        inside = inside or not isinstance(node, CRASP_NODES)
        kids = _KIDS.get(type(node))
        kids = kids(node) if kids is not None else A.children(node)
        stack.extend((c, inside) for c in reversed(kids) if type(c) not in _SILENT)


_unary = lambda n: (n.operand,)  # noqa: E731
_binary = lambda n: (n.left, n.right)  # noqa: E731
_leaf = lambda n: ()  # noqa: E731
#: fast child access for the core classes (everything else goes through ast.children)
_KIDS = {
    A.Not: _unary, A.Scale: _unary, A.And: _binary, A.Or: _binary, A.Compare: _binary, A.Add: _binary,
    A.Sub: _binary, A.Min: _binary, A.Max: _binary, A.Count: lambda n: (n.body,),
    A.Cond: lambda n: (n.test, n.then, n.other), A.Tok: _leaf, A.BoolConst: _leaf, A.IntConst: _leaf,
    A.Ref: _leaf, A.PosPred: _leaf,
}


def _rel_nodes(r):
    yield r
    if dataclasses.is_dataclass(r):
        for f in dataclasses.fields(r):
            v = getattr(r, f.name)
            if not A.is_span_field(f.name) and dataclasses.is_dataclass(v):
                yield from _rel_nodes(v)


def _text(node) -> str:
    try:
        if isinstance(node, _REL_NODES):
            return rel_to_str(node)
        return expr_to_str(node)
    except TypeError:
        return type(node).__name__


def _relation_reason(rel: A.Rel, fallback: Span | None, unary: bool) -> Reason | None:
    """The reason a guard (``unary=False``) or a ``pos[...]`` predicate is outside, or None."""
    for n in _rel_nodes(rel.expr):
        if not isinstance(n, _REL_NODES):
            return Reason("C-RASP operations", f"{type(n).__name__} is not a position relation",
                          n.span or rel.span or fallback, _text(n))
    form = analyze_relation(rel.expr)
    if not isinstance(form, NotRegular):
        return None
    # a predicate of one position that is eventually periodic (pos[i <= 5], #[j <= 2]) is rewritten
    # with counts of every position (rasp.rewrite.absolute_predicate): plain C-RASP
    if (absolute_predicate(rel.expr) if unary else absolute_count(rel.expr, A.BoolConst(True))) is not None:
        return None
    atoms = [] if unary else absolute_atoms(rel.expr)
    # comparisons that settle within EVENTUAL_CAP are taken care of too (rasp.rewrite.eventual_count):
    # the reason is the first part that is neither
    settling = [] if unary else [a for a, (i0, _) in eventual_atoms(rel.expr).items() if i0 <= EVENTUAL_CAP]
    rest = _first_irregular(rel.expr, atoms + settling) if atoms or settling else None
    split = ""
    if rest is not None:  # the atoms split off (rasp.rewrite.split_count); this part keeps it outside
        form = rest
    elif len(atoms) > SPLIT_ATOM_CAP:
        split = (f"; this guard has {len(atoms)} comparisons of one position that the rewrite would split "
                 f"off (at most {SPLIT_ATOM_CAP})")
    elif atoms:
        split = ("; the guard's comparisons of one position split off (rasp.rewrite.split_count), but what "
                 "remains is not regular as a whole")
    span = form.span or rel.span or fallback
    culprit = _find_at(rel.expr, form.span)
    text = _text(culprit) if culprit is not None else _text(rel.expr)
    # a relation of one position past the rewrite's caps: the whole, or the atom inside a guard of both
    past = past_absolute_limits(rel.expr) or (culprit is not None and past_absolute_limits(culprit))
    limits = ("; this one is past the rewrite's limits (at most 2^20 positions before its periodic part, "
              "at most 64 runs of positions set apart)" if past else "") + split
    settles = eventually_constant(culprit) if isinstance(culprit, A.PCmp) else None
    if settles is not None and settles[0] > EVENTUAL_CAP:  # rasp.rewrite.eventual_count's limit
        limits += (f"; it has one value at every j from i = {settles[0]:,} on, past the {EVENTUAL_CAP} positions "
                   "the rewrite treats one by one")
    hint = f"; {form.hint}" if form.hint else ""  # the count that says it, for a position against a constant
    if unary:
        condition = "periodicity"
        why = ("depends on the absolute position i, so it is not periodic"
               if form.condition == "translation invariance" else form.message)
        message = f"in a positional predicate, {text!r} {why}{hint}{limits}; Theorem 7 needs {CONDITIONS[condition]}"
    else:
        condition = form.condition
        message = f"in a guard, {text!r} {form.message}{hint}{limits}; Theorem 7 needs {CONDITIONS[condition]}"
    return Reason(condition, message, span, text)


def _first_irregular(rel, atoms: list) -> NotRegular | None:
    """Why the first part of a relation under ``&&``, ``||`` and ``!``, other than its absolute atoms,
    is not regular alone (None when each is: the parts may still fail together)."""
    if rel in atoms:
        return None
    if isinstance(rel, (A.PAnd, A.POr)):
        return _first_irregular(rel.left, atoms) or _first_irregular(rel.right, atoms)
    if isinstance(rel, A.PNot):
        return _first_irregular(rel.operand, atoms)
    form = analyze_relation(rel)
    return form if isinstance(form, NotRegular) else None


def _find_at(rel, span):
    if span is None:
        return None
    for n in _rel_nodes(rel):
        if getattr(n, "span", None) == span:
            return n
    return None


def _reasons(core: A.CoreProgram) -> list[Reason]:
    found: dict[tuple, Reason] = {}
    analysed: dict[int, None] = {}
    for d in core.defs:
        for node, inside in _walk_core(d.expr):
            reason = None
            if isinstance(node, A.Count) and isinstance(node.guard, A.Rel):
                if id(node.guard) in analysed:
                    continue
                analysed[id(node.guard)] = None
                reason = _relation_reason(node.guard, node.span, unary=False)
            elif isinstance(node, A.PosPred):
                if id(node.rel) in analysed:
                    continue
                analysed[id(node.rel)] = None
                reason = _relation_reason(node.rel, node.span, unary=True)
            elif not isinstance(node, CRASP_NODES) and not inside:
                name = _PRIMITIVE.get(type(node).__name__, type(node).__name__)
                if name == "map" and len(getattr(node, "params", ())) == 2:
                    name = "seqmap"
                reason = Reason("C-RASP operations",
                                f"{name} is a RASP-L primitive, not a C-RASP operation",
                                node.span, _text(node))
            if reason is not None:
                key = (reason.span.line if reason.span else 0, reason.span.column if reason.span else 0,
                       reason.condition, reason.message)
                found.setdefault(key, reason)
    return [found[k] for k in sorted(found, key=lambda k: (k[0], k[1], k[2], k[3]))]


#: node kinds without sub-expressions (depth 0)
_FLAT = frozenset({A.Tok, A.BoolConst, A.IntConst, A.PosPred})


def _family(name: str) -> str | None:
    """The family a core definition is an instance of (``P`` for ``P[a,b]``; a name is an identifier,
    so its first ``[`` starts the symbols), or None."""
    k = name.find("[")
    return name[:k] if k > 0 else None


# Every instance of a family has the same structure (operations, guards, periods and the spans they
# come from), up to the symbols of its tokens and of the instances it refers to: a symbol comparison
# becomes a constant, and only a choice between two constants is folded (rasp.expand), in every
# instance alike. So when the families an instance refers to have one depth each (true of families
# without families, and then by induction in dependency order: a family cannot refer to itself),
# its depth and its counting operations are those of the family's first instance; the walks below
# look at one instance per family (uf.rasp over 150 symbols: 22,952 definitions, 6 families).
def _depths(core: A.CoreProgram, per_family: bool = True) -> int:
    """The counting depth of the program: nested counts along the deepest path (iterative, so every
    program the parser accepts is analysed); one instance per family when ``per_family``."""
    depth: dict[str, int] = {}
    family_depth: dict[str, int] = {}

    def known(c) -> int | None:  # a leaf's or a reference's depth without a visit (most nodes)
        t = type(c)
        if t is A.Ref:
            return depth.get(c.name, 0)
        return 0 if t in _FLAT else None

    def of(root) -> int:
        if known(root) is not None:
            return known(root)
        value: dict[int, int] = {}  # id(node) -> its depth, once its children are done
        stack = [(root, False)]
        while stack:
            e, done = stack.pop()
            if not done and id(e) in value:  # a shared subtree
                continue
            kids = _KIDS.get(type(e))
            kids = kids(e) if kids is not None else A.children(e)
            if not done:
                stack.append((e, True))
                stack.extend((c, False) for c in kids if known(c) is None)
                continue
            inner = 0
            for c in kids:
                v = known(c)
                v = value[id(c)] if v is None else v
                if v > inner:
                    inner = v
            # #[j == i] P is '1 if P else 0': no counting layer
            counts = isinstance(e, A.Count) and not (
                isinstance(e.guard, A.Rel) and local_offset(e.guard) == 0)
            value[id(e)] = inner + 1 if counts else inner
        return value[id(root)]

    for d in core.defs:  # dependency order
        family = _family(d.name) if per_family else None
        if family is not None and family in family_depth:
            depth[d.name] = family_depth[family]
            continue
        depth[d.name] = of(d.expr)
        if family is not None:
            family_depth[family] = depth[d.name]
    return max(depth.values(), default=0)


def _positional_facts(core: A.CoreProgram, per_family: bool = True):
    """(local offsets d >= 1, self counts, periods >= 2, count nodes, evidence) of a rewritten core;
    one instance per family when ``per_family`` (its counts taken once per instance)."""
    offsets: set[int] = set()
    periods: set[int] = set()
    self_counts = counts = 0
    evidence: dict[str, Fact] = {}
    family_counts: dict[str, tuple[int, int]] = {}
    for d in core.defs:
        family = _family(d.name) if per_family else None
        if family is not None and family in family_counts:
            n, n_self = family_counts[family]
            counts += n
            self_counts += n_self
            continue
        before = (counts, self_counts)
        for node, _ in _walk_core(d.expr):
            if isinstance(node, A.Count):
                counts += 1
                if isinstance(node.guard, A.Rel):
                    off = local_offset(node.guard)
                    if off == 0:
                        self_counts += 1
                    elif off is not None:
                        offsets.add(off)
                        evidence.setdefault(f"local {off}", Fact(node.span, _text(node)))
            elif isinstance(node, A.PosPred):
                pr = periodic_residues(node.rel.expr)
                if pr is not None and pr[0] >= 2:
                    periods.add(pr[0])
                    evidence.setdefault(f"period {pr[0]}", Fact(node.span, _text(node)))
        if family is not None:
            family_counts[family] = (counts - before[0], self_counts - before[1])
    return tuple(sorted(offsets)), self_counts, tuple(sorted(periods)), counts, evidence


def _fragment(offsets, periods) -> str:
    if offsets and periods:
        return "C-RASP[periodic,local]"
    if offsets:
        return "C-RASP[local]"
    if periods:
        return "C-RASP[periodic]"
    return "C-RASP"


def task_result(program: Program, task=None) -> TaskResult | None:
    """The published result about a task: ``task`` (a registered name or a task object), or else the
    task whose registered program is ``program``'s file; None when there is none."""
    if task is None or isinstance(task, str):
        try:
            from . import tasks  # the registry, imported lazily: the checker works without it
        except ImportError:
            if task is not None:
                raise RaspError("the task registry (rasp.tasks) is not available") from None
            return None
        if task is not None:
            task = tasks.get(task)  # an unknown name is a RaspError with a suggestion
        elif program.filename:
            task = tasks.task_for_program(Path(program.filename), program.source)
        if task is None:
            return None
    return TaskResult(
        name=str(task.name),
        published_in_class=bool(task.published_in_class),
        published_nope=getattr(task, "published_nope", None),
        citation=str(getattr(task, "citation", "") or ""),
        statement=str(getattr(task, "statement", "") or ""),
        source=getattr(task, "source", None),
    )


def check(program: Program, *, name: str | None = None, task=None, with_task: bool = True) -> Verdict:
    """The smallest fragment containing ``program``, the guarantee it earns, and the facts behind it.

    ``task``: a registered task name (or task object) whose published result the verdict should
    carry; by default the task whose registered program is the program's file, if any
    (``with_task=False``: none). A program nested too deeply for the analysis' recursion is a
    :class:`RaspError` (a user error, as in parsing and compiling)."""
    try:
        with analysis_caps() as over:  # normal forms larger than the compiler takes still have a verdict
            return _check(program, name, task, with_task, over)
    except RaspError as exc:  # a relation too large to analyse, located in the program
        raise exc.located(program.source, program.filename) from None
    except RecursionError:
        raise A.too_deep("the program nests too deeply to analyse", program.module).located(
            program.source, program.filename) from None


def _check(program: Program, name: str | None, task, with_task: bool, over: list[RaspError]) -> Verdict:
    core = program.core
    lowering = None  # a RASP-L program's lowering, once made
    if only_local_counts(program.module):
        # every written count is plain or local and nothing else needs rewriting: the expanded core is
        # its own normal form and has nothing outside (what the compiler relies on too; tested), so
        # neither walk is needed (0.35 s of check()'s 1.16 s for uf.rasp over 150 symbols)
        reasons, rewritten_core = [], core
    else:
        reasons = _reasons(core)
        if reasons:
            from . import raspl  # imported here: raspl builds on this module

            if raspl.uses_raspl(program):
                # a RASP-L program that lowers into the class has the lowered program's verdict: the
                # facts of this one would be thrown away (rasp check raspl_count.rasp: 2.1 -> 1.8 s)
                lowering = raspl.lower_explained(program)
                if lowering[0] is not None:
                    v = raspl.lowered_verdict(program, lowering[0], name or program.filename or "<program>",
                                              task_result(program, task) if with_task else None)
                    if v is not None:
                        return v
                    lowering = (None, lowering[1])  # checked: verdict_for_raspl need not check it again
        rewritten_core = rewrite_core(core)
    offsets, self_counts, periods, counts, evidence = _positional_facts(rewritten_core)
    rewritten_module = _declaring(rewrite_module(program.module), core.alphabet)
    rewrites = tuple(
        (s, t) for s, t in zip(program.module.statements, rewritten_module.statements)
        if isinstance(s, A.Definition) and s != t
    )
    fragment = "none" if reasons else _fragment(offsets, periods)
    verdict = Verdict(
        program=name or program.filename or "<program>",
        fragment=fragment,
        guarantee=GUARANTEES[fragment],
        theorem=THEOREMS[fragment],
        reasons=tuple(reasons),
        local_offsets=offsets,
        self_counts=self_counts,
        periods=periods,
        depth=_depths(rewritten_core),
        counts=counts,
        alphabet_size=len(core.alphabet),
        special=tuple(core.special),
        rewritten=rewritten_module if rewrites else None,
        rewritten_core=rewritten_core,
        rewrites=rewrites,
        task=task_result(program, task) if with_task else None,
        evidence=evidence,
        source=program.source,
        compile_limits=_distinct(over),
    )
    if reasons:
        # RASP-L: a program built with RASP-L primitives either lowers to C-RASP (the lowered
        # program is the proof), conforms to RASP-L ("conjectured"), or violates it ("none").
        from . import raspl  # imported here: raspl builds on this module

        if raspl.uses_raspl(program):
            return raspl.verdict_for_raspl(program, base=verdict, lowering=lowering)
    return verdict


def _distinct(errors: list[RaspError]) -> tuple[RaspError, ...]:
    """One error per message and place (a family's instances share their written guard)."""
    seen: dict = {}
    for e in errors:
        seen.setdefault((e.message, e.span), e)
    return tuple(seen.values())


def _declaring(module: A.Module, alphabet) -> A.Module:
    """``module`` with its alphabet statement listing ``alphabet``: the program checked under
    ``--alphabet`` is the proof's program (its printed form kept the declared alphabet, so it refused
    inputs the checked program takes)."""
    alphabet = tuple(alphabet)
    return dataclasses.replace(module, statements=tuple(
        dataclasses.replace(s, symbols=alphabet) if isinstance(s, A.AlphabetDecl) and s.symbols != alphabet else s
        for s in module.statements))


def rewritten_program(program: Program) -> Program:
    """The rewritten program (normal form) as a :class:`Program`, parsed from its printed source with
    the same data alphabet: what ``--explain`` prints, runnable. Evaluates identically to ``program``."""
    from .program import parse

    with analysis_caps():  # the normal form the verdict was read from, past the compiler's caps too
        text = module_to_str(rewrite_module(program.module))
    return parse(text, filename=program.filename, alphabet=program.alphabet)


# ---------------------------------------------------------------------------- text rendering
def _caret(source: str | None, span: Span | None, indent: str = "    ") -> list[str]:
    return caret_lines(source, span, indent)


def _where(verdict: Verdict, span: Span | None) -> str:
    if span is None:
        return verdict.program
    return f"{verdict.program}:{span.line}:{span.column}"


def render(verdict: Verdict, *, explain: bool = False) -> str:
    """The text report of ``rasp check`` for one program."""
    v = verdict
    promise = {"guaranteed": "guaranteed to length-generalize", "conjectured": "conjectured to length-generalize",
               "none": "no guarantee"}[v.guarantee]
    out = [f"{v.program}: {v.fragment} ({promise})"]
    out.append(_wrap(f"theorem: {v.theorem}"))
    offs = _offsets_text(v.local_offsets)
    if v.self_counts:
        offs += (f" (and offset 0 in {v.self_counts} count{'s' if v.self_counts > 1 else ''}: "
                 "#[j == i] P is '1 if P else 0', not positional)")
    out.append(_wrap(f"local offsets: {offs}"))
    out.append(f"  periods: {', '.join(str(m) for m in v.periods) or 'none'}")
    out.append(f"  depth: {v.depth} (nesting of counts)")
    out.append(f"  counting operations: {v.counts}")
    special = f" + {len(v.special)} special" if v.special else ""
    out.append(f"  alphabet size: {v.alphabet_size}{special}")
    for e in v.compile_limits:  # in the class (or not), but rasp compile refuses it
        out.append(_wrap(f"compile: {_where(v, e.span)}: {e.message}"))
        out.extend(_caret(v.source, e.span))
        if e.hint:
            out.append(_wrap(f"hint: {e.hint}", "    "))
    if v.reasons:
        out.append(f"  outside C-RASP[periodic,local] ({len(v.reasons)} reason{'s' if len(v.reasons) > 1 else ''}):")
        for r in v.reasons:
            out.append(f"  {_where(v, r.span)}: {r.condition}: {r.message}")
            out.extend(_caret(v.source, r.span))
    if v.task is not None:
        t = v.task
        out.append(_wrap(f"task {t.name}: {t.label} -- a published result about the task, not a verdict "
                         f"on this program. {t.statement} [{t.citation}]"))
        if t.published_in_class and not v.in_class:
            out.append(_wrap("note: this program is outside, but the task is published as in C-RASP[periodic,local]: "
                             "a program outside the class does not put its task outside"))
        if not t.published_in_class and v.in_class:
            out.append(_wrap("WARNING: this program is in the class but the task is published as outside it, "
                             "so the program cannot compute the task at every length"))
        elif t.published_nope is False and v.fragment == "C-RASP":
            out.append(_wrap("WARNING: this program is in plain C-RASP (no positional information, NoPE) but the "
                             "task is published as needing positions (not in NoPE C-RASP), so the program "
                             "cannot compute the task at every length"))
    if explain:
        out.extend(_explain(v))
    return "\n".join(out)


def _offsets_text(offsets: tuple[int, ...]) -> str:
    """``1, 2, 5`` as they are; past 16 offsets, runs of three or more as ``1..1000``."""
    if len(offsets) <= 16:
        return ", ".join(str(d) for d in offsets) or "none"
    runs: list[list[int]] = []
    for d in offsets:
        if runs and d == runs[-1][1] + 1:
            runs[-1][1] = d
        else:
            runs.append([d, d])
    parts = []
    for a, b in runs:
        parts.extend([f"{a}..{b}"] if b - a >= 2 else [str(x) for x in range(a, b + 1)])
    return ", ".join(parts) + f" ({len(offsets):,} offsets)"


def _wrap(text: str, indent: str = "  ") -> str:
    return textwrap.fill(text, width=100, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False, break_long_words=False)


def _explain(v: Verdict) -> list[str]:
    out = []
    lines = source_lines(v.source)
    facts = sorted(v.evidence.items(), key=lambda kv: (kv[0].split()[0], int(kv[0].split()[1])))
    for key, fact in facts:
        kind, n = key.split()
        what = f"local offset {n}" if kind == "local" else f"period {n}"
        sp = fact.span
        if sp and sp.end_line == sp.line and 1 <= sp.line <= len(lines):
            where = f"{_where(v, sp)}: {lines[sp.line - 1][sp.column - 1:sp.end_column - 1]}"
        else:
            where = fact.text
        out.append(f"  {what} comes from {where}")
    if not v.rewrites:
        if v.in_class:
            out.append("  rewriting: nothing to rewrite; every guard and predicate is already in normal form")
        else:
            out.append("  rewriting: no proof of membership (the program is outside C-RASP[periodic,local]; "
                       "see the reasons above)")
        return out
    out.append("  rewritten definitions (normal form: #P, #[j == i - d] P, periodic pos[...]; "
               "evaluates identically to the original):")
    from .printer import statement_to_str

    for before, after in v.rewrites:
        line = f"line {before.span.line}: " if before.span else ""
        out.append(f"    {line}{statement_to_str(before)}")
        out.append(f"    {' ' * len(line)}=> {statement_to_str(after)}")
    out.append("  rewritten program:")
    out.extend("    " + s for s in (v.rewritten_source or "").splitlines())
    return out
