"""C-RASP and RASP-L programs: parse, check, run, compile.

>>> import rasp
>>> p = rasp.parse('alphabet a b\\nX = #"a" == #"b"')
>>> rasp.run(p, "a b b a")
True
"""
from .errors import RaspError, Span
from .program import Program, load, parse, run

__all__ = ["Program", "RaspError", "Span", "load", "parse", "run"]
__version__ = "0.1.0"
