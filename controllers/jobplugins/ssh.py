"""The `ssh` job plugin: one key pair per Job in Secret `<job>-ssh` (`id_rsa`, `id_rsa.pub`, `authorized_keys`,
`config`), mounted with subPath `.ssh` at `--ssh-key-file-path` (default `/root/.ssh`) in every container.

Flags: `--ssh-key-file-path`, `--ssh-private-key`, `--ssh-public-key` (use given keys), `--ssh-port` (default 22,
written into `config` when not 22) and lahar's `--ssh-key-type=rsa|ed25519` (default rsa, 2048 bits like Volcano;
the file names stay `id_rsa*` so images built for Volcano find them). Keys are never rotated on update.
"""

from __future__ import annotations

from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from lahar.controllers._job_pods import controller_ref
from lahar.controllers.jobplugins import Children, JobPlugin, b64, controlled
from lahar.controllers.jobplugins._hosts import pod_name

__all__ = ["SSH_ABSOLUTE_PATH", "SSH_RELATIVE_PATH", "SshPlugin", "generate_keys", "ssh_config"]

SSH_PRIVATE_KEY = "id_rsa"
SSH_PUBLIC_KEY = "id_rsa.pub"
SSH_AUTHORIZED_KEYS = "authorized_keys"
SSH_CONFIG = "config"
SSH_ABSOLUTE_PATH = "/root/.ssh"
SSH_RELATIVE_PATH = ".ssh"


def generate_keys(key_type: str = "rsa") -> tuple[bytes, bytes]:
    """(private key PEM, public key in authorized_keys form with a trailing newline)."""
    if key_type == "ed25519":
        key = ed25519.Ed25519PrivateKey.generate()
        private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                    serialization.NoEncryption())
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                    serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, public + b"\n"


def ssh_config(job: dict[str, Any], port: int = 22) -> str:
    """generateSSHConfig: no host-key checking, then `Host <pod>` / `HostName <pod>.<subdomain>` per replica."""
    job_name = str(job["metadata"]["name"])
    lines = ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null"]
    for task in (job.get("spec") or {}).get("tasks") or ():
        spec = (task.get("template") or {}).get("spec") or {}
        for i in range(int(task.get("replicas") or 0)):
            host = spec.get("hostname") or pod_name(job_name, str(task.get("name")), i)
            lines.append(f"Host {host}")
            lines.append(f"  HostName {host}.{spec.get('subdomain') or job_name}")
            if port != 22:
                lines.append(f"  Port {port}")
            if spec.get("hostname"):
                break
    return "\n".join(lines) + "\n"


class SshPlugin(JobPlugin):
    name = "ssh"
    defaults = {"ssh-key-file-path": SSH_ABSOLUTE_PATH, "ssh-private-key": "", "ssh-public-key": "",
                "ssh-port": 22, "ssh-key-type": "rsa"}

    def secret_name(self, job: dict[str, Any]) -> str:
        return f"{job['metadata']['name']}-{self.name}"

    def on_pod_create(self, pod: dict[str, Any], job: dict[str, Any]) -> None:
        name = self.secret_name(job)
        path = str(self.flags["ssh-key-file-path"])
        mode = 0o600 if path == SSH_ABSOLUTE_PATH else 0o644
        items = [{"key": k, "path": f"{SSH_RELATIVE_PATH}/{k}"}
                 for k in (SSH_PRIVATE_KEY, SSH_PUBLIC_KEY, SSH_AUTHORIZED_KEYS, SSH_CONFIG)]
        spec = pod.setdefault("spec", {})
        spec.setdefault("volumes", []).append({"name": name, "secret": {"secretName": name, "items": items,
                                                                         "defaultMode": mode}})
        for group in ("containers", "initContainers"):
            for c in spec.get(group) or ():
                c.setdefault("volumeMounts", []).append({"mountPath": path, "subPath": SSH_RELATIVE_PATH,
                                                         "name": name})

    def secret_data(self, job: dict[str, Any]) -> dict[str, str]:
        if self.flags["ssh-private-key"]:
            private = str(self.flags["ssh-private-key"]).encode()
            public = str(self.flags["ssh-public-key"]).encode()
        else:
            private, public = generate_keys(str(self.flags["ssh-key-type"]))
        return {SSH_PRIVATE_KEY: b64(private), SSH_PUBLIC_KEY: b64(public), SSH_AUTHORIZED_KEYS: b64(public),
                SSH_CONFIG: b64(ssh_config(job, int(self.flags["ssh-port"])))}

    def on_job_add(self, job: dict[str, Any], status: dict[str, Any], children: Children) -> None:
        if controlled(status).get(self.key) == self.name:
            return
        ns = job["metadata"]["namespace"]
        if children.get("v1", "Secret", ns, self.secret_name(job)) is None:
            # A Secret left by an earlier attempt is kept: pods may already mount its keys.
            children.ensure({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                             "metadata": {"name": self.secret_name(job), "namespace": ns,
                                          "ownerReferences": [controller_ref(job)]},
                             "data": self.secret_data(job)})
        controlled(status)[self.key] = self.name

    def on_job_delete(self, job: dict[str, Any], status: dict[str, Any], children: Children) -> None:
        if controlled(status).get(self.key) != self.name:
            return
        children.delete("v1", "Secret", job["metadata"]["namespace"], self.secret_name(job))
        controlled(status).pop(self.key, None)
