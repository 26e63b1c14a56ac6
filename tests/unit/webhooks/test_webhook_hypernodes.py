"""`/hypernodes/validate`: the cases of Volcano's admit_hypernode_test.go (before and after its move to CRD rules and
a ValidatingAdmissionPolicy), as data, plus lahar's bounds on patterns and its field paths with the member index."""

from __future__ import annotations

from typing import Any

import pytest

from lahar.webhooks import hypernodes, review, routes
from lahar.webhooks.lookups import StaticLookups


def member(type_: str = "Node", **selector: Any) -> dict:
    return {"type": type_, "selector": selector}


def hypernode(*members: dict, tier: Any = 1, name: str = "hypernode-1") -> dict:
    spec: dict[str, Any] = {"tier": tier}
    if members != (None,):
        spec["members"] = list(members)
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": spec}


def exact(name: str) -> dict:
    return {"exactMatch": {"name": name}}


def regex(pattern: str) -> dict:
    return {"regexMatch": {"pattern": pattern}}


M0 = "spec.members[0].selector"
CASES: list[tuple[str, dict, list[str]]] = [
    # TestValidateHyperNode, in its order
    ("valid-hypernode", hypernode(member(**exact("node-1"))), []),
    ("empty-exact-match", hypernode(member(**exact(""))),
     [f'{M0}.exactMatch.name: Invalid value: "": member exactMatch name is required']),
    ("empty-regex-match", hypernode(member(**regex(""))),
     [f'{M0}.regexMatch.pattern: Invalid value: "": member regexMatch pattern is required']),
    ("invalid-regex-match", hypernode(member(**regex("a(b"))),
     [f'{M0}.regexMatch.pattern: Invalid value: "a(b": member regexMatch pattern is invalid: error parsing regexp: '
      "missing ), unterminated subpattern at position 1"]),
    ("regex-and-exact", hypernode(member(**regex("node.*"), **exact("node-1"))),
     [f'{M0}: Invalid value: {{"exactMatch":{{"name":"node-1"}},"regexMatch":{{"pattern":"node.*"}}}}: cannot specify '
      "more than one selector type (exactMatch, regexMatch, labelMatch)"]),
    ("no-selector", hypernode(member()),
     [f"{M0}: Invalid value: {{}}: member selector must have one of exactMatch, regexMatch, or labelMatch"]),
    ("no-members", hypernode(None), ["spec.members: Invalid value: null: member must have at least one member"]),
    ("empty-members", hypernode(), ["spec.members: Invalid value: []: member must have at least one member"]),
    ("valid-label-match", hypernode(member(labelMatch={"matchLabels": {"topology-rack": "rack1"}})), []),
    ("label-and-exact", hypernode(member(labelMatch={"matchLabels": {"a": "b"}}, **exact("node-1"))),
     [f'{M0}: Invalid value: {{"exactMatch":{{"name":"node-1"}},"labelMatch":{{"matchLabels":{{"a":"b"}}}}}}: cannot '
      "specify more than one selector type (exactMatch, regexMatch, labelMatch)"]),
    # the VAP's rules
    ("exact-not-qualified", hypernode(member(**exact("-node")))
     , [f'{M0}.exactMatch.name: Invalid value: "-node": member exactMatch validate failed [name part must consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
        "'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')]"]),
    ("valid-regex", hypernode(member(**regex("^node-[0-9]+$"))), []),
    ("valid-hypernode-members", hypernode(member("HyperNode", **exact("s0")), member("HyperNode", **regex("^s[12]$")),
                                          tier=2), []),
    # member type (the CRD's enum)
    ("member-type-unknown", hypernode(member("Switch", **exact("s0"))),
     ['spec.members[0].type: Unsupported value: "Switch": supported values: "Node", "HyperNode"']),
    ("member-type-missing", hypernode({"selector": exact("s0")}), ["spec.members[0].type: Required value"]),
    ("tier-negative", hypernode(member(**exact("n")), tier=-1),
     ["spec.tier: Invalid value: -1: must be greater than or equal to 0"]),
    ("tier-missing", hypernode(member(**exact("n")), tier=None), ["spec.tier: Required value"]),
    # the index names the member at fault; several errors aggregate
    ("second-member-named", hypernode(member(**exact("n0")), member(**regex("a["))),
     ['spec.members[1].selector.regexMatch.pattern: Invalid value: "a[": member regexMatch pattern is invalid: '
      "error parsing regexp: unterminated character set at position 1"]),
    # beyond Volcano: RE2 syntax, bounded patterns, labelMatch on Node members only
    ("regex-lookahead", hypernode(member(**regex("node-(?!gpu)"))),
     [f'{M0}.regexMatch.pattern: Invalid value: "node-(?!gpu)": member regexMatch pattern is invalid: error parsing '
      "regexp: invalid or unsupported Perl syntax: `(?!`"]),
    ("regex-backreference", hypernode(member(**regex(r"(a)\1"))),
     [f'{M0}.regexMatch.pattern: Invalid value: "(a)\\\\1": member regexMatch pattern is invalid: error parsing '
      "regexp: invalid or unsupported Perl syntax: `\\1`"]),
    ("regex-nested-repeat", hypernode(member(**regex("^(a+)+$"))),
     [f'{M0}.regexMatch.pattern: Invalid value: "^(a+)+$": member regexMatch pattern is invalid: nested repetition '
      "(like `(a+)+`) is not allowed: it can take exponential time to match"]),
    ("regex-optional-group-ok", hypernode(member(**regex("^node(-[0-9]+)?$"))), []),
    ("regex-too-long", hypernode(member(**regex("a" * 1025))),
     [f"{M0}.regexMatch.pattern: Too long: may not be more than 1024 bytes"]),
    ("label-match-on-hypernode", hypernode(member("HyperNode", labelMatch={"matchLabels": {"a": "b"}}), tier=2),
     [f'{M0}.labelMatch: Invalid value: {{"matchLabels":{{"a":"b"}}}}: labelMatch can only select members of type '
      "Node; select a HyperNode by exactMatch or regexMatch"]),
    ("label-match-bad-operator", hypernode(member(labelMatch={"matchExpressions": [{"key": "a", "operator": "Is"}]})),
     [f'{M0}.labelMatch: Invalid value: {{"matchExpressions":[{{"key":"a","operator":"Is"}}]}}: labelMatch is '
      'invalid: "Is" is not a valid label selector operator']),
]


@pytest.mark.parametrize(("obj", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_check(obj: dict, want: list[str]) -> None:
    assert hypernodes.check(obj) == want


def test_several_errors_aggregate_like_go() -> None:
    errs = hypernodes.check(hypernode(member(**exact("")), member()))
    assert len(errs) == 2
    assert hypernodes.message(errs) == f"[{errs[0]}, {errs[1]}]"


@pytest.mark.parametrize(("operation", "allowed"), [("CREATE", False), ("UPDATE", False), ("DELETE", True)],
                         ids=["create", "update", "delete"])
def test_validate_verdict(operation: str, allowed: bool) -> None:
    obj = hypernode(member(**regex("a(b")))
    req = review.request_for(obj, resource="hypernodes", operation=operation,
                             old_object=obj if operation != "CREATE" else None)
    verdict = hypernodes.validate(req, StaticLookups())
    assert verdict.allowed is allowed
    if not allowed:
        assert verdict.code == 422 and verdict.message.startswith(f"{M0}.regexMatch.pattern: Invalid value: ")


def test_route_and_chain() -> None:
    route = routes.default_routes()["/hypernodes/validate"]
    assert (route.group, route.version, route.resource) == ("topology.volcano.sh", "v1alpha1", "hypernodes")
    assert route.operations == {"CREATE", "UPDATE"} and not route.mutating
    assert routes.resource_for("topology.volcano.sh/v1alpha1", "HyperNode") == "hypernodes"
    req, verdict = routes.admit_object(hypernode(member(**exact("n0"))), StaticLookups(), None) or (None, None)
    assert req is not None and req.namespace == "" and verdict is not None and verdict.allowed
