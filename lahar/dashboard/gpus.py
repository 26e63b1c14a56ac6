"""The dashboard's per-card GPU view: for each node that shares its GPUs (HAMi or Volcano vGPU registrations) or
splits them into MIG instances, one row of cards — per card, which pods hold how much device memory and how many
cores, and per MIG profile how many instances are taken and by whom. Pure functions from Node and Pod dicts, read
from the same annotations the scheduler writes and reads (`lahar.scheduler.devices.inventory`).

Part of `lahar.dashboard`, beside `nodes` (the node heatmap and HyperNode tree); `pages` renders both.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lahar.dashboard.nodes import Cell
from lahar.scheduler.devices import inventory as inv
from lahar.scheduler.devices import requests as devreq

__all__ = ["CardRow", "DevicePods", "GPUNodeRow", "Holder", "MIGProfileRow", "card_rows", "gpu_rows",
           "holds_devices", "is_gpu_node"]

Obj = dict[str, Any]

POD_ANNOTATIONS = (*inv.VOLCANO_ALLOCATED_ANNOTATIONS, *inv.HAMI_ALLOCATED_ANNOTATIONS,
                   inv.HAMI_MIG_ALLOCATIONS_ANNOTATION, inv.MIG_INSTANCES_ANNOTATION)
_TERMINAL = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Holder:
    """A pod's share of one card: device memory (MiB) and cores (percent of the card), or one MIG instance."""

    pod: str  # namespace/name
    memory_mib: int = 0
    cores: int = 0
    instance: str = ""  # the MIG instance ("<GPU>/<ordinal>" or the dynamic placement "start+size"), else ""


@dataclass(frozen=True)
class MIGProfileRow:
    profile: str
    total: int  # instances of the profile on the card (0: dynamic MIG, no fixed geometry)
    holders: tuple[Holder, ...]

    @property
    def used(self) -> int:
        return len(self.holders)


@dataclass(frozen=True)
class CardRow:
    """One physical GPU. `kind` is "vgpu" (shared by slots) or "mig" (split into instances); `cell` is what the
    heatmap shades: device memory held for a vGPU card, instances taken for a static MIG card."""

    index: int
    uuid: str
    model: str
    kind: str
    memory_mib: int
    cores: int
    slots: int
    holders: tuple[Holder, ...]
    profiles: tuple[MIGProfileRow, ...] = ()

    @property
    def used_memory_mib(self) -> int:
        return sum(h.memory_mib for h in self.holders)

    @property
    def used_cores(self) -> int:
        return sum(h.cores for h in self.holders)

    @property
    def cell(self) -> Cell:
        if self.kind == "mig" and any(p.total for p in self.profiles):
            return Cell(float(sum(p.used for p in self.profiles)), float(sum(p.total for p in self.profiles)))
        return Cell(float(self.used_memory_mib), float(self.memory_mib))


@dataclass(frozen=True)
class GPUNodeRow:
    node: str
    cards: tuple[CardRow, ...]
    unrecorded: Mapping[str, int]  # MIG profile -> instances held by pods that record none (bound by others)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def is_gpu_node(node: Mapping[str, Any]) -> bool:
    """Whether the node has cards to show: a vGPU registration, or GPUs with a static MIG geometry. A cheap test
    on the annotations (no parsing), so that the page skips the other nodes."""
    ann = _meta(node).get("annotations") or {}
    return bool(ann.get(inv.HAMI_REGISTER_ANNOTATION) or ann.get(inv.VOLCANO_REGISTER_ANNOTATION)
                or "migDevices" in (ann.get(inv.GPU_TOPOLOGY_ANNOTATION) or ""))


def _mig_resources(pod: Mapping[str, Any]) -> bool:
    for c in (pod.get("spec") or {}).get("containers") or ():
        res = c.get("resources") or {}
        if any(k.startswith("nvidia.com/mig-") for k in (*(res.get("limits") or {}), *(res.get("requests") or {}))):
            return True
    return False


def holds_devices(pod: Mapping[str, Any]) -> bool:
    """Whether a bound pod may hold part of a card: it carries an allocation annotation or asks for MIG devices."""
    if not (pod.get("spec") or {}).get("nodeName"):
        return False
    ann = _meta(pod).get("annotations") or {}
    return any(k in ann for k in POD_ANNOTATIONS) or _mig_resources(pod)


def _key(pod: Mapping[str, Any]) -> str:
    return f"{_meta(pod).get('namespace') or ''}/{_meta(pod).get('name') or ''}"


def _json(text: str | None, default: Any) -> Any:
    try:
        data = json.loads(text) if text else default
    except ValueError:
        return default
    return data if isinstance(data, type(default)) else default


def card_rows(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> tuple[list[CardRow], dict[str, int]]:
    """The node's cards (by index) with what `pods` — the pods bound to it — hold on each, and the MIG instances
    per profile held by pods that record none. Finished pods hold nothing; malformed annotations hold nothing."""
    node_inv = inv.inventory(node)
    vgpu: dict[str, inv.VGPUCard] = {}
    for card in (*node_inv.volcano, *node_inv.hami):  # HAMi's registration wins where a card is in both
        vgpu[card.uuid] = card
    shares: dict[str, list[Holder]] = defaultdict(list)
    dynamic: dict[str, dict[str, list[Holder]]] = defaultdict(lambda: defaultdict(list))
    static: dict[tuple[int, str], list[Holder]] = defaultdict(list)
    asked: dict[str, int] = defaultdict(int)
    recorded: dict[str, int] = defaultdict(int)
    for pod in sorted(pods, key=_key):
        if ((pod.get("status") or {}).get("phase")) in _TERMINAL:
            continue
        who, ann = _key(pod), _meta(pod).get("annotations") or {}
        for keys in (inv.VOLCANO_ALLOCATED_ANNOTATIONS, inv.HAMI_ALLOCATED_ANNOTATIONS):
            raw = next((ann[k] for k in keys if ann.get(k)), "")
            for container in inv.decode_pod_devices(raw):
                for uuid, _type, mem, cores in container:
                    shares[uuid.split("[", 1)[0]].append(Holder(who, mem, cores))
        for m in _json(ann.get(inv.HAMI_MIG_ALLOCATIONS_ANNOTATION), []):
            if isinstance(m, dict):
                p = m.get("placement") or {}
                where = f"{p.get('start', 0)}+{p.get('size', 0)}" if isinstance(p, dict) else ""
                dynamic[str(m.get("gpuUUID") or "")][str(m.get("profile") or "")].append(Holder(who, instance=where))
        for profile, ids in sorted(inv.parse_instances_annotation(ann.get(inv.MIG_INSTANCES_ANNOTATION, "")).items()):
            for i in sorted(ids):
                gpu, _, _ordinal = i.partition("/")
                if gpu.isdigit():
                    static[(int(gpu), profile)].append(Holder(who, instance=i))
                    recorded[profile] += 1
        for m in devreq.mig_requests(pod) if _mig_resources(pod) else ():  # the cheap test first
            asked[m.profile] += m.count
    rows: list[CardRow] = []
    seen: set[str] = set()
    for g in node_inv.gpus:
        card = vgpu.get(g.uuid) if g.uuid else None
        if g.mig_devices:
            profiles = tuple(MIGProfileRow(p, n, tuple(static.get((g.index, p), ()))) for p, n in g.mig_devices)
            rows.append(CardRow(g.index, g.uuid, g.model, "mig", g.memory_mib, 100, sum(n for _, n in g.mig_devices),
                                (), profiles))
        elif card is not None:
            rows.append(_vgpu_row(card, shares, dynamic))
        if g.uuid:
            seen.add(g.uuid)
    for card in sorted(vgpu.values(), key=lambda c: c.index):
        if card.uuid not in seen:
            rows.append(_vgpu_row(card, shares, dynamic))
    rows.sort(key=lambda r: r.index)
    unrecorded = {p: n - recorded[p] for p, n in sorted(asked.items()) if n > recorded[p]}
    return rows, unrecorded


def _vgpu_row(card: inv.VGPUCard, shares: Mapping[str, list[Holder]],
              dynamic: Mapping[str, Mapping[str, list[Holder]]]) -> CardRow:
    mig = dynamic.get(card.uuid) or {}
    profiles = tuple(MIGProfileRow(p, 0, tuple(hs)) for p, hs in sorted(mig.items()))
    return CardRow(card.index, card.uuid, card.type, "mig" if card.mode == "mig" or profiles else "vgpu",
                   card.memory_mib, card.cores, card.count, tuple(shares.get(card.uuid, ())), profiles)


class DevicePods:
    """The bound pods that may hold part of a card (`holds_devices`), by node, kept from pod events: `put(pod)` on
    add and update, `remove(pod)` on delete (`live.Hub` wires them to the pods informer), `snapshot()` for a
    render. Thread-safe; the other pods cost one annotation look-up per event."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._node: dict[str, str] = {}
        self._pods: dict[str, dict[str, Mapping[str, Any]]] = defaultdict(dict)

    def _drop(self, key: str) -> None:
        node = self._node.pop(key, None)
        if node is not None:
            self._pods[node].pop(key, None)
            if not self._pods[node]:
                del self._pods[node]

    def put(self, pod: Mapping[str, Any]) -> None:
        key = _key(pod)
        with self._lock:
            self._drop(key)
            if holds_devices(pod):
                node = str((pod.get("spec") or {}).get("nodeName"))
                self._node[key] = node
                self._pods[node][key] = pod

    def remove(self, pod: Mapping[str, Any]) -> None:
        with self._lock:
            self._drop(_key(pod))

    def snapshot(self) -> dict[str, list[Mapping[str, Any]]]:
        with self._lock:
            return {n: list(ps.values()) for n, ps in self._pods.items()}


_ROWS: dict[tuple[Any, ...], tuple[list[CardRow], dict[str, int]]] = {}
_ROWS_MAX = 20_000


def _version(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    meta = _meta(obj)
    uid, rv = meta.get("uid"), meta.get("resourceVersion")
    return (str(uid), str(rv)) if uid and rv else None


def _cached_card_rows(node: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]
                      ) -> tuple[list[CardRow], dict[str, int]]:
    """`card_rows`, remembered per (node, pods) version: a node whose object and pods are unchanged is read once,
    however many renders follow. Objects without uid and resourceVersion are read each time."""
    versions = [_version(node), *(_version(p) for p in pods)]
    if any(v is None for v in versions):
        return card_rows(node, pods)
    key = (str(_meta(node).get("name") or ""), *sorted(versions))  # type: ignore[type-var]
    hit = _ROWS.get(key)
    if hit is None:
        if len(_ROWS) >= _ROWS_MAX:
            _ROWS.clear()
        hit = _ROWS[key] = card_rows(node, pods)
    return hit


def gpu_rows(nodes: Sequence[Obj], pods: Iterable[Mapping[str, Any]] | Mapping[str, Sequence[Mapping[str, Any]]]
             ) -> list[GPUNodeRow]:
    """One row per node with cards to show (by name). `pods` is every pod, or already the device-holding pods by
    node name (`DevicePods.snapshot()`)."""
    shown = sorted((n for n in nodes if is_gpu_node(n)), key=lambda n: str(_meta(n).get("name") or ""))
    if not shown:  # no node shares or splits its GPUs: no pod to read
        return []
    if isinstance(pods, Mapping):
        by_node: Mapping[str, Sequence[Mapping[str, Any]]] = pods
    else:
        grouped: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
        for pod in pods:
            if holds_devices(pod):
                grouped[str((pod.get("spec") or {}).get("nodeName"))].append(pod)
        by_node = grouped
    out = []
    for n in shown:
        name = str(_meta(n).get("name") or "")
        cards, unrecorded = _cached_card_rows(n, by_node.get(name, ()))
        if cards:
            out.append(GPUNodeRow(name, tuple(cards), unrecorded))
    return out
