"""Benchmark devcluster: create, list and watch 10,000 pods over HTTPS, as a client would.

Starts `lahar devcluster` in its own process (no simulated nodes), then from this process: one watch opened
before the writes, 8 concurrent writer clients, a LIST of everything. Prints writes/s, LIST latency, watch
events/s and lost or reordered events. Targets: >= 1,000 writes/s, LIST of 10,000 pods <= 1 s, zero lost.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import yaml


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _client_from_kubeconfig(path: Path) -> tuple[str, dict[str, str], str]:
    cfg = yaml.safe_load(path.read_text())
    cluster = cfg["clusters"][0]["cluster"]
    user = cfg["users"][0]["user"]
    ca = path.parent / "bench-ca.crt"
    if "certificate-authority-data" in cluster:
        import base64

        ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    else:
        ca = Path(cluster["certificate-authority"])
    return cluster["server"], {"Authorization": f"Bearer {user['token']}"}, str(ca)


def _pod(i: int) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"bench-{i:05d}", "labels": {"app": "bench", "shard": str(i % 8)}},
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=10_000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="1,000 pods (what `make bench` runs)")
    args = ap.parse_args()
    if args.quick:
        vars(args).update({"pods": 1000})

    data_dir = Path(tempfile.mkdtemp(prefix="lahar-bench-"))
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "lahar.cli", "devcluster", "--port", str(port), "--data-dir", str(data_dir),
         "--nodes", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    kubeconfig = data_dir / "kubeconfig"
    try:
        deadline = time.monotonic() + 60
        while not kubeconfig.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        url, headers, ca = _client_from_kubeconfig(kubeconfig)
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/readyz", verify=ca, headers=headers).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        ns_path = f"{url}/api/v1/namespaces/default/pods"
        start_rv = httpx.get(ns_path, verify=ca, headers=headers).json()["metadata"]["resourceVersion"]

        # The watch, opened before the first write.
        seen: list[int] = []
        watch_started = threading.Event()
        watch_done = threading.Event()
        first_event_at: list[float] = []

        def watch() -> None:
            with httpx.Client(verify=ca, headers=headers, timeout=None) as c, c.stream(
                "GET", ns_path, params={"watch": "true", "resourceVersion": "0", "allowWatchBookmarks": "false"}
            ) as resp:
                watch_started.set()
                for line in resp.iter_lines():
                    if not line:
                        continue
                    ev = json.loads(line)
                    if ev["type"] != "ADDED":
                        continue
                    if not first_event_at:
                        first_event_at.append(time.perf_counter())
                    seen.append(int(ev["object"]["metadata"]["resourceVersion"]))
                    if len(seen) >= args.pods:
                        break
            watch_done.set()

        threading.Thread(target=watch, daemon=True).start()
        watch_started.wait(30)

        local = threading.local()
        host, port = url.removeprefix("https://").rsplit(":", 1)
        ssl_ctx = ssl.create_default_context(cafile=ca)
        path = ns_path.removeprefix(url)
        post_headers = {**headers, "Content-Type": "application/json"}

        def create(i: int) -> None:
            # A plain keep-alive HTTPS connection per client thread: the lightest client, so the numbers are the
            # server's and not the client library's.
            c = getattr(local, "c", None)
            if c is None:
                c = local.c = http.client.HTTPSConnection(host, int(port), context=ssl_ctx, timeout=30)
            c.request("POST", path, body=json.dumps(_pod(i)), headers=post_headers)
            r = c.getresponse()
            body = r.read()
            if r.status != 201:
                raise RuntimeError(f"create {i}: {r.status} {body[:200]!r}")

        t0 = time.perf_counter()
        done = 0
        with ThreadPoolExecutor(args.clients) as pool:
            for _ in pool.map(create, range(args.pods)):
                done += 1
                if done % 1000 == 0:
                    print(f"  created {done}/{args.pods}", file=sys.stderr, flush=True)
        write_s = time.perf_counter() - t0

        watch_done.wait(120)
        watch_s = time.perf_counter() - (first_event_at[0] if first_event_at else t0)

        lists = []
        with httpx.Client(verify=ca, headers=headers, timeout=60) as c:
            for _ in range(3):
                t1 = time.perf_counter()
                r = c.get(ns_path)
                items = r.json()["items"]
                lists.append(time.perf_counter() - t1)
        # Replay: a watch resumed from before the first write drains the whole history at once.
        replayed = 0
        t2 = time.perf_counter()
        with httpx.Client(verify=ca, headers=headers, timeout=None) as c, c.stream(
            "GET", ns_path, params={"watch": "true", "resourceVersion": str(start_rv)}
        ) as resp:
            for line in resp.iter_lines():
                if line and json.loads(line)["type"] == "ADDED":
                    replayed += 1
                    if replayed >= args.pods:
                        break
        replay_s = time.perf_counter() - t2
        reordered = sum(1 for a, b in zip(seen, seen[1:], strict=False) if b <= a)
        result = {
            "pods": args.pods,
            "clients": args.clients,
            "writes_per_s": round(args.pods / write_s, 1),
            "list_items": len(items),
            "list_latency_s": round(min(lists), 3),
            "watch_events": len(seen),
            "watch_events_per_s": round(len(seen) / watch_s, 1) if seen else 0.0,
            "replayed_events": replayed,
            "replay_events_per_s": round(replayed / replay_s, 1),
            "lost_events": args.pods - len(set(seen)),
            "reordered_events": reordered,
        }
        print(json.dumps(result, indent=2))
        return 0
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
        if os.environ.get("LAHAR_BENCH_KEEP") is None:
            import shutil

            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
