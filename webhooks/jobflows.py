"""`/jobflows/validate`: Volcano's JobFlow admission (`flow.volcano.sh/v1alpha1` jobflows, CREATE/UPDATE).

The route table calls `validate`; `check` is the pure rule over a JobFlow dict. Volcano's rule
(`pkg/webhooks/admission/jobflows/validate/`): the steps and their `dependsOn.targets` form a DAG — a target that
names no step is refused with `jobflow Flow is not DAG: vertex is not defined: <target>`, a cycle (a step waiting on
itself included) with `jobflow Flow is not DAG`. Beyond Volcano (docs/compatibility.md): two steps with one name (they
would share one Job) are refused with `jobflow Flow is not DAG: duplicate flow name: <name>`. Whether the JobTemplates
exist is not checked, as in Volcano: the controller waits for a template applied later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lahar.webhooks.lookups import Lookups
from lahar.webhooks.review import Request, Verdict

__all__ = ["check", "find_cycle", "validate"]

NOT_DAG = "jobflow Flow is not DAG"
NOT_DEFINED = "vertex is not defined"


def find_cycle(graph: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle of `graph` (step → the steps it waits on) as the path that closes it, or None for a DAG."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in graph:
        if state.get(root):
            continue
        path, stack = [root], [iter(graph.get(root, ()))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(graph.get(nxt, ())))
    return None


def check(jobflow: Mapping[str, Any]) -> str:
    """"" when the JobFlow's steps form a DAG, else Volcano's message."""
    spec = jobflow.get("spec") if isinstance(jobflow.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    graph: dict[str, list[str]] = {}
    flows = spec.get("flows")
    for step in flows if isinstance(flows, list) else ():  # other shapes: the CRD schema refuses them
        if not isinstance(step, Mapping):
            continue
        name = str(step.get("name") or "")
        if name in graph:
            return f"{NOT_DAG}: duplicate flow name: {name}"
        depends = step.get("dependsOn") if isinstance(step.get("dependsOn"), Mapping) else {}
        targets = (depends or {}).get("targets")
        graph[name] = [str(t) for t in targets] if isinstance(targets, list) else []
    for targets in graph.values():
        for target in targets:
            if target not in graph:
                return f"{NOT_DAG}: {NOT_DEFINED}: {target}"
    return NOT_DAG if find_cycle(graph) is not None else ""


def validate(req: Request, lookups: Lookups, config: Any = None) -> Verdict:
    """`/jobflows/validate`."""
    if req.operation not in ("CREATE", "UPDATE"):
        return Verdict.deny("expect operation to be 'CREATE' or 'UPDATE'")
    msg = check(req.object or {})
    return Verdict.deny(msg) if msg else Verdict.allow()
