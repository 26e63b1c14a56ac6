"""The policy stage: users' AdmissionPolicies run after lahar's built-in rules, on every path the webhook serves.

`webhooks.app` calls `after_rules(route, request, verdict, label, admission)` once per review, after
`routes.admit`. On Volcano's paths the policies see what the rules saw (mutating paths: the object as the rules
patched it); on the generic `/policies/mutate` and `/policies/validate` paths (registered for Volcano's kinds, pods
and batch/v1 jobs and cronjobs) they run only for requests no built-in path admitted in the same phase, so each
request meets each policy once per phase.

Phases, as in Kubernetes: a mutating path runs the policies' `mutations` (MutatingAdmissionPolicy), a validating
path their `validations` (ValidatingAdmissionPolicy), each on a copy of the policy stripped of the other half
(`Policies.of` splits them once per change). Enforcement: a denial becomes `Verdict.deny` with the policy's message
and code (`Forbidden` → 403, `Invalid` → 422, ...); warnings are appended to the rules' warnings; mutation patches
are appended to the rules' patch ops (they were computed on the patched object, so the concatenation applies);
Audit results are counted (`lahar_policy_audit_total`) and handed to the app's audit sink (`AuditEvents` writes
their Events from a background thread: never an API call in the review path). A built-in denial skips the policies.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jsonpatch

from lahar.certs.bundles import PolicyDemand
from lahar.kube import errors
from lahar.kube.resources import ResourceType
from lahar.policies import events, loading
from lahar.policies import metrics as policy_metrics
from lahar.policies.admission_policies import CompiledPolicy, PolicyStage, Result, apply_patch, policy_stage
from lahar.webhooks.lookups import Lookups
from lahar.webhooks.review import Request, Verdict

__all__ = [
    "DECISIONS",
    "GENERIC_PATHS",
    "NO_POLICIES",
    "AuditEvents",
    "AuditSink",
    "Policies",
    "after_rules",
    "cluster_demand",
    "demand_of",
    "handled_by_rules",
    "run",
]

log = logging.getLogger(__name__)

GENERIC_PATHS = ("/policies/mutate", "/policies/validate")
DECISIONS = policy_metrics.REGISTRY.counter(
    "lahar_policy_decisions_total", "AdmissionPolicy results the webhook enforced, by policy and action "
    "(deny, warn, mutate).", ("policy", "action"))

AuditSink = Callable[[list[Result], Request], None]


@dataclass(frozen=True)
class Policies:
    """The policies in force, split once per change into their mutating and validating halves (name order)."""

    mutating: tuple[CompiledPolicy, ...] = ()
    validating: tuple[CompiledPolicy, ...] = ()
    names: tuple[str, ...] = ()

    @classmethod
    def of(cls, policies: Iterable[CompiledPolicy] | None) -> Policies:
        ordered = sorted(policies or (), key=lambda p: p.name)
        return cls(mutating=tuple(dataclasses.replace(p, validations=()) for p in ordered if p.mutations),
                   validating=tuple(dataclasses.replace(p, mutations=()) for p in ordered if p.validations),
                   names=tuple(p.name for p in ordered))

    def phase(self, *, mutating: bool) -> tuple[CompiledPolicy, ...]:
        return self.mutating if mutating else self.validating

    def __len__(self) -> int:
        return len(self.names)

    def demand(self) -> PolicyDemand:
        """What these policies could match, per phase (`certs.bundles.policy_webhooks` registers that much)."""
        return demand_of(self.mutating, self.validating)


def _rules(policies: Iterable[CompiledPolicy]) -> tuple[dict[str, tuple[str, ...]], ...]:
    return tuple({"apiGroups": r.api_groups, "resources": r.resources, "operations": r.operations}
                 for p in policies for r in p.spec.match_constraints.resource_rules)


def demand_of(mutating: Iterable[CompiledPolicy], validating: Iterable[CompiledPolicy]) -> PolicyDemand:
    """The resource rules of the policies with mutations and of those with validations, as plain data."""
    return PolicyDemand(mutating=_rules(mutating), validating=_rules(validating))


_CONFIGMAPS = ResourceType(group="", version="v1", kind="ConfigMap", plural="configmaps", namespaced=True)


def cluster_demand(client: Any, *, namespace: str | None) -> PolicyDemand | None:
    """What the policy ConfigMaps stored in `namespace` (every namespace: None) could match, for `certs ensure`;
    a ConfigMap that does not parse counts as a policy matching anything (the webhook keeps its last good
    version in force). None when the ConfigMaps cannot be listed: then every entry stays registered."""
    try:
        items = client.list(_CONFIGMAPS, namespace=namespace, label_selector=f"{loading.POLICY_LABEL}=true")["items"]
    except (errors.Forbidden, errors.NotFound) as e:
        log.warning("webhooks: cannot list the policy ConfigMaps (%s); registering every policy webhook", e)
        return None
    compiled: list[CompiledPolicy] = []
    for cm in items:
        try:
            compiled.extend(loading.parse_policy_configmap(cm))
        except Exception:  # noqa: BLE001 - a bad ConfigMap is the loader's to report; here it only widens
            return PolicyDemand.everything()
    return Policies.of(compiled).demand()


NO_POLICIES = Policies()
_NOTHING = PolicyStage([], [], [], [])


def _count(audits: list[Result], req: Request, sink: AuditSink | None) -> None:
    events.record_audits(None, audits, None)           # the counters, at once
    if sink is not None:
        try:
            sink(audits, req)
        except Exception:  # noqa: BLE001 - auditing is best effort, never a failed review
            log.exception("webhooks: the audit sink failed on %s %s/%s", req.kind, req.namespace, req.name)


def run(policies: Policies, req: Request, verdict: Verdict, *, mutating: bool, lookups: Lookups,
        budget_seconds: float | None = 1.0) -> tuple[Verdict, PolicyStage]:
    """The verdict after the policies of one phase, and what the stage found (its `audits` are to be recorded).
    Pure apart from the look-ups (the namespace and queue objects the expressions see)."""
    chosen = policies.phase(mutating=mutating)
    if not chosen or not verdict.allowed:
        return verdict, _NOTHING
    seen = req
    if mutating and verdict.patch and req.object is not None:
        try:
            patched = apply_patch(req.object, verdict.patch)      # copies only the maps along the rules' paths
            seen = dataclasses.replace(req, object=patched)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
            return Verdict.deny(f"internal error: the rules' patch does not apply before the policies: {e}",
                                code=500, reason="InternalError", warnings=verdict.warnings), _NOTHING
    namespace_obj = lookups.namespace(req.namespace) if req.namespace else None
    stage = policy_stage(chosen, seen, namespace_obj=namespace_obj, queue_lookup=lookups.queue,
                         budget_seconds=budget_seconds)
    warnings = (*verdict.warnings, *stage.warnings)
    if stage.denials:
        first = stage.denials[0]
        return Verdict.deny("; ".join(r.denial() for r in stage.denials), code=first.code, reason=first.reason,
                            warnings=warnings), stage
    return Verdict.allow(patch=(*verdict.patch, *stage.patches) if mutating else verdict.patch,
                         warnings=warnings), stage


def _scheduler_names(config: Any) -> tuple[str, ...]:
    return tuple(getattr(config, "scheduler_names", None) or ("volcano",))


def handled_by_rules(req: Request, routes: Mapping[str, Any], config: Any, *, mutating: bool) -> bool:
    """Whether one of lahar's resource paths admits `req` in this phase (so the generic path must not run the
    policies again): same group/resource, the operation registered, and for pods the scheduler-name condition."""
    group = req.resource_group or req.group
    for route in routes.values():
        if route.resource == "*" or route.mutating != mutating or req.sub_resource:
            continue
        if (route.group, route.resource) != (group, req.resource) or req.operation not in route.operations:
            continue
        if route.resource == "pods" and route.group == "":
            spec = ((req.object or req.old_object or {}).get("spec") or {})
            if spec.get("schedulerName") not in _scheduler_names(config):
                continue
        return True
    return False


def after_rules(route: Any, req: Request, verdict: Verdict, label: str, admission: Any) -> tuple[Verdict, str]:
    """The app's hook: the policy stage after `routes.admit` on `route` (`admission` carries lookups, config,
    routes, policies and audits); returns the final verdict and its metrics label."""
    policies: Policies | None = getattr(admission, "policies", None)
    if not policies or not verdict.allowed:
        return verdict, label
    if route.resource == "*" and handled_by_rules(req, admission.routes, admission.config, mutating=route.mutating):
        return verdict, label
    try:
        final, stage = run(policies, req, verdict, mutating=route.mutating, lookups=admission.lookups)
    except Exception as e:  # noqa: BLE001 - like a rule crash (webhooks.routes): fail closed with a message
        log.exception("webhooks: the policy stage crashed on %s %s %s/%s (uid %s)", route.path, req.kind,
                      req.namespace, req.name, req.uid)
        return Verdict.deny(f"internal error in the policy stage of {route.path}: {type(e).__name__}: {e}",
                            code=500, reason="InternalError", warnings=verdict.warnings), "error"
    if stage.audits:
        _count(stage.audits, req, getattr(admission, "audits", None))
    for r in stage.denials:
        DECISIONS.inc(policy=r.policy, action="deny")
    for w in stage.warnings:
        DECISIONS.inc(policy=_policy_of(w), action="warn")
    if stage.patches and final.allowed:
        DECISIONS.inc(policy="*", action="mutate")
    return final, label if final.allowed else "denied"


def _policy_of(warning: str) -> str:
    """The policy a warning text (`Validation failed for AdmissionPolicy 'name': ...`) names."""
    head, _, rest = warning.partition("AdmissionPolicy '")
    name, quote, _ = rest.partition("'")
    return name if quote else "*"


class AuditEvents:
    """An `AuditSink` leaving a Warning `PolicyViolation` Event on each audited object, written by one background
    thread from a bounded queue (full queue: the Event is dropped and logged; the counter already counted it).
    Dry-run reviews leave no Event (nothing is stored)."""

    def __init__(self, client: Any, *, component: str = "lahar-webhook", max_pending: int = 1000) -> None:
        self.client, self.component = client, component
        self._queue: queue.Queue[tuple[list[Result], dict] | None] = queue.Queue(max_pending)
        self._thread: threading.Thread | None = None

    def __call__(self, audits: list[Result], req: Request) -> None:
        obj = req.object or req.old_object
        if req.dry_run or obj is None:
            return
        if not (obj.get("metadata") or {}).get("namespace") and req.namespace:
            obj = {**obj, "metadata": {**(obj.get("metadata") or {}), "namespace": req.namespace}}
        try:
            self._queue.put_nowait((audits, obj))
        except queue.Full:
            log.warning("webhooks: audit Event queue full, dropping the Event for %s %s/%s", req.kind,
                        req.namespace, req.name)

    def start(self) -> AuditEvents:
        self._thread = threading.Thread(target=self._run, name="lahar-audit-events", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout)
            self._thread = None

    def drain(self, timeout: float = 5.0) -> None:
        """Wait until every queued Event was written (tests)."""
        done = threading.Event()
        self._queue.put(([], {"__done__": done}))
        done.wait(timeout)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            audits, obj = item
            if "__done__" in obj:
                obj["__done__"].set()
                continue
            for r in audits:
                events.record(self.client, obj, "Warning", "PolicyViolation",
                              f"AdmissionPolicy '{r.policy}': {r.message}", component=self.component)
