"""The pod `log` subresource of devcluster (`kubectl logs [-f] [--tail N] [--timestamps] [--previous]`).

A simulated container writes no output, so its log is what the simulated kubelet (`devcluster.kubelet`) knows: when
the container started and where, its `lahar.sh/sim-duration` and `lahar.sh/sim-exit-code`, and how it ended. `lines`
is the pure function "the log of this container, from the pod object"; `serve` is the shell `devcluster.server` calls:
one answer, or with `follow=true` a chunked stream that re-reads the pod until the container ends. Bad parameters
are a 400 naming the parameter, as kube-apiserver answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lahar.devcluster import kubelet
from lahar.kube import durations, errors

__all__ = ["LogOptions", "container_name", "lines", "options", "render", "serve"]

Obj = dict[str, Any]
Line = tuple[str, str]               # (RFC 3339 timestamp, text)
FOLLOW_POLL_SECONDS = 0.25


@dataclass(frozen=True)
class LogOptions:
    """The query parameters of `GET .../pods/<name>/log` that devcluster honours."""

    container: str = ""
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    tail_lines: int | None = None
    limit_bytes: int | None = None


def _flag(get: Callable[[str], str | None], key: str) -> bool:
    value = get(key)
    if value is None or value == "":
        return False
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise errors.BadRequest(f"{key}: Invalid value: {value!r}: must be true or false")


def _count(get: Callable[[str], str | None], key: str, *, minimum: int) -> int | None:
    value = get(key)
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        raise errors.BadRequest(f"{key}: Invalid value: {value!r}: must be an integer") from None
    if number < minimum:
        raise errors.BadRequest(f"{key}: Invalid value: {number}: must be greater than or equal to {minimum}")
    return number


def options(get: Callable[[str], str | None]) -> LogOptions:
    """`LogOptions` from the query (`get(name)` answers a parameter or None); a bad value is a 400 naming it."""
    return LogOptions(container=get("container") or "", follow=_flag(get, "follow"),
                      previous=_flag(get, "previous"), timestamps=_flag(get, "timestamps"),
                      tail_lines=_count(get, "tailLines", minimum=0), limit_bytes=_count(get, "limitBytes", minimum=1))


def container_name(pod: Mapping[str, Any], wanted: str) -> str:
    """The container the log is of: `wanted`, or the pod's only container; kube-apiserver's 400s otherwise."""
    name = str((pod.get("metadata") or {}).get("name") or "")
    spec = pod.get("spec") or {}
    names = [str(c.get("name") or "") for c in spec.get("containers") or []]
    init = [str(c.get("name") or "") for c in spec.get("initContainers") or []]
    if not wanted:
        if len(names) == 1:
            return names[0]
        raise errors.BadRequest(f"a container name must be specified for pod {name}, choose one of: "
                                f"[{' '.join(names)}]" + (f" or one of the init containers: [{' '.join(init)}]"
                                                            if init else ""))
    if wanted not in names and wanted not in init:
        raise errors.BadRequest(f"container {wanted} is not valid for pod {name}")
    return wanted


def _status(pod: Mapping[str, Any], container: str) -> Obj:
    status = pod.get("status") or {}
    for cs in [*(status.get("containerStatuses") or []), *(status.get("initContainerStatuses") or [])]:
        if cs.get("name") == container:
            return cs
    return {}


def _image(pod: Mapping[str, Any], container: str) -> str:
    spec = pod.get("spec") or {}
    for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        if c.get("name") == container:
            return str(c.get("image") or "")
    return ""


def _plus(ts: str, seconds: float) -> str:
    start = dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return (start + dt.timedelta(seconds=seconds)).astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _run_lines(pod: Mapping[str, Any], container: str, started: str, ended: Mapping[str, Any] | None) -> list[Line]:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    out: list[Line] = [(started, f'lahar simulated container "{container}" (image {_image(pod, container)}) '
                                 f"started on node {node}")]
    raw_duration = annotations.get(kubelet.DURATION_ANNOTATION)
    exit_code = str(annotations.get(kubelet.EXIT_CODE_ANNOTATION, "0")).strip() or "0"
    try:
        seconds = durations.parse(str(raw_duration)) if raw_duration is not None else None
    except ValueError:
        seconds = None
    if seconds is not None:
        out.append((started, f"{kubelet.DURATION_ANNOTATION}={raw_duration}, {kubelet.EXIT_CODE_ANNOTATION}="
                             f"{exit_code}: runs until {_plus(started, seconds)}"))
    else:
        out.append((started, f"no valid {kubelet.DURATION_ANNOTATION}: runs until the kubelet's default run time "
                             f"or until the pod is deleted"))
    if ended is not None:
        finished = str(ended.get("finishedAt") or started)
        out.append((finished, f"exited with code {ended.get('exitCode', 0)} ({ended.get('reason') or 'Completed'})"))
    return out


def lines(pod: Mapping[str, Any], container: str, *, previous: bool = False) -> tuple[list[Line], bool]:
    """The log of one container of a pod, and whether that container instance has ended (a follow stops there).

    Refuses as kube-apiserver does a container that has not started ("is waiting to start") and a `previous` log
    of a container that never restarted."""
    name = str((pod.get("metadata") or {}).get("name") or "")
    cs = _status(pod, container)
    if previous:
        last = (cs.get("lastState") or {}).get("terminated")
        if not last:
            raise errors.BadRequest(f'previous terminated container "{container}" in pod "{name}" not found')
        return _run_lines(pod, container, str(last.get("startedAt") or last.get("finishedAt") or ""), last), True
    state = cs.get("state") or {}
    if "running" in state:
        return _run_lines(pod, container, str(state["running"].get("startedAt") or ""), None), False
    if "terminated" in state:
        ended = state["terminated"]
        return _run_lines(pod, container, str(ended.get("startedAt") or ended.get("finishedAt") or ""), ended), True
    reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
    raise errors.BadRequest(f'container "{container}" in pod "{name}" is waiting to start: {reason}')


def render(log: list[Line], opts: LogOptions) -> bytes:
    """The response body: `tailLines` last lines, with `timestamps` the RFC 3339 time first, cut at `limitBytes`."""
    if opts.tail_lines is not None:
        log = log[len(log) - opts.tail_lines:] if opts.tail_lines else []
    text = "".join(f"{ts.replace('Z', '.000000000Z')} {msg}\n" if opts.timestamps else f"{msg}\n"
                   for ts, msg in log)
    body = text.encode()
    return body[:opts.limit_bytes] if opts.limit_bytes is not None else body


async def serve(get_pod: Callable[[], Awaitable[Obj]], query_get: Callable[[str], str | None], receive: Any,
                send: Any, *, closing: Callable[[], bool], poll: float = FOLLOW_POLL_SECONDS) -> None:
    """Answer `GET .../log`: the log at once, or with `follow=true` a stream of new lines until the container ends,
    the pod is gone, the client disconnects or the server shuts down (`closing()`)."""
    opts = options(query_get)
    pod = await get_pod()
    container = container_name(pod, opts.container)
    log, ended = lines(pod, container, previous=opts.previous)
    headers = [(b"content-type", b"text/plain"), (b"cache-control", b"no-cache, private")]
    if not opts.follow or ended:
        body = render(log, opts)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*headers, (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [*headers, (b"transfer-encoding",
                                                                                     b"chunked")]})
    disconnected = asyncio.Event()

    async def listen() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        disconnected.set()

    listener = asyncio.ensure_future(listen())
    budget = opts.limit_bytes
    sent = 0
    try:
        chunk = render(log, LogOptions(timestamps=opts.timestamps, tail_lines=opts.tail_lines, limit_bytes=budget))
        sent = len(log)
        while True:
            if chunk:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                if budget is not None:
                    budget -= len(chunk)
                    if budget <= 0:
                        break
            if ended or closing():
                break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(poll):
                    await disconnected.wait()
            if disconnected.is_set():
                break
            try:
                pod = await get_pod()
                now_log, ended = lines(pod, container)
                if now_log[0] != log[0]:    # restarted since: the followed instance ended as lastState says
                    now_log, ended = lines(pod, container, previous=True)
                log = now_log
            except errors.ApiError:         # the pod is gone (or no longer readable): the stream ends
                break
            chunk = render(log[sent:], LogOptions(timestamps=opts.timestamps, limit_bytes=budget))
            sent = len(log)
    finally:
        listener.cancel()
    with contextlib.suppress(Exception):  # the client may be gone already
        await send({"type": "http.response.body", "body": b"", "more_body": False})
