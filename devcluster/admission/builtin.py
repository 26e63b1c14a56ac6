"""kube-apiserver's built-in mutating admission plugins that devcluster runs before the webhooks:
`DefaultTolerationSeconds` (pods) and `TaintNodesByCondition` (nodes), plus the node lifecycle controller's
condition → taint rule that the simulated kubelets apply when they report a node's status.

Pure functions over plain dicts; `devcluster.admission.chain.WebhookAdmission.mutate` calls `admit` first (kube's
plugin order puts both plugins before MutatingAdmissionWebhook), `devcluster.kubelet` calls `condition_taints`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

Obj = dict[str, Any]

__all__ = [
    "DEFAULT_TOLERATION_SECONDS",
    "NOT_READY",
    "UNREACHABLE",
    "admit",
    "condition_taints",
    "default_tolerations",
    "taint_new_node",
]

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
DEFAULT_TOLERATION_SECONDS = 300  # kube-apiserver's --default-not-ready/unreachable-toleration-seconds


def _tolerates_no_execute(toleration: Mapping[str, Any], key: str) -> bool:
    """A toleration covers `key:NoExecute` for the plugin when its key is that key or empty (all keys) and its
    effect is NoExecute or empty (all effects); the operator and tolerationSeconds are not looked at."""
    return (toleration.get("key") or "") in ("", key) and (toleration.get("effect") or "") in ("", "NoExecute")


def default_tolerations(tolerations: Iterable[Mapping[str, Any]] | None,
                        seconds: int = DEFAULT_TOLERATION_SECONDS) -> list[Obj]:
    """DefaultTolerationSeconds: the pod's tolerations, then `not-ready` and `unreachable` `Exists:NoExecute` for
    `seconds` each, unless a toleration already covers that key with NoExecute."""
    out = [dict(t) for t in tolerations or []]
    for key in (NOT_READY, UNREACHABLE):
        if not any(_tolerates_no_execute(t, key) for t in out):
            out.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds})
    return out


def _ready_status(node: Mapping[str, Any]) -> str | None:
    for c in (node.get("status") or {}).get("conditions") or []:
        if isinstance(c, Mapping) and c.get("type") == "Ready":
            return str(c.get("status"))
    return None


def taint_new_node(node: Obj) -> bool:
    """TaintNodesByCondition on a Node's create: add `not-ready:NoSchedule` unless the node registers Ready
    (status Ready=True) or already carries it; True when it changed the node.

    kube-apiserver adds the taint to every new Node and the node lifecycle controller lifts it within a second of
    seeing Ready=True; devcluster skips it for a node created Ready, which has nobody to lift it otherwise."""
    if _ready_status(node) == "True":
        return False
    spec = node.setdefault("spec", {})
    taints = spec.get("taints") or []
    if any(t.get("key") == NOT_READY and t.get("effect") == "NoSchedule" for t in taints):
        return False
    spec["taints"] = [*taints, {"key": NOT_READY, "effect": "NoSchedule"}]
    return True


def condition_taints(taints: Iterable[Mapping[str, Any]] | None, ready: str | None) -> list[Obj]:
    """The node lifecycle controller's rule: a node's taints once its Ready condition is `ready`.

    Ready=True lifts `not-ready` and `unreachable` (NoSchedule and NoExecute); False puts `not-ready` on with both
    effects and lifts `unreachable`; Unknown the other way round; None (no condition yet) changes nothing. Other
    taints keep their place."""
    out = [dict(t) for t in taints or []]
    if ready is None:
        return out
    want = {"True": (), "False": (NOT_READY,), "Unknown": (UNREACHABLE,)}.get(ready, (NOT_READY,))
    out = [t for t in out if t.get("key") not in (NOT_READY, UNREACHABLE) or t.get("key") in want]
    for key in want:
        for effect in ("NoSchedule", "NoExecute"):
            if not any(t.get("key") == key and t.get("effect") == effect for t in out):
                out.append({"key": key, "effect": effect})
    return out


def admit(operation: str, group: str, plural: str, subresource: str | None, obj: Obj | None) -> Obj | None:
    """Run the built-in plugins on one write: the mutated copy, or None when they change nothing.

    DefaultTolerationSeconds acts on pods' CREATE and UPDATE, TaintNodesByCondition on nodes' CREATE; neither
    looks at subresources (a binding, a status write)."""
    if obj is None or group != "" or subresource:
        return None
    if plural == "pods" and operation in ("CREATE", "UPDATE"):
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return None
        tolerations = spec.get("tolerations") or []
        if not isinstance(tolerations, list) or not all(isinstance(t, Mapping) for t in tolerations):
            return None  # a malformed field is left for validation to name
        merged = default_tolerations(tolerations)
        if len(merged) == len(tolerations):
            return None
        out = copy.deepcopy(obj)
        out["spec"]["tolerations"] = [*copy.deepcopy(tolerations), *merged[len(tolerations):]]
        return out
    if plural == "nodes" and operation == "CREATE":
        out = copy.deepcopy(obj)
        return out if taint_new_node(out) else None
    return None
