"""devcluster's admission chain: kube-apiserver's webhook dispatch over the store's AdmissionPort.

The store calls `mutate` then `validate` around every write; this module matches the registered
`admissionregistration.k8s.io/v1` webhooks (rules, selectors, CEL matchConditions) and calls them over HTTPS.

Matching and message building are pure functions (`rule_matches`, `selector_matches`, `webhook_matches`,
`build_review`, `denied`, `calling_failed`); `WebhookAdmission` is the thin shell that reads configurations from
the store (a watch drained on each request, so it costs nothing when nothing changed) and does the HTTP calls.
A call costs little CPU (a pod create goes through two, four while AdmissionPolicies exist): rules are matched before the namespace is looked up, one
kept-alive urllib3 pool per webhook endpoint and caBundle, orjson both ways, one copy of the object per patch, and
CEL conditions get only the variables they name, converted without celpy's generic type checks.
Differences from kube-apiserver, on purpose: `matchPolicy: Equivalent` does not map between equivalent
group-versions (devcluster serves one version per resource), `reinvocationPolicy` is ignored, the `authorizer`
CEL variable is absent, and when several validating webhooks deny, the first in configuration order is reported
(kube reports whichever finished first).

The package's modules, bottom up: `builtin` (kube-apiserver's DefaultTolerationSeconds and TaintNodesByCondition
plugins, run before the webhooks), `matching` (AdmissionCall, rules, selectors, order), `conditions` (CEL
matchConditions), `reviews` (the AdmissionReview sent, the errors answered, webhook URLs), `client` (the HTTPS
calls) and `chain` (`WebhookAdmission`, the shell).
"""

from __future__ import annotations

from lahar.devcluster.admission.chain import WebhookAdmission
from lahar.devcluster.admission.conditions import CelUnavailable, match_conditions, to_cel
from lahar.devcluster.admission.matching import (
    AdmissionCall,
    rule_matches,
    selector_matches,
    sorted_webhooks,
    webhook_matches,
)
from lahar.devcluster.admission.reviews import (
    build_review,
    calling_failed,
    denied,
    dry_run_unsupported,
    service_url,
    webhook_url,
)

__all__ = [
    "AdmissionCall",
    "CelUnavailable",
    "WebhookAdmission",
    "build_review",
    "calling_failed",
    "denied",
    "dry_run_unsupported",
    "match_conditions",
    "rule_matches",
    "selector_matches",
    "service_url",
    "sorted_webhooks",
    "to_cel",
    "webhook_matches",
    "webhook_url",
]
