"""`lahar up`: the whole system on one machine — devcluster in-process, Redis, the webhook, dispatch, workers, the
scheduler, beat, Flower and the dashboard as supervised subprocesses, with a live status until Ctrl-C.

Sits at the very top of the flow (only `lahar.commands.up` calls it). Decisions are pure functions over plain data
(`restart_delay`, `apply_order`, `summarize`, `render`, `status_line`); `Child`, `EmbeddedRedis` and `Stack` are
the thin shells that start, watch, restart and stop processes. Every child runs in its own process group, so
stopping it (SIGTERM, then SIGKILL after a grace period) takes its Celery pool children along: no orphans.

The package's modules, bottom up:

| module      | holds                                                                                   |
|-------------|-----------------------------------------------------------------------------------------|
| `manifests` | where CRDs, webhook templates and examples live; `apply_order`, `load_manifests`, the demo apply |
| `status`    | the status view: `ProcessRow`, `Summary`, `summarize`, `status_line`, `render`          |
| `children`  | the child-process shell: `ChildSpec`, `child_specs`, `Child`, `stop_children`, `free_port` |
| `redis`     | `find_redis_server`, `EmbeddedRedis`, `redact_url`                                      |
| `stack`     | `Options`, `Stack` (start, supervise, stop), `parse_sim_duration`                       |

Readiness contract: once everything is up, `<data-dir>/up.json` holds `{"ready": true, "pid", "kubeconfig",
"api", "redis_url", "webhook", "flower", "dashboard", "children": {name: pid}}`; it says `"ready": false` while starting and
says `"ready": false, "stopped": true` after a clean stop (the ports
are reused next time when free). State stays in the data dir (devcluster's SQLite, Redis' append-only file), so a second
`lahar up` resumes where the first stopped.
"""

from __future__ import annotations

from lahar.supervisor import restart_delay
from lahar.up.children import Child, ChildSpec, child_specs, free_port, stop_children
from lahar.up.manifests import (
                               CRDS_DIR,
                               EXAMPLES_DIR,
                               WEBHOOKS_DIR,
                               apply_manifests,
                               apply_order,
                               demo_paths,
                               load_manifests,
)
from lahar.up.redis import EmbeddedRedis, RedisMissing, RedisServer, bundled_valkey, find_redis_server, redact_url
from lahar.up.stack import READY_FILE, Options, Stack, parse_sim_duration
from lahar.up.status import JobRow, ProcessRow, Summary, render, status_line, summarize

__all__ = [
    "CRDS_DIR",
    "EXAMPLES_DIR",
    "READY_FILE",
    "WEBHOOKS_DIR",
    "Child",
    "ChildSpec",
    "EmbeddedRedis",
    "JobRow",
    "Options",
    "ProcessRow",
    "RedisMissing",
    "RedisServer",
    "Stack",
    "Summary",
    "apply_manifests",
    "apply_order",
    "bundled_valkey",
    "child_specs",
    "find_redis_server",
    "free_port",
    "demo_paths",
    "load_manifests",
    "parse_sim_duration",
    "redact_url",
    "render",
    "restart_delay",
    "status_line",
    "stop_children",
    "summarize",
]
