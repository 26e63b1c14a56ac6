"""Server-side apply through the store: create through apply, dry run, no-op re-apply, conflicts and force, pruning,
CRD list-map keys, status kept out of a main-resource apply, and managedFields on ordinary writes.

In-memory `kube.apiserver.store.Store` with ownership tracking on (as devcluster runs it); the HTTP side is in the e2e
tests.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from lahar.kube import errors, fieldtypes, ownership, resources
from lahar.kube.apiserver import store
from lahar.kube.resources import Registry, ResourceType

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
THINGS = ResourceType(group="example.com", version="v1", kind="Thing", plural="things", namespaced=True)
THING_SCHEMA = {"type": "object", "properties": {
    "metadata": {"type": "object"},
    "spec": {"type": "object", "properties": {
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "port"],
                  "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"},
                                                             "note": {"type": "string"}}}},
        "args": {"type": "array", "items": {"type": "string"}}}}}}


@pytest.fixture
def s() -> store.Store:
    st = store.Store(registry=Registry.of(resources.core()), clock=lambda: NOW, track_managed_fields=True)
    st.register_type(THINGS, THING_SCHEMA)
    return st


def rt(s: store.Store, group: str, plural: str) -> ResourceType:
    found = s.registry.get(group, "v1", plural)
    assert found is not None
    return found


def cm(data: dict[str, str], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", **meta}, "data": data}


def ssa(s: store.Store, resource: ResourceType, name: str, config: Any, manager: str = "kubectl", *,
        force: bool = False, dry_run: bool = False, subresource: str | None = None) -> tuple[dict[str, Any], bool]:
    req = store.Request(field_manager=manager, force=force, dry_run=dry_run)
    out = s.patch(resource, "default", name, config, patch_type="apply", subresource=subresource, req=req)
    return out, req.created


def managers(obj: dict[str, Any]) -> dict[str, Any]:
    return {f"{m['manager']}/{m['operation']}" + (f"/{m['subresource']}" if m.get("subresource") else ""):
            m["fieldsV1"] for m in obj["metadata"].get("managedFields") or []}


def test_apply_creates_then_reapply_is_a_no_op(s: store.Store) -> None:
    cms = rt(s, "", "configmaps")
    created, was_created = ssa(s, cms, "c", cm({"a": "1"}))
    assert was_created
    assert created["metadata"]["managedFields"] == [{
        "manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "time": "2026-01-02T03:04:05Z",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:a": {}}}}]
    again, was_created = ssa(s, cms, "c", cm({"a": "1"}))
    assert not was_created
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_dry_run_apply_stores_nothing(s: store.Store) -> None:
    cms = rt(s, "", "configmaps")
    out, _ = ssa(s, cms, "c", cm({"a": "1"}), dry_run=True)
    assert out["data"] == {"a": "1"}
    with pytest.raises(errors.NotFound):
        s.get(cms, "default", "c")
    live, _ = ssa(s, cms, "c", cm({"a": "1"}))
    ssa(s, cms, "c", cm({"a": "2"}), dry_run=True)
    assert s.get(cms, "default", "c") == live


def test_conflict_then_force_takes_ownership(s: store.Store) -> None:
    cms = rt(s, "", "configmaps")
    ssa(s, cms, "c", cm({"a": "1", "b": "1"}))
    with pytest.raises(errors.Conflict) as caught:
        ssa(s, cms, "c", cm({"a": "2"}), "other")
    assert caught.value.code == 409
    assert caught.value.message == 'Apply failed with 1 conflict: conflict with "kubectl": .data.a'
    assert caught.value.details["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "kubectl"',
                                                "field": ".data.a"}]
    out, _ = ssa(s, cms, "c", cm({"a": "2"}), "other", force=True)
    assert out["data"] == {"a": "2", "b": "1"}
    assert managers(out) == {"kubectl/Apply": {"f:data": {"f:b": {}}}, "other/Apply": {"f:data": {"f:a": {}}}}


def test_field_dropped_from_the_configuration_is_removed_unless_owned_elsewhere(s: store.Store) -> None:
    cms = rt(s, "", "configmaps")
    ssa(s, cms, "c", cm({"a": "1", "b": "1", "c": "1"}, labels={"x": "y"}))
    ssa(s, cms, "c", cm({"c": "1"}), "other")
    out, _ = ssa(s, cms, "c", cm({"a": "1"}))
    assert out["data"] == {"a": "1", "c": "1"}
    assert "labels" not in out["metadata"]


def test_ordinary_writes_are_tracked_as_update(s: store.Store) -> None:
    cms = rt(s, "", "configmaps")
    ssa(s, cms, "c", cm({"a": "1"}))
    out = s.patch(cms, "default", "c", {"data": {"a": "2", "z": "1"}}, patch_type="merge",
                  req=store.Request(field_manager="kubectl-edit"))
    assert managers(out) == {"kubectl-edit/Update": {"f:data": {"f:a": {}, "f:z": {}}}}
    with pytest.raises(errors.Conflict) as caught:
        ssa(s, cms, "c", cm({"a": "1"}))
    assert caught.value.message == ('Apply failed with 1 conflict: conflict with "kubectl-edit" using v1: .data.a')


def test_create_records_the_creator(s: store.Store) -> None:
    out = s.create(rt(s, "", "configmaps"), "default", cm({"a": "1"}), req=store.Request(field_manager="kubectl-create"))
    assert managers(out) == {"kubectl-create/Update": {"f:data": {"f:a": {}}}}


def test_untracked_store_carries_ownership_over(s: store.Store) -> None:
    plain = store.Store(registry=Registry.of(resources.core()), clock=lambda: NOW)
    cms = rt(plain, "", "configmaps")
    applied, _ = ssa(plain, cms, "c", cm({"a": "1"}))
    out = plain.patch(cms, "default", "c", {"data": {"b": "2"}}, patch_type="merge", req=store.Request())
    assert out["metadata"]["managedFields"] == applied["metadata"]["managedFields"]
    created = plain.create(cms, "default", {**cm({}), "metadata": {"name": "d"}}, req=store.Request())
    assert "managedFields" not in created["metadata"]


def test_client_may_reset_managed_fields(s: store.Store) -> None:
    cms = rt(s, "", "configmaps")
    ssa(s, cms, "c", cm({"a": "1"}))
    out = s.patch(cms, "default", "c", {"metadata": {"managedFields": [{}]}}, patch_type="merge",
                  req=store.Request(field_manager="x"))
    assert "managedFields" not in out["metadata"]


def test_crd_list_map_keys_come_from_the_schema(s: store.Store) -> None:
    def thing(ports: list[dict[str, Any]]) -> dict[str, Any]:
        return {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {"ports": ports}}

    ssa(s, THINGS, "t", thing([{"name": "http", "port": 80}]))
    out, _ = ssa(s, THINGS, "t", thing([{"name": "http", "port": 443, "note": "tls"}]), "other")
    assert out["spec"]["ports"] == [{"name": "http", "port": 80}, {"name": "http", "port": 443, "note": "tls"}]
    assert 'k:{"name":"http","port":443}' in managers(out)["other/Apply"]["f:spec"]["f:ports"]


def test_status_stays_out_of_a_main_resource_apply(s: store.Store) -> None:
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
              "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}},
                       "template": {"metadata": {"labels": {"app": "d"}},
                                    "spec": {"containers": [{"name": "app", "image": "nginx"}]}}},
              "status": {"replicas": 5}}
    out, _ = ssa(s, rt(s, "apps", "deployments"), "d", deploy)
    assert "status" not in out or out["status"] != {"replicas": 5}
    assert "f:status" not in managers(out)["kubectl/Apply"]
    assert managers(out)["kubectl/Apply"]["f:spec"]["f:selector"] == {}


def test_status_subresource_write_is_its_own_entry(s: store.Store) -> None:
    pods = rt(s, "", "pods")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "app", "image": "nginx"}]}}
    ssa(s, pods, "p", pod)
    out = s.patch(pods, "default", "p", {"status": {"message": "hi"}}, patch_type="merge", subresource="status",
                  req=store.Request(field_manager="kubelet"))
    assert managers(out)["kubelet/Update/status"] == {"f:status": {"f:message": {}}}


@pytest.mark.parametrize(("config", "manager", "force", "patch_type", "code", "text"), [
    (cm({"a": "1"}), None, False, "apply", 422, "fieldManager: Required value"),
    ({"data": {"a": "1"}}, "x", True, "merge", 422, "force: Forbidden"),
    (cm({"a": "1"}), "x" * 129, False, "apply", 422, "fieldManager: Too long"),
    ({**cm({}), "apiVersion": "v2"}, "x", False, "apply", 400, "Specified patch version: v2, expected: v1"),
    ({**cm({}), "kind": "Secret"}, "x", False, "apply", 400, "kind must be 'ConfigMap'"),
    (cm({}, managedFields=[]), "x", False, "apply", 400, "metadata.managedFields must be nil"),
    (cm({}, name="other"), "x", False, "apply", 400, "does not match the name on the URL"),
    ([1, 2], "x", False, "apply", 400, "must be an object"),
], ids=["no_field_manager", "force_without_apply", "long_field_manager", "wrong_api_version", "wrong_kind",
        "managed_fields_in_config", "other_name", "not_an_object"])
def test_bad_apply_requests_are_4xx_naming_the_field(s: store.Store, config: Any, manager: str | None, force: bool,
                                                     patch_type: str, code: int, text: str) -> None:
    cms = rt(s, "", "configmaps")
    s.create(cms, "default", cm({}), req=store.Request())
    with pytest.raises(errors.ApiError) as caught:
        s.patch(cms, "default", "c", config, patch_type=patch_type,
                req=store.Request(field_manager=manager, force=force))
    assert caught.value.code == code and text in caught.value.message


def test_resource_version_in_the_configuration_is_a_precondition(s: store.Store) -> None:
    cms = rt(s, "", "configmaps")
    live, _ = ssa(s, cms, "c", cm({"a": "1"}))
    with pytest.raises(errors.Conflict) as caught:
        ssa(s, cms, "c", cm({"a": "2"}, resourceVersion="1"))
    assert "the object has been modified" in caught.value.message
    out, _ = ssa(s, cms, "c", cm({"a": "2"}, resourceVersion=live["metadata"]["resourceVersion"]))
    assert out["data"] == {"a": "2"}


MF_APPLIED = [{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "time": "t0", "fieldsType": "FieldsV1",
               "fieldsV1": {"f:data": {"f:a": {}}}}]
MF_OTHER = [{"manager": "tool", "operation": "Update", "apiVersion": "v1", "time": "t0", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {"f:a": {}}}}]


@pytest.mark.parametrize(("supplied", "subresource", "track", "data", "expected"), [
    (ownership.ABSENT, None, True, {"a": "1"}, MF_APPLIED),
    (ownership.ABSENT, None, True, {"a": "2"}, [{**MF_APPLIED[0], "manager": "me", "operation": "Update",
                                                 "time": "now"}]),
    (ownership.ABSENT, None, False, {"a": "2"}, MF_APPLIED),
    ([{}], None, True, {"a": "1"}, None),
    (MF_OTHER, None, True, {"a": "1"}, MF_OTHER),
    (MF_OTHER, "status", True, {"a": "1"}, MF_APPLIED),
    ([{"operation": "Bogus"}], None, True, {"a": "1"}, MF_APPLIED),
], ids=["unchanged_write_keeps_owners", "changed_field_moves_to_the_writer", "untracked_carries_over",
        "client_resets", "client_sets_its_own", "subresource_cannot_set_them", "unreadable_ones_are_ignored"])
def test_managed_fields_after_a_write(supplied: Any, subresource: str | None, track: bool, data: dict[str, str],
                                      expected: Any) -> None:
    cur = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "managedFields": MF_APPLIED},
           "data": {"a": "1"}}
    new = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data}
    assert ownership.after_write(cur, new, supplied, manager="me", subresource=subresource, now="now",
                                 types=fieldtypes.types_for("ConfigMap", None), track=track) == expected
