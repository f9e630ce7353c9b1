"""Hypothesis strategies for C-RASP programs and their inputs.

Property-test your own programs, or the tool itself::

    from hypothesis import given
    import rasp
    from rasp.strategies import inputs, programs

    MAJ = rasp.parse('alphabet a b\\nM = #"a" > #"b"')

    @given(inputs(MAJ))
    def test_majority(tokens):
        assert rasp.run(MAJ, tokens) == (tokens.count("a") > tokens.count("b"))

* :func:`programs` -- random **well-typed** programs (:class:`rasp.Program` objects; ``str(p)`` is
  their source) restricted to a fragment, built from hypothesis primitives so failures shrink
  towards small programs;
* :func:`inputs` -- token sequences over an alphabet (or a program's symbols);
* :func:`task_inputs` / :func:`task_samples` -- inputs drawn from a registered task's sampler
  (:mod:`rasp.tasks`), hypothesis choosing the length and the seed;
* :func:`kinds` -- the operation kinds a program uses (what the coverage test measures).

Fragments (:data:`FRAGMENTS`): ``"C-RASP"`` (counts without positions), ``"C-RASP[local]"`` (guards
that are local relations: ``j == i - 1``, ``i - j <= 2``, ``j <= i - 2``, ``#[pred]``...),
``"C-RASP[periodic]"`` (``pos[i % M == r]``, ``pos_even``, guards such as ``(i - j) % 2 == 0``),
``"C-RASP[periodic,local]"`` (both, also mixed in one guard) and ``"any"`` (also relations outside
every fragment, such as ``j * j <= 3`` or ``j == i / 2``: for testing the interpreter's general path and
the checker). There is no generator of RASP-L programs here (tests/test_raspl.py has its own, for
the interpreter's RASP-L primitives).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Sequence

from hypothesis import strategies as st

from . import ast as A
from .errors import RaspError
from .expand import check_alphabet_override
from .printer import module_to_str
from .program import Program, parse
from .typecheck import check_module, symbol_comparison

__all__ = [
    "FRAGMENTS", "OPERATION_KINDS", "Features", "inputs", "irregular_guards",
    "kinds", "programs", "task_inputs", "task_samples",
]


# ----------------------------------------------------------------------------- fragments
@dataclass(frozen=True)
class Features:
    """Which positional constructs a C-RASP fragment allows."""

    local: bool = False  # guards that depend on i - j within a window (period 1)
    periodic: bool = False  # pos[...] predicates and guards that depend on residues only
    irregular: bool = False  # relations that are not regular (most outside every fragment)


#: fragment name -> what its programs may use
FRAGMENTS: dict[str, Features] = {
    "C-RASP": Features(),
    "C-RASP[local]": Features(local=True),
    "C-RASP[periodic]": Features(periodic=True),
    "C-RASP[periodic,local]": Features(local=True, periodic=True),
    "any": Features(local=True, periodic=True, irregular=True),
}


def _normalize_fragment(name: str) -> str:
    key = name.replace(" ", "")
    for k in FRAGMENTS:
        if k.replace(" ", "").lower() == key.lower():
            return k
    if key.lower() in ("c-rasp[local,periodic]", "c-rasp[pos]"):
        return "C-RASP[periodic,local]"
    known = ", ".join(sorted(FRAGMENTS))
    raise ValueError(f"unknown fragment {name!r}; known: {known}")


# ----------------------------------------------------------------------------- relation helpers
I, J = A.PVar("i"), A.PVar("j")


def _n(k: int) -> A.PInt:
    return A.PInt(k)


def _sub(a, b):
    return A.PBin("-", a, b)


def _add(a, b):
    return A.PBin("+", a, b)


def _mod(a, m: int):
    return A.PBin("%", a, _n(m))


def _div(a, m: int):
    return A.PBin("/", a, _n(m))


def _mul(k: int, a):
    return A.PBin("*", _n(k), a)


def _cmp(op, a, b):
    return A.PCmp(op, a, b)


_OPS = ("==", "!=", "<", "<=", ">", ">=")
_FLIP = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATE = {"==": "!=", "!=": "==", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def _i_minus(d: int):
    return I if d == 0 else _sub(I, _n(d))


@st.composite
def _distance_atom(draw) -> A.PosExpr:
    """A comparison of the distance i - j with a constant d, in one of many surface forms."""
    op = draw(st.sampled_from(_OPS))
    d = draw(st.integers(0, 4))
    form = draw(st.integers(0, 7))
    if form == 0:  # i - j OP d
        return _cmp(op, _sub(I, J), _n(d))
    if form == 1:  # j OP' i - d   (i - j OP d  <=>  j FLIP(OP) i - d)
        return _cmp(_FLIP[op], J, _i_minus(d))
    if form == 2:  # j + d OP' i
        return _cmp(_FLIP[op], J if d == 0 else _add(J, _n(d)), I)
    if form == 3:  # d OP' i - j
        return _cmp(_FLIP[op], _n(d), _sub(I, J))
    if form == 4:  # i - d OP j
        return _cmp(op, _i_minus(d), J)
    if form == 5:  # !(i - j NEG d)
        return A.PNot(_cmp(_NEGATE[op], _sub(I, J), _n(d)))
    if form == 6:  # k * (i - j) OP k * d
        k = draw(st.integers(2, 3))
        return _cmp(op, _mul(k, _sub(I, J)), _n(k * d))
    # (i - j) / k OP d: a bounded window after the minimal rewrite
    k = draw(st.integers(2, 3))
    return _cmp(op, _div(_sub(I, J), k), _n(d))


@st.composite
def _residue_atom(draw, unary: bool) -> A.PosExpr:
    """A periodic relation: depends on residues of i (and j) only."""
    m = draw(st.integers(1, 4))
    r = draw(st.integers(0, m - 1))
    op = draw(st.sampled_from(("==", "!=")))
    forms = 3 if unary else 8
    form = draw(st.integers(0, forms - 1))
    if form == 0:  # i % m == r
        return _cmp(op, _mod(I, m), _n(r))
    if form == 1:  # (i + k) % m == r
        return _cmp(op, _mod(_add(I, _n(draw(st.integers(1, 3)))), m), _n(r))
    if form == 2:  # i / m * m == i   (i divisible by m)
        return _cmp(op, A.PBin("*", _div(I, m), _n(m)), I)
    if form == 3:  # (i - j) % m == r
        return _cmp(op, _mod(_sub(I, J), m), _n(r))
    if form == 4:  # i % m == j % m
        return _cmp(op, _mod(I, m), _mod(J, m))
    if form == 5:  # (i + j) % m == r
        return _cmp(op, _mod(_add(I, J), m), _n(r))
    if form == 6:  # j % m == r
        return _cmp(op, _mod(J, m), _n(r))
    # (i - j) / m * m == i - j   (m divides the distance)
    return _cmp(op, A.PBin("*", _div(_sub(I, J), m), _n(m)), _sub(I, J))


def _irregular_atom(unary: bool) -> st.SearchStrategy[A.PosExpr]:
    """Relations that are not regular: products of positions, i / k against j, sums of i and j.
    (A position against a constant, ``i <= 3`` or ``j <= 3``, is not one: it is eventually periodic,
    and plain C-RASP says it with ``#true``; see :func:`rasp.rewrite.absolute_predicate`. A sum
    ``i + j <= 3`` settles once i is large, so the rewrite brings it into plain C-RASP position by
    position, :func:`rasp.rewrite.eventual_count`; the others stay outside every fragment.)"""
    k = st.integers(0, 5)
    op = st.sampled_from(_OPS)
    if unary:
        return st.builds(lambda c: _cmp("<=", A.PBin("*", I, I), _add(I, _n(c + 2))), k)  # i * i <= i + 2
    return st.one_of(
        st.builds(lambda c: _cmp("<=", A.PBin("*", J, J), _n(c + 2)), k),  # j * j <= 2 (not analysed)
        st.builds(lambda c: _cmp("==", J, _div(I, c + 2)), k),  # j == i / 2
        st.builds(lambda c: _cmp("==", _mul(c + 2, J), I), k),  # 2 * j == i
        st.builds(lambda o, c: _cmp(o, _add(I, J), _n(c)), op, k),  # i + j <= 3
        st.builds(lambda c: _cmp("<=", A.PBin("*", J, J), _add(I, _n(c))), k),  # j * j <= i + c
    )


def irregular_guards() -> st.SearchStrategy[A.Rel]:
    """Guards that are neither local nor periodic (``j * j <= 3``, ``j == i / 2``, ``2 * j == i``...):
    a count with one of these is outside every C-RASP fragment, except under the sums of i and j,
    which the rewrite brings into plain C-RASP (:func:`_irregular_atom`)."""
    return _irregular_atom(unary=False).map(A.Rel)


def _combine(atom: st.SearchStrategy) -> st.SearchStrategy[A.PosExpr]:
    """An atom, or two atoms joined by && / ||."""
    return st.one_of(
        atom,
        st.builds(A.PAnd, atom, atom),
        st.builds(A.POr, atom, atom),
    )


def _relation(features: Features, unary: bool) -> st.SearchStrategy[A.PosExpr] | None:
    atoms = []
    if features.local and not unary:
        atoms.append(_distance_atom())
    if features.periodic:
        atoms.append(_residue_atom(unary))
    if features.irregular:
        atoms.append(_irregular_atom(unary))
    if not atoms:
        return None
    return _combine(st.one_of(*atoms))


# ----------------------------------------------------------------------------- the program generator
_VARS = ("x", "y", "z", "u", "v")
_CMP_OPS = ("==", "!=", "<", "<=", ">", ">=")


@dataclass
class _Def:
    name: str
    type: str
    arity: int


class _Gen:
    """Draws one program, definition by definition, each expression type-directed."""

    def __init__(self, draw, alphabet, special, features: Features, max_depth: int, budget: int):
        self.draw = draw
        self.alphabet = tuple(alphabet)
        self.symbols = self.alphabet + tuple(s for s in special if s not in self.alphabet)
        self.features = features
        self.max_depth = max_depth
        self.budget = budget
        self.defs: list[_Def] = []
        self.imports: dict[str, None] = {}
        self.guards = _relation(features, unary=False)
        self.unary = _relation(features, unary=True)

    # ------------------------------------------------------------------ small pieces
    def pick(self, options: Sequence):
        return options[self.draw(st.integers(0, len(options) - 1))]

    def symref(self, bound: tuple[str, ...], symbols=None) -> A.SymRef:
        symbols = symbols or self.alphabet
        if bound and self.draw(st.booleans()):
            return A.SymVar(self.pick(bound))
        return A.SymLit(self.pick(symbols))

    def guard(self):
        """None (a plain count) or a guard the fragment allows."""
        if self.guards is None or not self.draw(st.booleans()):
            return None
        if self.features.local:
            choice = self.draw(st.integers(0, 5))
            if choice == 0:
                name = self.pick(("pred", "pred4"))
                self.imports[name] = None
                return A.GuardName(name)
            if choice <= 2:  # j == i - d as written: the local count the compiler takes as it is
                return A.Rel(_cmp("==", J, _i_minus(self.draw(st.integers(0, 3)))))
        return A.Rel(self.draw(self.guards))

    def positional(self):
        choice = self.draw(st.integers(0, 3))
        if choice == 0:  # imported: pos_even (a reference) or pos[pos_even]
            self.imports["pos_even"] = None
            return A.Ref("pos_even") if self.draw(st.booleans()) else A.PosName("pos_even")
        return A.PosPred(A.Rel(self.draw(self.unary)))

    # ------------------------------------------------------------------ expressions
    def leaf(self, t: str, bound: tuple[str, ...]):
        refs = [d for d in self.defs if d.type == t]
        if t == A.BOOL:
            options = ["tok", "const"]
            if refs:  # twice: later definitions build on earlier ones (and the output on them)
                options += ["ref", "ref"]
            if self.unary is not None:
                options.append("pos")
        else:
            options = ["const"]
            if refs:
                options.append("ref")
        kind = self.pick(options)
        if kind == "tok":
            return A.Tok(self.symref(bound, self.symbols))
        if kind == "const":
            return A.BoolConst(self.draw(st.booleans())) if t == A.BOOL else A.IntConst(self.draw(st.integers(0, 5)))
        if kind == "pos":
            return self.positional()
        d = self.pick(refs)
        return A.Ref(d.name, tuple(self.symref(bound) for _ in range(d.arity)))

    def expr(self, t: str, depth: int, bound: tuple[str, ...]):
        self.budget -= 1
        # the top of a definition is an operation (a leaf there made most definitions constants or
        # tokens, and most programs' outputs independent of any count)
        if depth >= self.max_depth or self.budget <= 0 or (depth > 0 and not self.draw(st.booleans())):
            return self.leaf(t, bound)
        sub = lambda tt, b=bound: self.expr(tt, depth + 1, b)  # noqa: E731
        free = [v for v in _VARS if v not in bound]
        if t == A.BOOL:
            # a quantifier needs a variable not yet bound (parameters and enclosing quantifiers use them up)
            # counting (cmp, exists) twice as likely as each other kind: the point of C-RASP
            kind = self.pick(("not", "and", "or", "cmp", "cmp", "beq", "exists", "exists", "cond")
                             + (("quant",) if free else ())
                             + (("symcmp",) if bound else ()))
            if kind == "symcmp":  # x == "a", x < y: symbols compared by alphabet position, folded at expansion
                left = A.Ref(self.pick(bound))
                right = A.Ref(self.pick(bound)) if self.draw(st.booleans()) else A.Tok(A.SymLit(self.pick(self.symbols)))
                if isinstance(right, A.Tok) and self.draw(st.booleans()):
                    left, right = right, left
                return A.Compare(self.pick(_CMP_OPS), left, right)
            if kind == "not":
                return A.Not(sub(A.BOOL))
            if kind == "and":
                return A.And(sub(A.BOOL), sub(A.BOOL))
            if kind == "or":
                return A.Or(sub(A.BOOL), sub(A.BOOL))
            if kind == "cmp":
                return A.Compare(self.pick(_CMP_OPS), sub(A.COUNT), sub(A.COUNT))
            if kind == "beq":
                return A.Compare(self.pick(("==", "!=")), sub(A.BOOL), sub(A.BOOL))
            if kind == "exists":
                return A.Exists(self.guard(), sub(A.BOOL))
            if kind == "cond":
                return A.Cond(sub(A.BOOL), sub(A.BOOL), sub(A.BOOL))
            v = free[0]
            return A.Quant(self.pick(("any", "all")), v, sub(A.BOOL, bound + (v,)))
        kind = self.pick(("count", "count", "add", "sub", "scale", "neg", "min", "max", "cond")
                         + (("sum",) if free else ()))
        if kind == "count":
            return A.Count(self.guard(), sub(A.BOOL))
        if kind == "add":
            return A.Add(sub(A.COUNT), sub(A.COUNT))
        if kind == "sub":
            return A.Sub(sub(A.COUNT), sub(A.COUNT))
        if kind == "scale":
            return A.Scale(self.pick((2, 3, -1, -2, 0, 1)), sub(A.COUNT))
        if kind == "neg":
            return A.Neg(sub(A.COUNT))
        if kind == "min":
            return A.Min(sub(A.COUNT), sub(A.COUNT))
        if kind == "max":
            return A.Max(sub(A.COUNT), sub(A.COUNT))
        if kind == "cond":
            return A.Cond(sub(A.BOOL), sub(A.COUNT), sub(A.COUNT))
        v = free[0]
        return A.Quant("sum", v, sub(A.COUNT, bound + (v,)))

    # ------------------------------------------------------------------ statements
    def definition(self, t: str, arity: int) -> A.Definition:
        name = f"{'P' if t == A.BOOL else 'C'}{len(self.defs)}"
        params = _VARS[:arity]
        expr = self.expr(t, 0, params)
        self.defs.append(_Def(name, t, arity))
        return A.Definition(name, tuple(A.SymVar(v) for v in params), expr)

    def module(self, max_defs: int) -> A.Module:
        output = self.pick(("last", "accept", "generate", "predict"))
        n = self.draw(st.integers(1, max_defs))
        body: list[A.Statement] = []
        for k in range(n):
            if k == n - 1:  # the output's shape
                t, arity = A.BOOL, (0 if output in ("last", "accept") else 1)
            else:
                t = self.pick((A.BOOL, A.COUNT))
                arity = self.pick((0, 1, 2))
            body.append(self.definition(t, arity))
        head: list[A.Statement] = [A.AlphabetDecl(self.alphabet)]
        special = self.symbols[len(self.alphabet):]
        if special:
            head.append(A.SpecialDecl(special))
        head += [A.Import(name) for name in self.imports]
        tail: list[A.Statement] = []
        if output == "accept":
            plain = [d.name for d in self.defs if d.type == A.BOOL and d.arity == 0]
            tail.append(A.OutputDecl("accept", self.pick(plain[::-1])))
        elif output in ("generate", "predict"):
            tail.append(A.OutputDecl(output, self.defs[-1].name))
        return A.Module(tuple(head + body + tail))


def program_from_module(module: A.Module) -> Program:
    """A :class:`Program` from a surface module built in code: its printed source, parsed (printing
    and parsing give back an equal module), so that every node has a source span and an error a later
    pass finds is located at a line and column (the module as built has no spans: the compiler's
    "this comparison expands into more than 1024 ..." came without a place)."""
    return parse(module_to_str(module))


@st.composite
def _crasp_programs(draw, alphabet, special, features, max_depth, max_size, max_defs):
    gen = _Gen(draw, alphabet, special, features, max_depth, max_size)
    return program_from_module(gen.module(max_defs))


def programs(
    alphabet: Sequence[str] = ("a", "b"),
    fragment: str = "C-RASP[periodic,local]",
    max_depth: int = 3,
    max_size: int = 24,
    *,
    max_defs: int = 4,
    special: Sequence[str] = (),
) -> st.SearchStrategy[Program]:
    """Random well-typed programs over ``alphabet`` within ``fragment`` (see :data:`FRAGMENTS`).

    ``max_depth`` bounds the nesting of each expression, ``max_size`` the number of expression
    nodes in the whole program (about: each definition gets at least a leaf), ``max_defs`` the
    number of definitions. Every operation kind of the language appears (see :func:`kinds`):
    families over one and two symbols, ``any``/``all``/``sum``, imports, all three output kinds.
    Shrinking goes towards fewer definitions, shallower expressions and leaves."""
    alphabet = _symbols("alphabet", alphabet)
    special = _symbols("special", special, empty=True)
    if set(alphabet) & set(special):
        raise ValueError("special: a symbol cannot be both in the alphabet and special")
    for arg, value, least in (("max_depth", max_depth, 0), ("max_size", max_size, 1), ("max_defs", max_defs, 1)):
        _check_int(arg, value, least)
    name = _normalize_fragment(fragment)
    return _crasp_programs(alphabet, special, FRAGMENTS[name], max_depth, max_size, max_defs)


def _check_int(arg: str, value, least: int) -> None:
    """A size argument: an int (not a bool) of at least ``least``, else a ValueError when the strategy
    is built (hypothesis would otherwise fail only when drawing, or draw an empty input)."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < least:
        raise ValueError(f"{arg}: give an integer of at least {least}, not {value!r}")


def _symbols(what: str, symbols, *, empty: bool = False, declared: bool = True) -> tuple[str, ...]:
    """Symbols as ``expand.check_alphabet_override`` accepts them (a list, not a string; each a
    non-empty string without whitespace; none twice), at least one unless ``empty``, and, when
    ``declared``, without a double quote (a program's printed text would not parse back)."""
    try:
        symbols = check_alphabet_override(symbols, ())
    except RaspError as exc:
        raise ValueError(f"{what}: {exc.message}") from None
    if not symbols and not empty:
        raise ValueError(f"{what}: give at least one symbol")
    quoted = [s for s in symbols if declared and '"' in s]
    if quoted:
        raise ValueError(f"{what}: symbol {quoted[0]!r} contains a double quote")
    return symbols


# ----------------------------------------------------------------------------- inputs
def inputs(alphabet: Sequence[str] | Program, min_size: int = 1, max_size: int = 12) -> st.SearchStrategy[list[str]]:
    """Token sequences (lists of symbols) of length ``min_size..max_size`` over ``alphabet``, or
    over every symbol a program accepts when given a :class:`Program`."""
    symbols = alphabet.symbols if isinstance(alphabet, Program) else _symbols("inputs", alphabet, declared=False)
    _check_int("min_size", min_size, 1)  # an empty input is a user error for every program
    _check_int("max_size", max_size, min_size)
    return st.lists(st.sampled_from(symbols), min_size=min_size, max_size=max_size)


def _task_bounds(task, alphabet, min_length, max_length) -> tuple[int, int]:
    lo = task.min_length(alphabet)
    hi = task.max_length(alphabet)
    if min_length is not None:
        lo = max(lo, min_length)
    if max_length is not None:
        hi = max_length if hi is None else min(hi, max_length)
    if hi is None:
        hi = lo + 32
    if hi < lo:
        raise ValueError(f"task {task.name!r}: no length in [{lo}, {hi}]")
    return lo, hi


def task_samples(task_name: str, min_length: int | None = None, max_length: int | None = None,
                 alphabet: Sequence[str] | None = None):
    """Samples ``(tokens, target)`` from a registered task's sampler (:mod:`rasp.tasks`): hypothesis
    draws the length (within the task's and the given bounds) and the seed, so failures shrink
    towards short inputs and seed 0."""
    import numpy as np

    from . import tasks

    for arg, value in (("min_length", min_length), ("max_length", max_length)):
        if value is not None:
            _check_int(arg, value, 1)
    alpha = _symbols("alphabet", alphabet, declared=False) if alphabet is not None else None
    try:  # an unknown task, or an alphabet the task refuses (one of its special tokens): a ValueError too
        task = tasks.get(task_name)
        lo, hi = _task_bounds(task, alpha, min_length, max_length)
    except RaspError as exc:
        raise ValueError(exc.message) from None

    @st.composite
    def draw_sample(draw):
        length = draw(st.integers(lo, hi))
        seed = draw(st.integers(0, 2**32 - 1))
        return task.sample(np.random.default_rng(seed), length, alpha)

    return draw_sample()


def task_inputs(task_name: str, min_length: int | None = None, max_length: int | None = None,
                alphabet: Sequence[str] | None = None) -> st.SearchStrategy[list[str]]:
    """Token sequences drawn from a registered task's sampler (see :func:`task_samples`)."""
    return task_samples(task_name, min_length, max_length, alphabet).map(lambda s: list(s.tokens))


# ----------------------------------------------------------------------------- coverage
#: every operation kind :func:`programs` generates (over its fragments)
OPERATION_KINDS = (
    "tok", "tok-var", "bool-const", "int-const", "not", "and", "or",
    "cmp==", "cmp!=", "cmp<", "cmp<=", "cmp>", "cmp>=", "bool==", "bool!=",
    "sym==", "sym!=", "sym<", "sym<=", "sym>", "sym>=",
    "count", "count-guard", "exists", "exists-guard", "guard-name", "cond-count", "cond-bool",
    "add", "sub", "scale", "neg", "min", "max", "pos", "pos-name", "pos-ref",
    "family-1", "family-2", "ref", "ref-family", "any", "all", "sum",
    "import-pred", "import-pred4", "import-pos_even",
    "output-last", "output-accept", "output-generate", "output-predict",
)


def kinds(program: Program | A.Module) -> set[str]:
    """The operation kinds (names in :data:`OPERATION_KINDS`) that a program's source uses."""
    module = program.module if isinstance(program, Program) else program
    defs = {s.name: s for s in module.statements if isinstance(s, A.Definition)}
    found: set[str] = set()
    checked = program.checked if isinstance(program, Program) else check_module(module)
    types = {n: s.type for n, s in checked.signatures.items()}

    def visit(e, bound=frozenset()):
        if isinstance(e, A.Tok):
            found.add("tok-var" if isinstance(e.symbol, A.SymVar) else "tok")
        elif isinstance(e, A.BoolConst):
            found.add("bool-const")
        elif isinstance(e, A.IntConst):
            found.add("int-const")
        elif isinstance(e, A.Not):
            found.add("not")
        elif isinstance(e, A.And):
            found.add("and")
        elif isinstance(e, A.Or):
            found.add("or")
        elif isinstance(e, A.Compare):
            if symbol_comparison(e, bound):
                found.add("sym" + e.op)
                return
            boolean = _is_bool(e.left, types)
            found.add(("bool" if boolean else "cmp") + e.op)
        elif isinstance(e, (A.Count, A.Exists)):
            word = "count" if isinstance(e, A.Count) else "exists"
            found.add(word + ("-guard" if e.guard is not None else ""))
            if isinstance(e.guard, A.GuardName):
                found.add("guard-name")
        elif isinstance(e, A.Cond):
            found.add("cond-bool" if _is_bool(e.then, types) else "cond-count")
        elif isinstance(e, A.Add):
            found.add("add")
        elif isinstance(e, A.Sub):
            found.add("sub")
        elif isinstance(e, A.Scale):
            found.add("scale")
        elif isinstance(e, A.Neg):
            found.add("neg")
        elif isinstance(e, A.Min):
            found.add("min")
        elif isinstance(e, A.Max):
            found.add("max")
        elif isinstance(e, A.PosPred):
            found.add("pos")
        elif isinstance(e, A.PosName):
            found.add("pos-name")
        elif isinstance(e, A.Ref):
            if e.name not in defs:
                found.add("pos-ref")
            else:
                found.add("ref-family" if e.indices else "ref")
        elif isinstance(e, A.Quant):
            found.add(e.op)
            bound = bound | {e.var}
        for c in A.children(e):
            visit(c, bound)

    has_output = False
    for s in module.statements:
        if isinstance(s, A.Definition):
            if s.params:
                found.add(f"family-{len(s.params)}")
            visit(s.expr, frozenset(p.name for p in s.params if isinstance(p, A.SymVar)))
        elif isinstance(s, A.Import):
            found.add(f"import-{s.name}")
        elif isinstance(s, A.OutputDecl):
            has_output = True
            found.add(f"output-{s.kind}")
    if not has_output:
        found.add("output-last")
    return found


_BOOL_NODES = (A.Tok, A.BoolConst, A.Not, A.And, A.Or, A.Compare, A.Exists, A.PosPred, A.PosName)


def _is_bool(e, types: dict[str, str]) -> bool:
    if isinstance(e, _BOOL_NODES):
        return True
    if isinstance(e, A.Quant):
        return e.op != "sum"
    if isinstance(e, A.Cond):
        return _is_bool(e.then, types)
    if isinstance(e, A.Ref):
        return types.get(e.name, A.BOOL) == A.BOOL
    return False
