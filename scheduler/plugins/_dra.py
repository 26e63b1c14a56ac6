"""The DynamicResources filter for the predicates plugin (`predicate.DynamicResourceAllocationEnable`): a pod's
ResourceClaims, allocated per node by the structured allocator (devices/dra.py), reserved in the session.

A pod names its claims in `spec.resourceClaims`: `resourceClaimName`, or `resourceClaimTemplateName`, whose claim
(created by kube-controller-manager) is the one `status.resourceClaimStatuses` names. A node fails when a claim is
missing, allocated to another node, or cannot get devices there. The choice is reserved when the pod is allocated
(two pods of the session never take one device; a gang's discard gives them back), and at session close the bound
pods' claims go to commit (`Decisions.claims`), which writes `status.allocation` and `status.reservedFor` before
the bind.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lahar.scheduler.devices import dra
from lahar.scheduler.framework.snapshot import Task
from lahar.scheduler.plugins._shared.nodematch import match_node_selector_terms

__all__ = ["ClaimRef", "Claims", "pod_claims"]

Obj = Mapping[str, Any]
NOT_ON_NODE = "resourceclaim not available on the node"


@dataclass(frozen=True)
class ClaimRef:
    pod_claim: str  # the entry's name in the pod's spec.resourceClaims
    name: str       # the ResourceClaim's name ("" while a template's claim does not exist yet)
    template: str = ""


def pod_claims(pod: Obj) -> list[ClaimRef]:
    """The ResourceClaims a pod uses, in `spec.resourceClaims` order."""
    spec = pod.get("spec") or {}
    entries = spec.get("resourceClaims") or ()
    if not entries:
        return []
    created = {s.get("name"): s.get("resourceClaimName") or ""
               for s in (pod.get("status") or {}).get("resourceClaimStatuses") or () if isinstance(s, Mapping)}
    out: list[ClaimRef] = []
    for e in entries:
        if not isinstance(e, Mapping):
            continue
        name = str(e.get("name") or "")
        if e.get("resourceClaimName"):
            out.append(ClaimRef(name, str(e["resourceClaimName"])))
        elif e.get("resourceClaimTemplateName"):
            out.append(ClaimRef(name, str(created.get(name) or ""), str(e["resourceClaimTemplateName"])))
    return out


def _node_selector_ok(selector: Obj | None, node: Any) -> bool:
    """An allocation's nodeSelector against a node, as a pod's required node affinity matches (terms ORed,
    requirements ANDed); a malformed selector matches no node."""
    if not selector:
        return True
    terms = [t for t in _m(selector).get("nodeSelectorTerms") or () if isinstance(t, Mapping)]
    try:
        return match_node_selector_terms(terms, node)
    except (AttributeError, TypeError, ValueError, IndexError):
        return False


def _m(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _allocation(claim: Obj) -> Mapping[str, Any]:
    return _m(_m(claim.get("status")).get("allocation"))


def _allocated_ids(claim: Obj) -> list[dra.DeviceID]:
    results = _m(_allocation(claim).get("devices")).get("results")
    return [(str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
            for r in results if isinstance(r, Mapping)] if isinstance(results, list) else []


def node_selector_for(node_name: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                     "values": [node_name]}]}]}


@dataclass(frozen=True)
class _Split:
    pins: list[tuple[str, str | None, Obj | None]]
    todo: list[tuple[str, list[dra.DeviceRequest]]]
    signature: tuple[Any, ...]


class Claims:
    """The session's view of ResourceClaims: what is allocated (by the API and by this session) and the filter."""

    def __init__(self, extras: Mapping[str, Mapping[str, Obj]], nodes: list[Any]) -> None:
        self.claims = dict(extras.get("resourceclaims") or {})
        self.classes = {(o.get("metadata") or {}).get("name", ""): o
                        for o in (extras.get("deviceclasses") or {}).values()}
        self.slices = list((extras.get("resourceslices") or {}).values())
        self.nodes = nodes
        self.allocated: set[dra.DeviceID] = set()
        for c in self.claims.values():
            self.allocated.update(_allocated_ids(c))
        # claim key → (node, node row, results, by task uid): allocated in this session
        self.pending: dict[str, tuple[str, int, list[dict[str, str]], str]] = {}
        self.actions: dict[str, list[dict[str, Any]]] = {}                 # task uid → commit actions
        self.matcher = dra.Matcher()
        self._requests: dict[str, list[dra.DeviceRequest] | str] = {}
        self._devices: dict[int, list[dra.Device]] = {}
        # allocator answers per (the requests of the claims to allocate, node row), valid while the node's devices
        # keep their stamp: (node version, epoch); the epoch moves when a device of a non-node-local pool is taken
        self._plans: dict[tuple[Any, int], tuple[tuple[int, int], list[list[dict[str, str]]] | str]] = {}
        self._version: dict[int, int] = {}
        self._epoch = 0
        self._by_node: dict[str, list[Obj]] = {}  # current slices by spec.nodeName ("" for the others)
        for s in dra.current(self.slices):
            self._by_node.setdefault(str((s.get("spec") or {}).get("nodeName") or ""), []).append(s)
        self._local_pools = {(str((s.get("spec") or {}).get("driver") or ""),
                              str(((s.get("spec") or {}).get("pool") or {}).get("name") or ""))
                             for s in self.slices if (s.get("spec") or {}).get("nodeName")}

    def devices(self, i: int) -> list[dra.Device]:
        hit = self._devices.get(i)
        if hit is None:
            node = self.nodes[i]
            mine = [*self._by_node.get(node.name, ()), *self._by_node.get("", ())]
            hit = self._devices[i] = dra.node_devices(mine, node_name=node.name, node_labels=node.labels)
        return hit

    def _resolve(self, task: Task) -> tuple[list[tuple[str, Obj]], str, bool]:
        """The pod's claims as (key, object), or (_, reason, unresolvable) when one cannot be used anywhere."""
        out: list[tuple[str, Obj]] = []
        for ref in pod_claims(task.pod):
            if not ref.name:
                return [], (f"waiting for the ResourceClaim of pod claim {ref.pod_claim} (template {ref.template}) "
                            "to be created"), False
            key = f"{task.namespace}/{ref.name}"
            claim = self.claims.get(key)
            if claim is None:
                return [], f'resourceclaim "{ref.name}" not found', True
            if (claim.get("metadata") or {}).get("deletionTimestamp"):
                return [], f'resourceclaim "{ref.name}" is being deleted', True
            out.append((key, claim))
        return out, "", False

    def _split(self, claims: list[tuple[str, Obj]]) -> _Split | str:
        """The node-independent part: which claims are allocated (and where), which need devices, or a reason."""
        pins: list[tuple[str, str | None, Obj | None]] = []  # (key, pending node, API allocation's nodeSelector)
        todo: list[tuple[str, list[dra.DeviceRequest]]] = []
        for key, claim in claims:
            allocation = _allocation(claim)
            pending = self.pending.get(key)
            if pending is not None:
                pins.append((key, pending[0], None))
            elif allocation:
                pins.append((key, None, _m(allocation.get("nodeSelector"))))
            elif key not in (k for k, _ in todo):
                requests = self._requests.get(key)
                if requests is None:
                    requests = self._requests[key] = dra.requests_of(claim)
                if isinstance(requests, str):
                    return f"claim {key}: {requests}"
                todo.append((key, requests))
        # claims with the same requests (one template's) share the allocator's answers; names are filled in after
        return _Split(pins, todo, tuple(tuple(requests) for _, requests in todo))

    def _plan(self, split: _Split, i: int) -> list[list[dict[str, str]]] | str:
        """The results for `split.todo` on node row i (shared: copy before keeping them), or a reason."""
        node = self.nodes[i]
        for _, pending_node, selector in split.pins:
            if (node.name != pending_node) if pending_node is not None else not _node_selector_ok(selector, node):
                return NOT_ON_NODE
        if not split.todo:
            return []
        key = (split.signature, i)
        stamp = (self._version.get(i, 0), self._epoch)
        hit = self._plans.get(key)
        if hit is None or hit[0] != stamp:
            placeholders = [(f"\x00{j}\x00", requests) for j, (_, requests) in enumerate(split.todo)]
            hit = self._plans[key] = (stamp, dra.allocate(
                placeholders, classes=self.classes, devices=self.devices(i), allocated=self.allocated,
                matcher=self.matcher))
        got = hit[1]
        if isinstance(got, str):
            for j, (claim_key, _) in enumerate(split.todo):
                got = got.replace(f"\x00{j}\x00", claim_key)
            return f"cannot allocate all claims: {got}"
        return got

    def _touch(self, i: int, results: list[dict[str, str]]) -> None:
        """Devices of node row i were taken or given back: its cached answers are stale (all nodes' when a
        device of a pool not local to one node is involved)."""
        self._version[i] = self._version.get(i, 0) + 1
        if any((r["driver"], r["pool"]) not in self._local_pools for r in results):
            self._epoch += 1

    def check(self, task: Task) -> tuple[np.ndarray, Any, bool] | None:
        """(failing nodes, reasons, unresolvable) for a pod with claims; None when it has none or all nodes fit."""
        if not (task.pod.get("spec") or {}).get("resourceClaims"):
            return None
        n = len(self.nodes)
        claims, reason, unresolvable = self._resolve(task)
        if reason:
            return np.ones(n, dtype=bool), reason, unresolvable
        if not claims:
            return None
        split = self._split(claims)
        if isinstance(split, str):
            return np.ones(n, dtype=bool), split, True
        bad = np.zeros(n, dtype=bool)
        reasons = np.full(n, None, dtype=object)
        for i in range(n):
            got = self._plan(split, i)
            if isinstance(got, str):
                bad[i] = True
                reasons[i] = got
        return (bad, reasons, False) if bad.any() else None

    def on_allocate(self, task: Task, i: int) -> None:
        claims, reason, _ = self._resolve(task)
        if reason or not claims:
            return
        split = self._split(claims)
        got = self._plan(split, i) if not isinstance(split, str) else split
        if isinstance(got, str) or isinstance(split, str):  # the filter passed this node: only a change within
            return                                            # the session gets here
        node = self.nodes[i].name
        meta = task.pod.get("metadata") or {}
        actions: list[dict[str, Any]] = []
        allocated = {key: [dict(r) for r in results] for (key, _), results in zip(split.todo, got, strict=True)}
        seen: set[str] = set()
        for key, _ in claims:
            if key in seen:
                continue  # the same claim twice in one pod
            seen.add(key)
            namespace, _, name = key.partition("/")
            results = allocated.get(key)
            allocation = None
            if results is not None:
                self.pending[key] = (node, i, results, task.uid)
                self.allocated.update((r["driver"], r["pool"], r["device"]) for r in results)
                self._touch(i, results)
                allocation = {"devices": {"results": results}, "nodeSelector": node_selector_for(node)}
            actions.append({"namespace": namespace, "claim": name, "node": node, "allocation": allocation,
                            "pod": task.name, "pod_uid": meta.get("uid") or ""})
        self.actions[task.uid] = actions

    def on_deallocate(self, task: Task) -> None:
        for a in self.actions.pop(task.uid, ()):
            key = f"{a['namespace']}/{a['claim']}"
            pending = self.pending.get(key)
            if a["allocation"] is not None and pending is not None and pending[3] == task.uid:
                del self.pending[key]
                self.allocated.difference_update((r["driver"], r["pool"], r["device"]) for r in pending[2])
                self._touch(pending[1], pending[2])

    def close(self, bound: set[str], decisions: Any) -> None:
        for uid, actions in self.actions.items():
            if uid in bound:
                decisions.claims[uid] = actions
