"""The conformance suite on `kube.rest.RestClient` against a live devcluster over real HTTPS."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lahar.kube import kubeconfig
from lahar.kube.rest import RestClient
from tests.conformance.suite import *  # noqa: F403 - the shared tests and the `ns` fixture
from tests.conformance.suite import Backend

pytestmark = pytest.mark.integration


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    try:
        dc = request.getfixturevalue("live_devcluster")
    except pytest.FixtureLookupError:
        pytest.skip("the live_devcluster fixture is not available")
    client = RestClient(kubeconfig.load(dc.kubeconfig))
    small: Any = getattr(dc, "small_history", None)
    yield Backend(name="devcluster", client=client, settle=lambda: None, poll_timeout=20.0, small_history=small,
                  extras={"bookmark_wait": 2.0})
    client.close()


# ---------------------------------------------------------------------------------------------------------------
# What only the wire can get wrong: auth, TLS, many threads on one connection pool, the kubectl-style lookup


def _config(dc: Any, *, token: str | None = None, verify: bool = True) -> Any:
    from kubernetes import client as k8s

    cfg = k8s.Configuration()
    cfg.host = dc.url
    cfg.ssl_ca_cert = str(dc.ca_path) if verify else None
    cfg.verify_ssl = verify
    cfg.api_key = {"authorization": token if token is not None else dc.token}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    return cfg


@pytest.fixture
def live(request: pytest.FixtureRequest) -> Any:
    try:
        return request.getfixturevalue("live_devcluster")
    except pytest.FixtureLookupError:
        pytest.skip("the live_devcluster fixture is not available")


def test_hand_built_configuration_with_ca_and_token(live: Any) -> None:
    from lahar.kube.resources import core

    ns_rt = next(rt for rt in core() if rt.plural == "namespaces")
    with RestClient(_config(live)) as client:
        assert client.get(ns_rt, "default")["metadata"]["name"] == "default"


def test_wrong_token_is_unauthorized(live: Any) -> None:
    from lahar.kube import errors
    from lahar.kube.resources import core

    ns_rt = next(rt for rt in core() if rt.plural == "namespaces")
    with RestClient(_config(live, token="not-the-token")) as client, pytest.raises(errors.Unauthorized) as ei:
        client.list(ns_rt)
    assert ei.value.code == 401


def test_untrusted_server_certificate_is_refused(live: Any, tmp_path: Any) -> None:
    from lahar.kube import errors
    from lahar.kube.resources import core

    ns_rt = next(rt for rt in core() if rt.plural == "namespaces")
    cfg = _config(live)
    cfg.ssl_ca_cert = None  # system roots only: devcluster's own CA is not among them
    with RestClient(cfg) as client, pytest.raises(errors.ApiError):
        client.list(ns_rt)


def test_kubeconfig_env_lookup_reaches_the_cluster(live: Any, tmp_path: Any) -> None:
    from lahar.kube.resources import core

    ns_rt = next(rt for rt in core() if rt.plural == "namespaces")
    cfg = kubeconfig.load(environ={"KUBECONFIG": str(live.kubeconfig)}, home=tmp_path)
    with RestClient(cfg) as client:
        assert "default" in {o["metadata"]["name"] for o in client.list(ns_rt)["items"]}


def test_many_threads_share_one_client(live: Any) -> None:
    import threading

    from lahar.kube.resources import core

    cm_rt = next(rt for rt in core() if rt.plural == "configmaps")
    ns_rt = next(rt for rt in core() if rt.plural == "namespaces")
    with RestClient(kubeconfig.load(live.kubeconfig)) as client:
        space = "threads-" + __import__("uuid").uuid4().hex[:6]
        client.create(ns_rt, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": space}})
        watches = [client.watch(cm_rt, namespace=space, resource_version="0") for _ in range(8)]
        failures: list[BaseException] = []

        def work(i: int) -> None:
            try:
                for j in range(10):
                    name = f"c{i}-{j}"
                    client.create(cm_rt, {"metadata": {"name": name}, "data": {"i": str(i)}}, namespace=space)
                    assert client.get(cm_rt, name, namespace=space)["data"] == {"i": str(i)}
            except BaseException as e:  # noqa: BLE001 - reported below
                failures.append(e)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for w in watches:
            w.stop()
        assert failures == []
        assert len(client.list(cm_rt, namespace=space)["items"]) == 400
