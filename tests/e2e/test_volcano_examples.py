"""Volcano's own example manifests (`../shared/volcano-examples/`) end to end on one `lahar up`, with the real kubectl.

One `lahar up --profile mixed --nodes 6 --sim-default-duration 2s` for the module (devcluster, embedded redis-server,
webhook, dispatch, worker, scheduler, beat, Flower as real processes). Every manifest Volcano accepts is applied
unchanged (queues first, then the rest in parallel), each example folder into a namespace of its own because names
repeat across folders; the `invalid_jobs/` ones are denied with Volcano's messages (spec/volcano.md §4.2); then one
poll waits until every Volcano Job reaches the phase Volcano would give it, every JobFlow Succeeded and every
ReplicaSet / Deployment has its pods placed. What lahar does not do is named in the tables below and listed in docs/compatibility.md
("Known gaps: Volcano's examples").
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import free_port as _free_port
from tests.support import wait_for as _wait

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / ".." / "shared" / "volcano-examples"
COMPATIBILITY = REPO / "docs" / "compatibility.md"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not EXAMPLES.is_dir(), reason="the shared Volcano examples are absent"),
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH"),
]

# -- what is expected of each manifest (paths relative to the examples folder) ------------------------------------

# Not applied: they need software lahar does not run (each is a "Known gap" in docs/compatibility.md).
SKIPPED = {
    "integrations/argo/": "Argo Workflows (argoproj.io Workflow/WorkflowTemplate and the argo namespace's RBAC): "
                          "needs the Argo controller; the Volcano Jobs its steps create are ordinary Jobs",
    "kubecon-2019-china/spark-sample/": "SparkApplication needs the Spark operator; its PodGroup is "
                                        "scheduling.incubator.k8s.io/v1alpha1, an API Volcano no longer serves",
}

# Refused by Kubernetes itself, on any current cluster (Volcano's included): not a lahar gap.
REFUSED_BY_KUBERNETES = {
    "kubecon-2019-china/task-priority/high-priority.yaml": "PriorityClass scheduling.k8s.io/v1beta1 (removed in 1.22)",
    "kubecon-2019-china/task-priority/normal-priority.yaml": "PriorityClass scheduling.k8s.io/v1beta1 (removed in 1.22)",
}

# Denied by Volcano's job admission, with these texts (spec/volcano.md §4.2). A regex, matched against the whole
# message after `denied the request: ` (the policy suffix lists events/actions in Go map order in Volcano).
DENIED = {
    "invalid_jobs/duplicatedPolicyEvent-webhook-deny.yaml":
        r"1 error occurred:\n\t\* duplicate event PodFailed  across different policy\n\n"
        r" valid events are \[[^\]]*\], valid actions are \[[^\]]*\];",
    "invalid_jobs/duplicatedTaskName-webhook-deny.yaml": r"duplicated task name task-1;",
    "invalid_jobs/minAvailable-webhook-deny.yaml":
        r"job 'minAvailable' should not be greater than total replicas in tasks;",
}

# Volcano Jobs that do not end Completed, by design of the example: (file, job) → (phase, why).
JOB_PHASE = {
    ("kubecon-2019-china/task-priority/elastic-job.yaml", "elastic-job"):
        ("Running", "no restartPolicy (Always): its nginx containers never exit, on a real cluster as here"),
}

# Volcano Jobs accepted but not run by lahar: (file, job) → gap (docs/compatibility.md).
JOB_GAPS: dict[tuple[str, str], str] = {}

# Accepted and stored, but nothing in lahar acts on them (docs/compatibility.md).
INERT_KINDS = {
    "ConfigMap": "no sharding controller reads volcano-sharding-configmap",
    "CronJob": "runs on its schedule (every 5 minutes): only admission is checked here",
}

# the topics docs/compatibility.md's known gaps must name
DOCUMENTED_GAPS = ("Argo", "SparkApplication", "sharding", "v1beta1 PriorityClass")

SETTLE_TIMEOUT = 180.0  # returns as soon as everything settled; the slack is for a loaded machine


def _rel(path: Path) -> str:
    return path.relative_to(EXAMPLES).as_posix()


@functools.cache
def _files() -> list[str]:
    return sorted(_rel(p) for p in EXAMPLES.rglob("*.yaml")) if EXAMPLES.is_dir() else []


def _skip_reason(rel: str) -> str | None:
    return next((why for prefix, why in SKIPPED.items() if rel.startswith(prefix)), None)


@functools.cache  # read-only: every check and every poll looks the manifests up again
def _docs(rel: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / rel).read_text()) if isinstance(d, dict)]


def _accepted_files() -> list[str]:
    return [f for f in _files() if not _skip_reason(f) and f not in REFUSED_BY_KUBERNETES and f not in DENIED]


def _vcjobs() -> list[tuple[str, str]]:
    return [(f, d["metadata"]["name"]) for f in _accepted_files() for d in _docs(f)
            if d.get("kind") == "Job" and str(d.get("apiVersion", "")).startswith("batch.volcano.sh/")]


def _jobflows() -> list[tuple[str, str]]:
    return [(f, d["metadata"]["name"]) for f in _accepted_files() for d in _docs(f)
            if d.get("kind") == "JobFlow" and str(d.get("apiVersion", "")).startswith("flow.volcano.sh/")]


def _workloads() -> list[tuple[str, str, str]]:
    return [(f, d["kind"], d["metadata"]["name"]) for f in _accepted_files() for d in _docs(f)
            if d.get("kind") in ("ReplicaSet", "Deployment") and str(d.get("apiVersion")) == "apps/v1"]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def namespace_of(rel: str) -> str:
    """A folder's manifests go to the namespace one of them names (JobFlow → default, the sharding ConfigMap →
    volcano-system), else to a namespace of the folder's own: names repeat across folders (lm-mpi-job, nginx)."""
    folder = Path(rel).parent.as_posix()
    named = {d["metadata"]["namespace"] for f in _files() if Path(f).parent.as_posix() == folder
             for d in _docs(f) if (d.get("metadata") or {}).get("namespace")}
    if len(named) == 1:
        return named.pop()
    return ("vx-" + (_slug(folder) if folder != "." else "top"))[:63].rstrip("-")


# -- lahar up and kubectl ------------------------------------------------------------------------------------------


@dataclass
class Corpus:
    data_dir: Path
    home: Path
    proc: subprocess.Popen[bytes] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    applied: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    jobs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)      # (namespace, name) → Job
    flows: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)     # (namespace, name) → JobFlow
    pods: list[dict[str, Any]] = field(default_factory=list)
    podgroups: list[dict[str, Any]] = field(default_factory=list)
    replicasets: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    settle_error: str = ""

    @property
    def log(self) -> Path:
        return self.data_dir.parent / "up.out"

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "KUBECONFIG")}
        env.update(PYTHONUNBUFFERED="1", LAHAR_FLOWER_PORT=str(_free_port()), LAHAR_DASHBOARD_PORT=str(_free_port()))
        argv = [sys.executable, "-m", "lahar.cli", "up", "--data-dir", str(self.data_dir), "--port", "0",
                "--profile", "mixed", "--nodes", "6", "--sim-default-duration", "2s", "--plain"]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

        def ready() -> dict[str, Any] | None:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"lahar up exited with {self.proc.returncode}:\n{self.output()}")
            info = json.loads((self.data_dir / "up.json").read_text())
            return info if info.get("ready") and info.get("pid") == self.proc.pid else None

        self.info = _wait("lahar up to be ready", ready, timeout=120)

    def stop(self) -> None:
        """Ctrl-C (lahar up stops its children and Redis); only if that hangs, SIGKILL it and its children's groups."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(60)
            return
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        for pid in [*(self.info.get("children") or {}).values(), self.info.get("redis_pid")]:
            if pid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        kubeconfig = str(self.data_dir / "kubeconfig")
        env = {**os.environ, "HOME": str(self.home), "KUBECONFIG": kubeconfig}
        proc = subprocess.run(["kubectl", "--kubeconfig", kubeconfig, "--cache-dir", str(self.home / "cache"), *args],
                              env=env, capture_output=True, text=True, timeout=60, cwd=EXAMPLES)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def items(self, resource: str) -> list[dict[str, Any]]:
        return json.loads(self.kubectl("get", resource, "-A", "-o", "json").stdout)["items"]

    # -- the scenario ------------------------------------------------------------------------------------------

    def apply_all(self) -> None:
        """Namespaces, then the files holding Queues (until every Queue is Open), then the rest in parallel."""
        files = [f for f in _files() if not _skip_reason(f)]
        for ns in sorted({namespace_of(f) for f in files} - {"default"}):
            self.kubectl("create", "namespace", ns)
        queue_files = [f for f in files if any(d.get("kind") == "Queue" for d in _docs(f))]
        for f in queue_files:
            self.applied[f] = self._apply(f)
        queues = [d["metadata"]["name"] for f in queue_files for d in _docs(f) if d.get("kind") == "Queue"]
        _wait("the example queues to be Open", lambda: all(
            (q.get("status") or {}).get("state") == "Open" for q in self.items("queues")
            if q["metadata"]["name"] in queues) and len(queues) <= len(self.items("queues")), timeout=30)
        rest = [f for f in files if f not in queue_files]
        with ThreadPoolExecutor(4) as pool:
            for f, result in zip(rest, pool.map(self._apply, rest), strict=True):
                self.applied[f] = result

    def _apply(self, rel: str) -> subprocess.CompletedProcess[str]:
        ns = namespace_of(rel)
        return self.kubectl("apply", "-n", ns, "-f", rel, check=False)

    def settle(self) -> None:
        """Poll until every Volcano Job has its expected phase and every workload's pods are placed (or the
        timeout: the per-case tests then report what is missing)."""
        expected = {(namespace_of(f), name): JOB_PHASE.get((f, name), ("Completed", ""))[0]
                    for f, name in _vcjobs() if (f, name) not in JOB_GAPS}
        workloads = _workloads()
        flows = [(namespace_of(f), name) for f, name in _jobflows()]

        def done() -> bool:
            self.jobs = {(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in self.items("vcjob")}
            if any(_phase(self.jobs.get(key)) != phase for key, phase in expected.items()):
                return False
            self.flows = {(f["metadata"]["namespace"], f["metadata"]["name"]): f for f in self.items("jobflows")}
            if any(_phase(self.flows.get(key)) != "Succeed" for key in flows):
                return False
            self.pods, self.replicasets = self.items("pods"), self.items("replicasets")
            return all(_workload_settled(self, f, kind, name) for f, kind, name in workloads)

        try:
            _wait("the examples to settle", done, timeout=SETTLE_TIMEOUT, interval=1.0)
        except AssertionError as e:
            self.settle_error = str(e)[:2000]
        self.jobs = {(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in self.items("vcjob")}
        self.flows = {(f["metadata"]["namespace"], f["metadata"]["name"]): f for f in self.items("jobflows")}
        self.pods, self.replicasets = self.items("pods"), self.items("replicasets")
        self.podgroups, self.nodes, self.events = self.items("podgroups"), self.items("nodes"), self.items("events")


def _phase(job: dict[str, Any] | None) -> str | None:
    return (((job or {}).get("status") or {}).get("state") or {}).get("phase")


def _owned_by(obj: dict[str, Any], uid: str) -> bool:
    return any(o.get("uid") == uid for o in obj["metadata"].get("ownerReferences") or ())


def _selector_fits(node_selector: dict[str, str], nodes: list[dict[str, Any]]) -> bool:
    return any(all((n["metadata"].get("labels") or {}).get(k) == v for k, v in node_selector.items()) for n in nodes)


def _workload_replicasets(c: Corpus, rel: str, kind: str, name: str) -> list[dict[str, Any]]:
    ns = namespace_of(rel)
    if kind == "ReplicaSet":
        return [rs for rs in c.replicasets if rs["metadata"]["namespace"] == ns and rs["metadata"]["name"] == name]
    deploys = json.loads(c.kubectl("get", "deployment", name, "-n", ns, "-o", "json").stdout)
    return [rs for rs in c.replicasets if rs["metadata"]["namespace"] == ns and _owned_by(rs, deploys["metadata"]["uid"])]


def _workload_pods(c: Corpus, rel: str, kind: str, name: str) -> list[dict[str, Any]]:
    uids = {rs["metadata"]["uid"] for rs in _workload_replicasets(c, rel, kind, name)}
    return [p for p in c.pods if p["metadata"]["namespace"] == namespace_of(rel)
            and any(_owned_by(p, u) for u in uids)]


def _doc(rel: str, kind: str, name: str) -> dict[str, Any]:
    return next(d for d in _docs(rel) if d.get("kind") == kind and d["metadata"]["name"] == name)


def _workload_settled(c: Corpus, rel: str, kind: str, name: str) -> bool:
    doc = _doc(rel, kind, name)
    pods = _workload_pods(c, rel, kind, name)
    if len(pods) != int(doc["spec"].get("replicas", 1)):
        return False
    selector = doc["spec"]["template"]["spec"].get("nodeSelector") or {}
    if selector and not _selector_fits(selector, c.nodes or c.items("nodes")):
        return True  # stays Pending, as on Volcano
    return all(p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") == "Running" for p in pods)


# -- the module's one run --------------------------------------------------------------------------------------


# -- the checks, one per example (plain functions: the scenario runs once, in one test) ----------------------------


def _denial(proc: subprocess.CompletedProcess[str]) -> str:
    marker = "denied the request: "
    assert proc.returncode != 0 and marker in proc.stderr, (proc.stdout, proc.stderr)
    return proc.stderr.split(marker, 1)[1].rstrip()


def check_accepted_unchanged(c: Corpus, rel: str) -> None:
    proc = c.applied[rel]
    assert proc.returncode == 0, f"kubectl apply -f {rel}: {proc.stderr}"
    for d in _docs(rel):
        assert re.search(rf"/{re.escape(d['metadata']['name'])} (created|configured|unchanged)\b", proc.stdout), \
            (d["kind"], proc.stdout)
        if d.get("kind") in INERT_KINDS:  # stored, though nothing acts on it
            group = d["apiVersion"].split("/")[0] if "/" in d["apiVersion"] else ""
            resource = f"{d['kind'].lower()}s.{group}" if group else d["kind"].lower()
            c.kubectl("get", resource, d["metadata"]["name"], "-n", namespace_of(rel))


def check_denied_with_volcanos_message(c: Corpus, rel: str) -> None:
    message = _denial(c.applied[rel])
    assert 'admission webhook "validatejob.volcano.sh" denied the request' in c.applied[rel].stderr
    assert re.fullmatch(DENIED[rel], message), f"{message!r} does not match {DENIED[rel]!r}"
    assert (namespace_of(rel), _docs(rel)[0]["metadata"]["name"]) not in c.jobs


def check_refused_by_kubernetes(c: Corpus, rel: str) -> None:
    assert c.applied[rel].returncode != 0, c.applied[rel].stdout


def check_job_runs_on_the_simulated_nodes(c: Corpus, rel: str, name: str) -> None:
    ns = namespace_of(rel)
    job = c.jobs.get((ns, name))
    assert job is not None, f"{ns}/{name} is missing"
    if (rel, name) in JOB_GAPS:  # as docs/compatibility.md says: a PluginError Event and no phase
        reasons = {e.get("reason") for e in c.events if e["metadata"]["namespace"] == ns
                   and (e.get("involvedObject") or {}).get("name") == name}
        assert _phase(job) != "Completed", f"{name} completes now: drop it from JOB_GAPS and docs/compatibility.md"
        assert "PluginError" in reasons, reasons
        return
    want = JOB_PHASE.get((rel, name), ("Completed", ""))[0]
    assert _phase(job) == want, f"{_phase(job)} (want {want}); {c.settle_error}\n{job.get('status')}"
    tasks = _doc(rel, "Job", name)["spec"]["tasks"]
    pods = [p for p in c.pods if p["metadata"]["namespace"] == ns
            and (p["metadata"].get("labels") or {}).get("volcano.sh/job-name") == name]
    # A task whose TaskCompleted ends the Job (mpi-example's master): when it completes, Volcano's killJob deletes
    # the pods of the other tasks that have not finished yet (it keeps Succeeded and Failed ones). How many of the
    # others have finished by then is a race, in Volcano as here; the ending task's own pods are all there.
    ending = {t.get("name") for t in tasks if want == "Completed" and any(
        q.get("event") == "TaskCompleted" and q.get("action") == "CompleteJob" for q in t.get("policies") or ())}
    for t in tasks:
        mine = [p for p in pods if (p["metadata"].get("annotations") or {}).get("volcano.sh/task-spec") == t.get("name")]
        replicas = int(t.get("replicas", 1))
        ok = len(mine) == replicas if not ending or t.get("name") in ending else len(mine) <= replicas
        assert ok, (t.get("name"), replicas, [p["metadata"]["name"] for p in pods])
    assert ending or len(pods) == sum(int(t.get("replicas", 1)) for t in tasks), [p["metadata"]["name"] for p in pods]
    node_names = {n["metadata"]["name"] for n in c.nodes}
    assert all(p["spec"].get("nodeName") in node_names for p in pods), [p["spec"].get("nodeName") for p in pods]
    phases = {p["status"].get("phase") for p in pods}
    assert phases == ({"Succeeded"} if want == "Completed" else {"Running"}), phases


def check_jobflow_succeeds(c: Corpus, rel: str, name: str) -> None:
    """The jobflow controller runs each step's Job from its JobTemplate, in dependency order, to Succeed."""
    flow = c.flows.get((namespace_of(rel), name))
    assert flow is not None, f"{namespace_of(rel)}/{name} is missing"
    assert _phase(flow) == "Succeed", f"{_phase(flow)}; {c.settle_error}\n{flow.get('status')}"
    steps = [f"{name}-{s['name']}" for s in _doc(rel, "JobFlow", name)["spec"]["flows"]]
    assert sorted(flow["status"].get("completedJobs") or []) == sorted(steps), flow["status"]


def check_workload_pods_placed(c: Corpus, rel: str, kind: str, name: str) -> None:
    doc = _doc(rel, kind, name)
    template = doc["spec"]["template"]
    pods = _workload_pods(c, rel, kind, name)
    assert len(pods) == int(doc["spec"].get("replicas", 1)), c.settle_error
    selector = template["spec"].get("nodeSelector") or {}
    if selector and not _selector_fits(selector, c.nodes):
        # no node matches (the example names a node of its authors' cluster): Pending, as Volcano leaves it
        assert all(not p["spec"].get("nodeName") for p in pods)
    else:
        assert all(p["spec"].get("nodeName") and p["status"].get("phase") == "Running" for p in pods), \
            [(p["metadata"]["name"], p["spec"].get("nodeName"), p["status"].get("phase")) for p in pods]
    if template["spec"].get("schedulerName") != "volcano":
        return  # devcluster's default-scheduler placed them; no PodGroup
    # the podgroup controller: one PodGroup per ReplicaSet, in the queue the pod template names
    ns = namespace_of(rel)
    for rs in _workload_replicasets(c, rel, kind, name):
        groups = [g for g in c.podgroups if g["metadata"]["namespace"] == ns and _owned_by(g, rs["metadata"]["uid"])]
        assert len(groups) == 1, [g["metadata"]["name"] for g in c.podgroups if g["metadata"]["namespace"] == ns]
        queue = (template["metadata"].get("annotations") or {}).get("scheduling.volcano.sh/queue-name", "default")
        assert groups[0]["spec"].get("queue") == queue
        mine = [p for p in pods if _owned_by(p, rs["metadata"]["uid"])]
        assert all((p["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name")
                   == groups[0]["metadata"]["name"] for p in mine), [p["metadata"].get("annotations") for p in mine]


def test_volcano_examples_end_to_end(tmp_path: Path) -> None:
    """One `lahar up` for every example (one test, so xdist never starts two): each example's check runs and every
    failure is reported, named by its file."""
    c = Corpus(data_dir=tmp_path / "lahar", home=tmp_path / "home")
    c.home.mkdir()
    try:
        try:
            c.start()
        except AssertionError as e:
            raise AssertionError(f"{e}\n{c.output()}") from None
        c.nodes = c.items("nodes")
        c.apply_all()
        c.settle()
        checks: list[tuple[str, Callable[[], None]]] = [
            *((f"accepted {f}", lambda f=f: check_accepted_unchanged(c, f)) for f in _accepted_files()),
            *((f"denied {f}", lambda f=f: check_denied_with_volcanos_message(c, f)) for f in sorted(DENIED)),
            *((f"refused {f}", lambda f=f: check_refused_by_kubernetes(c, f)) for f in sorted(REFUSED_BY_KUBERNETES)),
            *((f"job {f}:{n}", lambda f=f, n=n: check_job_runs_on_the_simulated_nodes(c, f, n))
              for f, n in _vcjobs()),
            *((f"jobflow {f}:{n}", lambda f=f, n=n: check_jobflow_succeeds(c, f, n)) for f, n in _jobflows()),
            *((f"{k} {f}:{n}", lambda f=f, k=k, n=n: check_workload_pods_placed(c, f, k, n))
              for f, k, n in _workloads()),
        ]
        failures = []
        for what, check in checks:
            try:
                check()
            except AssertionError as e:
                failures.append(f"{what}: {e}")
        assert not failures, f"{len(failures)} of {len(checks)} checks failed:\n" + "\n".join(failures)
    finally:
        c.stop()


def test_every_example_is_accounted_for() -> None:
    for rel in _files():
        docs = _docs(rel)
        assert docs, rel
        assert _skip_reason(rel) or rel in REFUSED_BY_KUBERNETES or rel in DENIED or rel in _accepted_files()


def test_known_gaps_are_documented() -> None:
    text = COMPATIBILITY.read_text()
    assert "Known gaps: Volcano's examples" in text
    section = text.split("Known gaps: Volcano's examples", 1)[1]
    for topic in DOCUMENTED_GAPS:
        assert topic in section, topic
