"""policies.loading: ConfigMap → typed config with field paths, last-good fallback, change detection, hot reload."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from lahar.kube.apiserver.memory import MemoryClient
from lahar.policies import loading, metrics
from lahar.policies.admission import AdmissionConfig
from lahar.policies.errors import ConfigError

NS = "lahar-system"


def cm(name: str, data: dict[str, str], *, ns: str = NS, labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}}, "data": data}


def admission(text: str) -> dict:
    return cm(loading.ADMISSION_CONFIGMAP, {loading.ADMISSION_KEY: text})


POLICY = {"apiVersion": "lahar.sh/v1alpha1", "kind": "AdmissionPolicy", "metadata": {"name": "team"},
          "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"]}]},
                   "validations": [{"expression": "has(object.metadata.labels)"}]}}


def policy_cm(name: str = "team-policy", docs: list[dict] | None = None, text: str | None = None) -> dict:
    body = text if text is not None else yaml.safe_dump_all(docs or [POLICY])
    return cm(name, {loading.POLICY_KEY: body}, labels={loading.POLICY_LABEL: "true"})


# --- parsing --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "path", "reason"), [
    ("maxQueueDepth: 0", "data[admission.yaml].maxQueueDepth", "greater than or equal to 1"),
    ("schedulerNames: []", "data[admission.yaml].schedulerNames", "at least one non-empty scheduler name"),
    ("devices: {mig: {strategy: static}}", "data[admission.yaml].devices.mig.strategy", "'mixed' or 'dynamic'"),
    ("resourceGroups: [{resourceGroup: a, object: {key: label}}]",
     "data[admission.yaml].resourceGroups[0].object.key", "'namespace' or 'annotation'"),
    ("bogus: 1", "data[admission.yaml].bogus", "Extra inputs are not permitted"),
    ("- a list", "data[admission.yaml]", "must be a mapping"),
    ("a: [", "data[admission.yaml]", "not valid YAML"),
], ids=["depth", "schedulers", "mig-strategy", "resource-group-key", "unknown", "not-mapping", "yaml"])
def test_admission_config_errors_name_the_field(text: str, path: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        loading.parse_admission_config(admission(text))
    assert any(p == path and reason in r for p, r in info.value.errors), info.value.errors
    assert info.value.source == f"ConfigMap {NS}/{loading.ADMISSION_CONFIGMAP}"


@pytest.mark.parametrize(("configmap", "expected"), [
    (None, AdmissionConfig()),
    (admission(""), AdmissionConfig()),
    (admission("maxQueueDepth: 7\ndefaultQueue: batch"), AdmissionConfig(max_queue_depth=7, default_queue="batch")),
    (admission("max_queue_depth: 3"), AdmissionConfig(max_queue_depth=3)),
], ids=["absent", "empty", "camelCase", "snake_case"])
def test_admission_config_values(configmap: dict | None, expected: AdmissionConfig) -> None:
    assert loading.parse_admission_config(configmap) == expected


def test_missing_key_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"data\[admission.yaml\]: required key is missing"):
        loading.parse_admission_config(cm(loading.ADMISSION_CONFIGMAP, {}))


def test_policy_configmap_errors_carry_document_and_path() -> None:
    bad = {**POLICY, "spec": {**POLICY["spec"], "validations": [{"expression": "object.x ==", "message": "m"}]}}
    with pytest.raises(ConfigError) as info:
        loading.parse_policy_configmap(policy_cm(docs=[POLICY | {"metadata": {"name": "ok"}}, bad]))
    (path, reason), = info.value.errors
    assert path == "data[policy.yaml][doc 1] team spec.validations[0].expression"
    assert "compilation failed: Syntax error" in reason and "line 1, column 12" in reason


@pytest.mark.parametrize(("configmap", "fragment"), [
    (admission("maxQueueDepth: 5"), None),
    (admission("maxQueueDepth: -1"), "data[admission.yaml].maxQueueDepth"),
    (policy_cm(), None),
    (policy_cm(text="kind: AdmissionPolicy"), "data[policy.yaml][doc 0] apiVersion"),
    (cm("unrelated", {"policy.yaml": "not: checked"}), None),
], ids=["admission-ok", "admission-bad", "policy-ok", "policy-bad", "not-lahars"])
def test_validate_configmap(configmap: dict, fragment: str | None) -> None:
    messages = loading.validate_configmap(configmap)
    if fragment is None:
        assert messages == []
    else:
        assert messages and any(m.startswith(fragment) for m in messages), messages


def test_registered_validators_check_named_configmaps(monkeypatch: pytest.MonkeyPatch) -> None:
    def parse(c: dict) -> None:
        if "actions" not in (c.get("data") or {}).get(loading.SCHEDULER_KEY, ""):
            raise ValueError("actions: required")

    monkeypatch.setattr(loading, "_VALIDATORS", dict(loading._VALIDATORS))
    loading.register_validator(loading.SCHEDULER_CONFIGMAP, parse)
    bad = cm(loading.SCHEDULER_CONFIGMAP, {loading.SCHEDULER_KEY: "tiers: []"})
    assert loading.validate_configmap(bad) == ["actions: required"]
    assert loading.validate_configmap(bad, namespace="elsewhere") == []


# --- Loader: last good, change detection ----------------------------------------------------------------------------

def test_loader_keeps_the_last_good_value_and_skips_unchanged_data() -> None:
    parsed: list[Any] = []

    def parse(c: dict | None) -> AdmissionConfig:
        parsed.append(c)
        return loading.parse_admission_config(c)

    seen: list[AdmissionConfig] = []
    loader = loading.Loader(parse, default=AdmissionConfig())
    loader.on_change(seen.append)
    assert loader.apply(admission("maxQueueDepth: 7")) == loading.Outcome(True)
    assert loader.current.max_queue_depth == 7
    again = admission("maxQueueDepth: 7")
    again["metadata"]["resourceVersion"] = "99"
    assert loader.apply(again) == loading.Outcome(False)       # same data: not re-parsed
    assert len(parsed) == 1
    bad = loader.apply(admission("maxQueueDepth: zero"))
    assert not bad.changed and bad.error is not None
    assert "data[admission.yaml].maxQueueDepth" in str(bad.error)
    assert loader.current.max_queue_depth == 7                 # last good stays
    assert loader.apply(admission("maxQueueDepth: 8")).changed
    assert [c.max_queue_depth for c in seen] == [7, 8]
    assert loader.apply(None).changed and loader.current == AdmissionConfig()


def test_policy_loader_per_configmap_last_good_and_name_clashes() -> None:
    lookups: dict[tuple[str, str], dict] = {}
    loader = loading.PolicyLoader(param_lookup=lambda ns, name: lookups.get((ns, name)))
    assert loader.apply(policy_cm()).changed
    assert [p.name for p in loader.current()] == ["team"]
    bad = loader.apply(policy_cm(text="kind: AdmissionPolicy"))
    assert bad.error is not None and [p.name for p in loader.current()] == ["team"]
    clash = loader.apply(policy_cm("other"))
    assert clash.error is not None and "already defined in ConfigMap lahar-system/team-policy" in str(clash.error)
    with_ref = {**POLICY, "metadata": {"name": "ref"}, "spec": {**POLICY["spec"], "paramRef": {"name": "limits"}}}
    assert loader.apply(policy_cm("refs", docs=[with_ref])).changed
    assert loader.param_refs() == {"lahar-system/limits"}
    ref = next(p for p in loader.current() if p.name == "ref")
    assert ref.params is None
    lookups[(NS, "limits")] = {"data": {"a": "1"}}
    loader.refresh_params()
    assert next(p for p in loader.current() if p.name == "ref").params == {"data": {"a": "1"}}
    assert loader.remove(policy_cm("refs"))
    assert [p.name for p in loader.current()] == ["team"]


# --- the watch, on an in-memory cluster -------------------------------------------------------------------------------

def eventually(check: Callable[[], Any], timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.01)


@pytest.fixture
def cluster() -> MemoryClient:
    client = MemoryClient()
    client.create(client.registry.get("", "v1", "namespaces"),
                  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    return client


def test_watch_applies_changes_and_reports_bad_ones(cluster: MemoryClient) -> None:
    rt = cluster.registry.get("", "v1", "configmaps")
    events_rt = cluster.registry.get("", "v1", "events")
    cluster.create(rt, admission("maxQueueDepth: 6"), namespace=NS)
    watch = loading.ConfigMapWatch(cluster, component="test")
    config = watch.watch(loading.Loader(loading.parse_admission_config, default=AdmissionConfig()),
                         namespace=NS, name=loading.ADMISSION_CONFIGMAP)
    policies = watch.watch_policies()
    key = f"{NS}/{loading.ADMISSION_CONFIGMAP}"
    failures = metrics.RELOAD_FAILURES.value(configmap=key)
    with watch:
        assert eventually(lambda: config.current.max_queue_depth == 6)
        current = cluster.get(rt, loading.ADMISSION_CONFIGMAP, namespace=NS)
        current["data"][loading.ADMISSION_KEY] = "maxQueueDepth: 9"
        cluster.update(rt, current, namespace=NS)
        assert eventually(lambda: config.current.max_queue_depth == 9)

        current = cluster.get(rt, loading.ADMISSION_CONFIGMAP, namespace=NS)
        current["data"][loading.ADMISSION_KEY] = "maxQueueDepth: nine"
        cluster.update(rt, current, namespace=NS)
        assert eventually(lambda: metrics.RELOAD_FAILURES.value(configmap=key) == failures + 1)
        assert config.current.max_queue_depth == 9
        evs = eventually(lambda: [e for e in cluster.list(events_rt, namespace=NS)["items"]
                                  if e["reason"] == "InvalidConfiguration"])
        assert evs and evs[0]["involvedObject"]["name"] == loading.ADMISSION_CONFIGMAP
        assert "data[admission.yaml].maxQueueDepth" in evs[0]["message"]

        cluster.create(rt, policy_cm(), namespace=NS)
        assert eventually(lambda: [p.name for p in policies.current()] == ["team"])
        cluster.delete(rt, "team-policy", namespace=NS)
        assert eventually(lambda: len(policies.current()) == 0)
        cluster.delete(rt, loading.ADMISSION_CONFIGMAP, namespace=NS)
        assert eventually(lambda: config.current == AdmissionConfig())


def test_metrics_render() -> None:
    reg = metrics.Registry()
    c = reg.counter("x_total", "Things.", ("a",))
    c.inc(a='q"1')
    assert reg.counter("x_total", "ignored") is c
    assert reg.render() == '# HELP x_total Things.\n# TYPE x_total counter\nx_total{a="q\\"1"} 1\n'
    with pytest.raises(ValueError, match="takes labels"):
        c.inc(b="1")


# --- a policy that cannot be loaded is skipped at startup, with an Event and a metric, never fatal ----------------

HOSTILE = {**POLICY, "metadata": {"name": "hostile"},
           "spec": {**POLICY["spec"], "validations": [{"expression": "1" + "+1" * 40_000 + " > 0"}]}}


def test_policy_loader_turns_an_unexpected_failure_into_a_rejection(monkeypatch: pytest.MonkeyPatch) -> None:
    loader = loading.PolicyLoader()

    def explode(*_a: Any, **_k: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(loading, "load_documents", explode)
    outcome = loader.apply(policy_cm())
    assert not outcome.changed and outcome.error is not None
    assert outcome.error.errors == [(f"data[{loading.POLICY_KEY}]",
                                     "could not be loaded (RecursionError): maximum recursion depth exceeded")]
    assert list(loader.current()) == []


def test_a_hostile_policy_present_at_startup_is_skipped_and_reported(cluster: MemoryClient) -> None:
    rt = cluster.registry.get("", "v1", "configmaps")
    events_rt = cluster.registry.get("", "v1", "events")
    cluster.create(rt, policy_cm("hostile-policy", docs=[HOSTILE]), namespace=NS)
    cluster.create(rt, policy_cm(), namespace=NS)
    key = f"{NS}/hostile-policy"
    failures = metrics.RELOAD_FAILURES.value(configmap=key)
    watch = loading.ConfigMapWatch(cluster, component="test")
    policies = watch.watch_policies()
    with watch:
        assert eventually(lambda: [p.name for p in policies.current()] == ["team"])
        assert eventually(lambda: metrics.RELOAD_FAILURES.value(configmap=key) == failures + 1)
        evs = eventually(lambda: [e for e in cluster.list(events_rt, namespace=NS)["items"]
                                  if e["reason"] == "InvalidConfiguration"
                                  and e["involvedObject"]["name"] == "hostile-policy"])
        assert evs and "spec.validations[0].expression" in evs[0]["message"]
        assert "nested more than 250 levels deep" in evs[0]["message"]
        assert "at line 1, column 502" in evs[0]["message"]
