"""The JobTemplate reconciler (Volcano's jobtemplate-controller): a JobTemplate's status lists the Jobs made from it.

The Jobs are those labelled `volcano.sh/createdByJobTemplate=<namespace>.<template>` (the jobflow reconciler stamps
the label); `status.jobDependsOnList` holds their names, written only when it changes. As in Volcano, a template no
Job refers to any more keeps its last list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lahar.controllers import _meta
from lahar.controllers.context import Context, Result
from lahar.kube import errors
from lahar.kube.models import labels

__all__ = ["depends_on_list", "reconcile"]


def depends_on_list(jobs: Sequence[Mapping[str, Any]], previous: Sequence[str] | None) -> list[str] | None:
    """The new `jobDependsOnList`, or None to leave the status alone (no Jobs: Volcano keeps the old list)."""
    names = sorted((j.get("metadata") or {}).get("name") or "" for j in jobs)
    if not names or names == list(previous or ()):
        return None
    return names


def reconcile(ctx: Context, namespace: str, name: str) -> Result:
    templates_rt = _meta.rt(ctx, "jobtemplates")
    try:
        template = ctx.client.get(templates_rt, name, namespace=namespace)
    except errors.NotFound:
        return Result()
    selector = f"{labels.CREATED_BY_JOB_TEMPLATE_KEY}={namespace}.{name}"
    jobs = ctx.client.list(_meta.rt(ctx, "vcjobs"), namespace=namespace, label_selector=selector)["items"]
    status = dict(template.get("status") or {})
    names = depends_on_list(jobs, status.get("jobDependsOnList"))
    if names is not None:
        status["jobDependsOnList"] = names
        ctx.client.update_status(templates_rt, {**template, "status": status})
    return Result()
