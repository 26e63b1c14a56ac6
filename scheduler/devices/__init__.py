"""Device choices for the scheduler: which concrete GPUs, vGPU slices, MIG instances and RDMA VFs a task gets.

Pure decision cores used by the deviceshare (and numa-aware) plugins, one module per question:

- `requests`: `parse(pod) -> DeviceRequest` — whole GPUs, vGPU (Volcano and HAMi vocabularies), MIG, RDMA, joint
  allocation, steering annotations;
- `inventory`: `inventory(node, device, numatopology) -> NodeInventory` and `usage(pods) -> Usage`;
- `gpu`: go-gpuallocator's link-aware whole-GPU choice `allocate(available, required, size, scores)`;
- `gpushares`: Koordinator shares below one card `fit(request, gpus, usage, policy=...) -> CardGrant | reason`;
- `partitions`: Koordinator GPU partition tables `choose(count, free, ...) -> minors | reason | None`;
- `vgpu`: `fit(request, cards, usage, policy=...) -> Allocation | reason`, `annotations(allocation, ...)`;
- `mig`: `fit_mixed(...)`, `fit_dynamic(...) -> MIGAllocation | reason`, `annotations(...)`;
- `rdma`: `allocate(gpus, nics, usage, request=..., same_pcie=...) -> RDMAAllocation | reason`,
  `annotations(gpus, allocation)` (Koordinator `device-allocated` + `lahar.sh/gpu-rdma-pairs`);
- `dra`: Dynamic Resource Allocation, structured parameters: `node_devices(slices, ...)`, `requests_of(claim)`,
  `allocate(claims, classes=..., devices=..., allocated=...) -> results per claim | reason`.

A fit that fails returns a `str` reason (never raises); callers test `isinstance(result, str)`.
"""

from lahar.scheduler.devices import dra, gpu, gpushares, inventory, mig, partitions, rdma, requests, vgpu
from lahar.scheduler.devices.inventory import GPU, VF, CardUsage, NodeInventory, RDMANic, Usage, VGPUCard
from lahar.scheduler.devices.requests import DeviceRequest, VGPUPodRequest, VGPURequest

__all__ = [
    "GPU",
    "VF",
    "CardUsage",
    "DeviceRequest",
    "NodeInventory",
    "RDMANic",
    "Usage",
    "VGPUCard",
    "VGPUPodRequest",
    "VGPURequest",
    "dra",
    "gpu",
    "gpushares",
    "inventory",
    "mig",
    "partitions",
    "rdma",
    "requests",
    "vgpu",
]
