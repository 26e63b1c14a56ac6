"""Sub-commands of `lahar`, one module per topic (webhook, worker, scheduler, ...), each with `register(app)`.

`lahar.cli` calls `register_all(app)`; the modules are listed here, in one place, and each imports its layer lazily
inside the command bodies so `lahar --help` stays fast.
"""

from __future__ import annotations

import typer

from lahar.commands import (
    admit,
    certs,
    chart,
    controllers,
    dashboard,
    explain,
    policy,
    scheduler,
    up,
    vc,
    vcgroups,
    webhook,
)

__all__ = ["MODULES", "register_all"]

MODULES = (admit, certs, chart, controllers, dashboard, explain, policy, scheduler, up, vc, vcgroups, webhook)


def register_all(app: typer.Typer) -> None:
    for module in MODULES:
        module.register(app)
