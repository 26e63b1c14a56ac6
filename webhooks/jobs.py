"""`/jobs/mutate` and `/jobs/validate`: Volcano's Job admission handlers (`batch.volcano.sh/v1alpha1` jobs).

The route table (`webhooks.routes`) calls them with a parsed review; the rules themselves live in
`webhooks._jobs_rules` as pure functions.

- `mutate` (CREATE, UPDATE): queue, schedulerName (first of `config.scheduler_names`), maxRetry, task names, task
  minAvailable/maxRetry, hostNetwork dnsPolicy, job minAvailable, implied `svc`/`ssh` plugins — Volcano's patch ops
  in Volcano's order. Volcano defaults on CREATE only; lahar also on UPDATE, so a re-applied manifest (whose
  `tasks` list kubectl's merge patch sends whole, without the defaults) is stored as it was: a no-op. Any other
  operation is refused with Volcano's "expect operation to be 'CREATE' ".
- `validate` (CREATE, UPDATE): every check of spec §4.2 with Volcano's texts (an UPDATE compares old and new with
  the mutate defaults applied to both, so re-applying the same manifest is allowed), plus lahar's device-request checks
  (`webhooks.devices.check_pod_spec`) on each task template, reported as ` spec.task[<i>].template: <msg>;`.
"""

from __future__ import annotations

from lahar.policies.admission import AdmissionConfig
from lahar.webhooks import _jobs_rules as rules
from lahar.webhooks import devices
from lahar.webhooks.lookups import Lookups
from lahar.webhooks.review import Request, Verdict

__all__ = ["mutate", "validate"]

_BUILTIN = AdmissionConfig()


def mutate(req: Request, lookups: Lookups, config: AdmissionConfig | None = None) -> Verdict:
    """`/jobs/mutate`: Volcano's defaults for a new or updated Job as JSON-patch ops."""
    if req.operation not in ("CREATE", "UPDATE"):
        return Verdict.deny("expect operation to be 'CREATE' ")
    config = config or _BUILTIN
    return Verdict.allow(patch=rules.default_patch(req.object or {}, scheduler_name=config.scheduler_names[0],
                                                   default_queue=config.default_queue))


def validate(req: Request, lookups: Lookups, config: AdmissionConfig | None = None) -> Verdict:
    """`/jobs/validate`: Volcano's CREATE checks (messages concatenated) and UPDATE restrictions (first error)."""
    config = config or _BUILTIN
    job = req.object or {}
    if req.operation in ("CREATE", "UPDATE"):
        overflow = rules.int32_error(job)
        if overflow:
            return Verdict.deny(overflow)
    if req.operation == "CREATE":
        msg = rules.validate_create(job, lookups=lookups, namespace=req.namespace,
                                    device_check=devices.check_pod_spec, config=config)
        return Verdict.deny(msg.strip()) if msg else Verdict.allow()
    if req.operation == "UPDATE":
        err = rules.validate_update(req.old_object or {}, job, scheduler_name=config.scheduler_names[0],
                                    default_queue=config.default_queue)
        return Verdict.deny(err) if err else Verdict.allow()
    return Verdict.deny("expect operation to be 'CREATE' or 'UPDATE'")
