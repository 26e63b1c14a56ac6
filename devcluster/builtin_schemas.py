"""Kubernetes' own schemas of the built-in kinds devcluster serves, for its OpenAPI v3 documents (`kubectl explain`).

Not written by hand: read from the JSON schemas the `kubernetes-validate` package ships (one `_definitions.json` per
Kubernetes release, generated from kube-apiserver's OpenAPI), for the release devcluster reports, and turned back
into kube-apiserver's OpenAPI v3 shape: `#/components/schemas/...` references (wrapped in `allOf` when they carry a
description, as kube-apiserver writes them), one `type` instead of `[type, "null"]`, int-or-string and quantity as
strings. The `x-kubernetes-*` extensions are kept, so kubectl computes strategic merge patches from these documents
as it does against a real cluster. `devcluster.openapi` calls `closure(names)`; without the package every lookup is
empty and built-in kinds have no schema (the state before).
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import logging
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["closure", "definitions", "kind_schema_name"]

log = logging.getLogger(__name__)

Obj = dict[str, Any]

KUBERNETES_RELEASE = (1, 32)          # the release `devcluster.discovery.version_info` reports
_REF = re.compile(r"^#/(?:\$defs|definitions)/(.+)$")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf")


def _release_dir(root: Any, release: tuple[int, int]) -> Any | None:
    """The schema folder of `release` (`v1.32.0-local`), else the newest one not after it, else the oldest."""
    found: list[tuple[tuple[int, int], Any]] = []
    for entry in root.iterdir():
        m = re.fullmatch(r"v(\d+)\.(\d+)\.\d+-local", entry.name)
        if m:
            found.append(((int(m.group(1)), int(m.group(2))), entry))
    if not found:
        return None
    found.sort(key=lambda f: f[0])
    older = [e for v, e in found if v <= release]
    return older[-1] if older else found[0][1]


def _newest_dir(root: Any) -> Any | None:
    return _release_dir(root, (10**6, 0))


def _read_definitions(folder: Any) -> dict[str, Any]:
    raw = json.loads((folder / "_definitions.json").read_text())
    return raw.get("$defs") or raw.get("definitions") or {}


@functools.cache
def definitions(release: tuple[int, int] = KUBERNETES_RELEASE) -> dict[str, Obj]:
    """Kubernetes' definitions by name (`io.k8s.api.core.v1.Pod`), converted to OpenAPI v3; {} without the package.

    Those of `release`, plus, for the kinds devcluster serves ahead of it (resource.k8s.io/v1, new in 1.34), the
    definitions of the newest release the package has that `release` lacks."""
    try:
        root = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
        folder = _release_dir(root, release)
        if folder is None:
            return {}
        defs = dict(_read_definitions(folder))
        newest = _newest_dir(root)
        if newest is not None and newest != folder:
            for name, schema in _read_definitions(newest).items():
                defs.setdefault(name, schema)
    except (ModuleNotFoundError, FileNotFoundError, OSError, ValueError) as e:
        log.info("built-in kinds get no OpenAPI schema (kubernetes-validate's schemas not readable: %s)", e)
        return {}
    return {name: _convert(schema, top=True) for name, schema in defs.items()}


def _ref(target: str) -> str:
    m = _REF.match(target)
    return f"#/components/schemas/{m.group(1) if m else target.rsplit('/', 1)[-1]}"


def _one_type(value: Any) -> Any:
    if isinstance(value, list):
        kinds = [t for t in value if t != "null"]
        return kinds[0] if kinds else None
    return value


def _convert(schema: Any, *, top: bool = False) -> Any:
    """One JSON-schema node as kube-apiserver's OpenAPI v3 writes it."""
    if not isinstance(schema, dict):
        return schema
    one_of = schema.get("oneOf")
    if isinstance(one_of, list) and one_of and all(isinstance(s, dict) and set(s) == {"type"} for s in one_of):
        kinds = {_one_type(s["type"]) for s in one_of}
        out: Obj = {k: v for k, v in schema.items() if k != "oneOf"}
        out["type"] = "string"
        if kinds == {"string", "integer"}:
            out["format"] = "int-or-string"
        return out
    out = {}
    for key, value in schema.items():
        if key == "$ref":
            continue
        if key == "type":
            kind = _one_type(value)
            if kind is not None:
                out["type"] = kind
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: _convert(prop) for name, prop in value.items()}
            if top:       # the generator pins apiVersion/kind to one value; kube-apiserver's documents do not
                for name in ("apiVersion", "kind"):
                    if isinstance(out[key].get(name), dict):
                        out[key][name].pop("enum", None)
        elif key in ("items", "additionalProperties", "not"):
            out[key] = _convert(value)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_convert(v) for v in value]
        else:
            out[key] = value
    if "$ref" in schema:
        ref = {"$ref": _ref(str(schema["$ref"]))}
        if not out:
            return ref
        out["allOf"] = [ref]
    return out


def _refs(schema: Any) -> Iterable[str]:
    if isinstance(schema, dict):
        target = schema.get("$ref")
        if isinstance(target, str) and target.startswith("#/components/schemas/"):
            yield target.removeprefix("#/components/schemas/")
        for value in schema.values():
            yield from _refs(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _refs(value)


def closure(names: Iterable[str], release: tuple[int, int] = KUBERNETES_RELEASE) -> dict[str, Obj]:
    """The named definitions and every definition they refer to, by name; names not known are left out."""
    out: dict[str, Obj] = {}
    for name in names:
        out.update(_closure_of(name, release))
    return out


@functools.cache
def _closure_of(name: str, release: tuple[int, int]) -> dict[str, Obj]:
    defs = definitions(release)
    out: dict[str, Obj] = {}
    todo = [name] if name in defs else []
    while todo:
        current = todo.pop()
        if current in out:
            continue
        out[current] = defs[current]
        todo.extend(r for r in _refs(defs[current]) if r in defs and r not in out)
    return dict(sorted(out.items()))


def kind_schema_name(group: str, version: str, kind: str,
                     release: tuple[int, int] = KUBERNETES_RELEASE) -> str | None:
    """The definition whose `x-kubernetes-group-version-kind` names (group, version, kind), or None."""
    return _by_gvk(release).get((group, version, kind))


@functools.cache
def _by_gvk(release: tuple[int, int]) -> dict[tuple[str, str, str], str]:
    out: dict[tuple[str, str, str], str] = {}
    for name, schema in definitions(release).items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or ():
            key = (str(gvk.get("group") or ""), str(gvk.get("version") or ""), str(gvk.get("kind") or ""))
            out.setdefault(key, name)
    return out
