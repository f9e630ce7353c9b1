// Dyck-1 (balanced parentheses), in the .cr format: acceptor.
// Input: a string over ( and ). Accept iff every prefix has at least as many ( as ) and the
// whole string has equally many.
// Why it is correct: D(i) = #( - #) over positions <= i is the depth after position i; a prefix
// goes negative iff D < 0 somewhere, i.e. iff NEG (the number of such prefixes) is positive.
// Plain counting only: C-RASP without positional relations (the NoPE setting).
D = #"(" - #")"
NEG = #(D < 0)
ok = D == 0 && NEG == 0
