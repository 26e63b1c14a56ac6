"""`lahar worker`'s supervisor: the Celery worker runs as a child process, started again (with backoff) when it
exits on its own, stopped cleanly when `lahar worker` is asked to stop.

Sits between the `lahar worker` command (`lahar.commands.controllers`) and the Celery worker it runs (`lahar worker
--no-supervise`). Why: a Celery worker can exit when Redis restarts under it (docs/troubleshooting.md, "The worker
exits when Redis restarts"); `lahar up` and a Kubernetes Deployment start it again, a hand-run `lahar worker` does
the same itself. Decisions are pure functions over plain data (`next_failures`, `should_restart`, `describe_exit`,
`restart_delay` for the backoff, shared with `lahar up`); `Supervisor` is the thin shell that spawns, waits and
signals; `kill_group` is `lahar up`'s too.

The child runs in its own process group (same session), so a terminal's Ctrl-C reaches only the supervisor, which
forwards it once; after the child's main process exits, whatever is left in its group (prefork pool processes of a
worker that was SIGKILLed) is killed. On Linux the child also gets SIGTERM should the supervisor itself die.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from lahar.kube import backoff

__all__ = [
    "BASE_DELAY",
    "MAX_DELAY",
    "NO_RESTART_CODES",
    "STABLE_AFTER",
    "STOP_GRACE",
    "Supervisor",
    "describe_exit",
    "forwarded_signal",
    "kill_group",
    "next_failures",
    "restart_delay",
    "should_restart",
]

log = logging.getLogger("lahar.worker.supervisor")

BASE_DELAY, MAX_DELAY = 1.0, 30.0  # backoff 1 s, 2 s, 4 s ... 30 s
STOP_GRACE = 25.0  # a stop waits this long for Celery's warm shutdown, then kills (under Kubernetes' default 30 s)
# usage/configuration errors (click's usage error, EX_USAGE, EX_CONFIG): starting again cannot help
NO_RESTART_CODES = frozenset({2, 64, 78})


STABLE_AFTER = 30.0  # a child that ran this long has its failure count reset


# -- pure decisions ----------------------------------------------------------------------------------------------


def restart_delay(failures: int, *, base: float = 0.5, cap: float = 30.0) -> float:
    """Seconds to wait before restarting a child that failed `failures` times in a row (0 → at once)."""
    if failures <= 0:
        return 0.0
    # no jitter: one child per supervisor, and `lahar up` shows the exact restart time
    return backoff.delay(failures - 1, base=base, cap=cap, jitter="none")


def next_failures(failures: int, ran_for: float, *, stable_after: float = STABLE_AFTER) -> int:
    """Failures in a row after an exit: a child that ran `stable_after` seconds starts the count again."""
    return 1 if ran_for >= stable_after else failures + 1


def should_restart(returncode: int, *, stopping: bool) -> bool:
    """Whether an exit is unexpected, so the child is started again.

    Not when a stop was asked for; not after exit code 0 (the worker chose to stop: a `shutdown` remote-control
    command from Flower or `celery control`, or a SIGTERM sent to the Celery process itself); not after a usage or
    configuration error. Everything else is: an exit code (`Unrecoverable error` is 1) or a signal (SIGKILL by the
    OOM killer or by hand).
    """
    if stopping or returncode == 0:
        return False
    return returncode not in NO_RESTART_CODES


def forwarded_signal(received: int) -> int:
    """What the child gets for a stop signal: SIGINT stays SIGINT, anything else is SIGTERM (both are Celery's warm
    shutdown; SIGHUP would make Celery restart in place)."""
    return signal.SIGINT if received == signal.SIGINT else signal.SIGTERM


def describe_exit(returncode: int) -> str:
    """`exit code 1`, or `signal SIGKILL` for a negative Popen return code."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return f"signal {name}"
    return f"exit code {returncode}"


# -- the shell ---------------------------------------------------------------------------------------------------


def kill_group(pgid: int, sig: int) -> None:
    """Signal a whole process group; gone or not ours is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _reap_group(pgid: int, timeout: float = 1.0) -> None:
    """Reap the killed group's processes that were re-parented to us (the supervisor as a container's PID 1)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
        except ChildProcessError:  # none of them is our child (the usual case: init reaps them)
            return
        if pid == 0:
            time.sleep(0.02)


def _child_setup(parent: int) -> None:  # pragma: no cover - runs in the forked child
    """In the child before exec: on Linux, SIGTERM when the supervisor dies (PR_SET_PDEATHSIG), so a SIGKILLed
    `lahar worker` does not leave its Celery worker running."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
        if os.getppid() != parent:  # the supervisor died before prctl took effect
            os._exit(1)


@dataclass
class _Run:
    proc: subprocess.Popen[bytes]
    started: float


class Supervisor:
    """Runs `argv` until asked to stop (SIGTERM/SIGINT/SIGHUP), starting it again after an unexpected exit.

    `run()` returns the exit code for `lahar worker`: 0 after a stop the child honoured within `stop_grace` (or an
    exit 0 of its own), 1 when it had to be killed, else the child's code (a usage error is not retried).
    """

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, name: str = "celery worker",
                 stop_grace: float = STOP_GRACE, base_delay: float = BASE_DELAY, max_delay: float = MAX_DELAY,
                 stable_after: float = STABLE_AFTER, poll_interval: float = 0.1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.argv = list(argv)
        self.env = dict(env) if env is not None else None
        self.name = name
        self.stop_grace = stop_grace
        self.base_delay, self.max_delay, self.stable_after = base_delay, max_delay, stable_after
        self.poll_interval = poll_interval
        self.clock = clock
        self.failures = 0
        self.restarts = 0
        self._signals: list[int] = []  # stop signals received, in order (appended by the handler)
        self._run: _Run | None = None

    # -- signals ---------------------------------------------------------------------------------------------

    def _on_signal(self, signum: int, _frame: object) -> None:
        self._signals.append(signum)

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)

    @property
    def stopping(self) -> bool:
        return bool(self._signals)

    # -- process ---------------------------------------------------------------------------------------------

    def _spawn(self) -> _Run:
        parent = os.getpid()
        proc = subprocess.Popen(self.argv, env=self.env, stdin=subprocess.DEVNULL, process_group=0,
                                preexec_fn=lambda: _child_setup(parent))
        self._run = _Run(proc, self.clock())
        log.info("started the %s (pid %d)", self.name, proc.pid)
        return self._run

    def _wait(self, run: _Run, *, until: Callable[[], bool]) -> int | None:
        """The child's return code once it exits, or None as soon as `until()` holds."""
        while True:
            with contextlib.suppress(subprocess.TimeoutExpired):
                return run.proc.wait(self.poll_interval)
            if until():
                return None

    def _stop(self, run: _Run) -> int:
        """Forward the stop signal to the child's main process; kill its group after `stop_grace` or on a second
        signal. Returns 0 when it stopped by itself, 1 when it was killed."""
        seen = len(self._signals)
        sig = forwarded_signal(self._signals[-1])
        log.info("stopping the %s (pid %d): %s", self.name, run.proc.pid, signal.Signals(sig).name)
        with contextlib.suppress(ProcessLookupError):
            run.proc.send_signal(sig)
        deadline = self.clock() + self.stop_grace
        code = self._wait(run, until=lambda: len(self._signals) > seen or self.clock() >= deadline)
        killed = code is None
        if killed:
            why = "a second signal" if len(self._signals) > seen else f"{self.stop_grace:.0f}s"
            log.warning("killing the %s (pid %d) after %s", self.name, run.proc.pid, why)
            kill_group(run.proc.pid, signal.SIGKILL)
            code = run.proc.wait()
        kill_group(run.proc.pid, signal.SIGKILL)  # pool processes left in its group
        _reap_group(run.proc.pid)
        log.info("the %s stopped (%s)", self.name, describe_exit(code))
        return 1 if killed else 0

    def _backoff(self, delay: float) -> None:
        deadline = self.clock() + delay
        while not self.stopping and self.clock() < deadline:
            time.sleep(min(self.poll_interval, max(0.0, deadline - self.clock())))

    def run(self) -> int:
        """Supervise until stopped; see the class docstring for the return code."""
        while not self.stopping:
            run = self._spawn()
            code = self._wait(run, until=lambda: self.stopping)
            if code is None:
                return self._stop(run)
            kill_group(run.proc.pid, signal.SIGKILL)  # pool processes a killed worker left behind
            _reap_group(run.proc.pid)
            ran_for = self.clock() - run.started
            self._run = None
            if not should_restart(code, stopping=self.stopping):
                if self.stopping:  # the stop signal raced with the exit
                    log.info("the %s stopped (%s)", self.name, describe_exit(code))
                    return 0
                level = logging.INFO if code == 0 else logging.ERROR
                log.log(level, "the %s (pid %d) exited with %s; not restarting it", self.name, run.proc.pid,
                        describe_exit(code))
                return code if code >= 0 else 1
            self.failures = next_failures(self.failures, ran_for, stable_after=self.stable_after)
            delay = restart_delay(self.failures, base=self.base_delay, cap=self.max_delay)
            self.restarts += 1
            log.warning("the %s (pid %d) exited with %s after %.1fs; restarting it in %.1fs (restart %d)",
                        self.name, run.proc.pid, describe_exit(code), ran_for, delay, self.restarts)
            self._backoff(delay)
        return 0
