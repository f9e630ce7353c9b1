"""Surface AST + alphabet -> core program.

Expansion is mechanical and preserves meaning exactly:

* a family ``P[x, y] = e`` becomes one definition ``P[a,b]`` per tuple of data symbols, with the
  variables replaced by the symbols;
* ``any(x, e)`` / ``all(x, e)`` / ``sum(x, e)`` become ``||`` / ``&&`` / ``+`` over the data
  alphabet, in alphabet order, as balanced trees (depth log2 of the alphabet size);
* ``exists[g] P`` becomes ``#[g] P >= 1``; ``-C`` becomes ``-1 * C``;
* imported predicates become their relations (:mod:`rasp.builtins`).

Every core node keeps the span of the surface node it came from.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import re

from . import ast as A
from . import builtins
from .errors import EmptyAlphabetError, ExpansionError, MagnitudeError, RaspError, listing
from .printer import expr_to_str
import operator

from .typecheck import Checked, symbol_comparison

#: symbol comparisons (``x == "a"``, ``x < y``) compare positions in the alphabet (data, then specials)
_SYMBOL_CMP = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt,
               "<=": operator.le, ">=": operator.ge}

#: v OP y is y TURNED[OP] v (== and != are their own)
_TURNED = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}


def _codes_where(op: str, v: int, n: int) -> int:
    """How many data codes c (0 .. n-1: the alphabet's symbols come first) satisfy ``c OP v``."""
    below = min(max(v, 0), n)  # c < v
    if op == "<":
        return below
    if op == ">=":
        return n - below
    at = 1 if 0 <= v < n else 0  # c == v (a special's code is n or more)
    return {"==": at, "!=": n - at, "<=": below + at, ">": n - below - at}[op]


STANDARD_SYMBOLS = tuple("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def instance_key(name: str, symbols: tuple[str, ...]) -> str:
    """The core name of a family instance: ``P[a,b]``; plain definitions keep their name. A symbol
    with a comma (or starting with a quote) is written as a JSON string (``P[a,"b,c"]``), so that two
    instances never share a name (``P["a","b,c"]`` and ``P["a,b","c"]`` would both be ``P[a,b,c]``,
    and one definition would overwrite the other); brackets need nothing (``P[[]``: the name is an
    identifier, the outer brackets are its first ``[`` and the last character)."""
    if not symbols:
        return name
    return f"{name}[{','.join(json.dumps(s, ensure_ascii=False) if ',' in s or s.startswith(chr(34)) else s for s in symbols)}]"


def parse_alphabet_option(text: str) -> tuple[str, ...]:
    """``--alphabet`` values: ``a,b,c`` or ``a b c``, or ``N`` for the first N of a-z A-Z 0-9."""
    text = text.strip()
    if re.fullmatch(r"-?[0-9]+", text):  # ASCII digits: int() also reads other scripts' digits
        n = int(text)
        if not 1 <= n <= len(STANDARD_SYMBOLS):
            raise RaspError(f"--alphabet {text}: choose 1..{len(STANDARD_SYMBOLS)} symbols, or list them",
                            hint=f"--alphabet N takes the first N of a-z A-Z 0-9; or list symbols: --alphabet a,b,c")
        return STANDARD_SYMBOLS[:n]
    if not text:
        raise RaspError("--alphabet is empty", hint="list symbols: --alphabet a,b,c")
    items = comma_items(text)
    if items is None:
        raise RaspError(f"--alphabet {text}: an empty symbol between commas",
                        hint="list symbols as a,b,c or 'a b c'")
    return tuple(s for item in items for s in item.split())


def comma_items(text: str) -> list[str] | None:
    """The items of a comma-separated flag value, stripped (spaces around commas allowed), or None
    when one between commas is empty (``a,,b``, ``16,``: a typo, not an item to drop)."""
    items = [item.strip() for item in text.split(",")]
    return None if len(items) > 1 and "" in items else items


def mentioned_symbols(module: A.Module) -> list[str]:
    """Quoted symbols in order of first appearance (the alphabet of an undeclared ``.cr`` program)."""
    seen: dict[str, None] = {}

    def visit(node):
        if isinstance(node, A.SymLit):
            seen.setdefault(node.value, None)
        elif isinstance(node, tuple):
            for x in node:
                visit(x)
        elif hasattr(node, "__dataclass_fields__"):
            for f in node.__dataclass_fields__:
                if not A.is_span_field(f):
                    visit(getattr(node, f))

    for s in module.statements:
        if isinstance(s, A.Definition):
            visit(s.expr)
    return list(seen)


def check_alphabet_override(symbols, special) -> tuple[str, ...]:
    """A replacement data alphabet (``--alphabet``, ``alphabet=``, ``with_alphabet``), checked as a
    declared one is: strings, each non-empty without whitespace (inputs are whitespace-separated),
    none twice. The program's special tokens may be listed (callers pass a task's alphabet plus its
    specials): they stay special and are left out of the data alphabet (``--alphabet`` refuses them,
    rasp.commands._common)."""
    if isinstance(symbols, str):
        raise RaspError(f"the alphabet is a list of symbols, not one string: {symbols!r}",
                        hint='e.g. ["a", "b", "c"], or parse_alphabet_option("a,b,c")')
    symbols = tuple(symbols)
    for s in symbols:
        problem = A.symbol_problem(s)
        if problem:
            raise RaspError(f"the alphabet lists {s!r}, which {problem}: a symbol is a non-empty string "
                            "without whitespace")
    twice = [s for k, s in enumerate(symbols) if s in symbols[:k]]
    if twice:
        raise RaspError(f"the alphabet lists a symbol twice: {twice[0]}", hint="list each symbol once")
    return tuple(s for s in symbols if s not in special)


def resolve_alphabet(module: A.Module, checked: Checked, override: tuple[str, ...] | None):
    special = checked.special.symbols if checked.special else ()
    if override is not None:
        alphabet = check_alphabet_override(override, special)
    elif checked.alphabet is not None:
        alphabet = checked.alphabet.symbols
    else:
        alphabet = tuple(s for s in mentioned_symbols(module) if s not in special)
    if not alphabet:
        where = checked.alphabet or next((s for s in module.statements if isinstance(s, A.Definition)), None)
        raise EmptyAlphabetError("the program has an empty alphabet", where.span if where else None,
                                 "declare one: 'alphabet a b c', or pass --alphabet")
    return tuple(alphabet), tuple(special)


#: core nodes that :meth:`_Expander.expr` rebuilds from their expanded children and nothing else
#: (a comparison outside a family compares no symbol variables)
_PLAIN = frozenset({A.And, A.Or, A.Not, A.Compare, A.Add, A.Sub, A.Min, A.Max, A.Scale})
#: leaves that are their own expansion
_LEAVES = frozenset({A.BoolConst, A.IntConst, A.PosPred, A.Tokens, A.Indices})


def _folds(test, then, other) -> bool:
    """Whether the expansion writes ``then if test else other`` (``test`` expanded) as the chosen
    branch: a symbol comparison decided a choice between two constants, so nothing but the constant
    is left to compute (a branch that computes something is kept, so every operation the program
    writes is still seen by the checker)."""
    return type(test) is A.BoolConst and type(then) is type(other) and type(then) in (A.IntConst, A.BoolConst)


class _Expander:
    def __init__(self, checked: Checked, alphabet, special) -> None:
        self.checked = checked
        self.alphabet = alphabet
        self.symbols = set(alphabet) | set(special)
        self.data = set(alphabet)
        ordered = tuple(alphabet) + tuple(t for t in special if t not in alphabet)
        self.codes_of = {t: k for k, t in enumerate(ordered)}
        # (written leaf, the symbols it is instantiated with) -> its expansion: every instance of a
        # family that reads Q[y] or P[x] with the same symbols shares one node (nodes are immutable)
        self._leaves: dict[tuple, object] = {}
        # id of a written subtree that reads no family variable -> None until expanded, then its
        # expansion, which every instance shares (see :meth:`mark_closed`)
        self._closed: dict[int, object] = {}
        self._paths: set[int] = set()  # ids of the written nodes above a closed subtree

    def mark_closed(self, e, variables: frozenset) -> bool:
        """Record the largest subtrees of ``e`` whose expansion cannot depend on the family's
        symbols: no ``SymVar`` (``Q[x]``, ``P[x]``) and no bare reference to a variable name (a symbol
        comparison ``x == "a"``). Every instance of a family then shares one expansion of each, so a
        lowered RASP-L family ``NEXT[x] = ... && tokens != END && OUT == CODE[x]`` builds its
        151-branch ``tokens != END`` once, not once per symbol, and passes that memoize by identity
        (the compiler's graph) see one object. Returns whether ``e`` itself is closed."""
        kind = type(e)
        if kind is A.Tok:
            return type(e.symbol) is not A.SymVar
        if kind is A.Ref:
            if e.indices:
                return all(type(s) is not A.SymVar for s in e.indices)
            return e.name not in variables
        before = len(self._closed)
        if kind is A.Quant:
            self.mark_closed(e.body, variables | {e.var})
        else:
            kids = A.children(e)
            flags = [self.mark_closed(c, variables) for c in kids]
            if all(flags):
                return True
            for c, closed in zip(kids, flags):
                if closed and A.children(c):  # leaves are shared through _leaves already
                    self._closed[id(c)] = None
        if len(self._closed) > before:
            self._paths.add(id(e))  # a shared subtree below
        return False

    def unchanged(self, e) -> bool:
        """Whether :meth:`expr` would return an equal expression for ``e`` outside any family or
        quantifier (``env`` empty), so that ``e`` is its own expansion: only core nodes (no ``exists``,
        unary ``-``, named predicate, ``any``/``all``/``sum``, RASP-L primitive, named guard or indexed
        reference), written symbols of the alphabet, references to definitions, and no conditional
        that the expansion folds (a constant test choosing between two constants). A lowered RASP-L
        program is mostly such definitions (raspl_ur.rasp: 10,000 nodes), which were copied node by
        node. A loop without a call per node; where it says no, :meth:`expr` expands (and reports a
        symbol outside the alphabet, located)."""
        kids_of = A._CHILDREN.get
        plain, symbols, names = _PLAIN, self.symbols, self.checked.signatures
        stack = [e]
        while stack:
            n = stack.pop()
            kind = type(n)
            if kind in plain:
                kids = kids_of(kind)
                if kids is not None:
                    stack.extend(kids(n))
            elif kind is A.Tok:
                if type(n.symbol) is not A.SymLit or n.symbol.value not in symbols:
                    return False
            elif kind is A.Ref:
                if n.indices or n.name not in names:
                    return False
            elif kind is A.Count:
                if n.guard is not None and type(n.guard) is not A.Rel:
                    return False
                stack.append(n.body)
            elif kind is A.Cond:
                if _folds(n.test, n.then, n.other):
                    return False
                stack.extend((n.test, n.then, n.other))
            elif kind not in _LEAVES:
                return False
        return True

    def sym(self, s: A.SymRef, env: dict[str, str]) -> str:
        if isinstance(s, A.SymVar):
            return env[s.name]
        if s.value not in self.symbols:
            raise RaspError(
                f"symbol \"{s.value}\" is not in the alphabet: {listing(self.alphabet)}",
                s.span,
                "add it to the 'alphabet' or 'special' declaration, or to --alphabet",
            )
        return s.value

    def codes(self, r):
        """A map function with every symbol ``"a"`` replaced by its code (index in alphabet + special)."""
        return symbol_codes(r, self.codes_of, self.alphabet)

    def guard(self, g):
        if g is None or isinstance(g, A.Rel):
            return g
        return A.Rel(builtins.BINARY[g.name], span=g.span)

    def chain(self, node_type, parts, span):
        """``p1 op p2 op ... op pn``, balanced (a left-nested chain over 2,000 symbols would be 2,000
        deep)."""
        return A.balanced(lambda a, b: node_type(a, b, span=span), parts)

    def shared_expr(self, e, env: dict[str, str]):
        """:meth:`expr` while a family with closed subtrees (:meth:`mark_closed`) is expanded: each
        of those is expanded once and shared. It stands in for ``expr`` only then (an attribute of
        the instance), so other definitions pay nothing for it."""
        hit = self._closed.get(id(e), False)
        if hit is False:
            if id(e) in self._paths:
                return _Expander.expr(self, e, env)
            del self.expr  # nothing shared below: the plain method for the whole subtree
            try:
                return _Expander.expr(self, e, env)
            finally:
                self.expr = self.shared_expr
        if hit is None:
            hit = self._closed[id(e)] = _Expander.expr(self, e, env)
        return hit

    def symbol_count(self, e: A.Quant, env: dict[str, str]) -> int | None:
        """``sum(y, c1 if y < x else c2)`` (any symbol comparison of the summed variable with a bound
        variable, a written symbol or itself, or of two fixed sides; two written constants) as the
        number it expands to, the parts whose comparison holds counted by arithmetic on the codes
        (:func:`_codes_where`); None for any other sum. The expansion of each part would fold to c1 or
        c2 (:func:`_folds`) and the sum of constants to its value: this is that value without the
        |alphabet| parts (raspl_count.rasp's ``CODE[x]``, a symbol's code, is 22,500 of them over 150
        symbols)."""
        body = e.body
        if type(body) is not A.Cond or type(body.test) is not A.Compare:
            return None
        then, other, test = body.then, body.other, body.test
        if type(then) is not A.IntConst or type(other) is not A.IntConst or not symbol_comparison(test, {**env, e.var: None}):
            return None
        codes_of = self.codes_of

        def side(v):  # the code of a side, or None for the summed variable
            if isinstance(v, A.Ref):
                return None if v.name == e.var else codes_of[env[v.name]]
            return codes_of[self.sym(v.symbol, env)]

        left, right = side(test.left), side(test.right)
        n = len(self.alphabet)
        if (left is None) == (right is None):  # y OP y, or two fixed sides: every part or none
            holds = _SYMBOL_CMP[test.op](0, 0) if left is None else _SYMBOL_CMP[test.op](left, right)
            hits = n if holds else 0
        elif left is None:
            hits = _codes_where(test.op, right, n)
        else:  # (v OP y is y OP' v with the order comparison turned round)
            hits = _codes_where(_TURNED.get(test.op, test.op), left, n)
        return then.value * hits + other.value * (n - hits)

    def expr(self, e, env: dict[str, str]):
        x = self.expr  # children: x(child, env) (a bound method, not a closure: one call per child)
        sp = e.span
        kind = type(e)  # the AST's classes have no subclasses
        if kind in A.BINARY and kind is not A.Compare:  # the commonest first (&& || + - min max)
            return kind(x(e.left, env), x(e.right, env), span=sp)
        if kind is A.Tok:
            value = self.sym(e.symbol, env)
            if type(e.symbol) is A.SymLit:
                return e  # a written symbol (checked by sym): the node is its own expansion
            key = (id(e), value)
            hit = self._leaves.get(key)
            if hit is None:
                hit = self._leaves[key] = A.Tok(A.SymLit(value, span=e.symbol.span), span=sp)
            return hit
        if kind is A.BoolConst or kind is A.IntConst:
            return e
        if kind is A.Ref:
            if e.name not in self.checked.signatures and e.name in builtins.UNARY:
                return A.PosPred(A.Rel(builtins.UNARY[e.name], span=sp), span=sp)
            args = tuple(self.sym(s, env) for s in e.indices)
            key = (id(e), args)
            hit = self._leaves.get(key)
            if hit is not None:
                return hit
            for s, a in zip(e.indices, args):
                if a not in self.data:  # instances exist for data symbols only (as any/all/sum range)
                    raise RaspError(f"'{e.name}' is a family over the data alphabet; \"{a}\" is a special token, "
                                    "so there is no instance for it", s.span,
                                    f"families range over: {' '.join(self.alphabet)}; test a special token directly, "
                                    f"e.g. Q[\"{a}\"]")
            hit = self._leaves[key] = A.Ref(instance_key(e.name, args), span=sp)
            return hit
        # the rest by type, the kinds of families' bodies first (exists, comparisons, counts, not)
        if kind is A.Exists:
            return A.Compare(">=", A.Count(self.guard(e.guard), x(e.body, env), span=sp), A.IntConst(1, span=sp), span=sp)
        if kind is A.Compare:
            if symbol_comparison(e, env):
                left, right = (env[v.name] if isinstance(v, A.Ref) else self.sym(v.symbol, env) for v in (e.left, e.right))
                return A.BoolConst(bool(_SYMBOL_CMP[e.op](self.codes_of[left], self.codes_of[right])), span=sp)
            return A.Compare(e.op, x(e.left, env), x(e.right, env), span=sp)
        if kind is A.Count:
            return A.Count(self.guard(e.guard), x(e.body, env), span=sp)
        if kind is A.Not:
            return A.Not(x(e.operand, env), span=sp)
        if kind is A.Quant:
            if e.op == "sum":
                count = self.symbol_count(e, env)
                if count is not None:
                    return A.IntConst(count, span=sp)
            parts = [self.expr(e.body, {**env, e.var: a}) for a in self.alphabet]
            if e.op == "sum" and all(type(p) is A.IntConst for p in parts):
                # a sum of constants (``sum(y, 1 if y < x else 0)``, a symbol's code) is its value:
                # kept as a chain, every later pass would add it up again (150 x 150 terms in
                # raspl_count.rasp's CODE family)
                return A.IntConst(sum(p.value for p in parts), span=sp)
            node = {"any": A.Or, "all": A.And, "sum": A.Add}[e.op]
            return self.chain(node, parts, sp)
        if kind is A.Cond:
            test = x(e.test, env)
            then, other = e.then, e.other
            if _folds(test, then, other):
                return then if test.value else other
            return A.Cond(test, x(then, env), x(other, env), span=sp)
        if kind is A.Scale:
            return A.Scale(e.k, x(e.operand, env), span=sp)
        if kind is A.Neg:
            return A.Scale(-1, x(e.operand, env), span=sp)
        if kind is A.PosName:
            return A.PosPred(A.Rel(builtins.UNARY[e.name], span=sp), span=sp)
        if kind is A.PosPred or kind is A.Tokens or kind is A.Indices:
            return e
        if kind is A.Map:
            return A.Map(e.params, self.codes(e.body), tuple(x(a, env) for a in e.args), span=sp)
        if kind is A.Select:
            return A.Select(x(e.keys, env), x(e.queries, env), e.op, span=sp)
        if kind is A.Aggregate:
            return A.Aggregate(x(e.selector, env), x(e.values, env), e.reduction, e.default, span=sp)
        if kind is A.SelectorWidth:
            return A.SelectorWidth(x(e.selector, env), span=sp)
        raise TypeError(f"unexpected node {e!r}")


def expand(module: A.Module, checked: Checked, alphabet_override: tuple[str, ...] | None = None) -> A.CoreProgram:
    """Expand a type-checked surface module into a :class:`~rasp.ast.CoreProgram`."""
    alphabet, special = resolve_alphabet(module, checked, alphabet_override)
    check_magnitudes(checked, len(alphabet), len(alphabet) + len(special))
    check_expansion(checked, len(alphabet))
    ex = _Expander(checked, alphabet, special)
    shares = set()  # the families with closed subtrees
    for name in checked.order:
        sig = checked.signatures[name]
        if sig.arity and len(alphabet) > 1:  # instances would repeat what does not depend on the symbols
            e = sig.definition.expr
            marked = len(ex._closed)
            if ex.mark_closed(e, frozenset(p.name for p in sig.definition.params)) and A.children(e):
                ex._closed[id(e)] = None  # the whole body: every instance is the same expression
            if len(ex._closed) > marked:
                shares.add(name)
    defs: list[A.CoreDef] = []
    for name in checked.order:
        sig = checked.signatures[name]
        d = sig.definition
        if name in shares:
            ex.expr = ex.shared_expr  # the recursion's ``self.expr`` finds it before the method
        else:
            vars(ex).pop("expr", None)
        if not sig.arity and ex.unchanged(d.expr):  # (no family: no shared subtrees either)
            defs.append(A.CoreDef(name, d.expr, sig.type, span=d.span))
            continue
        for combo in itertools.product(alphabet, repeat=sig.arity):
            env = {p.name: s for p, s in zip(d.params, combo)}
            defs.append(A.CoreDef(instance_key(name, combo), ex.expr(d.expr, env), sig.type, span=d.span))
    out = checked.output
    if out is None:
        last = [s for s in module.statements if isinstance(s, A.Definition)][-1]
        output = A.Output("accept", (last.name,), span=last.span)
    elif out.kind == "accept":
        output = A.Output("accept", (out.name,), span=out.span)
    else:
        output = A.Output(out.kind, tuple(instance_key(out.name, (a,)) for a in alphabet), span=out.span)
    return A.CoreProgram(tuple(defs), alphabet, special, output)


#: the most copies of written expressions a program may expand into: a family over k symbol
#: variables, with quantifiers nested q deep in its body, makes |alphabet|^(k + q) of them (UR over
#: 3,000 symbols: 18 million, which ran for minutes and out of memory)
EXPANSION_CAP = 1 << 22


def check_expansion(checked: Checked, alphabet_size: int) -> None:
    """Refuse, at the largest family, a program whose expansion over the alphabet passes
    :data:`EXPANSION_CAP` copies (before any is made)."""
    sizes = {}
    for name in checked.order:
        sig = checked.signatures[name]
        k = sig.arity + A.quantifier_depth(sig.definition.expr)
        sizes[name] = alphabet_size ** k if k else 1
    total = sum(sizes.values())
    if total > EXPANSION_CAP:
        name = max(sizes, key=sizes.get)
        raise ExpansionError(f"over {alphabet_size:,} symbols this program expands into about {total:,} copies of its "
                        f"expressions (at most {EXPANSION_CAP:,}); {name} alone makes {sizes[name]:,}",
                        checked.signatures[name].definition.span,
                        "use a smaller alphabet (--alphabet), or fewer symbol variables in this definition")


#: the largest multiple of the input length a count expression may reach, and the largest constant
#: part: with inputs shorter than 2^31 tokens every value stays below 2^62 + 2^61 < 2^63, exact in
#: the interpreter's 64-bit integers
MAGNITUDE_LIMIT = 2**31
CONSTANT_LIMIT = 2**61


#: the expressions with a bound of their own (every other one is a bool, count, index, selector or
#: selector width: (1, 0), with count arithmetic to check only inside)
_VALUE_KINDS = frozenset({A.IntConst, A.Add, A.Sub, A.Scale, A.Neg, A.Min, A.Max, A.Cond, A.Quant, A.Tokens,
                          A.Map, A.Aggregate})
_KIDS = A._CHILDREN.get


def check_magnitudes(checked: Checked, alphabet_size: int, codes: int) -> None:
    """Refuse a count expression whose value could overflow 64-bit integers on a long input.

    The bound (c, k) with ``|e| <= c * n + k`` on inputs of n tokens, on the surface program (before
    families are expanded, so its cost does not grow with the alphabet): a count or a bool (1, 0), a
    constant (0, |k|), ``k * C`` scales both, a sum or difference adds them, ``sum(x, C)`` multiplies
    them by |alphabet|, min/max/a conditional takes the larger of each, a reference its definition's
    bound. RASP-L values: ``indices`` and ``selector_width`` (1, 0), ``tokens`` (0, number of codes ``codes``),
    an aggregate its values' bound (and its default's), a map the bound of its function over its
    arguments' bounds (:func:`map_bound`), or *no bound* (None) where that is not of the form c * n + k
    (a product of two values that grow with n) or passes the limits (a map may wrap around 2^63).
    A value with no bound may be compared, chosen by min/max/a conditional or aggregated, but ``+``,
    ``-``, ``k *`` or ``sum`` on it are refused: they could overflow where the map did not.
    A located :class:`~rasp.errors.MagnitudeError` at the first expression with c over :data:`MAGNITUDE_LIMIT` or k over
    :data:`CONSTANT_LIMIT`."""
    of_def: dict[str, tuple[int, int] | None] = {}
    # id of a composite expression -> its bound: a lowered RASP-L program shares subtrees (half of
    # raspl_ur.rasp's 12,436 nodes), and a bound depends only on the expression (its references'
    # definitions come earlier in the order)
    seen: dict[int, tuple[int, int] | None] = {}

    def bounded(e, sub) -> tuple[int, int]:  # the bound of an operand of + - k* sum: it must have one
        m = bound(sub)
        if m is None:
            raise MagnitudeError(
                f"'{expr_to_str(sub)}' is a RASP-L value with no bound of the form c * n + k (a map can multiply two "
                "values that grow with the input, or wrap around 2^63): arithmetic on it could overflow 64-bit "
                "integers", e.span, "compare it, or do the arithmetic inside the map")
        return m

    def bound(e) -> tuple[int, int] | None:
        kind = type(e)
        if kind is A.Tok or kind is A.BoolConst:  # leaves of bool expressions, the commonest nodes
            return (1, 0)
        if kind is A.Ref:  # its definition's bound, checked there
            return of_def.get(e.name, (1, 0))
        key = id(e)  # (the memo in this frame: a frame more per level would halve how deep a
        if key in seen:  # left-nested sum of counts may nest before Python's limit)
            return seen[key]
        if kind not in _VALUE_KINDS:  # bools, counts, ...: (1, 0); only count arithmetic inside can
            kids = _KIDS(kind)  # fail (tested before the value cases: most nodes are these; the
            if kids is not None:  # children looked up here, not through A.children: a call less)
                for child in kids(e):
                    bound(child)
            seen[key] = (1, 0)
            return (1, 0)
        if kind is A.IntConst:
            m = (0, abs(e.value))
        elif kind in (A.Add, A.Sub):
            (a, b), (c, d) = bounded(e, e.left), bounded(e, e.right)
            m = (a + c, b + d)
        elif kind is A.Scale:
            a, b = bounded(e, e.operand)
            m = (abs(e.k) * a, abs(e.k) * b)
        elif kind is A.Neg:
            m = bounded(e, e.operand)
        elif kind in (A.Min, A.Max, A.Cond):
            if kind is A.Cond:
                bound(e.test)
            x, y = (bound(e.left), bound(e.right)) if kind is not A.Cond else (bound(e.then), bound(e.other))
            m = None if x is None or y is None else (max(x[0], y[0]), max(x[1], y[1]))
        elif kind is A.Quant:
            if e.op == "sum":
                a, b = bounded(e, e.body)
                m = (a * alphabet_size, b * alphabet_size)
            else:
                bound(e.body)
                m = (1, 0)
        elif kind is A.Tokens:
            m = (0, codes)
        elif kind is A.Map:
            m = map_bound(e.body, {p: bound(a) for p, a in zip(e.params, e.args)}, codes)
            if m is not None and (m[0] > MAGNITUDE_LIMIT or m[1] > CONSTANT_LIMIT):
                m = None  # a map computes what it computes (wrapping): only arithmetic on it is refused
            seen[key] = m
            return m
        elif kind is A.Aggregate:
            bound(e.selector)
            v = bound(e.values)
            m = None if v is None else (v[0], max(v[1], abs(e.default)))
            seen[key] = m
            return m
        seen[key] = m
        if m is None:
            return None
        if m[0] > MAGNITUDE_LIMIT:
            raise MagnitudeError(f"this expression can reach {m[0]:,} times the input length: too large for exact "
                            f"64-bit arithmetic on long inputs (the limit is {MAGNITUDE_LIMIT:,} times)", e.span,
                            "use smaller constants or coefficients")
        if m[1] > CONSTANT_LIMIT:
            raise MagnitudeError(f"this expression's constant part can reach {m[1]:,}: too large for exact 64-bit "
                            f"arithmetic (the limit is 2^61)", e.span, "use smaller constants")
        return m

    for name in checked.order:
        of_def[name] = bound(checked.signatures[name].definition.expr)


def map_bound(f: A.PosExpr, env: dict, codes: int) -> tuple[int, int] | None:
    """A bound (c, k) with ``|f| <= c * n + k`` for a map's function f whose variables are bounded by
    ``env`` (None: no bound), or None when there is none of that form: constants and symbols (codes
    below ``codes``) (0, |v|); ``+``/``-`` add bounds; ``*`` multiplies them while one side is constant
    (c = 0), else None; ``/`` by a positive constant keeps its left bound, ``%`` is below its divisor;
    comparisons and logic (0, 1); a conditional the larger branch; a table its largest |value| (a
    missing key gives 0)."""
    def go(r):
        kind = type(r)
        if kind is A.PInt:
            return (0, abs(r.value))
        if kind is A.PBool or kind in (A.PCmp, A.PAnd, A.POr, A.PNot):
            return (0, 1)
        if kind is A.PSym:
            return (0, codes)
        if kind is A.PVar:
            return env.get(r.name)
        if kind is A.PNeg:
            return go(r.operand)
        if kind is A.PTable:
            return (0, max((abs(v) for _, v in r.entries), default=0))
        if kind is A.PCond:
            x, y = go(r.then), go(r.other)
            return None if x is None or y is None else (max(x[0], y[0]), max(x[1], y[1]))
        if kind is A.PBin:
            x, y = go(r.left), go(r.right)
            if r.op == "%":  # Python's modulo by a positive constant (the type checker's rule)
                return None if y is None else (0, y[1])
            if x is None or y is None:
                return None
            if r.op in ("+", "-"):
                return (x[0] + y[0], x[1] + y[1])
            if r.op == "/":
                return x
            if x[0] and y[0]:
                return None  # quadratic in n
            return (x[0] * y[1] + y[0] * x[1], x[1] * y[1])
        return None

    return go(f)


def symbol_codes(r, codes_of: dict[str, int], alphabet=()):
    """A map function with every symbol ``"a"`` replaced by its code (``codes_of``: index in alphabet
    + special); a symbol outside them is a located error naming ``alphabet``."""
    if isinstance(r, A.PSym):
        if r.value not in codes_of:
            raise RaspError(f"symbol \"{r.value}\" is not in the alphabet: {listing(alphabet)}", r.span,
                            "add it to the 'alphabet' or 'special' declaration, or to --alphabet")
        return A.PInt(codes_of[r.value], span=r.span)
    if not dataclasses.is_dataclass(r):
        return r
    changes = {f.name: symbol_codes(getattr(r, f.name), codes_of, alphabet) for f in dataclasses.fields(r)
               if not A.is_span_field(f.name) and dataclasses.is_dataclass(getattr(r, f.name))}
    return dataclasses.replace(r, **changes) if changes else r
