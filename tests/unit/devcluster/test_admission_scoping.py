"""lahar's own webhook configurations (deploy/webhooks) through devcluster's admission chain with the webhook down
(a closed port, failurePolicy Fail): which pods still get created (volcano#3734, #2244, #3048).

The chain is the real one over the real store; only the webhook is missing. A pod that is not Volcano's (another
scheduler, lahar's own pods, lahar's namespace) must pass; a Volcano pod must fail closed. The chain must also skip
a webhook whose matchConditions exclude the pod before it builds that webhook's AdmissionReview.
"""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from lahar.certs import bundles
from lahar.devcluster.admission import WebhookAdmission
from lahar.devcluster.admission import chain as chain_mod
from lahar.kube import errors, resources
from lahar.kube.apiserver import store as store_mod

REPO = Path(__file__).resolve().parents[3]
RT = {rt.plural: rt for rt in resources.core()}


def _dead_url() -> str:
    with socket.socket() as s:  # a port nobody listens on: connection refused at once
        s.bind(("127.0.0.1", 0))
        return f"https://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def chain():
    store = store_mod.Store(registry=resources.Registry.of(resources.core()))
    for name in ("lahar-system", "team-a"):  # "default" exists from the start
        store.create(RT["namespaces"], None, {"apiVersion": "v1", "kind": "Namespace",
                                              "metadata": {"name": name,
                                                           "labels": {"kubernetes.io/metadata.name": name}}})
    url = _dead_url()
    for template in bundles.load_templates(REPO / "deploy" / "webhooks"):
        config = bundles.render(template, ca_bundle=b"", url=url)
        plural = "mutatingwebhookconfigurations" if config["kind"].startswith("Mutating") else \
            "validatingwebhookconfigurations"
        store.create(RT[plural], None, config)
    adm = WebhookAdmission(store)
    yield adm
    adm.close()
    store.close()


def pod(name: str, namespace: str, *, scheduler: str | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "nginx"}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def admit(chain: WebhookAdmission, obj: dict[str, Any]) -> None:
    """What the store does around a pod create: mutate, then validate."""
    attrs = store_mod.AdmissionAttributes(operation="CREATE", rt=RT["pods"], subresource=None,
                                          namespace=obj["metadata"]["namespace"], name=obj["metadata"]["name"],
                                          obj=obj, old_obj=None, request=store_mod.Request(user="admin"))
    chain.validate(replace(attrs, obj=chain.mutate(attrs) or obj))


PASSES = [
    ("deployment-pod-default-scheduler", pod("web-7d9f-abcde", "default", scheduler="default-scheduler",
                                             labels={"app": "web", "pod-template-hash": "7d9f"})),
    ("no-scheduler-name", pod("bare", "team-a", scheduler=None)),
    ("other-scheduler", pod("yk", "team-a", scheduler="yunikorn")),
    ("lahars-namespace", pod("lahar-webhook-0", "lahar-system", scheduler="volcano")),
    ("lahars-own-pod-elsewhere", pod("lahar-webhook-1", "team-a", scheduler="volcano",
                                     labels={"app.kubernetes.io/name": "lahar"})),
]


@pytest.mark.parametrize("obj", [c[1] for c in PASSES], ids=[c[0] for c in PASSES])
def test_pods_that_are_not_volcanos_are_created_with_the_webhook_down(chain, obj):
    admit(chain, obj)  # no exception: the policy webhooks are Ignore, the pod webhooks never match


def test_a_volcano_pod_fails_closed_with_the_webhook_down(chain):
    with pytest.raises(errors.ApiError, match='failed calling webhook "mutatepod.volcano.sh".*connection refused'):
        admit(chain, pod("job-t-0", "team-a", scheduler="volcano"))


def test_excluded_webhooks_build_no_review(chain, monkeypatch):
    built: list[str] = []
    real = chain_mod.build_review

    def counting(call, **kw):
        built.append(call.name)
        return real(call, **kw)

    monkeypatch.setattr(chain_mod, "build_review", counting)
    admit(chain, pod("web-1", "default", scheduler="default-scheduler"))
    # only the two Ignore policy webhooks (mutatepolicy, validatepolicy) are called; mutatepod and validatepod are
    # excluded by their matchConditions before a review is built
    assert len(built) == 2
