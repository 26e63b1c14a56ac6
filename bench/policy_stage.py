"""Micro-benchmark of the webhook's policy stage in-process: N AdmissionPolicies on a 4-task Volcano Job, per phase.

Sits beside `bench/admission.py` (which measures the same stage over HTTPS at a fixed rate): this one isolates the
CPU the policies add per review. Policies: the examples in `examples/policies/` (params resolved, queue looked up)
replicated under different names, plus `bench/admission.py`'s typical shapes, N in all (default 20).

    .venv/bin/python bench/policy_stage.py [--policies 20] [--rounds 500]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

__all__ = ["job4", "main", "policies"]


def job4() -> dict:
    """A Volcano Job with 4 tasks (master, 2 worker groups, ps), GPU limits on the workers, a team label."""
    import admission as bench  # bench/admission.py

    job = bench.job_object()
    tasks = job["spec"]["tasks"]
    gpu_task = {**tasks[1], "name": "gpu-worker"}
    gpu_task["template"] = {**gpu_task["template"], "spec": {**gpu_task["template"]["spec"], "containers": [
        {**gpu_task["template"]["spec"]["containers"][0],
         "resources": {"limits": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"}}}]}}
    job["spec"]["tasks"] = [*tasks, gpu_task, {**tasks[1], "name": "ps", "replicas": 2}]
    job["spec"]["queue"] = "gpu-pool"
    return job


def _example_docs() -> list[dict]:
    docs = []
    for path in sorted((ROOT / "examples" / "policies").glob("*.yaml")):
        if path.name == "manifests.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            if doc.get("kind") == "AdmissionPolicy":
                docs.append(doc)
            elif doc.get("kind") == "ConfigMap" and "policy.yaml" in (doc.get("data") or {}):
                docs.extend(d for d in yaml.safe_load_all(doc["data"]["policy.yaml"]) if d)
    return docs


def policies(n: int) -> list:
    """N compiled policies: the examples replicated under new names, then bench/admission.py's shapes."""
    import admission as bench

    from lahar.policies.admission_policies import load_documents

    out = []
    examples = _example_docs()
    shapes = yaml.safe_load_all(bench.policy_documents(n))
    typical = [d for d in shapes if d]
    params = {"data": {"team-a": "batch-high", "maxGPUs": "64"}}
    for i in range(n):
        src = examples[i // 2 % len(examples)] if i % 2 == 0 else typical[i]
        doc = yaml.safe_load(yaml.safe_dump(src))
        doc["metadata"]["name"] = f"{doc['metadata']['name']}-{i}"
        (compiled,) = load_documents([doc])
        if compiled.spec.param_ref is not None:
            compiled = compiled.with_params(params)
        out.append(compiled)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=500)
    ap.add_argument("--quick", action="store_true", help="100 rounds (what `make bench` runs)")
    args = ap.parse_args()
    if args.quick:
        vars(args).update({"rounds": 100})

    from lahar.webhooks import policystage, review

    split = policystage.Policies.of(policies(args.policies))
    req = review.request_for(job4(), resource="jobs")
    queues = {"gpu-pool": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                           "metadata": {"name": "gpu-pool", "labels": {"gpu": "true"}}}}
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"env": "prod"}}}
    from lahar.policies.admission_policies import policy_stage

    for label, chosen in (("validating", split.validating), ("mutating", split.mutating)):
        stage = policy_stage(chosen, req, namespace_obj=ns, queue_lookup=queues.get)
        assert not stage.denials, stage.denials
        samples = []
        cpu0 = time.thread_time()
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            policy_stage(chosen, req, namespace_obj=ns, queue_lookup=queues.get)
            samples.append(time.perf_counter() - t0)
        cpu = (time.thread_time() - cpu0) / args.rounds
        samples.sort()
        print(f"{label:<11} {len(chosen):>3} policies  CPU {cpu * 1e3:.3f} ms/review  wall p50 "
              f"{samples[len(samples) // 2] * 1e3:.3f} ms  p99 {samples[int(len(samples) * 0.99)] * 1e3:.3f} ms  "
              f"(warnings {len(stage.warnings)}, patch ops {len(stage.patches)}, audits {len(stage.audits)})")


if __name__ == "__main__":
    main()
