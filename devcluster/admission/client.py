"""The webhook-call client: one kept-alive urllib3 pool per endpoint and caBundle (`_Transport.post`), orjson both
ways, Go's transport error texts, and the check of the AdmissionReview a webhook answers (`_verify_response`).

Part of `devcluster.admission`; `chain.WebhookAdmission` calls it.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import threading
from typing import Any

import orjson
import urllib3

from lahar.devcluster.admission.matching import Obj
from lahar.devcluster.admission.reviews import _go_duration

# ---------------------------------------------------------------------------------------------------------------
# transport


class _CallError(Exception):
    """The webhook could not be called or answered nonsense: `str(self)` is kube's ErrCallingWebhook reason."""


class _Transport:
    """Kept-alive urllib3 connection pools, one per (scheme, host, port, caBundle), each verifying the server against
    that bundle (system roots without one); a call reuses an idle TLS connection of its pool when there is one."""

    def __init__(self, *, maxsize: int = 32) -> None:
        self._maxsize = maxsize
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._pools: dict[tuple[str, str, int, str], urllib3.HTTPConnectionPool] = {}
        self._targets: dict[tuple[str, str], tuple[urllib3.HTTPConnectionPool, str]] = {}
        self._lock = threading.Lock()

    def _context(self, ca_bundle: str) -> ssl.SSLContext:
        ctx = self._contexts.get(ca_bundle)
        if ctx is None:
            if ca_bundle:
                try:
                    pem = base64.b64decode(ca_bundle).decode()
                    ctx = ssl.create_default_context(cadata=pem)
                except (ValueError, ssl.SSLError) as exc:
                    raise _CallError(f"failed to call webhook: unable to load root certificates: {exc}") from exc
            else:
                ctx = ssl.create_default_context()
            self._contexts[ca_bundle] = ctx
        return ctx

    def target(self, url: str, ca_bundle: str) -> tuple[urllib3.HTTPConnectionPool, str]:
        """The pool serving `url` and the request target (path and query) to send it."""
        key = (url, ca_bundle)
        found = self._targets.get(key)
        if found is not None:
            return found
        with self._lock:
            parsed = urllib3.util.parse_url(url)
            scheme = (parsed.scheme or "https").lower()
            host = parsed.host or ""
            port = parsed.port or (80 if scheme == "http" else 443)
            pool_key = (scheme, host, port, ca_bundle)
            pool = self._pools.get(pool_key)
            if pool is None:
                if scheme == "https":
                    pool = urllib3.HTTPSConnectionPool(host, port, ssl_context=self._context(ca_bundle),
                                                       maxsize=self._maxsize, block=False, retries=False)
                else:
                    pool = urllib3.HTTPConnectionPool(host, port, maxsize=self._maxsize, block=False, retries=False)
                self._pools[pool_key] = pool
            found = (pool, parsed.request_uri)
            self._targets[key] = found
            return found

    def close(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                pool.close()
            self._pools.clear()
            self._targets.clear()

    def post(self, url: str, body: Obj, *, ca_bundle: str, timeout: float) -> Obj:
        target = f"{url}?timeout={_go_duration(int(timeout))}"
        prefix = f'failed to call webhook: Post "{target}"'
        try:
            pool, path = self.target(target, ca_bundle)
            resp = pool.urlopen("POST", path, body=_dumps(body), headers=_POST_HEADERS,
                                timeout=urllib3.Timeout(total=timeout), retries=False, redirect=False)
        except _CallError:
            raise
        except urllib3.exceptions.NewConnectionError as exc:  # a ConnectTimeoutError too, for urllib3's history
            raise _CallError(f"{prefix}: {_go_transport_error(exc, url)}") from exc
        except (urllib3.exceptions.TimeoutError, TimeoutError) as exc:
            raise _CallError(f"{prefix}: context deadline exceeded") from exc
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise _CallError(f"{prefix}: {_go_transport_error(exc, url)}") from exc
        data = resp.data
        if resp.status < 200 or resp.status > 299:
            raise _CallError(f"failed to call webhook: {_http_status_text(resp.status, data)}")
        try:
            return _loads(data)
        except ValueError as exc:
            raise _CallError(f"failed to call webhook: {exc}") from exc


_POST_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, */*",
                 "User-Agent": "kube-apiserver-admission"}


def _dumps(body: Any) -> bytes:
    try:
        return orjson.dumps(body)
    except TypeError:  # integers beyond 64 bits, ...: the standard library takes them
        return json.dumps(body).encode()


def _loads(data: bytes) -> Any:
    """orjson, or the standard library where orjson refuses (its error texts, and NaN or huge numbers it accepts)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def _go_transport_error(exc: BaseException, url: str) -> str:
    """Render a transport failure the way Go's net/http words it."""
    parsed = urllib3.util.parse_url(url)
    host = parsed.host
    port = parsed.port or 443
    seen: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo:
        cur = todo.pop(0)
        if any(cur is s for s in seen):
            continue
        seen.append(cur)
        todo.extend(e for e in (cur.__cause__, cur.__context__, getattr(cur, "reason", None), *cur.args)
                    if isinstance(e, BaseException))
    for err in seen:
        if isinstance(err, ssl.SSLCertVerificationError):
            if "hostname" in (err.verify_message or "") or "IP address mismatch" in (err.verify_message or ""):
                return f"tls: failed to verify certificate: x509: certificate is not valid for {host}"
            return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        if isinstance(err, ssl.SSLError):
            return f"remote error: tls: {err.reason or err}"
        if isinstance(err, socket.gaierror):
            return f"dial tcp: lookup {host}: no such host"
        if isinstance(err, ConnectionRefusedError):
            return f"dial tcp {host}:{port}: connect: connection refused"
    text = str(exc)
    if "Name or service not known" in text or "nodename nor servname" in text or "No address associated" in text:
        return f"dial tcp: lookup {host}: no such host"
    if "refused" in text:
        return f"dial tcp {host}:{port}: connect: connection refused"
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return "tls: failed to verify certificate: x509: certificate signed by unknown authority"
    return text or type(exc).__name__


def _http_status_text(status: int, data: bytes) -> str:
    try:
        body = _loads(data)
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status" and body.get("message"):
        return str(body["message"])
    text = data.decode("utf-8", "replace").strip()
    if text:
        return f'an error on the server ("{text[:200]}") has prevented the request from succeeding'
    return f"the server responded with the status code {status} but did not return more information"


def _verify_response(review: Any, uid: str, *, mutating: bool) -> Obj:
    """kube's VerifyAdmissionResponse for v1 reviews; returns `response`."""
    if not isinstance(review, dict):
        raise _CallError("received invalid webhook response: expected an AdmissionReview object")
    if review.get("apiVersion") != "admission.k8s.io/v1" or review.get("kind") != "AdmissionReview":
        got = f"{review.get('apiVersion', '')}, Kind={review.get('kind', '')}"
        raise _CallError(f"received invalid webhook response: expected webhook response of "
                         f"admission.k8s.io/v1, Kind=AdmissionReview, got {got}")
    response = review.get("response")
    if not isinstance(response, dict):
        raise _CallError("webhook response was absent")
    if response.get("uid") != uid:
        raise _CallError(f'received invalid webhook response: expected response.uid="{uid}", '
                         f'got "{response.get("uid", "")}"')
    patch_type = response.get("patchType")
    if not mutating and (response.get("patch") or patch_type):
        raise _CallError("received invalid webhook response: validating webhooks may not return patches")
    if response.get("patch") and not patch_type:
        raise _CallError("received invalid webhook response: webhook returned response.patch but not "
                         "response.patchType")
    if patch_type and patch_type != "JSONPatch":
        raise _CallError(f'received invalid webhook response: webhook returned invalid response.patchType of '
                         f'"{patch_type}"')
    return response
