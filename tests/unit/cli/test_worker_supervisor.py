"""`lahar worker`'s supervisor: its decisions as tables, and the shell on tiny Python children (no Redis, no Celery)."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

import pytest

from lahar import supervisor as sup
from lahar import up
from lahar.commands.controllers import worker_argv


@pytest.mark.parametrize(("failures", "want"), [(0, 0.0), (1, 1.0), (2, 2.0), (3, 4.0), (5, 16.0), (6, 30.0),
                                                 (40, 30.0)],
                         ids=["none", "first", "second", "third", "fifth", "capped", "long-capped"])
def test_backoff_1s_to_30s(failures: int, want: float) -> None:
    assert up.restart_delay(failures, base=sup.BASE_DELAY, cap=sup.MAX_DELAY) == want


@pytest.mark.parametrize(("failures", "ran_for", "want"), [(0, 0.5, 1), (3, 2.0, 4), (5, 29.9, 6), (5, 30.0, 1),
                                                           (7, 3600.0, 1)],
                         ids=["first-crash", "crash-loop", "just-short", "ran-a-while", "ran-an-hour"])
def test_failures_in_a_row_reset_after_a_stable_run(failures: int, ran_for: float, want: int) -> None:
    assert sup.next_failures(failures, ran_for, stable_after=30.0) == want


@pytest.mark.parametrize(("code", "stopping", "want"), [
    (1, False, True), (-signal.SIGKILL, False, True), (-signal.SIGSEGV, False, True), (70, False, True),
    (0, False, False), (2, False, False), (64, False, False), (78, False, False),
    (1, True, False), (-signal.SIGKILL, True, False),
], ids=["unrecoverable-error", "sigkill", "sigsegv", "software-error", "exit-0", "usage", "ex-usage", "ex-config",
        "stopping", "stopping-killed"])
def test_which_exits_are_restarted(code: int, stopping: bool, want: bool) -> None:
    assert sup.should_restart(code, stopping=stopping) is want


@pytest.mark.parametrize(("code", "want"), [(1, "exit code 1"), (0, "exit code 0"), (-9, "signal SIGKILL"),
                                            (-15, "signal SIGTERM"), (-200, "signal 200")],
                         ids=["one", "zero", "sigkill", "sigterm", "unknown-signal"])
def test_describe_exit(code: int, want: str) -> None:
    assert sup.describe_exit(code) == want


@pytest.mark.parametrize(("received", "want"), [(signal.SIGINT, signal.SIGINT), (signal.SIGTERM, signal.SIGTERM),
                                                (signal.SIGHUP, signal.SIGTERM)], ids=["int", "term", "hup"])
def test_forwarded_signal(received: int, want: int) -> None:
    assert sup.forwarded_signal(received) == want


@pytest.mark.parametrize(("kwargs", "tail"), [
    ({}, ["-Q", "reconcile", "-P", "prefork"]),
    ({"concurrency": 2, "hostname": "w@%h", "loglevel": "DEBUG", "queues": "reconcile,scheduling", "pool": "solo",
      "log_format": "json"},
     ["-Q", "reconcile,scheduling", "-P", "solo", "-c", "2", "--hostname", "w@%h", "--log-level", "DEBUG",
      "--log-format", "json"]),
    ({"metrics_port": 9090}, ["-Q", "reconcile", "-P", "prefork", "--metrics-port", "9090"]),
], ids=["defaults", "every-option", "metrics-port"])
def test_the_child_is_lahar_worker_unsupervised(kwargs: dict, tail: list[str]) -> None:
    assert worker_argv("py", **kwargs) == ["py", "-m", "lahar.cli", "worker", "--no-supervise", *tail]


def test_lahar_up_runs_its_workers_unsupervised() -> None:
    specs = up.child_specs(python="py", webhook_port=1, certs_dir=Path("c"), flower_port=2, workers=2)
    workers = [s for s in specs if s.name.startswith("worker")]
    assert len(workers) == 2 and all("--no-supervise" in s.argv for s in workers)


# -- the shell, on tiny children -----------------------------------------------------------------------------------


def _counting_child(tmp: Path, script: str) -> list[str]:
    """A child that appends a line to `runs` each time it starts, then runs `script` (which sees `n`, the run)."""
    runs = tmp / "runs"
    code = (f"import pathlib, sys, time\np = pathlib.Path({str(runs)!r})\n"
            "n = len(p.read_text().splitlines()) + 1 if p.exists() else 1\n"
            "p.open('a').write('run\\n')\n" + script)
    return [sys.executable, "-c", code]


def _stop_when(s: sup.Supervisor, cond, sig: int = signal.SIGTERM) -> threading.Thread:  # noqa: ANN001
    def loop() -> None:
        while not cond():
            threading.Event().wait(0.02)
        s._on_signal(sig, None)

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t


def test_crashes_are_restarted_with_backoff_then_a_stop_is_clean(tmp_path: Path) -> None:
    argv = _counting_child(tmp_path, "sys.exit(3) if n <= 2 else time.sleep(60)")
    s = sup.Supervisor(argv, base_delay=0.05, max_delay=0.2, stop_grace=5.0)
    _stop_when(s, lambda: s.restarts == 2 and s._run is not None and (tmp_path / "runs").exists()
               and len((tmp_path / "runs").read_text().splitlines()) == 3)
    assert s.run() == 0
    assert s.restarts == 2 and s.failures == 2


@pytest.mark.parametrize(("script", "want"), [("sys.exit(0)", 0), ("sys.exit(2)", 2)], ids=["exit-0", "usage-error"])
def test_an_expected_exit_ends_the_supervisor(tmp_path: Path, script: str, want: int) -> None:
    s = sup.Supervisor(_counting_child(tmp_path, script), base_delay=0.05)
    assert s.run() == want
    assert s.restarts == 0


def test_a_child_that_ignores_the_stop_is_killed_after_the_grace(tmp_path: Path) -> None:
    script = "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\np.open('a').write('armed\\n')\ntime.sleep(60)"
    s = sup.Supervisor(_counting_child(tmp_path, script), stop_grace=0.3)
    _stop_when(s, lambda: "armed" in ((tmp_path / "runs").read_text() if (tmp_path / "runs").exists() else ""))
    assert s.run() == 1
    assert s._run is not None and s._run.proc.returncode == -signal.SIGKILL
