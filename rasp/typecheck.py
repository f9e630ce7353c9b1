"""Surface AST -> names, arities and types, or located errors.

Checks: declarations appear at most once; imported names exist; definitions are unique, families
use distinct variables and are referenced with the right number of indices; every name and symbol
variable is bound; bool vs count everywhere; relations use only ``i`` (and ``j`` in guards), and
``/`` ``%`` have a positive constant on the right; references have no cycles; the output has the
right shape. Definitions may appear in any order; :func:`check_module` returns them in dependency
order.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

from . import ast as A
from . import builtins
from .errors import RaspError, Span

BOOL, COUNT = A.BOOL, A.COUNT


@dataclass(frozen=True)
class Signature:
    type: str
    arity: int
    definition: A.Definition


@dataclass(frozen=True)
class Checked:
    """What the later passes need from a type-checked module."""

    signatures: dict[str, Signature]
    order: tuple[str, ...]  # definition names, dependencies first
    alphabet: A.AlphabetDecl | None
    special: A.SpecialDecl | None
    imports: frozenset[str]
    output: A.OutputDecl | None
    raspl: bool = False  # some definition uses a RASP-L primitive (tokens, indices, map, select, ...)


def _suggest(name: str, options) -> str | None:
    close = difflib.get_close_matches(name, list(options), n=1)
    return f"did you mean '{close[0]}'?" if close else None


def symbol_comparison(e: "A.Compare", bound) -> bool:
    """``x == "a"``, ``x != y``, ``x < y`` ...: a comparison of family variables (bound symbol variables)
    with each other or with quoted symbols, by position in the alphabet (data symbols, then specials).
    It is decided when the family is expanded: each instance gets the constant true or false."""
    def var(side):
        return isinstance(side, A.Ref) and not side.indices and side.name in bound

    def lit(side):
        return isinstance(side, A.Tok) and isinstance(side.symbol, A.SymLit)

    return (var(e.left) and (var(e.right) or lit(e.right))) or (lit(e.left) and var(e.right))


class _Checker:
    def __init__(self, module: A.Module) -> None:
        self.module = module
        self.defs: dict[str, A.Definition] = {}
        self.imports: set[str] = set()
        self.types: dict[str, str] = {}
        self.visiting: list[str] = []
        self.order: list[str] = []
        self.raspl = False  # met a RASP-L primitive (every expression of every definition is typed)
        self.typed: dict[int, str] = {}  # id of an expression outside any family -> its type

    # ------------------------------------------------------------------ declarations
    def declarations(self):
        alphabet = special = output = None
        for s in self.module.statements:
            if isinstance(s, A.AlphabetDecl):
                if alphabet is not None:
                    raise RaspError("the alphabet is declared twice", s.span, "declare it once")
                if len(set(s.symbols)) != len(s.symbols):
                    twice, at = _repeated(s)
                    raise RaspError(f"the alphabet lists a symbol twice: {twice}", at, "list each symbol once")
                alphabet = s
            elif isinstance(s, A.SpecialDecl):
                if special is not None:
                    raise RaspError("special tokens are declared twice", s.span, "declare them once")
                if len(set(s.symbols)) != len(s.symbols):
                    twice, at = _repeated(s)
                    raise RaspError(f"the special tokens list a token twice: {twice}", at, "list each token once")
                special = s
            elif isinstance(s, A.Import):
                if s.name not in builtins.ALL:
                    raise RaspError(
                        f"unknown predicate '{s.name}'",
                        s.name_span or s.span,
                        f"built-in predicates: {', '.join(sorted(builtins.ALL))}; or write the relation inline, e.g. #[j == i - 1]",
                    )
                self.imports.add(s.name)
            elif isinstance(s, A.OutputDecl):
                if output is not None:
                    raise RaspError("the output is declared twice", s.span, "a program has one output")
                output = s
            elif isinstance(s, A.Definition):
                if s.name in self.defs:
                    first = self.defs[s.name].span
                    where = f" (first defined on line {first.line})" if first else ""
                    raise RaspError(f"'{s.name}' is defined twice{where}", s.name_span or s.span, "rename one of them")
                if s.name in self.imports or s.name in builtins.ALL:
                    raise RaspError(f"'{s.name}' is a built-in predicate name", s.name_span or s.span, "choose another name")
                names = [p.name for p in s.params if isinstance(p, A.SymVar)]
                for p in s.params:
                    if isinstance(p, A.SymLit):
                        raise RaspError(
                            "family parameters are variables, not symbols",
                            p.span,
                            'write P[x] = ... and use Q[x] inside; P["a"] refers to one instance',
                        )
                if len(set(names)) != len(names):
                    again = next(p for k, p in enumerate(s.params) if p.name in names[:k])
                    raise RaspError(f"a family uses the variable {again.name} twice", again.span or s.span,
                                    "write P[x, y]")
                self.defs[s.name] = s
        if alphabet is not None and special is not None:
            both = [x for x in special.symbols if x in alphabet.symbols]
            if both:  # families range over the alphabet and never over special tokens: not both
                at = _symbol_span(special, special.symbols.index(both[0]))
                raise RaspError(f"'{both[0]}' is declared both in the alphabet and as a special token",
                                at, "a token is either data (alphabet) or special, not both")
        return alphabet, special, output

    # ------------------------------------------------------------------ names
    def type_of(self, name: str, ref: A.Ref | None) -> str:
        if name in self.types:
            return self.types[name]
        if name in self.visiting:
            cycle = " -> ".join(self.visiting[self.visiting.index(name):] + [name])
            raise RaspError(f"definitions refer to each other in a cycle: {cycle}", ref.span if ref else None,
                            "a definition may only use values that do not depend on it")
        d = self.defs[name]
        self.visiting.append(name)
        bound = {p.name for p in d.params}
        t = self.expr(d.expr, bound)
        self.visiting.pop()
        self.types[name] = t
        self.order.append(name)
        return t

    # ------------------------------------------------------------------ expressions
    def want(self, e, bound: set[str], t: str, what: str) -> None:
        if bound:  # (expr's memo written out: a frame more per level would halve how deep a
            got = self._expr(e, bound)  # left-nested sum of counts may nest before Python's limit)
        else:
            key = id(e)
            got = self.typed.get(key)
            if got is None:
                got = self.typed[key] = self._expr(e, bound)
        if got != t:
            hint = (
                "compare a count to get a bool, e.g. C >= 1" if t == BOOL
                else "a bool is not a number; count it with #P, or use C if P else C"
            )
            raise RaspError(f"{what} must be a {t}, but this is a {got}", e.span, hint)

    def want_value(self, e, bound: set[str], what: str) -> str:
        """A sequence value: a count or a bool (bools act as 0/1), never a selector."""
        if bound:  # (expr's memo written out, as in want)
            t = self._expr(e, bound)
        else:
            key = id(e)
            t = self.typed.get(key)
            if t is None:
                t = self.typed[key] = self._expr(e, bound)
        if t == A.SELECTOR:
            raise RaspError(f"{what} must be a sequence, not a selector", e.span,
                            "aggregate a selector first: aggregate(sel, values)")
        return t

    def symbol(self, s: A.SymRef, bound: set[str]) -> None:
        if isinstance(s, A.SymVar) and s.name not in bound:
            raise RaspError(
                f"unbound symbol variable '{s.name}'",
                s.span,
                f'bind it as a family parameter P[{s.name}] = ... or with any({s.name}, ...); a literal symbol is quoted: "{s.name}"',
            )

    def expr(self, e, bound: set[str]) -> str:
        """The type of ``e`` (symbol variables ``bound``), or a located error. An expression outside
        any family is typed once however often it is shared: a lowered RASP-L program shares its
        subtrees (raspl_ur.rasp: 12,436 nodes, 6,173 distinct), and its type and errors do not
        depend on where it is read."""
        if bound:
            return self._expr(e, bound)
        key = id(e)
        t = self.typed.get(key)
        if t is None:
            t = self.typed[key] = self._expr(e, bound)
        return t

    def _expr(self, e, bound: set[str]) -> str:
        if isinstance(e, A.Tok):
            self.symbol(e.symbol, bound)
            return BOOL
        if isinstance(e, A.BoolConst):
            return BOOL
        if isinstance(e, A.IntConst):
            return COUNT
        if isinstance(e, A.Ref):
            if e.name in bound and not e.indices:
                raise RaspError(
                    f"'{e.name}' is a symbol variable, not a value", e.span,
                    f'test the token with Q[{e.name}], or compare the symbol: {e.name} == "a", {e.name} < y',
                )
            if e.name not in self.defs:
                if e.name in builtins.UNARY and e.name in self.imports and not e.indices:
                    return BOOL
                if e.name in builtins.UNARY:
                    raise RaspError(f"'{e.name}' is not imported", e.span, f"add '#import {e.name}'")
                if e.name in builtins.BINARY and not e.indices:  # a relation of i and j, not a value
                    raise RaspError(f"'{e.name}' is a relation of two positions (a guard), not a value", e.span,
                                    f"count with it: #[{e.name}] P" + ("" if e.name in self.imports
                                                                       else f" (after '#import {e.name}')"))
                hint = _suggest(e.name, self.defs) or "define it with NAME = expression"
                raise RaspError(f"unknown name '{e.name}'", e.span, hint)
            d = self.defs[e.name]
            if len(e.indices) != len(d.params):
                want = len(d.params)
                raise RaspError(
                    f"'{e.name}' takes {want} symbol ind{'ex' if want == 1 else 'ices'}, got {len(e.indices)}",
                    e.span,
                    f"write {e.name}[{', '.join(p.name for p in d.params)}]" if want else f"write {e.name}",
                )
            for s in e.indices:
                self.symbol(s, bound)
            return self.type_of(e.name, e)
        if isinstance(e, A.Not):
            self.want(e.operand, bound, BOOL, "the operand of !")
            return BOOL
        if isinstance(e, (A.And, A.Or)):
            op = "&&" if isinstance(e, A.And) else "||"
            self.want(e.left, bound, BOOL, f"the left side of {op}")
            self.want(e.right, bound, BOOL, f"the right side of {op}")
            return BOOL
        if isinstance(e, A.Compare) and symbol_comparison(e, bound):
            for side in (e.left, e.right):
                if isinstance(side, A.Tok):
                    self.symbol(side.symbol, bound)
            return BOOL
        if isinstance(e, A.Compare):
            lt = self.want_value(e.left, bound, "a compared value")
            rt = self.want_value(e.right, bound, "a compared value")
            if lt == rt == COUNT or (lt == rt == BOOL and e.op in ("==", "!=")):
                return BOOL
            if lt == rt == BOOL:
                raise RaspError(f"'{e.op}' compares counts, not bools", e.span, "bools compare with == and !=")
            raise RaspError(f"cannot compare a {lt} with a {rt}", e.span, "count the bool with #P first")
        if isinstance(e, (A.Count, A.Exists)):
            if e.guard is not None:
                self.guard(e.guard)
            self.want(e.body, bound, BOOL, "what # counts" if isinstance(e, A.Count) else "what exists tests")
            return COUNT if isinstance(e, A.Count) else BOOL
        if isinstance(e, A.Cond):
            self.want(e.test, bound, BOOL, "the condition after 'if'")
            t1 = self.want_value(e.then, bound, "a branch of 'if'")
            t2 = self.want_value(e.other, bound, "a branch of 'if'")
            if t1 != t2:
                raise RaspError(f"the branches of 'if' differ: {t1} and {t2}", e.span, "both branches need the same type")
            return t1
        if isinstance(e, (A.Add, A.Sub, A.Min, A.Max)):
            op = {A.Add: "+", A.Sub: "-", A.Min: "min", A.Max: "max"}[type(e)]
            self.want(e.left, bound, COUNT, f"the left operand of {op}")
            self.want(e.right, bound, COUNT, f"the right operand of {op}")
            return COUNT
        if isinstance(e, (A.Scale, A.Neg)):
            self.want(e.operand, bound, COUNT, "what is multiplied" if isinstance(e, A.Scale) else "the operand of unary -")
            return COUNT
        if isinstance(e, A.PosPred):
            self.relation(e.rel.expr, allowed=("i",), where="pos[...]")
            return BOOL
        if isinstance(e, A.PosName):
            if e.name not in builtins.UNARY:
                raise RaspError(f"'{e.name}' is not a positional predicate of i", e.span,
                                "write the relation inline: pos[i % 2 == 0]")
            if e.name not in self.imports:
                raise RaspError(f"'{e.name}' is not imported", e.span, f"add '#import {e.name}'")
            return BOOL
        if isinstance(e, A.RASPL_NODES):
            self.raspl = True
        if isinstance(e, (A.Tokens, A.Indices)):
            return COUNT
        if isinstance(e, A.Map):
            for a in e.args:
                self.want_value(a, bound, f"an argument of {'map' if len(e.args) == 1 else 'seqmap'}")
            return self.rel_type(e.body, e.params, "a map function", in_map=True)
        if isinstance(e, A.Select):
            self.want_value(e.keys, bound, "the keys of select")
            self.want_value(e.queries, bound, "the queries of select")
            return A.SELECTOR
        if isinstance(e, (A.Aggregate, A.SelectorWidth)):
            what = "aggregate" if isinstance(e, A.Aggregate) else "selector_width"
            if self.expr(e.selector, bound) != A.SELECTOR:
                raise RaspError(f"the first argument of {what} must be a selector", e.selector.span,
                                "make one with select(keys, queries, op)")
            if isinstance(e, A.Aggregate):
                self.want_value(e.values, bound, "the values of aggregate")
            return COUNT
        if isinstance(e, A.Quant):
            if e.var in bound:
                raise RaspError(f"'{e.var}' is already bound here", e.var_span or e.span, "use another variable name")
            t = self.expr(e.body, bound | {e.var})
            want = COUNT if e.op == "sum" else BOOL
            if t != want:
                raise RaspError(f"{e.op}(...) needs a {want} body, got a {t}", e.body.span,
                                "any/all take a bool, sum takes a count")
            return want
        raise TypeError(f"unexpected node {e!r}")

    # ------------------------------------------------------------------ relations
    def guard(self, g: A.Guard) -> None:
        if isinstance(g, A.GuardName):
            if g.name not in builtins.BINARY:
                hint = (f"'{g.name}' is a predicate of i alone: use it as a bool" if g.name in builtins.UNARY
                        else "write the relation inline, e.g. #[j == i - 1], or import pred / pred4")
                raise RaspError(f"unknown guard predicate '{g.name}'", g.span, hint)
            if g.name not in self.imports:
                raise RaspError(f"'{g.name}' is not imported", g.span, f"add '#import {g.name}'")
            return
        self.relation(g.expr, allowed=("i", "j"), where="a guard")

    def relation(self, r, allowed: tuple[str, ...], where: str) -> None:
        if self.rel_type(r, allowed, where) != BOOL:
            raise RaspError(f"{where} needs a condition, not a number", r.span,
                            "write a comparison, e.g. j == i - 1" if "j" in allowed else "e.g. i % 2 == 0")
        position_reach(r, where)


    def rel_type(self, r, allowed, where, in_map: bool = False) -> str:
        if isinstance(r, (A.PCond, A.PTable, A.PSym)) and not in_map:
            raise RaspError(f"conditionals, lookup tables and symbols are not allowed in {where}", r.span,
                            "they belong in map functions: map(x -> ..., s)")
        if isinstance(r, A.PSym):
            return COUNT
        if isinstance(r, A.PTable):
            self.rel_want(r.index, allowed, where, COUNT, in_map)
            return COUNT
        if isinstance(r, A.PCond):
            self.rel_want(r.test, allowed, where, BOOL, in_map)
            t = self.rel_type(r.then, allowed, where, in_map)
            self.rel_want(r.other, allowed, where, t, in_map)
            return t
        if isinstance(r, A.PVar):
            if r.name not in allowed:
                if in_map:  # a map function reads its parameters only
                    raise RaspError(
                        f"unknown name '{r.name}' in {where}", r.span,
                        f"it reads only its parameters ({', '.join(allowed)}); pass a sequence as an argument "
                        "instead (seqmap((x, y) -> ..., s, t) takes two), or compare outside the map")
                hint = ("pos[...] is a predicate of i alone" if r.name == "j"
                        else f"only {' and '.join(allowed)} may appear in {where}")
                raise RaspError(f"unknown position '{r.name}'", r.span, hint)
            return COUNT
        if isinstance(r, A.PInt):
            return COUNT
        if isinstance(r, A.PBool):
            return BOOL
        if isinstance(r, A.PNeg):
            self.rel_want(r.operand, allowed, where, COUNT, in_map)
            return COUNT
        if isinstance(r, A.PBin):
            self.rel_want(r.left, allowed, where, COUNT, in_map)
            self.rel_want(r.right, allowed, where, COUNT, in_map)
            if r.op in "/%" and not (isinstance(r.right, A.PInt) and r.right.value > 0):
                raise RaspError(
                    f"'{r.op}' needs a positive integer constant on its right", r.right.span,
                    f"write e.g. {allowed[0]} % 2 or {allowed[0]} / 3" if in_map
                    else "write e.g. (i - j) % 2 or i / 3",
                )
            return COUNT
        if isinstance(r, A.PCmp):
            self.rel_want(r.left, allowed, where, COUNT, in_map)
            self.rel_want(r.right, allowed, where, COUNT, in_map)
            return BOOL
        if isinstance(r, (A.PAnd, A.POr)):
            self.rel_want(r.left, allowed, where, BOOL, in_map)
            self.rel_want(r.right, allowed, where, BOOL, in_map)
            return BOOL
        if isinstance(r, A.PNot):
            self.rel_want(r.operand, allowed, where, BOOL, in_map)
            return BOOL
        raise TypeError(f"unexpected relation node {r!r}")

    def rel_want(self, r, allowed, where, t, in_map: bool = False) -> None:
        got = self.rel_type(r, allowed, where, in_map)
        if got != t:
            raise RaspError(f"expected a {'number' if t == COUNT else 'condition'} here", r.span,
                            "compare positions with ==, <, <=; combine conditions with && || !")

    # ------------------------------------------------------------------ output
    def output(self, decl: A.OutputDecl | None) -> None:
        if decl is None:
            last = None
            for s in self.module.statements:
                if isinstance(s, A.Definition):
                    last = s
            if last is None:
                raise RaspError("the program defines nothing", Span(1, 1, 1, 2), "write at least one definition NAME = expression")
            if last.params or self.types[last.name] != BOOL:
                raise RaspError(
                    f"the last definition '{last.name}' is the output and must be a plain bool", last.span,
                    "add 'output accept NAME', 'output generate FAMILY' or 'output predict FAMILY'",
                )
            return
        if decl.name not in self.defs:
            raise RaspError(f"unknown name '{decl.name}'", decl.name_span or decl.span,
                            _suggest(decl.name, self.defs) or "the output names a definition of this program")
        d = self.defs[decl.name]
        t = self.types[decl.name]
        if decl.kind == "accept" and (d.params or t != BOOL):
            raise RaspError(f"'output accept' needs a plain bool definition", decl.name_span or decl.span,
                            f"'{decl.name}' is a {t}{' family' if d.params else ''}")
        if decl.kind in ("generate", "predict") and (len(d.params) != 1 or t != BOOL):
            raise RaspError(f"'output {decl.kind}' needs a bool family over one symbol, NAME[x] = ...",
                            decl.name_span or decl.span,
                            f"'{decl.name}' is a {t}" + (f" family over {len(d.params)} symbol{'s' if len(d.params) > 1 else ''}"
                                                         if d.params else ""))


def _repeated(decl) -> tuple[str, Span | None]:
    """The first symbol an alphabet or special declaration lists again, and where it does."""
    seen: set[str] = set()
    for k, x in enumerate(decl.symbols):
        if x in seen:
            return x, _symbol_span(decl, k)
        seen.add(x)
    raise ValueError("no symbol is repeated")


def _symbol_span(decl, k: int) -> Span | None:
    """Where an alphabet or special declaration lists its k-th symbol (the whole declaration for one
    rebuilt with other symbols, which keeps no spans of its own)."""
    return decl.symbol_spans[k] if len(decl.symbol_spans) == len(decl.symbols) else decl.span


def position_reach(r, where: str) -> tuple[int, int]:
    """Bounds (lo, hi) of a guard's or ``pos[...]``'s arithmetic at positions 0 to
    :data:`POSITION_BOUND` (interval arithmetic); a subterm that could pass
    :data:`POSITION_ARITH_CAP` in magnitude is a located error. The analysis of relations
    (:mod:`rasp.guards`) is exact integer arithmetic while evaluation uses 64-bit integers: within
    the cap they agree (beyond it evaluation would wrap around and the two would differ)."""
    if isinstance(r, A.PInt):
        return r.value, r.value
    if isinstance(r, A.PVar):
        return 0, POSITION_BOUND
    if isinstance(r, A.PNeg):
        lo, hi = position_reach(r.operand, where)
        return -hi, -lo
    if isinstance(r, A.PNot):
        position_reach(r.operand, where)
        return 0, 1
    if isinstance(r, A.PBool):
        return 0, 1
    (a, b), (c, d) = position_reach(r.left, where), position_reach(r.right, where)
    if not isinstance(r, A.PBin):
        return 0, 1  # comparisons and connectives: a bool
    if r.op == "+":
        lo, hi = a + c, b + d
    elif r.op == "-":
        lo, hi = a - d, b - c
    elif r.op == "*":
        corners = (a * c, a * d, b * c, b * d)
        lo, hi = min(corners), max(corners)
    elif r.op == "%":  # Python's modulo by a positive constant: in [0, k - 1]
        k = r.right.value
        lo, hi = (a, b) if 0 <= a and b < k else (0, k - 1)
    else:  # floor division by a positive constant
        lo, hi = a // r.right.value, b // r.right.value
    reach = max(abs(lo), abs(hi))
    if reach > POSITION_ARITH_CAP:
        raise RaspError(f"this arithmetic in {where} can reach {reach:,} at positions up to 2^31: beyond 2^63 - 1 "
                        "64-bit integers would wrap around", r.span,
                        "use smaller constants or fewer factors of positions")
    return lo, hi


#: positions the bound of :func:`position_reach` allows for (inputs of up to 2^31 tokens)
POSITION_BOUND = 1 << 31
#: the most a guard's or pos[...]'s arithmetic may reach in magnitude (64-bit evaluation stays exact)
POSITION_ARITH_CAP = (1 << 63) - 1


def check_module(module: A.Module) -> Checked:
    """Type-check a surface module; raise :class:`RaspError` at the first problem."""
    c = _Checker(module)
    alphabet, special, output = c.declarations()
    for s in module.statements:
        if isinstance(s, A.Definition):
            c.type_of(s.name, None)
    c.output(output)
    sigs = {n: Signature(c.types[n], len(d.params), d) for n, d in c.defs.items()}
    return Checked(sigs, tuple(c.order), alphabet, special, frozenset(c.imports), output, c.raspl)
