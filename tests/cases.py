"""THE SHARED TABLE of (program, input, expected output) cases.

Every case is checked twice by ``tests/test_cases.py``: ``rasp.run(rasp.parse(source), tokens)``
must equal ``expected``, and so must the naive evaluator of ``tests/naive.py``. Other test files
(printer round trips, the compiler, the checker) iterate over ``CASES`` too.

How to add a case
-----------------
Append a ``Case(name, source, tokens, expected)`` to ``CASES`` (at the end of the list, or next to
its relatives):

* ``name``: unique, short, ``[a-z0-9_-]`` (it becomes the pytest id);
* ``source``: the program text (``.cr`` or ``.rasp`` syntax; one language). Reuse a module-level
  constant when several inputs share a program;
* ``tokens``: the input, whitespace-separated tokens in one string (``"a b a"``), or a list of
  strings for tokens that contain spaces;
* ``expected``: written by hand, from the meaning of the program, never copied from the
  interpreter's output. Its form is what :func:`rasp.run` returns:
  - acceptor (``output accept`` or no output declaration): ``True``/``False``;
  - generator (``output generate NEXT``): the list of generated tokens (greedy; stops when no
    ``NEXT[x]`` holds or after ``2 * len(tokens) + 8`` tokens);
  - character predictor (``output predict ALLOWED``): one list per position of the allowed
    symbols, in alphabet order.

A shrunk counterexample from a property test belongs here too: give it a name saying where it
came from (``shrunk_<what>_<n>``) and a comment with the bug it caught.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    tokens: str | list[str]
    expected: Any

    @property
    def token_list(self) -> list[str]:
        return self.tokens.split() if isinstance(self.tokens, str) else list(self.tokens)


# ----------------------------------------------------------------------------- programs
DYCK1 = """\
// Dyck-1 in the .cr format (no alphabet declaration)
D = #"(" - #")"
NEG = #(D < 0)
ok = D == 0 && NEG == 0
"""

ANBNCN = """\
alphabet a b c
A = #"a"
B = #"b"
C = #"c"
BAD_A = #("a" && B + C >= 1)   // an a after a b or a c
BAD_B = #("b" && C >= 1)       // a b after a c
ok = A == B && B == C && BAD_A + BAD_B == 0
"""

AA_STAR = """\
// (aa)*: the last position is odd (even length) and every token is a
alphabet a b
ODD = pos[i % 2 == 1]
ok = ODD && #!"a" == 0
"""

AA_STAR_CR = """\
// (aa)* in the .cr format
#import pos_even
ok = !pos_even && #!"a" == 0
"""

CONTAINS_AB_CR = """\
// contains "a b", in the .cr format
#import pred
PA = #[pred] "a"
ab = #("b" && PA >= 1) >= 1
"""

ANBN_COUNTER_CR = """\
// a^n b^n: a counter program in the .cr format
A = #"a"
B = #"b"
BA = #("a" && B > 0)    // an a after some b
ok = A == B && BA == 0
"""

PRED4_CR = """\
#import pred4
X = #[pred4] "a"          // the token 4 positions back is a
ok = X == 1 && "b"
"""

INDUCTION = """\
alphabet a b c d
special "<sep>"
PREV[x] = exists[j == i - 1] Q[x]            // the token before i is x
BIGRAM[x, y] = exists (PREV[x] && Q[y])       // "x y" occurs somewhere in the prefix
AFTER_SEP = exists[j == i - 1] "<sep>"        // i is the query position
NEXT[y] = AFTER_SEP && any(x, Q[x] && BIGRAM[x, y])
output generate NEXT
"""

WINDOW = """\
alphabet a b
W = #[i - j <= 2] "a"
ok = W == 2
"""

SAME_PARITY = """\
alphabet a b
E = #[(i - j) % 2 == 0] "a"
ok = E == #"a"
"""

J_MOD3 = """\
alphabet a b
X = #[j % 3 == 0] "a"
ok = X == 2
"""

FIRST_FOUR = """\
alphabet a b
X = #[j <= 3] "a"        // not regular (absolute j); plain C-RASP as #("a" && #true <= 4)
ok = X == #"a"
"""

HALF = """\
alphabet a b
H = #[j == i / 2] "a"
ok = H == 1
"""

SECOND_HALF = """\
alphabet a b
X = #[2 * j >= i] "a"
ok = X == 0
"""

NEG_DIV = """\
alphabet a b
X = #[(j - i) / 2 == -1] "a"      // j - i in {-2, -1}
ok = X == 2
"""

NEG_MOD = """\
alphabet a b
X = #[(j - i) % 3 == 1] "a"       // i - j in {2, 5, 8, ...}
ok = X == 1
"""

FAR_ODD = """\
alphabet a b
X = #[(i - j) % 2 == 1 && i - j > 1] "a"   // i - j in {3, 5, 7, ...}
ok = X == 1
"""

POS_MOD3 = """\
alphabet a b
P = pos[i % 3 == 1]
ok = P && "a"
"""

POS_FIRST = """\
alphabet a b
F = #(pos[i == 0] && "a")
ok = F == 1
"""

MINMAX = """\
alphabet a b c
M = min(#"a", #"b")
X = max(#"a", #"b")
ok = M == 1 && X == 3
"""

MIN_NEG = """\
alphabet a b
ok = min(#"a" - #"b", 0) == -2
"""

COND_COUNT = """\
alphabet a b
C = #"a" if "b" else 2 * #"b"
ok = C == 2
"""

COND_BOOL = """\
alphabet a b
ok = "a" if #"b" > 1 else "b"
"""

ALTERNATING = """\
alphabet a b
ALT = #("a" if pos[i % 2 == 0] else "b")
N = #true
ok = ALT == N
"""

SCALE = """\
alphabet a b c
X = 2 * #"a" - 3 * #"b"
ok = X == -#"c"
"""

SCALE_RIGHT = """\
alphabet a b
X = #"a" * 3 - #"b"
ok = X == 0
"""

PAIR_FAMILY = """\
alphabet a b c
PREV[x] = exists[j == i - 1] Q[x]
BIGRAM[x, y] = exists (PREV[x] && Q[y])
ok = BIGRAM["a", "c"] && !BIGRAM["c", "a"]
"""

NO_REPEAT = """\
alphabet a b c
PREV[x] = exists[j == i - 1] Q[x]
REP = any(x, Q[x] && PREV[x])
ok = !exists REP
"""

ALL_SEEN = """\
alphabet a b c
SEEN[x] = exists Q[x]
ok = all(x, SEEN[x])
"""

AFTER_A = """\
alphabet a b c
PREV[x] = exists[j == i - 1] Q[x]
AFTER_A[y] = exists (PREV["a"] && Q[y])
ok = all(y, AFTER_A[y])
"""

DISTINCT = """\
alphabet a b c
DISTINCT = sum(x, 1 if exists Q[x] else 0)
ok = DISTINCT == 2
"""

SUM_DATA = """\
alphabet a b
special "<s>"
DATA = sum(x, #Q[x])
ok = DATA == 2
"""

EXISTS_GUARD = """\
alphabet a b
ok = exists[i - j == 1 || i - j == 3] "b"
"""

BOOL_EQ = """\
alphabet a b
ok = "a" == exists[j == i - 1] "a"
"""

PRECEDENCE = """\
alphabet a b c
ok = "a" || "b" && "c"
"""

LENGTH_ONE = """\
alphabet a
FIRST = #[j == i - 1] true == 0
ok = FIRST
"""

OUT_OF_ORDER = """\
alphabet a b
output accept ok
ok = A > B
A = #"a"
B = #"b"
"""

OUTPUT_NOT_LAST = """\
alphabet a b
X = #"a" >= 2
Y = #"b" >= 2
output accept X
"""

PREDICT_NO_REPEAT = """\
alphabet a b c
ALLOWED[x] = !Q[x]
output predict ALLOWED
"""

PREDICT_AT_MOST_TWICE = """\
alphabet a b
ALLOWED[x] = #Q[x] < 2
output predict ALLOWED
"""

GEN_THREE_EACH = """\
alphabet a b c
NEXT[x] = #Q[x] < 3
output generate NEXT
"""

GEN_FOREVER = """\
alphabet a b
NEXT[x] = true
output generate NEXT
"""

GEN_NOTHING = """\
alphabet a b
NEXT[x] = false
output generate NEXT
"""

GEN_BALANCE = """\
alphabet a b
NEXT[x] = #"b" < #"a" && #Q[x] <= #"b"   // emit b until #b == #a
output generate NEXT
"""

MAJORITY = """\
alphabet a b
ok = #"a" > #"b"
"""


CASES: list[Case] = [
    # Dyck-1 (.cr format)
    Case("dyck1-balanced", DYCK1, "( ( ) ( ) )", True),
    Case("dyck1-extra-close", DYCK1, "( ) )", False),
    Case("dyck1-close-first", DYCK1, ") (", False),
    Case("dyck1-open", DYCK1, "(", False),
    Case("dyck1-nested", DYCK1, "( ( ( ) ) ) ( )", True),
    Case("dyck1-dips-below", DYCK1, "( ) ) ( ( )", False),
    # a^n b^n c^n
    Case("anbncn-1", ANBNCN, "a b c", True),
    Case("anbncn-2", ANBNCN, "a a b b c c", True),
    Case("anbncn-unequal", ANBNCN, "a b b c", False),
    Case("anbncn-order", ANBNCN, "a c b", False),
    Case("anbncn-b-after-c", ANBNCN, "a a b c c b", False),
    Case("anbncn-a-after-b", ANBNCN, "b a c", False),
    # (aa)*
    Case("aastar-2", AA_STAR, "a a", True),
    Case("aastar-3", AA_STAR, "a a a", False),
    Case("aastar-4", AA_STAR, "a a a a", True),
    Case("aastar-b", AA_STAR, "a a b a", False),
    Case("aastar-cr-2", AA_STAR_CR, "a a", True),
    Case("aastar-cr-1", AA_STAR_CR, "a", False),
    Case("aastar-cr-6", AA_STAR_CR, "a a a a a a", True),
    # contains "a b" (.cr, #import pred)
    Case("contains-ab-yes", CONTAINS_AB_CR, "b a b", True),
    Case("contains-ab-no", CONTAINS_AB_CR, "b b a", False),
    Case("contains-ab-single", CONTAINS_AB_CR, "a", False),
    Case("contains-ab-late", CONTAINS_AB_CR, "a a b b", True),
    Case("contains-ab-ba", CONTAINS_AB_CR, "b a", False),
    # a^n b^n counter (.cr)
    Case("anbn-cr-yes", ANBN_COUNTER_CR, "a a a b b b", True),
    Case("anbn-cr-unequal", ANBN_COUNTER_CR, "a a b", False),
    Case("anbn-cr-order", ANBN_COUNTER_CR, "a b a b", False),
    # pred4 (.cr)
    Case("pred4-yes", PRED4_CR, "a b b b b", True),
    Case("pred4-no", PRED4_CR, "b a b b b", False),
    Case("pred4-short", PRED4_CR, "a a a a", False),
    # guards: local window
    Case("window-yes", WINDOW, "a b a", True),
    Case("window-no", WINDOW, "a b b a", False),
    Case("window-three", WINDOW, "a a a a", False),
    # guards: periodic
    Case("same-parity-yes", SAME_PARITY, "a b a", True),
    Case("same-parity-no", SAME_PARITY, "a a b", False),
    Case("same-parity-odd", SAME_PARITY, "b a b a", True),
    Case("j-mod3-yes", J_MOD3, "a b b a", True),
    Case("j-mod3-no", J_MOD3, "a a a", False),
    Case("far-odd-yes", FAR_ODD, "a b b b", True),
    Case("far-odd-short", FAR_ODD, "a b b", False),
    Case("far-odd-two", FAR_ODD, "a a b b b b", True),
    Case("far-odd-both", FAR_ODD, "a b a b b b", False),
    # guards: floor division and modulo of negative numbers
    Case("neg-div-yes", NEG_DIV, "a a b", True),
    Case("neg-div-no", NEG_DIV, "a b a", False),
    Case("neg-div-short", NEG_DIV, "a a", False),
    Case("neg-mod-yes", NEG_MOD, "a b b", True),
    Case("neg-mod-far", NEG_MOD, "a b b b b b", True),
    Case("neg-mod-two", NEG_MOD, "a b b a b b", False),
    # guards: not regular (general path)
    Case("first-four-no", FIRST_FOUR, "a a b b b a", False),
    Case("first-four-yes", FIRST_FOUR, "b b b a b", True),
    Case("half-yes", HALF, "b a b b", True),
    Case("half-no", HALF, "b a b b b", False),
    Case("half-one", HALF, "a", True),
    Case("second-half-yes", SECOND_HALF, "a a b b", True),
    Case("second-half-no", SECOND_HALF, "a a a b", False),
    # exists with a guard
    Case("exists-guard-far", EXISTS_GUARD, "b a a a", True),
    Case("exists-guard-none", EXISTS_GUARD, "b a a", False),
    Case("exists-guard-near", EXISTS_GUARD, "b a", True),
    # positional predicates
    Case("pos-mod3-yes", POS_MOD3, "b a", True),
    Case("pos-mod3-later", POS_MOD3, "b b b b a", True),
    Case("pos-mod3-no", POS_MOD3, "b b a", False),
    Case("pos-first-yes", POS_FIRST, "a b", True),
    Case("pos-first-no", POS_FIRST, "b a", False),
    # min / max, scale, negation
    Case("minmax-yes", MINMAX, "a b b b", True),
    Case("minmax-no", MINMAX, "a a b b b", False),
    Case("minmax-c", MINMAX, "b a c b b", True),
    Case("min-negative", MIN_NEG, "b b a b", True),
    Case("min-zero", MIN_NEG, "a b", False),
    Case("scale-yes", SCALE, "a b c", True),
    Case("scale-no", SCALE, "a a b b", False),
    Case("scale-c", SCALE, "b c c c", True),
    Case("scale-right", SCALE_RIGHT, "b b b a", True),
    Case("scale-right-no", SCALE_RIGHT, "b a", False),
    # conditionals
    Case("cond-count-b", COND_COUNT, "a a b", True),
    Case("cond-count-a", COND_COUNT, "b a", True),
    Case("cond-count-aba", COND_COUNT, "a b a", True),
    Case("cond-count-no", COND_COUNT, "a b", False),
    Case("cond-bool-then", COND_BOOL, "b b a", True),
    Case("cond-bool-else-no", COND_BOOL, "b a", False),
    Case("cond-bool-else", COND_BOOL, "a b", True),
    Case("alternating-yes", ALTERNATING, "a b a", True),
    Case("alternating-no", ALTERNATING, "a b b", False),
    Case("alternating-even", ALTERNATING, "a b a b", True),
    # families, any / all / sum
    Case("pair-family-yes", PAIR_FAMILY, "a c b", True),
    Case("pair-family-ca", PAIR_FAMILY, "c a c", False),
    Case("pair-family-none", PAIR_FAMILY, "a b c", False),
    Case("no-repeat-yes", NO_REPEAT, "a b a c", True),
    Case("no-repeat-no", NO_REPEAT, "a b b", False),
    Case("all-seen-yes", ALL_SEEN, "a b c", True),
    Case("all-seen-no", ALL_SEEN, "a b a", False),
    Case("all-seen-late", ALL_SEEN, "c c b a", True),
    Case("after-a-yes", AFTER_A, "a a a b a c", True),
    Case("after-a-no", AFTER_A, "a b a c", False),
    Case("distinct-two", DISTINCT, "a a b", True),
    Case("distinct-three", DISTINCT, "a b c", False),
    Case("sum-data-yes", SUM_DATA, "<s> a <s> b", True),
    Case("sum-data-three", SUM_DATA, "a b a", False),
    Case("sum-data-one", SUM_DATA, "<s> <s> a", False),
    # bools
    Case("bool-eq-aa", BOOL_EQ, "a a", True),
    Case("bool-eq-ba", BOOL_EQ, "b a", False),
    Case("bool-eq-bb", BOOL_EQ, "b b", True),
    Case("precedence-a", PRECEDENCE, "c a", True),
    Case("precedence-b", PRECEDENCE, "b", False),
    Case("length-one", LENGTH_ONE, "a", True),
    Case("length-two", LENGTH_ONE, "a a", False),
    # output declarations
    Case("out-of-order", OUT_OF_ORDER, "a a b", True),
    Case("output-not-last", OUTPUT_NOT_LAST, "a b a", True),
    Case("output-not-last-no", OUTPUT_NOT_LAST, "b b a", False),
    Case("majority-long", MAJORITY, "a b " * 30 + "a", True),
    Case("majority-tie", MAJORITY, "b a " * 30, False),
    # character predictors
    Case("predict-no-repeat", PREDICT_NO_REPEAT, "a b a",
         [["b", "c"], ["a", "c"], ["b", "c"]]),
    Case("predict-at-most-twice", PREDICT_AT_MOST_TWICE, "a b a b",
         [["a", "b"], ["a", "b"], ["b"], []]),
    # generators
    Case("induction-c", INDUCTION, "a b c <sep> b", ["c"]),
    Case("induction-b", INDUCTION, "a b <sep> a", ["b"]),
    Case("induction-none", INDUCTION, "a b <sep> b", []),
    Case("gen-three-each", GEN_THREE_EACH, "b", ["a", "a", "a", "b", "b", "c", "c", "c"]),
    Case("gen-forever-capped", GEN_FOREVER, "b a", ["a"] * 12),
    Case("gen-nothing", GEN_NOTHING, "a", []),
    Case("gen-balance", GEN_BALANCE, "a a a b", ["b", "b"]),
    Case("gen-balance-done", GEN_BALANCE, "a b", []),
    # shrunk counterexample (tests/test_properties.py, parse(print(p)) == p): the printer wrote
    # pos[pos_even] as bare `pos_even`, which parses back as a reference, not a positional name
    Case("shrunk_print_posname_1", 'alphabet a b\n#import pos_even\nP0 = pos[pos_even]\n', "a b a", True),
    Case("shrunk_print_posname_2", 'alphabet a b\n#import pos_even\nP0 = pos[pos_even]\n', "a b", False),
]


# ----------------------------------------------------------------------------- RASP-L
# tokens = index in alphabet + special; select is causal (key j <= query i, op(keys[j], queries[i]));
# aggregate's mean truncates toward zero; the default applies when nothing is selected.
RL_PREV = """\
// the token before the last is b (a = 0, b = 1; -1 when there is none)
alphabet a b
PREV = aggregate(select(indices, map(x -> x - 1, indices), ==), tokens, mean, -1)
ok = PREV == 1
"""

RL_HIST = """\
// the last token occurs exactly 3 times so far
alphabet a b
W = selector_width(select(tokens, tokens, ==))
ok = W == 3
"""

RL_MEAN_TRUNC = """\
// mean of a -> -1, b -> 0 over the prefix, truncated toward zero (int(), not floor)
alphabet a b
V = map(x -> {0: -1}[x], tokens)
M = aggregate(select(indices, indices, true), V, mean)
ok = M == 0
"""

RL_MEAN_POS = """\
// mean of a -> 0, b -> 3 over the prefix, truncated: equals 1
alphabet a b
M = aggregate(select(indices, indices, true), map(x -> 3 * x, tokens), mean)
ok = M == 1
"""

RL_MAXMIN = """\
// some earlier digit is larger and some earlier digit is smaller than the last
alphabet 0 1 2 3 4 5 6 7 8 9
EARLIER = select(indices, indices, <)
HI = aggregate(EARLIER, tokens, max, -5)
LO = aggregate(EARLIER, tokens, min, 99)
ok = HI > tokens && LO < tokens
"""

RL_SORTED = """\
// the digits are non-decreasing: no position sees a larger earlier digit
alphabet 0 1 2 3 4 5 6 7 8 9
DESC = aggregate(select(tokens, tokens, >), full(1), max, 0)
BAD = #(DESC == 1)
ok = BAD == 0
"""

RL_SEQMAP = """\
// the last digit plus the one before it is a multiple of 10 (0 before the first)
alphabet 0 1 2 3 4 5 6 7 8 9
PREVTOK = aggregate(select(indices, map(x -> x - 1, indices), ==), tokens, mean, 0)
S = seqmap((x, y) -> (x + y) % 10, tokens, PREVTOK)
ok = S == 0
"""

RL_TABLE_COND = """\
// a -> 1, b -> 2, c -> 0 (missing key), <s> -> 10; max is 10 and two b's so far
alphabet a b c
special "<s>"
V = map(t -> 10 if t == "<s>" else {0: 1, 1: 2}[t], tokens)
T = aggregate(select(indices, indices, true), V, max)
TWOS = #(V == 2)
ok = T == 10 && TWOS >= 2
"""

RL_WIDTHS = """\
// length 4 and exactly one earlier token differs from the last
alphabet a b
N = selector_width(select(indices, indices, true))
D = selector_width(select(tokens, tokens, !=))
ok = N == 4 && D == 1
"""

RL_OPS = """\
// first occurrence of the last token is position 1; two tokens >= it; max token <= it - 1 is 2
alphabet 0 1 2 3
FIRST = aggregate(select(tokens, tokens, ==), indices, min, -7)
GE = selector_width(select(tokens, tokens, >=))
LE = aggregate(select(tokens, map(x -> x - 1, tokens), <=), tokens, max, -7)
ok = FIRST == 1 && GE == 2 && LE == 2
"""

RL_DEFAULT = """\
// nothing earlier is smaller than the last token: the default -7
alphabet 0 1 2 3
LE = aggregate(select(tokens, map(x -> x - 1, tokens), <=), tokens, max, -7)
ok = LE == -7
"""

RL_GEN_PREV = """\
// generate the token two before the next position until the length is 6 (a period-2 repeat)
alphabet a b
N = selector_width(select(indices, indices, true))
PREV[x] = aggregate(select(indices, map(t -> t - 1, indices), ==), Q[x], max) == 1
NEXT[x] = PREV[x] && N < 6
output generate NEXT
"""

RL_BOOL_MAP = """\
// bools act as 0/1: count the b's with a map over a bool, and compare with #"b"
alphabet a b
B = map(x -> x * 5, "b")
S = aggregate(select(indices, indices, true), B, max)
ok = S == 5 && #"b" == selector_width(select(tokens, full(1), ==))
"""

CASES += [
    Case("rl-prev-yes", RL_PREV, "a b a", True),
    Case("rl-prev-no", RL_PREV, "b a b", False),
    Case("rl-prev-first", RL_PREV, "b", False),
    Case("rl-prev-a", RL_PREV, "a b", False),
    Case("rl-hist-yes", RL_HIST, "a b a a", True),
    Case("rl-hist-no", RL_HIST, "a b a", False),
    Case("rl-hist-bbb", RL_HIST, "b b b", True),
    Case("rl-mean-trunc-half", RL_MEAN_TRUNC, "a b", True),
    Case("rl-mean-trunc-one", RL_MEAN_TRUNC, "a", False),
    Case("rl-mean-trunc-aa", RL_MEAN_TRUNC, "a a", False),
    Case("rl-mean-trunc-third", RL_MEAN_TRUNC, "b a a", True),
    Case("rl-mean-pos-yes", RL_MEAN_POS, "a b", True),
    Case("rl-mean-pos-no", RL_MEAN_POS, "b b a", False),
    Case("rl-maxmin-yes", RL_MAXMIN, "1 5 3", True),
    Case("rl-maxmin-up", RL_MAXMIN, "1 2 3", False),
    Case("rl-maxmin-one", RL_MAXMIN, "7", False),
    Case("rl-maxmin-ties", RL_MAXMIN, "3 3 3", False),
    Case("rl-sorted-yes", RL_SORTED, "1 2 2 5", True),
    Case("rl-sorted-no", RL_SORTED, "1 3 2 5", False),
    Case("rl-sorted-one", RL_SORTED, "4", True),
    Case("rl-seqmap-yes", RL_SEQMAP, "3 7", True),
    Case("rl-seqmap-no", RL_SEQMAP, "5 6", False),
    Case("rl-seqmap-zero", RL_SEQMAP, "0", True),
    Case("rl-table-yes", RL_TABLE_COND, "a b b <s>", True),
    Case("rl-table-one-b", RL_TABLE_COND, "a b <s>", False),
    Case("rl-table-no-s", RL_TABLE_COND, "b b c", False),
    Case("rl-widths-yes", RL_WIDTHS, "a a b a", True),
    Case("rl-widths-two", RL_WIDTHS, "a b b a", False),
    Case("rl-widths-short", RL_WIDTHS, "a a b", False),
    Case("rl-ops-yes", RL_OPS, "2 3 0 3", True),
    Case("rl-ops-one", RL_OPS, "2 3 1 3", True),
    Case("rl-ops-no", RL_OPS, "0 1 1", False),
    Case("rl-default-yes", RL_DEFAULT, "3 1 0", True),
    Case("rl-default-no", RL_DEFAULT, "0 1", False),
    Case("rl-gen-prev-ab", RL_GEN_PREV, "a b", ["a", "b", "a", "b"]),
    Case("rl-gen-prev-ba", RL_GEN_PREV, "b a", ["b", "a", "b", "a"]),
    Case("rl-gen-prev-one", RL_GEN_PREV, "a", []),
    Case("rl-bool-map-yes", RL_BOOL_MAP, "a b a", True),
    Case("rl-bool-map-no", RL_BOOL_MAP, "a a", False),
]
