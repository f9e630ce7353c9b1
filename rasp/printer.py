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


def _level(e) -> int:
    if isinstance(e, A.Cond):
        return _COND
    if isinstance(e, A.Or):
        return _OR
    if isinstance(e, A.And):
        return _AND
    if isinstance(e, A.Compare):
        return _CMP
    if isinstance(e, (A.Add, A.Sub)):
        return _SUM
    if isinstance(e, A.Scale):
        return _PROD
    if isinstance(e, (A.Not, A.Neg, A.Count, A.Exists)):
        return _UNARY
    if isinstance(e, A.IntConst) and e.value < 0:
        return _UNARY  # only reachable from hand-built ASTs
    return _ATOM


def _at(e, minimum: int) -> str:
    s = expr_to_str(e)
    return f"({s})" if _level(e) < minimum else s


def sym_to_str(s: A.SymRef) -> str:
    return s.name if isinstance(s, A.SymVar) else f'"{s.value}"'


def guard_to_str(g: A.Guard | None) -> str:
    if g is None:
        return ""
    if isinstance(g, A.GuardName):
        return f"[{g.name}]"
    return f"[{rel_to_str(g.expr)}]"


def expr_to_str(e) -> str:
    if isinstance(e, A.Cond):
        return f"{_at(e.then, _OR)} if {_at(e.test, _OR)} else {_at(e.other, _COND)}"
    if isinstance(e, A.Or):
        return f"{_at(e.left, _OR)} || {_at(e.right, _AND)}"
    if isinstance(e, A.And):
        return f"{_at(e.left, _AND)} && {_at(e.right, _CMP)}"
    if isinstance(e, A.Compare):
        return f"{_at(e.left, _SUM)} {e.op} {_at(e.right, _SUM)}"
    if isinstance(e, A.Add):
        return f"{_at(e.left, _SUM)} + {_at(e.right, _PROD)}"
    if isinstance(e, A.Sub):
        return f"{_at(e.left, _SUM)} - {_at(e.right, _PROD)}"
    if isinstance(e, A.Scale):
        return f"{e.k} * {_at(e.operand, _UNARY)}"
    if isinstance(e, A.Not):
        return f"!{_at(e.operand, _UNARY)}"
    if isinstance(e, A.Neg):
        return f"-{_at(e.operand, _UNARY)}"
    if isinstance(e, A.Count):
        body = _at(e.body, _UNARY)
        return f"#{guard_to_str(e.guard)} {body}" if e.guard else f"#{body}"
    if isinstance(e, A.Exists):
        return f"exists{guard_to_str(e.guard)} {_at(e.body, _UNARY)}"
    if isinstance(e, A.Tok):
        return f'"{e.symbol.value}"' if isinstance(e.symbol, A.SymLit) else f"Q[{e.symbol.name}]"
    if isinstance(e, A.BoolConst):
        return "true" if e.value else "false"
    if isinstance(e, A.IntConst):
        return str(e.value)
    if isinstance(e, A.Ref):
        if not e.indices:
            return e.name
        return f"{e.name}[{', '.join(sym_to_str(s) for s in e.indices)}]"
    if isinstance(e, A.Min):
        return f"min({expr_to_str(e.left)}, {expr_to_str(e.right)})"
    if isinstance(e, A.Max):
        return f"max({expr_to_str(e.left)}, {expr_to_str(e.right)})"
    if isinstance(e, A.PosPred):
        return f"pos[{rel_to_str(e.rel.expr)}]"
    if isinstance(e, A.PosName):
        return f"pos[{e.name}]"  # a bare name parses as a reference (Ref), not as PosName
    if isinstance(e, A.Quant):
        return f"{e.op}({e.var}, {expr_to_str(e.body)})"
    if isinstance(e, A.Tokens):
        return "tokens"
    if isinstance(e, A.Indices):
        return "indices"
    if isinstance(e, A.Map):
        args = ", ".join(expr_to_str(a) for a in e.args)
        if len(e.params) == 1:
            return f"map({e.params[0]} -> {rel_to_str(e.body)}, {args})"
        return f"seqmap(({', '.join(e.params)}) -> {rel_to_str(e.body)}, {args})"
    if isinstance(e, A.Select):
        return f"select({expr_to_str(e.keys)}, {expr_to_str(e.queries)}, {e.op})"
    if isinstance(e, A.Aggregate):
        return f"aggregate({expr_to_str(e.selector)}, {expr_to_str(e.values)}, {e.reduction}, {e.default})"
    if isinstance(e, A.SelectorWidth):
        return f"selector_width({expr_to_str(e.selector)})"
    raise TypeError(f"not an expression node: {e!r}")


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
