"""The files lahar ships beside its code: CRDs, webhook configurations, the kustomize base, examples.

Entry points (`lahar up`, `lahar certs`) ask here; the same call works from a checkout (editable install) and from
the wheel, because the folders are the packages `lahar.deploy` and `lahar.examples` (see setup.py).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["crds", "deploy", "examples", "webhooks"]


def _folder(package: str, *parts: str) -> Path:
    root = resources.files(package)
    path = root.joinpath(*parts) if parts else root
    if not isinstance(path, Path):  # a zipped install: lahar reads its manifests as plain files
        raise RuntimeError(f"lahar's package data ({package}) must be installed as files, not inside an archive")
    return path


def deploy(*parts: str) -> Path:
    """A path inside `deploy/` (the kustomize base is the folder itself)."""
    return _folder("lahar.deploy", *parts)


def crds() -> Path:
    """Volcano's CustomResourceDefinitions, applied before anything else."""
    return deploy("crds")


def webhooks() -> Path:
    """lahar's Mutating/ValidatingWebhookConfigurations (caBundle and URL filled in at registration)."""
    return deploy("webhooks")


def examples(*parts: str) -> Path:
    """The demo's manifests (queues, jobs, policies, scheduler conf)."""
    return _folder("lahar.examples", *parts)
