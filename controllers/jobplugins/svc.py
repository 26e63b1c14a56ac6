"""The `svc` job plugin: a headless Service `<job>`, a ConfigMap `<job>-svc` of host lists mounted at
`/etc/volcano` (and exported as `VC_<TASK>_HOSTS` / `VC_<TASK>_NUM`), pod hostname/subdomain, and a NetworkPolicy
`<job>` admitting only the job's own pods. Flags: `--publish-not-ready-addresses`, `--disable-network-policy`,
`--inject-hosts-env` (default true).
"""

from __future__ import annotations

from typing import Any

from lahar.controllers._job_pods import controller_ref
from lahar.controllers.jobplugins import Children, JobPlugin, controlled
from lahar.controllers.jobplugins._hosts import task_hosts
from lahar.kube.models import labels as keys

__all__ = ["CONFIGMAP_MOUNT_PATH", "SvcPlugin", "generate_hosts"]

CONFIGMAP_MOUNT_PATH = "/etc/volcano"


def _env_key(task_name: str) -> str:
    return task_name.replace("-", "_")


def generate_hosts(job: dict[str, Any]) -> dict[str, str]:
    """GenerateHosts: `<task>.host` (newline list), `VC_<TASK>_HOSTS` (comma list), `VC_<TASK>_NUM`."""
    job_name = str(job["metadata"]["name"])
    out: dict[str, str] = {}
    for task in (job.get("spec") or {}).get("tasks") or ():
        hosts = task_hosts(task, job_name)
        key = _env_key(str(task.get("name")))
        out[f"{key}.host"] = "\n".join(hosts)
        out[f"VC_{key.upper()}_HOSTS"] = ",".join(hosts)
        out[f"VC_{key.upper()}_NUM"] = str(len(hosts))
    return out


def _owner(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [controller_ref(job)]


class SvcPlugin(JobPlugin):
    name = "svc"
    defaults = {"publish-not-ready-addresses": False, "disable-network-policy": False, "inject-hosts-env": True}

    def cm_name(self, job: dict[str, Any]) -> str:
        return f"{job['metadata']['name']}-{self.name}"

    def _selector(self, job: dict[str, Any]) -> dict[str, str]:
        return {keys.JOB_NAME_KEY: job["metadata"]["name"], keys.JOB_NAMESPACE_KEY: job["metadata"]["namespace"]}

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        spec = pod.setdefault("spec", {})
        if not spec.get("hostname"):
            spec["hostname"] = pod["metadata"]["name"]
        if not spec.get("subdomain"):
            spec["subdomain"] = job["metadata"]["name"]
        cm = self.cm_name(job)
        if self.flags["inject-hosts-env"]:
            names = []
            for task in (job.get("spec") or {}).get("tasks") or ():
                key = _env_key(str(task.get("name"))).upper()
                names += [f"VC_{key}_HOSTS", f"VC_{key}_NUM"]
            env = [{"name": n, "valueFrom": {"configMapKeyRef": {"name": cm, "key": n}}} for n in names]
            for group in ("containers", "initContainers"):
                for c in spec.get(group) or ():
                    c.setdefault("env", []).extend([dict(e) for e in env])
        spec.setdefault("volumes", []).append({"name": cm, "configMap": {"name": cm}})
        for group in ("containers", "initContainers"):
            for c in spec.get(group) or ():
                c.setdefault("volumeMounts", []).append({"mountPath": CONFIGMAP_MOUNT_PATH, "name": cm})

    def _configmap(self, job: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": self.cm_name(job), "namespace": job["metadata"]["namespace"],
                             "ownerReferences": _owner(job)},
                "data": generate_hosts(job)}

    def _ensure_configmap(self, job: dict[str, Any], children: Children) -> None:
        want = self._configmap(job)

        def update(current: dict[str, Any]) -> bool:
            if current.get("data") == want["data"]:
                return False
            current["data"] = want["data"]
            return True

        children.ensure(want, update=update)

    def service(self, job: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": job["metadata"]["name"], "namespace": job["metadata"]["namespace"],
                             "ownerReferences": _owner(job)},
                "spec": {"clusterIP": "None", "selector": self._selector(job),
                         "publishNotReadyAddresses": bool(self.flags["publish-not-ready-addresses"]),
                         "ports": [{"name": "placeholder-volcano", "port": 1, "protocol": "TCP", "targetPort": 1}]}}

    def network_policy(self, job: dict[str, Any]) -> dict[str, Any]:
        sel = self._selector(job)
        return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                "metadata": {"name": job["metadata"]["name"], "namespace": job["metadata"]["namespace"],
                             "ownerReferences": _owner(job)},
                "spec": {"podSelector": {"matchLabels": dict(sel)},
                         "ingress": [{"from": [{"podSelector": {"matchLabels": dict(sel)}}]}],
                         "policyTypes": ["Ingress"]}}

    def on_job_add(self, job: dict[str, Any], status: dict[str, Any], children: Children) -> None:
        if controlled(status).get(self.key) == self.name:
            return
        self._ensure_configmap(job, children)
        children.ensure(self.service(job))
        if not self.flags["disable-network-policy"]:
            children.ensure(self.network_policy(job))
        controlled(status)[self.key] = self.name

    def on_job_delete(self, job: dict[str, Any], status: dict[str, Any], children: Children) -> None:
        if controlled(status).get(self.key) != self.name:
            return
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        children.delete("v1", "ConfigMap", ns, self.cm_name(job))
        children.delete("v1", "Service", ns, name)
        if not self.flags["disable-network-policy"]:
            children.delete("networking.k8s.io/v1", "NetworkPolicy", ns, name)
        controlled(status).pop(self.key, None)

    def on_job_update(self, job: dict[str, Any], status: dict[str, Any], children: Children) -> None:
        self._ensure_configmap(job, children)
