"""Server-side printing: `meta.k8s.io/v1 Table` bodies for `kubectl get` (Accept `...;as=Table;...`).

Pure functions called by `devcluster.server`: built-in kinds get kube-apiserver's columns (pods, nodes, namespaces,
configmaps, events, deployments, ...), custom resources their CRD's `additionalPrinterColumns` (a JSONPath
subset), anything else Name + Age. `now` is passed in so ages are deterministic in tests.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from lahar.kube import durations

__all__ = ["Column", "columns_for", "jsonpath", "row", "table"]

Obj = dict[str, Any]
Column = dict[str, Any]  # {name, type, format, description, priority}


def _parse_time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _age(value: Any, now: dt.datetime) -> str:
    t = _parse_time(value)
    if t is None:
        return "<unknown>"
    return durations.human((now - t).total_seconds())


# --- JSONPath subset: .a.b, ['a'], [0], [*], [?(@.k=="v")] -------------------------------------------------

_TOKEN = re.compile(r"""\.\.?(?P<field>[A-Za-z0-9_\-$]+)|\[(?P<quoted>'[^']*'|"[^"]*")\]|\[(?P<index>-?\d+)\]|"""
                    r"""\[\*\]|\.\*|\[\?\(@(?P<fpath>(?:\.[A-Za-z0-9_\-]+)+)\s*(?P<op>==|!=)\s*"""
                    r"""(?P<fval>'[^']*'|"[^"]*"|[^)\s]+)\s*\)\]""")


def jsonpath(obj: Any, path: str) -> list[Any]:
    """Evaluate the JSONPath subset CRD printer columns use; every match, in order (empty when none)."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    path = path.removeprefix("$")
    current = [obj]
    pos = 0
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if not m:
            return []
        pos = m.end()
        nxt: list[Any] = []
        for value in current:
            if m.group("field") is not None or m.group("quoted") is not None:
                key = m.group("field") if m.group("field") is not None else m.group("quoted")[1:-1]
                if isinstance(value, dict) and key in value:
                    nxt.append(value[key])
            elif m.group("index") is not None:
                i = int(m.group("index"))
                if isinstance(value, list) and -len(value) <= i < len(value):
                    nxt.append(value[i])
            elif m.group("fpath") is not None:
                want = m.group("fval").strip("'\"")
                for item in value if isinstance(value, list) else []:
                    got = jsonpath(item, m.group("fpath"))
                    text = _text(got[0]) if got else None
                    if (text == want) == (m.group("op") == "=="):
                        nxt.append(item)
            else:  # [*] or .*
                if isinstance(value, list):
                    nxt.extend(value)
                elif isinstance(value, dict):
                    nxt.extend(value.values())
        current = nxt
    return current


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return orjson.dumps(value).decode()
    return str(value)


# --- columns -----------------------------------------------------------------------------------------------

def _col(name: str, type_: str = "string", *, priority: int = 0, fmt: str = "", description: str = "") -> Column:
    return {"name": name, "type": type_, "format": fmt, "description": description or name, "priority": priority}


_NAME = _col("Name", fmt="name", description="Name must be unique within a namespace.")
_AGE = _col("Age", description="CreationTimestamp is a timestamp representing the server time when this object "
                               "was created.")


def _none(value: Any) -> Any:
    return "<none>" if value in (None, "", [], {}) else value


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _pod_row(obj: Obj, now: dt.datetime) -> list[Any]:
    spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, _meta(obj)
    total = len(spec.get("containers") or [])
    ready = restarts = 0
    reason = status.get("reason") or status.get("phase") or "Pending"
    initializing = False
    init_statuses = status.get("initContainerStatuses") or []
    for i, cs in enumerate(init_statuses):
        restarts += int(cs.get("restartCount") or 0)
        state = cs.get("state") or {}
        term, waiting = state.get("terminated"), state.get("waiting")
        if term and int(term.get("exitCode") or 0) == 0:
            continue
        if term:
            reason = "Init:" + (term.get("reason") or f"ExitCode:{term.get('exitCode')}")
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(spec.get('initContainers') or [])}"
        initializing = True
        break
    if not initializing:
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += int(cs.get("restartCount") or 0)
            state = cs.get("state") or {}
            waiting, term, running = state.get("waiting"), state.get("terminated"), state.get("running")
            if waiting and waiting.get("reason"):
                reason = waiting["reason"]
            elif term and term.get("reason"):
                reason = term["reason"]
            elif term:
                reason = f"Signal:{term['signal']}" if term.get("signal") else f"ExitCode:{term.get('exitCode')}"
            elif running is not None and cs.get("ready"):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            ready_cond = any(c.get("type") == "Ready" and c.get("status") == "True"
                             for c in status.get("conditions") or [])
            reason = "Running" if ready_cond else "NotReady"
    if meta.get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    return [meta.get("name"), f"{ready}/{total}", reason, restarts, _age(meta.get("creationTimestamp"), now),
            _none(status.get("podIP")), _none(spec.get("nodeName")), _none(status.get("nominatedNodeName")),
            "<none>"]


def _node_row(obj: Obj, now: dt.datetime) -> list[Any]:
    spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, _meta(obj)
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    states = ["Ready" if conditions.get("Ready") == "True" else
              ("NotReady" if "Ready" in conditions else "Unknown")]
    if spec.get("unschedulable"):
        states.append("SchedulingDisabled")
    labels = meta.get("labels") or {}
    roles = sorted({k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/") and "/" in k}
                   | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set()))
    roles = [r for r in roles if r]
    info = status.get("nodeInfo") or {}
    addrs = status.get("addresses") or []

    def addr(kind: str) -> str:
        return next((a.get("address") for a in addrs if a.get("type") == kind), "<none>")

    return [meta.get("name"), ",".join(states), ",".join(roles) or "<none>", _age(meta.get("creationTimestamp"), now),
            info.get("kubeletVersion", ""), addr("InternalIP"), addr("ExternalIP"),
            info.get("osImage") or "<unknown>", info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>"]


def _event_time(obj: Obj) -> Any:
    series = obj.get("series") or {}
    return (series.get("lastObservedTime") or obj.get("lastTimestamp") or obj.get("eventTime")
            or obj.get("deprecatedLastTimestamp") or _meta(obj).get("creationTimestamp"))


def _event_row(obj: Obj, now: dt.datetime) -> list[Any]:
    involved = obj.get("involvedObject") or obj.get("regarding") or {}
    source = obj.get("source") or {}
    src = source.get("component") or obj.get("reportingController") or obj.get("reportingComponent") or ""
    if source.get("host"):
        src = f"{src}, {source['host']}"
    first = obj.get("firstTimestamp") or obj.get("eventTime") or obj.get("deprecatedFirstTimestamp")
    count = obj.get("count") or (obj.get("series") or {}).get("count") or obj.get("deprecatedCount") or 1
    return [_age(_event_time(obj), now), obj.get("type") or "", obj.get("reason") or "",
            f"{(involved.get('kind') or '').lower()}/{involved.get('name') or ''}",
            involved.get("fieldPath") or "", src, obj.get("message") or obj.get("note") or "",
            _age(first, now) if first else "<unknown>", count, _meta(obj).get("name")]


def _deployment_row(obj: Obj, now: dt.datetime) -> list[Any]:
    spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, _meta(obj)
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    return [meta.get("name"), f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 1)}",
            status.get("updatedReplicas", 0), status.get("availableReplicas", 0),
            _age(meta.get("creationTimestamp"), now),
            ",".join(c.get("name", "") for c in containers) or "<none>",
            ",".join(c.get("image", "") for c in containers) or "<none>",
            ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>"]


def _replicaset_row(obj: Obj, now: dt.datetime) -> list[Any]:
    spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, _meta(obj)
    return [meta.get("name"), spec.get("replicas", 1), status.get("replicas", 0), status.get("readyReplicas", 0),
            _age(meta.get("creationTimestamp"), now)]


def _simple(*cells: Callable[[Obj, dt.datetime], Any]) -> Callable[[Obj, dt.datetime], list[Any]]:
    def render(obj: Obj, now: dt.datetime) -> list[Any]:
        return [_meta(obj).get("name"), *(c(obj, now) for c in cells)]
    return render


def _age_cell(obj: Obj, now: dt.datetime) -> str:
    return _age(_meta(obj).get("creationTimestamp"), now)


def _service_ports(obj: Obj) -> str:
    ports = (obj.get("spec") or {}).get("ports") or []
    out = []
    for p in ports:
        text = f"{p.get('port')}"
        if p.get("nodePort"):
            text += f":{p['nodePort']}"
        out.append(f"{text}/{p.get('protocol', 'TCP')}")
    return ",".join(out) or "<none>"


_Printer = tuple[list[Column], Callable[[Obj, dt.datetime], list[Any]]]

_BUILTIN: dict[tuple[str, str], _Printer] = {
    ("", "Pod"): ([_NAME, _col("Ready"), _col("Status"), _col("Restarts", "integer"), _AGE,
                   _col("IP", priority=1), _col("Node", priority=1), _col("Nominated Node", priority=1),
                   _col("Readiness Gates", priority=1)], _pod_row),
    ("", "Node"): ([_NAME, _col("Status"), _col("Roles"), _AGE, _col("Version"), _col("Internal-IP", priority=1),
                    _col("External-IP", priority=1), _col("OS-Image", priority=1),
                    _col("Kernel-Version", priority=1), _col("Container-Runtime", priority=1)], _node_row),
    ("", "Namespace"): ([_NAME, _col("Status"), _AGE],
                        _simple(lambda o, n: (o.get("status") or {}).get("phase", "Active"), _age_cell)),
    ("", "ConfigMap"): ([_NAME, _col("Data", "integer"), _AGE],
                        _simple(lambda o, n: len(o.get("data") or {}) + len(o.get("binaryData") or {}), _age_cell)),
    ("", "Secret"): ([_NAME, _col("Type"), _col("Data", "integer"), _AGE],
                     _simple(lambda o, n: o.get("type", "Opaque"), lambda o, n: len(o.get("data") or {}),
                             _age_cell)),
    ("", "Service"): ([_NAME, _col("Type"), _col("Cluster-IP"), _col("External-IP"), _col("Port(s)"), _AGE,
                       _col("Selector", priority=1)],
                      _simple(lambda o, n: (o.get("spec") or {}).get("type", "ClusterIP"),
                              lambda o, n: _none((o.get("spec") or {}).get("clusterIP")),
                              lambda o, n: _none(",".join((o.get("spec") or {}).get("externalIPs") or [])),
                              lambda o, n: _service_ports(o), _age_cell,
                              lambda o, n: ",".join(f"{k}={v}" for k, v in sorted(
                                  ((o.get("spec") or {}).get("selector") or {}).items())) or "<none>")),
    ("", "Event"): ([_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"),
                     _col("Subobject", priority=1), _col("Source", priority=1), _col("Message"),
                     _col("First Seen", priority=1), _col("Count", "integer", priority=1),
                     _col("Name", priority=1)], _event_row),
    ("events.k8s.io", "Event"): ([_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"),
                                  _col("Subobject", priority=1), _col("Source", priority=1), _col("Message"),
                                  _col("First Seen", priority=1), _col("Count", "integer", priority=1),
                                  _col("Name", priority=1)], _event_row),
    ("apps", "Deployment"): ([_NAME, _col("Ready"), _col("Up-to-date", "integer"), _col("Available", "integer"),
                              _AGE, _col("Containers", priority=1), _col("Images", priority=1),
                              _col("Selector", priority=1)], _deployment_row),
    ("apps", "ReplicaSet"): ([_NAME, _col("Desired", "integer"), _col("Current", "integer"),
                              _col("Ready", "integer"), _AGE], _replicaset_row),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): (
        [_NAME, _col("Created At", "date")],
        _simple(lambda o, n: _meta(o).get("creationTimestamp"))),
    ("scheduling.k8s.io", "PriorityClass"): (
        [_NAME, _col("Value", "integer"), _col("Global-Default", "boolean"), _AGE, _col("Preemption-Policy")],
        _simple(lambda o, n: o.get("value", 0), lambda o, n: bool(o.get("globalDefault")), _age_cell,
                lambda o, n: o.get("preemptionPolicy", "PreemptLowerPriority"))),
    ("coordination.k8s.io", "Lease"): (
        [_NAME, _col("Holder"), _AGE],
        _simple(lambda o, n: (o.get("spec") or {}).get("holderIdentity", ""), _age_cell)),
}


def _custom_printer(printer_columns: list[Obj]) -> _Printer:
    specs = printer_columns or [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    cols = [_NAME] + [
        _col(c.get("name", ""), c.get("type", "string"), priority=int(c.get("priority") or 0),
             fmt=c.get("format", ""), description=c.get("description", ""))
        for c in specs]

    def render(obj: Obj, now: dt.datetime) -> list[Any]:
        cells: list[Any] = [_meta(obj).get("name")]
        for c in specs:
            values = jsonpath(obj, c.get("jsonPath", ""))
            if not values:
                cells.append(None)
            elif c.get("type") == "date":
                cells.append(_age(values[0], now))
            elif len(values) == 1 and not isinstance(values[0], (dict, list)):
                cells.append(values[0])
            else:
                cells.append(",".join(_text(v) for v in values))
        return cells

    return cols, render


def _printer(group: str, kind: str, printer_columns: list[Obj] | None) -> _Printer:
    if printer_columns is not None:
        return _custom_printer(printer_columns)
    if (group, kind) in _BUILTIN:
        return _BUILTIN[(group, kind)]
    return [_NAME, _AGE], _simple(_age_cell)


def columns_for(group: str, kind: str, printer_columns: list[Obj] | None = None) -> list[Column]:
    """Column definitions; `printer_columns` (a CRD version's additionalPrinterColumns, maybe []) marks a CR."""
    return _printer(group, kind, printer_columns)[0]


def _row_object(obj: Obj, include_object: str) -> Obj | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": _meta(obj)}


def row(group: str, kind: str, obj: Obj, *, now: dt.datetime, printer_columns: list[Obj] | None = None,
        include_object: str = "Metadata") -> Obj:
    """One Table row: its cells and (per includeObject) the object or its metadata."""
    _, render = _printer(group, kind, printer_columns)
    out: Obj = {"cells": render(obj, now)}
    embedded = _row_object(obj, include_object)
    if embedded is not None:
        out["object"] = embedded
    return out


def table(group: str, kind: str, objects: Iterable[Obj], *, now: dt.datetime, resource_version: str = "",
          printer_columns: list[Obj] | None = None, include_object: str = "Metadata",
          with_columns: bool = True) -> Obj:
    """A `meta.k8s.io/v1 Table` of `objects`."""
    cols, render = _printer(group, kind, printer_columns)
    rows = []
    for obj in objects:
        r: Obj = {"cells": render(obj, now)}
        embedded = _row_object(obj, include_object)
        if embedded is not None:
            r["object"] = embedded
        rows.append(r)
    out: Obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {}, "rows": rows}
    if resource_version:
        out["metadata"]["resourceVersion"] = resource_version
    out["columnDefinitions"] = cols if with_columns else []
    return out
