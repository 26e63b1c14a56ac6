"""What kube-apiserver fills in on its own: pod defaults and status (QoS from `kube.podspec`), Secret `stringData`,
each kind's PrepareForCreate, a pod's deletion grace.

Pure functions over plain dicts, called by `kube.apiserver.store.Store` on create, update and delete.
"""

from __future__ import annotations

import base64

from lahar.kube import podspec, quantity
from lahar.kube.apiserver.objects import invalid, meta_of
from lahar.kube.client import Obj
from lahar.kube.resources import ResourceType

__all__ = ["default_pod", "merge_string_data", "pod_grace", "pod_status", "prepare_create"]


def pod_status(rt: ResourceType, pod: Obj) -> Obj:
    """A new pod's status (PrepareForCreate): Pending with its QoS class; a malformed quantity is a 422."""
    try:
        return {"phase": "Pending", "qosClass": podspec.qos_class(pod)}
    except (quantity.QuantityError, TypeError, ValueError) as e:
        raise invalid(rt, meta_of(pod).get("name", ""), [("FieldValueInvalid", "spec.containers[*].resources",
                                                           f"Invalid value: {e}")]) from None


def default_pod(pod: Obj) -> None:
    """A few of kube's pod defaults (SetDefaults_Pod/PodSpec/Container) that schedulers and kubectl read."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            if not isinstance(c, dict):
                continue
            image = str(c.get("image", ""))
            tag = image.rsplit("/", 1)[-1]
            latest = "@" not in tag and (":" not in tag or tag.endswith(":latest"))
            c.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("resources", {})
            res = c["resources"]
            if isinstance(res, dict) and res.get("limits") and not res.get("requests"):
                res["requests"] = dict(res["limits"])
            elif isinstance(res, dict) and res.get("limits"):
                for k, v in res["limits"].items():
                    res["requests"].setdefault(k, v)


def merge_string_data(secret: Obj) -> None:
    """Secrets: `stringData` is write-only, merged into `data` base64-encoded (it wins); `type` defaults to Opaque."""
    string_data = secret.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = secret.get("data") if isinstance(secret.get("data"), dict) else {}
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()
        secret["data"] = data
    secret.setdefault("type", "Opaque")


def prepare_create(rt: ResourceType, obj: Obj) -> None:
    """kube's PrepareForCreate: status resets, namespace lifecycle fields, pod status."""
    gp = (rt.group, rt.plural)
    meta = obj["metadata"]
    if gp == ("", "namespaces"):
        obj.setdefault("spec", {})["finalizers"] = ["kubernetes"]
        obj["status"] = {"phase": "Active"}
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
    elif gp == ("", "pods"):
        obj["status"] = pod_status(rt, obj)
    elif gp == ("", "nodes"):
        pass  # kubelets register with status
    elif gp == ("apiextensions.k8s.io", "customresourcedefinitions") or "status" in rt.subresources:
        obj.pop("status", None)


def pod_grace(pod: Obj, option: int | None) -> int:
    """The grace period a pod's deletion gets: none unless bound and still running; else the option, else the
    pod's `terminationGracePeriodSeconds` (30 when unset)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return 0
    if option is not None:
        return max(0, int(option))
    grace = spec.get("terminationGracePeriodSeconds")
    return 30 if grace is None else max(0, int(grace))
