"""`/metrics` over several worker processes (`webhooks.shared_metrics`): counters and histograms summed across
the workers' snapshots, other families from the answering worker."""

from __future__ import annotations

import os

import pytest
from starlette.testclient import TestClient

from lahar.webhooks import shared_metrics, watchdog
from lahar.webhooks.app import create_app
from lahar.webhooks.lookups import StaticLookups

C = "# TYPE reviews_total counter\n"
H = "# TYPE took histogram\n"
G = "# TYPE loaded gauge\n"


@pytest.mark.parametrize(("texts", "expected"), [
    ([], ""),
    ([C + 'reviews_total{path="/a"} 3\n'], C + 'reviews_total{path="/a"} 3\n'),
    ([C + 'reviews_total{path="/a"} 3\n', C + 'reviews_total{path="/a"} 4\n'], C + 'reviews_total{path="/a"} 7\n'),
    ([C + 'reviews_total{path="/a"} 3\n', C + 'reviews_total{path="/b"} 1\n'],
     C + 'reviews_total{path="/a"} 3\nreviews_total{path="/b"} 1\n'),
    ([H + 'took_bucket{le="0.1"} 1\ntook_sum 0.05\ntook_count 1\n',
      H + 'took_bucket{le="0.1"} 2\ntook_sum 0.25\ntook_count 2\n'],
     H + 'took_bucket{le="0.1"} 3\ntook_sum 0.3\ntook_count 3\n'),
    ([G + "loaded 5\n", G + "loaded 5\nextra_gauge 1\n"], G + "loaded 5\n"),
    ([C + "reviews_total 1\n", "garbage line\n" + C + "reviews_total x\nreviews_total 2\n"], C + "reviews_total 3\n"),
    (["reviews_total 1\n", "reviews_total 2\n"], "reviews_total 1\n"),     # no TYPE: not known to add up
], ids=["none", "one-worker", "same-series-summed", "series-of-one-worker-kept", "histogram-summed",
        "gauge-from-the-answering-worker", "unparsable-lines-skipped", "untyped-not-summed"])
def test_merge(texts, expected):
    assert shared_metrics.merge(texts) == expected


def test_snapshots_are_written_when_changed_and_read_by_the_others(tmp_path):
    text = [C + "reviews_total 1\n"]
    snaps = shared_metrics.Snapshots(tmp_path, lambda: text[0])
    snaps.write()
    assert (tmp_path / f"{os.getpid()}.prom").read_text() == text[0]
    assert shared_metrics.others(tmp_path, own_pid=os.getpid()) == []
    assert shared_metrics.others(tmp_path, own_pid=1) == [text[0]]
    watchdog.forget(tmp_path, os.getpid())
    assert shared_metrics.others(tmp_path, own_pid=1) == []


def test_metrics_endpoint_adds_the_other_workers_counts(tmp_path, monkeypatch):
    monkeypatch.setenv(watchdog.WATCH_DIR_ENV, str(tmp_path))
    (tmp_path / "999999.prom").write_text(
        "# TYPE lahar_admission_requests_total counter\n"
        'lahar_admission_requests_total{path="/jobs/validate",verdict="allowed"} 41\n')
    app = create_app(lookups=StaticLookups(builtin_queues=True), config=None)
    try:
        app.state.admission.metrics.observe("/jobs/validate", "allowed", 0.001)
        with TestClient(app) as c:
            text = c.get("/metrics").text
        assert 'lahar_admission_requests_total{path="/jobs/validate",verdict="allowed"} 42\n' in text
        assert 'lahar_admission_duration_seconds_count{path="/jobs/validate",verdict="allowed"} 1\n' in text
    finally:
        app.state.snapshots.stop()
