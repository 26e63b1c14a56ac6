"""Certificates: a small CA and the serving/client certificates it signs, their renewal and hot reload.

Used by devcluster (HTTPS serving) and webhooks (caBundle): `certs.authority` (CA, issue, PEM files),
`certs.rotation` (when to renew; `CertReloader` for a live server), `certs.bundles` (Secret + webhook
configurations, behind `lahar certs ensure`).
"""

from lahar.certs.authority import KeyPair, issue, load, new_ca, write

__all__ = ["KeyPair", "issue", "load", "new_ca", "write"]
