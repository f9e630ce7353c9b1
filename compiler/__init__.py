"""Compile C-RASP[periodic, local] programs to transformer weights that are exact at every length.

>>> import rasp, compiler
>>> m = compiler.compile(rasp.load("programs/dyck1.cr"))
>>> m.run("( ( ) )")
True

Passes (one module each; the maths of each construction is in its docstring; design in
``docs/compiler.md``): :mod:`.graph` (program -> operation graph, with :mod:`.boolean`),
:mod:`.plan` (layer plan), :mod:`.alloc` (residual allocation), :mod:`.weights` (weights per
operation), :mod:`.model` (``nn.Module``: dense/scan/sdpa forward, cached generation),
:mod:`.api` (compile, save, load), :mod:`.verify` (checking against the interpreter).
"""
from .api import COMPILER_VERSION, CompiledModel, compile, load  # noqa: A004

__all__ = ["COMPILER_VERSION", "CompiledModel", "compile", "load"]
__version__ = COMPILER_VERSION
