"""devcluster's `/metrics`: kube-apiserver's `apiserver_request_total`, counted per request by `server.ApiServer`.

`request_labels` is the pure part (method, path, query, content type → the labels kube-apiserver gives the request:
verb LIST / WATCH / APPLY / DELETECOLLECTION as its `CleanVerb` says, scope resource / namespace / cluster);
`RequestCounter` adds them up and writes the Prometheus text that dashboards and `bench/` scrape.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence

from lahar.devcluster.routing import parse_resource_path

__all__ = ["LABELS", "RequestCounter", "request_labels"]

# the label names of kube-apiserver's apiserver_request_total that devcluster fills, in its exposition order
LABELS = ("code", "component", "dry_run", "group", "resource", "scope", "subresource", "verb", "version")

_Labels = tuple[str, str, str, str, str, str, str, str]  # dry_run, group, resource, scope, subresource, verb, version


def request_labels(method: str, path: str, query: Sequence[tuple[str, str]] = (), *,
                   content_type: str = "") -> _Labels:
    """The labels of one request but `code` and `component`: (dry_run, group, resource, scope, subresource, verb,
    version). A path that names no resource (discovery, OpenAPI, health) has an empty resource and scope, and its
    method as the verb, as kube-apiserver counts non-resource requests."""
    method = method.upper()
    params = dict(query)
    dry_run = params.get("dryRun", "")
    parts = [p for p in path.split("/") if p]
    target = None
    if len(parts) >= 3 and parts[0] == "api":
        target = parse_resource_path("", parts[1], parts[2:])
    elif len(parts) >= 4 and parts[0] == "apis":
        target = parse_resource_path(parts[1], parts[2], parts[3:])
    if target is None:
        return dry_run, "", "", "", "", method, ""
    watch = target.watch or params.get("watch", "").lower() in ("true", "1")
    if method == "GET":
        verb = "WATCH" if watch else ("GET" if target.name else "LIST")
    elif method == "PATCH" and content_type.split(";")[0].strip() == "application/apply-patch+yaml":
        verb = "APPLY"
    elif method == "DELETE" and not target.name:
        verb = "DELETECOLLECTION"
    else:
        verb = method
    scope = "resource" if target.name else ("namespace" if target.namespace else "cluster")
    return dry_run, target.group, target.plural, scope, target.subresource or "", verb, target.version


class RequestCounter:
    """apiserver_request_total as a counter per label set; `add` is called once per answered request, from the
    event loop and from threads alike."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[int, _Labels]] = Counter()
        self._lock = threading.Lock()

    def add(self, code: int, labels: _Labels) -> None:
        with self._lock:
            self._counts[(code, labels)] += 1

    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())

    def exposition(self) -> bytes:
        """The Prometheus text format (0.0.4), one sample per label set, in a stable order."""
        with self._lock:
            items = sorted(self._counts.items())
        lines = ["# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, "
                 "dry run value, group, version, resource, scope, component, and HTTP response code.",
                 "# TYPE apiserver_request_total counter"]
        for (code, (dry_run, group, resource, scope, subresource, verb, version)), n in items:
            values = (str(code), "apiserver", dry_run, group, resource, scope, subresource, verb, version)
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in zip(LABELS, values, strict=True))
            lines.append(f"apiserver_request_total{{{labels}}} {n}")
        return ("\n".join(lines) + "\n").encode()


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
