"""`/jobs/mutate` and `/jobs/validate`: the shapes of Volcano's own tables (admit_job_test.go, mutate_job_test.go),
the spec §4.1/§4.2 rules, and Volcano's example manifests."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from lahar.policies.admission import AdmissionConfig
from lahar.webhooks import _jobs_rules as rules
from lahar.webhooks import devices, jobs, review
from lahar.webhooks.lookups import StaticLookups
from tests import builders

EXAMPLES = Path(__file__).resolve().parents[3] / ".." / "shared" / "volcano-examples"
VALID_EVENTS = "[* PodFailed PodEvicted PodPending Unknown TaskCompleted TaskFailed JobUpdated]"
VALID_ACTIONS = ("[AbortJob RestartJob RestartTask RestartPod RestartPartition TerminateJob CompleteJob "
                 "ResumeJob]")
POLICY_SUFFIX = f" valid events are {VALID_EVENTS}, valid actions are {VALID_ACTIONS};"


# -- builders ------------------------------------------------------------------------------------------------------


def container(name: str = "fake-name", **resources: Any) -> dict:
    c: dict[str, Any] = {"name": name, "image": "busybox:1.24"}
    if resources:
        c["resources"] = resources
    return c


def task(name: str = "task-1", replicas: int = 1, *, containers: list | None = None, **extra: Any) -> dict:
    spec = extra.pop("pod_spec", {})
    template = {"metadata": {"labels": {"name": "test"}},
                "spec": {"containers": containers if containers is not None else [container()], **spec}}
    return builders.task(name, replicas, template=template, **extra)


def job(name: str = "job", *tasks: dict, namespace: str = "test", **spec: Any) -> dict:
    return builders.vcjob(name, namespace).spec(minAvailable=1, queue="default").tasks(*(tasks or [task()])).spec(
        **spec).build()


def queue(name: str, *, parent: str = "", state: str = "Open") -> dict:
    q = builders.queue(name)
    return (q.parent(parent) if parent else q).bare() | ({"status": {"state": state}} if state else {})


def validate(obj: dict, *objects: dict, operation: str = "CREATE", old: dict | None = None) -> review.Verdict:
    req = review.request_for(obj, resource="jobs", operation=operation, old_object=old)
    return jobs.validate(req, StaticLookups(objects), AdmissionConfig())


def mutate(obj: dict, *, operation: str = "CREATE", config: AdmissionConfig | None = None) -> review.Verdict:
    req = review.request_for(obj, resource="jobs", operation=operation, old_object=obj if operation != "CREATE" else None)
    return jobs.mutate(req, StaticLookups(), config or AdmissionConfig())


# -- /jobs/validate CREATE: Volcano's TestValidateJobCreate, in its order ------------------------------------------

_HUGE = "hugepages-1Mi"

CREATE_CASES: list[tuple[str, dict, str | None]] = [
    ("simple-valid-job", job("simple-valid-job", task(containers=[container("task-1")])), None),
    ("simple-valid-job-with-policy",
     job("p", policies=[{"event": "PodEvicted", "action": "RestartTask"}]), None),
    ("valid-job-with-pod-level-resources", job("plr", task(
        containers=[container(requests={"cpu": "2", "memory": "4Gi", _HUGE: "1Gi"},
                              limits={"cpu": "2", "memory": "4Gi", _HUGE: "1Gi"})],
        pod_spec={"resources": {"requests": {"cpu": "4", "memory": "8Gi", _HUGE: "2Gi"},
                                "limits": {"cpu": "4", "memory": "8Gi", _HUGE: "2Gi"}}}),
        policies=[{"event": "PodEvicted", "action": "RestartTask"}]), None),
    ("duplicate-task-job", job("duplicate-task-job", task("duplicated-task-1"), task("duplicated-task-1")),
     "duplicated task name duplicated-task-1;"),
    ("job-policy-duplicated", job("d", policies=[{"event": "PodFailed", "action": "AbortJob"},
                                                 {"event": "PodFailed", "action": "RestartJob"}]),
     "1 error occurred:\n\t* duplicate event PodFailed  across different policy\n\n" + POLICY_SUFFIX),
    ("min-available-illegal", job("job-min-illegal", minAvailable=2),
     "job 'minAvailable' should not be greater than total replicas in tasks;"),
    ("job-plugin-illegal", job("job-plugin-illegal", plugins={"big_plugin": []}),
     "unable to find job plugin: big_plugin;"),
    ("no-task", job("no-task", tasks=[]), "No task specified in job spec"),
    # replicas < 0 is the CRD schema's business now; the webhook only sees the sum fall short of minAvailable
    ("replica-less-than-zero", job("r", task(replicas=-1)),
     "job 'minAvailable' should not be greater than total replicas in tasks;"),
    ("policy-event-and-exit-code", job("e", policies=[{"event": "PodFailed", "action": "AbortJob", "exitCode": -1}]),
     "1 error occurred:\n\t* must not specify event and exitCode simultaneously\n\n" + POLICY_SUFFIX),
    ("policy-no-event-no-exit-code", job("n", policies=[{"action": "AbortJob"}]),
     "1 error occurred:\n\t* either event and exitCode should be specified\n\n" + POLICY_SUFFIX),
    ("invalid-policy-event", job("i", policies=[{"event": "someFakeEvent", "action": "AbortJob"}]),
     '1 error occurred:\n\t* spec.policies: Invalid value: "someFakeEvent": invalid policy event\n\n' + POLICY_SUFFIX),
    ("invalid-policy-action", job("a", policies=[{"event": "PodEvicted", "action": "someFakeAction"}]),
     '1 error occurred:\n\t* spec.policies: Invalid value: "someFakeAction": invalid policy action\n\n'
     + POLICY_SUFFIX),
    ("policy-exit-code-zero", job("z", policies=[{"action": "AbortJob", "exitCode": 0}]),
     "1 error occurred:\n\t* 0 is not a valid error code\n\n" + POLICY_SUFFIX),
    ("duplicate-exit-code", job("x", policies=[{"exitCode": 1}, {"exitCode": 1}]),
     "1 error occurred:\n\t* duplicate exitCode 1\n\n" + POLICY_SUFFIX),
    ("policy-any-and-other-events", job("y", policies=[{"event": "*", "action": "AbortJob"},
                                                       {"event": "PodFailed", "action": "RestartJob"}]),
     "1 error occurred:\n\t* if there's * here, no other policy should be here\n\n" + POLICY_SUFFIX),
    ("invalid-mount-volume", job("v", policies=[{"event": "*", "action": "AbortJob"}], volumes=[{"mountPath": ""}]),
     "mountPath is required;"),
    ("duplicate-mount-volume", job("v", volumes=[{"mountPath": "/var", "volumeClaimName": "pvc1"},
                                                 {"mountPath": "/var", "volumeClaimName": "pvc2"}]),
     "duplicated mountPath: /var;"),
    ("volume-without-claim", job("v", volumes=[{"mountPath": "/var"}, {"mountPath": "/var"}]),
     "either VolumeClaim or VolumeClaimName must be specified;"),
    ("task-policy-any-and-other-events", job("t", task(policies=[{"event": "*", "action": "AbortJob"},
                                                                 {"event": "PodFailed", "action": "RestartJob"}])),
     "1 error occurred:\n\t* if there's * here, no other policy should be here\n\n" + POLICY_SUFFIX),
    ("job-with-no-queue", job("q", queue="jobQueue"),
     'unable to find job queue: queue.scheduling.volcano.sh "jobQueue" not found;'),
    ("privileged-init-container", job("valid-job", task(pod_spec={"initContainers": [
        {**container("init-fake-name"), "securityContext": {"privileged": True}}]})), None),
    ("privileged-container", job("valid-job", task(containers=[
        {**container(), "securityContext": {"privileged": True}}])), None),
    ("valid-task-depends-on", job("dag", task("t1", dependsOn={"name": ["t2"]}), task("t2")), None),
    ("invalid-task-depends-on", job("dag", task("t1", dependsOn={"name": ["t3"]}), task("t2")),
     "job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG);"),
    ("partition-size-less-than-zero", job("PartitionSize-lessThanZero", task(
        replicas=8, partitionPolicy={"partitionSize": -1, "totalPartitions": 8})),
     "'PartitionSize' must be greater than 0 in task: task-1, job: PartitionSize-lessThanZero;"),
    ("total-partitions-less-than-zero", job("TotalPartitions-lessThanZero", task(
        replicas=8, partitionPolicy={"partitionSize": 8, "totalPartitions": -1})),
     "'TotalPartitions' must be greater than 0 in task: task-1, job: TotalPartitions-lessThanZero;"),
    ("replicas-not-total-times-size", job("task-with-invalid-PartitionPolicy", task(
        replicas=8, partitionPolicy={"partitionSize": 3, "totalPartitions": 2})),
     "'Replicas' are not equal to TotalPartitions*PartitionSize in task: task-1, job: "
     "task-with-invalid-PartitionPolicy;"),
    ("valid-partition-policy", job("pp", task(replicas=8, partitionPolicy={"partitionSize": 4,
                                                                           "totalPartitions": 2})), None),
    ("valid-network-topology-and-partition", job("nt", task(replicas=8, partitionPolicy={
        "partitionSize": 4, "totalPartitions": 2,
        "networkTopology": {"mode": "hard", "highestTierName": "volcano.sh/hypernode"}}),
        networkTopology={"mode": "hard", "highestTierName": "volcano.sh/hypernode"}), None),
    ("invalid-network-topology-and-partition", job("nt", task(replicas=8, partitionPolicy={
        "partitionSize": 4, "totalPartitions": 2,
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "volcano.sh/hypernode"}}),
        networkTopology={"mode": "hard", "highestTierAllowed": 1, "highestTierName": "volcano.sh/hypernode"}),
     "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously; "
     "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously;"),
    ("invalid-job-network-topology", job("nt", task(replicas=8, partitionPolicy={
        "partitionSize": 4, "totalPartitions": 2}),
        networkTopology={"mode": "hard", "highestTierAllowed": 1, "highestTierName": "volcano.sh/hypernode"}),
     "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously;"),
    ("invalid-partition-network-topology", job("nt", task(replicas=8, partitionPolicy={
        "partitionSize": 4, "totalPartitions": 2,
        "networkTopology": {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "volcano.sh/hypernode"}})),
     "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously;"),
    ("valid-min-partitions", job("mp", task(replicas=8, partitionPolicy={
        "partitionSize": 4, "totalPartitions": 2, "minPartitions": 1})), None),
    ("min-available-not-min-partitions-times-size", job("task-with-invalid-PartitionPolicy-MinPartitions", task(
        replicas=8, minAvailable=4, partitionPolicy={"partitionSize": 2, "totalPartitions": 4, "minPartitions": 1})),
     "'MinAvailable' is not equal to MinPartitions*PartitionSize in task: task-1, job: "
     "task-with-invalid-PartitionPolicy-MinPartitions;"),
    ("min-available-equals-min-partitions-times-size", job("mp", task(
        replicas=8, minAvailable=4, partitionPolicy={"partitionSize": 2, "totalPartitions": 4, "minPartitions": 2})),
     None),
    ("mpi-valid-master", job("mpi", task("launcher", containers=[container("launcher")]),
                             task("worker", 2, containers=[container("worker")]),
                             plugins={"mpi": ["--master=launcher"]}), None),
    ("mpi-valid-master-without-worker", job("mpi", task("launcher"), plugins={"mpi": ["--master=launcher"]}), None),
    ("mpi-invalid-master", job("mpi", task("worker", 2), plugins={"mpi": ["--master=launcher"]}),
     "The specified mpi master task was not found"),
    ("pod-level-requests-below-aggregate", job("plr", task(
        containers=[container("fake-name-1", requests={"cpu": "2"}), container("fake-name-2", requests={"cpu": "2"})],
        pod_spec={"initContainers": [container("fake-name-0", requests={"cpu": "2"})],
                  "resources": {"requests": {"cpu": "2", _HUGE: "2Gi", "hugepages-1Ki": "2Gi"},
                                "limits": {"cpu": "2", _HUGE: "2Gi", "hugepages-1Ki": "2Gi"}}})),
     'spec.task[0].template.spec.resources.requests[cpu]: Invalid value: "2": must be greater than or equal to '
     "aggregate container requests of 4. "),
    # a sidecar (restartable init container) runs beside the app containers: 2 + 2 = 4 > 3 (kube's aggregate)
    ("pod-level-requests-below-app-plus-sidecar", job("plr", task(
        containers=[container("app", requests={"cpu": "2"})],
        pod_spec={"initContainers": [container("side", requests={"cpu": "2"}) | {"restartPolicy": "Always"}],
                  "resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "4"}}})),
     'spec.task[0].template.spec.resources.requests[cpu]: Invalid value: "3": must be greater than or equal to '
     "aggregate container requests of 4. "),
    ("pod-level-requests-above-limits", job("plr", task(
        containers=[container("fake-name-1", requests={"cpu": "2"}, limits={"cpu": "2"}),
                    container("fake-name-2", requests={"cpu": "2"}, limits={"cpu": "2"})],
        pod_spec={"resources": {"requests": {"cpu": "6"}, "limits": {"cpu": "4"}}})),
     'spec.task[0].template.spec.resources.requests: Invalid value: "6": must be less than or equal to cpu limit '
     "of 4. "),
]


@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in CREATE_CASES], ids=[c[0] for c in CREATE_CASES])
def test_validate_create_upstream_table(obj: dict, expected: str | None) -> None:
    verdict = validate(obj)
    if expected is None:
        assert verdict.allowed, verdict.message
    else:
        assert not verdict.allowed
        assert verdict.message == expected.strip()


# -- TestValidateHierarchyCreate: root, parent and leaf queues ------------------------------------------------------

HIERARCHY = (queue("root"), queue("parentQueue", parent="root"), queue("childQueue", parent="parentQueue"))


@pytest.mark.parametrize(("queue_name", "expected"), [
    ("root", "can not submit job to root queue;"),
    ("parentQueue", "can only submit job to leaf queue, queue `parentQueue` has 1 child queues;"),
    ("childQueue", None),
], ids=["root-queue", "parent-queue", "leaf-queue"])
def test_validate_hierarchy(queue_name: str, expected: str | None) -> None:
    verdict = validate(job("h", queue=queue_name), *HIERARCHY)
    assert verdict.allowed is (expected is None)
    assert verdict.message == (expected or "")


# -- more of spec §4.2 ----------------------------------------------------------------------------------------------

SPEC_CASES: list[tuple[str, dict, tuple[dict, ...], str | None]] = [
    ("closed-queue", job("c", queue="q1"), (queue("q1", state="Closed"),),
     "can only submit job to queue with state `Open`, queue `q1` status is `Closed`;"),
    ("queue-without-state-counts-as-open", job("c", queue="q1"), (queue("q1", state=""),), None),  # beyond Volcano
    ("queue-without-state-under-closed-parent", job("c", queue="q1"),
     (queue("p", state="Closed"), queue("q1", parent="p", state="")),
     "can only submit job to queue with state `Open`, queue `q1` status is ``;"),
    ("closed-parent-queue-counts-children", job("c", queue="p"),
     (queue("p", state="Closed"), queue("c1", parent="p"), queue("c2", parent="p")),
     "can only submit job to queue with state `Open`, queue `p` status is `Closed`; can only submit job to leaf "
     "queue, queue `p` has 2 child queues;"),
    ("task-min-available-over-replicas", job("j", task(replicas=1, minAvailable=2)), (),
     "'minAvailable' is greater than 'replicas' in task: task-1, job: j;"),
    ("job-name-not-qualified", job("bad name"), (),
     "create pod with name bad name-task-1-0 validate failed [name part must consist of alphanumeric characters, "
     "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
     "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')];create job with name "
     "bad name validate failed [name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
     "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
     "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')]"),
    ("pod-name-too-long", job("j" * 50, task("t" * 12)), (),
     f"create pod with name {'j' * 50}-{'t' * 12}-0 validate failed [name part must be no more than 63 "
     "characters];"),
    ("volume-claim-and-name", job("v", volumes=[{"mountPath": "/d", "volumeClaimName": "x", "volumeClaim": {}}]), (),
     "conflict: If you want to use an existing PVC, just specify VolumeClaimName.If you want to create a new PVC, "
     "you do not need to specify VolumeClaimName"),
    ("volume-claim-name-invalid", job("v", volumes=[{"mountPath": "/d", "volumeClaimName": "Bad_Name"}]), (),
     "invalid VolumeClaimName Bad_Name : [a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
     "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
     "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')]"),
    ("volume-claim-ok", job("v", volumes=[{"mountPath": "/d", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}]),
     (), None),
    ("dependency-cycle", job("dag", task("a", dependsOn={"name": ["b"]}), task("b", dependsOn={"name": ["a"]})),
     (), "job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG);"),
    ("self-dependency", job("dag", task("a", dependsOn={"name": ["a"]})),
     (), "job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG);"),
    ("empty-depends-on", job("dag", task("a", dependsOn={"name": []})), (), None),
    ("task-policy-event-list-valid", job("p", task(policies=[{"events": ["PodFailed", "PodEvicted"],
                                                              "action": "RestartTask"}])), (), None),
    ("internal-event-refused", job("p", policies=[{"event": "OutOfSync", "action": "AbortJob"}]), (),
     '1 error occurred:\n\t* spec.policies: Invalid value: "OutOfSync": invalid policy event\n\n' + POLICY_SUFFIX),
    ("internal-action-refused", job("p", policies=[{"event": "PodFailed", "action": "SyncJob"}]), (),
     '1 error occurred:\n\t* spec.policies: Invalid value: "SyncJob": invalid policy action\n\n' + POLICY_SUFFIX),
    ("new-events-and-actions", job("p", policies=[{"event": "PodPending", "action": "RestartPod"},
                                                  {"event": "TaskFailed", "action": "RestartPartition"}]), (), None),
    ("task-policy-path", job("p", task(policies=[{"event": "Nope", "action": "AbortJob"}])), (),
     '1 error occurred:\n\t* spec.tasks.policies: Invalid value: "Nope": invalid policy event\n\n' + POLICY_SUFFIX),
    ("all-known-plugins", job("p", plugins={p: [] for p in sorted(rules.KNOWN_PLUGINS) if p != "mpi"}), (), None),
    ("two-unknown-plugins", job("p", plugins={"a": [], "b": []}), (),
     "unable to find job plugin: a; unable to find job plugin: b;"),
    ("mpi-default-master-missing", job("mpi", task("worker"), plugins={"mpi": []}), (),
     "The specified mpi master task was not found"),
    ("mpi-default-master", job("mpi", task("master"), task("worker"), plugins={"mpi": ["--port=22"]}), (), None),
    ("mpi-master-separate-value", job("mpi", task("head"), plugins={"mpi": ["--master", "head"]}), (), None),
    ("no-containers", job("c", task(containers=[])), (), "spec.task[0].template.spec.containers: Required value. "),
    ("container-name-invalid-and-duplicate", job("c", task(containers=[container("Web"), container("Web")])), (),
     'spec.task[0].template.spec.containers[0].name: Invalid value: "Web": a lowercase RFC 1123 label must consist '
     "of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. "
     "'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?'). "
     'template.spec.containers[1].name: Invalid value: "Web": a lowercase RFC 1123 label must consist of lower case '
     "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
     "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?'). "
     'template.spec.containers[1].name: Duplicate value: "Web". '),
    ("container-requests-above-limits", job("c", task(containers=[
        container(requests={"cpu": "2"}, limits={"cpu": "1"})])), (),
     'spec.task[0].template.spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal '
     "to cpu limit of 1. "),
    ("negative-request", job("c", task(containers=[container(requests={"memory": "-1Gi"})])), (),
     'spec.task[0].template.spec.containers[0].resources.requests[memory]: Invalid value: "-1Gi": must be greater '
     "than or equal to 0. "),
    ("extended-request-without-limit", job("c", task(containers=[container(requests={"nvidia.com/gpu": "1"})])), (),
     "spec.task[0].template.spec.containers[0].resources.limits: Required value: Limit must be set for non "
     "overcommitable resources. "),
    ("extended-request-not-equal-limit", job("c", task(containers=[
        container(requests={"nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": "2"})])), (),
     'spec.task[0].template.spec.containers[0].resources.requests: Invalid value: "1": must be equal to '
     "nvidia.com/gpu limit of 2. "),
    ("restart-policy-unsupported", job("c", task(pod_spec={"restartPolicy": "Sometimes"})), (),
     'spec.task[0].template.spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", '
     '"Never", "OnFailure". '),
    ("task-name-not-subdomain", job("c", task("Task1")), (),
     'spec.task[0].metadata.name: Invalid value: "Task1": a lowercase RFC 1123 subdomain must consist of lower case '
     "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
     "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'"
     "). "),
    # TestValidateTaskTopoPolicy
    ("topology-policy-integer-cpu", job("t", task(topologyPolicy="restricted", containers=[
        container(limits={"cpu": "1", "memory": "2000"})])), (), None),
    ("topology-policy-fractional-cpu", job("t", task(topologyPolicy="restricted", containers=[
        container(limits={"cpu": "500m", "memory": "2000"})])), (),
     "the cpu request isn't  an integer in spec.task[0] container[0]."),
    ("topology-policy-none-ignores-cpu", job("t", task(topologyPolicy="none", containers=[
        container(requests={"cpu": "500m"})])), (), None),
    ("messages-concatenate", job("j", task(replicas=1, minAvailable=2), minAvailable=3, plugins={"nope": []},
                                 queue="missing"), (),
     "'minAvailable' is greater than 'replicas' in task: task-1, job: j; job 'minAvailable' should not be greater "
     "than total replicas in tasks; unable to find job plugin: nope; unable to find job queue: "
     'queue.scheduling.volcano.sh "missing" not found;'),
]


@pytest.mark.parametrize(("obj", "objects", "expected"), [c[1:] for c in SPEC_CASES], ids=[c[0] for c in SPEC_CASES])
def test_validate_create_spec_rules(obj: dict, objects: tuple[dict, ...], expected: str | None) -> None:
    verdict = validate(obj, *objects)
    if expected is None:
        assert verdict.allowed, verdict.message
    else:
        assert not verdict.allowed
        assert verdict.message == expected.strip()


def test_device_checks_on_task_templates() -> None:
    """A task template with a bad device request is refused before any pod exists, prefixed by its task index."""
    bad = container(limits={"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory-percentage": "150"})
    spec = {"containers": [bad]}
    expected = devices.check_pod_spec(spec, config=AdmissionConfig(), annotations={})
    assert expected, "the devices module should refuse a 150% memory share"
    verdict = validate(job("gpu", task(containers=[bad])))
    assert not verdict.allowed
    assert verdict.message == "".join(f" spec.task[0].template: {e};" for e in expected).strip()


def test_other_operations_are_refused() -> None:
    obj = job()
    req = review.request_for(obj, resource="jobs", operation="DELETE", old_object=obj)
    verdict = jobs.validate(req, StaticLookups(), AdmissionConfig())
    assert (verdict.allowed, verdict.message) == (False, "expect operation to be 'CREATE' or 'UPDATE'")


# -- /jobs/validate UPDATE: Volcano's TestValidateJobUpdate + spec §4.2 -------------------------------------------


def _base() -> dict:
    return job("valid-job", task(replicas=5), namespace="default", minAvailable=5,
               policies=[{"event": "PodEvicted", "action": "RestartTask"}])


def _changed(**changes: Any) -> dict:
    new = _base()
    new["metadata"]["resourceVersion"] = "502593"
    new["status"] = {"succeeded": 2}
    spec = new["spec"]
    spec["minAvailable"] = changes.get("min_available", 5)
    spec["tasks"][0]["replicas"] = changes.get("replicas", 5)
    if changes.get("add_task"):
        spec["tasks"].append(task("task-2", 5))
    if changes.get("rename_task"):
        spec["tasks"][0]["name"] = "mutated-name"
    if changes.get("queue"):
        spec["queue"] = changes["queue"]
    for key in ("priorityClassName", "task_min_available", "maxRetry", "volumes", "networkTopology"):
        if key in changes:
            if key == "task_min_available":
                spec["tasks"][0]["minAvailable"] = changes[key]
            else:
                spec[key] = changes[key]
    return new


UPDATE_CASES: list[tuple[str, dict, str | None]] = [
    ("scale-up", _changed(replicas=6, min_available=5), None),
    ("invalid-scale-down-below-min-available", _changed(replicas=4, min_available=5),
     "job 'minAvailable' must not be greater than total replicas"),
    ("scale-down", _changed(replicas=4, min_available=3), None),
    ("invalid-add-task", _changed(replicas=4, min_available=5, add_task=True), "job updates may not add or remove tasks"),
    ("invalid-rename-task", _changed(rename_task=True), f"{rules.UPDATE_OTHER_FIELDS}: spec.tasks[0].name changed"),
    ("invalid-change-queue", _changed(queue="mutated-queue"), f"{rules.UPDATE_OTHER_FIELDS}: spec.queue changed"),
    ("negative-replicas", _changed(replicas=-1, min_available=0), "'replicas' must be >= 0 in task: task-1"),
    ("negative-task-min-available", _changed(task_min_available=-1), "'minAvailable' must be >= 0 in task: task-1"),
    ("task-min-available-over-replicas", _changed(task_min_available=6),
     "'minAvailable' must be <= 'replicas' in task: task-1"),
    ("negative-min-available", _changed(min_available=-1), "job 'minAvailable' must be >= 0"),
    ("priority-class-may-change", _changed(priorityClassName="high"), None),
    ("task-min-available-may-change", _changed(task_min_available=3), None),
    ("max-retry-may-not-change", _changed(maxRetry=7), f"{rules.UPDATE_OTHER_FIELDS}: spec.maxRetry changed"),
    ("network-topology-conflict", _changed(networkTopology={"highestTierAllowed": 1, "highestTierName": "x"}),
     rules.NETWORK_TOPOLOGY_CONFLICT),
]


@pytest.mark.parametrize(("new", "expected"), [c[1:] for c in UPDATE_CASES], ids=[c[0] for c in UPDATE_CASES])
def test_validate_update(new: dict, expected: str | None) -> None:
    verdict = validate(new, operation="UPDATE", old=_base())
    assert verdict.allowed is (expected is None), verdict.message
    assert verdict.message == (expected or "")


def test_update_ignores_controller_filled_claim_name_and_empty_fields() -> None:
    old = _base()
    old["spec"]["volumes"] = [{"mountPath": "/d", "volumeClaim": {"accessModes": ["ReadWriteOnce"]}}]
    new = copy.deepcopy(old)
    new["spec"]["volumes"][0]["volumeClaimName"] = "valid-job-pvc-abcdef012345"
    new["spec"]["plugins"] = {}             # empty map == absent map, as Go's semantic equality says
    new["spec"]["tasks"][0]["policies"] = []
    assert validate(new, operation="UPDATE", old=old).allowed


# -- /jobs/mutate: Volcano's TestCreatePatchExecution + spec §4.1 ---------------------------------------------------


def _patched(obj: dict, **kw: Any) -> tuple[review.Verdict, dict]:
    verdict = mutate(obj, **kw)
    return verdict, jsonpatch.apply_patch(obj, list(verdict.patch))


def test_mutate_default_task_names_upstream() -> None:
    obj = job("path-task-name", task(""), task(""), minAvailable=1)
    del obj["spec"]["queue"]
    verdict, out = _patched(obj)
    tasks_op = next(op for op in verdict.patch if op["path"] == "/spec/tasks")
    assert tasks_op["op"] == "replace"
    assert [t["name"] for t in out["spec"]["tasks"]] == ["default0", "default1"]
    assert all(t["maxRetry"] == rules.DEFAULT_MAX_RETRY for t in out["spec"]["tasks"])


def test_mutate_all_defaults_in_volcano_order() -> None:
    obj = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"},
           "spec": {"tasks": [task("a", 2), task("b", 3, minAvailable=1)], "plugins": {"pytorch": ["--port=1"]}}}
    verdict, out = _patched(obj)
    assert [op["path"] for op in verdict.patch] == ["/spec/queue", "/spec/schedulerName", "/spec/maxRetry",
                                                     "/spec/tasks", "/spec/minAvailable", "/spec/plugins"]
    spec = out["spec"]
    assert (spec["queue"], spec["schedulerName"], spec["maxRetry"], spec["minAvailable"]) == ("default", "volcano", 3,
                                                                                                3)
    assert [(t["minAvailable"], t["maxRetry"]) for t in spec["tasks"]] == [(2, 3), (1, 3)]
    assert spec["plugins"] == {"pytorch": ["--port=1"], "svc": []}
    assert obj["spec"]["tasks"][0].get("minAvailable") is None, "the review's object must not be changed"


@pytest.mark.parametrize(("plugins", "expected"), [
    ({"mpi": []}, {"mpi": [], "svc": [], "ssh": []}),
    ({"tensorflow": [], "svc": ["--disable-network-policy"]}, {"tensorflow": [], "svc": ["--disable-network-policy"]}),
    ({"ray": []}, {"ray": [], "svc": []}),
    ({"env": []}, {"env": []}),
    ({}, {}),
], ids=["mpi-adds-svc-and-ssh", "explicit-svc-kept", "ray-adds-svc", "env-alone", "empty-map-still-replaced"])
def test_mutate_implied_plugins(plugins: dict, expected: dict) -> None:
    verdict, out = _patched(job("p", plugins=plugins))
    assert {"op": "replace", "path": "/spec/plugins", "value": expected} in verdict.patch
    assert out["spec"]["plugins"] == expected


@pytest.mark.parametrize(("task_extra", "expected"), [
    ({}, 4),
    ({"partitionPolicy": {"totalPartitions": 2, "partitionSize": 2, "minPartitions": 1}}, 2),
    ({"partitionPolicy": {"totalPartitions": 2, "partitionSize": 2}}, 4),
    ({"minAvailable": 0}, 0),
], ids=["replicas", "min-partitions-times-size", "no-min-partitions", "explicit-zero-kept"])
def test_mutate_task_min_available(task_extra: dict, expected: int) -> None:
    _, out = _patched(job("m", task("t", 4, **task_extra), minAvailable=0))
    assert out["spec"]["tasks"][0]["minAvailable"] == expected
    assert out["spec"]["minAvailable"] == expected


def test_mutate_host_network_dns_policy() -> None:
    _, out = _patched(job("h", task(pod_spec={"hostNetwork": True}), task("t2", pod_spec={"hostNetwork": True,
                                                                                         "dnsPolicy": "Default"})))
    assert out["spec"]["tasks"][0]["template"]["spec"]["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert out["spec"]["tasks"][1]["template"]["spec"]["dnsPolicy"] == "Default"


def test_mutate_nothing_to_do_means_no_patch() -> None:
    obj = job("done", task(minAvailable=1, maxRetry=2), schedulerName="volcano", maxRetry=5)
    assert mutate(obj) == review.Verdict.allow()


def test_mutate_scheduler_name_from_config() -> None:
    config = AdmissionConfig(scheduler_names=("lahar", "volcano"), default_queue="batch")
    verdict, out = _patched({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "c"},
                             "spec": {"tasks": [task()]}}, config=config)
    assert (out["spec"]["schedulerName"], out["spec"]["queue"]) == ("lahar", "batch")


def test_mutate_refuses_other_operations() -> None:
    verdict = mutate(job(), operation="DELETE")
    assert (verdict.allowed, verdict.message) == (False, "expect operation to be 'CREATE' ")


# -- Volcano's example manifests ------------------------------------------------------------------------------------

INVALID_JOBS = {
    "duplicatedPolicyEvent-webhook-deny.yaml":
        "1 error occurred:\n\t* duplicate event PodFailed  across different policy\n\n" + POLICY_SUFFIX,
    "duplicatedTaskName-webhook-deny.yaml": "duplicated task name task-1;",
    "minAvailable-webhook-deny.yaml": "job 'minAvailable' should not be greater than total replicas in tasks;",
}


def _examples(pattern: str) -> list[dict]:
    if not EXAMPLES.is_dir():
        pytest.skip("../shared/volcano-examples is not present")
    docs = []
    for path in sorted(EXAMPLES.rglob(pattern)):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict))
    return docs


def _admit(obj: dict, objects: list[dict]) -> review.Verdict:
    lookups = StaticLookups(objects)
    obj = {**obj, "metadata": {"namespace": "default", **obj["metadata"]}}
    mutated = jobs.mutate(review.request_for(obj, resource="jobs"), lookups, AdmissionConfig())
    assert mutated.allowed
    obj = jsonpatch.apply_patch(obj, list(mutated.patch))
    return jobs.validate(review.request_for(obj, resource="jobs"), lookups, AdmissionConfig())


@pytest.mark.parametrize("name", sorted(INVALID_JOBS))
def test_invalid_job_examples_are_denied(name: str) -> None:
    if not (EXAMPLES / "invalid_jobs" / name).is_file():
        pytest.skip("../shared/volcano-examples is not present")
    obj = yaml.safe_load((EXAMPLES / "invalid_jobs" / name).read_text())
    verdict = _admit(obj, [])
    assert (verdict.allowed, verdict.message) == (False, INVALID_JOBS[name].strip())


def test_valid_job_examples_are_allowed() -> None:
    every = _examples("*.yaml")
    queues = [{**q, "status": {"state": "Open"}} for q in every if q.get("kind") == "Queue"]
    examples = [d for d in every if d.get("kind") == "Job" and d.get("apiVersion", "").startswith("batch.volcano.sh")
                and d["metadata"].get("name") != "test-job-webhook-disallow"]
    assert len(examples) >= 15
    refused = {d["metadata"]["name"]: v.message for d in examples if not (v := _admit(d, queues)).allowed}
    assert refused == {}
