"""What an operator and a security review expect of lahar's install, checked over both renderings (the kustomize
base and the Helm chart's defaults): metrics discovery, pod priority and disruption budgets, probes that survive a
Redis outage, a password-protected Redis whose password stays out of argv, and the webhook's narrow access (issue
18's deploy posture: only tls.crt/tls.key mounted, no Secret writes, ConfigMaps namespaced, loopback by default).
"""

from __future__ import annotations

import pytest

from tests.unit.deploy.deploy_objects import NS, by_kind, chart, container, kustomize, workloads


@pytest.fixture(scope="module", params=["kustomize", "chart"])
def rendered(request: pytest.FixtureRequest) -> list[dict]:
    return kustomize() if request.param == "kustomize" else chart({"createNamespace": True})


def _lahar_containers(objs: list[dict]) -> list[tuple[str, dict]]:
    return [(name, c) for name, spec in workloads(objs) for c in spec["containers"] if c["image"].startswith("lahar")]


# -- metrics discovery ------------------------------------------------------------------------------------------


METRICS = [("lahar-scheduler-metrics", "lahar-scheduler"), ("lahar-worker-metrics", "lahar-worker"),
           ("lahar-dispatch-metrics", "lahar-dispatch")]


@pytest.mark.parametrize(("service", "workload"), METRICS, ids=[m[1] for m in METRICS])
def test_metrics_service_is_annotated_for_prometheus(rendered: list[dict], service: str, workload: str) -> None:
    svc = by_kind(rendered, "Service")[service]
    ann = svc["metadata"]["annotations"]
    assert (ann["prometheus.io/scrape"], ann["prometheus.io/port"], ann["prometheus.io/path"]) == \
        ("true", "9090", "/metrics")
    pod = by_kind(rendered, "Deployment")[workload]["spec"]["template"]
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (port,) = svc["spec"]["ports"]
    named = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    assert named[port["targetPort"]] == int(ann["prometheus.io/port"]) == port["port"]
    args = pod["spec"]["containers"][0]["args"]
    assert args[args.index("--metrics-port") + 1] == ann["prometheus.io/port"]


@pytest.mark.parametrize(("name", "components"), [("lahar-scheduler-metrics-ingress", {"scheduler"}),
                                                  ("lahar-controllers-metrics-ingress", {"worker", "dispatch"})],
                         ids=["scheduler", "controllers"])
def test_network_policy_admits_the_monitoring_namespace_to_metrics(rendered: list[dict], name: str,
                                                                   components: set[str]) -> None:
    policy = by_kind(rendered, "NetworkPolicy")[name]["spec"]
    (rule,) = policy["ingress"]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}} in rule["from"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 9090}]
    selected = {c for c in ("scheduler", "worker", "dispatch", "webhook", "beat")
                if _selects(policy["podSelector"], {"app.kubernetes.io/name": "lahar", "app.kubernetes.io/component": c})}
    assert selected == components


def _selects(selector: dict, labels: dict[str, str]) -> bool:
    """A label selector's matchLabels and `In` matchExpressions (all these policies use)."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    return all(e["operator"] == "In" and labels.get(e["key"]) in e["values"] for e in selector.get("matchExpressions", []))


# -- pod settings -----------------------------------------------------------------------------------------------

PRIORITY = [("lahar-webhook", "system-cluster-critical"), ("lahar-scheduler", "system-cluster-critical"),
            ("lahar-worker", None), ("lahar-beat", None)]


@pytest.mark.parametrize(("workload", "want"), PRIORITY, ids=[p[0] for p in PRIORITY])
def test_priority_class(rendered: list[dict], workload: str, want: str | None) -> None:
    assert dict(workloads(rendered))[workload].get("priorityClassName") == want


@pytest.mark.parametrize("workload", ["lahar-webhook", "lahar-dispatch"])
def test_pdb_keeps_one_replica(rendered: list[dict], workload: str) -> None:
    pdb = by_kind(rendered, "PodDisruptionBudget")[workload]
    labels = by_kind(rendered, "Deployment")[workload]["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert by_kind(rendered, "Deployment")[workload]["spec"]["replicas"] >= 2


def _mentions_the_broker(probe: dict) -> bool:
    text = " ".join(map(str, (probe.get("exec") or {}).get("command") or []))
    return any(word in text.lower() for word in ("redis", "celery", "inspect ping", "broker"))


@pytest.mark.parametrize("workload", ["lahar-worker", "lahar-dispatch", "lahar-beat", "lahar-scheduler",
                                      "lahar-webhook", "lahar-flower"])
def test_liveness_never_depends_on_redis(rendered: list[dict], workload: str) -> None:
    """A worker whose broker is away is not dead: a Redis outage must not restart every pod (`celery inspect
    ping` goes through the broker too)."""
    c = container(rendered, workload)
    assert not _mentions_the_broker(c["livenessProbe"]), c["livenessProbe"]
    assert "readinessProbe" in c


def test_the_process_liveness_probe_is_valid_python() -> None:
    """The exec probe of worker/dispatch/beat: exit 0 for a running process, non-zero for a zombie or stopped one."""
    import subprocess
    import sys

    objs = chart()
    (_, _, code) = container(objs, "lahar-worker")["livenessProbe"]["exec"]["command"]
    fake = {"R": 0, "S": 0, "Z": 1, "T": 1}
    for state, want in fake.items():
        probe = code.replace('open("/proc/1/stat").read()', repr(f"1 (lahar) {state} 0 1"))
        assert subprocess.run([sys.executable, "-c", probe]).returncode == want, state


# -- Redis: a password from a Secret, never in argv -------------------------------------------------------------


def test_redis_requires_a_password_from_the_secret_with_protected_mode(rendered: list[dict]) -> None:
    c = container(rendered, "lahar-redis")
    script = " ".join(c.get("command", []) + c.get("args", []))
    assert "--protected-mode yes" in script and "requirepass" in script
    assert "--protected-mode no" not in script
    env = {e["name"]: e for e in c["env"]}
    assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "lahar-redis-auth", "key": "password"}
    assert "$REDIS_PASSWORD" not in " ".join(c.get("args", [])).split("redis-server", 1)[1]  # not on its argv
    probe_env = env["REDISCLI_AUTH"]["valueFrom"]["secretKeyRef"]
    assert probe_env == {"name": "lahar-redis-auth", "key": "password"}


def test_the_password_reaches_celery_through_env_never_argv(rendered: list[dict]) -> None:
    seen = set()
    for name, c in _lahar_containers(rendered):
        assert not any("redis://" in str(a) or "PASSWORD" in str(a) for a in c.get("args", [])), name
        env = {e["name"]: e for e in c.get("env") or []}
        if "REDIS_URL" not in env:
            continue
        seen.add(name)
        names = [e["name"] for e in c["env"]]
        assert names.index("REDIS_PASSWORD") < names.index("REDIS_URL"), name  # $(VAR) expands earlier vars only
        assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "lahar-redis-auth"
        assert env["REDIS_URL"]["value"] == "redis://:$(REDIS_PASSWORD)@$(REDIS_ADDRESS)"
    assert seen == {"lahar-webhook", "lahar-dispatch", "lahar-worker", "lahar-scheduler", "lahar-beat",
                    "lahar-flower"}
    data = by_kind(rendered, "ConfigMap")["lahar-env"]["data"]  # envFrom: defined before env, so $(...) expands
    assert "REDIS_URL" not in data and data["REDIS_ADDRESS"] == f"lahar-redis.{NS}.svc:6379/0"


# -- the webhook's certificates and bind address (issue 18, deploy posture) -------------------------------------


def test_webhook_mounts_only_the_serving_pair(rendered: list[dict]) -> None:
    spec = dict(workloads(rendered))["lahar-webhook"]
    secret_volumes = [v for v in spec["volumes"] if "secret" in v]
    assert [v["secret"]["secretName"] for v in secret_volumes] == ["lahar-webhook-certs"]
    items = secret_volumes[0]["secret"]["items"]
    assert sorted(i["key"] for i in items) == ["tls.crt", "tls.key"]  # never ca.key
    mounts = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == secret_volumes[0]["name"]]
    assert all(m.get("readOnly") for m in mounts)


def test_only_the_certs_job_can_write_the_webhook_secret(rendered: list[dict]) -> None:
    from tests.unit.deploy.test_deploy_manifests import allowed

    writers = {sa for sa in by_kind(rendered, "ServiceAccount") for verb in ("update", "patch", "delete", "get")
               if allowed(rendered, sa, verb, "secrets", namespace=NS, name="lahar-webhook-certs")}
    assert writers <= {"lahar-certs", "lahar-worker"}  # the worker: get/delete of job Secrets, names unknown
    assert not allowed(rendered, "lahar-worker", "update", "secrets", namespace=NS, name="lahar-webhook-certs")
    assert not allowed(rendered, "lahar-webhook", "get", "secrets", namespace=NS, name="lahar-webhook-certs")


def test_worker_secrets_verbs_are_exactly_get_create_delete(rendered: list[dict]) -> None:
    from tests.unit.deploy.test_deploy_manifests import _rules_of

    verbs = {v for _, r in _rules_of(rendered, "lahar-worker") if "secrets" in r["resources"] for v in r["verbs"]}
    assert verbs == {"get", "create", "delete"}


@pytest.mark.parametrize("sa", ["lahar-webhook", "lahar-scheduler"])
def test_configmaps_access_is_namespaced(rendered: list[dict], sa: str) -> None:
    from tests.unit.deploy.test_deploy_manifests import _rules_of

    where = {ns for ns, r in _rules_of(rendered, sa) if "configmaps" in r["resources"]}
    assert where == {NS}  # a Role in lahar-system, no ClusterRole


def test_scheduler_looks_for_its_configmap_where_its_role_is(rendered: list[dict]) -> None:
    data = by_kind(rendered, "ConfigMap")["lahar-env"]["data"]
    assert data["LAHAR_SCHEDULER_CONF_NAMESPACES"] == NS


def test_webhook_binds_loopback_by_default_and_the_pod_passes_host() -> None:
    import typer.main

    from lahar.cli import app

    cmd = typer.main.get_command(app).commands["webhook"]  # type: ignore[attr-defined]
    host = next(p for p in cmd.params if p.name == "host")
    assert host.default == "127.0.0.1"
    for objs in (chart(),):
        args = container(objs, "lahar-webhook")["args"]
        assert args[args.index("--host") + 1] == "0.0.0.0"


def test_kustomize_webhook_passes_host(rendered: list[dict]) -> None:
    args = container(rendered, "lahar-webhook")["args"]
    assert args[args.index("--host") + 1] == "0.0.0.0"


# -- users' roles -----------------------------------------------------------------------------------------------

ROLES = [("lahar-vcjob-editor", "rbac.authorization.k8s.io/aggregate-to-edit", "create", True),
         ("lahar-vcjob-editor", "rbac.authorization.k8s.io/aggregate-to-admin", "delete", True),
         ("lahar-vcjob-viewer", "rbac.authorization.k8s.io/aggregate-to-view", "list", True),
         ("lahar-vcjob-viewer", "rbac.authorization.k8s.io/aggregate-to-view", "create", False)]


@pytest.mark.parametrize(("role", "label", "verb", "want"), ROLES,
                         ids=[f"{r[0]}-{r[2]}-{'yes' if r[3] else 'no'}" for r in ROLES])
def test_aggregated_vcjob_roles(rendered: list[dict], role: str, label: str, verb: str, want: bool) -> None:
    obj = by_kind(rendered, "ClusterRole")[role]
    assert obj["metadata"]["labels"][label] == "true"
    jobs = [r for r in obj["rules"] if "batch.volcano.sh" in r["apiGroups"] and "jobs" in r["resources"]]
    assert (verb in {v for r in jobs for v in r["verbs"]}) is want
    if role.endswith("viewer"):
        assert all(set(r["verbs"]) <= {"get", "list", "watch"} for r in obj["rules"])


def test_celery_and_flower_show_the_broker_url_masked() -> None:
    """What Flower's broker page (`conn.as_uri()`) and `celery inspect conf` (censored table) show of REDIS_URL."""
    import os
    import subprocess
    import sys

    code = ("from lahar.worker import app\n"
            "print(app.connection().as_uri())\n"
            "print(repr(app.conf.table(with_defaults=False, censored=True)))\n")
    env = {**os.environ, "REDIS_URL": "redis://:s3cr3t-pw@redis.example:6379/0"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "redis.example:6379" in out.stdout and "s3cr3t-pw" not in out.stdout + out.stderr
