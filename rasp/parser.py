"""Text -> surface AST.

The grammar (``grammar.lark``) is LALR(1) with lark's contextual lexer, so a syntax error is found
at the first token that cannot continue a program, with the set of tokens that could have. This
module turns lark's parse tree into :mod:`rasp.ast` nodes carrying source spans, and lark's
exceptions into :class:`~rasp.errors.RaspError` with a hint.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from . import ast as A
from .errors import RaspError, Span, quoted, source_lines

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
    """A symbol's text. Inputs are whitespace-separated tokens, so a quoted symbol that is empty or
    holds whitespace could never be given as input: a located error."""
    if tok.type != "STRING":
        return str(tok)
    text = str(tok)[1:-1]
    problem = A.symbol_problem(text)
    if problem:
        raise RaspError(f"the quoted symbol {tok} {problem}: inputs are tokens separated by whitespace, so it "
                        "could never be given", _tspan(tok), 'write a symbol without spaces, e.g. "<sep>"')
    return text


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
        if str(name) in KEYWORDS:
            raise RaspError(
                f"'{name}' is a keyword and cannot name a definition",
                _tspan(name),
                f"{_KEYWORD_USE.get(str(name), 'it is part of the language')}; choose another name",
            )
        params: tuple = ()
        if len(children) == 3:
            params = children[1]
        return A.Definition(str(name), params, children[-1], span=_span(meta), name_span=_tspan(name))

    def params(self, meta, children):
        return tuple(children)

    def symvar(self, meta, children):
        return A.SymVar(str(children[0]), span=_tspan(children[0]))

    def symlit(self, meta, children):
        return A.SymLit(_unquote(children[0]), span=_tspan(children[0]))

    def symbol(self, meta, children):
        return children[0]

    def alphabet_decl(self, meta, children):
        return A.AlphabetDecl(tuple(_unquote(t) for t in children), span=_span(meta),
                              symbol_spans=tuple(_tspan(t) for t in children))

    def special_decl(self, meta, children):
        return A.SpecialDecl(tuple(_unquote(t) for t in children), span=_span(meta),
                             symbol_spans=tuple(_tspan(t) for t in children))

    def import_decl(self, meta, children):
        return A.Import(str(children[1]), span=_span(meta), name_span=_tspan(children[1]))

    def output_decl(self, meta, children):
        kind, name = children
        if str(kind) not in A.OUTPUT_KINDS:
            raise RaspError(
                f"unknown output kind '{kind}'",
                _tspan(kind),
                "write 'output accept NAME', 'output generate NAME' or 'output predict NAME'",
            )
        return A.OutputDecl(str(kind), str(name), span=_span(meta), name_span=_tspan(name))

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
        a, b = _constant_value(left), _constant_value(right)
        if a is not None and b is not None and abs(a * b) <= INT_LIMIT:
            # a constant product is a constant, so that it can scale a count (2 * 3 * #"a" is 6 * #"a");
            # a larger one stays a product (constant parts are bounded by the type checker)
            k = A.IntConst(abs(a * b), span=_span(meta))
            return k if a * b >= 0 else A.Neg(k, span=_span(meta))
        for const, other in ((left, right), (right, left)):
            if _constant_value(const) is not None:
                # a product of constants too large to be one constant scales a count factor by factor,
                # as the same factors written after the count do (the magnitude checks decide)
                return _scaled(const, other, _span(meta))
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
        return A.IntConst(_int_literal(c[0]), span=_span(meta))

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
        return A.Quant(op, str(c[0]), c[1], span=_span(meta), var_span=_tspan(c[0]))

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
        return _int_literal(c[0])

    def neg_int(self, meta, c):
        return -_int_literal(c[0])

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
        return A.PInt(_int_literal(c[0]), span=_span(meta))

    def p_var(self, meta, c):
        return A.PVar(str(c[0]), span=_span(meta))

    def p_true(self, meta, c):
        return A.PBool(True, span=_span(meta))

    def p_false(self, meta, c):
        return A.PBool(False, span=_span(meta))


#: the largest integer constant a program may write: values are computed in 64-bit integers, and a
#: count is at most the input length, so sums and multiples of counts by such constants stay exact
#: (see also the magnitude bound of count expressions, rasp.expand.check_magnitudes)
INT_LIMIT = 2**31 - 1


def _int_literal(token) -> int:
    value = int(token)
    if value > INT_LIMIT:
        raise RaspError(f"integer constant {token} is too large (the limit is 2^31 - 1 = {INT_LIMIT:,})", _tspan(token),
                        "values are computed in 64-bit integers; use a smaller constant")
    return value


def _literal_int(e) -> int | None:
    if isinstance(e, A.IntConst):
        return e.value
    if isinstance(e, A.Neg) and isinstance(e.operand, A.IntConst):
        return -e.operand.value
    return None


def _constant_value(e) -> int | None:
    """The value of an integer literal or a product of them (``Scale`` nodes over a literal), else None."""
    k = _literal_int(e)
    if k is not None:
        return k
    if isinstance(e, A.Scale):
        inner = _constant_value(e.operand)
        return None if inner is None else e.k * inner
    return None


def _scaled(const, e, span):
    """``e`` scaled by the factors of the constant product ``const``, one ``Scale`` per factor."""
    k = _literal_int(const)
    if k is not None:
        return A.Scale(k, e, span=span)
    return A.Scale(const.k, _scaled(const.operand, e, span), span=span)


# ---------------------------------------------------------------------- error messages
_TOKEN_WORDS = {
    "_NL": "end of line", "$END": "end of input", "EQUAL": "'='", "NAME": "a name",
    "STRING": 'a quoted symbol like "a"', "INT": "an integer", "CMPOP": "a comparison",
    "IMPORT": "'#import'",
}

#: how each keyword is used (hints for a keyword where a name was meant)
_KEYWORD_USE = {
    "alphabet": "'alphabet a b c' declares the data symbols",
    "special": "'special \"<sep>\"' declares extra tokens",
    "output": "'output accept|generate|predict NAME' declares the output",
    "if": "'C1 if P else C2' is a conditional", "else": "'C1 if P else C2' is a conditional",
    "exists": "'exists P' is #P >= 1", "true": "'true' is a constant", "false": "'false' is a constant",
    "min": "'min(C1, C2)' is the smaller count", "max": "'max(C1, C2)' is the larger count",
    "pos": "'pos[i % 2 == 0]' is a positional predicate",
    "any": "'any(x, P)' is an or over symbols", "all": "'all(x, P)' is an and over symbols",
    "sum": "'sum(x, C)' adds over symbols",
}

#: tokens that can start an expression
_STARTS = {"NAME", "STRING", "INT", "HASH", "BANG", "LPAR", "MINUS", "EXISTS", "TRUE", "FALSE",
           "MIN", "MAX", "POS", "ANY", "ALL", "SUM"}

_CLOSE = {"(": ")", "[": "]", "{": "}"}


def _word(name: str) -> str:
    if name in _TOKEN_WORDS:
        return _TOKEN_WORDS[name]
    try:
        term = _lark().get_terminal(name)
    except KeyError:
        return name.lower()
    if term.pattern.type == "str":
        return repr(term.pattern.value)
    return name.lower()


def _describe(expected: set[str]) -> str:
    words = sorted({_word(e) for e in expected})
    if len(words) > 10:
        words = words[:10] + ["..."]
    return ", ".join(words)


def _open_bracket(line_text: str, col: int) -> tuple[str, int] | None:
    """The innermost bracket still open before 1-based column ``col`` (and its column)."""
    stack: list[tuple[str, int]] = []
    in_string = False
    for k, ch in enumerate(line_text[: max(col - 1, 0)]):
        if ch == '"':
            in_string = not in_string
        elif in_string:
            continue
        elif ch == "/" and line_text[k:k + 2] == "//":
            break
        elif ch in _CLOSE:
            stack.append((ch, k + 1))
        elif ch in _CLOSE.values() and stack and _CLOSE[stack[-1][0]] == ch:
            stack.pop()
    return stack[-1] if stack else None


def _statement_hint(line_text: str) -> str | None:
    """A hint from the statement's first word, for declarations cut short or malformed."""
    words = line_text.split()
    first = words[0] if words else ""
    if first == "output":
        return "write 'output accept NAME', 'output generate FAMILY' or 'output predict FAMILY'"
    if first in ("alphabet", "special"):
        return f'list the symbols separated by spaces: {first} a b "<sep>" 0'
    if first == "#import":
        return "write '#import pred', '#import pred4' or '#import pos_even', one per line"
    return None


def _hint_for_token(tok: Token, expected: set[str], line_text: str, history=()) -> str | None:
    value = str(tok)
    prev = history[-1] if history else None
    if value in ("and", "or", "not"):
        return {"and": "use && for 'and'", "or": "use || for 'or'", "not": "use ! for 'not'"}[value]
    if prev is not None and str(prev) in _KEYWORD_USE and prev.type != "NAME" and (
            "LPAR" in expected or "LSQB" in expected):
        return f"'{prev}' is a keyword: {_KEYWORD_USE[str(prev)]}; it cannot be used as a name"
    if value == "=" and prev is not None and str(prev) == "=":
        return "'==' compares; a definition is NAME = expression (one '=')"
    if tok.type == "EQUAL" and "CMPOP" in expected:
        return "'=' defines a name; compare with '==' (or <=, >=)"
    if tok.type == "EQUAL":
        return "one definition per line: NAME = expression (compare with '==')"
    if value in ("/", "%") and tok.type not in expected:
        return "'/' and '%' are allowed only inside guards #[...] and pos[...]; counts use + - and k * C"
    if tok.type == "CMPOP" and "EQUAL" in expected:
        return f"a definition is written NAME = expression, with one '=', not '{value}'"
    declared = _statement_hint(line_text)
    if declared and not line_text.split()[0] == value:
        return declared
    bracket = _open_bracket(line_text, tok.column)
    if tok.type == "_NL" and bracket:
        return f"the '{bracket[0]}' at column {bracket[1]} is never closed: is '{_CLOSE[bracket[0]]}' missing?"
    if tok.type == "_NL":
        return "the expression is incomplete"
    if tok.type == "CMPOP" and "CMPOP" not in expected:
        return "comparisons do not chain: write (a < b) && (b < c)"
    if tok.type == "NAME" and "EQUAL" in expected:
        return "a statement is NAME = expression"
    if tok.type in _STARTS and "_NL" in expected:
        return "two expressions side by side: is an operator missing? (one statement per line)"
    if (value == "(" and bracket and bracket[0] == "[" and prev is not None and prev.type == "NAME"
            and re.search(r"(?:#|\bpos)\s*$", line_text[:bracket[1] - 1])):
        # a call inside a guard or pos[...]: their arithmetic is over the positions i and j only
        return (f"'{prev}(...)' inside '[': guards #[...] and pos[...] relate the positions i and j with "
                "integer arithmetic; counts and RASP-L values cannot appear in them")
    call = re.search(r"\b(min|max)\s*$", line_text[:bracket[1] - 1]) if bracket and bracket[0] == "(" else None
    if call and value in (",", ")"):  # max(a, b, c) or max(a): not a bracket left open
        return (f"{call.group(1)} takes two arguments: {call.group(1)}(a, b); nest it for more: "
                f"{call.group(1)}(a, {call.group(1)}(b, c))")
    if bracket and _CLOSE[bracket[0]] in {_word(e).strip("'") for e in expected}:
        return f"the '{bracket[0]}' at column {bracket[1]} is not closed: is '{_CLOSE[bracket[0]]}' missing?"
    if "EQUAL" in expected:
        return "a statement is NAME = expression"
    return None


_CHAR_HINTS = {
    "'": 'symbols are written in double quotes: "a"',
    "&": "logical and is written &&",
    "|": "logical or is written ||",
    "=": "'=' defines a name; compare with '==' (or <=, >=)",
    ";": "one statement per line, without ';'",
    "?": "a conditional is written C1 if P else C2",
    ":": "a conditional is written C1 if P else C2",
    "^": "there is no '^': use && / || for logic",
    "/": "'/' and '%' are allowed only inside guards #[...] and pos[...]",
    "%": "'/' and '%' are allowed only inside guards #[...] and pos[...]",
}


def _error_from_lark(exc: UnexpectedInput, text: str) -> RaspError:
    lines = source_lines(text)
    line = getattr(exc, "line", 1) or 1
    col = getattr(exc, "column", 1) or 1
    line_text = lines[line - 1] if 0 < line <= len(lines) else ""
    if isinstance(exc, UnexpectedCharacters):
        ch = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else "?"
        if ch == '"' and '"' not in line_text[col:]:
            return RaspError("unterminated quoted symbol", Span(line, col, line, len(line_text) + 1),
                             'close the quote on the same line: "a"')
        hint = _CHAR_HINTS.get(ch)
        if hint is None:
            allowed = set(exc.allowed or ())
            hint = f"{ch!r} is not part of the language" + (f"; expected {_describe(allowed)}" if allowed else "")
        return RaspError(f"unexpected character {ch!r}", Span(line, col, line, col + 1), hint)
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        if tok.type == "$END":
            return RaspError("unexpected end of input", Span(line, col, line, col + 1), "the program ends mid-statement")
        expected = set(exc.expected or ())
        shown = "end of line" if tok.type == "_NL" else quoted(str(tok))
        span = Span(tok.line, tok.column, tok.end_line or tok.line, tok.end_column or tok.column + 1)
        if tok.type == "_NL":
            span = Span(tok.line, tok.column, tok.line, tok.column + 1)
        history = tuple(getattr(exc, "token_history", None) or ())
        hint = _hint_for_token(tok, expected, line_text, history) or f"expected {_describe(expected)}"
        return RaspError(f"unexpected {shown}", span, hint)
    if isinstance(exc, UnexpectedEOF):
        return RaspError("unexpected end of input", Span(line, col, line, col + 1), "the program ends mid-statement")
    return RaspError(str(exc), Span(line, col, line, col + 1), "check the syntax of this line")


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
        if not isinstance(exc.orig_exc, RecursionError):  # (lark wraps what a rule's method raises)
            raise
    except RecursionError:
        pass
    raise RaspError("an expression is nested too deeply to process", _deepest_statement(tree),
                    "split it into several definitions").located(text, filename) from None


def _deepest_statement(tree: Tree) -> Span | None:
    """The span of the statement whose parse tree nests most deeply (iteratively)."""
    best, best_depth = None, 0
    for stmt in tree.children:
        if isinstance(stmt, Tree):
            d = A.depth(stmt, lambda t: [c for c in t.children if isinstance(c, Tree)])
            if d > best_depth:
                best, best_depth = _span(stmt.meta), d
    return best
