"""Surface AST -> canonical source text.

The canonical form uses the fewest parentheses the grammar's precedences allow (plus parentheses
under ``!`` in relations, for readability), one statement per line, single spaces around binary
operators. ``parse(print(m)) == m`` for every module, and printing is idempotent.
"""
from __future__ import annotations

import re

from . import ast as A
from .parser import KEYWORDS

# expression precedence: higher binds tighter
_COND, _OR, _AND, _CMP, _SUM, _PROD, _UNARY, _ATOM = range(8)
_BARE = re.compile(r"^(?:[A-Za-z_][A-Za-z_0-9]*|[0-9]+)$")


_LEVELS = {A.Cond: _COND, A.Or: _OR, A.And: _AND, A.Compare: _CMP, A.Add: _SUM, A.Sub: _SUM,
           A.Scale: _PROD, A.Not: _UNARY, A.Neg: _UNARY, A.Count: _UNARY, A.Exists: _UNARY}


def _at(e, minimum: int) -> str:
    """``e`` printed, in parentheses when it binds less tightly than ``minimum``."""
    s = expr_to_str(e)
    level = _LEVELS.get(type(e))  # the AST's classes have no subclasses
    if level is None:  # an atom; a negative literal only in hand-built ASTs
        level = _UNARY if isinstance(e, A.IntConst) and e.value < 0 else _ATOM
    return f"({s})" if level < minimum else s


def sym_to_str(s: A.SymRef) -> str:
    return s.name if isinstance(s, A.SymVar) else f'"{s.value}"'


def guard_to_str(g: A.Guard | None) -> str:
    if g is None:
        return ""
    if isinstance(g, A.GuardName):
        return f"[{g.name}]"
    return f"[{rel_to_str(g.expr)}]"


def _ref(e) -> str:
    if not e.indices:
        return e.name
    return f"{e.name}[{', '.join(sym_to_str(s) for s in e.indices)}]"


def _count(e) -> str:
    body = _at(e.body, _UNARY)
    return f"#{guard_to_str(e.guard)} {body}" if e.guard else f"#{body}"


def _seq(e) -> str:
    """A sequence argument of a RASP-L primitive: a constant is printed as the ``full(k)`` it was
    written as (the parser makes both the same node; ``select(tokens, 1, ==)`` read oddly in reasons)."""
    if type(e) is A.IntConst:
        return f"full({e.value})"
    if type(e) is A.Neg and type(e.operand) is A.IntConst:
        return f"full(-{e.operand.value})"
    return expr_to_str(e)


def _map(e) -> str:
    args = ", ".join(_seq(a) for a in e.args)
    if len(e.params) == 1:
        return f"map({e.params[0]} -> {rel_to_str(e.body)}, {args})"
    return f"seqmap(({', '.join(e.params)}) -> {rel_to_str(e.body)}, {args})"


def _cond_chain(e) -> str:
    """``v0 if t0 else v1 if t1 else ... else vn``: the else side of a conditional needs no
    parentheses when it is a conditional, so a chain is printed in a loop, not one recursion per
    level (a lowered RASP-L value has one level per token code: hundreds)."""
    if type(e.other) is not A.Cond:  # one level (the common case in labels)
        return f"{_at(e.then, _OR)} if {_at(e.test, _OR)} else {_at(e.other, _COND)}"
    parts = []
    while type(e) is A.Cond:
        parts.append(f"{_at(e.then, _OR)} if {_at(e.test, _OR)} else ")
        e = e.other
    return "".join(parts) + _at(e, _COND)


def _left_chain(ops: dict, right_level: int):
    """A printer for left-nested chains of the binary operators ``ops`` (class -> symbol) that share
    one precedence level: ``a || b || c`` is ``(a || b) || c``, whose left side needs no parentheses,
    so it is printed in a loop (the RASP-L lowering writes token sets as such chains, as long as the
    alphabet)."""
    level = _LEVELS[next(iter(ops))]

    def printer(e) -> str:
        if type(e.left) not in ops:  # one level (the common case in labels)
            return f"{_at(e.left, level)} {ops[type(e)]} {_at(e.right, right_level)}"
        rights = []
        while type(e) in ops:
            rights.append(f" {ops[type(e)]} {_at(e.right, right_level)}")
            e = e.left
        return _at(e, level) + "".join(reversed(rights))
    return printer


_sum_chain = _left_chain({A.Add: "+", A.Sub: "-"}, _PROD)

#: expression class -> its printer (labels of compiled models print thousands of expressions)
_PRINTERS = {
    A.Cond: _cond_chain,
    A.Or: _left_chain({A.Or: "||"}, _AND),
    A.And: _left_chain({A.And: "&&"}, _CMP),
    A.Compare: lambda e: f"{_at(e.left, _SUM)} {e.op} {_at(e.right, _SUM)}",
    A.Add: _sum_chain,
    A.Sub: _sum_chain,
    A.Scale: lambda e: f"{e.k} * {_at(e.operand, _UNARY)}",
    A.Not: lambda e: f"!{_at(e.operand, _UNARY)}",
    A.Neg: lambda e: f"-{_at(e.operand, _UNARY)}",
    A.Count: _count,
    A.Exists: lambda e: f"exists{guard_to_str(e.guard)} {_at(e.body, _UNARY)}",
    A.Tok: lambda e: f'"{e.symbol.value}"' if isinstance(e.symbol, A.SymLit) else f"Q[{e.symbol.name}]",
    A.BoolConst: lambda e: "true" if e.value else "false",
    A.IntConst: lambda e: str(e.value),
    A.Ref: _ref,
    A.Min: lambda e: f"min({expr_to_str(e.left)}, {expr_to_str(e.right)})",
    A.Max: lambda e: f"max({expr_to_str(e.left)}, {expr_to_str(e.right)})",
    A.PosPred: lambda e: f"pos[{rel_to_str(e.rel.expr)}]",
    A.PosName: lambda e: f"pos[{e.name}]",  # a bare name parses as a reference (Ref), not as PosName
    A.Quant: lambda e: f"{e.op}({e.var}, {expr_to_str(e.body)})",
    A.Tokens: lambda e: "tokens",
    A.Indices: lambda e: "indices",
    A.Map: _map,
    A.Select: lambda e: f"select({_seq(e.keys)}, {_seq(e.queries)}, {e.op})",
    A.Aggregate: lambda e: f"aggregate({expr_to_str(e.selector)}, {_seq(e.values)}, {e.reduction}, {e.default})",
    A.SelectorWidth: lambda e: f"selector_width({expr_to_str(e.selector)})",
}


def expr_to_str(e) -> str:
    printer = _PRINTERS.get(type(e))
    if printer is None:
        raise TypeError(f"not an expression node: {e!r}")
    return printer(e)


# relation precedence
_POR, _PAND, _PNOT, _PCMP, _PSUM, _PPROD, _PNEG, _PATOM = range(8)


def _plevel(r) -> int:
    if isinstance(r, A.PCond):
        return _POR - 1
    if isinstance(r, A.POr):
        return _POR
    if isinstance(r, A.PAnd):
        return _PAND
    if isinstance(r, A.PNot):
        return _PNOT
    if isinstance(r, A.PCmp):
        return _PCMP
    if isinstance(r, A.PBin):
        return _PSUM if r.op in "+-" else _PPROD
    if isinstance(r, A.PNeg):
        return _PNEG
    if isinstance(r, A.PInt) and r.value < 0:
        return _PNEG
    return _PATOM


def _pat(r, minimum: int) -> str:
    s = rel_to_str(r)
    return f"({s})" if _plevel(r) < minimum else s


def rel_to_str(r) -> str:
    if isinstance(r, A.PCond):
        return f"{_pat(r.then, _POR)} if {_pat(r.test, _POR)} else {rel_to_str(r.other)}"
    if isinstance(r, A.PTable):
        entries = ", ".join(f"{k}: {v}" for k, v in r.entries)
        return f"{{{entries}}}[{rel_to_str(r.index)}]"
    if isinstance(r, A.PSym):
        return f'"{r.value}"'
    if isinstance(r, A.POr):
        return f"{_pat(r.left, _POR)} || {_pat(r.right, _PAND)}"
    if isinstance(r, A.PAnd):
        return f"{_pat(r.left, _PAND)} && {_pat(r.right, _PNOT)}"
    if isinstance(r, A.PNot):
        return f"!{_pat(r.operand, _PATOM)}"
    if isinstance(r, A.PCmp):
        return f"{_pat(r.left, _PSUM)} {r.op} {_pat(r.right, _PSUM)}"
    if isinstance(r, A.PBin):
        if r.op in "+-":
            return f"{_pat(r.left, _PSUM)} {r.op} {_pat(r.right, _PPROD)}"
        return f"{_pat(r.left, _PPROD)} {r.op} {_pat(r.right, _PNEG)}"
    if isinstance(r, A.PNeg):
        return f"-{_pat(r.operand, _PNEG)}"
    if isinstance(r, A.PInt):
        return str(r.value)
    if isinstance(r, A.PVar):
        return r.name
    if isinstance(r, A.PBool):
        return "true" if r.value else "false"
    raise TypeError(f"not a relation node: {r!r}")


def symbol_decl(s: str) -> str:
    return s if _BARE.match(s) and s not in KEYWORDS else f'"{s}"'


def statement_to_str(s) -> str:
    if isinstance(s, A.AlphabetDecl):
        return "alphabet " + " ".join(symbol_decl(x) for x in s.symbols)
    if isinstance(s, A.SpecialDecl):
        return "special " + " ".join(symbol_decl(x) for x in s.symbols)
    if isinstance(s, A.Import):
        return f"#import {s.name}"
    if isinstance(s, A.OutputDecl):
        return f"output {s.kind} {s.name}"
    if isinstance(s, A.Definition):
        params = f"[{', '.join(sym_to_str(p) for p in s.params)}]" if s.params else ""
        return f"{s.name}{params} = {expr_to_str(s.expr)}"
    raise TypeError(f"not a statement: {s!r}")


def module_to_str(m: A.Module) -> str:
    return "".join(statement_to_str(s) + "\n" for s in m.statements)
