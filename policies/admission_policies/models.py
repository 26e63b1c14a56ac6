"""The `lahar.sh/v1alpha1 AdmissionPolicy` document as frozen pydantic models (spec, match constraints, conditions,
variables, validations, mutations, params), validated at the edge with the field named in every error.

Bottom of `policies.admission_policies`; `compiling` turns a model into a `CompiledPolicy`.
"""

from __future__ import annotations

import functools
import re
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from lahar.kube import podspec, selectors

if TYPE_CHECKING:
    from lahar.policies.admission_policies.reviews import _Req

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
