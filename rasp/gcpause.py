"""Pausing Python's cyclic garbage collector around passes that build large object graphs.

Expanding a family over 150 symbols and compiling the result allocate hundreds of thousands of
small objects that all stay alive until the pass ends. The cyclic collector would scan them again
at every threshold crossing (about half the time of loading a 150-symbol program and a third of
compiling it); none of them is garbage, so pausing it loses nothing. Reference counting still frees
everything that is dropped.
"""
from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside the block (re-enabled after it if it was on)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
