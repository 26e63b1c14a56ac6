"""cdp: cooldown protection, so a pod that has just started is not preempted or reclaimed (Volcano's `plugins/cdp`).

A pod opts in with `volcano.sh/cooldown-time` (label first, then annotation; a Go duration such as `600s`, `10m`).
A Running pod whose `PodScheduled` condition turned True less than that long before the session's time is kept
off the victim list; every other candidate (no or malformed value, not Running, cooled down) stays a victim. The
decisions are pure functions (`cooldown`, `protected`) over the pod and the session's time.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from lahar.kube import durations
from lahar.kube.models import labels as keys
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Task
from lahar.scheduler.plugins._shared.victims import VictimFilter

__all__ = ["CooldownProtection", "cooldown", "protected"]


def _time(text: Any) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


def cooldown(pod: Mapping[str, Any]) -> float | None:
    """The pod's cooldown in seconds: the label, else the annotation; None when absent or not a Go duration."""
    meta = pod.get("metadata") or {}
    value = (meta.get("labels") or {}).get(keys.COOLDOWN_TIME_KEY)
    if value is None:
        value = (meta.get("annotations") or {}).get(keys.COOLDOWN_TIME_KEY)
    if value is None:
        return None
    try:
        return durations.parse(str(value))
    except ValueError:
        return None


def protected(pod: Mapping[str, Any], now: dt.datetime) -> bool:
    """Is the pod still cooling down at `now`? Only a Running pod with a True `PodScheduled` condition whose
    lastTransitionTime + cooldown is after `now` (the first PodScheduled condition decides, as upstream)."""
    seconds = cooldown(pod)
    if seconds is None:
        return False
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    for c in status.get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "True":
            since = _time(c.get("lastTransitionTime"))
            return since is not None and since + dt.timedelta(seconds=seconds) > now
    return False


class CooldownProtection(VictimFilter):
    name = "cdp"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        self.arguments = dict(arguments or {})
        self.now = dt.datetime.now(dt.UTC)

    def on_session_open(self, ssn: Session) -> None:
        self.now = _time(ssn.timestamp) or dt.datetime.now(dt.UTC)

    def _filter(self, tasks: list[Task]) -> list[Task]:
        return [t for t in tasks if not protected(t.pod, self.now)]

