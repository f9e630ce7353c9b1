"""Abstract syntax of C-RASP programs.

One set of node classes serves two levels:

* the **surface** AST, produced by :mod:`rasp.parser` and printed by :mod:`rasp.printer`; it keeps
  families (``P[x]``), quantifiers (``any``/``all``/``sum``), ``exists``, negation and imported names;
* the **core** program (:class:`CoreProgram`, produced by :mod:`rasp.expand`), which uses only
  ``Tok, BoolConst, IntConst, Ref, Not, And, Or, Compare, Count, Cond, Add, Sub, Scale, Min, Max,
  PosPred`` with every symbol literal and every guard a relation (:class:`Rel`).

Nodes are frozen dataclasses; ``span`` (where the node came from) is excluded from equality, so
``parse(str(p)) == p`` compares structure only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from .errors import RaspError, Span

_SPAN = dict(default=None, compare=False, repr=False)


def is_span_field(name: str) -> bool:
    """Whether a node's field is a source location (``span``, ``var_span``, ``name_span``): the
    generic walkers over nodes skip these (a ``Span`` is a dataclass but not a node)."""
    return name == "span" or name.endswith("_span")


# ----------------------------------------------------------------------------- positions
@dataclass(frozen=True)
class PVar:
    """``i`` (the current position) or ``j`` (the counted position)."""

    name: str
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class PInt:
    value: int
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class PBool:
    value: bool
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class PBin:
    """Integer arithmetic on positions: ``+ - * / %`` (``/`` is floor division)."""

    op: str
    left: "PosExpr"
    right: "PosExpr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class PNeg:
    operand: "PosExpr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class PCmp:
    op: str
    left: "PosExpr"
    right: "PosExpr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class PAnd:
    left: "PosExpr"
    right: "PosExpr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class POr:
    left: "PosExpr"
    right: "PosExpr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class PNot:
    operand: "PosExpr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class PCond:
    """``then if test else other`` (map functions only)."""

    test: "PosExpr"
    then: "PosExpr"
    other: "PosExpr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class PTable:
    """A lookup table ``{k1: v1, k2: v2}[index]`` (map functions only); missing keys give 0."""

    entries: tuple[tuple[int, int], ...]
    index: "PosExpr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class PSym:
    """``"a"`` inside a map function: the symbol's code (its index in alphabet + special)."""

    value: str
    span: Span | None = field(**_SPAN)


PosExpr = Union[PVar, PInt, PBool, PBin, PNeg, PCmp, PAnd, POr, PNot, PCond, PTable, PSym]


@dataclass(frozen=True)
class Rel:
    """A guard or positional predicate written as a relation over ``i`` (and ``j``)."""

    expr: PosExpr
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class GuardName:
    """An imported binary predicate used as a guard: ``#[pred] P``."""

    name: str
    span: Span | None = field(**_SPAN)


Guard = Union[Rel, GuardName]


# ----------------------------------------------------------------------------- symbols
@dataclass(frozen=True)
class SymLit:
    """A symbol of the alphabet, written ``"a"`` (or bare inside declarations)."""

    value: str
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class SymVar:
    """A family or quantifier variable ranging over the data alphabet."""

    name: str
    span: Span | None = field(**_SPAN)


SymRef = Union[SymLit, SymVar]


# ----------------------------------------------------------------------------- expressions
@dataclass(frozen=True)
class Tok:
    """Q_a: the token at i is ``symbol``."""

    symbol: SymRef
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class BoolConst:
    value: bool
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class IntConst:
    value: int
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Ref:
    """A reference to a definition, with symbol indices for families."""

    name: str
    indices: tuple[SymRef, ...] = ()
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Not:
    operand: "Expr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class And:
    left: "Expr"
    right: "Expr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Or:
    left: "Expr"
    right: "Expr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Compare:
    """``left op right`` with op in ``== != < > <= >=``."""

    op: str
    left: "Expr"
    right: "Expr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Count:
    """``#[guard] body``: number of j <= i with guard(i, j) and body(j)."""

    guard: Guard | None
    body: "Expr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Exists:
    """``exists[guard] body`` (surface only): ``#[guard] body >= 1``."""

    guard: Guard | None
    body: "Expr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Cond:
    """``then if test else other``."""

    test: "Expr"
    then: "Expr"
    other: "Expr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Add:
    left: "Expr"
    right: "Expr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Sub:
    left: "Expr"
    right: "Expr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Scale:
    """``k * operand`` for an integer literal k."""

    k: int
    operand: "Expr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Neg:
    """``-operand`` (surface only; core uses ``Scale(-1, operand)``)."""

    operand: "Expr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Min:
    left: "Expr"
    right: "Expr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Max:
    left: "Expr"
    right: "Expr"
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class PosPred:
    """``pos[rel]``: a unary positional predicate of i."""

    rel: Rel
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class PosName:
    """An imported unary positional predicate used as a bool (surface only): ``pos_even``."""

    name: str
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Quant:
    """``any(x, P)``, ``all(x, P)``, ``sum(x, C)`` over the data alphabet (surface only)."""

    op: str
    var: str
    body: "Expr"
    span: Span | None = field(**_SPAN)
    var_span: Span | None = field(**_SPAN)  # the variable's name, for "already bound" errors


# ----------------------------------------------------------------------------- RASP-L
@dataclass(frozen=True)
class Tokens:
    """RASP-L ``tokens``: the code of the token at i (its index in alphabet + special)."""

    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Indices:
    """RASP-L ``indices``: i itself."""

    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Map:
    """``map(x -> f, s)`` / ``seqmap((x, y) -> f, s, t)``: f applied position-wise."""

    params: tuple[str, ...]
    body: PosExpr
    args: tuple["Expr", ...]
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Select:
    """``select(keys, queries, op)``: selects key j <= query i where ``keys[j] op queries[i]``."""

    keys: "Expr"
    queries: "Expr"
    op: str  # == != < > <= >= true
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Aggregate:
    """``aggregate(sel, values, mean|max|min, default)``; mean truncates toward zero (as int())."""

    selector: "Expr"
    values: "Expr"
    reduction: str = "mean"
    default: int = 0
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class SelectorWidth:
    """``selector_width(sel)``: how many keys the selector selects at i."""

    selector: "Expr"
    span: Span | None = field(**_SPAN)


Expr = Union[
    Tok, BoolConst, IntConst, Ref, Not, And, Or, Compare, Count, Exists, Cond, Add, Sub, Scale,
    Neg, Min, Max, PosPred, PosName, Quant, Tokens, Indices, Map, Select, Aggregate, SelectorWidth,
]

# ----------------------------------------------------------------------------- statements
@dataclass(frozen=True)
class AlphabetDecl:
    symbols: tuple[str, ...]
    span: Span | None = field(**_SPAN)
    symbol_spans: tuple = field(default=(), compare=False, repr=False)  # one per symbol (for errors)


@dataclass(frozen=True)
class SpecialDecl:
    symbols: tuple[str, ...]
    span: Span | None = field(**_SPAN)
    symbol_spans: tuple = field(default=(), compare=False, repr=False)


@dataclass(frozen=True)
class Import:
    name: str
    span: Span | None = field(**_SPAN)
    name_span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Definition:
    """``name[params] = expr``; params are variables (a family) or literals (one instance)."""

    name: str
    params: tuple[SymRef, ...]
    expr: Expr
    span: Span | None = field(**_SPAN)
    name_span: Span | None = field(**_SPAN)  # the defined name, for "defined twice" errors


def symbol_problem(text) -> str | None:
    """Why ``text`` cannot be a token symbol, or None: inputs are whitespace-separated tokens, so a
    symbol is a non-empty string without whitespace (anything else could never be given as input)."""
    if not isinstance(text, str):
        return f"is a {type(text).__name__}, not a string"
    if not text:
        return "is empty"
    if any(c.isspace() for c in text):
        return "contains whitespace"
    return None


#: what a program can output (``output KIND NAME``)
OUTPUT_KINDS = ("accept", "generate", "predict")


@dataclass(frozen=True)
class OutputDecl:
    """``output accept|generate|predict NAME``."""

    kind: str
    name: str
    span: Span | None = field(**_SPAN)
    name_span: Span | None = field(**_SPAN)


Statement = Union[AlphabetDecl, SpecialDecl, Import, Definition, OutputDecl]


@dataclass(frozen=True)
class Module:
    statements: tuple[Statement, ...]
    span: Span | None = field(**_SPAN)


# ----------------------------------------------------------------------------- core program
BOOL = "bool"
COUNT = "count"
SELECTOR = "selector"


@dataclass(frozen=True)
class CoreDef:
    name: str
    expr: Expr
    type: str
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class Output:
    """What the program outputs: ``accept`` a bool definition, or ``generate``/``predict`` from
    one bool definition per data symbol (``names[k]`` belongs to ``alphabet[k]``)."""

    kind: str
    names: tuple[str, ...]
    span: Span | None = field(**_SPAN)


@dataclass(frozen=True)
class CoreProgram:
    """Definitions in dependency order; every expression uses core nodes only."""

    defs: tuple[CoreDef, ...]
    alphabet: tuple[str, ...]
    special: tuple[str, ...]
    output: Output

    @property
    def symbols(self) -> tuple[str, ...]:
        """All token symbols an input may contain: the data alphabet, then the specials."""
        return self.alphabet + tuple(s for s in self.special if s not in self.alphabet)

    def definition(self, name: str) -> CoreDef:
        for d in self.defs:
            if d.name == name:
                return d
        raise KeyError(name)


def _operand(n) -> tuple:
    return (n.operand,)


def _binary(n) -> tuple:
    return (n.left, n.right)


def _body(n) -> tuple:
    return (n.body,)


#: expression classes whose sub-expressions are exactly ``left`` and ``right`` (no guard)
BINARY = frozenset({And, Or, Compare, Add, Sub, Min, Max})
#: the RASP-L primitives (every other expression class is C-RASP)
RASPL_NODES = (Tokens, Indices, Map, Select, Aggregate, SelectorWidth)

#: node class -> its sub-expressions (not guards), in source order; no class subclasses another
_CHILDREN = {
    Not: _operand, Neg: _operand, Scale: _operand,
    **{cls: _binary for cls in BINARY},
    Count: _body, Exists: _body, Quant: _body,
    Cond: lambda n: (n.test, n.then, n.other),
    Map: lambda n: n.args,
    Select: lambda n: (n.keys, n.queries),
    Aggregate: lambda n: (n.selector, n.values),
    SelectorWidth: lambda n: (n.selector,),
}


def children(node: object) -> tuple:
    """The sub-expressions of an expression node (not guards), in source order."""
    get = _CHILDREN.get(type(node))
    return get(node) if get is not None else ()


def balanced(join, parts: list):
    """``parts[0] op parts[1] op ... op parts[-1]`` as a balanced tree of ``join(left, right)``
    (neighbours paired level by level): the operands stay in order and the depth is log2 of their
    number, so passes that recurse over expressions handle thousands of operands."""
    while len(parts) > 1:
        parts = [join(parts[k], parts[k + 1]) if k + 1 < len(parts) else parts[k] for k in range(0, len(parts), 2)]
    return parts[0]


def depth(node: object, kids=None) -> int:
    """How deeply a tree nests (1 for a leaf), iteratively; ``kids`` gives a node's children (default
    :func:`children`: an expression's sub-expressions, not guards)."""
    kids = kids or children
    deepest, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in kids(n))
    return deepest


def quantifier_depth(e: object) -> int:
    """How deeply ``any``/``all``/``sum`` nest in an expression (iterative: bodies nest deeply)."""
    depth, stack = 0, [(e, 0)]
    kids_of = _CHILDREN.get
    push = stack.append
    while stack:  # (a loop without a call per node: it runs over every lowered RASP-L program)
        node, q = stack.pop()
        kind = type(node)  # no class subclasses another
        if kind is Quant:
            q += 1
            if q > depth:
                depth = q
        kids = kids_of(kind)
        if kids is not None:
            for c in kids(node):
                push((c, q))
    return depth


def deepest_definition(module: Module) -> Definition | None:
    """The definition whose expression nests most deeply: where a pass that recursed too deeply is
    located (the first of several equally deep ones)."""
    best, best_depth = None, 0
    for s in module.statements:
        if isinstance(s, Definition):
            d = depth(s.expr)
            if d > best_depth:
                best, best_depth = s, d
    return best


def too_deep(message: str, module: Module | None) -> RaspError:
    """The user error for a pass that recursed too deeply, located at the deepest definition."""
    d = deepest_definition(module) if module is not None else None
    return RaspError(message, d.span if d is not None else None, "split it into several definitions")


def walk(node: object):
    """Pre-order traversal of an expression (iterative: expanded families nest hundreds deep, and
    nested generators would cost the depth per node)."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(children(n)))
