"""The route table: Volcano's webhook paths → (rule handler, resource, operations), and the chain per resource.

`webhooks.app` serves one POST per route; `lahar admit` runs `run_chain` (every mutator, then every validator,
patches applied in turn and combined). `admit` is the one place a handler is called: it checks the resource,
turns a handler crash into a denial, and labels the outcome for the metrics.

Failure handling, decided here: a handler that raises yields `allowed: false` with
`internal error in <path>: <ExceptionType>: <text>` (code 500) and a logged traceback — fail closed with a
message the user can act on, the outcome `failurePolicy: Fail` would produce, instead of an HTTP 500 that the
API server reports as an opaque "failed calling webhook". The tables hold the handler functions themselves: a rule
module that cannot be imported stops the server from starting (it never turns into an allow), and a path that is
not in the table is a 404 (`webhooks.app`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jsonpatch

from lahar.webhooks import configmaps, cronjobs, hypernodes, jobflows, jobs, podgroups, pods, queues
from lahar.webhooks.lookups import Lookups
from lahar.webhooks.review import Request, Verdict, request_for

__all__ = [
    "CHAINS",
    "Handler",
    "Route",
    "admit",
    "admit_object",
    "chain",
    "default_routes",
    "lahar_routes",
    "resource_for",
    "run_chain",
]

log = logging.getLogger(__name__)

Handler = Callable[[Request, Lookups, Any], Verdict]

VOLCANO_BATCH = "batch.volcano.sh"
VOLCANO_SCHEDULING = "scheduling.volcano.sh"
VOLCANO_FLOW = "flow.volcano.sh"
VOLCANO_TOPOLOGY = "topology.volcano.sh"


@dataclass(frozen=True)
class Route:
    """One webhook path: the handler, the resource it admits and the operations its webhook registers for."""

    path: str
    handler: Handler
    group: str
    version: str
    resource: str                  # plural
    operations: frozenset[str]
    mutating: bool

    @property
    def gvr(self) -> str:
        """Volcano's rendering of the expected resource (a Go metav1.GroupVersionResource printed with %s)."""
        return f"{{{self.group} {self.version} {self.resource}}}"


# path, handler, group, version, plural, operations (as registered in deploy/webhooks/, spec §4)
_TABLE: tuple[tuple[str, Handler, str, str, str, tuple[str, ...]], ...] = (
    ("/jobs/mutate", jobs.mutate, VOLCANO_BATCH, "v1alpha1", "jobs",
     ("CREATE", "UPDATE")),  # Volcano: CREATE; the defaults again on UPDATE keep a re-applied manifest a no-op
    ("/jobs/validate", jobs.validate, VOLCANO_BATCH, "v1alpha1", "jobs", ("CREATE", "UPDATE")),
    ("/pods/mutate", pods.mutate, "", "v1", "pods", ("CREATE",)),
    ("/pods/validate", pods.validate, "", "v1", "pods", ("CREATE",)),
    ("/queues/mutate", queues.mutate, VOLCANO_SCHEDULING, "v1beta1", "queues", ("CREATE",)),
    ("/queues/validate", queues.validate, VOLCANO_SCHEDULING, "v1beta1", "queues", ("CREATE", "UPDATE", "DELETE")),
    ("/podgroups/mutate", podgroups.mutate, VOLCANO_SCHEDULING, "v1beta1", "podgroups", ("CREATE",)),
    ("/podgroups/validate", podgroups.validate, VOLCANO_SCHEDULING, "v1beta1", "podgroups",
     ("CREATE", "UPDATE")),  # Volcano: CREATE; lahar's minMember checks also guard updates
    ("/cronjobs/validate", cronjobs.validate, VOLCANO_BATCH, "v1alpha1", "cronjobs", ("CREATE", "UPDATE")),
    ("/jobflows/validate", jobflows.validate, VOLCANO_FLOW, "v1alpha1", "jobflows", ("CREATE", "UPDATE")),
    ("/hypernodes/validate", hypernodes.validate, VOLCANO_TOPOLOGY, "v1alpha1", "hypernodes", ("CREATE", "UPDATE")),
)

# resource (plural) → (mutating paths, validating paths), in the order the API server would call them
CHAINS: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "jobs": (("/jobs/mutate",), ("/jobs/validate",)),
    "pods": (("/pods/mutate",), ("/pods/validate",)),
    "queues": (("/queues/mutate",), ("/queues/validate",)),
    "podgroups": (("/podgroups/mutate",), ("/podgroups/validate",)),
    "cronjobs": ((), ("/cronjobs/validate",)),
    "jobflows": ((), ("/jobflows/validate",)),
    "hypernodes": ((), ("/hypernodes/validate",)),
}


def _routes(table: Iterable[tuple[str, Handler, str, str, str, tuple[str, ...]]]) -> dict[str, Route]:
    return {path: Route(path, handler, group, version, plural, frozenset(ops), path.endswith("/mutate"))
            for path, handler, group, version, plural, ops in table}


def default_routes() -> dict[str, Route]:
    """Every Volcano path with its rule handler."""
    return _routes(_TABLE)


# lahar's own paths (not Volcano's): its ConfigMaps, and the generic policy paths (resource "*": any request the
# webhook registration sends; `webhooks.policystage` runs the policies there). Added by `webhooks.app.create_app`.
def policies_only(req: Request, lookups: Lookups, config: Any) -> Verdict:
    """The generic policy paths have no built-in rules: allow, and let the policy stage decide."""
    return Verdict.allow()


_LAHAR_TABLE: tuple[tuple[str, Handler, str, str, str, tuple[str, ...]], ...] = (
    ("/configmaps/validate", configmaps.validate, "", "v1", "configmaps", ("CREATE", "UPDATE")),
    ("/policies/mutate", policies_only, "*", "*", "*", ("CREATE", "UPDATE")),
    ("/policies/validate", policies_only, "*", "*", "*", ("CREATE", "UPDATE")),
)


def lahar_routes() -> dict[str, Route]:
    """`/configmaps/validate` (lahar's ConfigMaps) and the generic `/policies/mutate|validate` paths."""
    return _routes(_LAHAR_TABLE)


def resource_for(api_version: str, kind: str, routes: Mapping[str, Route] | None = None) -> str | None:
    """The plural lahar admits objects of this apiVersion/kind as, or None when no route takes them."""
    group = api_version.rpartition("/")[0]
    for route in (routes or default_routes()).values():
        if route.group == group and _KINDS.get(route.resource) == kind:
            return route.resource
    return None


_CLUSTER_SCOPED = frozenset({"queues", "hypernodes"})
_KINDS = {"jobs": "Job", "pods": "Pod", "queues": "Queue", "podgroups": "PodGroup", "cronjobs": "CronJob",
          "jobflows": "JobFlow", "hypernodes": "HyperNode"}


def admit(route: Route, req: Request, lookups: Lookups, config: Any) -> tuple[Verdict, str]:
    """Run one route's handler on `req`: (verdict, metrics label `allowed` | `denied` | `error`).

    A request for another resource is denied the way Volcano's decoders do (`expect resource to be {...}`).
    """
    group = req.resource_group if req.resource_group or not req.group else req.group
    if route.resource != "*" and (group, req.resource) != (route.group, route.resource):
        return Verdict.deny(f"expect resource to be {route.gvr}"), "denied"
    try:
        verdict = route.handler(req, lookups, config)
    except Exception as e:  # noqa: BLE001 - a rule bug must answer, not crash the server (see module docstring)
        log.exception("webhooks: %s crashed on %s %s %s/%s (uid %s)", route.path, req.operation, req.kind,
                      req.namespace, req.name, req.uid)
        return Verdict.deny(f"internal error in {route.path}: {type(e).__name__}: {e}", code=500,
                            reason="InternalError"), "error"
    if not isinstance(verdict, Verdict):
        log.error("webhooks: %s returned %r, not a Verdict", route.path, verdict)
        return Verdict.deny(f"internal error in {route.path}: handler returned {type(verdict).__name__}, "
                            "not a Verdict", code=500, reason="InternalError"), "error"
    return verdict, "allowed" if verdict.allowed else "denied"


def chain(resource: str, routes: Mapping[str, Route] | None = None) -> tuple[list[Route], list[Route]]:
    """(mutating routes, validating routes) for a resource plural, in call order; ([], []) when lahar has none."""
    routes = routes if routes is not None else default_routes()
    mutating, validating = CHAINS.get(resource, ((), ()))
    return [routes[p] for p in mutating if p in routes], [routes[p] for p in validating if p in routes]


def run_chain(req: Request, lookups: Lookups, config: Any, mutators: Iterable[Route],
              validators: Iterable[Route]) -> Verdict:
    """What the API server would conclude: each mutator (registered for the operation) sees the object as the
    previous ones patched it; then every validator sees the final object. The first denial wins; warnings
    accumulate; the patches are combined (applied in turn, so their concatenation is the whole mutation).
    """
    warnings: list[str] = []
    ops: list[dict] = []
    current = req
    for route in mutators:
        if req.operation not in route.operations:
            continue
        verdict, _ = admit(route, current, lookups, config)
        warnings.extend(verdict.warnings)
        if not verdict.allowed:
            return dataclasses.replace(verdict, warnings=tuple(warnings))
        if verdict.patch and current.object is not None:
            try:
                patched = jsonpatch.apply_patch(current.object, list(verdict.patch))
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
                return Verdict.deny(f"internal error in {route.path}: its patch does not apply: {e}", code=500,
                                    reason="InternalError", warnings=warnings)
            ops.extend(verdict.patch)
            current = dataclasses.replace(current, object=patched)
    for route in validators:
        if req.operation not in route.operations:
            continue
        verdict, _ = admit(route, current, lookups, config)
        warnings.extend(verdict.warnings)
        if not verdict.allowed:
            return dataclasses.replace(verdict, warnings=tuple(warnings))
    return Verdict.allow(patch=ops, warnings=warnings)


def admit_object(obj: dict, lookups: Lookups, config: Any, routes: Mapping[str, Route] | None = None, *,
                 uid: str = "lahar-admit") -> tuple[Request, Verdict] | None:
    """`obj` sent through its resource's whole chain as a CREATE (what `kubectl create` would cause), or None
    when no lahar webhook admits its kind. A namespaced object without a namespace goes to `default`.
    """
    routes = routes if routes is not None else default_routes()
    resource = resource_for(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""), routes)
    if resource is None:
        return None
    meta = obj.get("metadata") or {}
    if resource not in _CLUSTER_SCOPED and not meta.get("namespace"):  # the API server fills it from the URL before admission
        obj = {**obj, "metadata": {**meta, "namespace": "default"}}
    req = request_for(obj, resource=resource, uid=uid)
    mutators, validators = chain(resource, routes)
    return req, run_chain(req, lookups, config, mutators, validators)
