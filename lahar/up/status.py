"""`lahar up`'s status view: the rows and `Summary` it shows, as plain data; `summarize` (pure counts over the
API server's objects), `status_line` (a log line when not on a TTY) and `render` (the rich live view).

Part of `lahar.up`; imports nothing else of the package.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]


@dataclass(frozen=True)
class ProcessRow:
    name: str
    pid: int | None
    state: str        # starting | running | backoff | stopped | external
    restarts: int = 0
    uptime: float = 0.0
    detail: str = ""


@dataclass(frozen=True)
class JobRow:
    namespace: str
    name: str
    queue: str
    phase: str
    running: int = 0
    succeeded: int = 0
    failed: int = 0


@dataclass(frozen=True)
class Summary:
    """What the status view shows, as plain data."""

    processes: tuple[ProcessRow, ...] = ()
    nodes_ready: int = 0
    nodes_total: int = 0
    queues: tuple[tuple[str, str, int], ...] = ()      # (name, state, jobs)
    phases: tuple[tuple[str, int], ...] = ()           # Job phase → count
    jobs: tuple[JobRow, ...] = ()
    pods: tuple[tuple[str, int], ...] = ()             # pod phase → count


def _phase(job: Obj) -> str:
    return str((((job.get("status") or {}).get("state")) or {}).get("phase") or "Pending")


def summarize(*, processes: Sequence[ProcessRow], nodes: Sequence[Obj], queues: Sequence[Obj], jobs: Sequence[Obj],
              pods: Sequence[Obj] = (), recent: int = 12) -> Summary:
    """Counts for the status view: ready nodes, each queue's state and jobs, jobs by phase, the newest jobs."""
    def ready(node: Obj) -> bool:
        return any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in (node.get("status") or {}).get("conditions") or ())

    per_queue = Counter(str((j.get("spec") or {}).get("queue") or "default") for j in jobs)
    queue_rows = tuple(sorted((q["metadata"]["name"], str((q.get("status") or {}).get("state") or "-"),
                               per_queue.get(q["metadata"]["name"], 0)) for q in queues))
    phases = Counter(_phase(j) for j in jobs)
    newest = sorted(jobs, key=lambda j: (j["metadata"].get("creationTimestamp") or "", j["metadata"]["name"]))
    rows = tuple(JobRow(namespace=j["metadata"].get("namespace", ""), name=j["metadata"]["name"],
                        queue=str((j.get("spec") or {}).get("queue") or "default"), phase=_phase(j),
                        running=int((j.get("status") or {}).get("running") or 0),
                        succeeded=int((j.get("status") or {}).get("succeeded") or 0),
                        failed=int((j.get("status") or {}).get("failed") or 0))
                 for j in newest[-recent:])
    pod_phases = Counter(str((p.get("status") or {}).get("phase") or "Pending") for p in pods)
    return Summary(processes=tuple(processes), nodes_ready=sum(1 for n in nodes if ready(n)), nodes_total=len(nodes),
                   queues=queue_rows, phases=tuple(sorted(phases.items())), jobs=rows,
                   pods=tuple(sorted(pod_phases.items())))


def status_line(s: Summary) -> str:
    """One log line for a terminal that is not a TTY."""
    procs = " ".join(f"{p.name}={p.state}" for p in s.processes)
    phases = " ".join(f"{k}={v}" for k, v in s.phases) or "none"
    queues = " ".join(f"{n}({st})" for n, st, _ in s.queues) or "none"
    return f"processes: {procs} | nodes {s.nodes_ready}/{s.nodes_total} ready | queues: {queues} | jobs: {phases}"


def _age(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


_STATE_STYLE = {"running": "green", "external": "green", "starting": "yellow", "backoff": "red", "stopped": "dim"}
_PHASE_STYLE = {"Completed": "green", "Running": "cyan", "Failed": "red", "Aborted": "red", "Terminated": "red",
                "Pending": "yellow", "Restarting": "magenta"}


def render(s: Summary, *, header: Sequence[str] = ()) -> Any:
    """The rich renderable of the live view: header lines, processes, cluster, queues and jobs."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    procs = Table(title="processes", title_justify="left", expand=False, box=None, pad_edge=False)
    for col in ("name", "pid", "state", "restarts", "up"):
        procs.add_column(col)
    for p in s.processes:
        style = _STATE_STYLE.get(p.state, "")
        procs.add_row(p.name, str(p.pid or "-"), Text(p.state + (f" ({p.detail})" if p.detail else ""), style=style),
                      str(p.restarts), _age(p.uptime) if p.uptime else "-")
    queues = Table(title="queues", title_justify="left", box=None, pad_edge=False)
    for col in ("queue", "state", "jobs"):
        queues.add_column(col)
    for name, state, n in s.queues:
        queues.add_row(name, Text(state, style="green" if state == "Open" else "yellow"), str(n))
    jobs = Table(title="jobs  " + ("  ".join(f"{k}: {v}" for k, v in s.phases) or "none yet"),
                 title_justify="left", box=None, pad_edge=False)
    for col in ("namespace", "job", "queue", "phase", "running", "succeeded", "failed"):
        jobs.add_column(col)
    for j in s.jobs:
        jobs.add_row(j.namespace, j.name, j.queue, Text(j.phase, style=_PHASE_STYLE.get(j.phase, "")),
                     str(j.running), str(j.succeeded), str(j.failed))
    pods = "  ".join(f"{k}: {v}" for k, v in s.pods) or "none"
    cluster = Text(f"nodes: {s.nodes_ready}/{s.nodes_total} ready    pods: {pods}")
    return Group(*(Text.from_markup(h) for h in header), Text(""), procs, Text(""), cluster, Text(""), queues,
                 Text(""), jobs)
