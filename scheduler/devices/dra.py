"""Dynamic Resource Allocation with structured parameters: which devices of a node's ResourceSlices a pod's
ResourceClaims get — the pure core of kube-scheduler's DynamicResources plugin and its structured allocator.

Used by the predicates plugin (`predicate.DynamicResourceAllocationEnable`, plugins/_dra.py), which reserves the
choice in the session and hands it to commit, where the claim's `status.allocation` and `status.reservedFor` are
written before the pod's bind. Objects are resource.k8s.io/v1 (v1beta1's `basic` device wrapper and flat requests
are read too).

- `node_devices(slices, node_name=..., node_labels=...)`: the devices published for a node (slices with its
  `nodeName`, `allNodes`, or a `nodeSelector` matching its labels), newest pool generation only;
- `requests_of(claim)`: a claim's requests, or a reason naming the feature lahar does not support;
- `allocate(claims, classes=..., devices=..., allocated=...)`: one result list per claim, or a reason naming the
  claim, the request and why. Requests are filled in order with backtracking (a request may give back a device
  a later one needs), as upstream's allocator does.

Selectors are CEL (`device.driver`, `device.attributes["domain"].name`, `device.capacity["domain"].name`, a
quantity) evaluated by lahar's own evaluator (policies/cel). A compile error fails the request; a runtime error
(a missing attribute) makes that device not match, and is named in the reason if the request cannot be filled.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lahar.policies import cel

__all__ = ["MAX_STEPS", "Device", "DeviceRequest", "Matcher", "allocate", "current", "node_devices", "requests_of"]

Obj = Mapping[str, Any]
DeviceID = tuple[str, str, str]  # (driver, pool, device)
MAX_STEPS = 100_000               # backtracking steps per pod and node before giving up (a reason, never a hang)
_QUANTITY = cel.LIBRARY["quantity"]


@dataclass(frozen=True)
class Device:
    driver: str
    pool: str
    name: str
    attributes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, compare=False)  # domain → id → value
    capacity: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, compare=False)    # domain → id → quantity
    id: DeviceID = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", (self.driver, self.pool, self.name))

    def cel_value(self) -> dict[str, Any]:
        """`device` as CEL sees it; the driver's own domain always exists (empty if the device has none)."""
        return {"driver": self.driver, "attributes": {self.driver: {}, **self.attributes},
                "capacity": {self.driver: {}, **self.capacity}}


@dataclass(frozen=True)
class DeviceRequest:
    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = "ExactCount"
    count: int = 1


def _qualified(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.rpartition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        for k in ("bool", "int", "string", "version"):
            if k in value:
                return value[k]
    return value


def _device(raw: Obj, driver: str, pool: str) -> Device:
    body = raw.get("basic") if isinstance(raw.get("basic"), Mapping) else raw  # v1beta1 wraps attributes in `basic`
    attributes: dict[str, dict[str, Any]] = {}
    for key, value in _mapping(body.get("attributes")).items():
        domain, ident = _qualified(str(key), driver)
        attributes.setdefault(domain, {})[ident] = _attribute_value(value)
    capacity: dict[str, dict[str, Any]] = {}
    for key, value in _mapping(body.get("capacity")).items():
        domain, ident = _qualified(str(key), driver)
        raw_q = value.get("value") if isinstance(value, Mapping) else value
        try:
            capacity.setdefault(domain, {})[ident] = _QUANTITY(str(raw_q))
        except ValueError:
            continue  # not a quantity: the API server would have refused the slice
    return Device(driver, pool, str(raw.get("name") or ""), attributes, capacity)


def _labels_match(selector: Obj, labels: Mapping[str, str]) -> bool:
    """A core/v1 NodeSelector over the node's labels (terms ORed, expressions ANDed); matchFields on metadata.name is
    not seen here, so a term with only matchFields does not match."""
    for term in selector.get("nodeSelectorTerms") or ():
        exprs = (term or {}).get("matchExpressions") or ()
        if not exprs:
            continue
        ok = True
        for e in exprs:
            key, op, values = e.get("key"), e.get("operator"), list(e.get("values") or ())
            has = key in labels
            if op == "In":
                ok = has and labels[key] in values
            elif op == "NotIn":
                ok = not has or labels[key] not in values
            elif op == "Exists":
                ok = has
            elif op == "DoesNotExist":
                ok = not has
            else:
                ok = False
            if not ok:
                break
        if ok:
            return True
    return False


def _mapping(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _pool_key(s: Obj) -> tuple[tuple[str, str], int]:
    spec = _mapping(s.get("spec"))
    pool = _mapping(spec.get("pool"))
    generation = pool.get("generation")
    return ((str(spec.get("driver") or ""), str(pool.get("name") or "")),
            generation if isinstance(generation, int) and not isinstance(generation, bool) else 0)


def current(slices: Iterable[Obj]) -> list[Obj]:
    """The slices of each pool's newest generation (older ones are being replaced by the driver)."""
    slices = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        key, generation = _pool_key(s)
        newest[key] = max(newest.get(key, generation), generation)
    return [s for s in slices if newest[_pool_key(s)[0]] == _pool_key(s)[1]]


def node_devices(slices: Iterable[Obj], *, node_name: str, node_labels: Mapping[str, str] | None = None) -> list[Device]:
    """The devices `node_name` can use: from slices naming it, slices for all nodes, or whose nodeSelector matches
    its labels; of each pool (driver, pool name) only the slices of its newest generation count. Sorted by
    (driver, pool, name), so choices are deterministic."""
    labels = node_labels or {}
    mine: list[tuple[tuple[str, str], Obj]] = []
    for s in current(slices):
        spec = _mapping(s.get("spec"))
        key, _ = _pool_key(s)
        if spec.get("nodeName"):
            here = spec["nodeName"] == node_name
        elif spec.get("allNodes"):
            here = True
        elif isinstance(spec.get("nodeSelector"), Mapping):
            here = _labels_match(spec["nodeSelector"], labels)
        else:
            here = False
        if here:
            mine.append((key, spec))
    out = [_device(d, key[0], key[1]) for key, spec in mine for d in spec.get("devices") or ()
           if isinstance(d, Mapping) and d.get("name")]
    return sorted(out, key=lambda d: d.id)


def _selectors(raw: Any) -> tuple[str, ...]:
    """The CEL expressions of a selector list; an entry without one is an empty expression (a compile error)."""
    if not isinstance(raw, list | tuple):
        return ()
    return tuple(str(_mapping(_mapping(s).get("cel")).get("expression") or "") for s in raw)


def requests_of(claim: Obj) -> list[DeviceRequest] | str:
    """The claim's device requests, or why lahar cannot allocate it (a feature it does not support)."""
    devices = _mapping(_mapping(claim.get("spec")).get("devices"))
    if devices.get("constraints"):
        return "device constraints (matchAttribute) are not supported"
    out: list[DeviceRequest] = []
    requests = devices.get("requests") or ()
    if not isinstance(requests, list | tuple):
        return "spec.devices.requests must be a list"
    for r in requests:
        if not isinstance(r, Mapping):
            return "spec.devices.requests: each request must be an object"
        name = str(r.get("name") or "")
        if r.get("firstAvailable"):
            return f"request {name}: prioritized lists (firstAvailable) are not supported"
        body = r.get("exactly") if isinstance(r.get("exactly"), Mapping) else r  # v1beta1: fields on the request
        if body.get("adminAccess"):
            return f"request {name}: adminAccess is not supported"
        if body.get("capacity"):
            return f"request {name}: consumable capacity requests are not supported"
        mode = str(body.get("allocationMode") or "ExactCount")
        if mode not in ("ExactCount", "All"):
            return f"request {name}: unsupported allocationMode {mode!r}"
        count = body.get("count", 1) if mode == "ExactCount" else 0
        if isinstance(count, bool) or not isinstance(count, int) or (mode == "ExactCount" and count < 1):
            return f"request {name}: count must be a positive integer, got {count!r}"
        out.append(DeviceRequest(name, str(body.get("deviceClassName") or ""), _selectors(body.get("selectors")),
                                 mode, count))
    return out


@functools.lru_cache(maxsize=1024)
def _program(expression: str) -> cel.Program | str:
    try:
        return cel.compile(expression, variables=("device",))
    except cel.CompileError as e:
        return str(e)


class Matcher:
    """Whether a device satisfies a list of CEL selectors, memoised per (selectors, device): devices and
    selectors do not change within a session. Runtime errors are kept per device for the reasons."""

    def __init__(self) -> None:
        self._memo: dict[tuple[tuple[str, ...], DeviceID], bool] = {}
        self._lists: dict[tuple[tuple[str, ...], int], tuple[Sequence[Device], list[Device]]] = {}
        self.errors: dict[tuple[tuple[str, ...], DeviceID], str] = {}

    def matching(self, selectors: tuple[str, ...], devices: Sequence[Device]) -> list[Device]:
        """The devices of `devices` the selectors accept, memoised per device list (a node's, kept by the caller
        for the session)."""
        key = (selectors, id(devices))
        hit = self._lists.get(key)
        if hit is None or hit[0] is not devices:
            hit = self._lists[key] = (devices, [d for d in devices if self.matches(selectors, d)])
        return hit[1]

    def compile_error(self, selectors: Sequence[str]) -> str | None:
        for i, expr in enumerate(selectors):
            prog = _program(expr)
            if isinstance(prog, str):
                return f"selector #{i}: CEL compile error: {prog}"
        return None

    def matches(self, selectors: tuple[str, ...], device: Device) -> bool:
        key = (selectors, device.id)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        ok = True
        if selectors:
            activation = cel.Activation({"device": device.cel_value()})
            for i, expr in enumerate(selectors):
                prog = _program(expr)
                try:
                    value = prog.evaluate(activation) if not isinstance(prog, str) else False
                except cel.EvaluationError as e:
                    self.errors[key] = f"selector #{i}: CEL runtime error on device {device.name}: {e}"
                    ok = False
                    break
                if not isinstance(value, bool):
                    self.errors[key] = (f"selector #{i}: CEL runtime error on device {device.name}: "
                                        f"expression must return a bool, got {type(value).__name__}")
                    ok = False
                    break
                if not value:
                    ok = False
                    break
        self._memo[key] = ok
        return ok


@dataclass(frozen=True)
class _Slot:
    claim: int
    request: DeviceRequest
    candidates: tuple[Device, ...]


def allocate(claims: Sequence[tuple[str, Sequence[DeviceRequest]]], *, classes: Mapping[str, Obj],
             devices: Sequence[Device], allocated: set[DeviceID] | frozenset[DeviceID],
             matcher: Matcher | None = None) -> list[list[dict[str, str]]] | str:
    """Devices for each (claim name, requests), none of them in `allocated` nor given twice; the results are
    `status.allocation.devices.results` entries (request, driver, pool, device), one list per claim. A reason
    (a str) names the claim and request that cannot be filled."""
    matcher = matcher if matcher is not None else Matcher()
    slots: list[_Slot] = []
    whole: list[tuple[int, DeviceRequest, list[Device]]] = []  # allocationMode All: fixed, taken first
    for ci, (claim, requests) in enumerate(claims):
        for r in requests:
            where = f"claim {claim}, request {r.name}"
            cls = classes.get(r.device_class)
            if cls is None:
                return f"{where}: device class {r.device_class} does not exist"
            selectors = (*_selectors(_mapping(cls.get("spec")).get("selectors")), *r.selectors)
            bad = matcher.compile_error(selectors)
            if bad:
                return f"{where}: {bad}"
            fits = matcher.matching(selectors, devices)
            if r.mode == "All":
                if not fits:
                    return f"{where}: no device matches{_errors(matcher, selectors, devices)}"
                taken = [d.name for d in fits if d.id in allocated]
                if taken:
                    return f"{where}: asks for all devices, but {', '.join(taken)} already allocated"
                whole.append((ci, r, fits))
                continue
            free = tuple(d for d in fits if d.id not in allocated)
            if len(free) < r.count:
                return (f"{where}: needs {r.count} device(s), {len(free)} of {len(fits)} matching free"
                        f"{_errors(matcher, selectors, devices)}")
            slots.extend(_Slot(ci, r, free) for _ in range(r.count))
    used: set[DeviceID] = set()
    for _, r, fits in whole:
        clash = [d.name for d in fits if d.id in used]
        if clash:
            return f"request {r.name}: asks for all devices, but {', '.join(clash)} are taken by another request"
        used.update(d.id for d in fits)
    chosen: list[Device] = []
    steps = [0]

    def fill(i: int, start: int) -> bool:
        if i == len(slots):
            return True
        slot = slots[i]
        # two slots of one request take devices in increasing order (no permutations of the same set)
        first = start if i > 0 and slots[i - 1].request is slot.request and slots[i - 1].claim == slot.claim else 0
        for k in range(first, len(slot.candidates)):
            steps[0] += 1
            if steps[0] > MAX_STEPS:
                return False
            d = slot.candidates[k]
            if d.id in used:
                continue
            used.add(d.id)
            chosen.append(d)
            if fill(i + 1, k + 1):
                return True
            chosen.pop()
            used.discard(d.id)
        return False

    if not fill(0, 0):
        if steps[0] > MAX_STEPS:
            return f"no allocation found within {MAX_STEPS} steps"
        names = ", ".join(sorted({f"{claims[s.claim][0]}/{s.request.name}" for s in slots}))
        return f"requests {names}: not enough distinct free devices for all of them"
    by_request: dict[tuple[int, str], list[dict[str, str]]] = {}
    for ci, r, fits in whole:
        by_request.setdefault((ci, r.name), []).extend(_result(r, d) for d in fits)
    for slot, d in zip(slots, chosen, strict=True):
        by_request.setdefault((slot.claim, slot.request.name), []).append(_result(slot.request, d))
    return [[x for r in requests for x in by_request.get((ci, r.name), ())]  # in the claim's request order
            for ci, (_, requests) in enumerate(claims)]


def _result(r: DeviceRequest, d: Device) -> dict[str, str]:
    return {"request": r.name, "driver": d.driver, "pool": d.pool, "device": d.name}


def _errors(matcher: Matcher, selectors: tuple[str, ...], devices: Sequence[Device]) -> str:
    for d in devices:
        err = matcher.errors.get((selectors, d.id))
        if err:
            return f" ({err})"
    return ""
