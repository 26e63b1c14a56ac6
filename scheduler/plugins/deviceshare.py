"""deviceshare: which concrete devices a task gets on a node — whole GPUs chosen link-aware, vGPU slices, MIG
devices, RDMA VFs paired with the GPUs under one PCIe switch — and the annotations that tell the node side.

A thin plugin over the per-session `scheduler.placement.Placement` shared with numa-aware: the devices are hint
providers there, so GPUs, VFs and CPUs are merged under the node's (or the task's stricter) Topology Manager policy
and land on the same NUMA node where the policy demands it. The device decisions travel as pod annotations with the
bind (`Decisions.annotations`): Koordinator `scheduling.koordinator.sh/device-allocated`, Volcano / HAMi vGPU
lists, and lahar's explicit GPU ↔ VF pairs `lahar.sh/gpu-rdma-pairs` (koordinator#2187). Pure fit functions live in
`scheduler.devices` (inventory, requests, gpu, vgpu, mig, rdma); this module is the session glue.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from lahar.scheduler.devices import gpu as gpus_
from lahar.scheduler.devices import gpushares
from lahar.scheduler.devices import inventory as inventories
from lahar.scheduler.devices import mig as migs
from lahar.scheduler.devices import partitions as partitions_
from lahar.scheduler.devices import rdma as rdmas
from lahar.scheduler.devices import requests as requests_
from lahar.scheduler.devices import vgpu as vgpus
from lahar.scheduler.framework.hooks import REUSE_STATIC, NodeFilter, passing
from lahar.scheduler.framework.snapshot import Task
from lahar.scheduler.placement import DerivedCache, Placement, derived, placed_pods, placement
from lahar.scheduler.topology import TopologyHint, hints

if TYPE_CHECKING:
    from lahar.scheduler.framework.nodes import NodeArrays
    from lahar.scheduler.framework.session import Session

__all__ = ["GPU_RESOURCE", "INSUFFICIENT_GPUS", "DevicePlan", "DeviceShare", "NodeDevices", "vgpu_hints"]

GPU_RESOURCE = "nvidia.com/gpu"
INSUFFICIENT_GPUS = "Insufficient nvidia.com/gpu devices"


def vgpu_hints(request: Any, cards: Any, usage: inventories.Usage, numa_nodes: list[int],
               *, mig: bool = False) -> dict[str, list[TopologyHint] | None]:
    """NUMA hints for a vGPU (or HAMi dynamic-MIG) request, one resource per app container
    (`<vendor>/vgpu/<container>`): the device manager's shape (`hints.device_hints`) over the cards — a card
    counts for a mask if it is on one of its NUMA nodes; `available` = the cards that could take one unit of the
    container now (vGPU: slots, memory, cores, filters; MIG: a free placement of the smallest fitting profile);
    preferred = the minimal width the matching cards allow. No card with a NUMA node → None (no preference);
    not enough cards anywhere → [] (the node cannot satisfy it). Pure."""
    out: dict[str, list[TopologyHint] | None] = {}
    if mig:
        eligible = [c for c in cards if c.mode == "mig" and c.healthy and request.filters.allows(c.type, c.uuid)]
    else:
        eligible = [c for c in cards if c.mode != "mig" and c.healthy and vgpus._mode_ok(request, c)
                    and request.filters.type_ok(c.type) and request.filters.uuid_ok(c.uuid)]
    devices = {c.uuid: None if c.numa is None else [c.numa] for c in eligible}
    for req in request.containers:
        if req.init:
            continue
        if mig:
            one = dataclasses.replace(request, containers=(dataclasses.replace(req, count=1),))
            available = [c.uuid for c in eligible if not isinstance(migs.fit_dynamic(one, [c], usage), str)]
        else:
            available = [c.uuid for c in eligible
                         if not vgpus._card_check(req, request, c, inventories.slice_usage(c, usage))]
        out[f"{request.vendor}/vgpu/{req.name or req.container}"] = hints.device_hints(
            req.count, devices, available, numa_nodes)
    return out


@dataclass(frozen=True)
class DevicePlan:
    """A (task, node) device choice: whole GPUs (indices, in allocation order), RDMA (`rdma.RDMAAllocation`),
    vGPU slices, dynamic MIG instances, "mixed" MIG devices (profile, count); `score` for the node order."""

    gpus: tuple[int, ...] = ()
    rdma: rdmas.RDMAAllocation | None = None
    vgpu: vgpus.Allocation | None = None
    dynamic_mig: migs.MIGAllocation | None = None
    mig: tuple[tuple[str, int], ...] = ()
    score: float = 0.0
    rdma_resource: str = "koordinator.sh/rdma"
    mig_instances: tuple[tuple[str, tuple[str, ...]], ...] = ()  # "mixed" MIG: (profile, instance ids) counted
    share: gpushares.CardGrant | None = None  # a Koordinator share of one card

    def vfs(self) -> list[str]:
        return self.rdma.vfs() if self.rdma is not None else []


@dataclass
class NodeDevices:
    """One node's inventory and the session's view of what is free on it."""

    inv: inventories.NodeInventory
    base: inventories.Usage
    scores: dict[tuple[int, int], int]
    taken_gpus: set[int] = field(default_factory=set)
    taken_vfs: set[str] = field(default_factory=set)
    taken_cards: dict[str, inventories.CardUsage] = field(default_factory=dict)
    taken_mig: dict[str, int] = field(default_factory=dict)
    taken_mig_instances: dict[str, set[str]] = field(default_factory=dict)
    taken_pfs: dict[int, int] = field(default_factory=dict)
    taken_placements: list[inventories.MIGPlacement] = field(default_factory=list)
    version: int = 0

    def free_gpus(self) -> list[int]:
        return [g for g in self.inv.free_gpus(self.usage()) if g not in self.taken_gpus]

    def free_vfs(self) -> dict[int, list[inventories.VF]]:
        return {nic: [v for v in vfs if v.bus_id not in self.taken_vfs]
                for nic, vfs in self.inv.free_vfs(self.base).items()}

    def usage(self) -> inventories.Usage:
        """The pods' usage plus this session's reservations."""
        if not (self.taken_cards or self.taken_vfs or self.taken_mig or self.taken_placements):
            return self.base
        cards = dict(self.base.cards)
        for uuid, u in self.taken_cards.items():
            cards[uuid] = cards.get(uuid, inventories.CardUsage()).add(u)
        mig = dict(self.base.mig)
        for profile, n in self.taken_mig.items():
            mig[profile] = mig.get(profile, 0) + n
        return inventories.Usage(cards=cards, gpus=self.base.gpus | frozenset(self.taken_gpus),
                                 unplaced_gpus=self.base.unplaced_gpus, vfs=self.base.vfs | frozenset(self.taken_vfs),
                                 pfs=self._pfs(), mig=mig,
                                 mig_placements=self.base.mig_placements + tuple(self.taken_placements))

    def free_mig(self, profile: str, instances: Sequence[tuple[str, int | None]]) -> list[tuple[str, int | None]]:
        """The free "mixed" MIG instances of `profile` (recorded pods' and this session's taken out)."""
        return migs.free_instances(instances, self.base.mig_instances.get(profile, frozenset()),
                                   self.base.mig.get(profile, 0), self.taken_mig_instances.get(profile, ()))

    def _pfs(self) -> Mapping[int, int]:
        if not self.taken_pfs:
            return self.base.pfs
        out = dict(self.base.pfs)
        for m, units in self.taken_pfs.items():
            out[m] = out.get(m, 0) + units
        return out


class DeviceShare:
    """Volcano's `deviceshare` plugin, arguments `deviceshare.SchedulePolicy` (binpack | spread; default binpack for
    whole GPUs), `deviceshare.ScheduleWeight` (default 1), `deviceshare.VGPUEnable` / `GPUNumberEnable` (default on)."""

    name = "deviceshare"

    def __init__(self, arguments: Mapping[str, Any] | None = None) -> None:
        args = dict(arguments or {})
        self.policy = str(args.get("deviceshare.SchedulePolicy") or vgpus.BINPACK)
        self.weight = float(args.get("deviceshare.ScheduleWeight", 1) or 0)
        self.vgpu_enable = str(args.get("deviceshare.VGPUEnable", True)).lower() != "false"
        self._nodes: dict[int, NodeDevices | None] = {}
        self._inventories: dict[int, inventories.NodeInventory | None] = {}
        self.placement: Placement | None = None
        self._derived = DerivedCache()  # the session owner's, from on_session_open
        self.node_names: list[str] = []
        self._requests: dict[str, requests_.DeviceRequest | None] = {}
        self.now = int(time.time())

    # --- session ----------------------------------------------------------------------------------------------------

    def on_session_open(self, ssn: Session) -> None:
        self.placement = placement(ssn)
        self.placement.devices = self
        self._derived = derived(ssn)
        self._ssn = ssn
        self.node_names = [n.name for n in ssn.nodes]
        self._nodes: dict[int, NodeDevices | None] = {}
        self._scores: dict[str, dict[tuple[int, int], int]] = {}
        self._empty_usage: inventories.Usage | None = None
        self._inventories: dict[int, inventories.NodeInventory | None] = {}

    def node(self, index: int) -> NodeDevices | None:
        """The node's inventory and usage, parsed on first use (only nodes a plan is made for)."""
        if index in self._nodes:
            return self._nodes[index]
        n = self._ssn.nodes[index]
        inv = self._inventory(index)
        nd: NodeDevices | None
        if inv is None:
            nd = None
        else:
            # the pods there before this session (what this session placed is in the reservations, `taken_*`)
            placed = self.placement.reserved if self.placement is not None else {}
            placing = self.placement.placing if self.placement is not None else None
            pods = [t.pod for t in placed_pods(n) if t.uid not in placed and t.uid != placing]
            raw = (n.node.get("metadata") or {}).get("annotations", {}).get(inventories.GPU_TOPOLOGY_ANNOTATION)
            scores = self._scores.get(raw) if raw else {}
            if scores is None:
                scores = self._derived.get("gpu-scores", n.name, (n.node,), lambda: _pair_scores(raw))
                self._scores[raw] = scores
            if pods:
                base = inventories.usage(pods)
            else:
                base = self._empty_usage = self._empty_usage or inventories.usage(())
            nd = NodeDevices(inv, base, scores)
            for plan in (self.placement.reserved_on.get(index, {}) if self.placement is not None else {}).values():
                if isinstance(plan.devices, DevicePlan):
                    self._reserve_into(nd, plan.devices)
        self._nodes[index] = nd
        return nd

    def _inventory(self, index: int) -> inventories.NodeInventory | None:
        """The node's device inventory (parsed once per resourceVersions across sessions, once per session for an
        object without one), None if unreadable."""
        if index in self._inventories:
            return self._inventories[index]
        got = self._inventories[index] = self._read_inventory(index)
        return got

    def _read_inventory(self, index: int) -> inventories.NodeInventory | None:
        n = self._ssn.nodes[index]
        # CPUs are the numa-aware side's: the Numatopology is not parsed again here
        device = self._ssn.snapshot.extras.get("devices", {}).get(n.name)
        try:
            return self._derived.get("inventory", n.name, (n.node, device),
                                     lambda: inventories.inventory(n.node, device, None))
        except (ValueError, TypeError, KeyError):
            return None

    def on_session_close(self, ssn: Session) -> None:
        if self.placement is not None:
            self.placement.close()

    def predicate(self, task: Task, nodes: NodeArrays) -> NodeFilter:
        assert self.placement is not None
        if self.placement.task_info(task)[1] is None:  # no device request
            return passing(len(nodes))
        return self.placement.predicate(task, nodes)

    def node_order(self, task: Task, nodes: NodeArrays, candidates: np.ndarray) -> np.ndarray:
        assert self.placement is not None
        if self.placement.task_info(task)[1] is None or not self.weight:
            return np.zeros(len(candidates))
        return self.placement.device_scores(task, candidates) * self.weight

    def node_order_reuse(self, task: Task) -> tuple[str, Any] | None:
        """Zero everywhere for a task without a device request."""
        if not self.weight or (self.placement is not None and self.placement.task_info(task)[1] is None):
            return REUSE_STATIC, None
        return None

    def on_allocate(self, task: Task) -> None:
        if self.placement is not None:
            self.placement.on_allocate(task)

    def on_deallocate(self, task: Task) -> None:
        if self.placement is not None:
            self.placement.on_deallocate(task)

    # --- DeviceSide (placement.Placement) ---------------------------------------------------------------------------

    def device_request(self, task: Task) -> requests_.DeviceRequest | None:
        if task.uid not in self._requests:
            req = self._derived.get("device-request", task.uid, (task.pod,), lambda: requests_.parse(task.pod))
            self._requests[task.uid] = None if req.empty and not req.errors else req
        return self._requests[task.uid]

    def _vgpu_vendor(self, req: requests_.DeviceRequest, nd: NodeDevices) -> str:
        if not self.vgpu_enable:
            return ""
        if req.volcano is not None and nd.inv.volcano:
            return "volcano"
        if req.hami is not None and nd.inv.hami:
            return "hami"  # on a node with a HAMi registration, nvidia.com/gpu counts HAMi slots
        return ""

    def _whole_gpus(self, req: requests_.DeviceRequest, nd: NodeDevices) -> int:
        """Whole GPUs the task takes on this node: `req.gpus`, plus, on a node that speaks no vGPU vocabulary (plain
        NVIDIA device plugin), the cards of a HAMi request (`nvidia.com/gpu` with gpumem / gpucores): an exclusive
        card holds any slice of itself, and without a card chosen the pod would hold a GPU nobody accounts for."""
        n = req.gpus
        if req.hami is not None and not self._vgpu_vendor(req, nd):
            n += sum(c.count for c in req.hami.containers if not c.init and not c.count_only)
        return n

    def device_providers(self, task: Task, node: int, request: Any) -> dict[str, list[TopologyHint] | None] | str:
        req: requests_.DeviceRequest = request
        nd = self.node(node)
        if req.errors:
            return req.errors[0]
        if nd is None:
            return "node has no device inventory"
        inv = nd.inv
        out: dict[str, list[TopologyHint] | None] = {}
        topo = self.placement.topology(node) if self.placement is not None else None
        numa_nodes = sorted(set(topo.numa_nodes if topo is not None else ()) | set(inv.numa_nodes)) or [0]
        whole = self._whole_gpus(req, nd) if inv.gpus else 0  # no GPU identities: counted by allocatable alone
        if whole and not self._vgpu_vendor(req, nd):
            free = nd.free_gpus()
            if len(free) < whole:
                return INSUFFICIENT_GPUS
            out[GPU_RESOURCE] = hints.device_hints(whole, inv.gpu_numa(), [str(g) for g in free], numa_nodes)
        if req.share is not None:
            usage = nd.usage()
            fits = gpushares.candidates(req.share, inv.gpus, usage)
            if not fits:
                return str(gpushares.fit(req.share, inv.gpus, usage))   # the reason
            out[requests_.KOORD_GPU_MEMORY_RATIO] = hints.device_hints(1, inv.gpu_numa(), [str(m) for m in fits],
                                                                       numa_nodes)
        vendor = self._vgpu_vendor(req, nd)
        if vendor:
            pod_req = req.volcano if vendor == "volcano" else req.hami
            if pod_req is not None:
                out.update(vgpu_hints(pod_req, inv.volcano if vendor == "volcano" else inv.hami, nd.usage(),
                                      numa_nodes, mig=pod_req.mode == "mig" and vendor == "hami"))
        if req.rdma is not None and inv.nics:
            free_vfs = nd.free_vfs()
            nic_numa = {nic.minor: nic.numa for nic in inv.nics}
            if req.must_allocate_vf:
                devices = {f"{m}/{v.bus_id}": None if nic_numa.get(m) is None else [nic_numa[m]]
                           for m, vs in free_vfs.items() for v in vs}
                available = list(devices)
            else:
                devices = {str(m): None if nic_numa.get(m) is None else [nic_numa[m]] for m in free_vfs}
                available = list(devices)
            resource = req.rdma.vf_resource or "koordinator.sh/rdma"
            out[resource] = hints.device_hints(req.rdma.count, devices, available, numa_nodes)
        if req.mig:
            instances = migs.mixed_instances(inv)
            for profile, n in migs.mixed_request(req.mig).items():
                insts = instances.get(profile, [])
                if not insts or any(numa is None for _, numa in insts):
                    out[f"nvidia.com/mig-{profile}"] = None
                    continue
                devices = {i: [numa] for i, numa in insts if numa is not None}
                free = [i for i, _ in nd.free_mig(profile, insts)]
                out[f"nvidia.com/mig-{profile}"] = hints.device_hints(n, devices, free, numa_nodes)
        return out

    def device_allocate(self, task: Task, node: int, request: Any, hint: TopologyHint | None) -> DevicePlan | str:
        req: requests_.DeviceRequest = request
        nd = self.node(node)
        if req.errors:
            return req.errors[0]
        if nd is None:
            return "node has no device inventory"
        inv = nd.inv
        affinity = hint.affinity if hint is not None else None
        usage = nd.usage()
        chosen: list[int] = []
        score = 0.0
        vgpu_alloc: vgpus.Allocation | None = None
        dynamic: migs.MIGAllocation | None = None
        vendor = self._vgpu_vendor(req, nd)
        if vendor:
            pod_req = req.volcano if vendor == "volcano" else req.hami
            cards = inv.volcano if vendor == "volcano" else inv.hami
            assert pod_req is not None
            # the merged hint's NUMA nodes first; all cards when they cannot take it (best-effort's fallback)
            aligned = cards if affinity is None else [c for c in cards if c.numa is None or c.numa in affinity]
            attempts = [aligned, cards] if len(aligned) < len(cards) else [cards]
            for attempt in attempts:
                if pod_req.mode == "mig" and vendor == "hami":
                    got_mig = migs.fit_dynamic(pod_req, attempt, usage,
                                               policy=self.policy if self.policy != vgpus.MUTEX else vgpus.BINPACK)
                    if isinstance(got_mig, str):
                        failure = got_mig
                        continue
                    dynamic = got_mig
                else:
                    got = vgpus.fit(pod_req, attempt, usage, policy=self.policy if vendor == "volcano" else None,
                                    node=inv.name)
                    if isinstance(got, str):
                        failure = got
                        continue
                    vgpu_alloc = got
                    score = got.score
                break
            else:
                return failure
        elif inv.gpus and (whole := self._whole_gpus(req, nd)):
            free = nd.free_gpus()
            if len(free) < whole:
                return INSUFFICIENT_GPUS
            if affinity is not None:
                aligned = [g for g in free if (inv.gpu(g) or inventories.GPU(g)).numa in affinity]
            else:
                aligned = free
            device = self._ssn.snapshot.extras.get("devices", {}).get(self.node_names[node])
            table = self._derived.get("gpu-partitions", self.node_names[node], (device,),
                                      lambda: partitions_.table(device))
            part = partitions_.choose(whole, free, total=[g.index for g in inv.whole_gpus()], partitions=table,
                                      spec=req.partition_spec, node_honors=partitions_.node_honors(device))
            if isinstance(part, str):
                return part
            if part is not None:
                chosen = list(part)
            elif len(aligned) >= whole:
                chosen = gpus_.allocate(aligned, [], whole, nd.scores)
            else:
                chosen = gpus_.allocate(free, aligned, whole, nd.scores)
            if len(chosen) != whole:
                return INSUFFICIENT_GPUS
            chosen = sorted(chosen)
            total = len(inv.whole_gpus()) or 1
            used_after = total - len(free) + whole
            score = 100.0 * (used_after / total if self.policy != vgpus.SPREAD else 1 - used_after / total)
        share: gpushares.CardGrant | None = None
        if req.share is not None:
            got_share = gpushares.fit(req.share, inv.gpus, usage, policy=self.policy, numa_nodes=affinity)
            if isinstance(got_share, str):
                return got_share
            share = got_share
            score = max(score, got_share.score)
        mig: list[tuple[str, int]] = []
        mig_instances: list[tuple[str, tuple[str, ...]]] = []
        if req.mig:
            why = migs.fit_mixed(req.mig, inv, usage)
            if why is not None:
                return why
            mig = sorted(migs.mixed_request(req.mig).items())
            instances = migs.mixed_instances(inv)
            for profile, n in mig:
                if not instances.get(profile):
                    continue  # no geometry published: counted, not placed
                got_ids = migs.choose_instances(nd.free_mig(profile, instances[profile]), n, affinity)
                if got_ids is None:
                    return f"Insufficient nvidia.com/mig-{profile.replace('+', '.')}"
                mig_instances.append((profile, tuple(got_ids)))
        rdma: rdmas.RDMAAllocation | None = None
        if req.rdma is not None:
            hint_rdma = req.hints.get("rdma")
            got_rdma = rdmas.allocate([g for g in (inv.gpu(i) for i in chosen) if g is not None], inv.nics, usage,
                                      request=req.rdma, same_pcie=req.same_pcie and bool(chosen),
                                      must_vf=req.must_allocate_vf,
                                      vf_selector=hint_rdma.vf_selector if hint_rdma is not None else None,
                                      numa_nodes=affinity)
            if isinstance(got_rdma, str):
                return got_rdma
            rdma = got_rdma
        return DevicePlan(tuple(chosen), rdma, vgpu_alloc, dynamic, tuple(mig), score,
                          (req.rdma.vf_resource or "koordinator.sh/rdma") if req.rdma is not None else "",
                          tuple(mig_instances), share)

    def device_numa(self, node: int, plan: Any) -> dict[int, dict[str, int]]:
        nd = self.node(node)
        out: dict[int, dict[str, int]] = {}
        if nd is None or not isinstance(plan, DevicePlan):
            return out

        def add(numa: int | None, resource: str, n: int = 1) -> None:
            if numa is not None and n:
                slot = out.setdefault(numa, {})
                slot[resource] = slot.get(resource, 0) + n

        inv = nd.inv
        for g in plan.gpus:
            info = inv.gpu(g)
            add(info.numa if info else None, GPU_RESOURCE)
        if plan.rdma is not None:
            for grant in plan.rdma.nics:
                add(grant.numa, plan.rdma_resource, len(grant.vfs) or 1)
        if plan.share is not None:
            add(plan.share.numa, requests_.KOORD_GPU_MEMORY_RATIO, plan.share.ratio)
        return out

    def device_reserve(self, node: int, plan: Any) -> None:
        """Hold the plan's devices on the node's view; a node whose view is not built yet takes its reservations
        (`Placement.reserved_on`) when it is."""
        nd = self._nodes.get(node)
        if nd is not None and isinstance(plan, DevicePlan):
            self._reserve_into(nd, plan)

    def _reserve_into(self, nd: NodeDevices, plan: DevicePlan) -> None:
        if plan.vgpu is not None or plan.dynamic_mig is not None or plan.share is not None:
            plan = self._localize(nd.inv, plan)
        nd.taken_gpus.update(plan.gpus)
        nd.taken_vfs.update(plan.vfs())
        if plan.rdma is not None:
            for grant in plan.rdma.nics:
                if not grant.vfs:
                    nd.taken_pfs[grant.minor] = nd.taken_pfs.get(grant.minor, 0) + grant.units
        if plan.vgpu is not None:
            for d in plan.vgpu.devices():
                u = nd.taken_cards.get(d.uuid, inventories.CardUsage())
                nd.taken_cards[d.uuid] = u.plus(d.memory_mib, d.cores)
        if plan.dynamic_mig is not None:
            for i in plan.dynamic_mig.instances:
                nd.taken_placements.append(inventories.MIGPlacement(i.gpu_uuid, i.profile, i.start, i.size))
                u = nd.taken_cards.get(i.gpu_uuid, inventories.CardUsage())
                nd.taken_cards[i.gpu_uuid] = u.plus(i.memory_mib, i.core)
        if plan.share is not None:
            key = _share_key(plan.share)
            u = nd.taken_cards.get(key, inventories.CardUsage())
            nd.taken_cards[key] = u.plus(plan.share.memory_mib, plan.share.core,
                                         ratio=0 if plan.share.memory_mib else plan.share.ratio)
        for profile, count in plan.mig:
            nd.taken_mig[profile] = nd.taken_mig.get(profile, 0) + count
        for profile, ids in plan.mig_instances:
            nd.taken_mig_instances.setdefault(profile, set()).update(ids)
        nd.version += 1

    def device_release(self, node: int, plan: Any) -> None:
        nd = self._nodes.get(node)  # not built: nothing held there yet
        if nd is None or not isinstance(plan, DevicePlan):
            return
        if plan.vgpu is not None or plan.dynamic_mig is not None or plan.share is not None:
            plan = self._localize(nd.inv, plan)
        nd.taken_gpus.difference_update(plan.gpus)
        nd.taken_vfs.difference_update(plan.vfs())
        if plan.rdma is not None:
            for grant in plan.rdma.nics:
                if not grant.vfs:
                    left = nd.taken_pfs.get(grant.minor, 0) - grant.units
                    if left > 0:
                        nd.taken_pfs[grant.minor] = left
                    else:
                        nd.taken_pfs.pop(grant.minor, None)
        charges = [(d.uuid, d.memory_mib, d.cores) for d in plan.vgpu.devices()] if plan.vgpu is not None else []
        if plan.dynamic_mig is not None:
            for i in plan.dynamic_mig.instances:
                nd.taken_placements.remove(inventories.MIGPlacement(i.gpu_uuid, i.profile, i.start, i.size))
                charges.append((i.gpu_uuid, i.memory_mib, i.core))
        charges3 = [(uuid, mem, cores, 0) for uuid, mem, cores in charges]
        if plan.share is not None:
            charges3.append((_share_key(plan.share), plan.share.memory_mib, plan.share.core,
                             0 if plan.share.memory_mib else plan.share.ratio))
        for uuid, mem, cores, ratio in charges3:
            u = nd.taken_cards.get(uuid, inventories.CardUsage())
            left = u.minus(mem, cores, ratio)
            if left.num <= 0:
                nd.taken_cards.pop(uuid, None)
            else:
                nd.taken_cards[uuid] = left
        for profile, count in plan.mig:
            nd.taken_mig[profile] = nd.taken_mig.get(profile, 0) - count
        for profile, ids in plan.mig_instances:
            nd.taken_mig_instances.get(profile, set()).difference_update(ids)
        nd.version += 1

    def device_key(self, plan: Any) -> Any:
        if not isinstance(plan, DevicePlan):
            return None
        vgpu = tuple((d.index, d.memory_mib, d.cores) for d in plan.vgpu.devices()) if plan.vgpu is not None else ()
        dyn = tuple((i.gpu_index, i.profile, i.start, i.size) for i in plan.dynamic_mig.instances) \
            if plan.dynamic_mig is not None else ()
        rdma = tuple((g.minor, g.units, g.vfs) for g in plan.rdma.nics) if plan.rdma is not None else ()
        share = (plan.share.minor, plan.share.core, plan.share.ratio) if plan.share is not None else ()
        return (plan.gpus, rdma, vgpu, dyn, plan.mig, plan.mig_instances, share)

    def _localize(self, inv: inventories.NodeInventory, plan: DevicePlan) -> DevicePlan:
        """The plan with this node's vGPU / MIG card UUIDs (a plan may come from another node of the same shape and
        state; whole-GPU UUIDs are looked up by index where the annotations are written)."""
        vgpu = plan.vgpu
        if vgpu is not None:
            cards = {c.index: c.uuid for c in (inv.volcano if vgpu.vendor == "volcano" else inv.hami)}
            vgpu = dataclasses.replace(vgpu, containers=tuple(
                (c, tuple(dataclasses.replace(d, uuid=cards.get(d.index, d.uuid)) for d in devs))
                for c, devs in vgpu.containers))
        dyn = plan.dynamic_mig
        if dyn is not None:
            cards = {c.index: c.uuid for c in inv.hami}
            dyn = dataclasses.replace(dyn, instances=tuple(
                dataclasses.replace(i, gpu_uuid=cards.get(i.gpu_index, i.gpu_uuid)) for i in dyn.instances))
        share = self._localize_share(inv, plan.share) if plan.share is not None else None
        return dataclasses.replace(plan, vgpu=vgpu, dynamic_mig=dyn, share=share)

    @staticmethod
    def _localize_share(inv: inventories.NodeInventory, grant: gpushares.CardGrant) -> gpushares.CardGrant:
        """The share with this node's card UUID (a plan may come from another node of the same shape)."""
        g = inv.gpu(grant.minor)
        return dataclasses.replace(grant, uuid=g.uuid) if g is not None else grant

    def device_annotations(self, task: Task, node: int, plan: Any) -> dict[str, str]:
        inv = self._inventory(node)
        if inv is None or not isinstance(plan, DevicePlan):
            return {}
        if plan.vgpu is not None or plan.dynamic_mig is not None or plan.share is not None:
            plan = self._localize(inv, plan)
        out: dict[str, str] = {}
        if plan.gpus or plan.rdma is not None:
            gpus = [g for g in (inv.gpu(i) for i in plan.gpus) if g is not None]
            out.update(rdmas.annotations(gpus, plan.rdma))
        if plan.share is not None:
            out[inventories.DEVICE_ALLOCATED_ANNOTATION] = _with_share(
                out.get(inventories.DEVICE_ALLOCATED_ANNOTATION), plan.share)
        if plan.vgpu is not None:
            out.update(vgpus.annotations(plan.vgpu, node=self.node_names[node], now=self.now))
        if plan.dynamic_mig is not None:
            out.update(migs.annotations(plan.dynamic_mig, node=self.node_names[node], now=self.now))
        if plan.mig_instances:
            out[inventories.MIG_INSTANCES_ANNOTATION] = migs.instances_annotation(dict(plan.mig_instances))
        return out


def _share_key(grant: gpushares.CardGrant) -> str:
    return grant.uuid or inventories.share_key(grant.minor)


def _with_share(raw: str | None, grant: gpushares.CardGrant) -> str:
    """The `device-allocated` value with the share's GPU entry (next to the RDMA devices, if any)."""
    value = orjson.loads(raw) if raw else {}
    value["gpu"] = [*value.get("gpu", []), gpushares.allocated_entry(grant)]
    return orjson.dumps(value).decode()


def _pair_scores(raw: str) -> dict[tuple[int, int], int]:
    try:
        return gpus_.pair_scores(gpus_.links_from_annotation(raw))
    except (ValueError, KeyError, TypeError):
        return {}
