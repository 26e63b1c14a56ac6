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

The package's modules, bottom up: `models` (the document, as frozen pydantic models), `compiling` (CEL compiled
once; `load_documents`, `parse_policies`, `PolicySet`), `reviews` (the request a policy sees), `evaluation`
(`matches`, `evaluate`) and `enforcement` (`enforce`, `policy_stage`).
"""

from __future__ import annotations

from lahar.policies.admission_policies.compiling import (
    CompiledPolicy,
    PolicySet,
    compile_policy,
    load_documents,
    parse_policies,
)
from lahar.policies.admission_policies.enforcement import Decision, PolicyStage, enforce, policy_stage
from lahar.policies.admission_policies.evaluation import Result, apply_patch, evaluate, matches, queue_name
from lahar.policies.admission_policies.models import API_VERSION, KIND, AdmissionPolicy, ValidationAction
from lahar.policies.admission_policies.reviews import normalize, request_for_object

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
    "apply_patch",
    "compile_policy",
    "enforce",
    "evaluate",
    "load_documents",
    "matches",
    "normalize",
    "parse_policies",
    "policy_stage",
    "queue_name",
    "request_for_object",
]
