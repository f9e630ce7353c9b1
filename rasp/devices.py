"""Device names for everything that runs PyTorch: compiled models (``rasp verify``, ``CompiledModel.run``)
and training (``rasp learn``). One resolution and one set of located-free user errors, so both accept
and refuse the same names in the same words.

Imports torch only when called (``rasp compile`` and ``rasp check`` never need it)."""
from __future__ import annotations

from .errors import RaspError


def resolve_device(name=None, kinds: tuple[str, ...] = ("cpu", "cuda"), what: str = "compiled models run"):
    """The ``torch.device`` that ``name`` means here.

    ``auto`` (or None): CUDA when present, then MPS when ``kinds`` allows it and it is present, else
    the CPU. Otherwise ``cpu``, ``cuda``, ``cuda:N`` (or a ``torch.device``), of a type in ``kinds``.
    A name torch does not know, a type outside ``kinds``, a CUDA device that is not here (none, or
    fewer than N + 1) and MPS where there is none are :class:`RaspError`s (``what``, the user and
    its verb, begins the message for a type outside ``kinds``: "training runs on cpu, cuda or mps")."""
    import torch

    hint = ", ".join(kinds) + (", cuda:N" if "cuda" in kinds else "") + " or auto"
    mps = getattr(torch.backends, "mps", None)
    has_mps = mps is not None and mps.is_available()
    if name is None or str(name) == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if "mps" in kinds and has_mps:
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError):
        raise RaspError(f"unknown device {name!r}", hint=hint) from None
    if dev.type not in kinds:
        raise RaspError(f"device {name!r}: {what} on {', '.join(kinds[:-1])} or {kinds[-1]}", hint=hint)
    if dev.type == "cpu" and dev.index not in (None, 0):  # torch accepts cpu:1 and runs on the one CPU
        raise RaspError(f"device {name!r}: there is one CPU device (cpu or cpu:0)", hint=hint)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise RaspError(f"device {name!r}: CUDA is not available here", hint="use cpu or auto")
        if (dev.index or 0) >= torch.cuda.device_count():
            raise RaspError(f"device {name!r}: no such CUDA device here ({torch.cuda.device_count()} present)",
                            hint="use cuda, cpu or auto")
    if dev.type == "mps" and not has_mps:
        raise RaspError(f"device {name!r}: MPS is not available here", hint="use cpu or auto")
    return dev
