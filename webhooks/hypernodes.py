"""`/hypernodes/validate`: Volcano's HyperNode admission checks (`topology.volcano.sh/v1alpha1` hypernodes, CREATE/UPDATE).

The route table calls `validate`; `check` is the pure rule over one HyperNode dict, built from one pure function per
rule (`check_member_type`, `check_selector`, `check_regex`, ...), each returning field errors.

Volcano's rules (spec §4.10, `pkg/webhooks/admission/hypernodes/validate/admit_hypernode.go` and the
`hypernode-validation-policy` ValidatingAdmissionPolicy of its chart), with Volcano's texts: at least one member;
a selector with exactly one of exactMatch / regexMatch / labelMatch; exactMatch.name required and a qualified name;
regexMatch.pattern required and compiling. Each error is `<field path>: Invalid value: <value>: <detail>`, the way
apimachinery's field errors print, several joined as Go's aggregate does (`[e1, e2]`).

Beyond Volcano (docs/compatibility.md): the field path carries the member's index (`spec.members[1].selector...`);
a pattern is bounded (at most MAX_PATTERN_LENGTH characters, no nested unbounded repetition such as `(a+)+`, which
Python's backtracking matcher would take exponential time on, where Go's RE2 is linear) and must use RE2 syntax
(no look-around or back-references, which RE2 refuses); labelMatch is refused on a HyperNode member (HyperNodes
are selected by name; Volcano's would silently select nothing). Checks across HyperNodes (a member's tier below
its parent's, cycles, one node in two HyperNodes of a tier) are not made here, as in Volcano: the hypernode
controller reports them as a condition on the HyperNode (`controllers.hypernodes`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from lahar.kube import podspec, regexes, selectors
from lahar.webhooks.lookups import Lookups
from lahar.webhooks.review import Request, Verdict

__all__ = [
    "MAX_PATTERN_LENGTH",
    "MEMBER_TYPES",
    "check",
    "check_exact_match",
    "check_label_match",
    "check_member",
    "check_member_type",
    "check_members",
    "check_regex",
    "check_selector",
    "field_error",
    "message",
    "validate",
]

MEMBER_TYPES = ("Node", "HyperNode")
MAX_PATTERN_LENGTH = regexes.MAX_LENGTH
_SELECTORS = ("exactMatch", "regexMatch", "labelMatch")


def _render(value: Any) -> str:
    """apimachinery's rendering of an invalid value: strings quoted, numbers bare, nil `null`, objects as JSON."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def field_error(path: str, value: Any, detail: str) -> str:
    """`field.Invalid(path, value, detail).Error()`."""
    return f"{path}: Invalid value: {_render(value)}: {detail}"


def check_members(members: Any) -> list[str]:
    """At least one member (the CRD's minItems says so too)."""
    if not isinstance(members, list) or not members:
        return [field_error("spec.members", members if isinstance(members, list) else None,
                            "member must have at least one member")]
    return []


def check_member_type(member_type: Any, path: str) -> list[str]:
    """`type` is Node or HyperNode (the CRD's enum; the message is apimachinery's NotSupported)."""
    if member_type in MEMBER_TYPES:
        return []
    if member_type is None or member_type == "":
        return [f"{path}: Required value"]
    return [f"{path}: Unsupported value: {_render(member_type)}: supported values: "
            + ", ".join(f'"{t}"' for t in MEMBER_TYPES)]


def check_exact_match(exact: Any, path: str) -> list[str]:
    name = exact.get("name") if isinstance(exact, Mapping) else None
    if not name:
        return [field_error(f"{path}.name", name or "", "member exactMatch name is required")]
    if not isinstance(name, str):
        return [field_error(f"{path}.name", name, "member exactMatch name must be a string")]
    errs = podspec.is_qualified_name(name)
    if errs:
        return [field_error(f"{path}.name", name, f"member exactMatch validate failed [{'; '.join(errs)}]")]
    return []


def check_regex(pattern: Any, path: str) -> list[str]:
    """Required, bounded, RE2 syntax, compiles; Volcano's `member regexMatch pattern is invalid: <err>`."""
    if not pattern:
        return [field_error(path, pattern or "", "member regexMatch pattern is required")]
    if not isinstance(pattern, str):
        return [field_error(path, pattern, "member regexMatch pattern must be a string")]
    if len(pattern) > MAX_PATTERN_LENGTH:
        return [f"{path}: Too long: may not be more than {MAX_PATTERN_LENGTH} bytes"]
    why = regexes.problem(pattern)
    if why:
        return [field_error(path, pattern, f"member regexMatch pattern is invalid: {why}")]
    return []


def check_label_match(label_match: Any, member_type: Any, path: str) -> list[str]:
    """A LabelSelector that parses, on a Node member only."""
    if member_type == "HyperNode":
        return [field_error(path, label_match, "labelMatch can only select members of type Node; select a "
                                               "HyperNode by exactMatch or regexMatch")]
    if not isinstance(label_match, Mapping):
        return [field_error(path, label_match, "labelMatch must be a label selector")]
    try:
        selectors.from_label_selector(label_match)
    except selectors.SelectorError as e:
        return [field_error(path, label_match, f"labelMatch is invalid: {e}")]
    return []


def check_selector(selector: Any, member_type: Any, path: str) -> list[str]:
    """Exactly one of exactMatch, regexMatch, labelMatch, then that one's own rule."""
    chosen = [k for k in _SELECTORS if isinstance(selector, Mapping) and selector.get(k) is not None]
    if not chosen:
        return [field_error(path, selector if isinstance(selector, Mapping) else {},
                            "member selector must have one of exactMatch, regexMatch, or labelMatch")]
    if len(chosen) > 1:
        return [field_error(path, selector,
                            "cannot specify more than one selector type (exactMatch, regexMatch, labelMatch)")]
    assert isinstance(selector, Mapping)
    kind = chosen[0]
    if kind == "exactMatch":
        return check_exact_match(selector["exactMatch"], f"{path}.exactMatch")
    if kind == "regexMatch":
        regex = selector["regexMatch"]
        return check_regex(regex.get("pattern") if isinstance(regex, Mapping) else None,
                           f"{path}.regexMatch.pattern")
    return check_label_match(selector["labelMatch"], member_type, f"{path}.labelMatch")


def check_member(member: Any, index: int) -> list[str]:
    path = f"spec.members[{index}]"
    if not isinstance(member, Mapping):
        return [field_error(path, member, "member must be an object")]
    errs = check_member_type(member.get("type"), f"{path}.type")
    errs += check_selector(member.get("selector"), member.get("type"), f"{path}.selector")
    return errs


def check(hypernode: Mapping[str, Any]) -> list[str]:
    """Every field error of one HyperNode, in field order; [] when it is admitted."""
    spec = hypernode.get("spec")
    if not isinstance(spec, Mapping):
        return [field_error("spec", spec, "spec is required")]
    errs: list[str] = []
    tier = spec.get("tier")
    if tier is None:
        errs.append("spec.tier: Required value")
    elif isinstance(tier, bool) or not isinstance(tier, int) or tier < 0:
        errs.append(field_error("spec.tier", tier, "must be greater than or equal to 0"))
    members = spec.get("members")
    errs += check_members(members)
    for i, member in enumerate(members if isinstance(members, list) else []):
        errs += check_member(member, i)
    return errs


def message(errs: list[str]) -> str:
    """Go's `ErrorList.ToAggregate().Error()`: one error as is, several as `[e1, e2]`."""
    return errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"


def validate(req: Request, lookups: Lookups, config: Any = None) -> Verdict:
    """`/hypernodes/validate`."""
    if req.operation not in ("CREATE", "UPDATE"):
        return Verdict.allow()
    errs = check(req.object or {})
    return Verdict.deny(message(errs), code=422, reason="Invalid") if errs else Verdict.allow()
