"""A test-only app factory for `lahar webhook --app-factory`: lahar's own app whose queue look-up stalls for the
queues named here, so a review can be made slow on purpose (tests/integration/test_webhook_workers.py).

`slow-gil` holds the GIL (a regular expression that backtracks for minutes: no thread of the process runs, as in the
Rust CEL engine); `slow-sleep` sleeps with the GIL released (the process still answers uvicorn's health ping).
"""

from __future__ import annotations

import re
import time
from typing import Any

from lahar.commands import webhook
from lahar.webhooks import app as webhook_app

GIL_QUEUE = "slow-gil"
SLEEP_QUEUE = "slow-sleep"


class StallingLookups:
    """Delegates to lahar's look-ups; `queue()` of a stalling name does not come back for a long time."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def queue(self, name: str) -> dict | None:
        if name == GIL_QUEUE:
            re.fullmatch(r"(a+)+b", "a" * 40)      # exponential backtracking inside one C call
        elif name == SLEEP_QUEUE:
            time.sleep(600)
        return self._inner.queue(name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def stalling_app() -> Any:
    app = webhook.worker_app()
    webhook_app.update_admission(app, lookups=StallingLookups(app.state.admission.lookups))
    return app
