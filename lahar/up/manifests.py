"""`lahar up`'s manifests: where the CRDs, webhook templates and examples live, the order objects are applied in
(`apply_order`, pure), reading YAML files (`load_manifests`) and the `--demo` apply through the API server.

Part of `lahar.up` (the package's `__init__` says how the parts fit); imports nothing else of the package.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from lahar import data

CRDS_DIR = data.crds()
WEBHOOKS_DIR = data.webhooks()
EXAMPLES_DIR = data.examples()
DEMO_SUBDIRS = ("jobflow",)  # example folders `--demo` applies besides the top one (policies/, scheduler/ are not)

Obj = dict[str, Any]

_APPLY_RANK = {"CustomResourceDefinition": 0, "Namespace": 1, "PriorityClass": 2, "Queue": 3, "ConfigMap": 4}


def apply_order(objects: Iterable[Obj]) -> list[Obj]:
    """What must exist first goes first: CRDs, Namespaces, PriorityClasses, Queues (parents before children),
    ConfigMaps, then the workloads in file order."""
    indexed = list(enumerate(objects))

    def depth(obj: Obj) -> int:
        parent = ((obj.get("spec") or {}).get("parent") or "") if obj.get("kind") == "Queue" else ""
        return 0 if parent in ("", "root") else 1

    return [o for _, o in sorted(indexed, key=lambda io: (_APPLY_RANK.get(io[1].get("kind", ""), 9), depth(io[1]),
                                                          io[0]))]


def demo_paths(examples: Path) -> list[Path]:
    """What `--demo` applies: the examples folder's own files, then those of each `DEMO_SUBDIRS` folder present."""
    return [examples, *(examples / d for d in DEMO_SUBDIRS if (examples / d).is_dir())]


def load_manifests(paths: Sequence[Path]) -> list[Obj]:
    """Every object of the YAML files (a directory means its `*.yaml` files, not its sub-directories), `*List`
    items unpacked, in file order."""
    files: list[Path] = []
    for p in paths:
        files.extend(sorted(p.glob("*.yaml")) if p.is_dir() else [p])
    out: list[Obj] = []
    for f in files:
        for doc in yaml.safe_load_all(f.read_text()):
            if not isinstance(doc, dict):
                continue
            if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
                out.extend(i for i in doc["items"] if isinstance(i, dict))
            else:
                out.append(doc)
    return out


def apply_manifests(kubeconfig: Path, objects: Sequence[Obj], *, report: Callable[[str], None],
                    stop: threading.Event | None = None, namespace: str = "default",
                    retry_for: float = 30.0) -> dict[str, str]:
    """Create each object through the API server (so admission sees it), in `apply_order`; existing ones are left
    as they are. A denial is retried for `retry_for` seconds (a queue just created is Open a moment later)."""
    from lahar.kube import errors
    from lahar.kube import kubeconfig as kubeconfigs
    from lahar.kube.rest import RestClient

    outcome: dict[str, str] = {}
    client = RestClient(kubeconfigs.load(str(kubeconfig)))
    try:
        for obj in apply_order(objects):
            kind, name = obj.get("kind", ""), obj.get("metadata", {}).get("name", "")
            rt = client.registry.by_kind(obj.get("apiVersion", ""), kind)
            key = f"{kind}/{name}"
            if rt is None:
                outcome[key] = "unknown kind"
                report(f"demo: {key}: {obj.get('apiVersion')} {kind} is not served; skipped")
                continue
            ns = (obj["metadata"].get("namespace") or namespace) if rt.namespaced else None
            deadline = time.monotonic() + retry_for
            while True:
                try:
                    client.create(rt, obj, namespace=ns)
                    outcome[key] = "created"
                    report(f"demo: {key} created")
                    if kind == "Queue":
                        _wait_open(client, rt, name, stop)
                    break
                except errors.AlreadyExists:
                    outcome[key] = "unchanged"
                    break
                except errors.ApiError as e:
                    if time.monotonic() > deadline or (stop is not None and stop.is_set()):
                        outcome[key] = f"error: {e}"
                        report(f"demo: {key}: {e}")
                        break
                    if stop is not None:
                        stop.wait(1.0)
                    else:
                        time.sleep(1.0)
    finally:
        client.close()
    return outcome


def _wait_open(client: Any, rt: Any, name: str, stop: threading.Event | None, timeout: float = 30.0) -> None:
    from lahar.kube import errors

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not (stop is not None and stop.is_set()):
        with contextlib.suppress(errors.ApiError):
            if ((client.get(rt, name).get("status") or {}).get("state")) == "Open":
                return
        time.sleep(0.2)
