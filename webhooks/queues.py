"""/queues/mutate and /queues/validate: Volcano's Queue defaults, hierarchy, resource and deletion rules (spec §4.5–§4.6).

Called by the route table (`webhooks.routes`) with a parsed review, the cluster look-ups and the admission config.

Faithful to `pkg/webhooks/admission/queues/{mutate,validate}` including message texts, the order checks run in and
the Go renderings they produce: field errors `requestBody.<path>: Invalid value: "<v>": <msg>` aggregated as
`[e1, e2]` when there are several; hierarchy sums printed as Volcano's `api.Resource` (`cpu 9000.00, memory
19327352832.00`, milli-CPU and bytes, extended resources in milli-units). Go iterates maps in random order; here
resource names are visited sorted, so a queue with several bad resources reports the same one every time.
Weight ≥ 1 is the CRD schema's job (Volcano removed its webhook check), as is `parent` being a DNS subdomain.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lahar.kube import quantity
from lahar.kube.models import labels
from lahar.policies.admission import AdmissionConfig
from lahar.webhooks.lookups import Lookups
from lahar.webhooks.review import Request, Verdict, escape

__all__ = ["mutate", "validate"]

ROOT = "root"
DEFAULT = "default"
PODS = "pods"
VALID_STATES = ("Open", "Closed")


# --- rendering Go's errors -----------------------------------------------------------------------------------------


def _go_value(value: Any) -> str:
    """How k8s `field.Invalid` prints a bad value: strings quoted (%q), numbers and bools bare."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(str(value), ensure_ascii=False)


def _invalid(path: str, value: Any, msg: str) -> str:
    return f"{path}: Invalid value: {_go_value(value)}: {msg}"


def _aggregate(errs: Iterable[str]) -> str:
    """`field.ErrorList.ToAggregate().Error()`: duplicates dropped, one error bare, several in `[a, b]`."""
    seen: list[str] = []
    for e in errs:
        if e not in seen:
            seen.append(e)
    return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"


def _not_found(name: str) -> str:
    return f'queue.scheduling.volcano.sh "{name}" not found'


# --- Volcano's api.Resource, as far as queue validation uses it ------------------------------------------------------


def _is_scalar(name: str) -> bool:
    """k8s `IsScalarResourceName`: extended, hugepages-, kubernetes.io/-prefixed native or attachable-volumes-."""
    if name.startswith(("hugepages-", "attachable-volumes-")):
        return True
    if "kubernetes.io/" in name:
        return True
    return "/" in name and not name.startswith("requests.")


@dataclass
class _Res:
    """Volcano `api.Resource`: milli-CPU, memory bytes, scalar resources (milli-units; pods as a count)."""

    cpu: float = 0.0
    memory: float = 0.0
    scalars: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, rl: Mapping[str, Any] | None) -> _Res:
        r = cls()
        for name, raw in (rl or {}).items():
            try:
                q = quantity.parse(raw)
            except (quantity.QuantityError, TypeError, ValueError):
                continue
            if name == "cpu":
                r.cpu += q.milli_value()
            elif name == "memory":
                r.memory += q.value()
            elif name == PODS:
                r.scalars[name] = r.scalars.get(name, 0.0) + q.value()
            elif name == "ephemeral-storage" or (not name.startswith("count/") and _is_scalar(name)):
                r.scalars[name] = r.scalars.get(name, 0.0) + q.milli_value()
        return r

    def add(self, other: _Res) -> None:
        self.cpu += other.cpu
        self.memory += other.memory
        for name, v in other.scalars.items():
            self.scalars[name] = self.scalars.get(name, 0.0) + v

    def get(self, name: str) -> float:
        if name == "cpu":
            return self.cpu
        if name == "memory":
            return self.memory
        return self.scalars.get(name, 0.0)

    def names(self) -> list[str]:
        """`ResourceNames()`: cpu, memory, then scalars (sorted here), each only when ≥ 0.1."""
        out = [n for n, v in (("cpu", self.cpu), ("memory", self.memory)) if v >= 0.1]
        return out + sorted(n for n, v in self.scalars.items() if v >= 0.1)

    def less_partly(self, other: _Res) -> bool:
        """`LessPartly(other, Zero)`: some dimension of self is below other's (missing counts as 0)."""
        if self.cpu < other.cpu or self.memory < other.memory:
            return True
        return any(self.scalars.get(n, 0.0) < other.scalars.get(n, 0.0) for n in {*self.scalars, *other.scalars})

    def __str__(self) -> str:
        out = f"cpu {self.cpu:0.2f}, memory {self.memory:0.2f}"
        for name in sorted(self.scalars):
            out += f", {name} {self.scalars[name]:0.2f}"
        return out


def _format(name: str, value: float) -> str:
    """Volcano `formatResourceWithType`: cpu as a milli quantity, memory as a BinarySI quantity, else %.2f."""
    if name == "cpu":
        return str(quantity.Quantity.from_milli(int(value)))
    if name == "memory":
        return str(quantity.Quantity(int(value), quantity.Format.BINARY_SI))
    return f"{value:.2f}"


# --- queue accessors -------------------------------------------------------------------------------------------------


def _spec(q: Mapping[str, Any] | None) -> dict:
    return dict((q or {}).get("spec") or {})


def _name(q: Mapping[str, Any] | None) -> str:
    return str(((q or {}).get("metadata") or {}).get("name") or "")


def _parent(q: Mapping[str, Any] | None) -> str:
    return str(_spec(q).get("parent") or "")


def _capability(q: Mapping[str, Any] | None) -> dict:
    return dict(_spec(q).get("capability") or {})


def _deserved(q: Mapping[str, Any] | None) -> dict:
    return dict(_spec(q).get("deserved") or {})


def _guarantee(q: Mapping[str, Any] | None) -> dict:
    return dict((_spec(q).get("guarantee") or {}).get("resource") or {})


def _annotations(q: Mapping[str, Any] | None) -> dict:
    return dict(((q or {}).get("metadata") or {}).get("annotations") or {})


def _children(lookups: Lookups, parent: str) -> list[dict]:
    return sorted((q for q in lookups.queues() if _parent(q) == parent), key=_name)


def _same_resources(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """`equality.Semantic.DeepEqual` on ResourceLists: same names, equal quantities."""
    if a.keys() != b.keys():
        return False
    try:
        return all(quantity.parse(a[k]) == quantity.parse(b[k]) for k in a)
    except (quantity.QuantityError, TypeError, ValueError):
        return a == b


# --- /queues/mutate ------------------------------------------------------------------------------------------------


def mutate(req: Request, lookups: Lookups, config: AdmissionConfig) -> Verdict:
    """CREATE: `root/` + `1/` in front of an hDRF hierarchy not starting at root; reclaimable true; weight 1."""
    if req.operation != "CREATE":
        return Verdict.deny(f"invalid operation `{req.operation}`, expect operation to be `CREATE`")
    queue = req.object or {}
    ops: list[dict] = []
    ann = _annotations(queue)
    hierarchy = ann.get(labels.HIERARCHY_ANNOTATION, "")
    weights = ann.get(labels.HIERARCHY_WEIGHTS_ANNOTATION, "")
    if hierarchy and weights and not hierarchy.startswith(ROOT):
        ops.append({"op": "add", "path": f"/metadata/annotations/{escape(labels.HIERARCHY_ANNOTATION)}",
                    "value": f"root/{hierarchy}"})
        ops.append({"op": "add", "path": f"/metadata/annotations/{escape(labels.HIERARCHY_WEIGHTS_ANNOTATION)}",
                    "value": f"1/{weights}"})
    spec = queue.get("spec")
    if not isinstance(spec, dict):
        ops.append({"op": "add", "path": "/spec", "value": {}})
        spec = {}
    if spec.get("reclaimable") is None:
        ops.append({"op": "add", "path": "/spec/reclaimable", "value": True})
    if not spec.get("weight"):
        ops.append({"op": "add", "path": "/spec/weight", "value": 1})
    return Verdict.allow(patch=ops)


# --- /queues/validate ----------------------------------------------------------------------------------------------


def _quantity_errors(spec: Mapping[str, Any]) -> list[str]:
    """`validateResourceQuantityOfQueue`: non-negative (integer where k8s wants it), guarantee ≤ deserved ≤ capability."""
    errs: list[str] = []
    base = "requestBody.spec"
    capability = dict(spec.get("capability") or {})
    deserved = dict(spec.get("deserved") or {})
    guarantee = dict((spec.get("guarantee") or {}).get("resource") or {})

    def parsed(raw: Any) -> quantity.Quantity | None:
        try:
            return quantity.parse(raw)
        except (quantity.QuantityError, TypeError, ValueError):
            return None

    def value_errors(name: str, raw: Any, path: str) -> list[str]:
        q = parsed(raw)
        if q is None:
            return [_invalid(path, raw, quantity.ERR_FORMAT_WRONG)]
        out = []
        if q < 0:
            out.append(_invalid(path, str(q), "must be greater than or equal to 0"))
        if _is_integer_resource(name) and q.milli_value() % 1000:
            out.append(_invalid(path, str(q), "must be an integer"))
        return out

    for name in sorted(capability):
        errs += value_errors(name, capability[name], f"{base}.capability.{name}")
    for name in sorted(deserved):
        errs += value_errors(name, deserved[name], f"{base}.deserved.{name}")
    for name in sorted(guarantee):
        errs += value_errors(name, guarantee[name], f"{base}.guarantee.resource.{name}")
        g = parsed(guarantee[name])
        if g is None:
            continue
        if name not in deserved:
            errs.append(_invalid(f"{base}.deserved.{name}", "<nil>", f"deserved[{name}] must be >= guarantee[{name}]={g}"))
            continue
        d = parsed(deserved[name])
        if d is not None and d < g:
            errs.append(_invalid(f"{base}.deserved.{name}", str(d),
                                 f"deserved[{name}]={d} must be >= guarantee[{name}]={g}"))
    if deserved and capability:
        for name in sorted(deserved):
            if name not in capability:
                continue
            d, c = parsed(deserved[name]), parsed(capability[name])
            if d is not None and c is not None and d > c:
                errs.append(_invalid(f"{base}.deserved.{name}", str(d),
                                     f"deserved[{name}]={d} must be <= capability[{name}]={c}"))
    return errs


_INTEGER_RESOURCES = frozenset({"pods", "services", "replicationcontrollers", "resourcequotas", "secrets",
                                "configmaps", "persistentvolumeclaims", "services.nodeports",
                                "services.loadbalancers"})


def _is_integer_resource(name: str) -> bool:
    """k8s `IsIntegerResourceName`: the standard countable resources and every extended resource."""
    if name in _INTEGER_RESOURCES:
        return True
    native = "/" not in name or "kubernetes.io/" in name
    return not native and not name.startswith("requests.")


def _state_errors(queue: Mapping[str, Any]) -> list[str]:
    state = ((queue.get("status") or {}).get("state")) or ""
    if not state or state in VALID_STATES:
        return []
    return [_invalid("requestBody.spec.state", state, "queue state must be in [Open Closed]")]


def _hierarchy_errors(queue: Mapping[str, Any], lookups: Lookups) -> list[str]:
    path = "requestBody.metadata.annotations"
    ann = _annotations(queue)
    hierarchy = ann.get(labels.HIERARCHY_ANNOTATION, "")
    weights = ann.get(labels.HIERARCHY_WEIGHTS_ANNOTATION, "")
    if not hierarchy and not weights:
        return []
    if len(hierarchy.split("/")) != len(weights.split("/")):
        return [_invalid(path, hierarchy, f"{labels.HIERARCHY_ANNOTATION} must have the same length with "
                                          f"{labels.HIERARCHY_WEIGHTS_ANNOTATION}")]
    for weight in weights.split("/"):
        try:
            value = _go_parse_float(weight)
        except ValueError:
            return [_invalid(path, weights, f'{weight} in the {weights} is invalid number: '
                                            f'strconv.ParseFloat: parsing "{weight}": invalid syntax')]
        if value <= 0:
            return [_invalid(path, weights, f"{weight} in the {weights} must be larger than 0")]
    name = _name(queue)
    for other in sorted(lookups.queues(), key=_name):
        theirs = _annotations(other).get(labels.HIERARCHY_ANNOTATION, "")
        if theirs and _name(other) != name and theirs.startswith(hierarchy + "/"):
            return [_invalid(path, hierarchy, f"{hierarchy} is not allowed to be in the sub path of {theirs} of "
                                              f"queue {_name(other)}")]
    return []


def _go_parse_float(text: str) -> float:
    """strconv.ParseFloat(s, 64) for the forms a weight takes (no underscores, hex or inf/nan words)."""
    if not text or text.strip() != text or "_" in text or text.lower().lstrip("+-") in ("inf", "infinity", "nan"):
        raise ValueError(text)
    return float(text)


def _depth_error(queue: Mapping[str, Any], lookups: Lookups, config: AdmissionConfig) -> str:
    depth, parent = 1, _parent(queue)
    while parent not in ("", ROOT):
        depth += 1
        if depth > config.max_queue_depth:
            return f"queue {_name(queue)} exceeds the maximum allowed depth of {config.max_queue_depth}"
        p = lookups.queue(parent)
        if p is None:
            return f"failed to get parent queue {parent} of queue {_name(queue)}: {_not_found(parent)}"
        parent = _parent(p)
    return ""


def _hierarchical_queue_error(queue: Mapping[str, Any], lookups: Lookups, config: AdmissionConfig) -> str:
    """`validateHierarchicalQueue` (CREATE, or UPDATE changing the parent)."""
    parent, name = _parent(queue), _name(queue)
    if parent in ("", ROOT):
        return ""
    if parent == name:
        return f"queue {name} cannot use itself as parent"
    if err := _depth_error(queue, lookups, config):
        return err
    pq = lookups.queue(parent)
    if pq is None:
        return f"failed to get parent queue of queue {name}: {_not_found(parent)}"
    if not _children(lookups, parent):
        pods = _allocated_pods(pq)
        if pods:
            return f"queue {parent} cannot be the parent queue of queue {name} because it has allocated Pods: {pods}"
    return ""


def _allocated_pods(q: Mapping[str, Any]) -> int:
    raw = ((q.get("status") or {}).get("allocated") or {}).get(PODS)
    if raw is None:
        return 0
    try:
        return quantity.parse(raw).value()
    except (quantity.QuantityError, TypeError, ValueError):
        return 0


def _needs_resource_check(queue: Mapping[str, Any], old: Mapping[str, Any] | None, operation: str) -> bool:
    if _name(queue) == ROOT:
        return False
    if operation == "CREATE":
        return True
    if operation == "UPDATE" and old is not None:
        return _parent(queue) != _parent(old) or _resources_changed(queue, old)
    return False


def _resources_changed(queue: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    return (not _same_resources(_capability(queue), _capability(old))
            or not _same_resources(_deserved(queue), _deserved(old))
            or not _same_resources(_guarantee(queue), _guarantee(old)))


def _nearest_ancestor_capability(queue: Mapping[str, Any], name: str, lookups: Lookups) -> float | None:
    parent, seen = _parent(queue), set()
    while parent not in ("", ROOT) and parent not in seen:
        seen.add(parent)
        pq = lookups.queue(parent)
        if pq is None:
            return None
        cap = _capability(pq)
        if cap:
            v = _Res.of(cap).get(name)
            if v > 0:
                return v
        parent = _parent(pq)
    return None


def _subtree_max_capability(queue: Mapping[str, Any], name: str, lookups: Lookups, seen: set[str]) -> float:
    cap = _capability(queue)
    if cap:
        v = _Res.of(cap).get(name)
        if v > 0:
            return v
    seen = seen | {_name(queue)}
    best = 0.0
    for child in _children(lookups, _name(queue)):
        if _name(child) in seen:
            continue
        best = max(best, _subtree_max_capability(child, name, lookups, seen))
    return best


def _siblings_error(queue: Mapping[str, Any], parent: Mapping[str, Any], siblings: list[dict]) -> str:
    """`validateSiblingsSum`: the siblings' (then this queue's) guarantee and deserved sums within the parent's."""
    total_g, total_d = _Res(), _Res()
    parent_g, parent_d = _Res.of(_guarantee(parent)), _Res.of(_deserved(parent))
    pname = _name(parent)
    others = [s for s in siblings if _name(s) != _name(queue)]
    for q in (*others, queue):
        total_g.add(_Res.of(_guarantee(q)))
        if parent_g.less_partly(total_g):
            return (f"parent queue {pname} validation failed: sum of children's guarantee ({total_g}) exceeds "
                    f"parent's guarantee limit ({parent_g})")
        total_d.add(_Res.of(_deserved(q)))
        if parent_d.less_partly(total_d):
            return (f"parent queue {pname} validation failed: sum of children's deserved ({total_d}) exceeds "
                    f"parent's deserved limit ({parent_d})")
    return ""


def _children_error(queue: Mapping[str, Any], children: list[dict], lookups: Lookups) -> str:
    name = _name(queue)
    cap = _capability(queue)
    if cap:
        own = _Res.of(cap)
        for r in own.names():
            mine = own.get(r)
            child_max = max((_subtree_max_capability(c, r, lookups, {name}) for c in children), default=0.0)
            if mine < child_max:
                return (f"queue {name} capability[{r}]={_format(r, mine)} is smaller than its descendants' max "
                        f"capability={_format(r, child_max)}")
    total_g, total_d = _Res(), _Res()
    own_g, own_d = _Res.of(_guarantee(queue)), _Res.of(_deserved(queue))
    for child in children:
        total_g.add(_Res.of(_guarantee(child)))
        if own_g.less_partly(total_g):
            return (f"queue {name} validation failed: sum of children's guarantee ({total_g}) exceeds parent's "
                    f"guarantee limit ({own_g})")
        total_d.add(_Res.of(_deserved(child)))
        if own_d.less_partly(total_d):
            return (f"queue {name} validation failed: sum of children's deserved ({total_d}) exceeds parent's "
                    f"deserved limit ({own_d})")
    return ""


def _hierarchical_resources_error(queue: Mapping[str, Any], lookups: Lookups) -> str:
    """`validateHierarchicalQueueResources`: against ancestors and siblings, then against the children."""
    name, parent = _name(queue), _parent(queue)
    if parent not in ("", ROOT):
        pq = lookups.queue(parent)
        if pq is None:
            return f"parent queue {parent} not found: {_not_found(parent)}"
        cap = _capability(queue)
        if cap:
            own = _Res.of(cap)
            for r in own.names():
                limit = _nearest_ancestor_capability(queue, r, lookups)
                if limit is not None and own.get(r) > limit:
                    return (f"queue {name} capability[{r}]={_format(r, own.get(r))} exceeds its ancestor's "
                            f"capability={_format(r, limit)}")
        if err := _siblings_error(queue, pq, _children(lookups, parent)):
            return err
    children = [c for c in _children(lookups, name) if _name(c) != name]
    if children:
        return _children_error(queue, children, lookups)
    return ""


def _deleting_error(name: str, lookups: Lookups, config: AdmissionConfig) -> str:
    if name == DEFAULT:
        return "`default` queue can not be deleted"
    if name == ROOT:
        return "`root` queue can not be deleted"
    queue = lookups.queue(name)
    if queue is None:
        return _not_found(name)
    if config.enable_queue_allocated_pods_check:
        pods = _allocated_pods(queue)
        if pods:
            return f"queue {name} cannot be deleted because it has allocated Pods: {pods}"
    children = [_name(c) for c in _children(lookups, name)]
    if children:
        return f"queue {name} can not be deleted because it has {len(children)} child queues: {', '.join(children)}"
    return ""


def validate(req: Request, lookups: Lookups, config: AdmissionConfig) -> Verdict:
    """CREATE/UPDATE: quantities, state, hDRF annotations, hierarchy, root protection, hierarchy resources.
    DELETE: `default`/`root` protection, allocated pods (when enabled), child queues."""
    if req.operation == "DELETE":
        name = req.name or _name(req.old_object)
        err = _deleting_error(name, lookups, config)
        return Verdict.deny(err) if err else Verdict.allow()
    if req.operation not in ("CREATE", "UPDATE"):
        return Verdict.deny(f"invalid operation `{req.operation}`, expect operation to be `CREATE`, `UPDATE` or "
                            "`DELETE`")
    queue = req.object or {}
    errs = _quantity_errors(_spec(queue)) + _state_errors(queue) + _hierarchy_errors(queue, lookups)
    if errs:
        return Verdict.deny(_aggregate(errs))
    old = req.old_object if req.operation == "UPDATE" else None
    parent_changed = req.operation == "CREATE" or _parent(old) != _parent(queue)
    if parent_changed and (err := _hierarchical_queue_error(queue, lookups, config)):
        return Verdict.deny(err)
    if (config.enable_root_queue_protection and req.operation == "UPDATE" and _name(queue) == ROOT
            and old is not None and _resources_changed(queue, old)):
        return Verdict.deny("root queue's resource attributes (capability, deserved, guarantee) cannot be modified")
    if _needs_resource_check(queue, old, req.operation) and (err := _hierarchical_resources_error(queue, lookups)):
        return Verdict.deny(err)
    return Verdict.allow()
