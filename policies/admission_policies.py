"""Users' admission policies: `lahar.sh/v1alpha1 AdmissionPolicy` documents, compiled once, evaluated per review.

Loaded from ConfigMaps (`policies.loading`), evaluated by the webhook's policy stage (`policy_stage`) after the
built-in rules, by `lahar policy test` on manifests and by `lahar policy report` on a cluster's objects.

A policy reads like Kubernetes' ValidatingAdmissionPolicy and its binding in one document:

    apiVersion: lahar.sh/v1alpha1
    kind: AdmissionPolicy
    metadata: {name: gpu-jobs-in-gpu-queues}
    spec:
      failurePolicy: Fail                      # Fail | Ignore: what an expression error does
      matchConstraints:                        # resourceRules, excludeResourceRules, namespaceSelector, objectSelector
        resourceRules: [{apiGroups: [batch.volcano.sh], apiVersions: ["*"], operations: [CREATE, UPDATE],
                         resources: [jobs]}]
      matchConditions: [{name: has-gpus, expression: "..."}]    # all true, or the policy is skipped
      variables: [{name: gpus, expression: "..."}]              # `variables.gpus` in later expressions
      validations: [{expression: "...", message: "...", messageExpression: "...", reason: Forbidden}]
      validationActions: [Deny]                # Deny | Warn | Audit (Deny and Warn exclude each other)
      paramKind: {apiVersion: v1, kind: ConfigMap}
      params: {data: {maxGPUs: "64"}}          # inline param object, or
      paramRef: {name: limits, namespace: lahar-system, parameterNotFoundAction: Deny}   # a ConfigMap
      mutations:                               # MutatingAdmissionPolicy style, JSONPatch only
      - patchType: JSONPatch
        jsonPatch: {expression: '[JSONPatch{op: "add", path: "/spec/priorityClassName", value: "batch"}]'}

Definition, evaluation and enforcement stay apart (OPA's constraint framework): `evaluate(policies, request)`
is pure and returns stably ordered `Result`s (policy name, then mutations, then validations in document order);
`enforce(results)` turns them into what the webhook does (deny, warn, audit, patch).
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Literal, NamedTuple

import jsonpatch
import orjson
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from lahar.kube import podspec, resources, selectors
from lahar.policies import cel
from lahar.policies.errors import ConfigError, from_validation_error

__all__ = [
    "API_VERSION",
    "KIND",
    "AdmissionPolicy",
    "CompiledPolicy",
    "Decision",
    "PolicySet",
    "PolicyStage",
    "Result",
    "ValidationAction",
    "compile_policy",
    "enforce",
    "evaluate",
    "load_documents",
    "matches",
    "parse_policies",
    "policy_stage",
    "queue_name",
    "request_for_object",
]

API_VERSION = "lahar.sh/v1alpha1"
KIND = "AdmissionPolicy"
REASON_CODES = {"Unauthorized": 401, "Forbidden": 403, "Invalid": 422, "RequestEntityTooLarge": 413}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, alias_generator=to_camel)


class ValidationAction(StrEnum):
    DENY = "Deny"
    WARN = "Warn"
    AUDIT = "Audit"


class FailurePolicy(StrEnum):
    FAIL = "Fail"
    IGNORE = "Ignore"


class ResourceRule(_Model):
    """Admission's NamedRuleWithOperations: `resources` accepts `jobs`, `jobs/status`, `*`, `*/*`, `*/status`."""

    api_groups: tuple[str, ...] = ("*",)
    api_versions: tuple[str, ...] = ("*",)
    operations: tuple[str, ...] = ("*",)
    resources: tuple[str, ...]
    resource_names: tuple[str, ...] = ()
    scope: Literal["*", "Cluster", "Namespaced"] = "*"

    @field_validator("operations")
    @classmethod
    def _known_operations(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [op for op in v if op not in (*OPERATIONS, "*")]
        if bad:
            raise ValueError(f"unsupported operation(s) {bad}: use {', '.join(OPERATIONS)} or *")
        return v

    @field_validator("resources")
    @classmethod
    def _some_resource(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError("must list at least one resource")
        return v

    def matches(self, req: _Req) -> bool:
        if "*" not in self.operations and req.operation not in self.operations:
            return False
        if "*" not in self.api_groups and req.group not in self.api_groups:
            return False
        if "*" not in self.api_versions and req.version not in self.api_versions:
            return False
        if self.scope != "*" and self.scope != ("Namespaced" if req.namespace else "Cluster"):
            return False
        if self.resource_names and req.name not in self.resource_names:
            return False
        return any(_resource_matches(r, req.resource, req.sub_resource) for r in self.resources)


def _resource_matches(pattern: str, resource: str, sub: str) -> bool:
    res, _, psub = pattern.partition("/")
    if not _:                                   # no "/" in pattern: main resources only
        return not sub and res in ("*", resource)
    return res in ("*", resource) and psub in ("*", sub) and (psub == "*" or bool(sub))


class LabelSelectorModel(_Model):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: tuple[dict[str, Any], ...] = ()

    @model_validator(mode="after")
    def _parses(self) -> LabelSelectorModel:
        try:
            self.selector()
        except selectors.SelectorError as e:
            raise ValueError(str(e)) from None
        return self

    @functools.cached_property
    def _compiled(self) -> selectors.LabelSelector:
        return selectors.from_label_selector(self.model_dump(by_alias=True))

    def selector(self) -> selectors.LabelSelector:
        return self._compiled


class MatchResources(_Model):
    resource_rules: tuple[ResourceRule, ...] = ()
    exclude_resource_rules: tuple[ResourceRule, ...] = ()
    namespace_selector: LabelSelectorModel = LabelSelectorModel()
    object_selector: LabelSelectorModel = LabelSelectorModel()
    match_policy: Literal["Equivalent", "Exact"] = "Equivalent"


class NamedExpression(_Model):
    name: str
    expression: str

    @field_validator("name")
    @classmethod
    def _identifier(cls, v: str) -> str:
        if not _IDENT.match(v):
            raise ValueError(f"must be a CEL identifier (letters, digits, '_'), got {v!r}")
        return v


class MatchCondition(NamedExpression):
    @field_validator("name")
    @classmethod
    def _identifier(cls, v: str) -> str:   # Kubernetes allows qualified names here ("exclude-leases")
        if not v or len(v) > 63:
            raise ValueError("must be a non-empty name of at most 63 characters")
        return v


class Validation(_Model):
    expression: str
    message: str = ""
    message_expression: str = ""
    reason: Literal["Unauthorized", "Forbidden", "Invalid", "RequestEntityTooLarge"] = "Invalid"

    @field_validator("message")
    @classmethod
    def _one_line(cls, v: str) -> str:
        if "\n" in v.strip():
            raise ValueError("must not contain line breaks")
        return v.strip()


class JSONPatchSpec(_Model):
    expression: str


class Mutation(_Model):
    patch_type: Literal["JSONPatch", "ApplyConfiguration"] = "JSONPatch"
    json_patch: JSONPatchSpec | None = None

    @model_validator(mode="after")
    def _json_patch_only(self) -> Mutation:
        if self.patch_type != "JSONPatch":
            raise ValueError("patchType ApplyConfiguration is not supported; use JSONPatch")
        if self.json_patch is None:
            raise ValueError("jsonPatch.expression is required when patchType is JSONPatch")
        return self


class ParamKind(_Model):
    api_version: str = "v1"
    kind: str = "ConfigMap"


class ParamRef(_Model):
    name: str
    namespace: str = ""
    parameter_not_found_action: Literal["Deny", "Allow"] = "Deny"


class PolicySpec(_Model):
    failure_policy: FailurePolicy = FailurePolicy.FAIL
    match_constraints: MatchResources
    match_conditions: tuple[MatchCondition, ...] = Field(default=(), max_length=64)
    variables: tuple[NamedExpression, ...] = ()
    validations: tuple[Validation, ...] = ()
    validation_actions: tuple[ValidationAction, ...] = (ValidationAction.DENY,)
    param_kind: ParamKind | None = None
    params: dict[str, Any] | None = None
    param_ref: ParamRef | None = None
    mutations: tuple[Mutation, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> PolicySpec:
        if not self.match_constraints.resource_rules:
            raise ValueError("matchConstraints.resourceRules must list at least one rule")
        if not self.validations and not self.mutations:
            raise ValueError("a policy needs at least one validation or mutation")
        actions = self.validation_actions
        if not actions or len(set(actions)) != len(actions):
            raise ValueError("validationActions must be a non-empty list without duplicates")
        if ValidationAction.DENY in actions and ValidationAction.WARN in actions:
            raise ValueError("validationActions cannot contain both Deny and Warn")
        if self.params is not None and self.param_ref is not None:
            raise ValueError("give params inline or by paramRef, not both")
        if self.param_ref is not None and self.param_kind is not None and (
                (self.param_kind.api_version, self.param_kind.kind) != ("v1", "ConfigMap")):
            raise ValueError("paramRef can only name a ConfigMap (paramKind apiVersion v1, kind ConfigMap)")
        for what, items in (("matchConditions", self.match_conditions), ("variables", self.variables)):
            names = [i.name for i in items]
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"{what} names must be unique, repeated: {dupes}")
        return self


class PolicyMetadata(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    name: str
    namespace: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _dns_name(cls, v: str) -> str:
        if errs := podspec.is_dns1123_subdomain(v):
            raise ValueError(f"{v!r}: " + "; ".join(errs))
        return v


class AdmissionPolicy(_Model):
    api_version: Literal["lahar.sh/v1alpha1"]
    kind: Literal["AdmissionPolicy"]
    metadata: PolicyMetadata
    spec: PolicySpec


# --- compilation -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Compiled:
    program: cel.Program
    references: frozenset[str]       # variables.<name> it reads


@dataclass(frozen=True)
class CompiledPolicy:
    """A policy with every expression compiled; `params` is the resolved param object (inline, or the ConfigMap
    `paramRef` names once `with_params` was given it)."""

    policy: AdmissionPolicy
    match_conditions: tuple[tuple[str, cel.Program], ...]
    variables: tuple[tuple[str, cel.Program], ...]
    validations: tuple[tuple[Validation, _Compiled, cel.Program | None], ...]
    mutations: tuple[_Compiled, ...]
    params: Mapping[str, Any] | None = None
    source: str = ""                  # where it came from ("ConfigMap lahar-system/gpu-policies", a file name)

    @property
    def name(self) -> str:
        return self.policy.metadata.name

    @property
    def spec(self) -> PolicySpec:
        return self.policy.spec

    def with_params(self, params: Mapping[str, Any] | None) -> CompiledPolicy:
        return replace(self, params=params)


def _compile(expr: str, where: str, errors: list[tuple[str, str]], var_names: Iterable[str] = ()) -> _Compiled | None:
    try:
        program = cel.compile(expr, cost_limit=cel.DEFAULT_COST_LIMIT)
    except cel.CompileError as e:
        errors.append((where, f"compilation failed: {e}"))
        return None
    refs = frozenset(re.findall(r"\bvariables\.([A-Za-z_][A-Za-z0-9_]*)", expr))
    unknown = sorted(refs - set(var_names))
    if unknown:
        errors.append((where, f"compilation failed: undefined variable(s) {', '.join('variables.' + u for u in unknown)}"))
        return None
    return _Compiled(program, refs)


def compile_policy(policy: AdmissionPolicy, *, source: str = "") -> CompiledPolicy:
    """Compile every expression of `policy`; raises `ConfigError` naming each failing field path."""
    spec, errors = policy.spec, []
    conds = []
    for i, mc in enumerate(spec.match_conditions):
        c = _compile(mc.expression, f"spec.matchConditions[{i}].expression", errors)
        if c:
            conds.append((mc.name, c.program))
    variables, seen = [], []
    for i, v in enumerate(spec.variables):
        c = _compile(v.expression, f"spec.variables[{i}].expression", errors, seen)
        seen.append(v.name)
        if c:
            variables.append((v.name, c.program))
    validations = []
    for i, val in enumerate(spec.validations):
        c = _compile(val.expression, f"spec.validations[{i}].expression", errors, seen)
        m = _compile(val.message_expression, f"spec.validations[{i}].messageExpression", errors, seen) \
            if val.message_expression else None
        if c:
            validations.append((val, c, m.program if m else None))
    mutations = []
    for i, mu in enumerate(spec.mutations):
        assert mu.json_patch is not None
        c = _compile(mu.json_patch.expression, f"spec.mutations[{i}].jsonPatch.expression", errors, seen)
        if c:
            mutations.append(c)
    if errors:
        raise ConfigError(errors, source=f"AdmissionPolicy {policy.metadata.name}")
    return CompiledPolicy(policy=policy, match_conditions=tuple(conds), variables=tuple(variables),
                          validations=tuple(validations), mutations=tuple(mutations),
                          params=spec.params, source=source)


def load_documents(docs: Iterable[Any], *, source: str = "") -> list[CompiledPolicy]:
    """Validate and compile decoded documents (None documents are skipped); errors are prefixed `[doc N]`."""
    out, errors = [], []
    for n, doc in enumerate(docs):
        if doc is None:
            continue
        where = f"[doc {n}]"
        if not isinstance(doc, Mapping):
            errors.append((where, "must be a mapping (an AdmissionPolicy document)"))
            continue
        try:
            policy = AdmissionPolicy.model_validate(doc)
        except ValidationError as e:
            name = (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), Mapping) else None
            tag = f"{where} {name}" if name else where
            errors.extend((f"{tag} {p}", r) for p, r in from_validation_error(e))
            continue
        try:
            out.append(compile_policy(policy, source=source))
        except ConfigError as e:
            errors.extend((f"{where} {policy.metadata.name} {p}", r) for p, r in e.errors)
    names = [p.name for p in out]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        errors.append((f"metadata.name {dup}", "defined more than once"))
    if errors:
        raise ConfigError(errors, source=source)
    return out


def parse_policies(text: str, *, source: str = "") -> list[CompiledPolicy]:
    """AdmissionPolicy documents from YAML text (one or more `---` separated documents)."""
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as e:
        raise ConfigError([("<yaml>", str(e).replace("\n", " "))], source=source) from None
    return load_documents(docs, source=source)


@dataclass(frozen=True)
class PolicySet:
    """The policies in force, sorted by name (the order results come in)."""

    policies: tuple[CompiledPolicy, ...] = ()

    @classmethod
    def of(cls, policies: Iterable[CompiledPolicy]) -> PolicySet:
        return cls(tuple(sorted(policies, key=lambda p: p.name)))

    def __iter__(self):  # noqa: ANN204
        return iter(self.policies)

    def __len__(self) -> int:
        return len(self.policies)


# --- requests ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Req:
    uid: str
    operation: str
    group: str
    version: str
    kind: str
    resource: str
    sub_resource: str
    namespace: str
    name: str
    object: dict | None
    old_object: dict | None
    user_info: dict
    dry_run: bool
    resource_group: str
    resource_version: str

    def cel(self) -> dict[str, Any]:
        """The CEL `request` variable (AdmissionRequest's JSON shape)."""
        return {"uid": self.uid, "operation": self.operation,
                "kind": {"group": self.group, "version": self.version, "kind": self.kind},
                "resource": {"group": self.resource_group, "version": self.resource_version,
                             "resource": self.resource},
                "subResource": self.sub_resource, "name": self.name, "namespace": self.namespace,
                "userInfo": self.user_info, "dryRun": self.dry_run}


def _normalize(request: Any) -> _Req:
    """A `webhooks.review.Request`-like object, or an AdmissionReview `request` mapping."""
    if isinstance(request, _Req):
        return request
    if isinstance(request, Mapping):
        kind, res = request.get("kind") or {}, request.get("resource") or {}
        return _Req(uid=request.get("uid", ""), operation=request.get("operation", "CREATE"),
                    group=kind.get("group", ""), version=kind.get("version", ""), kind=kind.get("kind", ""),
                    resource=res.get("resource", ""), sub_resource=request.get("subResource", "") or "",
                    namespace=request.get("namespace", "") or "", name=request.get("name", "") or "",
                    object=request.get("object"), old_object=request.get("oldObject"),
                    user_info=request.get("userInfo") or {}, dry_run=bool(request.get("dryRun")),
                    resource_group=res.get("group", kind.get("group", "")),
                    resource_version=res.get("version", kind.get("version", "")))
    g = getattr
    return _Req(uid=g(request, "uid", ""), operation=g(request, "operation", "CREATE"), group=g(request, "group", ""),
                version=g(request, "version", ""), kind=g(request, "kind", ""), resource=g(request, "resource", ""),
                sub_resource=g(request, "sub_resource", "") or "", namespace=g(request, "namespace", "") or "",
                name=g(request, "name", "") or "", object=g(request, "object", None),
                old_object=g(request, "old_object", None), user_info=g(request, "user_info", None) or {},
                dry_run=bool(g(request, "dry_run", False)),
                resource_group=g(request, "resource_group", "") or g(request, "group", ""),
                resource_version=g(request, "resource_version", "") or g(request, "version", ""))


def request_for_object(obj: Mapping[str, Any], *, operation: str = "CREATE", old_object: Mapping | None = None,
                       registry: resources.Registry | None = None, user_info: Mapping | None = None) -> dict:
    """An AdmissionReview `request` mapping for `obj` as if it were being created (or updated/deleted): the plural
    comes from `registry` (default: the in-tree kinds, Volcano's included), else the lowercased kind + "s"."""
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    group, _, version = api_version.rpartition("/")
    rt = (registry or _in_tree()).by_kind(api_version, kind)
    plural = rt.plural if rt else kind.lower() + "s"
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace", "") or ("" if rt is not None and not rt.namespaced else "default")
    is_delete = operation == "DELETE"
    return {"uid": "", "operation": operation, "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": plural}, "name": meta.get("name", ""),
            "namespace": namespace, "object": None if is_delete else dict(obj),
            "oldObject": dict(obj) if is_delete else (dict(old_object) if old_object else None),
            "userInfo": dict(user_info or {"username": "lahar-policy-test"}), "dryRun": True}


_REGISTRY: list[resources.Registry] = []


def _in_tree() -> resources.Registry:
    if not _REGISTRY:
        _REGISTRY.append(resources.in_tree())
    return _REGISTRY[0]


# --- evaluation --------------------------------------------------------------------------------------------------


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
    r = _normalize(req)
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
            patched = jsonpatch.JsonPatch(ops).apply(_copy(state["object"]), in_place=True)
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
    req = _normalize(request)
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
    req = _normalize(request)
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


# --- enforcement -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """What the webhook does with the results: deny (first denial's message and code), warn, audit, patch."""

    denials: tuple[Result, ...] = ()
    warnings: tuple[str, ...] = ()
    audits: tuple[Result, ...] = ()
    patch: tuple[dict, ...] = ()
    results: tuple[Result, ...] = field(default=(), repr=False)

    @property
    def allowed(self) -> bool:
        return not self.denials

    @property
    def message(self) -> str:
        return "; ".join(r.denial() for r in self.denials)


def enforce(results: Sequence[Result]) -> Decision:
    denials, warnings, audits, patch = [], [], [], []
    for r in results:
        if r.kind == "mutation":
            patch.extend(r.patch)
            continue
        if ValidationAction.DENY in r.actions:
            denials.append(r)
        if ValidationAction.WARN in r.actions:
            warnings.append(r.warning())
        if ValidationAction.AUDIT in r.actions:
            audits.append(r)
    return Decision(tuple(denials), tuple(warnings), tuple(audits), () if denials else tuple(patch), tuple(results))


class PolicyStage(NamedTuple):
    """`policy_stage`'s answer: denial Results (`.denial()` is the message, `.code`, `.reason`), warning texts,
    JSONPatch ops (empty when denied) against the request's object, and the Audit results."""

    denials: list[Result]
    warnings: list[str]
    patches: list[dict]
    audits: list[Result]


def policy_stage(policies: Iterable[CompiledPolicy] | None, request: Any, *,
                 namespace_obj: Mapping | None = None, queue_lookup: Callable[[str], Mapping | None] | None = None,
                 budget_seconds: float | None = 1.0) -> PolicyStage:
    """The webhook's policy stage (run after the built-in rules): evaluate and enforce in one call. In the webhook:
    `policy_stage(current_policies, req, namespace_obj=lookups.namespace(req.namespace), queue_lookup=lookups.queue)`.
    `budget_seconds` bounds the whole stage (expressions after it count as errors, see `failurePolicy`)."""
    if not policies:
        return PolicyStage([], [], [], [])
    deadline = time.monotonic() + budget_seconds if budget_seconds is not None else None
    d = enforce(evaluate(policies, request, namespace_obj=namespace_obj, queue_lookup=queue_lookup,
                         deadline=deadline))
    return PolicyStage(list(d.denials), list(d.warnings), list(d.patch), list(d.audits))
