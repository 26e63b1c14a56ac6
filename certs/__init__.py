"""Certificates: a small CA and the serving/client certificates it signs.

Used by devcluster (HTTPS serving) and webhooks (caBundle); see `certs.authority`.
"""

from certs.authority import KeyPair, issue, load, new_ca, write

__all__ = ["KeyPair", "issue", "load", "new_ca", "write"]
