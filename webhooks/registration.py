"""The shell that keeps the policy-only webhook entries (`/policies/mutate`, `/policies/validate`) registered exactly
while the AdmissionPolicies in force could use them: `certs.bundles.sync_policy_webhooks` on every policy change.

Started by `lahar webhook` (`commands.webhook.live_admission`) next to the policy ConfigMap watch; `kick()` is the
watch's on_change, and a resync every `resync` seconds repairs what anyone else (an old `certs ensure`, Helm) wrote.
Level-based: each pass re-reads the policies in force and the stored configurations; kicks arriving during a pass
coalesce into one more pass. A write refused (RBAC) is logged once; the entries then stay as they are.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lahar.certs import bundles
from lahar.kube import errors

__all__ = ["PolicyWebhooks"]

log = logging.getLogger(__name__)


class PolicyWebhooks:
    """One background thread applying `bundles.sync_policy_webhooks(client, templates, demand())`."""

    def __init__(self, client: Any, templates: Sequence[Mapping[str, Any]],
                 demand: Callable[[], bundles.PolicyDemand | None], *, resync: float = 30.0) -> None:
        self.client, self.templates, self.demand, self.resync = client, list(templates), demand, resync
        self.last: dict[str, str] = {}
        self.passes = 0
        self._wake = threading.Event()
        self._idle = threading.Condition()
        self._stop = False
        self._refused = False
        self._thread: threading.Thread | None = None

    def start(self) -> PolicyWebhooks:
        self._thread = threading.Thread(target=self._run, name="lahar-policy-webhooks", daemon=True)
        self._thread.start()
        self.kick()
        return self

    def kick(self, *_: object) -> None:
        """Ask for a pass (any arguments ignored: usable as a loader's on_change)."""
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def wait_passes(self, count: int, timeout: float = 10.0) -> bool:
        """Wait until `count` passes have completed (tests)."""
        with self._idle:
            return self._idle.wait_for(lambda: self.passes >= count, timeout)

    def sync_once(self) -> dict[str, str]:
        demand = self.demand()
        try:
            self.last = bundles.sync_policy_webhooks(self.client, self.templates, demand)
        except errors.Forbidden as e:
            if not self._refused:
                log.warning("webhooks: may not update the webhook configurations (%s); the policy webhooks stay "
                            "registered as they are", e)
            self._refused = True
            return {}
        self._refused = False
        changed = [name for name, state in self.last.items() if state == "updated"]
        if changed:
            log.info("webhooks: policy webhook entries re-registered in %s (%d mutating, %d validating policy "
                     "rules)", ", ".join(changed), len(demand.mutating) if demand else -1,
                     len(demand.validating) if demand else -1)
        return self.last

    def _run(self) -> None:
        while not self._stop:
            self._wake.wait(self.resync)
            if self._stop:
                return
            self._wake.clear()
            try:
                self.sync_once()
            except Exception:  # noqa: BLE001 - retried on the next kick or resync
                log.exception("webhooks: syncing the policy webhooks failed; retrying")
                self._wake.wait(1.0)
                self._wake.set()
            with self._idle:
                self.passes += 1
                self._idle.notify_all()
