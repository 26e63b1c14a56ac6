"""Koordinator GPU shares in a session: `koordinator.sh/gpu-memory-ratio` below a card gets a card chosen per pod,
shares fill one card before the next (binpack), no card is overcommitted across pods of one session or pods already
on the node, and the bind carries `scheduling.koordinator.sh/device-allocated`."""

from __future__ import annotations

import json
from typing import Any

from lahar.scheduler.placement import placement
from lahar.scheduler.plugins.deviceshare import DeviceShare
from tests.builders import tiers_conf
from tests.unit.scheduler.test_sched_deviceshare import _objs, dpod, session

ALLOCATED = "scheduling.koordinator.sh/device-allocated"
CONF = tiers_conf("allocate", ["gang"], ["predicates", "deviceshare"])


def share(name: str, ratio: int, *, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return dpod(name, extra={"koordinator.sh/gpu-memory-ratio": str(ratio)}, annotations=annotations)


def _gpu(d: Any, uid: str) -> list[dict[str, Any]]:
    return json.loads(d.annotations[uid][ALLOCATED])["gpu"]


def _one_node() -> dict[str, list[dict[str, Any]]]:
    return _objs("dgx-h100", 1)


def test_two_halves_share_a_card_and_sixty_takes_another() -> None:
    pods = [share("a", 50), share("b", 50), share("c", 60)]
    _, d = session(pods, _one_node(), min_member=3, conf=CONF)
    assert len(d.binds) == 3
    by_name = {b.name: _gpu(d, b.uid) for b in d.binds}
    minors = sorted(entry["minor"] for entries in by_name.values() for entry in entries)
    assert minors == [0, 0, 1]
    for entries in by_name.values():
        (entry,) = entries
        assert entry["id"].startswith("GPU-")
        assert set(entry["resources"]) == {"koordinator.sh/gpu-core", "koordinator.sh/gpu-memory",
                                           "koordinator.sh/gpu-memory-ratio"}
    assert sorted(e["resources"]["koordinator.sh/gpu-memory-ratio"] for v in by_name.values() for e in v) == [
        "50", "50", "60"]


def test_shares_of_running_pods_are_counted_from_their_annotations() -> None:
    objs = _one_node()
    busy = share("busy", 70, annotations={ALLOCATED: json.dumps({"gpu": [{"minor": 0, "resources": {
        "koordinator.sh/gpu-memory-ratio": "70"}}]})})
    busy["spec"]["nodeName"] = "dgx-h100-0"
    busy["status"]["phase"] = "Running"
    _, d = session([share("p1", 40), busy], objs, min_member=1, conf=CONF)
    (b,) = d.binds
    assert [e["minor"] for e in _gpu(d, b.uid)] == [1]


def test_a_whole_gpu_pod_does_not_take_a_shared_card() -> None:
    objs = _one_node()
    busy = share("busy", 10, annotations={ALLOCATED: json.dumps({"gpu": [{"minor": 0, "resources": {
        "koordinator.sh/gpu-memory-ratio": "10"}}]})})
    busy["spec"]["nodeName"] = "dgx-h100-0"
    busy["status"]["phase"] = "Running"
    _, d = session([dpod("p1", gpus=8), busy], objs, min_member=1, conf=CONF)
    assert not d.binds  # 7 whole cards free, not 8


def test_ratio_200_is_two_whole_cards() -> None:
    _, d = session([share("p1", 200)], _one_node(), min_member=1, conf=CONF)
    (b,) = d.binds
    assert [e["resources"]["koordinator.sh/gpu-memory-ratio"] for e in _gpu(d, b.uid)] == ["100", "100"]


def test_discard_releases_the_shares() -> None:
    # 17 halves on 8 cards: the gang of 17 cannot fit, nothing stays reserved
    pods = [share(f"p{i}", 50) for i in range(17)]
    ssn, d = session(pods, _one_node(), min_member=17, conf=CONF)
    assert not d.binds
    ds = ssn.plugins["deviceshare"]
    assert isinstance(ds, DeviceShare)
    nd = ds.node(0)
    assert nd is not None and not nd.taken_cards
    assert not placement(ssn).reserved


def test_no_card_overcommitted_in_one_session() -> None:
    pods = [share(f"p{i}", 30) for i in range(30)]
    _, d = session(pods, _one_node(), min_member=1, conf=CONF)
    per_card: dict[int, int] = {}
    for b in d.binds:
        for e in _gpu(d, b.uid):
            per_card[e["minor"]] = per_card.get(e["minor"], 0) + int(e["resources"]["koordinator.sh/gpu-memory-ratio"])
    assert len(d.binds) == 24 and all(v <= 100 for v in per_card.values())  # 3 per card
