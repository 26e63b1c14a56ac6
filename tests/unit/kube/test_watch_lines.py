"""`StoreWatch.next_line`: the watch line devcluster streams, encoded from the stored object once for every
watcher, is the JSON of what `next_event` gives (a copy with the served apiVersion and kind), event for event."""

from __future__ import annotations

import orjson

from lahar.kube.apiserver.memory import MemoryClient


def _pod(name: str, labels: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def test_next_line_is_next_event_encoded() -> None:
    client = MemoryClient()
    store = client.store
    pods = client.registry.get("", "v1", "pods")
    by_event = store.watch(pods, None, allow_bookmarks=True)
    by_line = store.watch(pods, None, allow_bookmarks=True)
    selected_events = store.watch(pods, None, label_selector="app=a", allow_bookmarks=False)
    selected_lines = store.watch(pods, None, label_selector="app=a", allow_bookmarks=False)
    client.create(pods, _pod("p1", {"app": "a"}))
    client.create(pods, _pod("p2", {"app": "b"}))
    client.patch(pods, "p1", {"metadata": {"labels": {"app": "b"}}}, namespace="default")  # leaves the selection
    client.patch(pods, "p2", {"status": {"phase": "Running"}}, namespace="default", subresource="status")
    client.delete(pods, "p2", namespace="default")
    by_event.bookmark()
    by_line.bookmark()
    for events, lines, n in ((by_event, by_line, 6), (selected_events, selected_lines, 2)):
        got_events = [events.next_event(0) for _ in range(n)]
        got_lines = [lines.next_line(0) for _ in range(n)]
        assert events.next_event(0) is None and lines.next_line(0) is None
        assert all(line.endswith(b"\n") and line.count(b"\n") == 1 for line in got_lines)
        assert [orjson.loads(line) for line in got_lines] == got_events


def test_a_line_is_shared_by_the_watchers_of_one_type() -> None:
    client = MemoryClient()
    pods = client.registry.get("", "v1", "pods")
    first = client.store.watch(pods, None, allow_bookmarks=False)
    second = client.store.watch(pods, None, allow_bookmarks=False)
    client.create(pods, _pod("p1", {}))
    assert first.next_line(0) is second.next_line(0)


def test_a_read_only_watch_gives_the_stored_objects_and_next_event_copies() -> None:
    """`MemoryClient.watch(read_only=True)` (devcluster's workload controllers): the same events as a copying
    watch, each object the stored one itself; `peek_all` lists the stored objects without a copy."""
    client = MemoryClient()
    pods = client.registry.get("", "v1", "pods")
    copying = client.watch(pods, allow_bookmarks=False)
    viewing = client.watch(pods, allow_bookmarks=False, read_only=True)
    client.create(pods, _pod("p1", {"app": "a"}))
    client.patch(pods, "p1", {"metadata": {"labels": {"app": "b"}}}, namespace="default")
    client.delete(pods, "p1", namespace="default")
    copies = [copying.next_event(0) for _ in range(3)]
    views = [viewing.next_event(0) for _ in range(3)]
    assert views == copies
    assert [e["type"] for e in views] == ["ADDED", "MODIFIED", "DELETED"]
    client.create(pods, _pod("p2", {"app": "c"}))
    view = viewing.next_event(0)["object"]
    stored = client.store.peek(pods, "default", "p2")
    assert view is stored and copying.next_event(0)["object"] is not stored
    assert client.peek_all(pods) == [stored] and client.peek_all(pods)[0] is stored
