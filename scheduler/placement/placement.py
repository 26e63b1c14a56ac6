"""The per-session `Placement` shared by the numa-aware and deviceshare plugins: it plans every (task, node) pair —
hints, the kubelet-exact merge, concrete CPUs, memory and devices — and holds the session's NUMA reservations.

Sits between the snapshot (Volcano `Numatopology` objects) and the bind; plugins reach it with `placement(ssn)`
(per-session `ssn.state`); what it derives from API objects is cached by the session's owner (`caches.derived`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from lahar.scheduler.devices import requests as device_requests
from lahar.scheduler.framework.hooks import NodeFilter, passing
from lahar.scheduler.framework.snapshot import Task
from lahar.scheduler.placement.caches import derived
from lahar.scheduler.placement.numatopology import (
    NUMA_POLICY_ANNOTATION,
    NodeTopology,
    effective_policy,
    held_cpus,
    held_memory,
    memory_reason,
    node_topology,
    normalize_reverse,
    numa_reason,
    quantity_text,
)
from lahar.scheduler.placement.plans import (
    ClassTable,
    DeviceSide,
    Plan,
    Rejection,
    node_fingerprint,
    placed_pods,
    pod_shape,
    task_signature,
)
from lahar.scheduler.topology import (
    NONE,
    POLICIES,
    PolicyOptionError,
    TopologyHint,
    hints,
    merge,
)
from lahar.scheduler.topology.cpus import container_cpu_requests, cpuset_text, init_cpu_requests, take_cpus
from lahar.scheduler.topology.memory import (
    container_memory_requests,
    numa_machine,
    short_memory,
    subtract_held,
    take_memory,
)

if TYPE_CHECKING:
    from lahar.scheduler.framework.nodes import NodeArrays
    from lahar.scheduler.framework.session import Session

def _task_policy(task: Task) -> str:
    """The task's own `volcano.sh/numa-topology-policy` ("" when unset or none)."""
    ann = (task.pod.get("metadata") or {}).get("annotations") or {}
    policy = ann.get(NUMA_POLICY_ANNOTATION) or ""
    return "" if policy == NONE else policy


def placement(ssn: Session) -> Placement:
    """The session's placement (`ssn.state`: created on first use by whichever plugin opens first, dropped with
    the session)."""
    return ssn.state(Placement, lambda: Placement(ssn))


class Placement:
    """Plans (task, node) pairs and keeps the session's NUMA reservations: a task placed earlier in the session
    holds its CPUs (and devices) until the statement that placed it is discarded."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.derived = derived(ssn)
        self.cpu_side = False  # numa-aware enabled: CPUs are planned and the task policy is honoured
        self.devices: DeviceSide | None = None
        nodes = ssn.nodes
        self._numatopos = ssn.snapshot.extras.get("numatopologies", {})
        # no node of the session publishes a Numatopology: a task without a policy of its own is admitted with no
        # CPUs on every node, so it needs no per-node planning (see `relevant`)
        self.any_topology = any(n.name in self._numatopos for n in nodes)
        devices = ssn.snapshot.extras.get("devices", {})
        # per-node state is built lazily: only nodes a plan is made for (class representatives) are parsed
        self._topologies: dict[int, NodeTopology | None] = {}
        self._free: dict[int, set[int]] = {}
        self._free_memory: dict[int, dict[int, dict[str, int]]] = {}
        # node equivalence classes: nodes with the same fingerprint (inventory and pods, names and UUIDs aside)
        # and the same tasks reserved this session get the same plan, so one node per class is planned
        self.shape = [node_fingerprint(n, self._numatopos.get(n.name), devices.get(n.name), self.derived)
                      for n in nodes]
        # what this session reserved on each node, as node-agnostic keys (CPU ids, GPU indices, VF bus ids, ...):
        # two nodes of one shape holding the same reservations are in the same state
        self.held: list[dict[Any, int]] = [{} for _ in nodes]
        self.held_key: list[frozenset[Any]] = [frozenset()] * len(nodes)
        self._class_ids: dict[Any, int] = {}
        self.class_of = np.array([self._class_id(i) for i in range(len(nodes))], dtype=np.int64)
        self.cache: dict[tuple[Any, str], Plan | Rejection] = {}
        self.signatures: dict[str, str] = {}
        self.reserved: dict[str, tuple[int, Plan]] = {}
        self.reserved_on: dict[int, dict[str, Plan]] = {}  # the same, per node
        self.placing: str | None = None  # the task whose placement is being reserved (on_allocate)
        self.closed = False
        self.version = 0  # bumped whenever a node's reservations (hence its class) change
        self._tables: dict[Any, ClassTable] = {}  # per task signature and request: every class's answer
        self._info: dict[str, tuple[bool, Any, Any]] = {}
        # per pod shape (`plans.pod_shape`: what the device request and the signature read of a pod): the tasks of
        # a gang share one, so the device request is parsed and the signature hashed once per shape
        self._by_shape: dict[Any, tuple[tuple[bool, Any], str | None]] = {}
        self._grouped: dict[tuple[Any, str], Any] = {}  # (pod shape, PodGroup name) → its device request
        self.class_changes: list[int] = []  # node of every class change, in order (like NodeArrays.changes)
        self._memo: tuple[Any, NodeFilter] | None = None  # the last predicate (both plugins ask it in turn)
        self._cand_memo: tuple[Any, ...] | None = None

    def _class_id(self, node: int) -> int:
        token = (self.shape[node], self.held_key[node])
        cid = self._class_ids.get(token)
        if cid is None:
            cid = self._class_ids[token] = len(self._class_ids)
        return cid

    def _plan_key(self, plan: Plan) -> Any:
        dev = self.devices.device_key(plan.devices) if plan.devices is not None and self.devices is not None else None
        return (tuple(sorted((c, tuple(v)) for c, v in plan.cpus.items())), dev, plan.memory_key())

    def _hold(self, node: int, key: Any, delta: int) -> None:
        held = self.held[node]
        n = held.get(key, 0) + delta
        if n > 0:
            held[key] = n
        else:
            held.pop(key, None)
        self.held_key[node] = frozenset(held.items())
        self.class_of[node] = self._class_id(node)
        self.class_changes.append(node)
        self.version += 1

    def topology(self, node: int) -> NodeTopology | None:
        if node not in self._topologies:
            n = self.ssn.nodes[node]
            obj = self._numatopos.get(n.name)
            topo = None
            if obj is not None:
                try:
                    topo = self.derived.get("topology", n.name, (obj, n.node), lambda: node_topology(obj, n.node))
                except (ValueError, TypeError):
                    topo = None
            self._topologies[node] = topo
        return self._topologies[node]

    def free_cpus(self, node: int) -> set[int]:
        """The node's free CPUs: the Numatopology's allocatable pool minus what running pods hold (their
        `lahar.sh/numa-allocation` or `volcano.sh/topology-decision` annotations) minus this session's picks."""
        free = self._free.get(node)
        if free is None:
            topo = self.topology(node)
            free = set(topo.allocatable) if topo else set()
            if topo is not None:
                for t in placed_pods(self.ssn.nodes[node]):
                    ann = (t.pod.get("metadata") or {}).get("annotations") or {}
                    free -= held_cpus(ann, topo, free)
                for plan in self.reserved_on.get(node, {}).values():
                    for cpus in plan.cpus.values():
                        free.difference_update(cpus)
            self._free[node] = free
        return free

    def free_memory(self, node: int) -> dict[int, dict[str, int]] | None:
        """The node's free memory and hugepages bytes per NUMA node: the Numatopology's `lahar.sh/numa-memory`
        allocatable minus what running pods hold (their `volcano.sh/topology-decision`) minus this session's
        reservations. None when the node publishes no (valid) per-NUMA memory: memory gives no preference."""
        topo = self.topology(node)
        if topo is None or topo.memory is None:
            return None
        free = self._free_memory.get(node)
        if free is None:
            free = {n: dict(topo.memory.get(n, {})) for n in topo.numa_nodes}
            for t in placed_pods(self.ssn.nodes[node]):
                ann = (t.pod.get("metadata") or {}).get("annotations") or {}
                subtract_held(free, held_memory(ann), -1)
            for plan in self.reserved_on.get(node, {}).values():
                subtract_held(free, plan.memory, -1)
            self._free_memory[node] = free
        return free

    # --- planning ------------------------------------------------------------------------------------------------

    def relevant(self, task: Task) -> tuple[bool, Any]:
        """(does this task need per-node planning at all, its device request)."""
        shape = self._shape(task)
        hit = self._by_shape.get(shape) if shape is not None else None
        if hit is not None:
            relevant, request = hit[0]
            if isinstance(request, device_requests.DeviceRequest):  # its vGPU requests name the pod's PodGroup
                group = ((task.pod.get("metadata") or {}).get("annotations") or {}).get(
                    device_requests.GROUP_NAME_ANNOTATION, "")
                if not isinstance(group, str):
                    return relevant, device_requests.with_group(request, task.pod)
                grouped = self._grouped.get((shape, group))
                if grouped is None:  # once per shape and PodGroup: the gang's tasks share it
                    grouped = self._grouped[(shape, group)] = device_requests.with_group(request, task.pod)
                request = grouped
            return relevant, request
        got = self._relevant(task)
        if shape is not None:
            self._by_shape[shape] = (got, None)
        return got

    def _shape(self, task: Task) -> Any:
        """`pod_shape` of the task's pod, kept across sessions by the pod's resourceVersion (a pending pod's shape
        is asked in every session it waits through)."""
        return self.derived.get("shape", task.uid, (task.pod,), lambda: pod_shape(task.pod))

    def _relevant(self, task: Task) -> tuple[bool, Any]:
        request = self.devices.device_request(task) if self.devices is not None else None
        if request is not None:
            return True, request
        if not self.cpu_side:
            return False, None
        if not self.any_topology and not _task_policy(task):
            return False, None  # every node's plan would be "admitted, no CPUs": the same as no planning
        return True, None

    def signature(self, task: Task) -> str:
        sig = self.signatures.get(task.uid)
        if sig is None:
            shape = self._shape(task)
            hit = self._by_shape.get(shape) if shape is not None else None
            sig = hit[1] if hit is not None else None
            if sig is None:
                sig = self.derived.get("signature", task.uid, (task.pod,), lambda: task_signature(task))
                if hit is not None:
                    self._by_shape[shape] = (hit[0], sig)
            self.signatures[task.uid] = sig
        return sig

    def evaluate(self, task: Task, node: int, request: Any = None) -> Plan | Rejection:
        """The plan for `task` on `node` as decided for its class (any node of the class gives the same answer;
        the concrete devices of `node` itself come from `plan_on`)."""
        key = ((self.shape[node], self.held_key[node]), self.signature(task))
        hit = self.cache.get(key)
        if hit is None:
            hit = self.cache[key] = self._plan(task, node, request)
        return hit

    def plan_on(self, task: Task, node: int, request: Any = None) -> Plan | Rejection:
        """The plan for `task` on this very node (its own CPU ids, GPU UUIDs, VF bus ids)."""
        key = ((self.shape[node], self.held_key[node]), self.signature(task))
        if key in self.cache and isinstance(self.shape[node], int):
            return self.cache[key]  # same shape and state: the same CPUs and device indices (UUIDs mapped at close)
        return self._plan(task, node, request)

    def _plan(self, task: Task, node: int, request: Any) -> Plan | Rejection:
        topo = self.topology(node)
        pod = task.pod
        ann = (pod.get("metadata") or {}).get("annotations") or {}
        task_policy = ann.get(NUMA_POLICY_ANNOTATION, "") if self.cpu_side else ""
        if task_policy and task_policy not in POLICIES:
            return Rejection(f"unknown numa-topology-policy {task_policy!r}", True)
        cpu_requests = container_cpu_requests(pod) if self.cpu_side else []
        inits = [i for i in init_cpu_requests(pod) if i[1]] if self.cpu_side else []
        guaranteed = any(n for _, n in cpu_requests) or bool(inits)
        if task_policy not in ("", NONE):
            if topo is None:
                return Rejection("numa info is empty", True)
            if not topo.static:
                return Rejection("cpu manager policy isn't static", True)
            if not topo.allocatable:
                return Rejection("cpu allocatable map is empty", True)
        node_policy = topo.policy if topo is not None else NONE
        policy = effective_policy(node_policy, task_policy)
        plan = Plan(policy)
        if policy == NONE or topo is None:
            if request is not None and self.devices is not None:
                chosen = self.devices.device_allocate(task, node, request, None)
                if isinstance(chosen, str):
                    return _reject(plan, chosen)
                plan.devices = chosen
                plan.per_numa = self.devices.device_numa(node, chosen)
                plan.numa = frozenset(n for n, r in plan.per_numa.items() if any(r.values()))
            return plan

        numa_nodes = list(topo.numa_nodes)
        device_providers: dict[str, list[TopologyHint] | None] | None = None
        if request is not None and self.devices is not None:
            got = self.devices.device_providers(task, node, request)
            if isinstance(got, str):
                return _reject(plan, got)
            device_providers = got
        capacity = topo.capacity()
        free = set(self.free_cpus(node)) if topo.static else set()
        # the static memory manager's view: Guaranteed pods on nodes publishing memory per NUMA node
        free_mem = self.free_memory(node) if self.cpu_side else None
        mem_requests = container_memory_requests(pod, topo.scope) if free_mem is not None else []
        mem_scratch = {n: dict(r) for n, r in free_mem.items()} if free_mem is not None and mem_requests else {}
        containers = cpu_requests or [((c.get("name") or ""), 0) for c in (pod.get("spec") or {}).get("containers")
                                      or ()] or [("", 0)]
        # which container holds the devices: the first one asking for any of them (pod-level requests otherwise)
        dev_container = 0
        if device_providers is not None:
            names = set(device_providers)
            for idx, c in enumerate((pod.get("spec") or {}).get("containers") or ()):
                wanted = {**(c.get("resources") or {}).get("limits", {}),
                          **(c.get("resources") or {}).get("requests", {})}
                if names & set(wanted):
                    dev_container = idx
                    break
        try:
            init_hints: dict[str, TopologyHint] = {}
            if topo.scope == "pod":
                # the CPU manager's podGuaranteedCPUs: max(largest init + earlier sidecars, apps + sidecars)
                total = hints.pod_request([(n, side) for _, n, side in inits], [n for _, n in containers])
                providers: list[Any] = []
                cpu_p = hints.cpu_provider(total, capacity, topo.per_numa(free)) if guaranteed and topo.static \
                    else None
                providers.append(cpu_p)
                providers.append(device_providers)
                mem_req = mem_requests[0] if mem_requests else {}
                machine = numa_machine(topo, mem_scratch) if mem_req else {}
                mem_p = hints.memory_hints(mem_req, machine) if mem_req else None
                if mem_p is not None:
                    providers.append(mem_p)
                hint, admit = merge(policy, providers, numa_nodes, topo.options, topo.distances)
                plan.merges.append(_explain("(pod)", cpu_p, device_providers, hint, admit, mem_p))
                if not admit:
                    return _reject(plan, numa_reason("pod", policy, short_memory(policy, mem_req, machine, topo)))
                if mem_req:
                    got_mem = take_memory(mem_req, machine, hint.affinity, mem_p)
                    if got_mem is None:
                        return _reject(plan, memory_reason("pod", short_memory(None, mem_req, machine, topo)))
                    subtract_held(plan.memory, got_mem, +1, grow=True)
                hints_by_container = [hint] * len(containers)
                init_hints = {name: hint for name, _, _ in inits}
            else:
                hints_by_container = []
                picked: dict[str, list[int]] = {}
                scratch = set(free)
                reusable: set[int] = set()  # CPUs of init containers that have exited (the CPU manager's reuse)
                for name, n, sidecar in inits if topo.static else ():
                    usable = scratch | reusable
                    cpu_p = hints.cpu_provider(n, capacity, topo.per_numa(usable))
                    hint, admit = merge(policy, [cpu_p], numa_nodes, topo.options, topo.distances)
                    plan.merges.append(_explain(name, cpu_p, None, hint, admit))
                    if not admit:
                        return _reject(plan, numa_reason(name, policy))
                    got_cpus = take_cpus(usable, n, topo, hint.affinity)
                    if got_cpus is None:
                        return _reject(plan, f"container {name} cannot be assigned by numa: not enough free CPUs")
                    init_hints[name] = hint
                    picked[name] = got_cpus
                    scratch -= set(got_cpus)
                    reusable = reusable - set(got_cpus) if sidecar else reusable | set(got_cpus)
                for idx, (name, n) in enumerate(containers):
                    usable = scratch | reusable
                    cpu_p = hints.cpu_provider(n, capacity, topo.per_numa(usable)) if n and topo.static else None
                    dev_p = device_providers if idx == dev_container else None
                    mem_req = mem_requests[idx] if idx < len(mem_requests) else {}
                    machine = numa_machine(topo, mem_scratch) if mem_req else {}
                    mem_p = hints.memory_hints(mem_req, machine) if mem_req else None
                    hint, admit = merge(policy, [cpu_p, dev_p] if mem_p is None else [cpu_p, dev_p, mem_p],
                                        numa_nodes, topo.options, topo.distances)
                    plan.merges.append(_explain(name, cpu_p, dev_p, hint, admit, mem_p))
                    if not admit:
                        return _reject(plan, numa_reason(name, policy, short_memory(policy, mem_req, machine, topo)))
                    if mem_req:
                        got_mem = take_memory(mem_req, machine, hint.affinity, mem_p)
                        if got_mem is None:
                            return _reject(plan, memory_reason(name, short_memory(None, mem_req, machine, topo)))
                        subtract_held(mem_scratch, got_mem, -1)
                        subtract_held(plan.memory, got_mem, +1, grow=True)
                    hints_by_container.append(hint)
                    if n:
                        got_cpus = take_cpus(usable, n, topo, hint.affinity)
                        if got_cpus is None:
                            return _reject(plan, f"container {name} cannot be assigned by numa: not enough free CPUs")
                        scratch -= set(got_cpus)
                        reusable -= set(got_cpus)
                        picked[name] = got_cpus
        except PolicyOptionError as e:
            return _reject(plan, str(e), True)

        # concrete choices: init containers first (their CPUs reusable by later containers unless sidecars)
        pool = set(free)
        reuse: set[int] = set()
        per_numa: dict[int, dict[str, int]] = {}
        order = [(name, n, "sidecar" if side else "init", init_hints.get(name)) for name, n, side in inits]
        order += [(name, n, "app", hint) for (name, n), hint in zip(containers, hints_by_container, strict=True)]
        for name, n, kind, hint in order:
            if not n or hint is None:
                continue
            got_cpus = picked.get(name) if topo.scope != "pod" else None
            if got_cpus is None:
                got_cpus = take_cpus(pool | reuse, n, topo, hint.affinity)
            if got_cpus is None:
                return _reject(plan, f"container {name} cannot be assigned by numa: not enough free CPUs")
            pool -= set(got_cpus)
            reuse = reuse | set(got_cpus) if kind == "init" else reuse - set(got_cpus)
            plan.cpus[name] = got_cpus
        # what the pod holds: every container's CPUs, a reused one counted once
        held = {c for cpus in plan.cpus.values() for c in cpus}
        for numa_id, count in topo.per_numa(held).items():
            if count:
                per_numa.setdefault(numa_id, {})["cpu"] = per_numa.get(numa_id, {}).get("cpu", 0) + count
        if request is not None and self.devices is not None:
            chosen = self.devices.device_allocate(task, node, request, hints_by_container[dev_container])
            if isinstance(chosen, str):
                return _reject(plan, chosen)
            plan.devices = chosen
            for numa_id, res in self.devices.device_numa(node, chosen).items():
                slot = per_numa.setdefault(numa_id, {})
                for r, v in res.items():
                    slot[r] = slot.get(r, 0) + v
        subtract_held(per_numa, plan.memory, +1, grow=True)
        plan.per_numa = per_numa
        plan.numa = frozenset(n for n, r in per_numa.items() if any(r.values()))
        return plan

    # --- the session hooks both plugins forward --------------------------------------------------------------------

    def task_info(self, task: Task) -> tuple[bool, Any, Any]:
        """(does the task need per-node planning, its device request, the key of its per-class answers) — asked
        by every hook of both plugins, so worked out once per task and session."""
        info = self._info.get(task.uid)
        if info is None:
            relevant, request = self.relevant(task)
            key = (self.signature(task), task.init_resreq.tobytes()) if relevant else None
            info = self._info[task.uid] = (relevant, request, key)
        return info

    def _table(self, key: Any) -> ClassTable:
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = ClassTable()
        table.reserve(len(self._class_ids))
        return table

    def _evaluate_classes(self, table: ClassTable, task: Task, nodes: np.ndarray, request: Any) -> None:
        """Evaluate one representative of each class among `nodes` (indices) the table has no answer for yet."""
        cls = self.class_of
        sub = nodes[~table.done[cls[nodes]]]
        if not len(sub):
            return
        first, _ = _group(cls[sub])
        for k in first:
            node = int(sub[k])
            table.record(int(cls[node]), self.evaluate(task, node, request))

    def _rejected(self, table: ClassTable, task: Task, request: Any, arrays: NodeArrays) -> np.ndarray:
        """Per node: the request fits and the node's class refuses the task. Kept up to date incrementally: only
        the nodes whose resources or class changed since the table was last asked are looked at again (a
        placement changes one node; a later task of the gang evaluates at most that node's new class)."""
        fit = self.ssn.fit_future_idle.get(task.init_resreq.tobytes(), task.init_resreq)
        a, c = arrays.version, len(self.class_changes)
        n = len(arrays)
        cls = self.class_of
        bad = table.node_bad
        if (bad is None or len(bad) != n or table.arrays_seen > a
                or (a - table.arrays_seen) + (c - table.class_seen) > n // 8 + 1):
            self._evaluate_classes(table, task, np.flatnonzero(fit), request)
            table.node_bad = bad = fit & table.bad[cls]
        else:
            rows = set(arrays.changes[table.arrays_seen:a])
            rows.update(self.class_changes[table.class_seen:c])
            for row in rows:  # a handful: element-wise is cheaper than numpy calls here
                if not fit[row]:
                    bad[row] = False
                    continue
                cid = int(cls[row])
                if not table.done[cid]:
                    table.record(cid, self.evaluate(task, row, request))
                bad[row] = table.bad[cid]
        table.arrays_seen, table.class_seen = a, c
        return bad

    def predicate(self, task: Task, arrays: NodeArrays) -> NodeFilter:
        """Nodes whose (task-stricter) Topology Manager policy would refuse the task, or whose devices cannot take
        it; nodes the request does not fit are left to the resource check."""
        n = len(arrays)
        relevant, request, key = self.task_info(task)
        if not relevant:
            return passing(n)  # read-only: shared by every task that needs no planning
        memo_key = (key, self.version, arrays.version, n)
        if self._memo is not None and self._memo[0] == memo_key:
            return self._memo[1]  # numa-aware and deviceshare ask the same question in turn
        table = self._table(key)
        bad = self._rejected(table, task, request, arrays)
        if not bad.any():
            got = passing(n)
        else:
            cls = self.class_of
            reasons = np.full(n, None, dtype=object)
            reasons[bad] = table.reasons[cls[bad]]
            got = NodeFilter(~bad, reasons, bad & table.unresolvable[cls])
        self._memo = (memo_key, got)
        return got

    def _candidate_classes(self, task: Task, candidates: np.ndarray) -> tuple[ClassTable, np.ndarray]:
        """The task's table and each candidate's class, every class evaluated (numa-aware's and deviceshare's
        node orders ask in turn for the same candidates)."""
        _, request, key = self.task_info(task)
        memo = self._cand_memo
        if memo is not None and memo[0] is candidates and memo[1] == (key, self.version):
            return memo[2], memo[3]
        table = self._table(key)
        cls = self.class_of[np.asarray(candidates, dtype=np.int64)]
        if not table.done[cls].all():  # usually the predicate has just evaluated every candidate's class
            self._evaluate_classes(table, task, np.asarray(candidates, dtype=np.int64), request)
        self._cand_memo = (candidates, (key, self.version), table, cls)  # holds `candidates`: its identity is safe
        return table, cls

    def scores(self, task: Task, candidates: np.ndarray) -> np.ndarray:
        """Volcano's batch node order: NUMA nodes spanned by the plan, normalised so fewer scores higher."""
        if not self.task_info(task)[0] or not len(candidates):
            return np.zeros(len(candidates))
        table, cls = self._candidate_classes(task, candidates)
        if isinstance(table.uniform, tuple):
            return np.zeros(len(candidates))  # one NUMA count everywhere: normalised, every node scores 0
        counts = table.numa_count[cls]
        if not counts.any():
            return np.zeros(len(candidates))
        return normalize_reverse(counts)

    def device_scores(self, task: Task, candidates: np.ndarray) -> np.ndarray:
        if not len(candidates) or not self.task_info(task)[0]:
            return np.zeros(len(candidates))
        table, cls = self._candidate_classes(task, candidates)
        if isinstance(table.uniform, tuple):
            return np.full(len(candidates), table.uniform[1])
        return table.device_score[cls]

    def on_allocate(self, task: Task) -> None:
        if task.uid in self.reserved or task.node < 0:
            return
        relevant, request, _ = self.task_info(task)
        if not relevant:
            return
        node = task.node
        self.placing = task.uid  # placed already: the node's pods must not count it before it is reserved
        try:
            got = self.plan_on(task, node, request)
        finally:
            self.placing = None
        if not isinstance(got, Plan):
            return  # placed without passing our predicate (switch off): nothing to reserve
        free = self._free.get(node)
        if free is not None:  # a node's free CPUs are worked out when first planned on, reservations included
            for cpus in got.cpus.values():
                free.difference_update(cpus)
        if got.memory and node in self._free_memory:
            subtract_held(self._free_memory[node], got.memory, -1)
        self.reserved[task.uid] = (node, got)
        self.reserved_on.setdefault(node, {})[task.uid] = got
        if got.devices is not None and self.devices is not None:
            self.devices.device_reserve(node, got.devices)
        self._hold(node, self._plan_key(got), +1)

    def on_deallocate(self, task: Task) -> None:
        held = self.reserved.pop(task.uid, None)
        if held is None:
            return
        node, plan = held
        self.reserved_on.get(node, {}).pop(task.uid, None)
        free = self._free.get(node)
        if free is not None:
            for cpus in plan.cpus.values():
                free.update(cpus)
        if plan.memory and node in self._free_memory:
            subtract_held(self._free_memory[node], plan.memory, +1)
        if plan.devices is not None and self.devices is not None:
            self.devices.device_release(node, plan.devices)
        self._hold(node, self._plan_key(plan), -1)

    def close(self) -> None:
        """Write the decisions of every task bound this session as annotations carried by its bind."""
        if self.closed:
            return
        self.closed = True
        d = self.ssn.decisions
        tasks = self.ssn.snapshot.tasks
        for b in d.binds:
            held = self.reserved.get(b.uid)
            task = tasks.get(b.uid)
            if held is None or task is None:
                continue
            node, plan = held
            out = d.annotations.setdefault(b.uid, {})
            if plan.policy != NONE and plan.per_numa:
                out.update(plan.rendered())
            if plan.devices is not None and self.devices is not None:
                out.update(self.devices.device_annotations(task, node, plan.devices))

    def explain(self, task: Task) -> list[dict[str, Any]]:
        """Per node: the merges (each provider's hints, the merged hint, admit) and why the node was rejected."""
        relevant, request = self.relevant(task)
        out = []
        for i, n in enumerate(self.ssn.nodes):
            entry: dict[str, Any] = {"node": n.name}
            if not relevant:
                entry.update(admit=True, reason="", merges=[])
            else:
                got = self.plan_on(task, i, request)
                if isinstance(got, Rejection):
                    entry.update(admit=False, reason=got.reason, merges=list(got.merges))
                else:
                    entry.update(admit=True, reason="", policy=got.policy, merges=got.merges,
                                 numa=sorted(got.numa), cpus={c: cpuset_text(v) for c, v in got.cpus.items()})
                    if got.memory:
                        entry["memory"] = {str(n): {r: quantity_text(r, v) for r, v in sorted(res.items())}
                                           for n, res in sorted(got.memory.items())}
            out.append(entry)
        return out


def _group(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(one position per distinct value, the group of each position) in O(n) for small non-negative ids — what
    `np.unique(return_index=True, return_inverse=True)` gives, without the sort (any member may represent)."""
    if not len(values):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if (values == values[0]).all():  # the common case: every node in one class
        return np.zeros(1, dtype=np.int64), np.zeros(len(values), dtype=np.int64)
    size = int(values.max()) + 1
    present = np.zeros(size, dtype=bool)
    present[values] = True
    where = np.empty(size, dtype=np.int64)
    where[values] = np.arange(len(values))
    classes = np.flatnonzero(present)
    remap = np.cumsum(present) - 1
    return where[classes], remap[values]


def _reject(plan: Plan, reason: str, unresolvable: bool = False) -> Rejection:
    return Rejection(reason, unresolvable, tuple(plan.merges))


def _hint_json(h: TopologyHint) -> dict[str, Any]:
    return {"affinity": None if h.affinity is None else sorted(h.affinity), "preferred": h.preferred}


def _provider_json(p: Any) -> Any:
    if p is None:
        return None
    return {r: (None if hs is None else [_hint_json(h) for h in hs]) for r, hs in p.items()}


def _explain(container: str, cpu: Any, devices: Any, hint: TopologyHint, admit: bool,
             memory: Any = None) -> dict[str, Any]:
    providers: dict[str, Any] = {}
    if cpu is not None:
        providers.update(_provider_json(cpu))
    if devices is not None:
        providers.update(_provider_json(devices))
    if memory is not None:
        providers.update(_provider_json(memory))
    return {"container": container, "providers": providers, "hint": _hint_json(hint), "admit": admit}
