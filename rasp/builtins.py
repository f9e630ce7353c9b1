"""Predicates that ``#import`` brings in, as the existing ``.cr`` tool defines them (0-based positions)."""
from __future__ import annotations

from . import ast as A

#: binary predicates, used as guards ``#[pred] P``
BINARY: dict[str, A.PosExpr] = {
    "pred": A.PCmp("==", A.PVar("j"), A.PBin("-", A.PVar("i"), A.PInt(1))),
    "pred4": A.PCmp("==", A.PVar("j"), A.PBin("-", A.PVar("i"), A.PInt(4))),
}

#: unary predicates of i, used as bool values
UNARY: dict[str, A.PosExpr] = {
    "pos_even": A.PCmp("==", A.PBin("%", A.PVar("i"), A.PInt(2)), A.PInt(0)),
}

ALL = {**BINARY, **UNARY}
