"""`deploy/` for a real cluster: the kustomize base and the Helm chart render, every object is valid for Kubernetes,
and they say what an operator relies on (least-privilege RBAC, hardened pods with probes and resources, the webhook
wiring, network policies, lahar's ConfigMaps parse, a Dockerfile that ships what the manifests run). Every test runs
on both renderings (`rendered` is parametrized): the chart with its defaults (plus the Namespace) must agree.

The kustomize base needs the real `kubectl` (skipped without it); the chart is rendered by `lahar.chart` (no helm);
schemas come from `kubernetes-validate` (offline).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from tests.unit.deploy.deploy_objects import DEPLOY, NS, REPO, by_kind, chart, kustomize, workloads

K8S_VERSION = "1.30"  # the oldest Kubernetes the manifests claim (matchConditions are GA there)


@pytest.fixture(scope="module", params=["kustomize", "chart"])
def rendered(request: pytest.FixtureRequest) -> list[dict]:
    return kustomize() if request.param == "kustomize" else chart({"createNamespace": True})


def test_every_object_validates_against_kubernetes_schemas(rendered: list[dict]) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    errors = []
    for obj in rendered:
        try:
            kv.validate(obj, K8S_VERSION, strict=True)
        except kv.ValidationError as e:
            where = "/".join(str(p) for p in e.absolute_path)
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {where}: {e.message}")
    assert not errors, "\n".join(errors)


def test_validation_catches_an_unknown_field() -> None:
    """The check above is strict: a misspelt field fails it (so a pass means something)."""
    kv = pytest.importorskip("kubernetes_validate")
    bad = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"prots": []}}
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, K8S_VERSION, strict=True)


EXPECTED = [
    ("Namespace", NS), ("CustomResourceDefinition", "jobs.batch.volcano.sh"),
    ("CustomResourceDefinition", "queues.scheduling.volcano.sh"),
    ("CustomResourceDefinition", "podgroups.scheduling.volcano.sh"),
    ("MutatingWebhookConfiguration", "lahar-mutating-webhooks"),
    ("ValidatingWebhookConfiguration", "lahar-validating-webhooks"),
    ("Deployment", "lahar-webhook"), ("PodDisruptionBudget", "lahar-webhook"), ("Service", "lahar-webhook"),
    ("Deployment", "lahar-dispatch"), ("Deployment", "lahar-worker"), ("Deployment", "lahar-scheduler"),
    ("Deployment", "lahar-beat"), ("Deployment", "lahar-flower"), ("Service", "lahar-flower"),
    ("StatefulSet", "lahar-redis"), ("Service", "lahar-redis"), ("Job", "lahar-certs"),
    ("CronJob", "lahar-certs-renew"), ("ConfigMap", "lahar-scheduler-configmap"),
    ("ConfigMap", "lahar-admission-config"), ("ConfigMap", "lahar-env"),
    ("NetworkPolicy", "lahar-default-deny"),
]


@pytest.mark.parametrize(("kind", "name"), EXPECTED, ids=[f"{k}/{n}" for k, n in EXPECTED])
def test_the_base_has(rendered: list[dict], kind: str, name: str) -> None:
    assert name in by_kind(rendered, kind)


def test_crds_come_first_and_webhooks_last(rendered: list[dict]) -> None:
    kinds = [o["kind"] for o in rendered]
    last_crd = max(i for i, k in enumerate(kinds) if k == "CustomResourceDefinition")
    assert "Namespace" in kinds[:last_crd + 2]
    assert all(k in ("Namespace", "CustomResourceDefinition") for k in kinds[:last_crd + 1])
    assert set(kinds[-2:]) == {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}


def test_namespaced_objects_live_in_lahar_system(rendered: list[dict]) -> None:
    cluster_scoped = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
                      "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
    wrong = [f"{o['kind']}/{o['metadata']['name']}" for o in rendered
             if o["kind"] not in cluster_scoped and o["metadata"].get("namespace") != NS]
    assert not wrong


def test_webhook_configurations_are_the_ones_in_deploy_webhooks(rendered: list[dict]) -> None:
    for path in sorted((DEPLOY / "webhooks").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                assert by_kind(rendered, doc["kind"])[doc["metadata"]["name"]] == doc


# --------------------------------------------------------------------------------------------------------------
# pods: hardened, probed, sized


@pytest.mark.parametrize("field", ["runAsNonRoot", "readOnlyRootFilesystem", "allowPrivilegeEscalation", "drop ALL",
                                   "seccompProfile", "resources", "probes"])
def test_every_container_is_hardened_sized_and_probed(rendered: list[dict], field: str) -> None:
    problems = []
    for name, spec in workloads(rendered):
        pod_sec = spec.get("securityContext") or {}
        long_running = spec.get("restartPolicy", "Always") == "Always"
        for c in [*(spec.get("initContainers") or []), *spec["containers"]]:
            sec = c.get("securityContext") or {}
            ok = {
                "runAsNonRoot": sec.get("runAsNonRoot", pod_sec.get("runAsNonRoot")) is True,
                "readOnlyRootFilesystem": sec.get("readOnlyRootFilesystem") is True,
                "allowPrivilegeEscalation": sec.get("allowPrivilegeEscalation") is False,
                "drop ALL": (sec.get("capabilities") or {}).get("drop") == ["ALL"],
                "seccompProfile": (sec.get("seccompProfile") or pod_sec.get("seccompProfile") or {}).get("type")
                == "RuntimeDefault",
                "resources": all(k in (c.get("resources") or {}).get(part, {}) for part in ("requests", "limits")
                                 for k in ("cpu", "memory")),
                "probes": not long_running or ("livenessProbe" in c and "readinessProbe" in c),
            }[field]
            if not ok:
                problems.append(f"{name}/{c['name']}")
    assert not problems, f"{field} missing in {problems}"


def _lahar_commands() -> dict[str, Any]:
    import typer.main

    from lahar.cli import app

    group = typer.main.get_command(app)
    return dict(group.commands)  # type: ignore[attr-defined]


def _options(command: Any) -> set[str]:
    out: set[str] = set()
    for param in command.params:
        out |= set(param.opts) | set(param.secondary_opts)
    return out


def test_every_lahar_container_runs_a_real_command_with_real_options(rendered: list[dict]) -> None:
    commands = _lahar_commands()
    seen = set()
    for name, spec in workloads(rendered):
        for c in spec["containers"]:
            if not c["image"].startswith("lahar"):
                continue
            args = list(c["args"])
            cmd = commands[args[0]]
            if hasattr(cmd, "commands"):  # a group: `certs ensure`
                cmd = cmd.commands[args[1]]
                args = args[1:]
            seen.add(args[0])
            unknown = [a for a in args[1:] if a.startswith("--") and a.split("=")[0] not in _options(cmd)]
            assert not unknown, f"{name}: lahar {' '.join(c['args'])}: unknown {unknown}"
            env_from = [e["configMapRef"]["name"] for e in c.get("envFrom") or []]
            assert env_from == ["lahar-env"], name
    assert seen == {"webhook", "dispatch", "worker", "scheduler", "beat", "flower", "ensure"}


def test_settings_come_from_lahar_env(rendered: list[dict]) -> None:
    from lahar.settings import Settings

    data = by_kind(rendered, "ConfigMap")["lahar-env"]["data"]
    assert "REDIS_URL" not in data  # it carries the password: built per container from the Secret
    for key in data:
        if key.startswith("LAHAR_"):
            assert key.removeprefix("LAHAR_").lower() in Settings.model_fields, key


def test_writable_paths_are_volumes(rendered: list[dict]) -> None:
    """Read-only root: whatever lahar writes (/tmp, LAHAR_DATA_DIR for beat's schedule) is an emptyDir."""
    data_dir = by_kind(rendered, "ConfigMap")["lahar-env"]["data"]["LAHAR_DATA_DIR"]
    for name, spec in workloads(rendered):
        for c in spec["containers"]:
            if c["image"].startswith("lahar"):
                mounts = {m["mountPath"] for m in c.get("volumeMounts") or []}
                assert {"/tmp", data_dir} <= mounts, name


# --------------------------------------------------------------------------------------------------------------
# the webhook's wiring


def test_webhook_service_pdb_and_certificates(rendered: list[dict]) -> None:
    deploy = by_kind(rendered, "Deployment")["lahar-webhook"]
    svc = by_kind(rendered, "Service")["lahar-webhook"]
    pdb = by_kind(rendered, "PodDisruptionBudget")["lahar-webhook"]
    pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
    assert deploy["spec"]["replicas"] == 2
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    (port,) = svc["spec"]["ports"]
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert (port["port"], named[port["targetPort"]]) == (443, 8443)
    args = container["args"]
    assert args[args.index("--port") + 1] == "8443"
    volumes = {v["name"]: v for v in deploy["spec"]["template"]["spec"]["volumes"]}
    mount = next(m for m in container["volumeMounts"] if args[args.index("--cert") + 1].startswith(m["mountPath"]))
    assert volumes[mount["name"]]["secret"]["secretName"] == "lahar-webhook-certs"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in next(iter(by_kind(rendered, kind).values()))["webhooks"]:
            ref = hook["clientConfig"]["service"]
            assert (ref["name"], ref["namespace"], ref["port"]) == ("lahar-webhook", NS, 443)
            assert NS in str(hook["namespaceSelector"])  # lahar's own pods never wait on lahar


def test_certs_job_ensures_the_service_and_a_cronjob_renews(rendered: list[dict]) -> None:
    job = by_kind(rendered, "Job")["lahar-certs"]
    cron = by_kind(rendered, "CronJob")["lahar-certs-renew"]
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:2] == ["certs", "ensure"]
    assert args[args.index("--service") + 1] == "lahar-webhook"
    assert args[args.index("--namespace") + 1] == NS
    assert cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"] == args


# --------------------------------------------------------------------------------------------------------------
# RBAC


def _rules_of(objs: list[dict], sa: str) -> list[tuple[str | None, dict]]:
    """(namespace or None for cluster-wide, rule) of every role bound to ServiceAccount `sa`."""
    roles = {("ClusterRole", n): o for n, o in by_kind(objs, "ClusterRole").items()}
    roles |= {("Role", n): o for n, o in by_kind(objs, "Role").items()}
    out = []
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        for b in by_kind(objs, kind).values():
            if any(s["kind"] == "ServiceAccount" and s["name"] == sa and s["namespace"] == NS for s in b["subjects"]):
                role = roles[(b["roleRef"]["kind"], b["roleRef"]["name"])]
                ns = b["metadata"].get("namespace") if kind == "RoleBinding" else None
                out += [(ns, r) for r in role["rules"]]
    return out


def allowed(objs: list[dict], sa: str, verb: str, resource: str, group: str = "", *, namespace: str = "default",
            name: str | None = None) -> bool:
    for ns, rule in _rules_of(objs, sa):
        if ns is not None and ns != namespace:
            continue
        if group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"] and (
                not rule.get("resourceNames") or name in rule["resourceNames"]):
            return True
    return False


V, S, B = "scheduling.volcano.sh", "batch.volcano.sh", "bus.volcano.sh"
RBAC = [
    # component, verb, resource, group, namespace, name, allowed
    ("webhook", "list", "queues", V, None, None, True),
    ("webhook", "watch", "namespaces", "", None, None, True),
    ("webhook", "get", "jobs", S, None, None, True),
    ("webhook", "list", "podgroups", V, None, None, True),
    ("webhook", "list", "priorityclasses", "scheduling.k8s.io", None, None, True),
    ("webhook", "watch", "configmaps", "", NS, None, True),
    ("webhook", "get", "configmaps", "", NS, "lahar-admission-config", True),
    ("webhook", "update", "configmaps", "", NS, "lahar-admission-config", False),
    ("webhook", "list", "configmaps", "", "default", None, False),
    ("webhook", "get", "secrets", "", NS, "lahar-webhook-certs", False),
    ("webhook", "update", "secrets", "", NS, "lahar-webhook-certs", False),
    ("webhook", "create", "pods", "", None, None, False),
    ("dispatch", "watch", "jobs", S, None, None, True),
    ("dispatch", "list", "commands", B, None, None, True),
    ("dispatch", "watch", "pods", "", None, None, True),
    ("dispatch", "create", "pods", "", None, None, False),
    ("dispatch", "update", "jobs", S, None, None, False),
    ("worker", "create", "pods", "", None, None, True),
    ("worker", "delete", "pods", "", None, None, True),
    ("worker", "create", "services", "", None, None, True),
    ("worker", "create", "networkpolicies", "networking.k8s.io", None, None, True),
    ("worker", "create", "persistentvolumeclaims", "", None, None, True),
    ("worker", "create", "secrets", "", None, None, True),
    ("worker", "get", "secrets", "", None, "job-1-ssh", True),
    ("worker", "delete", "secrets", "", None, "job-1-ssh", True),
    ("worker", "list", "secrets", "", None, None, False),
    ("worker", "watch", "secrets", "", None, None, False),
    ("worker", "update", "secrets", "", None, "job-1-ssh", False),
    ("worker", "create", "events", "", None, None, True),
    ("worker", "update", "jobs/status", S, None, None, True),
    ("worker", "create", "podgroups", V, None, None, True),
    ("worker", "update", "queues/status", V, None, None, True),
    ("worker", "delete", "commands", B, None, None, True),
    ("worker", "create", "jobs", S, None, None, True),
    ("worker", "update", "leases", "coordination.k8s.io", None, None, False),  # leases live in Redis
    ("worker", "list", "replicasets", "apps", None, None, True),
    ("worker", "update", "jobflows/status", "flow.volcano.sh", None, None, True),
    ("worker", "update", "jobtemplates/status", "flow.volcano.sh", None, None, True),
    ("worker", "list", "jobtemplates", "flow.volcano.sh", None, None, True),
    ("worker", "update", "jobflows", "flow.volcano.sh", None, None, False),
    ("dispatch", "watch", "jobflows", "flow.volcano.sh", None, None, True),
    ("worker", "create", "pods/binding", "", None, None, False),
    ("worker", "list", "nodes", "", None, None, True),  # the hypernode controller's label source
    ("worker", "update", "nodes", "", None, None, False),
    ("worker", "create", "hypernodes", "topology.volcano.sh", None, None, True),
    ("worker", "delete", "hypernodes", "topology.volcano.sh", None, None, True),
    ("worker", "update", "hypernodes/status", "topology.volcano.sh", None, None, True),
    ("worker", "list", "configmaps", "", "volcano-system", None, True),  # the discovery ConfigMap, any namespace
    ("dispatch", "watch", "nodes", "", None, None, True),
    ("dispatch", "watch", "hypernodes", "topology.volcano.sh", None, None, True),
    ("dispatch", "update", "hypernodes", "topology.volcano.sh", None, None, False),
    ("scheduler", "create", "pods/binding", "", None, None, True),
    ("scheduler", "list", "resourceslices", "resource.k8s.io", None, None, True),
    ("scheduler", "update", "resourceclaims/status", "resource.k8s.io", None, None, True),
    ("scheduler", "update", "resourceclaims", "resource.k8s.io", None, None, True),  # the claim finalizer
    ("scheduler", "delete", "resourceclaims", "resource.k8s.io", None, None, False),
    ("scheduler", "patch", "pods/status", "", None, None, True),
    ("scheduler", "create", "events", "", None, None, True),
    ("scheduler", "patch", "podgroups/status", V, None, None, True),
    ("scheduler", "patch", "queues/status", V, None, None, True),
    ("scheduler", "watch", "nodes", "", None, None, True),
    ("scheduler", "watch", "numatopologies", "nodeinfo.volcano.sh", None, None, True),
    ("scheduler", "watch", "poddisruptionbudgets", "policy", None, None, True),
    ("scheduler", "watch", "resourcequotas", "", None, None, True),
    ("scheduler", "watch", "configmaps", "", NS, None, True),
    ("scheduler", "watch", "configmaps", "", "default", None, False),
    ("scheduler", "create", "pods", "", None, None, False),
    ("scheduler", "update", "podgroups", V, None, None, False),
    ("scheduler", "get", "secrets", "", None, None, False),
    ("certs", "update", "validatingwebhookconfigurations", "admissionregistration.k8s.io", None,
     "lahar-validating-webhooks", True),
    ("certs", "update", "validatingwebhookconfigurations", "admissionregistration.k8s.io", None, "other", False),
    ("certs", "update", "secrets", "", NS, "lahar-webhook-certs", True),
    ("certs", "get", "secrets", "", "default", "lahar-webhook-certs", False),
    ("beat", "get", "pods", "", None, None, False),
    ("flower", "get", "pods", "", None, None, False),
]


@pytest.mark.parametrize(("sa", "verb", "resource", "group", "ns", "name", "want"), RBAC,
                         ids=[f"{r[0]}-{r[1]}-{r[2]}{'@' + r[4] if r[4] else ''}{'/' + r[5] if r[5] else ''}"
                              f"-{'yes' if r[6] else 'no'}" for r in RBAC])
def test_rbac_per_component(rendered: list[dict], sa: str, verb: str, resource: str, group: str, ns: str | None,
                            name: str | None, want: bool) -> None:
    got = allowed(rendered, f"lahar-{sa}", verb, resource, group, namespace=ns or "default", name=name)
    assert got is want


def test_rbac_has_no_wildcards_and_bindings_resolve(rendered: list[dict]) -> None:
    for kind in ("ClusterRole", "Role"):
        for name, role in by_kind(rendered, kind).items():
            for rule in role["rules"]:
                assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], name
    sas = set(by_kind(rendered, "ServiceAccount"))
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        for b in by_kind(rendered, kind).values():
            assert b["roleRef"]["name"] in by_kind(rendered, b["roleRef"]["kind"])
            assert {s["name"] for s in b["subjects"]} <= sas


def test_every_pod_has_its_own_service_account_and_only_api_users_mount_a_token(rendered: list[dict]) -> None:
    sas = by_kind(rendered, "ServiceAccount")
    api_users = {"lahar-webhook", "lahar-dispatch", "lahar-worker", "lahar-scheduler", "lahar-certs"}
    for name, spec in workloads(rendered):
        sa = spec["serviceAccountName"]
        assert sa in sas, name
        mounts = spec.get("automountServiceAccountToken", sas[sa].get("automountServiceAccountToken", True))
        assert mounts is (sa in api_users), name


# --------------------------------------------------------------------------------------------------------------
# network policies


def _policies_for(objs: list[dict], labels: dict[str, str], kind: str) -> list[dict]:
    from lahar.kube import selectors

    rules = "ingress" if kind == "Ingress" else "egress"
    return [p for p in by_kind(objs, "NetworkPolicy").values() if kind in p["spec"]["policyTypes"]
            and p["spec"].get(rules) and selectors.from_label_selector(p["spec"]["podSelector"]).matches(labels)]


def _labels(objs: list[dict], kind: str, name: str) -> dict[str, str]:
    return by_kind(objs, kind)[name]["spec"]["template"]["metadata"]["labels"]


def test_default_deny_covers_every_pod(rendered: list[dict]) -> None:
    deny = by_kind(rendered, "NetworkPolicy")["lahar-default-deny"]["spec"]
    assert deny["podSelector"] == {} and sorted(deny["policyTypes"]) == ["Egress", "Ingress"]
    assert "ingress" not in deny and "egress" not in deny


def test_redis_only_from_lahar_pods(rendered: list[dict]) -> None:
    (policy,) = _policies_for(rendered, _labels(rendered, "StatefulSet", "lahar-redis"), "Ingress")
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 6379}]
    assert rule["from"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "lahar"}}}]


def test_webhook_ingress_on_8443_from_anywhere(rendered: list[dict]) -> None:
    (policy,) = _policies_for(rendered, _labels(rendered, "Deployment", "lahar-webhook"), "Ingress")
    (rule,) = policy["spec"]["ingress"]
    assert "from" not in rule and rule["ports"] == [{"protocol": "TCP", "port": 8443}]


EGRESS = [("lahar-webhook", True, True), ("lahar-dispatch", True, True), ("lahar-worker", True, True),
          ("lahar-scheduler", True, True), ("lahar-beat", False, True), ("lahar-flower", False, True)]


@pytest.mark.parametrize(("name", "api", "redis"), EGRESS, ids=[e[0] for e in EGRESS])
def test_egress_to_the_api_server_and_redis(rendered: list[dict], name: str, api: bool, redis: bool) -> None:
    rules = [r for p in _policies_for(rendered, _labels(rendered, "Deployment", name), "Egress")
             for r in p["spec"].get("egress") or []]
    ports = {(port["port"], "to" in r) for r in rules for port in r.get("ports") or []}
    assert ((6443, False) in ports) is api
    assert ((6379, True) in ports) is redis
    assert (53, True) in ports


# --------------------------------------------------------------------------------------------------------------
# lahar's ConfigMaps


def test_scheduler_configmap_is_volcanos_default_and_lahar_accepts_it(rendered: list[dict]) -> None:
    from lahar.scheduler.framework import conf as confs
    from lahar.scheduler.registry import in_tree_registry

    text = by_kind(rendered, "ConfigMap")["lahar-scheduler-configmap"]["data"]["volcano-scheduler.conf"]
    registry = in_tree_registry()
    conf = confs.load(text, actions=registry.action_names, plugins=registry.plugin_names)
    assert list(conf.actions) == ["enqueue", "allocate", "backfill"]
    volcano = REPO / ".." / "shared" / "volcano-examples" / "scheduler-conf" / "volcano-scheduler.conf"
    if volcano.exists():  # same actions and, of Volcano's plugins, every one lahar has, in the same tiers
        theirs = yaml.safe_load(volcano.read_text())
        ours = yaml.safe_load(text)
        assert [a.strip() for a in theirs["actions"].split(",")] == [a.strip() for a in ours["actions"].split(",")]
        known = set(registry.plugin_names)
        assert [[p["name"] for p in t["plugins"] if p["name"] in known] for t in theirs["tiers"]] == \
            [[p["name"] for p in t["plugins"]] for t in ours["tiers"]]


def test_admission_configmap_parses(rendered: list[dict]) -> None:
    from lahar.policies import loading

    cm = by_kind(rendered, "ConfigMap")["lahar-admission-config"]
    config = loading.parse_admission_config(cm)
    assert tuple(config.scheduler_names) == ("volcano",)
    assert config.default_queue == "default"


# --------------------------------------------------------------------------------------------------------------
# the image


def test_images_are_lahar_and_redis(rendered: list[dict]) -> None:
    images = {c["image"] for _, spec in workloads(rendered) for c in spec["containers"]}
    assert {i.split(":")[0] for i in images} == {"lahar", "redis"}
    assert all(":" in i for i in images)  # pinned tags, never an implicit :latest


def test_dockerfile_ships_what_the_manifests_run(rendered: list[dict]) -> None:
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    assert re.search(r'^ENTRYPOINT \["lahar"\]', text, re.M)
    user = re.findall(r"^USER (\S+)", text, re.M)
    assert user and not user[-1].startswith(("root", "0"))
    assert re.search(r"^RUN pip install \.", text, re.M)
    # the folders the lahar/ package links to (lahar/kube -> ../kube, ...) must be in the build context
    packages = {"lahar"} | {p.name for p in (REPO / "lahar").iterdir() if p.is_symlink()}
    copied = set(re.findall(r"^COPY (\w+)/ ", text, re.M))
    assert packages <= copied, f"not copied into the image: {packages - copied}"
    uid = int(user[-1].split(":")[0])
    for name, spec in workloads(rendered):
        run_as = (spec.get("securityContext") or {}).get("runAsUser")
        if spec["containers"][0]["image"].startswith("lahar"):
            assert run_as == uid, name
    certs_args = by_kind(rendered, "Job")["lahar-certs"]["spec"]["template"]["spec"]["containers"][0]["args"]
    manifests = certs_args[certs_args.index("--manifests") + 1]
    assert re.search(rf"^COPY deploy/webhooks/ {re.escape(manifests)}/?$", text, re.M)
