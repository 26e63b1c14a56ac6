"""The store's LIST indexes: label and field equality indexes and ordered keys per (group, plural, namespace).

A LIST through an index must return exactly what a scan of every object with the full selector returns, in key order,
after any sequence of writes; tables pin the selector shapes that use an index, Hypothesis the invariant.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lahar.kube import errors, resources, selectors
from lahar.kube.apiserver import indexes, store
from lahar.kube.resources import Registry

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
NAMESPACES = ("default", "a", "a-b", "b")  # keys `/pods/a-b/…` sort before `/pods/a/…` ("-" < "/"), as before


def new_store(**kw: Any) -> store.Store:
    return store.Store(registry=Registry.of([*resources.core(), *resources.volcano()]), clock=lambda: NOW, **kw)


@pytest.fixture
def s() -> store.Store:
    st_ = new_store()
    for ns in NAMESPACES:
        if ns != "default":
            st_.create(NS, None, {"metadata": {"name": ns}})
    yield st_
    st_.close()


REG = Registry.of([*resources.core(), *resources.volcano()])
PODS = REG.get("", "v1", "pods")
NS = REG.get("", "v1", "namespaces")
EVENTS = REG.get("", "v1", "events")
NODES = REG.get("", "v1", "nodes")
PODGROUPS = REG.get("scheduling.volcano.sh", "v1beta1", "podgroups")


def pod(name: str, labels: dict[str, str] | None = None, node: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox:1"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def scan(s: store.Store, rt: Any, namespace: str | None, label_selector: str | None = None,
         field_selector: str | None = None) -> list[tuple[str, str]]:
    """The reference answer: every stored object of the type, sorted by storage key, filtered by the full matcher."""
    allowed = s._selectable_fields(rt)
    fields = selectors.parse_fields(field_selector)
    mapped = selectors.FieldSelector(tuple(selectors.FieldRequirement(allowed[r.path], r.op, r.value)
                                           for r in fields.requirements))
    labels = selectors.parse_labels(label_selector)
    out = []
    for _key, obj in sorted(s._by_type.get((rt.group, rt.plural), {}).items()):
        meta = obj["metadata"]
        if rt.namespaced and namespace and meta.get("namespace") != namespace:
            continue
        if labels.matches_object(obj) and mapped.matches(obj):
            out.append((meta.get("namespace", ""), meta["name"]))
    return out


def listed(s: store.Store, rt: Any, namespace: str | None, label_selector: str | None = None,
           field_selector: str | None = None) -> list[tuple[str, str]]:
    items = s.list(rt, namespace, label_selector=label_selector, field_selector=field_selector)["items"]
    return [(o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in items]


def _seed(s: store.Store) -> None:
    rows = [("default", "p1", {"app": "web", "tier": "fe"}, "n1"), ("default", "p2", {"app": "web"}, None),
            ("default", "p3", {"app": "db", "tier": "be"}, "n2"), ("a", "p1", {"app": "web"}, "n1"),
            ("a-b", "p0", {"app": "web", "tier": ""}, None), ("b", "q", {}, "n1"), ("b", "r", None, None)]
    for ns, name, labels, node in rows:
        s.create(PODS, ns, pod(name, labels))
        if node:
            s.bind(ns, name, {"target": {"name": node}})
    running = s.get(PODS, "default", "p1")
    running["status"]["phase"] = "Running"
    s.update(PODS, "default", "p1", running, subresource="status")


LIST_CASES = [
    # id, namespace, label selector, field selector, expected (namespace, name)s
    ("label-eq", "default", "app=web", None, [("default", "p1"), ("default", "p2")]),
    ("label-eq-all-namespaces-key-order", None, "app=web", None,
     [("a-b", "p0"), ("a", "p1"), ("default", "p1"), ("default", "p2")]),
    ("label-double-eq", None, "app==db", None, [("default", "p3")]),
    ("label-in", "default", "app in (db,web)", None, [("default", "p1"), ("default", "p2"), ("default", "p3")]),
    ("label-eq-empty-value", None, "tier=", None, [("a-b", "p0")]),
    ("label-eq-and-notin", None, "app=web,tier notin (fe)", None, [("a-b", "p0"), ("a", "p1"), ("default", "p2")]),
    ("label-eq-and-exists", None, "app=web,tier", None, [("a-b", "p0"), ("default", "p1")]),
    ("label-eq-no-hit", None, "app=nope", None, []),
    ("label-unknown-key", "default", "zone=x", None, []),
    ("only-unindexed-terms", "b", "!app", None, [("b", "q"), ("b", "r")]),
    ("field-node", None, None, "spec.nodeName=n1", [("a", "p1"), ("b", "q"), ("default", "p1")]),
    ("field-node-empty-is-unbound", None, None, "spec.nodeName=",
     [("a-b", "p0"), ("b", "r"), ("default", "p2")]),
    ("field-node-in-namespace", "default", None, "spec.nodeName=n1", [("default", "p1")]),
    ("field-node-not-equal-scans", "default", None, "spec.nodeName!=n1", [("default", "p2"), ("default", "p3")]),
    ("field-phase", None, None, "status.phase=Running", [("default", "p1")]),
    ("field-name-every-namespace", None, None, "metadata.name=p1", [("a", "p1"), ("default", "p1")]),
    ("field-name-in-namespace", "a", None, "metadata.name=p1", [("a", "p1")]),
    ("field-name-missing", "a", None, "metadata.name=zz", []),
    ("field-namespace", None, None, "metadata.namespace=a-b", [("a-b", "p0")]),
    ("field-namespace-conflicts-with-path", "a", None, "metadata.namespace=b", []),
    ("field-namespace-and-name", None, None, "metadata.namespace=default,metadata.name=p3", [("default", "p3")]),
    ("label-and-field", None, "app=web", "spec.nodeName=n1", [("a", "p1"), ("default", "p1")]),
    ("label-and-field-double-eq", None, "app=web", "spec.nodeName==n1", [("a", "p1"), ("default", "p1")]),
    ("nothing-selected", "default", None, None, [("default", "p1"), ("default", "p2"), ("default", "p3")]),
]


@pytest.mark.parametrize(("namespace", "label_selector", "field_selector", "want"), [c[1:] for c in LIST_CASES],
                         ids=[c[0] for c in LIST_CASES])
def test_list_through_indexes(s: store.Store, namespace: str | None, label_selector: str | None,
                              field_selector: str | None, want: list[tuple[str, str]]) -> None:
    _seed(s)
    assert listed(s, PODS, namespace, label_selector, field_selector) == want
    assert want == scan(s, PODS, namespace, label_selector, field_selector)


def test_index_follows_label_changes_and_deletes(s: store.Store) -> None:
    s.create(PODS, "default", pod("p", {"app": "web", "tier": "fe"}))
    s.patch(PODS, "default", "p", {"metadata": {"labels": {"app": "db", "tier": None}}}, patch_type="merge")
    assert listed(s, PODS, "default", "app=web") == []
    assert listed(s, PODS, "default", "tier=fe") == []
    assert listed(s, PODS, "default", "app=db") == [("default", "p")]
    s.bind("default", "p", {"target": {"name": "n1"}})
    assert listed(s, PODS, None, field_selector="spec.nodeName=") == []
    assert listed(s, PODS, None, field_selector="spec.nodeName=n1") == [("default", "p")]
    s.delete(PODS, "default", "p", grace_period_seconds=0)
    assert listed(s, PODS, None, "app=db") == [] and listed(s, PODS, None, field_selector="spec.nodeName=n1") == []


def test_deleting_everything_leaves_no_index_entries(s: store.Store) -> None:
    _seed(s)
    for ns, name in listed(s, PODS, None):
        s.delete(PODS, ns, name, grace_period_seconds=0)
    assert s._buckets.get(("", "pods")) == {} and len(s._all_keys[("", "pods")]) == 0
    s.create(PODS, "default", pod("again", {"app": "web"}))
    assert listed(s, PODS, None, "app=web") == [("default", "again")]


def test_namespace_deletion_unindexes_its_objects(s: store.Store) -> None:
    _seed(s)
    s.delete(NS, None, "a-b")
    assert listed(s, PODS, None, "app=web") == [("a", "p1"), ("default", "p1"), ("default", "p2")]
    assert listed(s, PODS, "a-b") == []


def test_labels_that_are_not_strings_are_refused_like_kube() -> None:
    s = new_store()
    with pytest.raises(errors.BadRequest, match=r"metadata\.labels\[n\]"):
        s.create(PODS, "default", pod("odd", {"n": 1, "ok": "x"}))  # type: ignore[dict-item]  # garbage in
    assert listed(s, PODS, "default", "ok=x") == []
    s.create(PODS, "default", pod("odd", {"n": "1", "ok": "x"}))
    assert listed(s, PODS, "default", "n=1") == [("default", "odd")]
    s.close()


def test_cluster_scoped_and_custom_types(s: store.Store) -> None:
    for name, zone in [("n2", "z1"), ("n1", "z1"), ("n3", "z2")]:
        s.create(NODES, None, {"metadata": {"name": name, "labels": {"zone": zone}}})
    assert listed(s, NODES, None, "zone=z1") == [("", "n1"), ("", "n2")]
    assert listed(s, NODES, "ignored-for-cluster-scoped", "zone in (z2)") == [("", "n3")]
    assert listed(s, NODES, None, field_selector="metadata.name=n3") == [("", "n3")]
    s.create(PODGROUPS, "default", {"metadata": {"name": "pg", "labels": {"volcano.sh/job-name": "j"}},
                                    "spec": {"minMember": 1}})
    assert listed(s, PODGROUPS, "default", "volcano.sh/job-name=j") == [("default", "pg")]


def test_event_involved_object_index(s: store.Store) -> None:
    for i, (kind, name) in enumerate([("Pod", "p1"), ("Job", "j"), ("Pod", "p1"), ("Pod", "p2")]):
        s.create(EVENTS, "default", {"metadata": {"name": f"e{i}"}, "reason": "R",
                                     "involvedObject": {"kind": kind, "name": name, "namespace": "default"}})
    assert listed(s, EVENTS, "default", field_selector="involvedObject.name=p1") == [("default", "e0"),
                                                                                      ("default", "e2")]
    assert listed(s, EVENTS, None, field_selector="involvedObject.name=p1,involvedObject.kind=Job") == []


def test_bad_selectors_still_fail(s: store.Store) -> None:
    with pytest.raises(errors.BadRequest):
        s.list(PODS, label_selector="app in x")
    with pytest.raises(errors.BadRequest, match="field label not supported: spec.hostname"):
        s.list(PODS, field_selector="spec.hostname=x")


def test_watch_from_scratch_lists_in_key_order(s: store.Store) -> None:
    for ns in ("a-b", "a", "default"):
        for name in ("z", "b"):
            s.create(PODS, ns, pod(name))
    w = s.watch(PODS, None)
    seen = []
    while (e := w.next_event(0)) is not None:
        seen.append((e["object"]["metadata"]["namespace"], e["object"]["metadata"]["name"]))
    w.stop()
    assert seen == [("a-b", "b"), ("a-b", "z"), ("a", "b"), ("a", "z"), ("default", "b"), ("default", "z")]
    w = s.watch(PODS, "a-b")
    assert [w.next_event(0)["object"]["metadata"]["name"] for _ in range(2)] == ["b", "z"]
    assert w.next_event(0) is None
    w.stop()


class _Backend:
    def __init__(self) -> None:
        self.objects: dict[str, dict] = {}
        self.rv = 0

    def load(self):  # noqa: ANN201 - the Backend protocol
        return self.rv, dict(self.objects), []

    def write(self, rv, type, key, obj) -> None:  # noqa: ANN001, A002
        self.rv = rv
        if type == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj

    def trim(self, before_rv) -> None:  # noqa: ANN001
        pass

    def close(self) -> None:
        pass


def test_indexes_are_rebuilt_on_load() -> None:
    be = _Backend()
    s1 = new_store(backend=be)
    for name in ("c", "a", "b"):
        s1.create(PODS, "default", pod(name, {"app": "web" if name != "b" else "db"}))
    s1.bind("default", "a", {"target": {"name": "n1"}})
    s1.close()
    s2 = new_store(backend=be)
    assert listed(s2, PODS, "default") == [("default", "a"), ("default", "b"), ("default", "c")]
    assert listed(s2, PODS, None, "app=web") == [("default", "a"), ("default", "c")]
    assert listed(s2, PODS, None, field_selector="spec.nodeName=n1") == [("default", "a")]
    s2.create(PODS, "default", pod("0", {"app": "web"}))
    assert listed(s2, PODS, "default", "app=web") == [("default", "0"), ("default", "a"), ("default", "c")]
    s2.close()


def test_list_copies_do_not_alias_the_store(s: store.Store) -> None:
    s.create(PODS, "default", pod("p", {"app": "web"}))
    s.list(PODS, "default", label_selector="app=web")["items"][0]["metadata"]["labels"]["app"] = "changed"
    assert listed(s, PODS, "default", "app=web") == [("default", "p")]


# --- Hypothesis: after any writes, every selector through the indexes == a scan ----------------------------------

_NAMES = ("p0", "p1", "p2", "q")
_VALUES = ("a", "b", "")
_OPS = st.lists(st.one_of(
    st.tuples(st.just("create"), st.sampled_from(NAMESPACES), st.sampled_from(_NAMES),
              st.dictionaries(st.sampled_from(("app", "tier")), st.sampled_from(_VALUES), max_size=2)),
    st.tuples(st.just("label"), st.sampled_from(NAMESPACES), st.sampled_from(_NAMES),
              st.dictionaries(st.sampled_from(("app", "tier")), st.sampled_from((*_VALUES, None)), max_size=2)),
    st.tuples(st.just("bind"), st.sampled_from(NAMESPACES), st.sampled_from(_NAMES), st.sampled_from(("n1", "n2"))),
    st.tuples(st.just("phase"), st.sampled_from(NAMESPACES), st.sampled_from(_NAMES),
              st.sampled_from(("Running", "Succeeded"))),
    st.tuples(st.just("delete"), st.sampled_from(NAMESPACES), st.sampled_from(_NAMES), st.none()),
), max_size=30)
_SELECTORS = [
    (None, None), ("app=a", None), ("app==b", None), ("app=", None), ("app in (a,b)", None), ("app notin (a)", None),
    ("app", None), ("!tier", None), ("app=a,tier=b", None), ("app in (a,),tier!=a", None),
    (None, "spec.nodeName=n1"), (None, "spec.nodeName="), (None, "spec.nodeName!=n2"), (None, "metadata.name=p1"),
    (None, "metadata.namespace=a"), (None, "status.phase=Running"), ("app=a", "spec.nodeName=n1"),
    ("tier in (b)", "metadata.name=q,metadata.namespace=b"),
]


def assert_indexes_are_exact(s: store.Store, rt: Any) -> None:
    """No stale or missing entries: the buckets equal indexes built from scratch over the stored objects."""
    gp = (rt.group, rt.plural)
    want: dict[str, tuple[set[str], dict, dict]] = {}
    for key, obj in s._by_type.get(gp, {}).items():
        keys, labels, fields = want.setdefault(key.split("/")[2], (set(), {}, {}))
        keys.add(key)
        for k, v in ((obj["metadata"].get("labels")) or {}).items():
            labels.setdefault(k, {}).setdefault(v, set()).add(key)
        for path in indexes.INDEXED_FIELDS.get(gp, ()):
            fields.setdefault(path, {}).setdefault(selectors.field_value(obj, path), set()).add(key)
    have = {ns: (set(b.keys.ordered()), b.labels, {p: v for p, v in b.fields.items() if v})
            for ns, b in s._buckets.get(gp, {}).items()}
    assert have == want
    every = s._all_keys.get(gp)
    assert (every.ordered() if every is not None else []) == sorted(s._by_type.get(gp, {}))


def _run(s: store.Store, op: str, ns: str, name: str, arg: Any) -> None:
    try:
        if op == "create":
            s.create(PODS, ns, pod(name, arg))
        elif op == "label":
            s.patch(PODS, ns, name, {"metadata": {"labels": arg}}, patch_type="merge")
        elif op == "bind":
            s.bind(ns, name, {"target": {"name": arg}})
        elif op == "phase":
            s.patch(PODS, ns, name, {"status": {"phase": arg}}, patch_type="merge", subresource="status")
        else:
            s.delete(PODS, ns, name, grace_period_seconds=0)
    except (errors.NotFound, errors.AlreadyExists, errors.Conflict):
        pass


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_indexed_lists_equal_a_scan(s: store.Store, ops: list[tuple[str, str, str, Any]]) -> None:
    for ns, name in listed(s, PODS, None):  # the fixture's store is shared by the examples: start empty
        s.delete(PODS, ns, name, grace_period_seconds=0)
    for op in ops:
        _run(s, op[0], op[1], op[2], op[3])
    assert_indexes_are_exact(s, PODS)
    for label_selector, field_selector in _SELECTORS:
        for namespace in (None, "a", "a-b"):
            assert listed(s, PODS, namespace, label_selector, field_selector) == \
                scan(s, PODS, namespace, label_selector, field_selector), (namespace, label_selector, field_selector)
