"""`lahar up`'s `Stack`: starts Redis, devcluster (in-process), the CRDs and the children in order, supervises and
shows them until Ctrl-C, and stops them all; `Options` is what `lahar.commands.up` fills in from flags and settings.

Part of `lahar.up`, its top: uses `manifests`, `status`, `children` and `redis`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lahar.up.children import Child, child_specs, free_port, stale_cleanup, stop_children
from lahar.up.manifests import CRDS_DIR, EXAMPLES_DIR, WEBHOOKS_DIR, apply_manifests, demo_paths, load_manifests
from lahar.up.redis import EmbeddedRedis, redact_url
from lahar.up.status import ProcessRow, Summary, render, status_line, summarize

log = logging.getLogger(__name__)

READY_FILE = "up.json"

Obj = dict[str, Any]


def parse_sim_duration(text: str | None) -> float | None:
    """`--sim-default-duration` (a Go duration, `3s`, `1m`): seconds, or None for empty/`none` (run until deleted).
    ValueError with Go's text for anything else (or a negative duration)."""
    from lahar.kube import durations

    if text is None or text.strip().lower() in ("", "none"):
        return None
    seconds = durations.parse(text)
    if seconds < 0:
        raise ValueError(f'negative duration "{text}"')
    return seconds




@dataclass
class Options:
    data_dir: Path = Path(".lahar")
    port: int = 6443
    profile: str = "cpu-small"
    nodes: int | None = None
    redis_url: str | None = None
    workers: int = 1
    concurrency: int = 2
    demo: bool = False
    examples: Path = EXAMPLES_DIR
    flower_port: int = 5555
    dashboard_port: int = 8470  # 0: no dashboard
    log_level: str = "INFO"
    live: bool | None = None       # None: a live view when stdout is a terminal
    sim_default_duration: float | None = None  # run time of Never/OnFailure pods without lahar.sh/sim-duration
    extra_env: dict[str, str] = field(default_factory=dict)


class Stack:
    """Start everything (`start`), supervise and show it (`run`: up.json says ready once the banner is out), stop
    everything (`stop`)."""

    def __init__(self, opts: Options, *, out: Callable[[str], None] | None = None) -> None:
        self.opts = opts
        self.data_dir = opts.data_dir.resolve()
        self.logs = self.data_dir / "logs"
        self.ready_file = self.data_dir / READY_FILE
        self.out = out or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.cluster: Any = None
        self.redis: EmbeddedRedis | None = None
        self.redis_url = ""
        self.children: list[Child] = []
        self.webhook_port = 0
        self.flower_port = 0
        self.flower_login = ""
        self.flower_auth_file: Path | None = None
        self.dashboard_port = 0
        self.dashboard_token = ""
        self.dashboard_token_file: Path | None = None
        self.stop_event = threading.Event()
        self.events: list[str] = []
        self._events_lock = threading.Lock()
        self._demo_thread: threading.Thread | None = None
        self.demo_result: dict[str, Any] | None = None
        self.started_at = time.monotonic()
        self._stopped = False

    # -- start ----------------------------------------------------------------------------------------------

    def start(self) -> Stack:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        previous = self._previous()
        stale_cleanup(self.ready_file)
        self._write_ready(False)
        try:
            self._start_redis(previous)
            self._start_cluster()
            self._install_crds()
            self._start_children(previous)
        except BaseException:
            self.stop()
            raise
        return self

    def _previous(self) -> dict[str, Any]:
        try:
            return json.loads(self.ready_file.read_text())
        except (OSError, ValueError):
            return {}

    def _start_redis(self, previous: Mapping[str, Any]) -> None:
        if self.opts.redis_url:
            import redis

            self.redis_url = self.opts.redis_url
            client = redis.Redis.from_url(self.redis_url, socket_timeout=3)
            try:
                client.ping()
            except redis.exceptions.RedisError as e:
                raise RuntimeError(f"REDIS_URL={self.redis_url} does not answer: {e}") from e
            finally:
                client.close()
            self.out(f"redis: REDIS_URL {redact_url(self.redis_url)}")
            return
        self.redis = EmbeddedRedis(self.data_dir / "redis", port=previous.get("redis_port"),
                                   log_path=self.logs / "redis.log").start()
        self.redis_url = self.redis.url
        self.out(f"redis: embedded {self.redis.server.source} ({self.redis.binary}) on port {self.redis.port} "
                 f"(data in {self.redis.data_dir})")

    def _start_cluster(self) -> None:
        from lahar.devcluster import runtime

        self.cluster = runtime.Cluster(data_dir=self.data_dir, host="127.0.0.1", port=self.opts.port,
                                       profile=self.opts.profile, nodes=self.opts.nodes,
                                       sim_default_duration=self.opts.sim_default_duration)
        self.cluster.start()
        self.out(f"devcluster: {self.cluster.url}, {len(self.cluster.node_names)} nodes ({self.cluster.profile_name})")

    def _install_crds(self) -> None:
        """deploy/crds/ applied in-process (created, or replaced when they changed): Volcano's kinds are served
        before any lahar process starts."""
        from lahar.kube import errors

        client = self.cluster.client
        crd_rt = client.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        for crd in load_manifests([CRDS_DIR]):
            try:
                client.create(crd_rt, crd)
            except errors.AlreadyExists:
                current = client.get(crd_rt, crd["metadata"]["name"])
                if current.get("spec") != crd.get("spec"):
                    client.update(crd_rt, {**crd, "metadata": {**crd["metadata"],
                                                              "resourceVersion": current["metadata"]["resourceVersion"]}})
        deadline = time.monotonic() + 20
        while client.registry.get("scheduling.volcano.sh", "v1beta1", "queues") is None:
            if time.monotonic() > deadline:
                raise RuntimeError("the Volcano CRDs were applied but their kinds are not served")
            time.sleep(0.05)

    def _ensure_builtin_queues(self) -> None:
        """`root` and `default` exist and are Open before anyone can submit a job (the queue reconciler keeps them
        so afterwards)."""
        from lahar.controllers import queues
        from lahar.controllers.context import Context

        queues.ensure_builtin_queues(Context(client=self.cluster.client, default_queue="default"))

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("FLOWER_UNAUTHENTICATED_API", None)
        env.update({"KUBECONFIG": str(self.cluster.kubeconfig), "REDIS_URL": self.redis_url,
                    "LAHAR_DATA_DIR": str(self.data_dir), "LAHAR_LOG_LEVEL": self.opts.log_level,
                    "PYTHONUNBUFFERED": "1"})
        env.update(self.opts.extra_env)
        return env

    def _start_children(self, previous: Mapping[str, Any]) -> None:
        from lahar.certs import bundles

        certs_dir = self.data_dir / "webhook-certs"
        # the same webhook port as last time when free, so the registered configurations stay valid meanwhile
        self.webhook_port = free_port(previous.get("webhook_port"))
        self.flower_port = free_port(previous.get("flower_port") or self.opts.flower_port)
        from lahar import credentials

        self.flower_login, self.flower_auth_file = credentials.flower_login(self.data_dir)
        if self.opts.dashboard_port:
            self.dashboard_port = free_port(previous.get("dashboard_port") or self.opts.dashboard_port)
            self.dashboard_token_file = self.data_dir / credentials.DASHBOARD_FILE
            self.dashboard_token = credentials.dashboard_token(self.dashboard_token_file)
        url = f"https://127.0.0.1:{self.webhook_port}"
        hosts = ["127.0.0.1", "localhost"]
        client = self.cluster.client
        bundles.ensure(client, namespace="lahar-system", secret_name="lahar-webhook-certs", hosts=hosts,
                       out_dir=certs_dir)
        env = self._env()
        specs = child_specs(python=sys.executable, webhook_port=self.webhook_port, certs_dir=certs_dir,
                            flower_port=self.flower_port, workers=self.opts.workers,
                            concurrency=self.opts.concurrency, dashboard_port=self.dashboard_port or None,
                            dashboard_token_file=self.dashboard_token_file)
        self.children = [Child(s, env=env, log_path=self.logs / f"{s.name}.log", cwd=self.data_dir) for s in specs]
        webhook, rest = self.children[0], self.children[1:]
        webhook.spawn()
        self._wait_webhook(webhook, certs_dir / "ca.crt")
        from lahar.webhooks import policystage

        result = bundles.ensure(client, namespace="lahar-system", secret_name="lahar-webhook-certs", hosts=hosts,
                                templates=bundles.load_templates(WEBHOOKS_DIR), url=url, out_dir=certs_dir,
                                policies=policystage.cluster_demand(client, namespace="lahar-system"))
        for line in result.summary():
            log.debug("certs: %s", line)
        self.out(f"webhook: {url} (registered from {WEBHOOKS_DIR})")
        self._ensure_builtin_queues()  # through admission, like every later write
        for c in rest:
            c.spawn()

    def _wait_webhook(self, webhook: Child, ca: Path, timeout: float = 90.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        with httpx.Client(verify=str(ca), timeout=2.0) as http:
            while True:
                if webhook.proc is not None and webhook.proc.poll() is not None:
                    raise RuntimeError(f"the webhook exited with {webhook.proc.returncode}; "
                                       f"see {webhook.log_path}:\n{_tail(webhook.log_path)}")
                with contextlib.suppress(httpx.HTTPError):
                    if http.get(f"https://127.0.0.1:{self.webhook_port}/readyz").status_code == 200:
                        webhook.mark_running()
                        return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the webhook was not ready in {timeout:.0f}s; see {webhook.log_path}")
                time.sleep(0.1)

    def _write_ready(self, ready: bool, *, stopped: bool = False) -> None:
        doc = {"ready": ready, "stopped": stopped, "pid": None if stopped else os.getpid(), "data_dir": str(self.data_dir),
               "kubeconfig": str(self.cluster.kubeconfig) if self.cluster else None,
               "api": self.cluster.url if self.cluster else None, "redis_url": self.redis_url or None,
               "redis_port": self.redis.port if self.redis else None,
               "redis_pid": self.redis.proc.pid if self.redis and self.redis.proc and not stopped else None,
               "webhook_port": self.webhook_port or None, "flower_port": self.flower_port or None,
               "webhook": f"https://127.0.0.1:{self.webhook_port}" if self.webhook_port else None,
               "flower": self.flower_url if self.flower_port else None,
               "flower_auth_file": str(self.flower_auth_file) if self.flower_auth_file else None,
               "dashboard_port": self.dashboard_port or None,
               "dashboard": self.dashboard_url if self.dashboard_port else None,
               "dashboard_token_file": str(self.dashboard_token_file) if self.dashboard_token_file else None,
               "children": {c.name: c.pid for c in self.children}}
        tmp = self.ready_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        tmp.replace(self.ready_file)

    @property
    def flower_url(self) -> str:
        return f"http://127.0.0.1:{self.flower_port}"

    @property
    def dashboard_url(self) -> str:
        """The dashboard's address with its token (`?token=` once; the dashboard turns it into a cookie)."""
        return f"http://127.0.0.1:{self.dashboard_port}/?token={self.dashboard_token}"

    def banner(self) -> list[str]:
        kc = self.cluster.kubeconfig
        return [f"[bold green]lahar is up.[/] API server {self.cluster.url}, data in {self.data_dir}",
                f"  kubectl:  [bold]kubectl --kubeconfig {kc} get vcjob,podgroup,queue -A[/]   "
                f"(or export KUBECONFIG={kc})",
                f"  Flower:   [bold]{self.flower_url}[/]  login [bold]{self.flower_login.replace(':', ' / ', 1)}[/] "
                f"(kept in {self.flower_auth_file})    logs: {self.logs}/<process>.log",
                *([f"  Dashboard: [bold]{self.dashboard_url}[/]  (token kept in {self.dashboard_token_file})"]
                  if self.dashboard_port else []),
                "  Ctrl-C stops everything; the state stays in the data dir for the next `lahar up`."]

    # -- supervise ------------------------------------------------------------------------------------------

    def supervise_once(self) -> list[str]:
        msgs = [m for m in (c.poll() for c in self.children) if m]
        if self.redis is not None:  # embedded: restarted like the children (an external one is its owner's job)
            msgs += [m for m in [self.redis.poll()] if m]
        for c in self.children:
            if c.state == "starting" and c.proc is not None and time.monotonic() - c.started_at > 2.0:
                c.mark_running()
        if msgs:
            self._write_ready(True)
        return msgs

    def summary(self) -> Summary:
        from lahar.kube import errors

        client = self.cluster.client
        r = client.registry

        def items(group: str, version: str, plural: str) -> list[Obj]:
            # the store's objects as they are (summarize only counts them): a copy of every pod twice a second
            # was a seventh of devcluster's CPU under load
            rt = r.get(group, version, plural)
            if rt is None:
                return []
            try:
                return client.store.peek_all(rt)
            except errors.ApiError:
                return []

        uptime = time.monotonic() - self.started_at
        procs = [ProcessRow("devcluster", os.getpid(), "running", 0, uptime, self.cluster.url)]
        if self.redis is not None and self.redis.proc is not None:
            procs.append(ProcessRow("redis", self.redis.proc.pid, "running" if self.redis.proc.poll() is None
                                    else "backoff", self.redis.restarts, time.monotonic() - self.redis.started_at,
                                    f"port {self.redis.port}"))
        else:
            procs.append(ProcessRow("redis", None, "external", 0, 0.0, self.redis_url))
        procs += [c.row() for c in self.children]
        return summarize(processes=procs, nodes=items("", "v1", "nodes"),
                         queues=items("scheduling.volcano.sh", "v1beta1", "queues"),
                         jobs=items("batch.volcano.sh", "v1alpha1", "jobs"), pods=items("", "v1", "pods"))

    def run(self) -> None:
        """Supervise and show the status until `stop_event` (SIGINT/SIGTERM)."""
        live = self.opts.live if self.opts.live is not None else sys.stdout.isatty()
        if self.opts.demo:
            self._demo_thread = threading.Thread(target=self._demo, name="lahar-demo", daemon=True)
            self._demo_thread.start()
        if live:
            self._run_live()
        else:
            self._run_plain()

    def _run_plain(self) -> None:
        for line in self.banner():
            from rich.text import Text

            self.out(Text.from_markup(line).plain)
        self._write_ready(True)
        last, last_at = "", 0.0
        while not self.stop_event.wait(0.5):
            for m in self.supervise_once():
                self.out(m)
            for m in self._drain_events():
                self.out(m)
            line = status_line(self.summary())
            if line != last or time.monotonic() - last_at > 60:
                self.out(line)
                last, last_at = line, time.monotonic()

    def _run_live(self) -> None:
        from rich.console import Console
        from rich.live import Live

        console = Console()
        recent: list[str] = []
        with Live(console=console, refresh_per_second=2, screen=False, transient=False) as live:
            live.update(render(self.summary(), header=self.banner()))
            self._write_ready(True)
            while True:
                recent = (recent + self.supervise_once() + self._drain_events())[-6:]
                live.update(render(self.summary(), header=[*self.banner(), *(f"[dim]{m}[/]" for m in recent)]))
                if self.stop_event.wait(0.5):
                    break

    def _event(self, message: str) -> None:
        with self._events_lock:
            self.events.append(message)

    def _drain_events(self) -> list[str]:
        with self._events_lock:
            out, self.events = self.events, []
        return out

    # -- demo -----------------------------------------------------------------------------------------------

    def _demo(self) -> None:
        try:
            demo = load_manifests(demo_paths(self.opts.examples))
            self.demo_result = apply_manifests(self.cluster.kubeconfig, demo,
                                               report=self._event, stop=self.stop_event)
            counts = Counter(v if v in ("created", "unchanged") else "failed" for v in self.demo_result.values())
            self._event(f"demo: {counts['created']} created, {counts['unchanged']} already there, "
                        f"{counts['failed']} failed; watch: kubectl --kubeconfig {self.cluster.kubeconfig} "
                        "get vcjob -w")
        except Exception as e:  # noqa: BLE001 - the demo failing must not take the stack down
            self._event(f"demo: {type(e).__name__}: {e}")

    # -- stop -----------------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Children first (webhook last, so admission answers while the others wind down), then devcluster, then
        Redis. Idempotent."""
        self.stop_event.set()
        if self._stopped:
            return
        self._stopped = True
        webhook = [c for c in self.children if c.name == "webhook"]
        others = [c for c in self.children if c.name != "webhook"]
        stop_children(others)
        # stateless, and nobody writes any more: a short grace (uvicorn's graceful shutdown would wait for the API
        # server's idle keep-alive TLS connections)
        stop_children(webhook, grace=2.0)
        if self.cluster is not None:
            try:
                self.cluster.stop()
            except Exception:  # noqa: BLE001
                log.exception("stopping devcluster")
        if self.redis is not None:
            self.redis.stop()
        self.children = []
        with contextlib.suppress(OSError):
            self._write_ready(False, stopped=True)  # ports are kept for the next start


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
