"""`/pods/validate` on Koordinator's `scheduling.koordinator.sh/gpu-partition-spec`: a malformed spec is refused with
the annotation and the field named (the scheduler would otherwise leave the pod pending with the same reason)."""

from __future__ import annotations

import pytest

from lahar.policies.admission import AdmissionConfig
from lahar.webhooks import devices

KEY = devices.PARTITION_SPEC_ANNOTATION


def _errors(raw: str) -> list[str]:
    spec = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
    return devices.check_pod_spec(spec, config=AdmissionConfig(), annotations={KEY: raw})


CASES = [
    ("restricted", '{"allocatePolicy": "Restricted"}', []),
    ("best-effort-with-bandwidth", '{"allocatePolicy": "BestEffort", "ringBusBandwidth": "400Gi"}', []),
    ("empty", "{}", []),
    ("unknown-policy", '{"allocatePolicy": "Sometimes"}',
     [f"annotation {KEY}: allocatePolicy must be Restricted or BestEffort, got 'Sometimes'"]),
    ("bandwidth-not-a-quantity", '{"ringBusBandwidth": "fast"}',
     [f"annotation {KEY}: ringBusBandwidth 'fast' is not a quantity"]),
    ("not-an-object", "[]", [f"annotation {KEY} must be a JSON object"]),
    ("not-json", "{", [f"annotation {KEY} is not valid JSON: Expecting property name enclosed in double quotes: "
                       "line 1 column 2 (char 1)"]),
]


@pytest.mark.parametrize(("raw", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_partition_spec_validation(raw: str, expected: list[str]) -> None:
    assert _errors(raw) == expected
