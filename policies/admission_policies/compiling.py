"""Loading and compiling AdmissionPolicy documents: `compile_policy` compiles every CEL expression once (errors name
the field), `load_documents` / `parse_policies` read documents or YAML text, `PolicySet` holds the result.

Part of `policies.admission_policies`, over `models`; `policies.loading` calls it for ConfigMaps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import yaml
from pydantic import ValidationError

from lahar.policies import cel
from lahar.policies.admission_policies.models import AdmissionPolicy, PolicySpec, Validation
from lahar.policies.errors import ConfigError, from_validation_error


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
