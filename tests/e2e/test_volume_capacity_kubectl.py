"""A WaitForFirstConsumer gang lands where CSIStorageCapacity has room, on `lahar up`, through the real kubectl.

`kubectl apply` a CSIDriver that opts into storage capacity tracking, a StorageClass it provisions, one
CSIStorageCapacity per node (room for the claims on one node only), two PVCs and a Volcano Job of two pods
(minAvailable 2), each mounting its own claim. Both pods run on that node, their claims are provisioned there, and
`kubectl get` lists the CSIDriver and the capacities devcluster stores. The time from apply to all Running is printed.

Uses `Up` of `test_lahar_up` (the whole stack in its own process on a temporary data dir).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.builders import csidriver, storage_capacity
from tests.e2e import test_lahar_up as base
from tests.e2e import test_volumes_kubectl as volumes
from tests.e2e.test_lahar_up import Up
from tests.support import wait_for

pytestmark = base.pytestmark
up = base.up

NS = volumes.NS
DRIVER = "local.csi.lahar.sh"


def test_gang_lands_on_the_node_whose_storage_capacity_fits(up: Up, tmp_path: Path) -> None:
    up.start()
    log = up.data_dir / "logs" / "scheduler.log"
    wait_for("the scheduler's sessions to start", lambda: "sessions start" in log.read_text(errors="replace"), 60)
    nodes = sorted(n["metadata"]["name"] for n in volumes.items(up, "nodes"))
    roomy = nodes[-1]  # the last by name: without the capacity check, ties go to the first
    capacities = [storage_capacity(f"cap-{n}", "tracked", "10Gi" if n == roomy else "100Mi", hostname=n,
                                   namespace=NS) for n in nodes]
    claims = ["cap-data-0", "cap-data-1"]
    started = time.monotonic()
    volumes.apply(up, tmp_path, "capacity", [
        csidriver(DRIVER), volumes.storage_class("tracked", provisioner=DRIVER), *capacities,
        *(volumes.claim(n, "tracked") for n in claims), volumes.gang("roomy", claims, cpu="250m")])

    def running() -> list[dict[str, Any]] | None:
        pods = volumes.items(up, "pods", "-n", NS, "-l", "volcano.sh/job-name=roomy")
        return pods if len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods) else None

    try:
        pods = wait_for("the two pods of roomy to be Running", running, 60, 0.2)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{up.kubectl('describe', 'pods', '-n', NS).stdout[-3000:]}") from None
    print(f"\nstorage-capacity gang (2 pods, 2 WaitForFirstConsumer claims): apply -> all Running "
          f"{time.monotonic() - started:.2f} s")
    assert {p["spec"]["nodeName"] for p in pods} == {roomy}
    for c in volumes.items(up, "pvc", "-n", NS):
        if c["metadata"]["name"] in claims:
            assert c["status"]["phase"] == "Bound", c
            assert c["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == roomy
    got = volumes.items(up, "csistoragecapacities", "-n", NS)
    assert sorted(o["metadata"]["name"] for o in got) == sorted(f"cap-{n}" for n in nodes)
    assert [o["spec"]["storageCapacity"] for o in volumes.items(up, "csidrivers")] == [True]
    assert up.interrupt() == 0, up.output()
