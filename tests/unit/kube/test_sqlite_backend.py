"""SQLiteBackend: state and event log survive close/reopen and a SIGKILL after acknowledged writes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lahar.devcluster.storage import SQLiteBackend
from lahar.kube import resources
from lahar.kube.apiserver import store

ROOT = Path(__file__).resolve().parents[3]


def test_write_close_reopen(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    be = SQLiteBackend(path)
    be.write(1, "ADDED", "/configmaps/default/a", {"metadata": {"name": "a", "resourceVersion": "1"}})
    be.write(2, "ADDED", "/configmaps/default/b", {"metadata": {"name": "b", "resourceVersion": "2"}})
    be.write_many([(3, "MODIFIED", "/configmaps/default/a", {"metadata": {"name": "a", "resourceVersion": "3"}}),
                   (4, "DELETED", "/configmaps/default/b", {"metadata": {"name": "b", "resourceVersion": "4"}})])
    be.close()
    be.close()  # idempotent
    again = SQLiteBackend(path)
    rv, objects, events = again.load()
    assert rv == 4
    assert objects == {"/configmaps/default/a": {"metadata": {"name": "a", "resourceVersion": "3"}}}
    assert [(e[0], e[1], e[2]) for e in events] == [(1, "ADDED", "/configmaps/default/a"),
                                                    (2, "ADDED", "/configmaps/default/b"),
                                                    (3, "MODIFIED", "/configmaps/default/a"),
                                                    (4, "DELETED", "/configmaps/default/b")]
    again.trim(3)
    rv, _, events = again.load()
    assert rv == 4 and [e[0] for e in events] == [3, 4]
    again.trim(10)
    assert again.load()[0] == 4  # the rv survives an empty event log
    again.close()


def test_journal_mode_is_wal(tmp_path: Path) -> None:
    be = SQLiteBackend(tmp_path / "s.db")
    assert be._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert be._db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    be.close()


def test_store_restarts_from_sqlite(tmp_path: Path) -> None:
    reg = resources.Registry.of(resources.core())
    cm = reg.get("", "v1", "configmaps")
    s1 = store.Store(registry=reg, backend=SQLiteBackend(tmp_path / "s.db"))
    s1.create(cm, "default", {"metadata": {"name": "a"}, "data": {"k": "v"}})
    mark = s1.resource_version
    s1.create(cm, "default", {"metadata": {"name": "b"}})
    s1.patch(cm, "default", "a", {"data": {"k": "w"}}, patch_type="merge")
    before = s1.list(cm)
    s1.close()
    s2 = store.Store(registry=resources.Registry.of(resources.core()), backend=SQLiteBackend(tmp_path / "s.db"))
    assert s2.list(cm) == before
    w = s2.watch(cm, "default", resource_version=mark)
    events = []
    while (e := w.next_event(0)) is not None:
        events.append((e["type"], e["object"]["metadata"]["name"]))
    assert events == [("ADDED", "b"), ("MODIFIED", "a")]
    s2.close()


CHILD = textwrap.dedent("""
    import sys
    from lahar.devcluster.storage import SQLiteBackend
    from lahar.kube import resources
    from lahar.kube.apiserver import store
    reg = resources.Registry.of(resources.core())
    cm = reg.get("", "v1", "configmaps")
    s = store.Store(registry=reg, backend=SQLiteBackend(sys.argv[1]))
    i = 0
    while True:
        s.create(cm, "default", {"metadata": {"name": f"c{i}"}})
        print(f"c{i}", s.resource_version, flush=True)
        i += 1
""")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_loses_no_acknowledged_write(tmp_path: Path) -> None:
    path = tmp_path / "killed.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, env=env, text=True)
    acked: list[tuple[str, str]] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            name, rv = line.split()
            acked.append((name, rv))
            if len(acked) >= 200:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
    be = SQLiteBackend(path)
    rv, objects, events = be.load()
    be.close()
    names = {o["metadata"]["name"] for o in objects.values()}
    assert {name for name, _ in acked} <= names
    assert rv >= int(acked[-1][1])
    assert {int(r) for _, r in acked} <= {e[0] for e in events}
