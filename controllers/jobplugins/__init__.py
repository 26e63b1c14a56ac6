"""Job plugins (Volcano `pkg/controllers/job/plugins`, spec/volcano.md §2.5): `env`, `svc`, `ssh`, `pytorch`, `mpi`,
`tensorflow`, `hcclrank`, `ray`, named in a Job's `spec.plugins` with Go-flag style arguments.

The job reconciler calls `on_job_add` (first sync), `on_job_update` (later syncs), `on_pod_create` (each new pod,
mutating the pod dict in place) and `on_job_delete` (every KillJob). Plugins record what they own in
`status.controlledResources["plugin-<name>"]` and touch the cluster only through `Children` (ensure/delete by name).
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from lahar.kube import errors
from lahar.kube.client import ClusterClient

__all__ = [
    "Children",
    "JobPlugin",
    "UnknownPlugin",
    "build",
    "controlled",
    "in_tree_registry",
    "parse_flags",
]


class UnknownPlugin(KeyError):
    """A Job names a plugin lahar does not have."""


def parse_flags(args: list[str] | tuple[str, ...], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Go `flag.FlagSet.Parse` with ContinueOnError over `defaults` (its value types pick bool/int/str parsing):
    `--name=value`, `-name=value`, `--name value`, bare `--flag` for booleans. Parsing stops at the first
    unknown or malformed flag, keeping what was parsed before it (Volcano logs the error and goes on)."""
    values = dict(defaults)
    i = 0
    args = list(args)
    while i < len(args):
        arg = str(args[i])
        if not arg.startswith("-") or arg in ("-", "--"):
            break
        body = arg.lstrip("-")
        name, eq, raw = body.partition("=")
        if name not in defaults:
            break
        kind = defaults[name]
        if isinstance(kind, bool):
            if not eq or raw.lower() in ("1", "t", "true"):
                values[name] = True
            elif raw.lower() in ("0", "f", "false"):
                values[name] = False
            else:
                break
        else:
            if not eq:
                if i + 1 >= len(args):
                    break
                i += 1
                raw = str(args[i])
            if isinstance(kind, int):
                try:
                    values[name] = int(raw, 0)
                except ValueError:
                    break
            else:
                values[name] = raw
        i += 1
    return values


def controlled(status: dict[str, Any]) -> dict[str, str]:
    return status.setdefault("controlledResources", {})


class Children:
    """The cluster as plugins see it: objects owned by one Job, created, updated or deleted by name."""

    def __init__(self, client: ClusterClient) -> None:
        self.client = client

    def _rt(self, api_version: str, kind: str) -> Any:
        rt = self.client.registry.by_kind(api_version, kind)
        if rt is None:
            raise LookupError(f"the cluster does not serve {kind} ({api_version})")
        return rt

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.client.get(self._rt(api_version, kind), name, namespace=namespace)
        except errors.NotFound:
            return None

    def ensure(self, obj: dict[str, Any], *, update: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any]:
        """Create `obj`; when it exists, keep it — or, with `update(current) -> changed`, write the change. With
        `update` (asked on every reconcile: the object exists but the first time) it reads first, one request
        where a create answering AlreadyExists and then a read were two."""
        rt = self._rt(obj["apiVersion"], obj["kind"])
        ns = obj["metadata"].get("namespace")
        current = None
        if update is not None:
            with contextlib.suppress(errors.NotFound):
                current = self.client.get(rt, obj["metadata"]["name"], namespace=ns)
        if current is None:
            try:
                return self.client.create(rt, obj, namespace=ns)
            except errors.AlreadyExists:
                pass
            current = self.client.get(rt, obj["metadata"]["name"], namespace=ns)
        if update is not None and update(current):
            return self.client.update(rt, current, namespace=ns)
        return current

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        with contextlib.suppress(errors.NotFound):
            self.client.delete(self._rt(api_version, kind), name, namespace=namespace)


class JobPlugin:
    """Base class: every hook is a no-op except the `plugin-<name>` bookkeeping Volcano's simple plugins share."""

    name = ""
    defaults: Mapping[str, Any] = {}

    def __init__(self, args: list[str] | tuple[str, ...] = ()) -> None:
        self.args = list(args)
        self.flags = parse_flags(self.args, self.defaults)

    @property
    def key(self) -> str:
        return f"plugin-{self.name}"

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        return None

    def on_job_add(self, job: dict[str, Any], status: dict[str, Any], children: Children) -> None:
        controlled(status)[self.key] = self.name

    def on_job_delete(self, job: dict[str, Any], status: dict[str, Any], children: Children) -> None:
        controlled(status).pop(self.key, None)

    def on_job_update(self, job: dict[str, Any], status: dict[str, Any], children: Children) -> None:
        return None


def b64(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode()


def in_tree_registry() -> dict[str, type[JobPlugin]]:
    """name → plugin class for every built-in plugin (a fresh dict per call)."""
    from lahar.controllers.jobplugins import env, hcclrank, mpi, pytorch, ray, ssh, svc, tensorflow

    classes: list[type[JobPlugin]] = [env.EnvPlugin, svc.SvcPlugin, ssh.SshPlugin, pytorch.PytorchPlugin,
                                      mpi.MpiPlugin, tensorflow.TensorflowPlugin, hcclrank.HcclrankPlugin,
                                      ray.RayPlugin]
    registry: dict[str, type[JobPlugin]] = {}
    for cls in classes:
        if cls.name in registry:
            raise ValueError(f"duplicate job plugin {cls.name!r}")
        registry[cls.name] = cls
    return registry


def build(plugins: Mapping[str, list[str] | None] | None,
          registry: Mapping[str, type[JobPlugin]] | None = None) -> list[JobPlugin]:
    """Instances for a Job's `spec.plugins`, in name order (Go map iteration has none; sorted is reproducible)."""
    registry = registry if registry is not None else in_tree_registry()
    out = []
    for name in sorted(plugins or {}):
        if name not in registry:
            raise UnknownPlugin(name)
        out.append(registry[name](list((plugins or {})[name] or ())))
    return out
