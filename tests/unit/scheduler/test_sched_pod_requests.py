"""The snapshot's vectorised pod requests (Volcano's InitResreq) agree with `kube.podspec.pod_requests`.

The session keeps a numpy twin of kube's PodRequests for its hot loop; this table pins the two together.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lahar.kube import podspec
from lahar.scheduler.framework import snapshot as snapshots
from lahar.scheduler.framework.nodes import ResourceIndex


def ctr(restart: str | None = None, **req: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": "c", "resources": {"requests": req}}
    if restart:
        out["restartPolicy"] = restart
    return out


CASES = [
    ("app-sum", {"containers": [ctr(cpu="1"), ctr(cpu="500m", memory="1Gi")]}),
    ("init-larger", {"containers": [ctr(cpu="1")], "initContainers": [ctr(cpu="3", memory="1Gi")]}),
    ("sidecar-adds", {"containers": [ctr(cpu="1")], "initContainers": [ctr("Always", cpu="1")]}),
    ("init-after-sidecar", {"containers": [ctr(cpu="1")],
                           "initContainers": [ctr("Always", cpu="1"), ctr(cpu="2")]}),
    ("overhead", {"containers": [ctr(cpu="1")], "overhead": {"cpu": "250m", "memory": "64Mi"}}),
    ("gpus", {"containers": [ctr(cpu="1", **{"nvidia.com/gpu": "2"})],
              "initContainers": [ctr(**{"nvidia.com/gpu": "1"})]}),
]


@pytest.mark.parametrize("spec", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_init_resreq_is_kubes_pod_requests(spec: dict[str, Any]) -> None:
    pod = {"spec": spec}
    want = podspec.pod_requests(pod)
    resources = ResourceIndex(want)
    _, init = snapshots.pod_requests(pod, resources)
    assert np.allclose(init, resources.vector({k: str(v) for k, v in want.items()}))
