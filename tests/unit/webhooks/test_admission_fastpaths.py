"""The admission hot paths answer exactly what the general paths answer: the per-Job template memo against
checking every task, the device-free short cut against the full device rules, and the memoized name checks (fresh
lists every call)."""

from __future__ import annotations

import copy
import warnings

import pytest

from lahar.kube import podspec
from lahar.policies.admission import AdmissionConfig, DeviceConfig, PairingMode, RDMAConfig
from lahar.webhooks import _jobs_rules as rules
from lahar.webhooks import _k8svalidation as k8s
from lahar.webhooks import devices
from lahar.webhooks.lookups import StaticLookups
from tests.builders import task, vcjob

with warnings.catch_warnings():
    warnings.simplefilter("ignore")

CONFIG = AdmissionConfig()
PAIRING = AdmissionConfig(devices=DeviceConfig(rdma=RDMAConfig(pairing=PairingMode.ONE_TO_ONE)))


def container(name: str = "main", **resources: str) -> dict:
    return {"name": name, "image": "busybox", "resources": {"limits": dict(resources), "requests": dict(resources)}}


def template(*containers: dict, labels: dict | None = None, annotations: dict | None = None, **spec) -> dict:
    meta: dict = {"labels": labels or {"app": "x"}}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {"containers": list(containers) or [container(cpu="1")], **spec}}


def job(*templates: dict, name: str = "j", queue: str = "default") -> dict:
    return vcjob(name, "ns").queue(queue).tasks(*(task(f"t{i}", 1, template=t) for i, t in enumerate(templates))).build()


def pod(spec: dict, annotations: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns",
                                                             "annotations": annotations or {}}, "spec": spec}


# -- per-Job template memo ---------------------------------------------------------------------------------------------

BAD_NAME = template(container("Bad_Name", cpu="1"))
BAD_VGPU = template(container(**{"volcano.sh/vgpu-memory": "-5"}))
ONE = template(container(cpu=1))
TRUE = template(container(cpu=True))          # == ONE in Python, not in JSON: must be checked on its own
SHARED = [
    ("one-valid-template-shared", [template()] * 3),
    ("invalid-template-shared", [BAD_NAME] * 3),
    ("invalid-template-equal-copies", [copy.deepcopy(BAD_NAME) for _ in range(3)]),
    ("device-errors-shared", [BAD_VGPU, copy.deepcopy(BAD_VGPU), template()]),
    ("python-equal-json-different", [ONE, TRUE, ONE]),
    ("mixed", [template(), BAD_NAME, template(), BAD_VGPU, BAD_NAME]),
    ("hugepages-without-cpu", [template(container(**{"hugepages-2Mi": "2Mi"}))] * 2),
]


def _validate(j: dict, config: AdmissionConfig = CONFIG) -> str:
    return rules.validate_create(j, lookups=StaticLookups(), namespace="ns", device_check=devices.check_pod_spec,
                                 config=config)


@pytest.mark.parametrize("templates", [c[1] for c in SHARED], ids=[c[0] for c in SHARED])
def test_template_memo_answers_like_checking_every_task(templates, monkeypatch):
    memo = _validate(job(*templates))
    monkeypatch.setattr(rules._TemplateChecks, "_MAX_SEEN", 0)      # nothing remembered: every task checked
    assert memo == _validate(job(*templates))


def test_template_memo_messages_keep_each_task_index():
    msg = _validate(job(BAD_NAME, BAD_NAME, BAD_VGPU, BAD_VGPU))
    for i in (0, 1):
        assert f'spec.task[{i}].template.spec.containers[0].name: Invalid value: "Bad_Name"' in msg
    for i in (2, 3):
        assert f" spec.task[{i}].template: container \"main\": volcano.sh/vgpu-memory must be" in msg
    assert _validate(job(ONE, ONE)) == ""
    assert _validate(job(ONE, TRUE)).startswith("spec.task[1].template.spec.containers[0].resources.limits[cpu]: "
                                                 "Invalid value: true: cannot parse 'true'")


def test_shared_template_is_checked_once(monkeypatch):
    calls = []
    original = k8s.pod_template_errors
    monkeypatch.setattr(k8s, "pod_template_errors", lambda t: calls.append(t) or original(t))
    _validate(job(template(), template(), template(), BAD_NAME))
    assert len(calls) == 2


# -- device-free short cut -------------------------------------------------------------------------------------------

GPU_ANN = {"nvidia.com/use-gputype": "A100-40GB", "volcano.sh/vgpu-mode": "mig"}
DEVICE_CASES = [
    ("plain", {"containers": [container(cpu="1", memory="1Gi")]}, None),
    ("no-resources", {"containers": [{"name": "c", "image": "x"}]}, None),
    ("init-container-plain", {"initContainers": [container(cpu="1")], "containers": [container()]}, None),
    ("vgpu", {"containers": [container(**{"volcano.sh/vgpu-memory": "1024"})]}, None),
    ("vgpu-in-init", {"initContainers": [container(**{"volcano.sh/vgpu-number": "0"})], "containers": [container()]},
     None),
    ("mig-resource", {"containers": [container(**{"nvidia.com/mig-1g.5gb": "2"})]}, None),
    ("whole-gpu-and-rdma", {"containers": [container(**{"nvidia.com/gpu": "1", "koordinator.sh/rdma": "300"})]}, None),
    ("plain-with-mode-annotation", {"containers": [container(cpu="1")]}, {"volcano.sh/vgpu-mode": "bogus"}),
    ("plain-with-gpu-annotations", {"containers": [container(cpu="1")]}, GPU_ANN),
    ("plain-demanding-pairing", {"containers": [container(cpu="1")]}, {"lahar.sh/rdma-pairing": "true"}),
    ("plain-bad-joint-annotation", {"containers": [container(cpu="1")]},
     {devices.JOINT_ALLOCATE_ANNOTATION: "{bad"}),
    ("plain-unrelated-annotation", {"containers": [container(cpu="1")]}, {"team": "a"}),
    ("limits-as-pairs", {"containers": [{"name": "c", "resources": {"limits": [["nvidia.com/gpu", "1"]]}}]}, None),
    ("containers-not-a-list", {"containers": {"name": "c"}}, None),
    ("node-selector-product", {"containers": [container(cpu="1")], "nodeSelector": {"nvidia.com/gpu.product": "H100"}},
     None),
    ("privileged-plain", {"containers": [{**container(cpu="1"), "securityContext": {"privileged": True}}]}, None),
]


def _outcome(fn):
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001 - the comparison includes crashes (they become denials upstream)
        return type(e).__name__, str(e)


@pytest.mark.parametrize("config", [CONFIG, PAIRING], ids=["default", "pairing-one-to-one"])
@pytest.mark.parametrize(("spec", "annotations"), [c[1:] for c in DEVICE_CASES], ids=[c[0] for c in DEVICE_CASES])
def test_device_short_cut_answers_like_the_full_rules(spec, annotations, config, monkeypatch):
    fast = (_outcome(lambda: devices.check_pod_spec(copy.deepcopy(spec), config=config, annotations=annotations)),
            _outcome(lambda: devices.normalize_pod(pod(copy.deepcopy(spec), annotations), config=config)))
    monkeypatch.setattr(devices, "_device_free", lambda spec, rel: False)
    full = (_outcome(lambda: devices.check_pod_spec(copy.deepcopy(spec), config=config, annotations=annotations)),
            _outcome(lambda: devices.normalize_pod(pod(copy.deepcopy(spec), annotations), config=config)))
    assert fast == full


SHORT_CUT = [
    ("plain", {"containers": [container(cpu="1")]}, True),
    ("vgpu", {"containers": [container(**{"volcano.sh/vgpu-cores": "50"})]}, False),
    ("mig-prefix", {"containers": [container(**{"nvidia.com/mig-2g.10gb": "1"})]}, False),
    ("koordinator", {"containers": [container(**{"koordinator.sh/gpu-core": "50"})]}, False),
    ("resources-not-a-map", {"containers": [{"name": "c", "resources": "x"}]}, False),
    ("selector-not-a-map", {"containers": [container()], "nodeSelector": ["x"]}, False),
    ("spec-not-a-map", [], False),
]


@pytest.mark.parametrize(("spec", "free"), [c[1:] for c in SHORT_CUT], ids=[c[0] for c in SHORT_CUT])
def test_device_free_is_conservative(spec, free):
    assert devices._device_free(spec, devices._relevant(CONFIG)) is free


# -- memoized name checks ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("check", [podspec.is_qualified_name, podspec.is_dns1123_label, podspec.is_dns1123_subdomain,
                                   podspec.is_valid_label_value], ids=lambda f: f.__name__)
def test_memoized_name_checks_return_fresh_lists(check):
    first = check("Not A Name!")
    assert first and first is not check("Not A Name!")
    first.append("changed")
    assert check("Not A Name!") == first[:-1]
