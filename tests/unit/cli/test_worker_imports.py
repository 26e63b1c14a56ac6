"""The Celery app module (`lahar.worker`) leaves the scheduler out: reconcile workers, dispatch, beat and Flower
import it and start about a second sooner; only a process that consumes queue `scheduling` defines the session."""

from __future__ import annotations

import subprocess
import sys


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_the_celery_app_does_not_import_the_scheduler() -> None:
    out = _run("import sys, lahar.worker, lahar.controllers.reconcilers\n"
               "print(sorted(m for m in sys.modules if m.startswith('lahar.scheduler')))")
    assert out == "[]"


def test_beat_ticks_the_session_without_the_task_defined() -> None:
    out = _run("import lahar.worker as w\n"
               "e = w.app.conf.beat_schedule['scheduler.session']\n"
               "print(e['task'], e['options']['queue'], 'scheduler.session' in w.app.tasks)")
    assert out == "scheduler.session scheduling False"


def test_a_scheduling_consumer_defines_the_session_task_once() -> None:
    out = _run("import lahar.worker as w\n"
               "w.register_session_task(); w.register_session_task()\n"
               "print('scheduler.session' in w.app.tasks, w.app.tasks['scheduler.session'].ignore_result)")
    assert out == "True True"
