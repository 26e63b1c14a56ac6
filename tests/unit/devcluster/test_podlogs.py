"""devcluster.podlogs: the log of a simulated container from its pod (`kubectl logs`, `-f`, `--tail`), as tables,
and the follow stream over a pod whose container ends while it is followed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from lahar.devcluster import podlogs
from lahar.kube import errors

T0, T1 = "2026-01-01T10:00:00Z", "2026-01-01T10:00:05Z"


def pod(state: dict | None = None, *, containers: tuple[str, ...] = ("main",), last: dict | None = None,
        duration: str | None = "5s", exit_code: str | None = "3") -> dict:
    annotations = {}
    if duration is not None:
        annotations["lahar.sh/sim-duration"] = duration
    if exit_code is not None:
        annotations["lahar.sh/sim-exit-code"] = exit_code
    statuses = []
    if state is not None:
        statuses.append({"name": containers[0], "state": state, "lastState": {"terminated": last} if last else {}})
    return {"metadata": {"name": "p", "namespace": "ns", "annotations": annotations},
            "spec": {"nodeName": "n1", "containers": [{"name": c, "image": "busybox"} for c in containers]},
            "status": {"containerStatuses": statuses}}


RUNNING = {"running": {"startedAt": T0}}
ENDED = {"terminated": {"startedAt": T0, "finishedAt": T1, "exitCode": 3, "reason": "Error"}}
STARTED = 'lahar simulated container "main" (image busybox) started on node n1'
PLANNED = "lahar.sh/sim-duration=5s, lahar.sh/sim-exit-code=3: runs until 2026-01-01T10:00:05Z"


@pytest.mark.parametrize(("p", "previous", "expected", "ended"), [
    (pod(RUNNING), False, [(T0, STARTED), (T0, PLANNED)], False),
    (pod(ENDED), False, [(T0, STARTED), (T0, PLANNED), (T1, "exited with code 3 (Error)")], True),
    (pod(RUNNING, duration=None, exit_code=None), False,
     [(T0, STARTED), (T0, "no valid lahar.sh/sim-duration: runs until the kubelet's default run time or until the "
                         "pod is deleted")], False),
    (pod(RUNNING, last=ENDED["terminated"]), True,
     [(T0, STARTED), (T0, PLANNED), (T1, "exited with code 3 (Error)")], True),
], ids=["running", "terminated", "no-annotations", "previous"])
def test_lines(p: dict, previous: bool, expected: list, ended: bool) -> None:
    assert podlogs.lines(p, "main", previous=previous) == (expected, ended)


@pytest.mark.parametrize(("p", "previous", "message"), [
    (pod(None), False, 'container "main" in pod "p" is waiting to start: ContainerCreating'),
    (pod({"waiting": {"reason": "ImagePullBackOff"}}), False,
     'container "main" in pod "p" is waiting to start: ImagePullBackOff'),
    (pod(RUNNING), True, 'previous terminated container "main" in pod "p" not found'),
], ids=["no-status-yet", "waiting", "no-previous"])
def test_lines_refused(p: dict, previous: bool, message: str) -> None:
    with pytest.raises(errors.BadRequest, match=message):
        podlogs.lines(p, "main", previous=previous)


@pytest.mark.parametrize(("containers", "wanted", "result"), [
    (("main",), "", "main"),
    (("a", "b"), "b", "b"),
    (("a", "b"), "", "a container name must be specified for pod p, choose one of: [a b]"),
    (("a",), "x", "container x is not valid for pod p"),
], ids=["only-container", "named", "must-choose", "unknown"])
def test_container_name(containers: tuple[str, ...], wanted: str, result: str) -> None:
    p = pod(RUNNING, containers=containers)
    if result in containers:
        assert podlogs.container_name(p, wanted) == result
    else:
        with pytest.raises(errors.BadRequest, match=result.replace("[", r"\[").replace("]", r"\]")):
            podlogs.container_name(p, wanted)


@pytest.mark.parametrize(("query", "expected"), [
    ({}, podlogs.LogOptions()),
    ({"container": "c", "follow": "true", "tailLines": "2", "timestamps": "true"},
     podlogs.LogOptions(container="c", follow=True, tail_lines=2, timestamps=True)),
    ({"previous": "1", "limitBytes": "10"}, podlogs.LogOptions(previous=True, limit_bytes=10)),
    ({"tailLines": "x"}, "tailLines: Invalid value: 'x': must be an integer"),
    ({"tailLines": "-1"}, "tailLines: Invalid value: -1: must be greater than or equal to 0"),
    ({"limitBytes": "0"}, "limitBytes: Invalid value: 0: must be greater than or equal to 1"),
    ({"follow": "maybe"}, "follow: Invalid value: 'maybe': must be true or false"),
], ids=["none", "follow-tail-timestamps", "previous-limit", "tail-not-a-number", "tail-negative", "limit-zero",
        "follow-not-a-bool"])
def test_options(query: dict, expected: Any) -> None:
    if isinstance(expected, str):
        with pytest.raises(errors.BadRequest) as e:
            podlogs.options(query.get)
        assert str(e.value) == expected or expected in e.value.status()["message"]
    else:
        assert podlogs.options(query.get) == expected


LOG = [(T0, "a"), (T0, "b"), (T1, "c")]


@pytest.mark.parametrize(("opts", "body"), [
    (podlogs.LogOptions(), b"a\nb\nc\n"),
    (podlogs.LogOptions(tail_lines=1), b"c\n"),
    (podlogs.LogOptions(tail_lines=0), b""),
    (podlogs.LogOptions(tail_lines=9), b"a\nb\nc\n"),
    (podlogs.LogOptions(timestamps=True, tail_lines=1), b"2026-01-01T10:00:05.000000000Z c\n"),
    (podlogs.LogOptions(limit_bytes=3), b"a\nb"),
], ids=["all", "tail-1", "tail-0", "tail-more-than-all", "timestamps", "limit-bytes"])
def test_render(opts: podlogs.LogOptions, body: bytes) -> None:
    assert podlogs.render(LOG, opts) == body


def _serve(pods: list[dict], query: dict) -> tuple[int, bytes, int]:
    """Run `serve` over a pod that goes through `pods` (one per read); the status, body and pod reads."""
    reads = 0
    sent: list[dict] = []

    async def get_pod() -> dict:
        nonlocal reads
        reads += 1
        return pods[min(reads - 1, len(pods) - 1)]

    async def receive() -> dict:
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(podlogs.serve(get_pod, query.get, receive, send, closing=lambda: False, poll=0.001))
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], body, reads


def test_follow_streams_until_the_container_ends() -> None:
    status, body, reads = _serve([pod(RUNNING), pod(RUNNING), pod(ENDED)], {"follow": "true"})
    assert status == 200
    assert body.decode().splitlines() == [STARTED, PLANNED, "exited with code 3 (Error)"]
    assert reads == 3


def test_follow_with_tail_starts_from_the_last_lines() -> None:
    _, body, _ = _serve([pod(RUNNING), pod(ENDED)], {"follow": "true", "tailLines": "1"})
    assert body.decode().splitlines() == [PLANNED, "exited with code 3 (Error)"]


def test_follow_ends_when_the_container_restarted() -> None:
    restarted = pod({"running": {"startedAt": T1}}, last=ENDED["terminated"])
    _, body, _ = _serve([pod(RUNNING), restarted], {"follow": "true"})
    assert body.decode().splitlines() == [STARTED, PLANNED, "exited with code 3 (Error)"]


def test_follow_ends_when_the_pod_is_gone() -> None:
    reads = 0

    async def get_pod() -> dict:
        nonlocal reads
        reads += 1
        if reads > 1:
            raise errors.NotFound('pods "p" not found')
        return pod(RUNNING)

    sent: list[dict] = []

    async def receive() -> dict:
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(podlogs.serve(get_pod, {"follow": "true"}.get, receive, send, closing=lambda: False, poll=0.001))
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


def test_a_finished_container_answers_at_once_even_with_follow() -> None:
    status, body, reads = _serve([pod(ENDED)], {"follow": "true", "tailLines": "1"})
    assert (status, body, reads) == (200, b"exited with code 3 (Error)\n", 1)
