"""Volcano models: every shipped example round-trips unchanged; aliases, enums, strictness and unknown fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from lahar.kube import models, quantity, resources
from lahar.kube.models import (
    KINDS,
    Action,
    Command,
    CronJob,
    Event,
    HyperNode,
    Job,
    JobFlow,
    JobPhase,
    JobSpec,
    LifecyclePolicy,
    Numatopology,
    PodGroup,
    PodGroupPhase,
    Queue,
    QueueState,
    TaskSpec,
    UnknownKindError,
    from_object,
    labels,
)

EXAMPLES = Path(__file__).resolve().parents[3] / ".." / "shared" / "volcano-examples"


def _volcano_documents() -> list[tuple[str, dict[str, Any]]]:
    if not EXAMPLES.is_dir():
        return []
    docs = []
    for path in sorted(EXAMPLES.rglob("*.y*ml")):
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if isinstance(doc, dict) and str(doc.get("apiVersion", "")).split("/")[0].endswith("volcano.sh"):
                docs.append((f"{path.relative_to(EXAMPLES)}#{i}", doc))
    return docs


DOCUMENTS = _volcano_documents()


@pytest.mark.skipif(not DOCUMENTS, reason="shared volcano-examples folder not present")
@pytest.mark.parametrize("doc", [d for _, d in DOCUMENTS], ids=[name for name, _ in DOCUMENTS])
def test_examples_round_trip(doc: dict[str, Any]) -> None:
    model = from_object(doc)
    assert type(model) is KINDS[(doc["apiVersion"], doc["kind"])]
    assert model.to_dict() == doc


def test_kinds_match_the_resource_registry() -> None:
    registered = {(r.api_version, r.kind) for r in resources.volcano()}
    assert set(KINDS) <= registered
    assert {kind for _, kind in KINDS} >= {"Job", "CronJob", "Queue", "PodGroup", "Command", "HyperNode", "JobFlow"}


def test_from_object_rejects_unknown_kinds() -> None:
    with pytest.raises(UnknownKindError, match="apiVersion 'v1', kind 'Pod'"):
        from_object({"apiVersion": "v1", "kind": "Pod"})
    with pytest.raises(UnknownKindError):
        from_object({})


# --- aliasing ----------------------------------------------------------------------------------------------------

ALIASES = [
    (TaskSpec, "min_available", "minAvailable", 2),
    (JobSpec, "ttl_seconds_after_finished", "ttlSecondsAfterFinished", 60),
    (JobSpec, "priority_class_name", "priorityClassName", "high"),
    (models.PodGroupCondition, "transition_id", "transitionID", "uid-1"),
    (models.FlowCondition, "create_timestamp", "createTime", "2024-01-01T00:00:00Z"),
    (models.NumatopoSpec, "memory_detail", "MemoryDetail", {"0": {"cells": [0]}}),
    (models.NumatopoSpec, "numares", "numares", {"cpu": {"allocatable": "0-3", "capacity": 4}}),
    (models.JobFlowStatus, "un_know_jobs", "unKnowJobs", ["a"]),
    (
        models.NodeGroupAffinity,
        "required_during_scheduling_ignored_during_execution",
        "requiredDuringSchedulingIgnoredDuringExecution",
        ["ng1"],
    ),
]


@pytest.mark.parametrize(("cls", "name", "wire", "value"), ALIASES, ids=[a[2] for a in ALIASES])
def test_aliases(cls: type[models.VolcanoModel], name: str, wire: str, value: Any) -> None:
    by_name = cls(**{name: value})
    by_wire = cls.model_validate({wire: value})
    assert by_name.to_dict() == by_wire.to_dict() == {wire: value}
    assert getattr(by_wire, name) is not None


# --- no defaults: what was not sent is not rendered ------------------------------------------------------------


def test_no_defaults_are_injected() -> None:
    doc = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "spec": {"tasks": [{"replicas": 1}]}}
    job = from_object(doc)
    assert isinstance(job, Job)
    assert job.to_dict() == doc
    assert job.spec is not None and job.spec.queue is None and job.spec.max_retry is None
    assert job.spec.tasks is not None and job.spec.tasks[0].min_available is None


def test_explicit_nulls_and_empties_survive() -> None:
    doc = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "spec": {"plugins": {"ssh": [], "svc": None}}}
    assert from_object(doc).to_dict() == doc


def test_kinds_built_in_python_render_api_version_and_kind() -> None:
    q = Queue(metadata={"name": "q1"}, spec={"weight": 2})
    assert q.to_dict() == {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "q1"},
        "spec": {"weight": 2},
    }


# --- unknown fields are kept at every level ----------------------------------------------------------------------


def test_unknown_fields_are_kept_everywhere() -> None:
    doc = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "futureTopLevel": 1,
        "metadata": {"name": "pg", "managedFields": [{"manager": "kubectl"}], "selfLink": "/x"},
        "spec": {"minMember": 1, "someNewKnob": {"deep": [1, 2]}, "subGroupPolicy": [{"name": "a", "x-new": True}]},
        "status": {"phase": "Inqueue", "conditions": [{"type": "Scheduled", "newField": "v"}]},
    }
    pg = from_object(doc)
    assert isinstance(pg, PodGroup)
    assert pg.to_dict() == doc
    assert pg.spec is not None and pg.spec.model_extra == {"someNewKnob": {"deep": [1, 2]}}


# --- enums -------------------------------------------------------------------------------------------------------

ENUMS = [
    (JobPhase, {"Pending", "Aborting", "Aborted", "Running", "Restarting", "Completing", "Completed", "Terminating", "Terminated", "Failed"}),
    (
        Event,
        {"*", "PodFailed", "PodEvicted", "PodPending", "PodRunning", "Unknown", "TaskCompleted", "TaskFailed", "OutOfSync", "CommandIssued", "JobUpdated"},
    ),
    (
        Action,
        {
            "AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition", "TerminateJob", "CompleteJob",
            "ResumeJob", "SyncJob", "EnqueueJob", "SyncQueue", "OpenQueue", "CloseQueue",
        },
    ),
    (PodGroupPhase, {"Pending", "Running", "Unknown", "Inqueue", "Completed"}),
    (QueueState, {"Open", "Closed", "Closing", "Unknown"}),
    (models.NumaPolicy, {"none", "best-effort", "restricted", "single-numa-node"}),
    (models.ConcurrencyPolicy, {"Allow", "Forbid", "Replace"}),
    (models.NetworkTopologyMode, {"hard", "soft"}),
    (models.FlowPhase, {"Succeed", "Terminating", "Failed", "Running", "Pending"}),
    (models.RetainPolicy, {"retain", "delete"}),
    (models.MemberType, {"Node", "HyperNode"}),
    (models.PodGroupConditionType, {"Unschedulable", "Scheduled"}),
    (models.DequeueStrategy, {"fifo", "traverse"}),
]  # fmt: skip


@pytest.mark.parametrize(("enum_cls", "values"), ENUMS, ids=[e[0].__name__ for e in ENUMS])
def test_enum_values(enum_cls: type, values: set[str]) -> None:
    assert {m.value for m in enum_cls} == values


def test_known_enum_values_become_members_unknown_stay_strings() -> None:
    policy = LifecyclePolicy.model_validate(
        {"event": "PodEvicted", "events": ["PodFailed", "Nope"], "action": "RestartJob"}
    )
    assert policy.event is Event.POD_EVICTED
    assert policy.action is Action.RESTART_JOB
    assert policy.events == [Event.POD_FAILED, "Nope"]
    assert type(policy.events[1]) is str
    odd = LifecyclePolicy.model_validate({"action": "RebootCluster"})
    assert odd.action == "RebootCluster" and odd.to_dict() == {"action": "RebootCluster"}


def test_enum_members_render_as_their_values() -> None:
    cmd = Command(action=Action.ABORT_JOB, target={"kind": "Job", "name": "j"})
    assert cmd.to_dict()["action"] == "AbortJob"
    assert isinstance(Action.ABORT_JOB, str) and Action.ABORT_JOB == "AbortJob"


# --- strictness --------------------------------------------------------------------------------------------------

STRICT = [
    (JobSpec, {"minAvailable": "3"}, "minAvailable"),
    (models.QueueSpec, {"reclaimable": "true"}, "reclaimable"),
    (models.CronJobSpec, {"suspend": 1}, "suspend"),
    (models.HyperNodeSpec, {"tier": "1"}, "tier"),
    (JobSpec, {"tasks": "not-a-list"}, "tasks"),
]


@pytest.mark.parametrize(("cls", "doc", "field"), STRICT, ids=[s[2] for s in STRICT])
def test_wrong_types_are_rejected_not_coerced(cls: type[models.VolcanoModel], doc: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        cls.model_validate(doc)


# --- typed access to the common paths ----------------------------------------------------------------------------


def test_typed_access() -> None:
    job = Job.model_validate(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "labels": {labels.JOB_TYPE_KEY: "mpi"}},
            "spec": {
                "minAvailable": 2,
                "queue": "q",
                "networkTopology": {"mode": "soft", "highestTierAllowed": 2},
                "tasks": [
                    {
                        "name": "w",
                        "replicas": 4,
                        "dependsOn": {"name": ["ps"], "iteration": "all"},
                        "partitionPolicy": {"totalPartitions": 2, "partitionSize": 2},
                        "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
                    }
                ],
                "policies": [{"exitCode": 3, "action": "RestartTask", "timeout": "1m0s"}],
            },
            "status": {"state": {"phase": "Running"}, "taskStatusCount": {"w": {"phase": {"Running": 4}}}},
        }
    )
    assert job.metadata is not None and job.metadata.namespace == "ns"
    assert job.spec is not None and job.spec.network_topology is not None
    assert job.spec.network_topology.mode is models.NetworkTopologyMode.SOFT
    task = job.spec.tasks[0]  # type: ignore[index]
    assert task.depends_on is not None and task.depends_on.iteration is models.Iteration.ALL
    assert task.partition_policy is not None and task.partition_policy.partition_size == 2
    assert job.spec.policies is not None and job.spec.policies[0].exit_code == 3
    assert job.status is not None and job.status.state is not None and job.status.state.phase is JobPhase.RUNNING
    assert job.status.task_status_count is not None and job.status.task_status_count["w"].phase == {"Running": 4}


def test_other_kinds_parse() -> None:
    hn = from_object(
        {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^n-"}}}]},
        }
    )
    assert isinstance(hn, HyperNode) and hn.spec is not None and hn.spec.members is not None
    assert hn.spec.members[0].type is models.MemberType.NODE
    cron = from_object(
        {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob", "spec": {"schedule": "* * * * *"}}
    )
    assert isinstance(cron, CronJob)
    flow = from_object(
        {
            "apiVersion": "flow.volcano.sh/v1alpha1",
            "kind": "JobFlow",
            "spec": {"flows": [{"name": "b", "dependsOn": {"targets": ["a"]}, "patch": {"jobSpec": {"queue": "q"}}}]},
        }
    )
    assert isinstance(flow, JobFlow) and flow.spec is not None and flow.spec.flows is not None
    assert flow.spec.flows[0].patch is not None and flow.spec.flows[0].patch.job_spec is not None
    numa = from_object(
        {
            "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
            "kind": "Numatopology",
            "spec": {
                "policies": {"CPUManagerPolicy": "static"},
                "cpuDetail": {"0": {"numa": 0, "socket": 0, "core": 0}},
            },
        }
    )
    assert isinstance(numa, Numatopology) and numa.spec is not None and numa.spec.cpu_detail is not None
    assert numa.spec.cpu_detail["0"].numa == 0


def test_resource_lists_stay_wire_strings_and_parse_with_quantity() -> None:
    q = Queue.model_validate({"spec": {"capability": {"cpu": "1000m", "memory": "1.5Gi"}}})
    assert q.to_dict()["spec"]["capability"] == {"cpu": "1000m", "memory": "1.5Gi"}  # not canonicalized
    assert q.spec is not None
    cap = quantity.resource_list(q.spec.capability)
    assert quantity.render(cap) == {"cpu": "1", "memory": "1536Mi"}


LABELS = [
    (labels.JOB_NAME_KEY, "volcano.sh/job-name"),
    (labels.GROUP_NAME_ANNOTATION, "scheduling.k8s.io/group-name"),
    (labels.TASK_SPEC_KEY, "volcano.sh/task-spec"),
    (labels.TASK_INDEX_KEY, "volcano.sh/task-index"),
    (labels.QUEUE_NAME_ANNOTATION, "scheduling.volcano.sh/queue-name"),
    (labels.PREEMPTABLE_KEY, "volcano.sh/preemptable"),
    (labels.POD_TEMPLATE_KEY, "volcano.sh/template-uid"),
    (labels.HIERARCHY_WEIGHTS_ANNOTATION, "volcano.sh/hierarchy-weights"),
]


@pytest.mark.parametrize(("constant", "key"), LABELS, ids=[key for _, key in LABELS])
def test_label_keys(constant: str, key: str) -> None:
    assert constant == key


def test_label_module_exports_only_keys() -> None:
    assert all(isinstance(getattr(labels, name), str) for name in labels.__all__)
    assert len({getattr(labels, name) for name in labels.__all__}) == len(labels.__all__)
