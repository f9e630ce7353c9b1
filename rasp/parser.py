"""Text -> surface AST.

The grammar (``grammar.lark``) is LALR(1) with lark's contextual lexer, so a syntax error is found
at the first token that cannot continue a program, with the set of tokens that could have. This
module turns lark's parse tree into :mod:`rasp.ast` nodes carrying source spans, and lark's
exceptions into :class:`~rasp.errors.RaspError` with a hint.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from . import ast as A
from .errors import RaspError, Span

GRAMMAR = Path(__file__).with_name("grammar.lark")

#: Names that the grammar treats as keywords (they cannot name a definition).
KEYWORDS = frozenset(
    "alphabet special output if else exists true false min max pos any all sum "
    "tokens indices full map seqmap select aggregate selector_width".split()
)


@lru_cache(maxsize=1)
def _lark() -> Lark:
    return Lark(
        GRAMMAR.read_text(),
        parser="lalr",
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=False,
    )


def _span(meta) -> Span | None:
    if getattr(meta, "empty", True):
        return None
    return Span(meta.line, meta.column, meta.end_line, meta.end_column)


def _tspan(tok: Token) -> Span:
    return Span(tok.line, tok.column, tok.end_line, tok.end_column)


def _unquote(tok: Token) -> str:
    return str(tok)[1:-1] if tok.type == "STRING" else str(tok)


@v_args(meta=True)
class _ToAst(Transformer):
    # ------------------------------------------------------------------ statements
    def start(self, meta, children):
        return A.Module(tuple(children), span=_span(meta))

    def definition(self, meta, children):
        name = children[0]
        if str(name) in ("Q", "i", "j"):
            raise RaspError(
                f"'{name}' is reserved and cannot name a definition",
                _tspan(name),
                "Q[x] is the token test; i and j are positions in guards",
            )
        params: tuple = ()
        if len(children) == 3:
            params = children[1]
        return A.Definition(str(name), params, children[-1], span=_span(meta))

    def params(self, meta, children):
        return tuple(children)

    def symvar(self, meta, children):
        return A.SymVar(str(children[0]), span=_tspan(children[0]))

    def symlit(self, meta, children):
        return A.SymLit(_unquote(children[0]), span=_tspan(children[0]))

    def symbol(self, meta, children):
        return children[0]

    def alphabet_decl(self, meta, children):
        return A.AlphabetDecl(tuple(_unquote(t) for t in children), span=_span(meta))

    def special_decl(self, meta, children):
        return A.SpecialDecl(tuple(_unquote(t) for t in children), span=_span(meta))

    def import_decl(self, meta, children):
        return A.Import(str(children[1]), span=_span(meta))

    def output_decl(self, meta, children):
        kind, name = children
        if str(kind) not in ("accept", "generate", "predict"):
            raise RaspError(
                f"unknown output kind '{kind}'",
                _tspan(kind),
                "write 'output accept NAME', 'output generate NAME' or 'output predict NAME'",
            )
        return A.OutputDecl(str(kind), str(name), span=_span(meta))

    # ------------------------------------------------------------------ expressions
    def cond(self, meta, c):
        then, test, other = c
        return A.Cond(test, then, other, span=_span(meta))

    def or_(self, meta, c):
        return A.Or(c[0], c[1], span=_span(meta))

    def and_(self, meta, c):
        return A.And(c[0], c[1], span=_span(meta))

    def not_(self, meta, c):
        return A.Not(c[0], span=_span(meta))

    def compare(self, meta, c):
        return A.Compare(str(c[1]), c[0], c[2], span=_span(meta))

    def add(self, meta, c):
        return A.Add(c[0], c[1], span=_span(meta))

    def sub(self, meta, c):
        return A.Sub(c[0], c[1], span=_span(meta))

    def mul(self, meta, c):
        left, right = c
        k = _literal_int(left)
        if k is not None:
            return A.Scale(k, right, span=_span(meta))
        k = _literal_int(right)
        if k is not None:
            return A.Scale(k, left, span=_span(meta))
        raise RaspError(
            "multiplication needs an integer constant on one side",
            _span(meta),
            "C-RASP multiplies counts only by constants: write k * C",
        )

    def neg(self, meta, c):
        return A.Neg(c[0], span=_span(meta))

    def count(self, meta, c):
        guard, body = (c[0], c[1]) if len(c) == 2 else (None, c[0])
        return A.Count(guard, body, span=_span(meta))

    def exists(self, meta, c):
        guard, body = (c[0], c[1]) if len(c) == 2 else (None, c[0])
        return A.Exists(guard, body, span=_span(meta))

    def guard(self, meta, c):
        rel = c[0]
        if isinstance(rel, A.PVar) and rel.name not in ("i", "j"):
            return A.GuardName(rel.name, span=rel.span)
        return A.Rel(rel, span=_span(meta))

    def tok(self, meta, c):
        return A.Tok(A.SymLit(_unquote(c[0]), span=_tspan(c[0])), span=_span(meta))

    def int(self, meta, c):
        return A.IntConst(int(c[0]), span=_span(meta))

    def true(self, meta, c):
        return A.BoolConst(True, span=_span(meta))

    def false(self, meta, c):
        return A.BoolConst(False, span=_span(meta))

    def ref(self, meta, c):
        name, indices = str(c[0]), tuple(c[1:])
        if name == "Q":
            if len(indices) != 1:
                raise RaspError(
                    "Q takes exactly one symbol: Q[x] or Q[\"a\"]", _span(meta), 'write Q["a"] or "a"'
                )
            return A.Tok(indices[0], span=_span(meta))
        if name in ("i", "j"):
            raise RaspError(
                f"position '{name}' can only be used inside a guard #[...] or pos[...]",
                _span(meta),
                "C-RASP has no arithmetic on positions outside guards and positional predicates",
            )
        return A.Ref(name, indices, span=_span(meta))

    def min(self, meta, c):
        return A.Min(c[0], c[1], span=_span(meta))

    def max(self, meta, c):
        return A.Max(c[0], c[1], span=_span(meta))

    def pos(self, meta, c):
        rel = c[0]
        if isinstance(rel, A.PVar) and rel.name not in ("i", "j"):
            return A.PosName(rel.name, span=rel.span)
        return A.PosPred(A.Rel(rel, span=rel.span), span=_span(meta))

    def _quant(self, op, meta, c):
        return A.Quant(op, str(c[0]), c[1], span=_span(meta))

    def any_(self, meta, c):
        return self._quant("any", meta, c)

    def all_(self, meta, c):
        return self._quant("all", meta, c)

    def sum_(self, meta, c):
        return self._quant("sum", meta, c)

    # ------------------------------------------------------------------ RASP-L
    def rl_tokens(self, meta, c):
        return A.Tokens(span=_span(meta))

    def rl_indices(self, meta, c):
        return A.Indices(span=_span(meta))

    def rl_full(self, meta, c):
        # full(k) is the constant sequence k: the same node as the literal, so printing is canonical
        k = c[0]
        if k >= 0:
            return A.IntConst(k, span=_span(meta))
        return A.Neg(A.IntConst(-k, span=_span(meta)), span=_span(meta))

    def rl_map(self, meta, c):
        return A.Map((str(c[0]),), c[1], (c[2],), span=_span(meta))

    def rl_seqmap(self, meta, c):
        if str(c[0]) == str(c[1]):
            raise RaspError("seqmap's two parameters need different names", _tspan(c[1]), "write (x, y) -> ...")
        return A.Map((str(c[0]), str(c[1])), c[2], (c[3], c[4]), span=_span(meta))

    def rl_select(self, meta, c):
        return A.Select(c[0], c[1], c[2], span=_span(meta))

    def select_op(self, meta, c):
        return str(c[0]) if c else "true"

    def rl_aggregate(self, meta, c):
        reduction, default = "mean", 0
        if len(c) >= 3:
            reduction = str(c[2])
            if reduction not in ("mean", "max", "min"):
                raise RaspError(f"unknown reduction '{reduction}'", _tspan(c[2]), "aggregate reduces with mean, max or min")
        if len(c) == 4:
            default = c[3]
        return A.Aggregate(c[0], c[1], reduction, default, span=_span(meta))

    def rl_width(self, meta, c):
        return A.SelectorWidth(c[0], span=_span(meta))

    def signed_int(self, meta, c):
        return int(c[0])

    def neg_int(self, meta, c):
        return -int(c[0])

    def p_cond(self, meta, c):
        then, test, other = c
        return A.PCond(test, then, other, span=_span(meta))

    def p_sym(self, meta, c):
        return A.PSym(_unquote(c[0]), span=_span(meta))

    def table_entry(self, meta, c):
        return (c[0], c[1])

    def p_table(self, meta, c):
        entries, index = tuple(c[:-1]), c[-1]
        keys = [k for k, _ in entries]
        if len(set(keys)) != len(keys):
            raise RaspError("a lookup table lists a key twice", _span(meta), "each key once: {0: 1, 1: 0}[x]")
        return A.PTable(entries, index, span=_span(meta))

    # ------------------------------------------------------------------ relations
    def p_or(self, meta, c):
        return A.POr(c[0], c[1], span=_span(meta))

    def p_and(self, meta, c):
        return A.PAnd(c[0], c[1], span=_span(meta))

    def p_not(self, meta, c):
        return A.PNot(c[0], span=_span(meta))

    def p_cmp(self, meta, c):
        return A.PCmp(str(c[1]), c[0], c[2], span=_span(meta))

    def _pbin(self, op, meta, c):
        return A.PBin(op, c[0], c[1], span=_span(meta))

    def p_add(self, meta, c):
        return self._pbin("+", meta, c)

    def p_sub(self, meta, c):
        return self._pbin("-", meta, c)

    def p_mul(self, meta, c):
        return self._pbin("*", meta, c)

    def p_div(self, meta, c):
        return self._pbin("/", meta, c)

    def p_mod(self, meta, c):
        return self._pbin("%", meta, c)

    def p_neg(self, meta, c):
        return A.PNeg(c[0], span=_span(meta))

    def p_int(self, meta, c):
        return A.PInt(int(c[0]), span=_span(meta))

    def p_var(self, meta, c):
        return A.PVar(str(c[0]), span=_span(meta))

    def p_true(self, meta, c):
        return A.PBool(True, span=_span(meta))

    def p_false(self, meta, c):
        return A.PBool(False, span=_span(meta))


def _literal_int(e) -> int | None:
    if isinstance(e, A.IntConst):
        return e.value
    if isinstance(e, A.Neg) and isinstance(e.operand, A.IntConst):
        return -e.operand.value
    return None


# ---------------------------------------------------------------------- error messages
_TOKEN_WORDS = {
    "_NL": "end of line", "$END": "end of input", "EQUAL": "'='", "NAME": "a name",
    "STRING": 'a quoted symbol like "a"', "INT": "an integer", "CMPOP": "a comparison",
    "LPAR": "'('", "RPAR": "')'", "LSQB": "'['", "RSQB": "']'", "COMMA": "','",
    "PLUS": "'+'", "MINUS": "'-'", "STAR": "'*'", "SLASH": "'/'", "PERCENT": "'%'",
    "BANG": "'!'", "HASH": "'#'", "IMPORT": "'#import'",
}


def _describe(expected: set[str]) -> str:
    words = sorted({_TOKEN_WORDS.get(e, repr(e.strip('"').lower()) if e.isupper() else e) for e in expected})
    if len(words) > 8:
        words = words[:8] + ["..."]
    return ", ".join(words)


def _hint_for_token(tok: Token, expected: set[str], line_text: str) -> str | None:
    value = str(tok)
    if value in ("and", "or", "not"):
        return {"and": "use && for 'and'", "or": "use || for 'or'", "not": "use ! for 'not'"}[value]
    if tok.type == "EQUAL" and "CMPOP" in expected:
        return "'=' defines a name; compare with '=='"
    if tok.type == "EQUAL":
        return "one definition per line: NAME = expression (compare with '==')"
    if tok.type == "_NL" and ("RPAR" in expected or "RSQB" in expected):
        return "an opening bracket on this line is never closed"
    if tok.type == "_NL":
        return "the expression is incomplete"
    if tok.type == "CMPOP" and "CMPOP" not in expected:
        return "comparisons do not chain: write (a < b) && (b < c)"
    if tok.type == "NAME" and "EQUAL" in expected:
        return "a statement is NAME = expression"
    if tok.type in ("NAME", "STRING", "INT") and "_NL" in expected:
        return "two expressions side by side: is an operator missing? (one statement per line)"
    if "EQUAL" in expected:
        return "a statement is NAME = expression"
    return None


def _error_from_lark(exc: UnexpectedInput, text: str) -> RaspError:
    lines = text.splitlines()
    line = getattr(exc, "line", 1) or 1
    col = getattr(exc, "column", 1) or 1
    line_text = lines[line - 1] if 0 < line <= len(lines) else ""
    if isinstance(exc, UnexpectedCharacters):
        ch = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else "?"
        hint = {
            "'": 'symbols are written in double quotes: "a"',
            "&": "logical and is written &&",
            "|": "logical or is written ||",
            "=": None,
        }.get(ch, f"expected {_describe(set(exc.allowed or ()))}" if exc.allowed else None)
        return RaspError(f"unexpected character {ch!r}", Span(line, col, line, col + 1), hint)
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        if tok.type == "$END":
            return RaspError("unexpected end of input", Span(line, col, line, col + 1), "the program ends mid-statement")
        expected = set(exc.expected or ())
        shown = "end of line" if tok.type == "_NL" else repr(str(tok))
        span = Span(tok.line, tok.column, tok.end_line or tok.line, tok.end_column or tok.column + 1)
        if tok.type == "_NL":
            span = Span(tok.line, tok.column, tok.line, tok.column + 1)
        hint = _hint_for_token(tok, expected, line_text) or f"expected {_describe(expected)}"
        return RaspError(f"unexpected {shown}", span, hint)
    if isinstance(exc, UnexpectedEOF):
        return RaspError("unexpected end of input", Span(line, col, line, col + 1), "the program ends mid-statement")
    return RaspError(str(exc), Span(line, col, line, col + 1))


def parse_module(text: str, filename: str | None = None) -> A.Module:
    """Parse program text into a surface :class:`~rasp.ast.Module` (no name or type checks)."""
    src = text if text.endswith("\n") else text + "\n"
    try:
        tree = _lark().parse(src)
    except UnexpectedInput as exc:
        raise _error_from_lark(exc, text).located(text, filename) from None
    try:
        return _ToAst().transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, RaspError):
            raise exc.orig_exc.located(text, filename) from None
        raise
