"""`lahar simulate`: run N scheduling sessions in-process on a set of objects (an in-memory cluster, no Redis)
and report what they decided as plain JSON-able data.

    {"bindings": {"ns/pod": "node"}, "evictions": ["ns/pod"], "pipelined": {"ns/pod": "node"},
     "podgroups": {"ns/name": {"phase": ..., "conditions": [...]}}, "queues": {"name": {"allocated": {...}}},
     "explain": {"ns/pod": [{"node": ..., "fits": ..., "rejected": ..., "admit": ..., "merges": [...]}]}}

`explain` covers the pods still pending after the sessions (`scheduler.placement.explain`). With HyperNodes among
the objects, `topology` says where each PodGroup landed (HyperNode and tier; per subgroup too, for a PodGroup with a
subGroupPolicy), per tier how many HyperNodes are left
whole and how much is free, and each HyperNode's occupancy (`scheduler.tierreport`; `--plot` draws it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from lahar.kube import errors
from lahar.kube.apiserver.memory import MemoryClient
from lahar.kube.resources import ResourceType
from lahar.scheduler.framework.conf import SchedulerConf, default_conf
from lahar.scheduler.framework.registry import Registry
from lahar.scheduler.registry import in_tree_registry
from lahar.scheduler.session import run_once

__all__ = ["load_objects", "simulate"]

_CONDITION_KEYS = ("type", "status", "reason", "message")
_DEVICE = ("scheduling.koordinator.sh", "v1alpha1", "Device", "devices")


def load_objects(text: str) -> list[dict[str, Any]]:
    """Documents of a YAML stream; `kind: List` items are flattened."""
    out: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all(text):
        if not doc:
            continue
        if doc.get("kind", "").endswith("List") and "items" in doc:
            out.extend(doc["items"] or [])
        else:
            out.append(doc)
    return out


def _seed(client: MemoryClient, objects: Iterable[Mapping[str, Any]]) -> None:
    for obj in objects:
        rt = client.registry.by_kind(obj.get("apiVersion", ""), obj.get("kind", ""))
        if rt is None:
            raise ValueError(f"unknown kind {obj.get('apiVersion')}/{obj.get('kind')}")
        ns = (obj.get("metadata") or {}).get("namespace") or ("default" if rt.namespaced else None)
        body = dict(obj)
        if ns and rt.namespaced:
            body["metadata"] = {**(obj.get("metadata") or {}), "namespace": ns}
            nrt = client.registry.get("", "v1", "namespaces")
            if nrt is not None:
                with contextlib.suppress(errors.AlreadyExists):
                    client.create(nrt, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        created = client.create(rt, body, namespace=ns if rt.namespaced else None)
        if obj.get("status") and "status" in rt.subresources:
            created["status"] = obj["status"]
            client.update_status(rt, created, namespace=ns if rt.namespaced else None)


def simulate(objects: Iterable[Mapping[str, Any]], conf: SchedulerConf | None = None, *, sessions: int = 1,
             registry: Registry | None = None) -> dict[str, Any]:
    registry = registry if registry is not None else in_tree_registry()
    conf = conf if conf is not None else default_conf(registry.plugin_names)
    client = MemoryClient.with_crds()
    if client.registry.get(*_DEVICE[:2], _DEVICE[3]) is None:  # Koordinator Device: per-node GPU/RDMA inventory
        client.store.register_type(ResourceType(*_DEVICE, False))
    _seed(client, objects)
    bindings: dict[str, str] = {}
    evictions: list[str] = []
    pipelined: dict[str, str] = {}
    for _ in range(max(1, sessions)):
        decisions, result = run_once(client, conf, registry=registry, workers=4, evict_grace_seconds=0)
        bound = set(result.bound)
        bindings.update({k: v for k, v in decisions.bind_map().items() if k in bound})
        evictions.extend(k for k in result.evicted if k not in evictions)
        pipelined = dict(decisions.pipelined)
    reg = client.registry
    pg_rt = reg.get("scheduling.volcano.sh", "v1beta1", "podgroups")
    q_rt = reg.get("scheduling.volcano.sh", "v1beta1", "queues")
    podgroups: dict[str, Any] = {}
    for pg in client.list(pg_rt)["items"] if pg_rt else []:
        st = pg.get("status") or {}
        podgroups[f"{pg['metadata']['namespace']}/{pg['metadata']['name']}"] = {
            "phase": st.get("phase", ""),
            "conditions": [{k: c[k] for k in _CONDITION_KEYS if k in c} for c in st.get("conditions") or []],
        }
    queues = {q["metadata"]["name"]: {"allocated": dict((q.get("status") or {}).get("allocated") or {})}
              for q in (client.list(q_rt)["items"] if q_rt else [])}
    out = {"bindings": dict(sorted(bindings.items())), "evictions": sorted(evictions),
           "pipelined": dict(sorted(pipelined.items())), "podgroups": dict(sorted(podgroups.items())),
           "queues": dict(sorted(queues.items())), "explain": _explain_pending(client, conf, registry)}
    topology = _topology(client)
    if topology is not None:
        out["topology"] = topology
    return out


def _topology(client: MemoryClient) -> dict[str, Any] | None:
    """Placement by tier after the sessions: {"resource", "placements", "tiers", "occupancy"}; None without
    HyperNodes."""
    from lahar.scheduler import tierreport
    from lahar.scheduler.framework import hypernodes
    from lahar.scheduler.framework import snapshot as snapshots
    from lahar.scheduler.session import list_objects

    objs = list_objects(client)
    hn_objs = list(objs.get("hypernodes") or ())
    if not hn_objs:
        return None
    snap = snapshots.build(**objs)
    tree = hypernodes.build(hn_objs, objs.get("nodes") or ())
    res = snap.resources
    arrays = snap.arrays
    total = {n: float(arrays.allocatable[:, i].sum()) for i, n in enumerate(res.names)}
    resource = tierreport.resource_of({"": total})
    i = res.names.index(resource) if resource in res.names else 0
    capacity = {name: float(arrays.allocatable[row, i]) / 1000 for name, row in arrays.index.items()}
    used = {name: float(arrays.used[row, i]) / 1000 for name, row in arrays.index.items()}  # milli-units
    bound = {t.key: t.node_name for t in snap.tasks.values() if t.node_name}
    job_of = {t.key: t.job for t in snap.tasks.values() if t.job}
    placements = tierreport.placements(tree, bound, job_of)
    for job, where in tierreport.subgroup_placements(tree, bound, job_of, _subgroup_of(snap)).items():
        if job in placements:
            placements[job]["subgroups"] = where
    return {"resource": resource, "placements": placements,
            "tiers": tierreport.fragmentation(tree, used, capacity),
            "occupancy": {"t": 0.0, "resource": resource,
                          "hypernodes": tierreport.occupancy(tree, used, capacity)}}


def _subgroup_of(snap: Any) -> dict[str, str]:
    """Pod key → its subgroup id, for the pods of PodGroups with a subGroupPolicy (`framework.subgroups`)."""
    from lahar.scheduler.framework import subgroups

    out: dict[str, str] = {}
    for job in snap.jobs.values():
        policies = (job.podgroup.get("spec") or {}).get("subGroupPolicy")
        if not policies or not isinstance(policies, list):
            continue
        tasks = list(job.tasks.values())
        groups = subgroups.partition([p for p in policies if isinstance(p, dict)],
                                     [(t.uid, (t.pod.get("metadata") or {}).get("labels")) for t in tasks])
        key = {t.uid: t.key for t in tasks}
        out.update({key[u]: g.uid for g in groups.values() for u in g.members})
    return out


def _explain_pending(client: MemoryClient, conf: SchedulerConf, registry: Registry) -> dict[str, Any]:
    """`explain` of every pod still pending after the sessions (per node: fit, first rejection, topology hints)."""
    from lahar.scheduler.framework import snapshot as snapshots
    from lahar.scheduler.framework.session import Session
    from lahar.scheduler.placement import explain
    from lahar.scheduler.session import list_objects

    snap = snapshots.build(**list_objects(client))
    ssn = Session(snap, conf, registry, uid="explain")
    return {t.key: explain(ssn, t) for t in sorted(snap.tasks.values(), key=lambda t: t.key)
            if t.status.value == "Pending" and not t.node_name}
