"""Table tests of `kube.podspec`: Kubernetes' QoS, PodRequests/PodLimits and name rules, cases in our own words."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.kube import podspec


def ctr(req: dict[str, str] | None = None, lim: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if req is not None:
        res["requests"] = req
    if lim is not None:
        res["limits"] = lim
    return {"name": "c", "resources": res, **extra}


def pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": containers, "initContainers": init or [], **spec}}


CM = {"cpu": "1", "memory": "1Gi"}

QOS_CASES = [
    ("nothing", pod([ctr()]), "BestEffort"),
    ("zero-requests-count-as-none", pod([ctr(req={"cpu": "0", "memory": "0"})]), "BestEffort"),
    ("only-gpus", pod([ctr(req={"nvidia.com/gpu": "1"}, lim={"nvidia.com/gpu": "1"})]), "BestEffort"),
    ("requests-equal-limits", pod([ctr(req=CM, lim=CM)]), "Guaranteed"),
    ("limits-only-default-the-requests", pod([ctr(lim=CM)]), "Guaranteed"),
    ("cpu-limit-missing", pod([ctr(req=CM, lim={"memory": "1Gi"})]), "Burstable"),
    ("request-below-limit", pod([ctr(req={"cpu": "500m", "memory": "1Gi"}, lim=CM)]), "Burstable"),
    ("init-container-without-limits", pod([ctr(lim=CM)], init=[ctr(req={"cpu": "1"})]), "Burstable"),
    ("init-container-guaranteed-too", pod([ctr(lim=CM)], init=[ctr(lim=CM)]), "Guaranteed"),
    ("second-container-best-effort", pod([ctr(lim=CM), ctr()]), "Burstable"),
    # kube compares the per-resource sums, not each container
    ("sums-compared-not-containers",
     pod([ctr(req={"cpu": "1", "memory": "1Gi"}, lim={"cpu": "2", "memory": "1Gi"}),
          ctr(req={"cpu": "2", "memory": "1Gi"}, lim={"cpu": "1", "memory": "1Gi"})]), "Guaranteed"),
    ("same-value-other-spelling", pod([ctr(req={"cpu": "1000m", "memory": "1024Mi"}, lim=CM)]), "Guaranteed"),
    ("pod-level-limits", pod([ctr()], resources={"limits": CM}), "Guaranteed"),
    ("pod-level-requests-only", pod([ctr(lim=CM)], resources={"requests": CM}), "Burstable"),
]


@pytest.mark.parametrize(("p", "want"), [c[1:] for c in QOS_CASES], ids=[c[0] for c in QOS_CASES])
def test_qos_class(p: dict[str, Any], want: str) -> None:
    assert podspec.qos_class(p) == want


def _canon(rl: dict[str, Any]) -> dict[str, str]:
    return {k: v.canonical for k, v in rl.items()}


SIDECAR = {"restartPolicy": "Always"}
REQ_CASES = [
    ("app-containers-sum", pod([ctr(req={"cpu": "1"}), ctr(req={"cpu": "500m", "memory": "1Gi"})]),
     {"cpu": "1500m", "memory": "1Gi"}),
    ("init-larger-wins", pod([ctr(req={"cpu": "1"})], init=[ctr(req={"cpu": "3", "memory": "1Gi"})]),
     {"cpu": "3", "memory": "1Gi"}),
    ("init-smaller-loses", pod([ctr(req={"cpu": "2"})], init=[ctr(req={"cpu": "1"})]), {"cpu": "2"}),
    ("sidecar-adds-to-the-sum", pod([ctr(req={"cpu": "1"})], init=[ctr(req={"cpu": "1"}, **SIDECAR)]),
     {"cpu": "2"}),
    # a plain init container after a sidecar runs next to it: 1 (sidecar) + 2 (init) = 3 > 1 + 1
    ("init-after-sidecar-stacks", pod([ctr(req={"cpu": "1"})],
                                      init=[ctr(req={"cpu": "1"}, **SIDECAR), ctr(req={"cpu": "2"})]), {"cpu": "3"}),
    ("init-before-sidecar-alone", pod([ctr(req={"cpu": "1"})],
                                      init=[ctr(req={"cpu": "2"}), ctr(req={"cpu": "1"}, **SIDECAR)]), {"cpu": "2"}),
    ("limit-defaults-request", pod([ctr(lim={"cpu": "2"})]), {"cpu": "2"}),
    ("overhead-added", pod([ctr(req={"cpu": "1"})], overhead={"cpu": "250m", "memory": "64Mi"}),
     {"cpu": "1250m", "memory": "64Mi"}),
    ("pod-level-replaces-cpu", pod([ctr(req={"cpu": "1", "nvidia.com/gpu": "1"})], resources={"requests": {"cpu": "4"}}),
     {"cpu": "4", "nvidia.com/gpu": "1"}),
]


@pytest.mark.parametrize(("p", "want"), [c[1:] for c in REQ_CASES], ids=[c[0] for c in REQ_CASES])
def test_pod_requests(p: dict[str, Any], want: dict[str, str]) -> None:
    assert _canon(podspec.pod_requests(p)) == want


LIM_CASES = [
    ("sum-and-init-max", pod([ctr(lim={"cpu": "1"}), ctr(lim={"cpu": "1"})], init=[ctr(lim={"cpu": "3"})]),
     {"cpu": "3"}),
    ("requests-do-not-make-limits", pod([ctr(req={"cpu": "1"})]), {}),
    ("overhead-only-where-limited", pod([ctr(lim={"cpu": "1"})], overhead={"cpu": "100m", "memory": "1Mi"}),
     {"cpu": "1100m"}),
    ("pod-level-limit", pod([ctr(lim={"memory": "1Gi"})], resources={"limits": {"memory": "2Gi"}}),
     {"memory": "2Gi"}),
]


@pytest.mark.parametrize(("p", "want"), [c[1:] for c in LIM_CASES], ids=[c[0] for c in LIM_CASES])
def test_pod_limits(p: dict[str, Any], want: dict[str, str]) -> None:
    assert _canon(podspec.pod_limits(p)) == want


def test_requests_without_overhead() -> None:
    p = pod([ctr(req={"cpu": "1"})], overhead={"cpu": "1"})
    assert _canon(podspec.pod_requests(p, overhead=False)) == {"cpu": "1"}


LABEL_RE = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
             "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '"
             + LABEL_RE + "')")
SUB_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
           "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '"
           + LABEL_RE + "(\\." + LABEL_RE + ")*')")
QN_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
          "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
          "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")

NAME_CASES = [
    ("label-ok", podspec.is_dns1123_label, "my-name", []),
    ("label-63-ok", podspec.is_dns1123_label, "a" * 63, []),
    ("label-too-long", podspec.is_dns1123_label, "a" * 64, ["must be no more than 63 characters"]),
    ("label-with-dots", podspec.is_dns1123_label, "a.b", ["must not contain dots"]),
    ("label-upper", podspec.is_dns1123_label, "A", [LABEL_MSG]),
    ("label-empty", podspec.is_dns1123_label, "", [LABEL_MSG]),
    ("subdomain-ok", podspec.is_dns1123_subdomain, "a.b-c.d", []),
    ("subdomain-too-long-and-bad", podspec.is_dns1123_subdomain, "-" + "a" * 253,
     ["must be no more than 253 characters", SUB_MSG]),
    ("qname-ok", podspec.is_qualified_name, "example.com/My_Name", []),
    ("qname-plain-ok", podspec.is_qualified_name, "app", []),
    ("qname-empty-prefix", podspec.is_qualified_name, "/app", ["prefix part must be non-empty"]),
    ("qname-bad-prefix", podspec.is_qualified_name, "Ex/app", ["prefix part " + SUB_MSG]),
    ("qname-name-too-long", podspec.is_qualified_name, "a" * 64, ["name part must be no more than 63 characters"]),
    ("qname-empty-name", podspec.is_qualified_name, "x/", ["name part must be non-empty", "name part " + QN_MSG]),
    ("qname-two-slashes", podspec.is_qualified_name, "a/b/c",
     ["a qualified name " + QN_MSG + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]),
    ("value-empty-ok", podspec.is_valid_label_value, "", []),
    ("value-too-long", podspec.is_valid_label_value, "v" * 64, ["must be no more than 63 characters"]),
    ("value-bad-end", podspec.is_valid_label_value, "v-",
     ["a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
      "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
      "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"]),
]


@pytest.mark.parametrize(("check", "value", "want"), [c[1:] for c in NAME_CASES], ids=[c[0] for c in NAME_CASES])
def test_names(check: Any, value: str, want: list[str]) -> None:
    assert check(value) == want


def test_name_checks_return_fresh_lists() -> None:
    podspec.is_dns1123_label("A").append("x")
    assert podspec.is_dns1123_label("A") == [LABEL_MSG]


TAINT = {"key": "gpu", "value": "a100", "effect": "NoSchedule"}
TOLERATION_CASES = [
    ("equal-match", {"key": "gpu", "value": "a100", "effect": "NoSchedule"}, True),
    ("equal-is-the-default-operator", {"key": "gpu", "value": "a100"}, True),
    ("equal-other-value", {"key": "gpu", "operator": "Equal", "value": "v100"}, False),
    ("exists-any-value", {"key": "gpu", "operator": "Exists"}, True),
    ("exists-empty-key-tolerates-all", {"operator": "Exists"}, True),
    ("effect-mismatch", {"key": "gpu", "operator": "Exists", "effect": "NoExecute"}, False),
    ("key-mismatch", {"key": "cpu", "operator": "Exists"}, False),
    ("unknown-operator", {"key": "gpu", "operator": "Matches", "value": "a100"}, False),
]


@pytest.mark.parametrize(("tol", "want"), [c[1:] for c in TOLERATION_CASES], ids=[c[0] for c in TOLERATION_CASES])
def test_toleration_tolerates(tol: dict[str, str], want: bool) -> None:
    assert podspec.toleration_tolerates(tol, TAINT) is want
    assert podspec.tolerates({"spec": {"tolerations": [tol]}}, TAINT) is want
