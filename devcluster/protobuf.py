"""Decoding the Kubernetes protobuf request bodies kubectl's typed clients send (`application/vnd.kubernetes.protobuf`).

Used by `devcluster.server` for the few kinds kubectl's generators create (`kubectl create configmap|secret|
namespace|serviceaccount|priorityclass|deployment|job`, `kubectl drain`'s Eviction); others are a clean 415. A pure
function: the `k8s\\0` envelope (runtime.Unknown) → the JSON-shaped dict; zero values are omitted like Go's omitempty.
"""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

__all__ = ["MAGIC", "ProtobufError", "decode", "supported"]

MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    """The body is not a protobuf envelope, or of a kind devcluster cannot decode."""


# field number -> (json name, type); types: str int bool bytes strs strmap bytesmap qmap time ("m", M) ("ml", M)
_Schema = dict[int, tuple[str, Any]]

_SCHEMAS: dict[str, _Schema] = {
    "ObjectMeta": {1: ("name", "str"), 2: ("generateName", "str"), 3: ("namespace", "str"), 5: ("uid", "str"),
                   6: ("resourceVersion", "str"), 7: ("generation", "int"), 11: ("labels", "strmap"),
                   12: ("annotations", "strmap"), 13: ("ownerReferences", ("ml", "OwnerReference")),
                   14: ("finalizers", "strs")},
    "OwnerReference": {1: ("kind", "str"), 3: ("name", "str"), 4: ("uid", "str"), 5: ("apiVersion", "str"),
                       6: ("controller", "bool"), 7: ("blockOwnerDeletion", "bool")},
    "LabelSelector": {1: ("matchLabels", "strmap"), 2: ("matchExpressions", ("ml", "LabelSelectorRequirement"))},
    "LabelSelectorRequirement": {1: ("key", "str"), 2: ("operator", "str"), 3: ("values", "strs")},
    "ConfigMap": {1: ("metadata", ("m", "ObjectMeta")), 2: ("data", "strmap"), 3: ("binaryData", "bytesmap"),
                  4: ("immutable", "bool")},
    "Secret": {1: ("metadata", ("m", "ObjectMeta")), 2: ("data", "bytesmap"), 3: ("type", "str"),
               4: ("stringData", "strmap"), 5: ("immutable", "bool")},
    "Namespace": {1: ("metadata", ("m", "ObjectMeta")), 2: ("spec", ("m", "NamespaceSpec"))},
    "NamespaceSpec": {1: ("finalizers", "strs")},
    "ServiceAccount": {1: ("metadata", ("m", "ObjectMeta")), 4: ("automountServiceAccountToken", "bool")},
    "PriorityClass": {1: ("metadata", ("m", "ObjectMeta")), 2: ("value", "int"), 3: ("globalDefault", "bool"),
                      4: ("description", "str"), 5: ("preemptionPolicy", "str")},
    "Deployment": {1: ("metadata", ("m", "ObjectMeta")), 2: ("spec", ("m", "DeploymentSpec"))},
    "DeploymentSpec": {1: ("replicas", "int"), 2: ("selector", ("m", "LabelSelector")),
                       3: ("template", ("m", "PodTemplateSpec")), 4: ("strategy", ("m", "DeploymentStrategy")),
                       5: ("minReadySeconds", "int"), 6: ("revisionHistoryLimit", "int"), 7: ("paused", "bool"),
                       9: ("progressDeadlineSeconds", "int")},
    "DeploymentStrategy": {1: ("type", "str")},
    "Job": {1: ("metadata", ("m", "ObjectMeta")), 2: ("spec", ("m", "JobSpec"))},
    "JobSpec": {1: ("parallelism", "int"), 2: ("completions", "int"), 3: ("activeDeadlineSeconds", "int"),
                4: ("selector", ("m", "LabelSelector")), 5: ("manualSelector", "bool"),
                6: ("template", ("m", "PodTemplateSpec")), 7: ("backoffLimit", "int"),
                8: ("ttlSecondsAfterFinished", "int")},
    "PodTemplateSpec": {1: ("metadata", ("m", "ObjectMeta")), 2: ("spec", ("m", "PodSpec"))},
    "PodSpec": {2: ("containers", ("ml", "Container")), 3: ("restartPolicy", "str"),
                4: ("terminationGracePeriodSeconds", "int"), 5: ("activeDeadlineSeconds", "int"),
                6: ("dnsPolicy", "str"), 7: ("nodeSelector", "strmap"), 8: ("serviceAccountName", "str"),
                10: ("nodeName", "str"), 11: ("hostNetwork", "bool"), 19: ("schedulerName", "str"),
                20: ("initContainers", ("ml", "Container")), 24: ("priorityClassName", "str")},
    "Container": {1: ("name", "str"), 2: ("image", "str"), 3: ("command", "strs"), 4: ("args", "strs"),
                  5: ("workingDir", "str"), 6: ("ports", ("ml", "ContainerPort")), 7: ("env", ("ml", "EnvVar")),
                  8: ("resources", ("m", "ResourceRequirements")), 13: ("terminationMessagePath", "str"),
                  14: ("imagePullPolicy", "str"), 16: ("stdin", "bool"), 17: ("stdinOnce", "bool"),
                  18: ("tty", "bool"), 20: ("terminationMessagePolicy", "str")},
    "ContainerPort": {1: ("name", "str"), 2: ("hostPort", "int"), 3: ("containerPort", "int"),
                      4: ("protocol", "str"), 5: ("hostIP", "str")},
    "EnvVar": {1: ("name", "str"), 2: ("value", "str")},
    "ResourceRequirements": {1: ("limits", "qmap"), 2: ("requests", "qmap")},
    "Eviction": {1: ("metadata", ("m", "ObjectMeta")), 2: ("deleteOptions", ("m", "DeleteOptions"))},
    "DeleteOptions": {1: ("gracePeriodSeconds", "int"), 2: ("preconditions", ("m", "Preconditions")),
                      3: ("orphanDependents", "bool"), 4: ("propagationPolicy", "str"), 5: ("dryRun", "strs")},
    "Preconditions": {1: ("uid", "str"), 2: ("resourceVersion", "str")},
    "Binding": {1: ("metadata", ("m", "ObjectMeta")), 2: ("target", ("m", "ObjectReference"))},
    "ObjectReference": {1: ("kind", "str"), 2: ("namespace", "str"), 3: ("name", "str"), 4: ("uid", "str"),
                        5: ("apiVersion", "str"), 6: ("resourceVersion", "str"), 7: ("fieldPath", "str")},
}
_TOP_LEVEL = ("ConfigMap", "Secret", "Namespace", "ServiceAccount", "PriorityClass", "Deployment", "Job", "Eviction",
              "Binding", "DeleteOptions")


def supported() -> tuple[str, ...]:
    return _TOP_LEVEL


def _varint(data: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if i >= len(data):
            raise ProtobufError("truncated varint")
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return result, i


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    out = []
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            n, i = _varint(data, i)
            value, i = data[i:i + n], i + n
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _map_entry(raw: bytes) -> tuple[str, bytes]:
    key, value = "", b""
    for number, _, v in _fields(raw):
        if number == 1:
            key = v.decode()
        elif number == 2:
            value = v
    return key, value


def _message(name: str, data: bytes) -> dict[str, Any]:
    schema = _SCHEMAS[name]
    out: dict[str, Any] = {}
    for number, wire, value in _fields(data):
        spec = schema.get(number)
        if spec is None:
            continue
        key, kind = spec
        if kind == "str":
            if value:
                out[key] = value.decode()
        elif kind == "int":
            if wire == 0 and value:
                out[key] = _signed(value)
        elif kind == "bool":
            if value:
                out[key] = True
        elif kind == "strs":
            out.setdefault(key, []).append(value.decode())
        elif kind in ("strmap", "bytesmap", "qmap"):
            k, v = _map_entry(value)
            if kind == "strmap":
                text: Any = v.decode()
            elif kind == "bytesmap":
                text = base64.b64encode(v).decode()
            else:  # Quantity {string = 1}
                text = next((f[2].decode() for f in _fields(v) if f[0] == 1), "0")
            out.setdefault(key, {})[k] = text
        elif kind == "time":
            fields = {n: v for n, _, v in _fields(value)}
            if fields.get(1):
                out[key] = dt.datetime.fromtimestamp(fields[1], dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        elif kind[0] == "m":
            sub = _message(kind[1], value)
            if sub:
                out[key] = sub
        elif kind[0] == "ml":
            out.setdefault(key, []).append(_message(kind[1], value))
    return out


def decode(body: bytes) -> dict[str, Any]:
    """The JSON-shaped object inside a `k8s\\0` protobuf envelope; ProtobufError when not decodable here."""
    if not body.startswith(MAGIC):
        raise ProtobufError("the body does not start with the Kubernetes protobuf magic number")
    api_version = kind = ""
    raw = b""
    for number, _, value in _fields(body[len(MAGIC):]):
        if number == 1:
            for n, _, v in _fields(value):
                if n == 1:
                    api_version = v.decode()
                elif n == 2:
                    kind = v.decode()
        elif number == 2:
            raw = value
    if kind not in _TOP_LEVEL:
        raise ProtobufError(f"protobuf bodies of kind {kind or '<none>'!r} are not supported by devcluster; "
                            f"send JSON instead (e.g. kubectl apply -f)")
    obj = _message(kind, raw)
    return {"apiVersion": api_version, "kind": kind, **obj}
