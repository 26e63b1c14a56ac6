"""Job plugins: env, svc, ssh, pytorch, mpi, tensorflow — the env vars, ports, files and objects Volcano's plugins
produce (shapes of plugins/**/_test.go in our own words), against the in-memory cluster where they create objects."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from lahar.controllers import _job_pods, jobplugins
from lahar.controllers.jobplugins import env, hcclrank, mpi, pytorch, ray, ssh, svc, tensorflow
from lahar.kube.apiserver.memory import MemoryClient
from tests.builders import container, pod_template, task, vcjob


def job(*tasks: tuple[str, int], name: str = "tj", plugins: dict[str, list[str]] | None = None) -> dict[str, Any]:
    j = vcjob(name).uid("u-1").spec(queue="default", schedulerName="volcano", minAvailable=1, plugins=plugins or {})
    return j.tasks(*(task(n, r, template=pod_template(container(n, "img"), initContainers=[container("init", "img")]))
                     for n, r in tasks)).build()


def pod_of(j: dict[str, Any], task: str, index: int) -> dict[str, Any]:
    t = next(t for t in j["spec"]["tasks"] if t["name"] == task)
    return _job_pods.build_pod(j, t, index)


def envs(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or ()}


FLAGS = [
    ("defaults", [], {"port": 22, "master": "master", "on": False}),
    ("equals", ["--port=23", "--master=m"], {"port": 23, "master": "m", "on": False}),
    ("single-dash-and-space", ["-port", "24"], {"port": 24, "master": "master", "on": False}),
    ("bare-bool", ["--on"], {"port": 22, "master": "master", "on": True}),
    ("bool-false", ["--on=false"], {"port": 22, "master": "master", "on": False}),
    ("stops-at-unknown", ["--port=25", "--nope=1", "--master=x"], {"port": 25, "master": "master", "on": False}),
    ("stops-at-bad-int", ["--port=abc", "--on"], {"port": 22, "master": "master", "on": False}),
]


@pytest.mark.parametrize(("name", "args", "want"), FLAGS, ids=[c[0] for c in FLAGS])
def test_go_flag_parsing(name: str, args: list[str], want: dict[str, Any]) -> None:
    assert jobplugins.parse_flags(args, {"port": 22, "master": "master", "on": False}) == want


def test_registry_and_unknown_plugin() -> None:
    assert sorted(jobplugins.in_tree_registry()) == ["env", "hcclrank", "mpi", "pytorch", "ray", "ssh", "svc",
                                                     "tensorflow"]
    assert [p.name for p in jobplugins.build({"svc": [], "env": None})] == ["env", "svc"]
    with pytest.raises(jobplugins.UnknownPlugin):
        jobplugins.build({"horovod": []})


def test_env_plugin_sets_both_index_variables() -> None:
    j = job(("worker", 3))
    pod = pod_of(j, "worker", 2)
    env.EnvPlugin().on_pod_create(pod, j)
    for c in (*pod["spec"]["containers"], *pod["spec"]["initContainers"]):
        assert envs(c) == {"VK_TASK_INDEX": "2", "VC_TASK_INDEX": "2"}


def test_svc_hosts_file() -> None:
    j = job(("ps", 1), ("work-er", 2))
    assert svc.generate_hosts(j) == {
        "ps.host": "tj-ps-0.tj", "VC_PS_HOSTS": "tj-ps-0.tj", "VC_PS_NUM": "1",
        "work_er.host": "tj-work-er-0.tj\ntj-work-er-1.tj", "VC_WORK_ER_HOSTS": "tj-work-er-0.tj,tj-work-er-1.tj",
        "VC_WORK_ER_NUM": "2"}


class _Counting:
    """The cluster client port, counting the requests a plugin makes (calls through to a MemoryClient)."""

    def __init__(self, client: MemoryClient) -> None:
        self.client, self.calls = client, []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if name in ("get", "create", "update", "delete", "patch", "list"):
            def call(*args: Any, **kwargs: Any) -> Any:
                self.calls.append(name)
                return attr(*args, **kwargs)
            return call
        return attr


def _svc_job_counted() -> tuple[_Counting, jobplugins.Children, dict[str, Any], svc.SvcPlugin, dict[str, Any]]:
    """A svc job added through a counting client, the count cleared: what `on_job_update` asks is what is left."""
    counting = _Counting(MemoryClient())
    children = jobplugins.Children(counting)  # type: ignore[arg-type]
    j = job(("ps", 1), ("worker", 2))
    plugin = svc.SvcPlugin([])
    status: dict[str, Any] = {}
    plugin.on_job_add(j, status, children)
    counting.calls.clear()
    return counting, children, j, plugin, status


@pytest.mark.parametrize(("replicas", "want"), [(2, ["get"]), (3, ["get", "update"])],
                         ids=["unchanged-hosts-one-read", "scaled-up-read-and-update"])
def test_svc_update_reads_before_it_writes(replicas: int, want: list[str]) -> None:
    counting, children, j, plugin, status = _svc_job_counted()
    j["spec"]["tasks"][1]["replicas"] = replicas
    plugin.on_job_update(j, status, children)
    assert counting.calls == want  # no create answering AlreadyExists on every reconcile


def test_svc_update_creates_a_missing_hosts_configmap() -> None:
    counting, children, j, plugin, status = _svc_job_counted()
    children.delete("v1", "ConfigMap", "default", "tj-svc")
    counting.calls.clear()
    plugin.on_job_update(j, status, children)
    assert counting.calls == ["get", "create"]
    assert children.get("v1", "ConfigMap", "default", "tj-svc")["data"]["VC_WORKER_NUM"] == "2"


def test_svc_plugin_pod_and_objects() -> None:
    client = MemoryClient()
    children = jobplugins.Children(client)
    j = job(("ps", 1), ("worker", 2))
    plugin = svc.SvcPlugin(["--publish-not-ready-addresses"])
    status: dict[str, Any] = {}
    plugin.on_job_add(j, status, children)
    assert status["controlledResources"] == {"plugin-svc": "svc"}
    service = children.get("v1", "Service", "default", "tj")
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {"volcano.sh/job-name": "tj", "volcano.sh/job-namespace": "default"}
    cm = children.get("v1", "ConfigMap", "default", "tj-svc")
    assert cm["data"]["worker.host"] == "tj-worker-0.tj\ntj-worker-1.tj"
    netpol = children.get("networking.k8s.io/v1", "NetworkPolicy", "default", "tj")
    assert netpol["spec"]["policyTypes"] == ["Ingress"]
    pod = pod_of(j, "worker", 1)
    plugin.on_pod_create(pod, j)
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == ("tj-worker-1", "tj")
    assert {"name": "tj-svc", "configMap": {"name": "tj-svc"}} in pod["spec"]["volumes"]
    c = pod["spec"]["containers"][0]
    assert {"mountPath": "/etc/volcano", "name": "tj-svc"} in c["volumeMounts"]
    assert envs(c)["VC_WORKER_HOSTS"] == {"configMapKeyRef": {"name": "tj-svc", "key": "VC_WORKER_HOSTS"}}
    # scale up: the hosts file follows the spec on update
    j["spec"]["tasks"][1]["replicas"] = 3
    plugin.on_job_update(j, status, children)
    assert children.get("v1", "ConfigMap", "default", "tj-svc")["data"]["VC_WORKER_NUM"] == "3"
    plugin.on_job_delete(j, status, children)
    assert status["controlledResources"] == {}
    assert children.get("v1", "Service", "default", "tj") is None
    assert children.get("v1", "ConfigMap", "default", "tj-svc") is None
    assert children.get("networking.k8s.io/v1", "NetworkPolicy", "default", "tj") is None


def test_svc_without_network_policy_or_env() -> None:
    client = MemoryClient()
    children = jobplugins.Children(client)
    j = job(("worker", 1))
    plugin = svc.SvcPlugin(["--disable-network-policy=true", "--inject-hosts-env=false"])
    plugin.on_job_add(j, {}, children)
    assert children.get("networking.k8s.io/v1", "NetworkPolicy", "default", "tj") is None
    pod = pod_of(j, "worker", 0)
    plugin.on_pod_create(pod, j)
    assert "env" not in pod["spec"]["containers"][0]


@pytest.mark.parametrize("key_type", ["rsa", "ed25519"])
def test_ssh_plugin_generates_a_key_pair_once(key_type: str) -> None:
    client = MemoryClient()
    children = jobplugins.Children(client)
    j = job(("mpimaster", 1), ("mpiworker", 2))
    plugin = ssh.SshPlugin([f"--ssh-key-type={key_type}"])
    status: dict[str, Any] = {}
    plugin.on_job_add(j, status, children)
    secret = children.get("v1", "Secret", "default", "tj-ssh")
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert sorted(data) == ["authorized_keys", "config", "id_rsa", "id_rsa.pub"]
    private = serialization.load_ssh_private_key(data["id_rsa"], None) if key_type == "ed25519" else \
        serialization.load_pem_private_key(data["id_rsa"], None)
    public = private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    assert data["id_rsa.pub"] == data["authorized_keys"] == public + b"\n"
    assert data["config"].decode() == (
        "StrictHostKeyChecking no\nUserKnownHostsFile /dev/null\n"
        "Host tj-mpimaster-0\n  HostName tj-mpimaster-0.tj\n"
        "Host tj-mpiworker-0\n  HostName tj-mpiworker-0.tj\nHost tj-mpiworker-1\n  HostName tj-mpiworker-1.tj\n")
    # a second add (status lost) keeps the keys pods may already mount
    ssh.SshPlugin([]).on_job_add(j, {}, children)
    assert children.get("v1", "Secret", "default", "tj-ssh")["data"] == secret["data"]
    pod = pod_of(j, "mpiworker", 0)
    plugin.on_pod_create(pod, j)
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "tj-ssh")
    assert volume["secret"]["defaultMode"] == 0o600
    assert [i["path"] for i in volume["secret"]["items"]] == [".ssh/id_rsa", ".ssh/id_rsa.pub",
                                                             ".ssh/authorized_keys", ".ssh/config"]
    assert {"mountPath": "/root/.ssh", "subPath": ".ssh", "name": "tj-ssh"} in \
        pod["spec"]["containers"][0]["volumeMounts"]
    plugin.on_job_delete(j, status, children)
    assert children.get("v1", "Secret", "default", "tj-ssh") is None


def test_ssh_user_keys_path_and_port() -> None:
    plugin = ssh.SshPlugin(["--ssh-key-file-path=/home/u/.ssh", "--ssh-private-key=PRIV", "--ssh-public-key=PUB",
                            "--ssh-port=2222"])
    j = job(("w", 1))
    data = {k: base64.b64decode(v).decode() for k, v in plugin.secret_data(j).items()}
    assert (data["id_rsa"], data["id_rsa.pub"], data["authorized_keys"]) == ("PRIV", "PUB", "PUB")
    assert "  Port 2222\n" in data["config"]
    pod = pod_of(j, "w", 0)
    plugin.on_pod_create(pod, j)
    assert pod["spec"]["volumes"][-1]["secret"]["defaultMode"] == 0o644
    assert pod["spec"]["containers"][0]["volumeMounts"][-1]["mountPath"] == "/home/u/.ssh"


PYTORCH = [
    ("master", "master", 0, [], {"MASTER_ADDR": "tj-master-0.tj", "MASTER_PORT": "23456", "WORLD_SIZE": "3",
                                 "RANK": "0"}),
    ("worker-1", "worker", 1, [], {"MASTER_ADDR": "tj-master-0.tj", "MASTER_PORT": "23456", "WORLD_SIZE": "3",
                                   "RANK": "2"}),
    ("custom-port", "worker", 0, ["--port=5000"], {"MASTER_ADDR": "tj-master-0.tj", "MASTER_PORT": "5000",
                                                   "WORLD_SIZE": "3", "RANK": "1"}),
]


@pytest.mark.parametrize(("name", "task", "index", "args", "want"), PYTORCH, ids=[c[0] for c in PYTORCH])
def test_pytorch_env(name: str, task: str, index: int, args: list[str], want: dict[str, str]) -> None:
    j = job(("master", 1), ("worker", 2))
    pod = pod_of(j, task, index)
    pytorch.PytorchPlugin(args).on_pod_create(pod, j)
    c = pod["spec"]["containers"][0]
    assert envs(c) == want
    assert c["ports"] == [{"name": "pytorchjob-port", "containerPort": int(want["MASTER_PORT"])}]
    assert [i["name"] for i in pod["spec"]["initContainers"]] == ["init"]


def test_pytorch_wait_for_master() -> None:
    j = job(("master", 1), ("worker", 2))
    plugin = pytorch.PytorchPlugin(["--wait-master-enabled=true", "--wait-master-image=alpine:3",
                                    "--wait-master-timeout=600"])
    worker, master = pod_of(j, "worker", 0), pod_of(j, "master", 0)
    plugin.on_pod_create(worker, j)
    plugin.on_pod_create(master, j)
    init = worker["spec"]["initContainers"][0]
    assert init["name"] == "wait-for-master" and init["image"] == "alpine:3"
    assert "tj-master-0.tj" in init["command"][2] and "600" in init["command"][2]
    assert [i["name"] for i in master["spec"]["initContainers"]] == ["init"]
    plugin.on_pod_create(worker, j)  # already there: not added twice
    assert [i["name"] for i in worker["spec"]["initContainers"]].count("wait-for-master") == 1


def test_pytorch_without_master_task_leaves_pod_alone() -> None:
    j = job(("worker", 2))
    pod = pod_of(j, "worker", 0)
    pytorch.PytorchPlugin([]).on_pod_create(pod, j)
    assert "env" not in pod["spec"]["containers"][0]


def test_mpi_master_gets_worker_hosts_and_everyone_the_port() -> None:
    j = job(("master", 1), ("worker", 2))
    plugin = mpi.MpiPlugin([])
    master, worker = pod_of(j, "master", 0), pod_of(j, "worker", 1)
    plugin.on_pod_create(master, j)
    plugin.on_pod_create(worker, j)
    assert envs(master["spec"]["containers"][0]) == {"MPI_HOST": "tj-worker-0.tj,tj-worker-1.tj"}
    assert envs(master["spec"]["initContainers"][0]) == {"MPI_HOST": "tj-worker-0.tj,tj-worker-1.tj"}
    assert "env" not in worker["spec"]["containers"][0]
    for c in (*worker["spec"]["containers"], *worker["spec"]["initContainers"]):
        assert c["ports"] == [{"name": "mpijob-port", "containerPort": 22}]


def test_tensorflow_config() -> None:
    j = job(("ps", 1), ("worker", 2), ("chief", 1))
    pod = pod_of(j, "worker", 1)
    tensorflow.TensorflowPlugin([]).on_pod_create(pod, j)
    config = json.loads(envs(pod["spec"]["containers"][0])["TF_CONFIG"])
    assert config == {"cluster": {"ps": ["tj-ps-0.tj:2222"], "worker": ["tj-worker-0.tj:2222", "tj-worker-1.tj:2222"],
                                  "chief": ["tj-chief-0.tj:2222"]},
                      "task": {"type": "worker", "index": 1}}
    single = job(("worker", 1))
    pod = pod_of(single, "worker", 0)
    tensorflow.TensorflowPlugin([]).on_pod_create(pod, single)
    assert "env" not in pod["spec"]["containers"][0]


def test_simple_plugins_book_their_resource() -> None:
    status: dict[str, Any] = {}
    for cls in (env.EnvPlugin, pytorch.PytorchPlugin, mpi.MpiPlugin, tensorflow.TensorflowPlugin):
        cls([]).on_job_add({}, status, None)  # type: ignore[arg-type]
    assert status["controlledResources"] == {"plugin-env": "env", "plugin-pytorch": "pytorch", "plugin-mpi": "mpi",
                                             "plugin-tensorflow": "tensorflow"}


# --- hcclrank (hcclrank_test.go's cases) ------------------------------------------------------------------------


def hccl_pod(task: str | None, index: str | None, *, annotations: dict[str, str] | None = None,
             containers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    ann = dict(annotations or {})
    if task is not None:
        ann["volcano.sh/task-spec"] = task
    meta: dict[str, Any] = {"name": "test-pod", "annotations": ann}
    if index is not None:
        meta["labels"] = {"volcano.sh/task-index": index}
    return {"metadata": meta, "spec": {"containers": containers or [{"name": "c"}]}}


def rank_env(value: str) -> list[dict[str, Any]]:
    return [{"name": "container1", "env": [{"name": "OTHER", "value": "x"}, {"name": "RANK", "value": value}]}]


HCCL = [
    # (id, args, pod, tasks (name, replicas), want annotation or None)
    ("keeps-an-existing-rank", [], hccl_pod("worker", "0", annotations={"hccl/rankIndex": "1"}), [], "1"),
    ("uses-the-rank-env", [], hccl_pod(None, None, containers=rank_env("5")), [], "5"),
    ("master-rank-is-its-index", [], hccl_pod("master", "2"), [("master", 3), ("worker", 2)], "2"),
    ("worker-rank-follows-the-masters", [], hccl_pod("worker", "1"), [("master", 2), ("worker", 3)], "3"),
    ("custom-master", ["--master", "custom-master", "--worker", "custom-worker"], hccl_pod("custom-master", "3"),
     [("custom-master", 5), ("custom-worker", 3)], "3"),
    ("custom-worker", ["--master=custom-master", "--worker=custom-worker"], hccl_pod("custom-worker", "2"),
     [("custom-master", 4), ("custom-worker", 3)], "6"),
    ("zero-master-replicas", [], hccl_pod("worker", "0"), [("master", 0), ("worker", 2)], "0"),
    ("master-index-five", [], hccl_pod("master", "5"), [("master", 10), ("worker", 5)], "5"),
    ("other-task-left-alone", [], hccl_pod("ps", "0"), [("master", 1), ("ps", 1)], None),
    ("no-task-annotation-is-default", [], hccl_pod(None, "0"), [("master", 1)], None),
    ("default-flags-miss-custom-tasks", [], hccl_pod("custom-master", "0"), [("custom-master", 1)], None),
    ("no-index-left-alone", [], hccl_pod("worker", None), [("master", 1), ("worker", 1)], None),
]


@pytest.mark.parametrize(("args", "pod", "tasks", "want"), [c[1:] for c in HCCL], ids=[c[0] for c in HCCL])
def test_hcclrank_annotation(args: list[str], pod: dict[str, Any], tasks: list, want: str | None) -> None:
    hcclrank.HcclrankPlugin(args).on_pod_create(pod, job(*tasks) if tasks else job(("worker", 1)))
    assert (pod["metadata"].get("annotations") or {}).get("hccl/rankIndex") == want


def test_hcclrank_without_a_job_does_nothing() -> None:
    pod = hccl_pod("master", "0")
    hcclrank.HcclrankPlugin().on_pod_create(pod, {})
    assert "hccl/rankIndex" not in pod["metadata"]["annotations"]


@pytest.mark.parametrize(("containers", "want"), [
    ([{"name": "c1", "env": [{"name": "RANK", "value": "0"}, {"name": "OTHER", "value": "v"}]}], "0"),
    ([{"name": "c1", "env": [{"name": "OTHER", "value": "v"}]}, {"name": "c2", "env": [{"name": "RANK", "value": "1"}]}],
     "1"),
    ([{"name": "c1", "env": [{"name": "OTHER", "value": "v"}]}], ""),
    ([], ""),
    ([{"name": "c1", "env": [{"name": "RANK", "value": "first"}]}, {"name": "c2", "env": [{"name": "RANK",
                                                                                            "value": "second"}]}],
     "first"),
], ids=["first-container", "second-container", "not-found", "no-containers", "first-occurrence-wins"])
def test_hcclrank_env_value(containers: list, want: str) -> None:
    assert hcclrank.env_value({"spec": {"containers": containers}}, "RANK") == want


def test_hcclrank_on_the_pods_the_job_reconciler_builds() -> None:
    """Through `_job_pods.build_pod`: ranks 0..n-1 over master then worker pods, in task-index order."""
    j = job(("master", 2), ("worker", 3), plugins={"hcclrank": []})
    plugin = jobplugins.build(j["spec"]["plugins"])[0]
    ranks = []
    for name, count in (("master", 2), ("worker", 3)):
        for i in range(count):
            p = pod_of(j, name, i)
            plugin.on_pod_create(p, j)
            ranks.append(p["metadata"]["annotations"]["hccl/rankIndex"])
    assert ranks == ["0", "1", "2", "3", "4"]


# --- ray (ray_test.go's cases) ------------------------------------------------------------------------------------

HEAD_CMD = ("ray start --head --block --dashboard-host=0.0.0.0 --port={} --dashboard-port={} "
            "--ray-client-server-port={}")
RAY = [
    # (id, args, tasks, pod task, container, want command, want ports (name, number))
    ("custom-ports-and-head", ["--port=1234", "--dashboardPort=3456", "--clientPort=4567", "--head=test-head"],
     [("test-head", 1)], "test-head", "head", HEAD_CMD.format(1234, 3456, 4567),
     [("gcs", 1234), ("dashboard", 3456), ("client-server", 4567)]),
    ("default-head", [], [("head", 1), ("worker", 2)], "head", "head", HEAD_CMD.format(6379, 8265, 10001),
     [("gcs", 6379), ("dashboard", 8265), ("client-server", 10001)]),
    ("worker-joins-head-pod-0", [], [("head", 1), ("worker", 2)], "worker", "worker",
     "ray start --block --address=rj-head-0.rj:6379", []),
    ("custom-worker-container", ["--worker=w", "--workerContainer=main", "--port=7000"], [("head", 1), ("w", 1)],
     "w", "main", "ray start --block --address=rj-head-0.rj:7000", []),
    ("other-container-untouched", [], [("head", 1), ("worker", 1)], "worker", "sidecar", None, []),
    ("other-task-untouched", [], [("head", 1), ("ps", 1)], "ps", "ps", None, []),
]


@pytest.mark.parametrize(("args", "tasks", "task", "container", "command", "ports"), [c[1:] for c in RAY],
                         ids=[c[0] for c in RAY])
def test_ray_pod(args: list[str], tasks: list, task: str, container: str, command: str | None,
                 ports: list) -> None:
    j = job(*tasks, name="rj", plugins={"ray": args})
    p = {"metadata": {"name": f"rj-{task}-0", "annotations": {"volcano.sh/task-spec": task}},
         "spec": {"containers": [{"name": container}]}}
    ray.RayPlugin(args).on_pod_create(p, j)
    c = p["spec"]["containers"][0]
    assert c.get("command") == (None if command is None else ["sh", "-c", command])
    assert [(q["name"], q["containerPort"]) for q in c.get("ports") or ()] == ports


def test_ray_head_keeps_the_ports_it_already_has() -> None:
    j = job(("head", 1), name="rj")
    p = {"metadata": {"name": "rj-head-0", "annotations": {"volcano.sh/task-spec": "head"}},
         "spec": {"containers": [{"name": "head", "ports": [{"name": "redis", "containerPort": 6379}]}]}}
    ray.RayPlugin().on_pod_create(p, j)
    assert [(q["name"], q["containerPort"]) for q in p["spec"]["containers"][0]["ports"]] == [
        ("redis", 6379), ("dashboard", 8265), ("client-server", 10001)]


def test_ray_head_address_honours_hostname_and_subdomain() -> None:
    j = job(("head", 1), ("worker", 1), name="rj")
    j["spec"]["tasks"][0]["template"]["spec"].update(hostname="ray-head", subdomain="raynet")
    p = {"metadata": {"name": "rj-worker-0", "annotations": {"volcano.sh/task-spec": "worker"}},
         "spec": {"containers": [{"name": "worker"}]}}
    ray.RayPlugin().on_pod_create(p, j)
    assert p["spec"]["containers"][0]["command"] == ["sh", "-c", "ray start --block --address=ray-head.raynet:6379"]


def test_ray_head_service_created_once_and_deleted() -> None:
    client = MemoryClient()
    children = jobplugins.Children(client)
    j = job(("head", 1), ("worker", 2), name="rj")
    status: dict[str, Any] = {}
    plugin = ray.RayPlugin(["--port=1234"])
    plugin.on_job_add(j, status, children)
    plugin.on_job_add(j, status, children)
    svc_obj = children.get("v1", "Service", "default", "rj-head-svc")
    assert svc_obj is not None and status["controlledResources"] == {"plugin-ray": "ray"}
    assert svc_obj["spec"]["selector"] == {"volcano.sh/job-name": "rj", "volcano.sh/job-namespace": "default",
                                           "volcano.sh/task-spec": "head"}
    assert [(q["name"], q["port"], q["targetPort"]) for q in svc_obj["spec"]["ports"]] == [
        ("gcs", 1234, "gcs"), ("dashboard", 8265, "dashboard"), ("client-server", 10001, "client-server")]
    assert svc_obj["metadata"]["ownerReferences"][0]["kind"] == "Job"
    plugin.on_job_delete(j, status, children)
    assert children.get("v1", "Service", "default", "rj-head-svc") is None
    assert "plugin-ray" not in status["controlledResources"]


def test_ray_without_its_head_task_is_a_plugin_error() -> None:
    j = job(("worker", 2), name="rj")
    with pytest.raises(LookupError, match="job rj doesn't have head task head"):
        ray.RayPlugin().on_job_add(j, {}, jobplugins.Children(MemoryClient()))
    p = {"metadata": {"name": "rj-worker-0", "annotations": {"volcano.sh/task-spec": "worker"}},
         "spec": {"containers": [{"name": "worker"}]}}
    ray.RayPlugin().on_pod_create(p, j)
    assert "command" not in p["spec"]["containers"][0]
