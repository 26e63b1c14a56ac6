"""Sub-commands of `lahar`, one module per topic (webhook, worker, scheduler, ...), each with `register(app)`.

`lahar.cli` calls `register_all(app)`; a module here adds its commands to the Typer app and imports its layer
lazily inside the command bodies so `lahar --help` stays fast.
"""

from __future__ import annotations

import importlib
import pkgutil

import typer

__all__ = ["register_all"]


def register_all(app: typer.Typer) -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        module.register(app)
