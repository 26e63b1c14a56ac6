"""Benchmark a pod-create burst through devcluster's admission chain with lahar's own webhook configurations.

The chain is `devcluster.admission.WebhookAdmission` over a store holding deploy/webhooks (rendered by
`certs.bundles.render` with a URL, as `lahar certs ensure --url` does), in front of a `lahar webhook --state ...`
process (uvicorn, HTTPS). `--threads` request threads (the API server's concurrent handlers) each admit pods the way
the store does around a create: mutate, then validate. Three bursts of `--pods` pods each:

1. Volcano pods (as Volcano's job controller creates them), webhook up: each reaches mutatepod and validatepod (the
   two AdmissionPolicy webhooks, registered whole unless `--without-policies`, skip them by matchCondition). Volcano's tuning guide reports the default 10 s timeout failing 98.7 % of
   526,767 creates; lahar's target: 0 timeouts, 0 errors, p99 per pod <= 1 s (a tenth of that timeout).
2. A Deployment's pods (default scheduler), webhook down (process stopped, port closed): target 0 failures and
   p99 <= 50 ms (volcano#3734: with Volcano's admission down, every pod create in the cluster fails).
3. Volcano pods, webhook down: every create fails closed (failurePolicy Fail), fast (no timeout waited out).

Prints, per burst: pods, pods/s, p50/p95/p99/max admission latency per pod, timeouts, other failures, and the target.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import copy
import os
import ssl
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.admission import _free_port, _wait_healthy, pod_object, webhook_workdir  # noqa: E402


def _deployment_pod() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-7d9f8c-x", "namespace": "team-a", "generateName": "web-7d9f8c-",
                         "labels": {"app": "web", "pod-template-hash": "7d9f8c"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8c",
                                              "uid": "5a1e0000-0000-4000-8000-000000000002", "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {"schedulerName": "default-scheduler",
                     "containers": [{"name": "nginx", "image": "nginx:1.27",
                                     "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}}


def _store_with_webhooks(url: str, ca_pem: bytes, *, policies: Any = None) -> Any:
    from lahar.certs import bundles
    from lahar.kube import resources
    from lahar.kube.apiserver import store as store_mod

    store = store_mod.Store(registry=resources.Registry.of(resources.core()))
    rts = {rt.plural: rt for rt in resources.core()}
    store.create(rts["namespaces"], None, {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "team-a",
                                                        "labels": {"kubernetes.io/metadata.name": "team-a"}}})
    for template in bundles.load_templates(ROOT / "deploy" / "webhooks"):
        config = bundles.render(template, ca_bundle=ca_pem, url=url, policies=policies)
        plural = ("mutatingwebhookconfigurations" if config["kind"].startswith("Mutating")
                  else "validatingwebhookconfigurations")
        store.create(rts[plural], None, config)
    return store, rts["pods"]


def burst(chain: Any, pods_rt: Any, template: dict[str, Any], *, pods: int, threads: int) -> dict[str, Any]:
    from lahar.kube import errors
    from lahar.kube.apiserver import store as store_mod

    def one(i: int) -> tuple[float, str]:
        obj = copy.deepcopy(template)
        obj["metadata"]["name"] = f"{template['metadata']['name']}-{i}"
        attrs = store_mod.AdmissionAttributes(operation="CREATE", rt=pods_rt, subresource=None, namespace="team-a",
                                              name=obj["metadata"]["name"], obj=obj, old_obj=None,
                                              request=store_mod.Request(user="system:serviceaccount:kube-system:x"))
        start = time.perf_counter()
        outcome = "ok"
        try:
            mutated = chain.mutate(attrs)
            chain.validate(replace(attrs, obj=mutated or obj))
        except errors.ApiError as exc:
            outcome = "timeout" if "deadline exceeded" in str(exc) else "failed"
        return time.perf_counter() - start, outcome

    began = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        results = list(pool.map(one, range(pods)))
    wall = time.perf_counter() - began
    lat = sorted(r[0] for r in results)

    def pct(q: float) -> float:
        return lat[min(len(lat) - 1, int(q * len(lat)))] * 1000

    return {"pods": pods, "rate": pods / wall, "p50": pct(0.50), "p95": pct(0.95), "p99": pct(0.99),
            "max": lat[-1] * 1000, "timeouts": sum(r[1] == "timeout" for r in results),
            "failed": sum(r[1] == "failed" for r in results)}


def _row(name: str, r: dict[str, Any], target: str) -> str:
    return (f"{name:<34} {r['pods']:>6} {r['rate']:>8.0f} {r['p50']:>8.1f} {r['p95']:>8.1f} {r['p99']:>8.1f} "
            f"{r['max']:>8.1f} {r['timeouts']:>8} {r['failed']:>7}   {target}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=10_000, help="pods per burst")
    ap.add_argument("--threads", type=int, default=16, help="concurrent request threads")
    ap.add_argument("--quick", action="store_true", help="500 pods per burst (what `make bench` runs)")
    ap.add_argument("--without-policies", action="store_true",
                    help="register the webhooks as `certs ensure` does while no AdmissionPolicy exists")
    args = ap.parse_args()
    if args.quick:
        vars(args).update({"pods": 500})

    from lahar.certs import bundles
    from lahar.devcluster.admission import WebhookAdmission

    tmp = webhook_workdir("lahar-bench-burst-")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "lahar.cli", "webhook", "--host", "127.0.0.1", "--port", str(port),
                             "--cert", str(tmp / "tls.crt"), "--key", str(tmp / "tls.key"),
                             "--state", str(tmp / "state.yaml")], env=env, stdout=subprocess.DEVNULL)
    store, pods_rt = _store_with_webhooks(f"https://127.0.0.1:{port}", (tmp / "ca.crt").read_bytes(),
                                          policies=bundles.PolicyDemand() if args.without_policies else None)
    chain = WebhookAdmission(store, max_workers=args.threads * 2)
    try:
        _wait_healthy(port, ssl.create_default_context(cafile=str(tmp / "ca.crt")), proc)
        print(f"admission burst: {os.cpu_count()} CPUs (load average {os.getloadavg()[0]:.1f}), {args.threads} request "
              f"threads, {args.pods} pods per burst, deploy/webhooks (timeoutSeconds 10) in front of one `lahar webhook`"
              " process")
        print(f"{'burst':<34} {'pods':>6} {'pods/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'max ms':>8} "
              f"{'timeouts':>8} {'failed':>7}   target")
        burst(chain, pods_rt, pod_object(), pods=min(200, args.pods), threads=args.threads)  # warm the pools
        up = burst(chain, pods_rt, pod_object(), pods=args.pods, threads=args.threads)
        ok = up["timeouts"] == 0 and up["failed"] == 0 and up["p99"] <= 1000
        print(_row("Volcano pods, webhook up", up, f"0 timeouts, 0 failed, p99 <= 1000 ms: {'met' if ok else 'MISSED'}"),
              flush=True)
        proc.terminate()
        proc.wait(timeout=30)
        plain = burst(chain, pods_rt, _deployment_pod(), pods=args.pods, threads=args.threads)
        ok = plain["timeouts"] == 0 and plain["failed"] == 0 and plain["p99"] <= 50
        print(_row("Deployment pods, webhook down", plain,
                   f"0 failed, p99 <= 50 ms: {'met' if ok else 'MISSED'}"), flush=True)
        closed = burst(chain, pods_rt, pod_object(), pods=args.pods, threads=args.threads)
        ok = closed["failed"] == args.pods and closed["timeouts"] == 0
        print(_row("Volcano pods, webhook down", closed,
                   f"all fail closed, 0 timeouts: {'met' if ok else 'MISSED'}"), flush=True)
    finally:
        chain.close()
        store.close()
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
