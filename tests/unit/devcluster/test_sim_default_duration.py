"""`--sim-default-duration`: the simulated kubelets' run time for pods without `lahar.sh/sim-duration`.

Table tests of the pure `devcluster.kubelet.plan` with and without a default, and of the option's parser
(`lahar.up.parse_sim_duration`).
"""

from __future__ import annotations

import datetime as dt

import pytest

from lahar.devcluster import kubelet
from lahar.up import parse_sim_duration

T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def _pod(annotation: str | None, restart: str | None = "Never") -> dict:
    meta: dict = {"name": "p", "namespace": "default", "uid": "u1"}
    if annotation is not None:
        meta["annotations"] = {kubelet.DURATION_ANNOTATION: annotation}
    return {"metadata": meta, "spec": {"nodeName": "n0", "restartPolicy": restart,
                                       "containers": [{"name": "c", "image": "busybox"}]}}


def _running(pod: dict) -> dict:
    first = kubelet.plan(pod, now=T0, host_ip="10.0.0.2", pod_ip="10.244.0.2")
    assert first.status is not None
    return {**pod, "status": first.status}


# (id, annotation, restartPolicy, default, seconds later, phase written (None: no write), wake after s)
CASES = [
    ("no-default-runs-forever", None, "Never", None, 3600, None, None),
    ("default-not-yet-due", None, "Never", 3.0, 2, None, 3),
    ("default-due-succeeds", None, "Never", 3.0, 3, "Succeeded", None),
    ("annotation-wins-over-default", "10s", "Never", 3.0, 5, None, 10),
    ("annotation-due", "10s", "Never", 3.0, 10, "Succeeded", None),
    ("default-zero-finishes-at-once", None, "OnFailure", 0.0, 0, "Succeeded", None),
    ("always-is-a-service-and-ignores-the-default", None, "Always", 2.0, 3600, None, None),
    ("unset-restart-policy-is-always", None, None, 2.0, 3600, None, None),
    ("always-with-annotation-restarts-in-place", "2s", "Always", None, 2, "Running", None),
]


@pytest.mark.parametrize(("annotation", "restart", "default", "later", "phase", "wake"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_plan_with_default_duration(annotation, restart, default, later, phase, wake) -> None:
    pod = _running(_pod(annotation, restart))
    action = kubelet.plan(pod, now=T0 + dt.timedelta(seconds=later), host_ip="10.0.0.2", pod_ip="10.244.0.2",
                          default_duration=default)
    if phase is None:
        assert action.status is None
    else:
        assert action.status is not None and action.status.get("phase", "Running") == phase
    if wake is not None:
        assert action.wake_at == T0 + dt.timedelta(seconds=wake)


def test_first_write_sets_the_default_timer() -> None:
    action = kubelet.plan(_pod(None), now=T0, host_ip="10.0.0.2", pod_ip="10.244.0.2", default_duration=2.5)
    assert action.status is not None and action.status["phase"] == "Running"
    assert action.wake_at == T0 + dt.timedelta(seconds=2.5)


PARSE_CASES = [
    ("unset", None, None),
    ("empty", "", None),
    ("none", "none", None),
    ("seconds", "3s", 3.0),
    ("go-composite", "1m30s", 90.0),
    ("millis", "500ms", 0.5),
    ("zero", "0", 0.0),
]


@pytest.mark.parametrize(("text", "seconds"), [c[1:] for c in PARSE_CASES], ids=[c[0] for c in PARSE_CASES])
def test_parse_sim_duration(text, seconds) -> None:
    assert parse_sim_duration(text) == seconds


@pytest.mark.parametrize("text", ["3", "soon", "-2s"], ids=["no-unit", "word", "negative"])
def test_parse_sim_duration_refuses(text) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_sim_duration(text)
