"""Writes programs/addition.rasp: standard binary addition with a carry look-ahead of R columns.

    python3 tests/gen_addition.py          # rewrites programs/addition.rasp (R = 24)

tests/test_raspl_programs.py checks that the file is what this script writes.
"""
from __future__ import annotations

import sys
from pathlib import Path

R = 24
PATH = Path(__file__).resolve().parent.parent / "programs" / "addition.rasp"

HEADER = """\
// Addition (Huang et al. 2025): binary, standard format. Outside C-RASP[periodic, local].
// Input: A + B = (binary, no leading zeros). Output (generator): the binary sum, most significant
// digit first (as bin(A + B)), then stop.
// Why it is correct (up to a bound): LA and LB are the operands' lengths, L the longer, T the number
// of digits generated so far. Digit m of A (m = 0 the least significant) sits at position
// LA - 1 - m, digit m of B at LA + LB - m; a select with keys j - d == Q fetches the digit at Q + d,
// and VA / VB are 0 outside each operand, so digits beyond an operand's length read as 0. The carry
// into column K is computed by looking {R} columns down: with S_d = a + b of column K - d, the carry
// out of column K - d is 1 if S_d = 2, 0 if S_d = 0, and the carry into it if S_d = 1; the fold starts
// from carry 0 below column K - {R}. COUT is the carry out of the top column L - 1, so the sum has
// M = L + COUT digits; the digit generated after T digits is column K = M - 1 - T, (a + b + carry)
// mod 2, and generation stops when K < 0.
// The bound: the carry is exact whenever the chain of columns with a + b = 1 (which pass a carry on)
// directly below a column is shorter than {R}: always for operands of at most {R} digits, and for
// random operands except with probability about n 2^-{R}. No program of this form is exact at all
// lengths: an output digit depends on a carry chain of unbounded length, and a causal position can
// only pair up a bounded number of columns (the digits of one column lie at two positions whose
// distance depends on the unseen length of B). Written by tests/gen_addition.py.
// Verdict: RASP-L (conjectured) -- read with care: the program conforms to RASP-L's rules
// (positions are only compared, shifted by constants, with counts; every map is over a small finite
// domain), but it is not a RASP-L program for addition at all lengths, which is what the conjecture
// is about; the conformance check is syntactic and cannot see the bound. It does not lower.
"""

BODY = """\
alphabet 0 1
special "+" "="
INA = #"+" == 0                                          // in A
INB = #"+" >= 1 && #"=" == 0 && !"+"                     // in B
OUTP = #"=" >= 1                                         // at or after "="
LA = #INA                                                // |A|
LB = #INB                                                // |B| (fixed from "=" on)
L = max(LA, LB)
T = #OUTP - 1                                            // digits generated so far
VA = tokens if INA else 0                                // A's digits, 0 elsewhere
VB = tokens if INB else 0                                // B's digits, 0 elsewhere
"""


def chain(prefix: str, qa: str, qb: str, first: int) -> list[str]:
    """Definitions fetching columns K - d (d = first .. R) and folding the carry into column K."""
    lines = [f"{prefix}QA = {qa}                                 // A digit m is at QA + (K - m)",
             f"{prefix}QB = {qb}                                 // B digit m is at QB + (K - m)"]
    for d in range(first, R + 1):
        lines.append(f"{prefix}A{d} = aggregate(select(map(x -> x - {d}, indices), {prefix}QA, ==), VA, max, 0)")
        lines.append(f"{prefix}B{d} = aggregate(select(map(x -> x - {d}, indices), {prefix}QB, ==), VB, max, 0)")
    lines.append(f"{prefix}C{R - 1} = seqmap((a, b) -> 1 if a + b == 2 else 0, {prefix}A{R}, {prefix}B{R})")
    for d in range(R - 1, 0, -1):
        lines.append(f"{prefix}C{d - 1} = seqmap((s, c) -> 1 if s == 2 else (0 if s == 0 else c), "
                     f"seqmap((a, b) -> a + b, {prefix}A{d}, {prefix}B{d}), {prefix}C{d})")
    return lines


def source() -> str:
    out = [HEADER.format(R=R), BODY]
    out.append("// the carry out of the top column L - 1 (column K = L)\n")
    out += [x + "\n" for x in chain("O", "LA - 1 - L", "LA + LB - L", 1)]
    out.append("COUT = OC0\n")
    out.append("M = L + COUT                                             // digits of the sum\n")
    out.append("K = M - 1 - T                                            // the column to generate\n")
    out.append("// the digit of column K: its own two digits (d = 0) and the carry into it\n")
    out += [x + "\n" for x in chain("D", "LA - 1 - K", "LA + LB - K", 0)]
    out.append("DIGIT = seqmap((s, c) -> (s + c) % 2, seqmap((a, b) -> a + b, DA0, DB0), DC0)\n")
    out.append("CODE[x] = sum(y, 1 if y < x else 0)                      // x's code\n")
    out.append("NEXT[x] = OUTP && K >= 0 && DIGIT == CODE[x]\n")
    out.append("output generate NEXT\n")
    return "".join(out)


if __name__ == "__main__":
    PATH.write_text(source())
    sys.stdout.write(f"wrote {PATH}\n")
