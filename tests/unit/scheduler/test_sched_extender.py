"""extender: Volcano's plugins/extender tests as data (IsInterested, hasManagedResources), the argument and
response readings as tables, and whole sessions against the example extender (examples/extender/app.py) served on
a real port by uvicorn in a thread: predicate, prioritize, enqueue, and an unreachable extender, ignorable or not."""

from __future__ import annotations

import importlib.util
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import yaml

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.framework.hooks import Vote
from lahar.scheduler.plugins import extender as ex
from lahar.scheduler.registry import in_tree_registry
from tests.builders import node, pod, podgroup, queue, run

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "extender"


def _container(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": requests or {}, "limits": limits or {}}}


def _pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"spec": {"containers": containers, "initContainers": init or []}}


# Volcano's TestIsInterested and TestHasManagedResources, in our words.
@pytest.mark.parametrize(("managed", "pod_", "want"), [
    ((), _pod([_container({"cpu": "1"})]), True),
    (("nvidia.com/gpu",), _pod([_container({"nvidia.com/gpu": "1"})]), True),
    (("nvidia.com/gpu",), _pod([_container(limits={"nvidia.com/gpu": "1"})]), True),
    (("nvidia.com/gpu",), _pod([_container({"cpu": "1"})], init=[_container({"nvidia.com/gpu": "1"})]), True),
    (("nvidia.com/gpu",), _pod([_container({"cpu": "1", "memory": "1Gi"})]), False),
    (("nvidia.com/gpu", "example.com/foo"), _pod([_container({"example.com/foo": "1"})]), True),
    (("nvidia.com/gpu",), _pod([]), False),
    (("nvidia.com/gpu",), _pod([_container({"cpu": "1"}), _container({"nvidia.com/gpu": "2"})]), True),
    (("nvidia.com/gpu",), {"spec": {"containers": [{"name": "c"}]}}, False),
], ids=["no-managed-resources", "requests", "limits", "init-container", "none-managed", "one-of-several",
        "no-containers", "second-container", "no-resources-block"])
def test_is_interested(managed: tuple[str, ...], pod_: dict[str, Any], want: bool) -> None:
    assert ex.is_interested(pod_, frozenset(managed)) is want


@pytest.mark.parametrize(("arguments", "want"), [
    ({}, ex.ExtenderConfig(verbs={})),
    ({"extender.urlPrefix": "http://e:80", "extender.httpTimeout": "100ms", "extender.predicateVerb": "predicate",
      "extender.ignorable": True, "extender.managedResources": ["nvidia.com/gpu"]},
     ex.ExtenderConfig("http://e:80", 0.1, {"predicate": "predicate"}, True, frozenset({"nvidia.com/gpu"}))),
    ({"extender.httpTimeout": "soon"}, ex.ExtenderConfig(verbs={})),
    ({"extender.httpTimeout": "-1s"}, ex.ExtenderConfig(verbs={})),
    ({"extender.ignorable": "true", "extender.managedResources": "a, b"},
     ex.ExtenderConfig(verbs={}, ignorable=True, managed_resources=frozenset({"a", "b"}))),
    ({"extender.predicateVerb": "", "extender.prioritizeVerb": 3}, ex.ExtenderConfig(verbs={})),
], ids=["defaults", "all-set", "bad-timeout-keeps-1s", "negative-timeout-keeps-1s", "strings", "empty-verbs-off"])
def test_parse_config(arguments: dict[str, Any], want: ex.ExtenderConfig) -> None:
    assert ex.parse_config(arguments) == want


def test_only_configured_verbs_become_hooks() -> None:
    p = ex.Extender({"extender.urlPrefix": "http://e", "extender.prioritizeVerb": "prio"})
    assert getattr(p, "node_order", None) is not None
    assert getattr(p, "predicate", None) is None and getattr(p, "preemptable", None) is None


@pytest.mark.parametrize(("body", "want"), [
    ({"status": "", "code": 0}, (True, "", False)),
    ({}, (True, "", False)),
    ({"status": "no room", "code": 2}, (False, "no room", False)),
    ({"status": "never", "code": 3}, (False, "never", True)),
    ({"status": "old extender"}, (False, "old extender", False)),
], ids=["fits", "empty-body-fits", "unschedulable", "unresolvable", "message-without-code"])
def test_predicate_verdict(body: dict[str, Any], want: tuple[bool, str, bool]) -> None:
    assert ex.predicate_verdict(body) == want


@pytest.mark.parametrize(("body", "want"), [
    ({"nodeScore": {"a": 3, "b": 1.5}}, [3.0, 1.5, 0.0]),
    ({"nodeScore": {}, "errorMessage": ""}, [0.0, 0.0, 0.0]),
    ({"nodeScore": {"a": 1}, "errorMessage": "boom"}, "boom"),
    ({"errorMessage": ""}, "no nodeScore"),
    ({"nodeScore": {"a": "high"}}, "must be a number"),
], ids=["scores-in-order", "empty-scores", "error-message", "no-node-score", "non-number"])
def test_prioritize_scores(body: dict[str, Any], want: list[float] | str) -> None:
    if isinstance(want, str):
        with pytest.raises(ex.ExtenderError, match=want):
            ex.prioritize_scores(body, ["a", "b", "c"])
    else:
        assert ex.prioritize_scores(body, ["a", "b", "c"]).tolist() == want


class _T:
    def __init__(self, uid: str) -> None:
        self.uid = uid


@pytest.mark.parametrize(("body", "want"), [
    ({"status": 0, "victims": [{"UID": "a"}]}, None),
    ({"status": 1, "victims": [{"UID": "a"}, {"UID": "zz"}]}, ["a"]),
    ({"status": 1}, []),
    ({"status": -1, "victims": [{"UID": "a"}]}, []),
    ({"status": 7}, "must be -1, 0 or 1"),
], ids=["abstain", "permit-known-uids", "permit-none", "reject", "bad-status"])
def test_victims_of(body: dict[str, Any], want: list[str] | str | None) -> None:
    cands: list[Any] = [_T("a"), _T("b")]
    if isinstance(want, str):
        with pytest.raises(ex.ExtenderError, match=want):
            ex.victims_of(body, cands)
        return
    got = ex.victims_of(body, cands)
    assert (None if got is None else [t.uid for t in got]) == want


@pytest.mark.parametrize(("value", "want"), [(1, Vote.PERMIT), (0, Vote.ABSTAIN), (-1, Vote.REJECT)],
                         ids=["permit", "abstain", "reject"])
def test_vote_of(value: int, want: Vote) -> None:
    assert ex.vote_of(value) is want


def test_vote_of_refuses_bool() -> None:
    with pytest.raises(ex.ExtenderError):
        ex.vote_of(True)


# --- sessions against the example extender on a real port ------------------------------------------------------

def _example_app() -> Any:
    spec = importlib.util.spec_from_file_location("example_extender", EXAMPLE / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def extender_url() -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(_example_app().create_app(), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _closed_port_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens here any more
    return f"http://127.0.0.1:{port}"


def _conf(url: str, *, actions: str = "allocate", ignorable: bool = False, **verbs: str) -> str:
    arguments: dict[str, Any] = {"extender.urlPrefix": url, "extender.httpTimeout": "2s",
                                 "extender.ignorable": ignorable}
    arguments.update({f"extender.{k}Verb": v for k, v in verbs.items()})
    return yaml.safe_dump({"actions": actions, "tiers": [
        {"plugins": [{"name": "gang"}, {"name": "predicates"}]},
        {"plugins": [{"name": "nodeorder"}, {"name": "extender", "arguments": arguments}]}]})


NODES = [node("n1").alloc("4", "8Gi").label(**{"example.extender/refuse": "true",
                                                 "example.extender/score": "1000"}),
         node("n2").alloc("4", "8Gi").label(**{"example.extender/score": "1"}),
         node("n3").alloc("4", "8Gi").label(**{"example.extender/score": "90"})]


def _run(conf: str, pods: list[Any] | None = None, podgroups: list[Any] | None = None) -> Any:
    return run(pods=pods or [pod("p1").req("1", "1Gi").group("pg1")], nodes=NODES,
               podgroups=podgroups or [podgroup("pg1").min(1).queue("default").phase("Inqueue")],
               queues=[queue("default")], conf=conf)


def test_example_conf_loads() -> None:
    registry = in_tree_registry()
    conf = confs.load((EXAMPLE / "conf.yaml").read_text(), actions=registry.action_names,
                      plugins=registry.plugin_names)
    assert "extender" in [p.name for tier in conf.tiers for p in tier.plugins]


def test_predicate_and_prioritize_steer_the_pod(extender_url: str) -> None:
    d = _run(_conf(extender_url, onSessionOpen="onSessionOpen", onSessionClose="onSessionClose",
                   predicate="predicate", prioritize="prioritize"))
    # n1 scores highest but the extender refuses it; n3 outscores n2
    assert d.bind_map() == {"c1/p1": "n3"}
    stats = httpx.get(f"{extender_url}/stats").json()
    assert stats["onSessionOpen"] == 1 and stats["onSessionClose"] == 1 and stats["nodes"] == 3
    assert stats["predicate"] >= 3 and stats["prioritize"] >= 1


def test_refusal_reason_names_the_extender_answer(extender_url: str) -> None:
    only_n1 = yaml.safe_load(_conf(extender_url, predicate="predicate"))
    d = run(pods=[pod("p1").req("1", "1Gi").group("pg1")], nodes=NODES[:1],
            podgroups=[podgroup("pg1").min(1).queue("default").phase("Inqueue")], queues=[queue("default")],
            conf=yaml.safe_dump(only_n1))
    assert d.binds == []
    assert any("refused by the example extender" in c.event_message for c in d.pod_conditions)


def test_enqueue_holds_what_the_extender_rejects(extender_url: str) -> None:
    # enqueue asks the plugins only about PodGroups with minResources (as upstream)
    d = _run(_conf(extender_url, actions="enqueue", jobEnqueueable="jobEnqueueable"),
             podgroups=[podgroup("pg1").min(1).queue("default").phase("Pending").min_resources(cpu="1")
                        .annotate(**{"example.extender/hold": "yes"}),
                        podgroup("pg2").min(1).queue("default").phase("Pending").min_resources(cpu="1")],
             pods=[pod("p1").req("1", "1Gi").group("pg1"), pod("p2").req("1", "1Gi").group("pg2")])
    phases = {name.split("/")[-1]: u.status.get("phase") for name, u in d.podgroups.items()}
    assert phases.get("pg2") == "Inqueue" and phases.get("pg1") != "Inqueue"


def test_unreachable_ignorable_extender_is_skipped() -> None:
    d = _run(_conf(_closed_port_url(), ignorable=True, predicate="predicate", prioritize="prioritize"))
    assert d.bind_map()["c1/p1"] in {"n1", "n2", "n3"}


def test_unreachable_extender_fails_the_predicate_with_a_reason() -> None:
    url = _closed_port_url()
    d = _run(_conf(url, predicate="predicate", prioritize="prioritize", onSessionClose="onSessionClose"))
    assert d.binds == []
    messages = " ".join(c.event_message for c in d.pod_conditions)
    assert "extender" in messages and "unreachable" in messages, messages


def test_a_non_200_answer_fails_the_predicate(extender_url: str) -> None:
    d = _run(_conf(extender_url, predicate="no-such-verb"))
    assert d.binds == []
    assert any("code 404" in c.event_message for c in d.pod_conditions)


def test_down_extender_is_called_once_per_session() -> None:
    p = ex.Extender({"extender.urlPrefix": _closed_port_url(), "extender.predicateVerb": "predicate"})
    for _ in range(3):
        with pytest.raises(ex.ExtenderError, match="unreachable"):
            p.transport.send("predicate", {})
    assert p.transport.calls == 1
