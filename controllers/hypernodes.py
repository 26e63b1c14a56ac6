"""The hypernode controller (Volcano's hypernode-controller): HyperNode trees discovered from the cluster, and every
HyperNode's status (nodeCount, a `Valid` condition for the checks across HyperNodes).

One key, `("HyperNodeTree", "", "discovery")`, is reconciled whole: dispatch enqueues it when a Node joins, leaves or
changes labels and when a HyperNode changes (spec or labels; status writes are not routed back), and every resync.
Each cycle: load the discovery ConfigMap (`volcano-controller-configmap`, key `volcano-controller.conf`, in any
namespace; Volcano's format), run each enabled source, create / update / delete that source's HyperNodes (those
labelled `volcano.sh/network-topology-source: <source>`; a user's HyperNodes are never touched), then write the
status of every HyperNode that changed. The decisions are pure (`controllers._hypernode_tree`).

Sources are a `DiscoverySource` (Protocol); `SOURCES` holds the built-in ones (the label source). Volcano's `ufm`
source is not implemented: an enabled entry for it is reported as a Warning Event on the ConfigMap.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from lahar.controllers import _hypernode_tree as tree
from lahar.controllers import _meta, events
from lahar.controllers.context import Context, Result
from lahar.kube import errors

__all__ = [
    "CONDITION",
    "KEY_NAME",
    "KIND",
    "SOURCES",
    "Discovery",
    "DiscoverySource",
    "LabelSource",
    "desired_status",
    "reconcile",
]

log = logging.getLogger(__name__)

KIND = "HyperNodeTree"   # the reconciler table's kind: one key for the whole tree
KEY_NAME = "discovery"
CONDITION = "Valid"
Obj = dict[str, Any]


@dataclass(frozen=True)
class Discovery:
    """What a source found: the HyperNodes it wants (labelled with its name) and problems with its config."""

    hypernodes: tuple[Obj, ...] = ()
    problems: tuple[str, ...] = ()


class DiscoverySource(Protocol):
    """A discovery source (Volcano's `api.Discoverer`, as a pure call): nodes + its config → the HyperNodes it wants.

    `existing` are the HyperNodes now labelled with this source, to keep their names stable."""

    name: str

    def discover(self, *, nodes: Sequence[Obj], existing: Sequence[Obj], config: Mapping[str, Any]) -> Discovery: ...


@dataclass(frozen=True)
class LabelSource:
    """Volcano's `label` source: `networkTopologyTypes` chains of node labels → a HyperNode per label value."""

    name: str = "label"

    def discover(self, *, nodes: Sequence[Obj], existing: Sequence[Obj], config: Mapping[str, Any]) -> Discovery:
        chains, problems = tree.label_chains(config)
        return Discovery(tuple(tree.build_label_tree(nodes, chains, existing)), tuple(problems))


SOURCES: Mapping[str, DiscoverySource] = {"label": LabelSource()}


def _rts(ctx: Context) -> tuple[Any, Any, Any]:
    reg = ctx.client.registry
    hn = reg.get("topology.volcano.sh", "v1alpha1", "hypernodes")
    nodes = reg.get("", "v1", "nodes")
    cms = reg.get("", "v1", "configmaps")
    return hn, nodes, cms


def _load_config(ctx: Context, cm_rt: Any) -> tuple[Obj | None, tree.TopologyConfig, list[str]]:
    """The discovery ConfigMap (the first of CONFIGMAP_NAMES found, by namespace order) and its parsed config."""
    if cm_rt is None:
        return None, tree.TopologyConfig(), []
    for name in tree.CONFIGMAP_NAMES:
        found = ctx.client.list(cm_rt, field_selector=f"metadata.name={name}")["items"]
        if found:
            cm = sorted(found, key=lambda c: c["metadata"].get("namespace") or "")[0]
            config, problems = tree.parse_config((cm.get("data") or {}).get(tree.CONFIG_KEY))
            return cm, config, problems
    return None, tree.TopologyConfig(), []


def _apply(ctx: Context, hn_rt: Any, plan: tree.Plan) -> None:
    for obj in plan.create:
        with contextlib.suppress(errors.AlreadyExists):  # a concurrent cycle made it; the next cycle compares
            ctx.client.create(hn_rt, obj)
            log.info("hypernodes: created %s", obj["metadata"]["name"])
    for obj in plan.update:
        with contextlib.suppress(errors.NotFound):
            ctx.client.update(hn_rt, obj)  # resourceVersion precondition: 409 (retried) on a race
            log.info("hypernodes: updated %s", obj["metadata"]["name"])
    for name in plan.delete:
        with contextlib.suppress(errors.NotFound):
            ctx.client.delete(hn_rt, name)
            log.info("hypernodes: deleted %s", name)


def desired_status(current: Mapping[str, Any] | None, *, node_count: int, problems: Sequence[str],
                   now: str) -> Obj:
    """The status to write: nodeCount and the `Valid` condition (its lastTransitionTime kept while unchanged)."""
    current = dict(current or {})
    status_value = "False" if problems else "True"
    old = next((c for c in current.get("conditions") or [] if c.get("type") == CONDITION), None)
    condition = {
        "type": CONDITION, "status": status_value,
        "reason": "InvalidTopology" if problems else "Consistent",
        "message": "; ".join(problems) if problems else "members are consistent with the other HyperNodes",
        "lastTransitionTime": old["lastTransitionTime"] if old and old.get("status") == status_value
        and old.get("lastTransitionTime") else now,
    }
    others = [c for c in current.get("conditions") or [] if c.get("type") != CONDITION]
    return {**current, "nodeCount": node_count, "conditions": [*others, condition]}


def _write_status(ctx: Context, hn_rt: Any, nodes: Mapping[str, Mapping[str, str]]) -> None:
    hypernodes = ctx.client.list(hn_rt)["items"]
    counts = tree.node_counts(hypernodes, nodes)
    found = tree.problems(hypernodes, nodes)
    now = _meta.format_time(ctx.clock())
    for hn in hypernodes:
        name = hn["metadata"]["name"]
        status = desired_status(hn.get("status"), node_count=counts[name], problems=found[name], now=now)
        if status == (hn.get("status") or {}):
            continue
        was_valid = next((c.get("status") for c in (hn.get("status") or {}).get("conditions") or []
                          if c.get("type") == CONDITION), None) != "False"
        with contextlib.suppress(errors.NotFound):
            ctx.client.update_status(hn_rt, {**hn, "status": status})
        if found[name] and was_valid:
            events.record(ctx, hn, "Warning", "InvalidTopology", "; ".join(found[name]))


def reconcile(ctx: Context, namespace: str, name: str) -> Result:
    """Discover with every enabled source, then refresh every HyperNode's status (the key's name is ignored)."""
    hn_rt, node_rt, cm_rt = _rts(ctx)
    if hn_rt is None or node_rt is None:
        return Result()  # the HyperNode CRD is not installed yet; its creation routes the key again
    try:
        node_objs = ctx.client.list(node_rt)["items"]
        ctx.client.list(hn_rt, field_selector="metadata.name=lahar-probe")
    except (errors.NotFound, errors.BadRequest):
        return Result()  # registered but not served yet (the CRD is being applied); its creation routes the key again
    cm, config, problems = _load_config(ctx, cm_rt)
    for entry in config.discovery:
        if not entry.enabled:
            continue
        source = SOURCES.get(entry.source)
        if source is None:
            problems.append(f"networkTopologyDiscovery source {entry.source!r} is not supported by lahar "
                            f"(supported: {', '.join(sorted(SOURCES))})")
            continue
        existing = ctx.client.list(hn_rt)["items"]
        owned = [hn for hn in existing if ((hn["metadata"].get("labels") or {}).get(tree.SOURCE_LABEL)
                                           == source.name)]
        found = source.discover(nodes=node_objs, existing=owned, config=entry.config)
        problems.extend(found.problems)
        _apply(ctx, hn_rt, tree.plan(found.hypernodes, existing, source.name))
    if problems and cm is not None:
        events.record(ctx, cm, "Warning", "InvalidDiscoveryConfig", "; ".join(problems))
    labels = {n["metadata"]["name"]: dict(n["metadata"].get("labels") or {}) for n in node_objs}
    _write_status(ctx, hn_rt, labels)
    return Result()

