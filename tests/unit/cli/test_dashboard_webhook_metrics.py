"""The Policies page's webhook counters: the policy counters read from the webhook's `/metrics` text
(`views.policy_counters`), the scrape that keeps them (`live.WebhookMetrics`), and what the page says without them."""

from __future__ import annotations

from pathlib import Path

import pytest

from lahar.dashboard import pages, views
from lahar.dashboard.app import render
from lahar.dashboard.live import WebhookMetrics
from lahar.webhooks import policystage

REPO = Path(__file__).resolve().parents[3]

C = views.PolicyCounter


@pytest.mark.parametrize(("text", "want"), [
    ("", []),
    ('lahar_policy_decisions_total{policy="no-latest",action="deny"} 3\n', [C("no-latest", "deny", 3)]),
    ('# HELP lahar_policy_decisions_total x\n# TYPE lahar_policy_decisions_total counter\n'
     'lahar_policy_decisions_total{policy="a",action="warn"} 1\n'
     'lahar_policy_decisions_total{policy="b",action="deny"} 5\n', [C("b", "deny", 5), C("a", "warn", 1)]),
    ('lahar_policy_audit_total{policy="a",kind="Audit"} 2\n', [C("a", "audit/Audit", 2)]),
    ('lahar_policy_decisions_total{policy="a",action="deny"} 1\n'
     'lahar_policy_decisions_total{policy="a",action="deny"} 2\n', [C("a", "deny", 3)]),
    ('lahar_policy_decisions_total{policy="say \\"hi\\"",action="deny"} 1\n', [C('say "hi"', "deny", 1)]),
    ('lahar_admission_requests_total{path="/jobs/validate"} 9\n'
     'lahar_policy_decisions_total{action="deny"} 4\n'
     'lahar_policy_decisions_total{policy="a",action="deny"} NaN\n'
     'lahar_policy_decisions_total{policy="a",action="deny"} x\n'
     'lahar_policy_decisions_total{policy="a",action="deny"} 0\n'
     'not a metric line\n', []),
], ids=["empty", "one-deny", "largest-first", "audits", "workers-add-up", "escaped-label", "skipped"])
def test_policy_counters(text: str, want: list) -> None:
    assert views.policy_counters(text) == want


def test_the_names_are_the_webhooks() -> None:
    assert policystage.DECISIONS.name in views.POLICY_METRICS


def test_scrape_keeps_counters_or_the_reason() -> None:
    answers = iter(['lahar_policy_decisions_total{policy="a",action="deny"} 1\n', ConnectionError("refused"),
                    ConnectionError("refused")])
    changes = []

    def fetch() -> str:
        got = next(answers)
        if isinstance(got, Exception):
            raise got
        return got

    scrape = WebhookMetrics("https://127.0.0.1:1/metrics", fetch=fetch)
    scrape.on_change = lambda: changes.append(1)
    scrape.scrape()
    assert (scrape.counters, scrape.error) == ([C("a", "deny", 1)], "")
    scrape.scrape()
    assert scrape.counters is None and scrape.error == "ConnectionError: refused"
    scrape.scrape()
    assert len(changes) == 2  # the same failure again is no change


@pytest.mark.parametrize(("webhook", "needle"), [
    (None, "not given the webhook's metrics address"),
    (lambda: (None, "https://x/metrics: ConnectionError: <refused>"), "failed: https://x/metrics: ConnectionError: "
                                                                       "&lt;refused&gt;"),
    (lambda: ([], ""), "No policy decisions or audits since the webhook started."),
    (lambda: ([C("<p>", "deny", 2)], ""), "<th scope=\"row\">&lt;p&gt;</th><td>deny</td><td>2</td>"),
], ids=["not-configured", "unreachable-escaped", "none-yet", "counted-escaped"])
def test_policies_page_shows_the_counters_or_why_not(webhook, needle: str) -> None:  # noqa: ANN001
    _, main = render("policies", lambda _kind: [], webhook=webhook)
    assert "The webhook's counters" in main and needle in main
    assert pages.policies_page([], []).count("<h2>") == 2
