"""`/configmaps/validate`: lahar's own ConfigMaps are checked at `kubectl apply`, before any process reloads them.

Registered as `validateconfigmap.lahar.sh` (deploy/webhooks/validating.yaml) for ConfigMaps in lahar's namespace
whose name is `lahar-admission-config` or `lahar-scheduler-configmap`, or that carry `lahar.sh/policy: "true"`
(its matchConditions); the check is `policies.loading.validate_configmap`, the same parse every watcher runs, so a
ConfigMap this webhook admits is one the webhook and scheduler processes will load. The scheduler's conf parser is
registered from the `lahar` layer (`lahar.configmaps.register_validators`), since webhooks must not import scheduler.
"""

from __future__ import annotations

from typing import Any

from lahar.policies import loading
from lahar.webhooks.lookups import Lookups
from lahar.webhooks.review import Request, Verdict

__all__ = ["LAHAR_CONFIGMAPS", "denial", "is_lahars", "validate"]

LAHAR_CONFIGMAPS = (loading.ADMISSION_CONFIGMAP, loading.SCHEDULER_CONFIGMAP)


def is_lahars(cm: dict[str, Any] | None) -> bool:
    """A ConfigMap lahar reads: one of its named ConfigMaps or a policy ConfigMap (what the matchConditions say)."""
    if not cm:
        return False
    return (cm.get("metadata") or {}).get("name") in LAHAR_CONFIGMAPS or loading.is_policy_configmap(cm)


def denial(cm: dict[str, Any], messages: list[str]) -> str:
    """`ConfigMap <ns>/<name> is not a valid lahar configuration: <path>: <reason>; ...`."""
    return f"ConfigMap {loading.key_of(cm)} is not a valid lahar configuration: " + "; ".join(messages)


def validate(req: Request, lookups: Lookups, config: Any) -> Verdict:
    """Refuse a lahar ConfigMap whose configuration does not parse, naming each field path and reason (HTTP 422)."""
    cm = req.object
    if req.operation not in ("CREATE", "UPDATE") or not isinstance(cm, dict) or not is_lahars(cm):
        return Verdict.allow()
    if not (cm.get("metadata") or {}).get("namespace") and req.namespace:
        cm = {**cm, "metadata": {**(cm.get("metadata") or {}), "namespace": req.namespace}}
    messages = loading.validate_configmap(cm)
    if not messages:
        return Verdict.allow()
    return Verdict.deny(denial(cm, messages), code=422, reason="Invalid")
