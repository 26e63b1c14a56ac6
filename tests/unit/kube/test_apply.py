"""Server-side apply as data: sequences of applies and updates by several managers, the object they leave and who
owns which field, or the conflicts an apply meets.

The cases retell structured-merge-diff's merge tests (leaf, list, set, nested and multiple-appliers tables) in our
own words over a CRD-like schema; then the built-in kinds' list keys, the FieldsV1 encoding and conflict texts.
"""

from __future__ import annotations

from typing import Any

import pytest

from lahar.kube import apply, errors, fieldsets, fieldtypes

SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "numeric": {"type": "integer"}, "string": {"type": "string"}, "bool": {"type": "boolean"},
    "list": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
             "items": {"type": "object", "properties": {"name": {"type": "string"}, "value": {"type": "integer"}}}},
    "listOfLists": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {
                        "name": {"type": "string"},
                        "value": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}},
    "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
    "atomicList": {"type": "array", "items": {"type": "string"}},
    "atomicMap": {"type": "object", "x-kubernetes-map-type": "atomic",
                  "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "struct": {"type": "object", "properties": {
        "name": {"type": "string"}, "scalarField": {"type": "string"},
        "complexField": {"type": "object", "properties": {"name": {"type": "string"}}}}},
}}
TYPES = fieldtypes.types_for("Thing", SCHEMA)


def run(ops: list[tuple[str, str, dict[str, Any]]]) -> tuple[dict[str, Any], list[apply.Entry]]:
    """Play `ops` — ("apply" | "force" | "update", manager, object) — from an empty object."""
    live: dict[str, Any] = {}
    entries: list[apply.Entry] = []
    for i, (op, manager, obj) in enumerate(ops):
        now = f"t{i}"
        if op == "update":
            entries = apply.update(entries, live, obj, manager=manager, api_version="v1", subresource="", now=now,
                                   types=TYPES)
            live = obj
        else:
            live, entries = apply.apply(live, obj, entries=entries, manager=manager, api_version="v1",
                                        subresource="", force=op == "force", now=now, types=TYPES)
    return live, entries


def owners(entries: list[apply.Entry]) -> dict[str, set[str]]:
    return {f"{e.manager}/{e.operation}": {fieldsets.path_string(p) for p in e.fields} for e in entries}


def conflicts_of(ops: list[tuple[str, str, dict[str, Any]]]) -> list[tuple[str, str]]:
    with pytest.raises(errors.Conflict) as caught:
        run(ops)
    return [(c["message"], c["field"]) for c in caught.value.details["causes"]]


A, U = "Apply", "Update"
CASES = [
    ("leaf_apply_twice",
     [("apply", "default", {"numeric": 1, "string": "s"}),
      ("apply", "default", {"numeric": 2, "string": "s", "bool": False})],
     {"numeric": 2, "string": "s", "bool": False},
     {f"default/{A}": {".numeric", ".string", ".bool"}}),
    ("leaf_apply_update_apply_no_conflict",
     [("apply", "default", {"numeric": 1, "string": "s"}),
      ("update", "controller", {"numeric": 1, "string": "s", "bool": True}),
      ("apply", "default", {"numeric": 2, "string": "s"})],
     {"numeric": 2, "string": "s", "bool": True},
     {f"default/{A}": {".numeric", ".string"}, f"controller/{U}": {".bool"}}),
    ("leaf_force_takes_the_field_from_an_updater",
     [("apply", "default", {"numeric": 1, "string": "s"}),
      ("update", "controller", {"numeric": 1, "string": "controller", "bool": True}),
      ("force", "default", {"numeric": 2, "string": "user"})],
     {"numeric": 2, "string": "user", "bool": True},
     {f"default/{A}": {".numeric", ".string"}, f"controller/{U}": {".bool"}}),
    ("leaf_apply_twice_remove",
     [("apply", "default", {"numeric": 1, "string": "s", "bool": False}),
      ("apply", "default", {"string": "new"})],
     {"string": "new"}, {f"default/{A}": {".string"}}),
    ("leaf_updater_took_the_only_field",
     [("apply", "default", {"numeric": 2}), ("update", "controller", {"numeric": 1}), ("apply", "default", {})],
     {"numeric": 1}, {f"controller/{U}": {".numeric"}}),
    ("leaf_apply_nothing_removes_everything",
     [("apply", "default", {"string": "s"}), ("apply", "default", {})], {}, {}),
    ("list_remove_one",
     [("apply", "one", {"list": [{"name": "a"}, {"name": "b"}]}),
      ("apply", "two", {"list": [{"name": "c"}]}),
      ("apply", "one", {"list": [{"name": "a"}]})],
     {"list": [{"name": "a"}, {"name": "c"}]},
     {f"one/{A}": {'.list[name="a"]', '.list[name="a"].name'},
      f"two/{A}": {'.list[name="c"]', '.list[name="c"].name'}}),
    ("list_same_value_is_shared",
     [("apply", "one", {"list": [{"name": "a", "value": 0}]}),
      ("apply", "two", {"list": [{"name": "a", "value": 0}]})],
     {"list": [{"name": "a", "value": 0}]},
     {f"one/{A}": {'.list[name="a"]', '.list[name="a"].name', '.list[name="a"].value'},
      f"two/{A}": {'.list[name="a"]', '.list[name="a"].name', '.list[name="a"].value'}}),
    ("list_remove_one_keep_one",
     [("apply", "one", {"list": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}),
      ("apply", "two", {"list": [{"name": "c"}, {"name": "d"}]}),
      ("apply", "one", {"list": [{"name": "a"}]})],
     {"list": [{"name": "a"}, {"name": "c"}, {"name": "d"}]},
     {f"one/{A}": {'.list[name="a"]', '.list[name="a"].name'},
      f"two/{A}": {'.list[name="c"]', '.list[name="c"].name', '.list[name="d"]', '.list[name="d"].name'}}),
    ("nested_remove_one_keep_one_with_sub_items",
     [("apply", "one", {"listOfLists": [{"name": "a"}, {"name": "b", "value": ["c"]}]}),
      ("apply", "two", {"listOfLists": [{"name": "b", "value": ["d"]}]}),
      ("apply", "one", {"listOfLists": [{"name": "a"}]})],
     {"listOfLists": [{"name": "a"}, {"name": "b", "value": ["d"]}]},
     {f"one/{A}": {'.listOfLists[name="a"]', '.listOfLists[name="a"].name'},
      f"two/{A}": {'.listOfLists[name="b"]', '.listOfLists[name="b"].name', '.listOfLists[name="b"].value[="d"]'}}),
    ("nested_dangling_sub_item_of_an_updater_stays",
     [("apply", "one", {"listOfLists": [{"name": "a"}, {"name": "b", "value": ["c"]}]}),
      ("apply", "two", {"listOfLists": [{"name": "b", "value": ["d"]}]}),
      ("update", "controller", {"listOfLists": [{"name": "a"}, {"name": "b", "value": ["c", "d", "e"]}]}),
      ("apply", "one", {"listOfLists": [{"name": "a"}]})],
     {"listOfLists": [{"name": "a"}, {"name": "b", "value": ["d", "e"]}]},
     {f"one/{A}": {'.listOfLists[name="a"]', '.listOfLists[name="a"].name'},
      f"two/{A}": {'.listOfLists[name="b"]', '.listOfLists[name="b"].name', '.listOfLists[name="b"].value[="d"]'},
      f"controller/{U}": {'.listOfLists[name="b"].value[="e"]'}}),
    ("nested_item_nobody_else_applies_goes_with_its_sub_items",
     [("apply", "one", {"listOfLists": [{"name": "a"}, {"name": "b", "value": ["c"]}]}),
      ("apply", "two", {"listOfLists": [{"name": "a", "value": ["b"]}]}),
      ("update", "controller", {"listOfLists": [{"name": "a", "value": ["b"]}, {"name": "b", "value": ["c", "d"]}]}),
      ("apply", "one", {"listOfLists": [{"name": "a"}]})],
     {"listOfLists": [{"name": "a", "value": ["b"]}]},
     {f"one/{A}": {'.listOfLists[name="a"]', '.listOfLists[name="a"].name'},
      f"two/{A}": {'.listOfLists[name="a"]', '.listOfLists[name="a"].name', '.listOfLists[name="a"].value[="b"]'}}),
    ("struct_unset_scalar_sole_owner",
     [("apply", "one", {"struct": {"name": "a", "scalarField": "a"}}), ("apply", "one", {"struct": {"name": "a"}})],
     {"struct": {"name": "a"}}, {f"one/{A}": {".struct.name"}}),
    ("struct_unset_scalar_shared_with_applier",
     [("apply", "one", {"struct": {"name": "a", "scalarField": "a"}}),
      ("apply", "two", {"struct": {"scalarField": "a"}}),
      ("apply", "one", {"struct": {"name": "a"}})],
     {"struct": {"name": "a", "scalarField": "a"}},
     {f"one/{A}": {".struct.name"}, f"two/{A}": {".struct.scalarField"}}),
    # kube's typed objects always hold their top-level struct, so an updater never owns `.struct` itself here.
    ("struct_unset_scalar_shared_with_updater",
     [("update", "updater", {"struct": {"name": "a", "scalarField": "a"}}),
      ("apply", "applier", {"struct": {"name": "a", "scalarField": "a"}}),
      ("apply", "applier", {"struct": {"name": "a"}})],
     {"struct": {"name": "a", "scalarField": "a"}},
     {f"updater/{U}": {".struct.name", ".struct.scalarField"}, f"applier/{A}": {".struct.name"}}),
    ("struct_updater_claims_field",
     [("apply", "applier", {"struct": {"name": "a", "scalarField": "a"}}),
      ("update", "updater", {"struct": {"name": "a", "scalarField": "b"}})],
     {"struct": {"name": "a", "scalarField": "b"}},
     {f"updater/{U}": {".struct.scalarField"}, f"applier/{A}": {".struct.name"}}),
    ("struct_unset_complex_sole_owner",
     [("apply", "one", {"struct": {"name": "a", "complexField": {"name": "b"}}}),
      ("apply", "one", {"struct": {"name": "a"}})],
     {"struct": {"name": "a"}}, {f"one/{A}": {".struct.name"}}),
    ("struct_unset_complex_shared_with_applier",
     [("apply", "one", {"struct": {"name": "a", "complexField": {"name": "b"}}}),
      ("apply", "two", {"struct": {"complexField": {"name": "b"}}}),
      ("apply", "one", {"struct": {"name": "a"}})],
     {"struct": {"name": "a", "complexField": {"name": "b"}}},
     {f"one/{A}": {".struct.name"}, f"two/{A}": {".struct.complexField.name"}}),
    ("set_items_merge_by_value",
     [("apply", "one", {"set": ["a", "b"]}), ("apply", "two", {"set": ["c"]}), ("apply", "one", {"set": ["a"]})],
     {"set": ["a", "c"]}, {f"one/{A}": {'.set[="a"]'}, f"two/{A}": {'.set[="c"]'}}),
    ("atomic_list_replaced_whole",
     [("apply", "one", {"atomicList": ["a", "b"]}), ("apply", "one", {"atomicList": ["c"]})],
     {"atomicList": ["c"]}, {f"one/{A}": {".atomicList"}}),
    ("atomic_map_replaced_whole",
     [("apply", "one", {"atomicMap": {"a": "1", "b": "2"}}), ("apply", "one", {"atomicMap": {"b": "3"}})],
     {"atomicMap": {"b": "3"}}, {f"one/{A}": {".atomicMap"}}),
    ("granular_map_entries_owned_one_by_one",
     [("apply", "one", {"labels": {"a": "1"}}), ("apply", "two", {"labels": {"b": "2"}}),
      ("apply", "one", {"labels": {}})],
     {"labels": {"b": "2"}}, {f"one/{A}": {".labels"}, f"two/{A}": {".labels.b"}}),
    ("nulls_in_a_configuration_are_ignored",
     [("apply", "one", {"string": "s", "numeric": None})], {"string": "s"}, {f"one/{A}": {".string"}}),
    ("list_order_follows_the_configuration_for_shared_items",
     [("update", "controller", {"list": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}),
      ("apply", "one", {"list": [{"name": "c"}, {"name": "a"}]})],
     {"list": [{"name": "b"}, {"name": "c"}, {"name": "a"}]},
     {f"controller/{U}": {'.list[name="a"]', '.list[name="a"].name', '.list[name="b"]', '.list[name="b"].name',
                          '.list[name="c"]', '.list[name="c"].name'},
      f"one/{A}": {'.list[name="a"]', '.list[name="a"].name', '.list[name="c"]', '.list[name="c"].name'}}),
]


@pytest.mark.parametrize(("ops", "obj", "owned"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_apply_sequences(ops: list[Any], obj: dict[str, Any], owned: dict[str, set[str]]) -> None:
    live, entries = run(ops)
    assert live == obj
    assert owners(entries) == owned


CONFLICTS = [
    ("list_value_changed_by_another_applier",
     [("apply", "one", {"list": [{"name": "a", "value": 0}]}), ("apply", "two", {"list": [{"name": "a", "value": 1}]})],
     [('conflict with "one"', '.list[name="a"].value')]),
    ("leaf_changed_by_an_updater",
     [("apply", "default", {"numeric": 1, "string": "s"}),
      ("update", "controller", {"numeric": 1, "string": "controller", "bool": True}),
      ("apply", "default", {"numeric": 2, "string": "user"})],
     [('conflict with "controller" using v1', ".string")]),
    ("atomic_list_is_one_field",
     [("apply", "one", {"atomicList": ["a"]}), ("apply", "two", {"atomicList": ["a", "b"]})],
     [('conflict with "one"', ".atomicList")]),
    ("two_managers_two_fields",
     [("apply", "one", {"numeric": 1}), ("apply", "two", {"string": "x"}),
      ("apply", "three", {"numeric": 2, "string": "y"})],
     [('conflict with "one"', ".numeric"), ('conflict with "two"', ".string")]),
]


@pytest.mark.parametrize(("ops", "expected"), [c[1:] for c in CONFLICTS], ids=[c[0] for c in CONFLICTS])
def test_apply_conflicts(ops: list[Any], expected: list[tuple[str, str]]) -> None:
    assert conflicts_of(ops) == expected


def test_conflict_message_has_kube_apiservers_shape() -> None:
    with pytest.raises(errors.Conflict) as one:
        run([("apply", "kubectl", {"numeric": 1}), ("apply", "hpa", {"numeric": 3})])
    assert one.value.code == 409
    assert one.value.message == 'Apply failed with 1 conflict: conflict with "kubectl": .numeric'
    with pytest.raises(errors.Conflict) as two:
        run([("apply", "one", {"numeric": 1, "string": "a"}), ("apply", "two", {"numeric": 2, "string": "b"})])
    assert two.value.message == 'Apply failed with 2 conflicts: conflicts with "one":\n- .numeric\n- .string'


def test_first_apply_to_an_untracked_object_meets_before_first_apply() -> None:
    live = {"numeric": 1, "string": "s"}
    with pytest.raises(errors.Conflict) as caught:
        apply.apply(live, {"numeric": 2}, entries=[], manager="kubectl", api_version="v1", subresource="",
                    force=False, now="t", types=TYPES)
    assert caught.value.details["causes"][0]["message"] == 'conflict with "before-first-apply" using v1'
    merged, entries = apply.apply(live, {"numeric": 1}, entries=[], manager="kubectl", api_version="v1",
                                  subresource="", force=False, now="t", types=TYPES)
    assert merged == live
    assert owners(entries) == {"before-first-apply/Update": {".numeric", ".string"}, "kubectl/Apply": {".numeric"}}


@pytest.mark.parametrize(("config", "field", "detail"), [
    ({"list": [{"value": 1}]}, "list", 'omits key field "name"'),
    ({"list": [{"name": "a"}, {"name": "a"}]}, "list", 'duplicate entries for key [name="a"]'),
    ({"set": [{"a": 1}]}, "set", "set items must be scalars"),
], ids=["item_without_its_key", "duplicate_key", "object_in_a_set"])
def test_bad_configuration_is_invalid_naming_the_field(config: dict[str, Any], field: str, detail: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        apply.apply({}, config, entries=[], manager="m", api_version="v1", subresource="", force=False, now="t",
                    types=TYPES)
    cause = caught.value.details["causes"][0]
    assert cause["field"] == field and detail in cause["message"]


def test_reapplying_the_same_configuration_changes_nothing() -> None:
    ops = [("apply", "one", {"list": [{"name": "a", "value": 1}], "labels": {"x": "y"}})]
    live, entries = run(ops)
    again, after = apply.apply(live, ops[0][2], entries=entries, manager="one", api_version="v1", subresource="",
                               force=False, now="later", types=TYPES)
    assert again == live and after == entries  # the time too: nothing changed


# --- built-in kinds ---------------------------------------------------------------------------------------------

DEPLOY = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "finalizers": ["x"]},
          "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": {
              "metadata": {"labels": {"app": "web"}},
              "spec": {"containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 80}],
                                       "env": [{"name": "A", "value": "1"}], "args": ["-v"]}]}}}}


def test_builtin_field_set_uses_strategic_merge_keys() -> None:
    flat = fieldsets.flatten(DEPLOY, fieldtypes.types_for("Deployment", None), status="exclude")
    printed = {fieldsets.path_string(p) for p in fieldsets.members(flat)}
    c = '.spec.template.spec.containers[name="app"]'
    assert printed == {'.metadata.finalizers[="x"]', ".spec.replicas", ".spec.selector",
                       ".spec.template.metadata.labels.app", c, f"{c}.name", f"{c}.image", f"{c}.args",
                       f'{c}.ports[containerPort=80,protocol="TCP"]', f'{c}.ports[containerPort=80,protocol="TCP"]'
                       ".containerPort", f'{c}.env[name="A"]', f'{c}.env[name="A"].name', f'{c}.env[name="A"].value'}


@pytest.mark.parametrize(("kind", "path", "expected"), [
    ("Pod", ("spec", "containers"), fieldtypes.ListType("map", ("name",))),
    ("Pod", ("spec", "containers", "ports"), fieldtypes.ListType("map", ("containerPort", "protocol"))),
    ("Service", ("spec", "ports"), fieldtypes.ListType("map", ("port", "protocol"))),
    ("Pod", ("spec", "tolerations"), fieldtypes.ATOMIC),
    ("ConfigMap", ("metadata", "finalizers"), fieldtypes.SET),
    ("Job", ("status", "conditions"), fieldtypes.ATOMIC),
    ("Pod", ("status", "conditions"), fieldtypes.ListType("map", ("type",))),
], ids=["containers", "container_ports", "service_ports", "tolerations_atomic", "finalizers_set",
        "job_conditions_atomic", "pod_conditions"])
def test_builtin_list_types(kind: str, path: tuple[str, ...], expected: fieldtypes.ListType) -> None:
    types: Any = fieldtypes.types_for(kind, None)
    for name in path:
        types = types.field(name)
    assert types.list_type() == expected


def test_crd_metadata_is_object_meta() -> None:
    types = fieldtypes.types_for("Job", {"type": "object", "properties": {"metadata": {"type": "object"}}})
    assert types.field("metadata").field("finalizers").list_type() == fieldtypes.SET


# --- FieldsV1 ---------------------------------------------------------------------------------------------------

def test_fieldsv1_round_trip_marks_members_with_children() -> None:
    paths = {("f:spec", "f:replicas"), ("f:spec", "f:list", 'k:{"name":"a"}'),
             ("f:spec", "f:list", 'k:{"name":"a"}', "f:name"), ("f:metadata", "f:finalizers", 'v:"x"')}
    tree = fieldsets.encode(paths)
    assert tree == {"f:metadata": {"f:finalizers": {'v:"x"': {}}},
                    "f:spec": {"f:list": {'k:{"name":"a"}': {".": {}, "f:name": {}}}, "f:replicas": {}}}
    assert fieldsets.decode(tree) == paths


def test_fieldsv1_decode_canonicalizes_keys_and_refuses_garbage() -> None:
    assert fieldsets.decode({'k:{"protocol": "TCP", "containerPort": 80}': {}}) == {
        ('k:{"containerPort":80,"protocol":"TCP"}',)}
    with pytest.raises(fieldsets.FieldSetError):
        fieldsets.decode({"spec": {}})


def test_managed_entries_round_trip_in_kube_order() -> None:
    raw = [{"manager": "kubectl-edit", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}},
           {"manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "time": "2026-01-02T00:00:00Z",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:b": {}}}}]
    assert apply.encode_managed(apply.decode_managed(raw)) == [raw[1], raw[0]]
    with pytest.raises(apply.ManagedFieldsError):
        apply.decode_managed([{"manager": "x", "operation": "Patch"}])


@pytest.mark.parametrize(("agent", "manager"), [
    ("kubectl/v1.32.0 (linux/amd64) kubernetes/abc", "kubectl"), ("lahar/0.1 (kubernetes-python)", "lahar"),
    ("", ""),
], ids=["kubectl", "lahar", "none"])
def test_manager_from_user_agent(agent: str, manager: str) -> None:
    assert apply.manager_from_user_agent(agent) == manager
