"""The `real_cluster` fixture: one real control plane (etcd + kube-apiserver, and kube-controller-manager and kwok
when built) per test session, from the binaries `make peers` caches; every test here skips when they are missing. Also
`lahar_stack`: a second cluster of its own with lahar's CRDs and webhook registered (the real-tier e2e tests).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.realcluster.cluster import RealCluster, missing
from tests.realcluster.lahar_stack import LaharStack


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


@pytest.fixture(scope="session")
def lahar_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LaharStack]:
    """A second real cluster of its own with lahar's CRDs, queues, kwok nodes and `lahar webhook` registered
    through its caBundle (tests/realcluster/lahar_stack.py); shared by the webhook and examples tests."""
    reason = missing("etcd", "kube-apiserver")
    if reason:
        pytest.skip(reason)
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl not on PATH")
    stack = LaharStack(tmp_path_factory.mktemp("laharstack")).start()
    try:
        yield stack
    finally:
        stack.stop()
