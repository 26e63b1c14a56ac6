"""The Volcano CRDs in deploy/crds: well-formed CRDs, and their schemas accept Volcano's own examples
and reject what kube-apiserver would reject (checked with kube.schemas, the engine devcluster uses)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from lahar.kube import fielderrors, schemas
from tests.builders import vcjob

ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = ROOT / "deploy" / "crds"
EXAMPLES = ROOT / ".." / "shared" / "volcano-examples"

# file, group, kind, plural, scope, version, shortNames, status subresource
EXPECTED = [
    ("batch.volcano.sh_jobs.yaml", "batch.volcano.sh", "Job", "jobs", "Namespaced", "v1alpha1", ["vcjob", "vj"], True),
    ("batch.volcano.sh_cronjobs.yaml", "batch.volcano.sh", "CronJob", "cronjobs", "Namespaced", "v1alpha1",
     ["cronvcjob", "cronvj"], True),
    ("scheduling.volcano.sh_queues.yaml", "scheduling.volcano.sh", "Queue", "queues", "Cluster", "v1beta1",
     ["q", "queue-v1beta1"], True),
    ("scheduling.volcano.sh_podgroups.yaml", "scheduling.volcano.sh", "PodGroup", "podgroups", "Namespaced", "v1beta1",
     ["pg", "podgroup-v1beta1"], False),
    ("bus.volcano.sh_commands.yaml", "bus.volcano.sh", "Command", "commands", "Namespaced", "v1alpha1", None, False),
    ("topology.volcano.sh_hypernodes.yaml", "topology.volcano.sh", "HyperNode", "hypernodes", "Cluster", "v1alpha1",
     ["hn"], True),
    ("flow.volcano.sh_jobflows.yaml", "flow.volcano.sh", "JobFlow", "jobflows", "Namespaced", "v1alpha1", ["jf"], True),
    ("flow.volcano.sh_jobtemplates.yaml", "flow.volcano.sh", "JobTemplate", "jobtemplates", "Namespaced", "v1alpha1",
     ["jt"], True),
    ("nodeinfo.volcano.sh_numatopologies.yaml", "nodeinfo.volcano.sh", "Numatopology", "numatopologies", "Cluster",
     "v1alpha1", ["numatopo"], False),
    ("scheduling.koordinator.sh_devices.yaml", "scheduling.koordinator.sh", "Device", "devices", "Cluster", "v1alpha1",
     None, True),
]

COLUMNS = {
    "Job": [("STATUS", ".status.state.phase"), ("minAvailable", ".status.minAvailable"), ("RUNNINGS", ".status.running"),
            ("AGE", ".metadata.creationTimestamp"), ("QUEUE", ".spec.queue")],
    "PodGroup": [("STATUS", ".status.phase"), ("minMember", ".spec.minMember"), ("RUNNINGS", ".status.running"),
                 ("AGE", ".metadata.creationTimestamp"), ("QUEUE", ".spec.queue")],
    "Queue": [("PARENT", ".spec.parent")],
    "JobFlow": [("Status", ".status.state.phase"), ("Age", ".metadata.creationTimestamp")],
    "HyperNode": [("Tier", ".spec.tier"), ("TierName", ".spec.tierName"), ("NodeCount", ".status.nodeCount"),
                  ("Age", ".metadata.creationTimestamp")],
}


def load_crds() -> dict[tuple[str, str], dict[str, Any]]:
    crds = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        crds[(doc["spec"]["group"], doc["spec"]["names"]["kind"])] = doc
    return crds


CRDS = load_crds()


def schema_of(kind: str) -> dict[str, Any]:
    (crd,) = [c for (_, k), c in CRDS.items() if k == kind]
    version = next(v["name"] for v in crd["spec"]["versions"] if v["storage"])
    schema = schemas.crd_schema(crd, version)
    assert schema is not None
    return schema


def walk(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every (path, node) of a schema through properties, items and additionalProperties."""
    nodes = [(path, schema)]
    for name, sub in (schema.get("properties") or {}).items():
        nodes += walk(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        nodes += walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        nodes += walk(schema["additionalProperties"], f"{path}{{}}")
    return nodes


# ---------------------------------------------------------------------------------------------------------------
# the CRD objects themselves


def test_every_file_is_expected() -> None:
    assert sorted(p.name for p in CRD_DIR.glob("*.yaml")) == sorted(e[0] for e in EXPECTED)


@pytest.mark.parametrize(("file", "group", "kind", "plural", "scope", "version", "short", "status"), EXPECTED,
                         ids=[e[0] for e in EXPECTED])
def test_crd_is_well_formed(file: str, group: str, kind: str, plural: str, scope: str, version: str,
                            short: list[str] | None, status: bool) -> None:
    docs = [d for d in yaml.safe_load_all((CRD_DIR / file).read_text()) if d]
    assert len(docs) == 1
    (crd,) = docs
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{plural}.{group}"
    assert file == f"{group}_{plural}.yaml"
    spec = crd["spec"]
    assert spec["group"] == group and spec["scope"] == scope
    names = spec["names"]
    assert (names["kind"], names["plural"], names["listKind"], names["singular"]) == (
        kind, plural, f"{kind}List", kind.lower())
    assert names.get("shortNames") == short
    assert [v["name"] for v in spec["versions"]] == [version]
    assert sum(1 for v in spec["versions"] if v["storage"]) == 1
    (entry,) = spec["versions"]
    assert entry["served"] is True
    assert ("status" in (entry.get("subresources") or {})) is status
    schema = entry["schema"]["openAPIV3Schema"]
    assert schema["type"] == "object"
    assert {"apiVersion", "kind", "metadata"} <= set(schema["properties"])
    assert [(c["name"], c["jsonPath"]) for c in entry.get("additionalPrinterColumns", [])] == COLUMNS.get(kind, [])


@pytest.mark.parametrize("file", [e[0] for e in EXPECTED], ids=[e[0] for e in EXPECTED])
def test_crd_round_trips_through_the_official_client_model(file: str) -> None:
    """Every key is a real CustomResourceDefinition field (a misspelt key would be dropped by the model)."""
    from kubernetes import client

    doc = yaml.safe_load((CRD_DIR / file).read_text())
    api = client.ApiClient()
    model = api.deserialize(json.dumps(doc), "V1CustomResourceDefinition", "application/json")
    assert api.sanitize_for_serialization(model) == doc


@pytest.mark.parametrize("kind", sorted(k for _, k in CRDS), ids=sorted(k for _, k in CRDS))
def test_schema_is_structural(kind: str) -> None:
    """Every node has a type (int-or-string and preserve-unknown-fields nodes excepted); defaults are valid."""
    for path, node in walk(schema_of(kind)):
        if node.get("x-kubernetes-int-or-string"):
            assert "type" not in node, path
            continue
        assert node.get("type") in {"object", "array", "string", "integer", "number", "boolean"}, path
        if node["type"] == "array":
            assert isinstance(node.get("items"), dict), path
        if "properties" in node or "additionalProperties" in node:
            assert node["type"] == "object", path
        if "default" in node:
            assert schemas.validate(node, node["default"]) == [], path
        if "enum" in node:
            assert all(schemas.validate({k: v for k, v in node.items() if k != "enum"}, e) == [] for e in node["enum"])


def without_descriptions(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: without_descriptions(v) for k, v in schema.items() if k != "description"}
    if isinstance(schema, list):
        return [without_descriptions(v) for v in schema]
    return schema


def test_embedded_job_specs_match_the_job_crd() -> None:
    job_spec = without_descriptions(schema_of("Job")["properties"]["spec"])
    cron = schema_of("CronJob")["properties"]["spec"]["properties"]["jobTemplate"]["properties"]["spec"]
    assert without_descriptions(cron) == job_spec
    assert without_descriptions(schema_of("JobTemplate")["properties"]["spec"]) == job_spec
    patch = schema_of("JobFlow")["properties"]["spec"]["properties"]["flows"]["items"]["properties"]["patch"]
    patch_spec = patch["properties"]["jobSpec"]
    assert all("default" not in node for _, node in walk(patch_spec)), "a patch must not carry defaults"
    with_defaults = without_descriptions(copy.deepcopy(job_spec))
    for _, node in walk(with_defaults):
        node.pop("default", None)
    assert without_descriptions(patch_spec) == with_defaults


# ---------------------------------------------------------------------------------------------------------------
# Volcano's examples are accepted (the invalid_jobs ones are rejected by the webhook, not by the schema)


def example_docs() -> list[Any]:
    if not EXAMPLES.is_dir():
        return [pytest.param(None, None, id="no-examples", marks=pytest.mark.skip(reason="volcano-examples absent"))]
    params = []
    for path in sorted(EXAMPLES.rglob("*.y*ml")):
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if isinstance(doc, dict) and str(doc.get("apiVersion", "")).split("/")[0].endswith("volcano.sh"):
                params.append(pytest.param(doc, path.name, id=f"{path.relative_to(EXAMPLES)}#{index}"))
    return params


@pytest.mark.parametrize(("doc", "name"), example_docs())
def test_volcano_example_is_accepted(doc: dict[str, Any], name: str) -> None:
    group, version = doc["apiVersion"].split("/")
    crd = CRDS.get((group, doc["kind"]))
    assert crd is not None, f"no CRD for {doc['apiVersion']} {doc['kind']}"
    schema = schemas.crd_schema(crd, version)
    assert schema is not None
    assert schemas.unknown_fields(schema, doc) == []
    defaulted = schemas.apply_defaults(schema, doc)
    assert [e.message() for e in schemas.validate(schema, defaulted)] == []


def test_examples_cover_the_main_kinds() -> None:
    if not EXAMPLES.is_dir():
        pytest.skip("volcano-examples absent")
    kinds = {p.values[0]["kind"] for p in example_docs()}
    assert {"Job", "Queue", "CronJob"} <= kinds
    assert any("invalid_jobs" in p.id for p in example_docs())


# ---------------------------------------------------------------------------------------------------------------
# what the schemas reject, with kube-apiserver's messages

TASK = {"name": "worker", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}


def job(**spec: Any) -> dict[str, Any]:
    return vcjob("test-job", namespace=None).tasks(TASK).spec(**spec).build()


def with_task(**fields: Any) -> dict[str, Any]:
    doc = job()
    doc["spec"]["tasks"][0].update(fields)
    return doc


def queue(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"}, "spec": spec}


def cronjob(**spec: Any) -> dict[str, Any]:
    full = {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"tasks": [copy.deepcopy(TASK)]}}, **spec}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob", "metadata": {"name": "c"},
            "spec": {k: v for k, v in full.items() if v is not None}}


EVENTS = '"*", "PodPending", "PodRunning", "PodFailed", "PodEvicted", "Unknown", "TaskCompleted", "OutOfSync", ' \
         '"CommandIssued", "JobUpdated", "TaskFailed"'
ACTIONS = '"AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition", "TerminateJob", "CompleteJob", ' \
          '"ResumeJob", "SyncJob", "EnqueueJob", "SyncQueue", "OpenQueue", "CloseQueue"'

REJECT: list[tuple[str, str, dict[str, Any], list[str]]] = [
    ("job-min-available-negative", "Job", job(minAvailable=-1),
     ["spec.minAvailable: Invalid value: -1: spec.minAvailable in body should be greater than or equal to 0"]),
    ("job-max-retry-negative", "Job", job(maxRetry=-1),
     ["spec.maxRetry: Invalid value: -1: spec.maxRetry in body should be greater than or equal to 0"]),
    ("job-no-tasks", "Job", job(tasks=[]), ["spec.tasks: Invalid value: 0: spec.tasks in body should have at least 1 items"]),
    ("job-policy-action", "Job", job(policies=[{"event": "PodFailed", "action": "Foo"}]),
     [f'spec.policies[0].action: Unsupported value: "Foo": supported values: {ACTIONS}']),
    ("job-policy-event", "Job", job(policies=[{"event": "PodExploded", "action": "RestartJob"}]),
     [f'spec.policies[0].event: Unsupported value: "PodExploded": supported values: {EVENTS}']),
    ("job-policy-events", "Job", job(policies=[{"events": ["PodFailed", "Nope"], "action": "RestartJob"}]),
     [f'spec.policies[0].events[1]: Unsupported value: "Nope": supported values: {EVENTS}']),
    ("task-policy-action", "Job", with_task(policies=[{"event": "PodFailed", "action": "Foo"}]),
     [f'spec.tasks[0].policies[0].action: Unsupported value: "Foo": supported values: {ACTIONS}']),
    ("task-replicas-negative", "Job", with_task(replicas=-1),
     ["spec.tasks[0].replicas: Invalid value: -1: spec.tasks[0].replicas in body should be greater than or equal to 0"]),
    ("task-min-available-negative", "Job", with_task(minAvailable=-1),
     ["spec.tasks[0].minAvailable: Invalid value: -1: spec.tasks[0].minAvailable in body should be greater than or "
      "equal to 0"]),
    ("task-topology-policy", "Job", with_task(topologyPolicy="numa-please"),
     ['spec.tasks[0].topologyPolicy: Unsupported value: "numa-please": supported values: "none", "best-effort", '
      '"restricted", "single-numa-node"']),
    ("task-name-pattern", "Job", with_task(name="Worker_1"),
     ["spec.tasks[0].name: Invalid value: \"Worker_1\": spec.tasks[0].name in body should match "
      "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'"]),
    ("task-partition-required", "Job", with_task(partitionPolicy={"totalPartitions": 2}),
     ["spec.tasks[0].partitionPolicy.partitionSize: Required value"]),
    ("job-network-topology-mode", "Job", job(networkTopology={"mode": "medium"}),
     ['spec.networkTopology.mode: Unsupported value: "medium": supported values: "hard", "soft"']),
    ("job-min-success-zero", "Job", job(minSuccess=0),
     ["spec.minSuccess: Invalid value: 0: spec.minSuccess in body should be greater than or equal to 1"]),
    ("job-queue-name", "Job", job(queue="Not A Queue"),
     ["spec.queue: Invalid value: \"Not A Queue\": spec.queue in body should match "
      "'^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'"]),
    ("job-scheduler-name-too-long", "Job", job(schedulerName="s" * 64),
     ["spec.schedulerName: Too long: may not be more than 63 bytes"]),
    ("job-volume-mount-path-required", "Job", job(volumes=[{"volumeClaimName": "pvc"}]),
     ["spec.volumes[0].mountPath: Required value"]),
    ("job-two-errors", "Job", job(minAvailable=-1, maxRetry="three"),
     ['spec.maxRetry: Invalid value: "string": spec.maxRetry in body must be of type integer: "string"',
      "spec.minAvailable: Invalid value: -1: spec.minAvailable in body should be greater than or equal to 0"]),
    ("queue-weight-zero", "Queue", queue(weight=0),
     ["spec.weight: Invalid value: 0: spec.weight in body should be greater than or equal to 1"]),
    ("queue-weight-too-big", "Queue", queue(weight=65536),
     ["spec.weight: Invalid value: 65536: spec.weight in body should be less than or equal to 65535"]),
    ("queue-weight-string", "Queue", queue(weight="string"),
     ['spec.weight: Invalid value: "string": spec.weight in body must be of type integer: "string"']),
    ("queue-capability-quantity", "Queue", queue(capability={"cpu": "lots"}),
     ["spec.capability.cpu: Invalid value: \"lots\": spec.capability.cpu in body should match "
      "'^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|"
      "(\\.[0-9]+))))?$'"]),
    ("queue-state", "Queue", {**queue(), "status": {"state": "Ajar"}},
     ['status.state: Unsupported value: "Ajar": supported values: "Open", "Closed", "Closing", "Unknown"']),
    ("cronjob-schedule-required", "CronJob", cronjob(schedule=None), ["spec.schedule: Required value"]),
    ("cronjob-job-template-required", "CronJob", cronjob(jobTemplate=None), ["spec.jobTemplate: Required value"]),
    ("cronjob-concurrency-policy", "CronJob", cronjob(concurrencyPolicy="Sometimes"),
     ['spec.concurrencyPolicy: Unsupported value: "Sometimes": supported values: "Allow", "Forbid", "Replace"']),
    ("cronjob-history-negative", "CronJob", cronjob(successfulJobsHistoryLimit=-1),
     ["spec.successfulJobsHistoryLimit: Invalid value: -1: spec.successfulJobsHistoryLimit in body should be greater "
      "than or equal to 0"]),
    ("cronjob-embedded-job", "CronJob", cronjob(jobTemplate={"spec": {"minAvailable": -2, "tasks": [TASK]}}),
     ["spec.jobTemplate.spec.minAvailable: Invalid value: -2: spec.jobTemplate.spec.minAvailable in body should be "
      "greater than or equal to 0"]),
    ("podgroup-min-member", "PodGroup", {"spec": {"minMember": -1}},
     ["spec.minMember: Invalid value: -1: spec.minMember in body should be greater than or equal to 0"]),
    ("podgroup-phase", "PodGroup", {"spec": {}, "status": {"phase": "Sleeping"}},
     ['status.phase: Unsupported value: "Sleeping": supported values: "Pending", "Running", "Unknown", "Inqueue", '
      '"Completed"']),
    ("command-target-required", "Command", {"action": "AbortJob", "target": {"kind": "Job", "name": "j"}},
     ["target.apiVersion: Required value", "target.uid: Required value"]),
    ("command-action", "Command", {"action": "Explode"}, [f'action: Unsupported value: "Explode": supported values: {ACTIONS}']),
    ("hypernode-tier-required", "HyperNode", {"spec": {"members": [{"type": "Node", "selector": {"exactMatch": {
        "name": "n1"}}}]}}, ["spec.tier: Required value"]),
    ("hypernode-member-type", "HyperNode", {"spec": {"tier": 1, "members": [{"type": "Switch"}]}},
     ['spec.members[0].type: Unsupported value: "Switch": supported values: "Node", "HyperNode"']),
    ("hypernode-no-members", "HyperNode", {"spec": {"tier": 1, "members": []}},
     ["spec.members: Invalid value: 0: spec.members in body should have at least 1 items"]),
]


@pytest.mark.parametrize(("kind", "doc", "expected"), [r[1:] for r in REJECT], ids=[r[0] for r in REJECT])
def test_schema_rejects(kind: str, doc: dict[str, Any], expected: list[str]) -> None:
    schema = schema_of(kind)
    errs = schemas.validate(schema, schemas.apply_defaults(schema, doc))
    assert [e.message() for e in errs] == expected


def test_rejection_message_reads_like_kube_apiserver() -> None:
    schema = schema_of("Job")
    errs = schemas.validate(schema, schemas.apply_defaults(schema, job(minAvailable=-1)))
    assert fielderrors.errors_message("Job", "batch.volcano.sh", "test-job", errs) == (
        'Job.batch.volcano.sh "test-job" is invalid: '
        "spec.minAvailable: Invalid value: -1: spec.minAvailable in body should be greater than or equal to 0")


# ---------------------------------------------------------------------------------------------------------------
# defaults and unknown fields

DEFAULTS = [
    ("job", "Job", job(), {"queue": "default", "maxRetry": 3}),
    ("job-keeps-values", "Job", job(queue="q1", maxRetry=0), {"queue": "q1", "maxRetry": 0}),
    ("job-network-topology-mode", "Job", job(networkTopology={"highestTierAllowed": 1}),
     {"networkTopology": {"highestTierAllowed": 1, "mode": "hard"}}),
    ("queue", "Queue", queue(), {"weight": 1}),
    ("cronjob", "CronJob", cronjob(), {"concurrencyPolicy": "Allow", "suspend": False,
                                       "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1}),
    ("podgroup", "PodGroup", {"spec": {"minMember": 1}}, {"queue": "default"}),
]


@pytest.mark.parametrize(("kind", "doc", "expected"), [d[1:] for d in DEFAULTS], ids=[d[0] for d in DEFAULTS])
def test_schema_defaults(kind: str, doc: dict[str, Any], expected: dict[str, Any]) -> None:
    defaulted = schemas.apply_defaults(schema_of(kind), doc)
    assert {k: defaulted["spec"].get(k) for k in expected} == expected


def test_cronjob_job_template_is_defaulted_like_a_job() -> None:
    defaulted = schemas.apply_defaults(schema_of("CronJob"), cronjob())
    job_spec = defaulted["spec"]["jobTemplate"]["spec"]
    assert (job_spec["queue"], job_spec["maxRetry"]) == ("default", 3)


UNKNOWN = [
    ("job-spec-typo", "Job", job(minAvaliable=1), ["spec.minAvaliable"]),
    ("job-task-typo", "Job", with_task(replica=2), ["spec.tasks[0].replica"]),
    ("job-policy-typo", "Job", job(policies=[{"event": "PodFailed", "acton": "RestartJob"}]), ["spec.policies[0].acton"]),
    ("job-template-is-free", "Job", with_task(template={"spec": {"anything": {"goes": [1]}}}), []),
    ("queue-typo", "Queue", queue(wieght=2), ["spec.wieght"]),
    ("queue-resources-are-maps", "Queue", queue(capability={"cpu": 1, "nvidia.com/gpu": 8}), []),
    ("cronjob-typo", "CronJob", cronjob(schedul="x"), ["spec.schedul"]),
    ("podgroup-typo", "PodGroup", {"spec": {"minMembers": 1}}, ["spec.minMembers"]),
    ("command-typo", "Command", {"action": "AbortJob", "targt": {}}, ["targt"]),
    ("hypernode-typo", "HyperNode", {"spec": {"tier": 1, "members": [{"type": "Node", "selectr": {}}]}},
     ["spec.members[0].selectr"]),
    ("metadata-not-checked", "Job", {**job(), "metadata": {"name": "x", "whatever": 1}}, []),
    ("status-typo", "Job", {**job(), "status": {"state": {"phase": "Running"}, "runing": 1}}, ["status.runing"]),
]


@pytest.mark.parametrize(("kind", "doc", "expected"), [u[1:] for u in UNKNOWN], ids=[u[0] for u in UNKNOWN])
def test_unknown_fields(kind: str, doc: dict[str, Any], expected: list[str]) -> None:
    assert schemas.unknown_fields(schema_of(kind), doc) == expected
