"""Node × resource matrices (numpy) and the resource vocabulary of a session.

Built by the snapshot, mutated only by `Statement` (framework/statement.py); predicates and scores read them
vectorised. Units follow Volcano's `api.Resource`: cpu in millicores, memory in bytes, scalars in milli-units.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from lahar.kube import quantity
from lahar.policies.admission import HAMI_VGPU

__all__ = ["DEVICE_ONLY_RESOURCES", "EPSILON", "NodeArrays", "ResourceIndex", "RowCache", "is_dimension",
           "is_scalar_resource"]

# Resource names a device model owns and no node advertises: HAMi's per-GPU memory, memory percentage, cores and
# priority (its scheduler extender lists them with `ignoredByScheduler: true`, and kubelet drops extended resources
# the node lacks). They are not dimensions of a session: only the vGPU / dynamic-MIG fits of deviceshare judge them
# (Volcano's IgnoredDevicesList). Names nodes do advertise (counts, `volcano.sh/vgpu-*`, `nvidia.com/mig-*`, RDMA
# VFs) stay dimensions, checked against allocatable as kubelet checks them, and by their device model on top.
DEVICE_ONLY_RESOURCES = frozenset(n for n in (HAMI_VGPU.memory, HAMI_VGPU.memory_percentage, HAMI_VGPU.cores,
                                              HAMI_VGPU.priority) if n)

# Volcano's `minResource`: two amounts closer than this are equal (LessEqual tolerance).
EPSILON = 0.1


def is_scalar_resource(name: str) -> bool:
    """v1helper.IsScalarResourceName plus ephemeral-storage, which Volcano also tracks."""
    if name == "ephemeral-storage" or name.startswith(("hugepages-", "attachable-volumes-")):
        return True
    if "/" in name:
        domain = name.split("/", 1)[0]
        return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io")) and not name.startswith("requests.")
    return False


def is_dimension(name: str) -> bool:
    """A resource name the session tracks per node: cpu, memory, and scalar names not owned by a device model."""
    return name in ("cpu", "memory") or (is_scalar_resource(name) and name not in DEVICE_ONLY_RESOURCES)


@functools.lru_cache(maxsize=65536)
def _amount(name: str, value: str) -> float:
    q = quantity.parse(value)
    if name == "memory":
        return float(q.value())
    return float(q.milli_value())


class ResourceIndex:
    """The resource dimensions of one session: `cpu`, `memory`, then every scalar name seen (`is_dimension`), sorted."""

    __slots__ = ("names", "pos", "cpu", "memory")

    def __init__(self, names: Iterable[str] = ()) -> None:
        extra = sorted({n for n in names if n not in ("cpu", "memory") and is_dimension(n)})
        self.names: tuple[str, ...] = ("cpu", "memory", *extra)
        self.pos: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        self.cpu = 0
        self.memory = 1

    def __len__(self) -> int:
        return len(self.names)

    def vector(self, rl: Mapping[str, Any] | None, *, missing: float = 0.0) -> np.ndarray:
        """A resource list as a vector; names outside the index are ignored, absent ones are `missing`."""
        out = np.full(len(self.names), missing, dtype=np.float64)
        if rl:
            for name, value in rl.items():
                i = self.pos.get(name)
                if i is not None:
                    out[i] = _amount(name, str(value))
        return out

    def zeros(self) -> np.ndarray:
        return np.zeros(len(self.names), dtype=np.float64)

    def to_list(self, vec: np.ndarray, *, all_dims: bool = False) -> dict[str, str]:
        """Volcano's ConvertRes2ResList: cpu and memory always, scalars when non-zero; canonical quantities."""
        out: dict[str, str] = {}
        for i, name in enumerate(self.names):
            v = float(vec[i])
            if not np.isfinite(v):
                continue
            if i > 1 and abs(v) < EPSILON and not all_dims:
                continue
            if name == "memory":
                out[name] = quantity.Quantity(Fraction(round(v)), quantity.Format.BINARY_SI).canonical
            else:
                out[name] = quantity.Quantity.from_milli(round(v)).canonical
        return out

    def describe(self, vec: np.ndarray) -> str:
        """`cpu 2000.00, memory 4294967296.00` — Volcano's Resource.String() shape, for logs and messages."""
        parts = [f"{'cpu' if n == 'cpu' else n} {float(vec[i]):.2f}" for i, n in enumerate(self.names)
                 if i < 2 or vec[i] > 0]
        return ", ".join(parts)


class NodeArrays:
    """Per-node state of a session, row i = node i: allocatable, idle, used, releasing, pipelined (N × R) and
    task counts vs max pods (N). `future_idle = idle + releasing - pipelined` (Volcano NodeInfo.FutureIdle)."""

    __slots__ = ("names", "index", "allocatable", "idle", "used", "releasing", "pipelined", "pods", "max_pods",
                 "resources", "changes", "futures", "_no_futures", "_dirty")

    def __init__(self, resources: ResourceIndex, names: Sequence[str], allocatable: np.ndarray,
                 max_pods: np.ndarray) -> None:
        n = len(names)
        r = len(resources)
        self.resources = resources
        self.names: list[str] = list(names)
        self.index: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        self.allocatable = np.asarray(allocatable, dtype=np.float64).reshape(n, r)
        self.used = np.zeros((n, r), dtype=np.float64)
        self.idle = self.allocatable.copy()
        self.releasing = np.zeros((n, r), dtype=np.float64)
        self.pipelined = np.zeros((n, r), dtype=np.float64)
        self.pods = np.zeros(n, dtype=np.int64)
        self.max_pods = np.asarray(max_pods, dtype=np.int64).reshape(n)
        self.changes: list[int] = []  # row of every change, in order; len() is the version (see RowCache)
        self.futures = 0  # tasks booked as pipelined or releasing now
        self._no_futures: bool | None = True  # releasing and pipelined all exactly 0 (None: not known)
        self._dirty: tuple[int, int, np.ndarray] | None = None  # the last dirty_since answer: (since, version, rows)

    @property
    def version(self) -> int:
        return len(self.changes)

    def reset_version(self) -> None:
        self.changes = []
        self._dirty = None

    def dirty_since(self, version: int) -> np.ndarray:
        """Rows changed after `version`, sorted, each once. Mostly one or a few rows (a placement since the last
        ask): sorted in Python then, as np.unique costs several times more on a handful of elements."""
        now = len(self.changes)
        last = self._dirty
        if last is not None and last[0] == version and last[1] == now:  # the session's caches ask in turn
            return last[2]
        tail = self.changes[version:]
        if len(tail) <= 64:
            rows = np.array(sorted(set(tail)), dtype=np.int64)
        else:
            rows = np.unique(np.fromiter(tail, dtype=np.int64, count=len(tail)))
        rows.flags.writeable = False  # shared by every cache asking the same question
        self._dirty = (version, now, rows)
        return rows

    def __len__(self) -> int:
        return len(self.names)

    def future_idle(self) -> np.ndarray:
        return self.idle + self.releasing - self.pipelined

    def future_is_idle(self) -> bool:
        """Whether future idle equals idle on every node, bit for bit: nothing is pipelined or releasing, and the
        arrays hold exact zeros there (not what is left of adding and taking back). A fresh cluster's case, where
        allocate need not ask both."""
        if self.futures:
            return False
        if self._no_futures is None:
            self._no_futures = not (self.releasing.any() or self.pipelined.any())
        return self._no_futures

    def future_idle_row(self, i: int) -> np.ndarray:
        return self.idle[i] + self.releasing[i] - self.pipelined[i]

    # --- vectorised checks -------------------------------------------------------------------------------------

    @staticmethod
    def fits(request: np.ndarray, available: np.ndarray) -> np.ndarray:
        """Row-wise `request <= available` with Volcano's tolerance, over every dimension."""
        return np.all(request <= available + EPSILON, axis=-1)

    def fit_idle(self, request: np.ndarray) -> np.ndarray:
        return self.fits(request, self.idle)

    def fit_future_idle(self, request: np.ndarray) -> np.ndarray:
        return self.fits(request, self.future_idle())

    def insufficient(self, request: np.ndarray, available: np.ndarray) -> np.ndarray:
        """Per node, the first dimension that does not fit (-1 when all fit)."""
        short = request > available + EPSILON
        first = np.argmax(short, axis=1)
        return np.where(short.any(axis=1), first, -1)

    # --- mutations (Statement only) ----------------------------------------------------------------------------

    def add(self, i: int, request: np.ndarray, status_kind: str) -> None:
        """Volcano NodeInfo.AddTask: `pipelined` books future idle, `releasing` counts as used and releasing."""
        if status_kind == "pipelined":
            self.pipelined[i] += request
            self.futures += 1
            self._no_futures = None
        else:
            self.idle[i] -= request
            self.used[i] += request
            if status_kind == "releasing":
                self.releasing[i] += request
                self.futures += 1
                self._no_futures = None
        self.pods[i] += 1
        self.changes.append(i)

    def remove(self, i: int, request: np.ndarray, status_kind: str) -> None:
        if status_kind == "pipelined":
            self.pipelined[i] -= request
            self.futures -= 1
            self._no_futures = None
        else:
            self.idle[i] += request
            self.used[i] -= request
            if status_kind == "releasing":
                self.releasing[i] -= request
                self.futures -= 1
                self._no_futures = None
        self.pods[i] -= 1
        self.changes.append(i)

    def copy(self) -> NodeArrays:
        other = NodeArrays.__new__(NodeArrays)
        other.resources = self.resources
        other.names = self.names
        other.index = self.index
        other.allocatable = self.allocatable
        for attr in ("idle", "used", "releasing", "pipelined", "pods"):
            setattr(other, attr, getattr(self, attr).copy())
        other.max_pods = self.max_pods
        other.changes = list(self.changes)
        other.futures = self.futures
        other._no_futures = self._no_futures
        other._dirty = None
        return other


class RowCache:
    """Per-key arrays over all nodes (fit masks, scores), recomputed only on the rows changed since last asked.

    `compute(arg, rows)` returns values for `rows` (an index array) or for every node when `rows` is None. Most
    tasks of a gang share a request, so after each placement only one row is recomputed, not N.
    """

    __slots__ = ("arrays", "compute", "entries", "size")

    def __init__(self, arrays: NodeArrays, compute: Callable[[object, np.ndarray | None], np.ndarray], *,
                 size: int = 64) -> None:
        self.arrays = arrays
        self.compute = compute
        self.entries: OrderedDict[Hashable, tuple[int, np.ndarray]] = OrderedDict()
        self.size = size

    def get(self, key: Hashable, arg: object) -> np.ndarray:
        arrays = self.arrays
        version = len(arrays.changes)
        entries = self.entries
        entry = entries.get(key)
        if entry is not None:
            seen, values = entry
            entries.move_to_end(key)
            if seen == version:  # nothing changed since: most asks of a task's second predicate or score
                return values
            if version - seen > len(arrays) // 8 + 1:
                values = self.compute(arg, None)
            else:
                rows = arrays.dirty_since(seen)
                values[rows] = self.compute(arg, rows)
            entries[key] = (version, values)
            return values
        values = self.compute(arg, None)
        entries[key] = (version, values)
        if len(entries) > self.size:
            entries.popitem(last=False)
        return values
