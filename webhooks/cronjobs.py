"""`/cronjobs/validate`: Volcano's CronJob admission checks (`batch.volcano.sh/v1alpha1` cronjobs, CREATE/UPDATE).

The route table calls `validate`; `check` is the pure rule over a CronJob dict.

Volcano's rules (spec §4.9, `pkg/webhooks/admission/cronjobs/validate/admit_cronjob.go`), texts concatenated the
way Volcano does: schedule required, no `TZ`/`CRON_TZ` inside it, a standard 5-field cron or descriptor
(robfig/cron `ParseStandard`, re-implemented in `kube.cron`; no third-party library); timeZone non-empty,
well-formed per segment, not `Local`, loadable from the IANA database (`zoneinfo`); name at most 52 characters
(the job name gets an 11-character suffix) and a qualified name.

Beyond Volcano (docs/compatibility.md): the job template is checked like a Job at creation — after the Job
defaults, without the name and queue checks (its jobs get names at run time; the queue may come later) — so a
CronJob that could only ever produce refused Jobs is refused itself, reported as ` jobTemplate: <job message>`.
"""

from __future__ import annotations

import os
import re
import zoneinfo
from collections.abc import Mapping
from typing import Any

from lahar.kube import cron, podspec
from lahar.policies.admission import AdmissionConfig
from lahar.webhooks import _jobs_rules as rules
from lahar.webhooks import devices
from lahar.webhooks.lookups import Lookups
from lahar.webhooks.review import Request, Verdict

__all__ = ["check", "check_name", "check_schedule", "check_time_zone", "validate"]

_BUILTIN = AdmissionConfig()
MAX_NAME_LENGTH = 52  # 63 - len("-") - 10 digits of the scheduled minute
_TZ_SEGMENT = re.compile(r"^[A-Za-z.\-_0-9+]{1,14}$")


def check_schedule(schedule: str) -> str:
    if not schedule:
        return " schedule is required, but got empty"
    if "TZ" in schedule:
        return " schedule should not contain TZ or CRON_TZ, TZ should only be set in the timeZone field"
    if cron.validate(schedule) is not None:
        return "schedule is not a valid cron expression"
    return ""


def _load_location(name: str) -> bool:
    """Go's `time.LoadLocation` success, over the IANA database `zoneinfo` reads."""
    if name in ("", "UTC", "Local"):
        return True
    if ".." in name or name[0] in "/\\":
        return False
    try:
        zoneinfo.ZoneInfo(os.path.normpath(name))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return False
    return True


def check_time_zone(tz: str | None) -> str:
    if tz is None:
        return ""
    if tz == "":
        return " timeZone must be nil or non-empty string, got empty string"
    msg = ""
    for part in tz.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TZ_SEGMENT.match(part):
            msg += " unknown timeZone"
    if tz.lower() == "local":
        msg += " timeZone can't be Local, and must be defined in https://www.iana.org/time-zones"
    elif not _load_location(tz):
        msg += " invalid timeZone"
    return msg


def check_name(name: str) -> str:
    if len(name) > MAX_NAME_LENGTH:
        return (f"cronJob name must be no more than {MAX_NAME_LENGTH} characters to accommodate job name suffix "
                f"(max 63 total)")
    errs = podspec.is_qualified_name(name)
    if errs:
        return f'invalid cronJob name "{name}": ' + "; ".join(errs)
    return ""


def _check_job_template(spec: Mapping[str, Any], *, namespace: str, config: AdmissionConfig) -> str:
    template = spec.get("jobTemplate")
    job_spec = template.get("spec") if isinstance(template, dict) else None
    if not isinstance(job_spec, dict):
        return ""  # the CRD schema requires it; nothing more to say here
    defaulted = rules.apply_defaults(job_spec, scheduler_name=config.scheduler_names[0],
                                     default_queue=config.default_queue)
    msg = rules.validate_spec(defaulted, job_name="", namespace=namespace, check_names=False, lookups=None,
                              device_check=devices.check_pod_spec, config=config)
    return f" jobTemplate: {msg.strip()}" if msg else ""


def check(cronjob: Mapping[str, Any], *, namespace: str = "", config: AdmissionConfig | None = None) -> str:
    """All CronJob rules; "" when allowed, else the concatenated message (untrimmed, as Volcano builds it)."""
    config = config or _BUILTIN
    meta = cronjob.get("metadata") if isinstance(cronjob.get("metadata"), dict) else {}
    spec = cronjob.get("spec") if isinstance(cronjob.get("spec"), dict) else {}
    assert isinstance(meta, dict) and isinstance(spec, dict)
    tz = spec.get("timeZone")
    msg = check_schedule(str(spec.get("schedule") or ""))
    msg += check_time_zone(None if tz is None else str(tz))
    msg += check_name(str(meta.get("name") or ""))
    msg += _check_job_template(spec, namespace=str(meta.get("namespace") or namespace), config=config)
    return msg


def validate(req: Request, lookups: Lookups, config: AdmissionConfig | None = None) -> Verdict:
    """`/cronjobs/validate`."""
    if req.operation not in ("CREATE", "UPDATE"):
        return Verdict.deny("expect operation to be 'CREATE' or 'UPDATE'")
    msg = check(req.object or {}, namespace=req.namespace, config=config)
    return Verdict.deny(msg.strip()) if msg else Verdict.allow()
