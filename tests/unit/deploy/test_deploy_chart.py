"""The Helm chart (deploy/helm/lahar): with its defaults it renders the kustomize base's objects; each value it
offers changes what it says and the result still validates against Kubernetes' schemas; the renderer
(`lahar.chart`, no helm binary) handles the chart's Go-template subset and refuses the rest by name. Where helm is
installed, `helm lint` and `helm template` agree with it.
"""

from __future__ import annotations

import base64
import copy
import functools
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from lahar import chart as charts
from tests.unit.deploy.deploy_objects import CHART, NS, by_kind, chart, container, kustomize, workloads

K8S_VERSION = "1.30"
ADDED_BY_KUSTOMIZE = "app.kubernetes.io/part-of"
NO_SCHEMA = ("cert-manager.io/", "monitoring.coreos.com/")  # CRD kinds kubernetes-validate has no schema for


def _key(o: dict) -> tuple[str, str | None, str]:
    return o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]


def _normal(o: dict) -> dict:
    o = copy.deepcopy(o)
    labels = o["metadata"].get("labels") or {}
    labels.pop(ADDED_BY_KUSTOMIZE, None)
    if not labels:
        o["metadata"].pop("labels", None)
    return o


def test_chart_defaults_render_the_kustomize_base() -> None:
    ours = {_key(o): _normal(o) for o in chart({"createNamespace": True})}
    base = {_key(o): _normal(o) for o in kustomize()}
    assert sorted(ours) == sorted(base)
    different = [k for k in base if ours[k] != base[k]]
    assert not different, different


def test_chart_leaves_the_namespace_to_helm_by_default() -> None:
    assert "Namespace" not in {o["kind"] for o in chart()}


def _validate(objs: list[dict]) -> list[str]:
    kv = pytest.importorskip("kubernetes_validate")
    errors = []
    for obj in objs:
        if obj["apiVersion"].startswith(NO_SCHEMA):
            continue
        try:
            kv.validate(obj, K8S_VERSION, strict=True)
        except kv.ValidationError as e:
            errors.append(f"{obj['kind']}/{obj['metadata']['name']}: {'/'.join(map(str, e.absolute_path))}: "
                          f"{e.message}")
    return errors


SCHED_CONF = 'actions: "enqueue, allocate, preempt"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n'
ADMISSION = "schedulerNames: [volcano, lahar]\ndefaultQueue: research\n"
POLICY = (Path(__file__).resolve().parents[3] / "examples" / "policies" / "default-priority-class.yaml").read_text()


def _env(objs: list[dict], workload: str) -> dict[str, dict]:
    return {e["name"]: e for e in container(objs, workload).get("env") or []}


def _check_replicas(objs: list[dict]) -> None:
    assert by_kind(objs, "Deployment")["lahar-worker"]["spec"]["replicas"] == 6
    args = container(objs, "lahar-worker")["args"]
    assert args[args.index("--concurrency") + 1] == "8"


def _check_resources(objs: list[dict]) -> None:
    assert container(objs, "lahar-webhook")["resources"] == {"requests": {"cpu": "300m", "memory": "256Mi"},
                                                              "limits": {"cpu": "2", "memory": "1Gi"}}


def _check_external_redis(objs: list[dict]) -> None:
    assert "lahar-redis" not in by_kind(objs, "StatefulSet") and "lahar-redis" not in by_kind(objs, "Service")
    assert "lahar-redis-ingress" not in by_kind(objs, "NetworkPolicy")
    env = _env(objs, "lahar-worker")
    assert env["REDIS_URL"]["value"] == "rediss://:$(REDIS_PASSWORD)@redis.example.com:6380/0"
    assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "shared-redis", "key": "secret"}
    (rule,) = by_kind(objs, "NetworkPolicy")["lahar-redis-egress"]["spec"]["egress"]
    assert rule == {"ports": [{"protocol": "TCP", "port": 6380}], "to": [{"ipBlock": {"cidr": "10.1.2.3/32"}}]}


def _check_cert_manager(objs: list[dict]) -> None:
    assert "lahar-certs" not in by_kind(objs, "Job") and "lahar-certs-renew" not in by_kind(objs, "CronJob")
    assert "lahar-certs" not in by_kind(objs, "ServiceAccount") and "lahar-certs" not in by_kind(objs, "ClusterRole")
    cert = by_kind(objs, "Certificate")["lahar-webhook"]["spec"]
    assert cert["secretName"] == "lahar-webhook-certs"
    assert f"lahar-webhook.{NS}.svc" in cert["dnsNames"]
    assert by_kind(objs, "Issuer")["lahar-ca"]["spec"]["ca"]["secretName"] != cert["secretName"]  # CA key apart
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        (hooks,) = by_kind(objs, kind).values()
        assert hooks["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NS}/lahar-webhook"


def _check_scheduler_conf(objs: list[dict]) -> None:
    from lahar.scheduler.framework import conf as confs
    from lahar.scheduler.registry import in_tree_registry

    text = by_kind(objs, "ConfigMap")["lahar-scheduler-configmap"]["data"]["volcano-scheduler.conf"]
    assert text == SCHED_CONF
    registry = in_tree_registry()
    assert list(confs.load(text, actions=registry.action_names, plugins=registry.plugin_names).actions) == \
        ["enqueue", "allocate", "preempt"]


def _check_admission(objs: list[dict]) -> None:
    from lahar.policies import loading

    config = loading.parse_admission_config(by_kind(objs, "ConfigMap")["lahar-admission-config"])
    assert (tuple(config.scheduler_names), config.default_queue) == (("volcano", "lahar"), "research")


def _check_policies(objs: list[dict]) -> None:
    from lahar.policies import loading

    cm = by_kind(objs, "ConfigMap")["default-priority"]
    assert cm["metadata"]["namespace"] == NS and cm["metadata"]["labels"][loading.POLICY_LABEL] == "true"
    assert cm["data"]["policy.yaml"] == POLICY


def _check_monitors(objs: list[dict]) -> None:
    sm = by_kind(objs, "ServiceMonitor")["lahar-scheduler"]
    svc = by_kind(objs, "Service")["lahar-scheduler-metrics"]
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert sm["spec"]["endpoints"][0]["port"] == svc["spec"]["ports"][0]["name"]
    assert sm["metadata"]["labels"]["release"] == "prom"
    pm = by_kind(objs, "PodMonitor")["lahar"]
    assert {e["port"] for e in pm["spec"]["podMetricsEndpoints"]} == {"metrics", "https"}
    (components,) = [e["values"] for e in pm["spec"]["selector"]["matchExpressions"]
                     if e["key"] == "app.kubernetes.io/component"]
    assert set(components) == {"scheduler", "worker", "dispatch", "webhook"}
    ctrl = by_kind(objs, "ServiceMonitor")["lahar-controllers"]
    assert ctrl["metadata"]["labels"]["release"] == "prom"
    (components,) = [e["values"] for e in ctrl["spec"]["selector"]["matchExpressions"]
                     if e["key"] == "app.kubernetes.io/component"]
    for comp in components:  # each selected Service has the port the endpoint names
        svc = by_kind(objs, "Service")[f"lahar-{comp}-metrics"]
        assert svc["metadata"]["labels"]["app.kubernetes.io/component"] == comp
        assert ctrl["spec"]["endpoints"][0]["port"] == svc["spec"]["ports"][0]["name"]
    assert set(components) == {"worker", "dispatch"}


def _check_api_server_cidrs(objs: list[dict]) -> None:
    (rule,) = by_kind(objs, "NetworkPolicy")["lahar-apiserver-egress"]["spec"]["egress"]
    assert rule["to"] == [{"ipBlock": {"cidr": "10.0.0.10/32"}}, {"ipBlock": {"cidr": "10.0.0.11/32"}}]


def _check_volcano_fallback(objs: list[dict]) -> None:
    from tests.unit.deploy.test_deploy_manifests import _rules_of

    where = {ns for ns, r in _rules_of(objs, "lahar-scheduler") if "configmaps" in r["resources"]}
    assert where == {NS, "volcano-system"}
    assert by_kind(objs, "ConfigMap")["lahar-env"]["data"]["LAHAR_SCHEDULER_CONF_NAMESPACES"] == \
        "lahar-system,volcano-system"


def _check_redis_secret(objs: list[dict]) -> None:
    secret = by_kind(objs, "Secret")["lahar-redis-auth"]
    assert base64.b64decode(secret["data"]["password"]).decode() == "0123abcd"


def _check_webhook_workers(objs: list[dict]) -> None:
    args = container(objs, "lahar-webhook")["args"]
    assert args[args.index("--workers") + 1] == "4"


def _check_defaults_have_no_monitors(objs: list[dict]) -> None:
    kinds = {o["kind"] for o in objs}
    assert not kinds & {"ServiceMonitor", "PodMonitor", "Certificate", "Issuer", "Secret"}


VARIANTS: list[tuple[str, dict[str, Any], Callable[[list[dict]], None]]] = [
    ("defaults", {}, _check_defaults_have_no_monitors),
    ("replicas", {"worker": {"replicas": 6, "concurrency": 8}}, _check_replicas),
    ("webhook-workers", {"webhook": {"workers": 4}}, _check_webhook_workers),
    ("resources", {"webhook": {"resources": {"requests": {"cpu": "300m", "memory": "256Mi"},
                                             "limits": {"cpu": "2", "memory": "1Gi"}}}}, _check_resources),
    ("external-redis", {"redis": {"internal": False, "url": "rediss://:$(REDIS_PASSWORD)@redis.example.com:6380/0",
                                  "externalPort": 6380, "externalCIDRs": ["10.1.2.3/32"],
                                  "auth": {"secretName": "shared-redis", "key": "secret"}}}, _check_external_redis),
    ("cert-manager", {"certManager": {"enabled": True}}, _check_cert_manager),
    ("scheduler-conf", {"scheduler": {"conf": SCHED_CONF}}, _check_scheduler_conf),
    ("admission-conf", {"admission": {"conf": ADMISSION}}, _check_admission),
    ("policies", {"policies": {"default-priority": POLICY}}, _check_policies),
    ("monitors", {"metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}},
                              "podMonitor": {"enabled": True}}}, _check_monitors),
    ("api-server-cidrs", {"networkPolicy": {"apiServerCIDRs": ["10.0.0.10/32", "10.0.0.11/32"]}},
     _check_api_server_cidrs),
    ("volcano-system-fallback", {"scheduler": {"volcanoSystemFallback": True}}, _check_volcano_fallback),
    ("redis-secret", {"redis": {"auth": {"create": True, "password": "0123abcd"}}}, _check_redis_secret),
]


@functools.cache
def _defaults() -> dict[tuple[str, str | None, str], dict]:
    return {_key(o): o for o in chart()}


@pytest.mark.parametrize(("values", "check"), [v[1:] for v in VARIANTS], ids=[v[0] for v in VARIANTS])
def test_chart_values(values: dict[str, Any], check: Callable[[list[dict]], None]) -> None:
    objs = chart(values)
    check(objs)
    # the defaults are validated by test_deploy_manifests; here what a value changed or added
    errors = _validate([o for o in objs if _defaults().get(_key(o)) != o])
    assert not errors, "\n".join(errors)
    assert all(o["metadata"].get("namespace") in (NS, "volcano-system", None) for o in objs)


def test_random_redis_password_when_none_is_given() -> None:
    one, two = (by_kind(chart({"redis": {"auth": {"create": True}}}), "Secret")["lahar-redis-auth"] for _ in "ab")
    assert len(base64.b64decode(one["data"]["password"])) == 40
    assert one["data"]["password"] != two["data"]["password"]


# -- the renderer -----------------------------------------------------------------------------------------------

TEMPLATES = [
    ("value", "a: {{ .Values.x }}", {"x": 3}, "a: 3"),
    ("nested-missing-is-empty", "a: {{ .Values.x.y }}", {}, "a: "),
    ("trim", "a:\n  {{- if .Values.on }}\n  b: 1\n  {{- end }}\n", {"on": True}, "a:\n  b: 1\n"),
    ("if-false", "a:\n  {{- if .Values.on }}\n  b: 1\n  {{- end }}\n", {"on": False}, "a:\n"),
    ("else-if", "{{ if .Values.a }}A{{ else if .Values.b }}B{{ else }}C{{ end }}", {"b": 1}, "B"),
    ("empty-list-is-false", "{{ if .Values.l }}y{{ else }}n{{ end }}", {"l": []}, "n"),
    ("not", "{{ if not .Values.on }}off{{ end }}", {"on": False}, "off"),
    ("range-list", "{{ range $c := .Values.l }}[{{ $c }}]{{ end }}", {"l": ["a", "b"]}, "[a][b]"),
    ("range-map-sorted", "{{ range $k, $v := .Values.m }}{{ $k }}={{ $v }};{{ end }}", {"m": {"b": 2, "a": 1}},
     "a=1;b=2;"),
    ("range-dot", "{{ range .Values.l }}<{{ . }}>{{ end }}", {"l": [1, 2]}, "<1><2>"),
    ("with", "{{ with .Values.m }}{{ .k }}{{ end }}", {"m": {"k": "v"}}, "v"),
    ("with-empty", "{{ with .Values.m }}x{{ else }}none{{ end }}", {"m": {}}, "none"),
    ("toYaml-nindent", "r: {{- toYaml .Values.r | nindent 2 }}", {"r": {"b": 1, "a": [1]}}, "r:\n  a:\n  - 1\n  b: 1"),
    ("pipe-quote", "u: {{ .Values.u | quote }}", {"u": "redis://:$(P)@h"}, 'u: "redis://:$(P)@h"'),
    ("default-paren", '{{ .Values.p | default (.Values.q | quote) }}', {"q": "z"}, '"z"'),
    ("default", "{{ .Values.p | default \"x\" }}", {"p": ""}, "x"),
    ("b64enc", "{{ .Values.p | b64enc }}", {"p": "pw"}, "cHc="),
    ("comment", "a{{/* hidden */}}b", {}, "ab"),
    ("include", '{{- define "n" -}}[{{ .Values.x }}]{{- end }}{{ include "n" . }}', {"x": 1}, "[1]"),
    ("root-var", "{{ range .Values.l }}{{ $.Values.x }}{{ end }}", {"l": [1, 2], "x": "r"}, "rr"),
]


def _render_one(tmp_path: Path, text: str, values: dict[str, Any]) -> str:
    (tmp_path / "templates").mkdir(exist_ok=True)
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: t\nversion: 0.0.1\n")
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    (tmp_path / "templates" / "t.yaml").write_text(text)
    return charts.render(tmp_path)["templates/t.yaml"]


@pytest.mark.parametrize(("text", "values", "want"), [t[1:] for t in TEMPLATES],
                         ids=[t[0] for t in TEMPLATES])
def test_renderer(tmp_path: Path, text: str, values: dict[str, Any], want: str) -> None:
    assert _render_one(tmp_path, text, values) == want


UNSUPPORTED = [
    ("unknown-function", "{{ .Values.x | sha256sum }}", "sha256sum"),
    ("tpl", "{{ tpl .Values.x . }}", "tpl"),
    ("template", '{{ template "x" . }}', "template"),
    ("missing-end", "{{ if .Values.x }}a", "missing end"),
    ("stray-end", "a{{ end }}", "end without"),
    ("unclosed", "a {{ .Values.x", "unclosed"),
    ("undefined-include", '{{ include "nope" . }}', "nope"),
    ("undefined-variable", "{{ $x }}", "$x"),
    ("required", '{{ required "redis.url is needed" .Values.url }}', "redis.url is needed"),
    ("prints-a-map", "r: {{ .Values }}", "pipe it to toYaml"),
]


@pytest.mark.parametrize(("text", "named"), [u[1:] for u in UNSUPPORTED], ids=[u[0] for u in UNSUPPORTED])
def test_renderer_refuses_what_it_cannot_render_by_name(tmp_path: Path, text: str, named: str) -> None:
    with pytest.raises(charts.ChartError, match="templates/t.yaml|required") as e:
        _render_one(tmp_path, text, {})
    assert named in str(e.value)


def test_chart_templates_use_only_the_supported_subset() -> None:
    """Every template of the chart renders under every variant (no ChartError), so helm and lahar agree on input."""
    for _, values, _ in VARIANTS:
        charts.render(CHART, values=values, include_crds=True)


# -- the CLI ----------------------------------------------------------------------------------------------------

SETS = [("a=1", {"a": 1}), ("a.b=true", {"a": {"b": True}}), ("a.b=x y", {"a": {"b": "x y"}}),
        ("a.b=[1, 2]", {"a": {"b": [1, 2]}}), ("a=", {"a": ""})]


@pytest.mark.parametrize(("item", "want"), SETS, ids=[s[0] for s in SETS])
def test_parse_set(item: str, want: dict[str, Any]) -> None:
    from lahar.commands.chart import parse_set

    assert parse_set(item) == want


@pytest.mark.parametrize("item", ["novalue", "=1", "a..b=1"])
def test_parse_set_names_the_bad_item(item: str) -> None:
    import typer

    from lahar.commands.chart import parse_set

    with pytest.raises(typer.BadParameter, match="expected key.path=value"):
        parse_set(item)


def test_lahar_chart_render(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from lahar.cli import app

    values = tmp_path / "v.yaml"
    values.write_text("worker: {replicas: 7}\n")
    out = CliRunner().invoke(app, ["chart", "render", "-f", str(values), "--set", "certManager.enabled=true",
                                   "--no-crds"])
    assert out.exit_code == 0, out.output
    objs = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert by_kind(objs, "Deployment")["lahar-worker"]["spec"]["replicas"] == 7
    assert "lahar-webhook" in by_kind(objs, "Certificate")
    assert "CustomResourceDefinition" not in {o["kind"] for o in objs}


# -- helm itself, where it is installed -------------------------------------------------------------------------

def _helm() -> str | None:
    """helm from the PATH, else the one `make peers` built (tests/peers/build.py)."""
    from tests.peers import build

    found = shutil.which("helm") or build.binary("helm")
    return str(found) if found else None


HELM = _helm()
needs_helm = pytest.mark.skipif(HELM is None, reason="helm is neither on PATH nor built by `make peers` "
                                                     "(lahar.chart renders alone)")


@needs_helm
def test_helm_lint() -> None:
    out = subprocess.run([HELM, "lint", str(CHART)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


@needs_helm
@pytest.mark.parametrize(("values", "check"), [v[1:] for v in VARIANTS], ids=[v[0] for v in VARIANTS])
def test_helm_template_agrees(tmp_path: Path, values: dict[str, Any], check: Callable[[list[dict]], None]) -> None:
    if values.get("redis", {}).get("auth", {}).get("create") and not values["redis"]["auth"].get("password"):
        pytest.skip("a random password differs per render")
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    out = subprocess.run([HELM, "template", "lahar", str(CHART), "-n", NS, "--include-crds", "--kube-version", "1.32.0",
                          "-f", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    theirs = {_key(o): o for o in yaml.safe_load_all(out.stdout) if o}
    ours = {_key(o): o for o in chart(values)}
    assert theirs == ours


def test_workloads_helper_sees_every_pod() -> None:
    assert {n for n, _ in workloads(chart())} >= {"lahar-webhook", "lahar-worker", "lahar-redis", "lahar-certs"}


def test_package_data_ships_the_chart_and_the_dashboard() -> None:
    """pyproject's "lahar.deploy" globs cover every file of the chart and deploy/grafana (what a wheel carries)."""
    import glob
    import os
    import tomllib

    deploy = CHART.parents[1]
    pyproject = tomllib.loads((deploy.parent / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["lahar.deploy"]
    shipped = {Path(p) for pattern in patterns for p in glob.glob(str(deploy / pattern), recursive=True)}
    wanted = {Path(root) / f for folder in (CHART, deploy / "grafana")
              for root, _, files in os.walk(folder, followlinks=True) for f in files}
    assert wanted and not wanted - shipped, sorted(map(str, wanted - shipped))
