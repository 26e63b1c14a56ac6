"""Evaluating compiled policies on one request: `matches` (constraints, namespace and object selectors, conditions)
and `evaluate` (variables, mutations, validations → stably ordered `Result`s), pure.

Part of `policies.admission_policies`, over `compiling` and `reviews`; `enforcement` decides what results do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import jsonpatch
import orjson

from lahar.policies import cel
from lahar.policies.admission_policies.compiling import CompiledPolicy
from lahar.policies.admission_policies.models import (
    QUEUE_ANNOTATION,
    REASON_CODES,
    FailurePolicy,
    Validation,
    ValidationAction,
)
from lahar.policies.admission_policies.reviews import _Req, normalize


@dataclass(frozen=True)
class Result:
    """One thing a policy has to say about a review: a failed validation (or an expression error under
    `failurePolicy: Fail`), enforced by `actions`; or a mutation's JSONPatch ops (`kind == "mutation"`)."""

    policy: str
    kind: Literal["validation", "error", "mutation"]
    index: int                                   # validations[index] / mutations[index]; -1 for policy-level
    message: str
    actions: tuple[ValidationAction, ...] = ()
    reason: str = "Invalid"
    patch: tuple[dict, ...] = ()

    @property
    def code(self) -> int:
        return REASON_CODES.get(self.reason, 422)

    def denial(self) -> str:
        return f"AdmissionPolicy '{self.policy}' denied request: {self.message}"

    def warning(self) -> str:
        return f"Validation failed for AdmissionPolicy '{self.policy}': {self.message}"


def _namespace_labels(req: _Req, namespace_obj: Mapping | None) -> dict[str, str] | None:
    """Labels the namespaceSelector is matched against; None means it does not apply (cluster-scoped)."""
    if req.kind == "Namespace" and req.group == "":
        obj = req.object or req.old_object or {}
        return dict((obj.get("metadata") or {}).get("labels") or {})
    if not req.namespace:
        return None
    if namespace_obj is None:       # offline: a namespace carries at least its automatic name label
        return {"kubernetes.io/metadata.name": req.namespace}
    return dict((namespace_obj.get("metadata") or {}).get("labels") or {})


def matches(policy: CompiledPolicy, req: Any, *, namespace_obj: Mapping | None = None) -> bool:
    """matchConstraints only (rules, exclusions, selectors); matchConditions need CEL and run in `evaluate`."""
    r = normalize(req)
    mc = policy.spec.match_constraints
    if not any(rule.matches(r) for rule in mc.resource_rules):
        return False
    if any(rule.matches(r) for rule in mc.exclude_resource_rules):
        return False
    ns_sel = mc.namespace_selector.selector()
    if not ns_sel.empty:
        labels = _namespace_labels(r, namespace_obj)
        if labels is not None and not ns_sel.matches(labels):
            return False
    obj_sel = mc.object_selector.selector()
    if not obj_sel.empty:
        return any(o is not None and obj_sel.matches((o.get("metadata") or {}).get("labels") or {})
                   for o in (r.object, r.old_object))
    return True


def _error(policy: CompiledPolicy, index: int, message: str, *, reason: str = "Invalid") -> list[Result]:
    if policy.spec.failure_policy == FailurePolicy.IGNORE:
        return []
    return [Result(policy.name, "error", index, message, policy.spec.validation_actions, reason)]


_NO_VARIABLES: dict[str, Any] = {}
# The engine converts every variable's value again at each evaluation that follows it (a 100k-element list costs
# about 1 s per evaluation under load), which no cost estimate of the expressions sees: a variable larger than this
# fails, as an expression error (see `failurePolicy`).
MAX_VARIABLE_ELEMENTS = 100_000
_PATCH_OPS = frozenset({"add", "remove", "replace", "move", "copy", "test"})


def _check_ops(value: Any) -> list[dict]:
    if not isinstance(value, list):
        raise cel.EvaluationError(f"must evaluate to a list of JSONPatch operations, got {type(value).__name__}")
    for i, op in enumerate(value):
        if not isinstance(op, dict) or op.get("op") not in _PATCH_OPS or not isinstance(op.get("path"), str):
            raise cel.EvaluationError(f"operation {i} must be {{op: add|remove|replace|move|copy|test, path: "
                                      f"string, ...}}, got {op!r}")
        if op["op"] in ("add", "replace", "test") and "value" not in op:
            raise cel.EvaluationError(f"operation {i} ({op['op']}) needs a value")
        if op["op"] in ("move", "copy") and not isinstance(op.get("from"), str):
            raise cel.EvaluationError(f"operation {i} ({op['op']}) needs from")
    return value


def _evaluate_one(policy: CompiledPolicy, act: cel.Activation, state: dict[str, Any]) -> list[Result]:
    """One policy on one review; `state["object"]` is the working copy mutations apply to."""
    spec = policy.spec
    if spec.param_ref is not None and policy.params is None:
        ref = spec.param_ref
        if ref.parameter_not_found_action == "Allow":
            return []
        where = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
        return [Result(policy.name, "error", -1, f"no params found for policy binding with Deny "
                       f"parameterNotFoundAction: ConfigMap {where} not found", spec.validation_actions)]
    act.bind("params", policy.params)
    act.bind("variables", _NO_VARIABLES)
    for name, program in policy.match_conditions:
        try:
            ok = program.evaluate(act)
        except cel.CelError as e:
            return _error(policy, -1, f"failed to evaluate matchCondition '{name}': {e}")
        if ok is not True:
            if ok is not False:
                return _error(policy, -1, f"matchCondition '{name}' must evaluate to bool, got {ok!r}")
            return []
    values: dict[str, Any] = {}
    failed_vars: dict[str, str] = {}
    if policy.variables:
        act.bind("variables", values)        # read through the resolver at each evaluation: filled in place
    for name, program in policy.variables:
        try:
            value = program.evaluate(act)
        except cel.CelError as e:
            failed_vars[name] = str(e)
            continue
        if isinstance(value, list | dict | str) and len(value) > MAX_VARIABLE_ELEMENTS:
            failed_vars[name] = (f"its value has {len(value)} elements, more than the limit of "
                                 f"{MAX_VARIABLE_ELEMENTS}")
            continue
        values[name] = value
        act.bind("variables", values)
    results: list[Result] = []
    for i, compiled in enumerate(policy.mutations):
        bad = [v for v in compiled.references if v in failed_vars]
        if bad:
            results += _error(policy, i, f"variable '{bad[0]}' failed: {failed_vars[bad[0]]}")
            continue
        try:
            ops = _check_ops(compiled.program.evaluate(act))
        except cel.CelError as e:
            results += _error(policy, i, f"mutation {i} (jsonPatch.expression) failed: {e}")
            continue
        if not ops:
            continue
        try:
            patched = apply_patch(state["object"], ops)
        except jsonpatch.JsonPatchTestFailed:
            continue                                 # a failed `test` op skips the mutation, as in Kubernetes
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
            results += _error(policy, i, f"mutation {i} produced a patch that does not apply: {e}")
            continue
        state["object"] = patched
        act.bind("object", patched)
        results.append(Result(policy.name, "mutation", i, "", patch=tuple(ops)))
    for i, (val, compiled, message_program) in enumerate(policy.validations):
        bad = [v for v in compiled.references if v in failed_vars]
        if bad:
            results += _error(policy, i, f"variable '{bad[0]}' failed: {failed_vars[bad[0]]}", reason=val.reason)
            continue
        try:
            ok = compiled.program.evaluate(act)
        except cel.CelError as e:
            results += _error(policy, i, f"expression '{val.expression}' resulted in error: {e}", reason=val.reason)
            continue
        if ok is True:
            continue
        if ok is not False:
            results += _error(policy, i, f"expression '{val.expression}' must evaluate to bool, got {ok!r}",
                              reason=val.reason)
            continue
        results.append(Result(policy.name, "validation", i, _message(val, message_program, act),
                              spec.validation_actions, val.reason))
    return results


def _copy(obj: Any) -> Any:
    return orjson.loads(orjson.dumps(obj))


_NOT_SIMPLE = object()


def apply_patch(obj: Any, ops: Sequence[Mapping[str, Any]]) -> Any:
    """`ops` applied to a new object, `obj` left as it is: along the patched paths only (`patch_copying_paths`), else
    by `jsonpatch` on a copy, whose errors (`JsonPatchException`, `JsonPointerException`) the caller handles."""
    patched = patch_copying_paths(obj, ops)
    if patched is _NOT_SIMPLE:
        patched = jsonpatch.JsonPatch(list(ops)).apply(_copy(obj), in_place=True)
    return patched


def _token(tok: str) -> str:
    return tok.replace("~1", "/").replace("~0", "~") if "~" in tok else tok


def patch_copying_paths(obj: Any, ops: Sequence[Mapping[str, Any]]) -> Any:
    """`ops` applied to a new object that shares every container off the patched paths with `obj` (which is left as
    it is): the copy of a whole Job per mutation becomes a copy of the few maps along each path. Only `add`,
    `replace` and `remove` whose every step exists as JSON Patch requires; anything else (`test`, `move`, `copy`,
    a missing step, a bad index) returns `_NOT_SIMPLE`, and the caller applies the patch with `jsonpatch`, which
    gives its result or its error."""
    copied: set[int] = set()

    def own(container: Any) -> Any:
        fresh = dict(container) if type(container) is dict else list(container)
        copied.add(id(fresh))
        return fresh

    root = obj
    for op in ops:
        kind, path = op.get("op"), op.get("path")
        if kind not in ("add", "replace", "remove") or type(path) is not str or not path.startswith("/"):
            return _NOT_SIMPLE
        if type(root) is not dict and type(root) is not list:
            return _NOT_SIMPLE
        if id(root) not in copied:
            root = own(root)
        tokens = [_token(t) for t in path[1:].split("/")]
        parent = root
        for tok in tokens[:-1]:
            if type(parent) is dict:
                if tok not in parent:
                    return _NOT_SIMPLE
                key: Any = tok
            elif type(parent) is list and _index(tok, len(parent) - 1) is not None:
                key = int(tok)
            else:
                return _NOT_SIMPLE
            child = parent[key]
            if type(child) is not dict and type(child) is not list:
                return _NOT_SIMPLE
            if id(child) not in copied:
                child = parent[key] = own(child)
            parent = child
        last = tokens[-1]
        if type(parent) is dict:
            if kind != "add" and last not in parent:
                return _NOT_SIMPLE
            if kind == "remove":
                del parent[last]
            else:
                if "value" not in op:
                    return _NOT_SIMPLE
                parent[last] = op["value"]
        elif type(parent) is list:
            if kind == "add" and last == "-":
                if "value" not in op:
                    return _NOT_SIMPLE
                parent.append(op["value"])
                continue
            i = _index(last, len(parent) if kind == "add" else len(parent) - 1)
            if i is None or (kind != "remove" and "value" not in op):
                return _NOT_SIMPLE
            if kind == "add":
                parent.insert(i, op["value"])
            elif kind == "replace":
                parent[i] = op["value"]
            else:
                del parent[i]
        else:
            return _NOT_SIMPLE
    return root


def _index(tok: str, highest: int) -> int | None:
    if not tok.isdigit() or not tok.isascii() or (len(tok) > 1 and tok[0] == "0"):
        return None
    i = int(tok)
    return i if i <= highest else None


def _message(val: Validation, program: cel.Program | None, act: cel.Activation) -> str:
    if program is not None:
        try:
            text = program.evaluate(act)
            if isinstance(text, str) and text.strip() and "\n" not in text.strip():
                return text.strip()
        except cel.CelError:
            pass
    return val.message or f"failed expression: {val.expression.strip()}"


def queue_name(request: Any) -> str | None:
    """The Volcano queue a Job/PodGroup (`spec.queue`, default `default`) or Pod (annotation
    `scheduling.volcano.sh/queue-name`) is submitted to; None for other kinds."""
    req = normalize(request)
    obj = req.object or req.old_object or {}
    if req.group in ("batch.volcano.sh", "scheduling.volcano.sh") and req.kind in ("Job", "PodGroup"):
        return (obj.get("spec") or {}).get("queue") or "default"
    if req.group == "" and req.kind == "Pod":
        return ((obj.get("metadata") or {}).get("annotations") or {}).get(QUEUE_ANNOTATION)
    return None


def evaluate(policies: Iterable[CompiledPolicy], request: Any, *, namespace_obj: Mapping | None = None,
             queue_lookup: Callable[[str], Mapping | None] | None = None,
             deadline: float | None = None, budget: int | None = cel.DEFAULT_REVIEW_BUDGET) -> list[Result]:
    """Every policy that matches `request` (a `webhooks.review.Request`-like object or an AdmissionReview
    `request` mapping), in name order; mutations of earlier policies are visible to later ones (and to
    validations). `queue_lookup(name)` gives `queueObject` (e.g. `Lookups.queue`). Pure apart from that lookup:
    the request is not changed. `deadline` (time.monotonic()) bounds the whole run: expressions after it fail; so
    does `budget`, the estimated cost all expressions of this review may spend together (Kubernetes'
    RuntimeCELCostBudget). Either failure is answered as the policy's `failurePolicy` says."""
    req = normalize(request)
    chosen = [p for p in sorted(policies, key=lambda p: p.name) if matches(p, req, namespace_obj=namespace_obj)]
    if not chosen:
        return []
    obj = _copy(req.object) if (req.object is not None and any(p.mutations for p in chosen)) else req.object
    state: dict[str, Any] = {"object": obj}
    ns = namespace_obj
    if ns is None and req.namespace:
        ns = {"apiVersion": "v1", "kind": "Namespace",
              "metadata": {"name": req.namespace, "labels": {"kubernetes.io/metadata.name": req.namespace}}}
    qname = queue_name(req) if queue_lookup is not None else None
    queue = queue_lookup(qname) if qname else None
    act = cel.Activation({"object": obj, "oldObject": req.old_object, "request": req.cel(),
                          "namespaceObject": ns, "queueObject": queue, "params": None, "variables": _NO_VARIABLES},
                         deadline=deadline, views=_views(chosen), budget=budget)
    results: list[Result] = []
    for policy in chosen:
        results += _evaluate_one(policy, act, state)
    return results


_VIEWS: dict[tuple[int, ...], tuple[tuple[CompiledPolicy, ...], dict[str, Callable[[Any], Any]]]] = {}


def _programs(policy: CompiledPolicy) -> Iterable[cel.Program]:
    yield from (p for _, p in policy.match_conditions)
    yield from (p for _, p in policy.variables)
    for _, compiled, message in policy.validations:
        yield compiled.program
        if message is not None:
            yield message
    yield from (c.program for c in policy.mutations)


def _views(chosen: Sequence[CompiledPolicy]) -> dict[str, Callable[[Any], Any]]:
    """What of `object`/`oldObject` the chosen policies' expressions can read (`cel.Reach`), computed once per set
    of policies: the engine then converts (once per review) and copies (on each member access) only that."""
    key = tuple(map(id, chosen))
    hit = _VIEWS.get(key)
    if hit is None:
        if len(_VIEWS) >= 64:
            _VIEWS.clear()
        programs = [p for policy in chosen for p in _programs(policy)]
        reaches = {name: cel.Reach(name, programs) for name in ("object", "oldObject")}
        hit = _VIEWS[key] = (tuple(chosen), {n: r.view for n, r in reaches.items() if not r.whole})
    return hit[1]
