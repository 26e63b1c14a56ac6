"""The `real_cluster` fixture: one real control plane (etcd + kube-apiserver, and kube-controller-manager and kwok
when built) per test session, from the binaries `make peers` caches; every test here skips when they are missing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.realcluster.cluster import RealCluster, missing


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """etcd + kube-apiserver on loopback with their own CA, token auth, RBAC and admission webhooks."""
    reason = missing("etcd", "kube-apiserver")
    if reason:
        pytest.skip(reason)
    cluster = RealCluster(tmp_path_factory.mktemp("realcluster")).start()
    try:
        yield cluster
    finally:
        cluster.stop()
