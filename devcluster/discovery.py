"""Discovery documents (`/version`, `/api`, `/apis`, `/apis/<g>/<v>`) built from the resource registry.

Pure functions over `kube.resources.Registry`, called by `devcluster.server` per request, so CRDs registered at
run time appear at once. Shapes follow kube-apiserver's (APIVersions, APIGroupList, APIResourceList).
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from lahar.kube.resources import Registry, ResourceType

__all__ = ["GIT_VERSION", "api_group", "api_group_list", "api_resource_list", "api_versions", "preferred_version",
           "version_info"]

GIT_VERSION = "v1.32.0-lahar"

# Subresources: (verbs, kind, group, version); None group/version = the parent's.
_SUBRESOURCES: dict[str, tuple[tuple[str, ...], str | None, str | None, str | None]] = {
    "status": (("get", "patch", "update"), None, None, None),
    "binding": (("create",), "Binding", None, None),
    "eviction": (("create",), "Eviction", "policy", "v1"),
    "log": (("get",), None, None, None),
    "scale": (("get", "patch", "update"), "Scale", "autoscaling", "v1"),
    "finalize": (("update",), None, None, None),
}


def version_info() -> dict[str, Any]:
    return {
        "major": "1",
        "minor": "32",
        "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.23.4",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str = "") -> dict[str, Any]:
    """`GET /api`."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


_VERSION_RE = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def _version_priority(version: str) -> tuple[int, int, int, str]:
    """kube's version ordering: GA > beta > alpha, higher numbers first; others last, alphabetically."""
    m = _VERSION_RE.match(version)
    if not m:
        return (3, 0, 0, version)
    major, stage, minor = int(m.group(1)), m.group(2), int(m.group(3) or 0)
    rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (rank, -major, -minor, version)


def preferred_version(versions: list[str]) -> str:
    return sorted(versions, key=_version_priority)[0]


def _group_doc(group: str, versions: list[str]) -> dict[str, Any]:
    ordered = sorted(versions, key=_version_priority)
    return {
        "name": group,
        "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in ordered],
        "preferredVersion": {"groupVersion": f"{group}/{ordered[0]}", "version": ordered[0]},
    }


def api_group_list(registry: Registry) -> dict[str, Any]:
    """`GET /apis`: every named group (the core group is under `/api`)."""
    groups = registry.groups()
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group_doc(g, vs) for g, vs in sorted(groups.items()) if g],
    }


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    """`GET /apis/<group>`, or None when no version of it is served."""
    versions = registry.groups().get(group)
    if not group or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_doc(group, versions)}


def _storage_hash(rt: ResourceType) -> str:
    digest = hashlib.sha256(f"{rt.group}/{rt.version}/{rt.kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def _resource_entries(rt: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular_name,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": sorted(rt.verbs),
        "storageVersionHash": _storage_hash(rt),
    }
    if rt.short_names:
        main["shortNames"] = list(rt.short_names)
    if rt.categories:
        main["categories"] = list(rt.categories)
    out = [main]
    for sub in sorted(rt.subresources):
        verbs, kind, group, version = _SUBRESOURCES.get(sub, (("get",), None, None, None))
        entry: dict[str, Any] = {"name": f"{rt.plural}/{sub}", "singularName": "", "namespaced": rt.namespaced,
                                 "kind": kind or rt.kind, "verbs": list(verbs)}
        if group is not None:
            entry["group"], entry["version"] = group, version
        out.append(entry)
    return out


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    """`GET /api/v1` or `/apis/<g>/<v>`, or None when that group-version is not served."""
    types = registry.in_group_version(group, version)
    if not types:
        return None
    resources: list[dict[str, Any]] = []
    for rt in types:
        resources.extend(_resource_entries(rt))
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }
