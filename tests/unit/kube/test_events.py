"""`kube.events`' pure core, client-go's event correlation: which write one occurrence of an Event is (`correlate`),
and what a write's answer tells the aggregation cache (`observed`)."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.kube import events as kube_events

EVENT = {"metadata": {"name": "job1.abc"}, "count": 1}


@pytest.mark.parametrize(("seen", "want"), [
    (None, kube_events.Write("create", "job1.abc", EVENT)),
    (kube_events.Observed("job1.abc", 4, "t0", "17"),
     kube_events.Write("patch", "job1.abc", {"count": 5, "lastTimestamp": "t9", "metadata": {"resourceVersion": "17"}})),
    (kube_events.Observed("job1.abc", 1, "t0", None), kube_events.Write("patch", "job1.abc", {"count": 2, "lastTimestamp": "t9"})),
], ids=["first-is-a-create", "repeat-patches-count-with-precondition", "repeat-without-known-version"])
def test_correlate(seen: kube_events.Observed | None, want: kube_events.Write) -> None:
    assert kube_events.correlate(seen, event=EVENT, now="t9") == want


@pytest.mark.parametrize(("answer", "want"), [
    ({"metadata": {"name": "e", "resourceVersion": "3"}, "count": 2, "firstTimestamp": "t0"},
     kube_events.Observed("e", 2, "t0", "3")),
    ({"metadata": {"name": "e"}, "lastTimestamp": "t1"}, kube_events.Observed("e", 1, "t1", None)),
    (None, None),
    ({"metadata": {}}, None),
], ids=["full-answer", "no-count-no-version", "no-answer", "nameless"])
def test_observed(answer: Any, want: kube_events.Observed | None) -> None:
    assert kube_events.observed(answer) == want


@pytest.mark.parametrize(("event", "want"), [
    ({"metadata": {"namespace": "ns"}, "involvedObject": {"kind": "Job", "name": "j", "uid": "u"}, "reason": "R",
      "message": "m"}, ("ns", "Job", "j", "u", "R", "m")),
    ({}, ("", "", "", "", "", "")),
], ids=["full", "empty"])
def test_key_of(event: dict[str, Any], want: tuple[str, ...]) -> None:
    assert kube_events.key_of(event) == want
