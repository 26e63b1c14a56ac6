"""What the webhook does with the results: `enforce` (deny with the first denial, warn, audit, patch) and
`policy_stage`, the one call the webhook's policy stage makes (evaluate, then enforce, timed).

Top of `policies.admission_policies`, over `evaluation`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from lahar.policies.admission_policies.compiling import CompiledPolicy
from lahar.policies.admission_policies.evaluation import Result, evaluate
from lahar.policies.admission_policies.models import ValidationAction


@dataclass(frozen=True)
class Decision:
    """What the webhook does with the results: deny (first denial's message and code), warn, audit, patch."""

    denials: tuple[Result, ...] = ()
    warnings: tuple[str, ...] = ()
    audits: tuple[Result, ...] = ()
    patch: tuple[dict, ...] = ()
    results: tuple[Result, ...] = field(default=(), repr=False)

    @property
    def allowed(self) -> bool:
        return not self.denials

    @property
    def message(self) -> str:
        return "; ".join(r.denial() for r in self.denials)


def enforce(results: Sequence[Result]) -> Decision:
    denials, warnings, audits, patch = [], [], [], []
    for r in results:
        if r.kind == "mutation":
            patch.extend(r.patch)
            continue
        if ValidationAction.DENY in r.actions:
            denials.append(r)
        if ValidationAction.WARN in r.actions:
            warnings.append(r.warning())
        if ValidationAction.AUDIT in r.actions:
            audits.append(r)
    return Decision(tuple(denials), tuple(warnings), tuple(audits), () if denials else tuple(patch), tuple(results))


class PolicyStage(NamedTuple):
    """`policy_stage`'s answer: denial Results (`.denial()` is the message, `.code`, `.reason`), warning texts,
    JSONPatch ops (empty when denied) against the request's object, and the Audit results."""

    denials: list[Result]
    warnings: list[str]
    patches: list[dict]
    audits: list[Result]


def policy_stage(policies: Iterable[CompiledPolicy] | None, request: Any, *,
                 namespace_obj: Mapping | None = None, queue_lookup: Callable[[str], Mapping | None] | None = None,
                 budget_seconds: float | None = 1.0) -> PolicyStage:
    """The webhook's policy stage (run after the built-in rules): evaluate and enforce in one call. In the webhook:
    `policy_stage(current_policies, req, namespace_obj=lookups.namespace(req.namespace), queue_lookup=lookups.queue)`.
    `budget_seconds` bounds the whole stage (expressions after it count as errors, see `failurePolicy`)."""
    if not policies:
        return PolicyStage([], [], [], [])
    deadline = time.monotonic() + budget_seconds if budget_seconds is not None else None
    d = enforce(evaluate(policies, request, namespace_obj=namespace_obj, queue_lookup=queue_lookup,
                         deadline=deadline))
    return PolicyStage(list(d.denials), list(d.warnings), list(d.patch), list(d.audits))
