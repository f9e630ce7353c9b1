"""CLI commands: each module has ``register(subparsers)``, which adds its parser and sets ``func``
to a ``run(args) -> int``. :mod:`rasp.cli` discovers them; shared option helpers live in
:mod:`rasp.commands._common`."""
