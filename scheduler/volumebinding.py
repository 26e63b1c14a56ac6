"""Whether a pod whose volumes commit just bound may be bound itself: kube-scheduler's VolumeBinding PreBind check
(`checkBindings`) as a pure function over the claims and PVs read back from the API.

`scheduler.commit` writes a pod's volume decisions (a static PV's claimRef, a claim's selected-node annotation),
then asks `readiness(...)` until every claim is Bound (`BIND`), something undid the decision (`GIVE_UP`, the reason
in kube-scheduler's words), or the wait ran out of time (`GIVE_UP`, timed out); until then `WAIT`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lahar.scheduler.plugins._shared.nodematch import match_node_selector_terms

__all__ = ["BIND_COMPLETED", "SELECTED_NODE", "TIMED_OUT", "Readiness", "Verdict", "readiness"]

SELECTED_NODE = "volume.kubernetes.io/selected-node"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"  # the PV controller's mark that the claim is fully bound
TIMED_OUT = "binding volumes: timed out waiting for the condition"

Obj = Mapping[str, Any]


class Verdict(enum.Enum):
    BIND = "bind"        # every claim of the pod is Bound: bind the pod
    WAIT = "wait"        # a claim is not Bound yet: read again later
    GIVE_UP = "give-up"  # the pod is not bound this session; the next one places it again


@dataclass(frozen=True, slots=True)
class Readiness:
    verdict: Verdict
    reason: str = ""  # for GIVE_UP, why; for WAIT, the claims waited for


@dataclass(frozen=True, slots=True)
class _Node:
    """The two fields node-affinity matching reads."""

    name: str
    labels: Mapping[str, str]


def _meta(o: Obj) -> Obj:
    return o.get("metadata") or {}


def _fully_bound(claim: Obj) -> bool:
    """kube-scheduler's isPVCFullyBound: a volume name and the PV controller's bind-completed annotation."""
    return bool((claim.get("spec") or {}).get("volumeName")) and BIND_COMPLETED in (_meta(claim).get("annotations")
                                                                                      or {})


def _affinity_ok(pv: Obj, node: Obj | None, node_name: str) -> bool:
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
    terms = required.get("nodeSelectorTerms")
    if node is None or not required or terms is None:
        return True
    return match_node_selector_terms(list(terms), _Node(node_name, _meta(node).get("labels") or {}))


def _claim_ref_ok(pv: Obj, claim: Obj) -> bool:
    ref = (pv.get("spec") or {}).get("claimRef") or {}
    m = _meta(claim)
    if not ref or ref.get("name") != m.get("name") or ref.get("namespace") != m.get("namespace"):
        return False
    return not ref.get("uid") or not m.get("uid") or ref.get("uid") == m.get("uid")


def _one(action: Mapping[str, str], *, node_name: str, claims: Mapping[str, Obj | None],
         pvs: Mapping[str, Obj | None], node: Obj | None) -> Readiness:
    """One volume decision: BIND when its claim is fully bound, else WAIT or GIVE_UP."""
    key = f"{action['namespace']}/{action['claim']}"
    if key not in claims:
        return Readiness(Verdict.WAIT, key)  # not read (an API error): read again
    claim = claims[key]
    if claim is None:
        what = "provisioning" if action["kind"] == "provision" else "pv binding"
        return Readiness(Verdict.GIVE_UP, f'failed to check {what}: persistentvolumeclaim "{key}" not found')
    if _meta(claim).get("deletionTimestamp"):
        return Readiness(Verdict.GIVE_UP, f'persistentvolumeclaim "{key}" is being deleted')
    if action["kind"] == "bind":
        name = action.get("volume") or ""
        pv = pvs.get(name)
        if pv is None:
            return Readiness(Verdict.WAIT, key) if name not in pvs else Readiness(
                Verdict.GIVE_UP, f'failed to check pv binding: persistentvolume "{name}" not found')
        if not _affinity_ok(pv, node, node_name):
            return Readiness(Verdict.GIVE_UP, f'pv "{name}" node affinity doesn\'t match node "{node_name}"')
        if not _claim_ref_ok(pv, claim):
            return Readiness(Verdict.GIVE_UP, f'ClaimRef got reset for pv "{name}"')
    else:
        selected = (_meta(claim).get("annotations") or {}).get(SELECTED_NODE)
        if selected is None:
            return Readiness(Verdict.GIVE_UP, f'selectedNode annotation reset for PVC "{action["claim"]}"')
        if selected != node_name:  # a provisioner that failed drops the annotation (or another scheduler moved it)
            return Readiness(Verdict.GIVE_UP, f'provisioning failed for PVC "{action["claim"]}"')
        name = (claim.get("spec") or {}).get("volumeName") or ""
        if name:
            pv = pvs.get(name)
            if pv is None:
                return Readiness(Verdict.WAIT, key)  # not seen yet: the PV may still be on its way
            if not _affinity_ok(pv, node, node_name):
                return Readiness(Verdict.GIVE_UP, f'pv "{name}" node affinity doesn\'t match node "{node_name}"')
    return Readiness(Verdict.BIND) if _fully_bound(claim) else Readiness(Verdict.WAIT, key)


def readiness(actions: Sequence[Mapping[str, str]], *, node_name: str, claims: Mapping[str, Obj | None],
              pvs: Mapping[str, Obj | None], node: Obj | None = None, elapsed: float = 0.0,
              timeout: float = 0.0) -> Readiness:
    """The pod's verdict from its volume decisions (`{namespace, claim, kind "bind" | "provision", volume, node}`)
    and what was read back: `claims` by "namespace/name" and `pvs` by name, `None` for an object not found, a key
    left out for one that could not be read; `node` (the pod's node object, or None to skip node affinity).

    The first GIVE_UP of a claim answers; else BIND when every claim is Bound; else WAIT until `elapsed` reaches
    `timeout`, then GIVE_UP (TIMED_OUT, naming the claims still waited for)."""
    waiting: list[str] = []
    for action in actions:
        got = _one(action, node_name=node_name, claims=claims, pvs=pvs, node=node)
        if got.verdict is Verdict.GIVE_UP:
            return got
        if got.verdict is Verdict.WAIT:
            waiting.append(got.reason)
    if not waiting:
        return Readiness(Verdict.BIND)
    if elapsed >= timeout:
        return Readiness(Verdict.GIVE_UP, f"{TIMED_OUT} (persistentvolumeclaims not bound: {', '.join(waiting)})")
    return Readiness(Verdict.WAIT, ", ".join(waiting))
