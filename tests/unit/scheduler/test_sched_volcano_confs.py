"""Volcano's default scheduler confs round trip (issue 17, item 6): every conf of Volcano's Helm chart and of its
docs (held as data in volcano_confs.yaml beside this file) loads in lahar unchanged. The few that do not are listed
below with the reason: names lahar still lacks (xfail), and texts Volcano itself cannot run (expected refusals)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lahar.scheduler.framework import conf as confs
from lahar.scheduler.registry import in_tree_registry

REPO = Path(__file__).resolve().parents[3]
CONFS: list[dict[str, Any]] = yaml.safe_load((Path(__file__).parent / "volcano_confs.yaml").read_text())

# conf id → why lahar cannot load it yet (names it still lacks)
LACKING: dict[str, str] = {}

# conf id → the refusal lahar gives, for texts Volcano cannot run either (placeholders, typos, draft designs)
REFUSED = {
    "custom-plugin#1": "failed to find Plugin magic",  # the doc's out-of-tree example plugin, built as a .so
    "gang-aware-eviction-design#1": "failed to find Action gangPreempt",  # Volcano registers gangpreempt
    "job-resource-reservation-design#1": "unknown field",  # a draft: plugin names at the tier level
    "plugin-conf#1": "unknown field 'disableTaskOrder'",  # placeholder names, and the first design's switches
    "plugin-conf#2": "unknown field 'disableJobOrder'",
    "how_to_use_vnpu#2": "invalid YAML",  # a fragment of a ConfigMap, not a conf
}


def _load(text: str) -> confs.SchedulerConf:
    registry = in_tree_registry()
    return confs.load(text, actions=registry.action_names, plugins=registry.plugin_names)


def _params() -> list[Any]:
    out = []
    for c in CONFS:
        marks = [pytest.mark.xfail(reason=LACKING[c["id"]], strict=True)] if c["id"] in LACKING else []
        if c["id"] not in REFUSED:
            out.append(pytest.param(c["conf"], id=c["id"], marks=marks))
    return out


def test_the_list_covers_the_helm_chart_and_the_docs() -> None:
    sources = {c["source"] for c in CONFS}
    assert {"installer/helm/chart/volcano/config/volcano-scheduler.conf",
            "installer/helm/chart/volcano/config/volcano-scheduler-ci.conf",
            "installer/helm/chart/volcano/config/agent-scheduler.conf"} <= sources
    assert sum(s.startswith("docs/") for s in sources) >= 30
    assert set(LACKING) | set(REFUSED) <= {c["id"] for c in CONFS}


@pytest.mark.parametrize("text", _params())
def test_volcano_conf_loads_unchanged(text: str) -> None:
    conf = _load(text)
    assert conf.actions  # some docs show only the actions line (no tiers): that loads too


@pytest.mark.parametrize(("conf_id", "error"), sorted(REFUSED.items()), ids=sorted(REFUSED))
def test_texts_volcano_cannot_run_are_refused_clearly(conf_id: str, error: str) -> None:
    text = next(c["conf"] for c in CONFS if c["id"] == conf_id)
    with pytest.raises(ValueError, match=error):
        _load(text)
