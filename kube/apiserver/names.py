"""Object names as kube-apiserver checks and generates them (per-registry rules, `generateName` suffixes).

Called by `kube.apiserver.store.Store.create`; the DNS-1123 rules themselves live in `kube.podspec`.
"""

from __future__ import annotations

import secrets

from lahar.kube import podspec
from lahar.kube.resources import ResourceType

__all__ = ["generate", "name_errors"]

_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def name_errors(rt: ResourceType, name: str) -> list[str]:
    """Object-name validation as kube's registries do it (namespaces: DNS label; RBAC: path segment; else subdomain)."""
    if rt.group == "rbac.authorization.k8s.io":
        if name in (".", ".."):
            return [f"may not be '{name}'"]
        return [f"may not contain '{c}'" for c in ("/", "%") if c in name]
    if rt.group == "" and rt.plural == "namespaces":
        return podspec.is_dns1123_label(name)
    return podspec.is_dns1123_subdomain(name)


def generate(prefix: str) -> str:
    """`generateName`: the prefix and five random characters of kube's alphabet (no vowels, no look-alikes)."""
    return prefix + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
