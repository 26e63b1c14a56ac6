"""Hypothesis strategies shared by the fuzz suite: JSON values, Kubernetes-shaped objects, hostile YAML.

Everything here is data; each fuzz module states its own invariant (no 5xx, no crash, no hang past a bound).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["SETTINGS", "json_values", "k8s_objects", "yaml_texts"]

SETTINGS: dict[str, Any] = {"derandomize": True, "deadline": None, "database": None, "print_blob": False}

_keys = st.sampled_from(["metadata", "spec", "status", "name", "labels", "annotations", "data", "containers",
                         "resources", "requests", "limits", "cpu", "replicas", "tasks", "template", "image",
                         "minAvailable", "queue", "weight", "apiVersion", "kind", "namespace", "x", ""])
_scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
                     st.sampled_from(["lots", "1e15", "-1", "1Gi", "volcano", "default", "abc/def", "{{{", "[1]"]))

json_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(_keys, st.text(max_size=8)), inner, max_size=5)),
    max_leaves=25)


def _obj(kind: str, api_version: str) -> st.SearchStrategy[dict[str, Any]]:
    meta = st.fixed_dictionaries({"name": st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)},
                                 optional={"labels": json_values, "annotations": json_values,
                                           "resourceVersion": json_values})
    return st.fixed_dictionaries({"apiVersion": st.just(api_version), "kind": st.just(kind), "metadata": meta},
                                 optional={"spec": json_values, "data": json_values, "status": json_values})


k8s_objects = st.one_of(_obj("ConfigMap", "v1"), _obj("Pod", "v1"), _obj("Secret", "v1"),
                        _obj("Deployment", "apps/v1"), _obj("Job", "batch.volcano.sh/v1alpha1"),
                        _obj("Queue", "scheduling.volcano.sh/v1beta1"), json_values)


def _nest(depth: int, flow: bool) -> str:
    return ("[" * depth + "]" * depth) if flow else "".join(" " * i + "- \n" for i in range(depth))


def _bomb(levels: int, width: int) -> str:
    lines = ["a: &a [" + ",".join(["x"] * width) + "]"]
    names = "abcdefghijkl"
    for i in range(1, levels):
        lines.append(f"{names[i]}: &{names[i]} [" + ",".join([f"*{names[i - 1]}"] * width) + "]")
    return "\n".join(lines)


yaml_texts = st.one_of(
    st.text(alphabet=st.sampled_from(list("-:[]{}&*!|>'\"#%@`,? \n\tab01")), max_size=120),
    st.builds(_nest, st.integers(1, 250), st.booleans()),
    st.builds(_bomb, st.integers(1, 10), st.integers(1, 12)),
    st.sampled_from(["a: &a [*a]", "&a [*a, *a]", "!!python/object:os.system [ls]", "? [a]\n: b", "%YAML 9.9\n---",
                     "a: !!binary AAAA", "a: !!timestamp 2001-13-45", "--- &x\n- *x"]),
)
