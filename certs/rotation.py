"""Certificate renewal timing and hot reload: when a certificate is due, and a running TLS server picking up new files.

Under `lahar certs ensure` (which decides with `needs_renewal`) and `webhooks/server.py` (which runs a `CertReloader`
on the uvicorn server's SSLContext, so a renewed certificate serves new handshakes while open connections go on).

How the swap works, and why not `load_cert_chain` on the live context: OpenSSL's `SSL_CTX` must not be changed
while another thread creates connections from it (`SSL_new` copies the certificate out of the context; swapping it
concurrently is a use-after-free), and a failed `load_cert_chain` half-way (new certificate, wrong key) leaves the
context without a usable certificate. So the reloader builds a FRESH server context from the new files (private
until complete, checked that key and certificate match), publishes it by one reference assignment, and the live
context's `sni_callback` — run by OpenSSL inside every ClientHello, on the server's own thread, with or without SNI
— moves each new connection onto the newest context (`SSL_set_SSL_CTX`). Established connections keep theirs.

Usage with uvicorn (what `webhooks/server.py` does):

    config = uvicorn.Config(app, ssl_certfile=cert, ssl_keyfile=key, ...)
    config.load()                                  # creates config.ssl, the context the server will use
    with rotation.CertReloader(config.ssl, cert, key, interval=1.0):
        uvicorn.Server(config).run()
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import ssl
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

__all__ = ["CertReloader", "RENEW_FRACTION", "lifetime_left", "needs_renewal", "renewal_due_at"]

log = logging.getLogger(__name__)

RENEW_FRACTION = 1 / 3
"""Renew when less than this fraction of a certificate's lifetime (notBefore → notAfter) remains."""


def _certificate(cert_pem: bytes | str | x509.Certificate) -> x509.Certificate:
    if isinstance(cert_pem, x509.Certificate):
        return cert_pem
    data = cert_pem.encode() if isinstance(cert_pem, str) else cert_pem
    return x509.load_pem_x509_certificate(data)


def _aware(now: dt.datetime) -> dt.datetime:
    return now if now.tzinfo is not None else now.replace(tzinfo=dt.UTC)


def lifetime_left(cert_pem: bytes | str | x509.Certificate, now: dt.datetime) -> float:
    """The fraction of the certificate's lifetime still ahead at `now`: 1.0 at notBefore, 0.0 (or less) at notAfter."""
    cert = _certificate(cert_pem)
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    total = (end - start).total_seconds()
    if total <= 0:
        return 0.0
    return (end - _aware(now)).total_seconds() / total


def renewal_due_at(cert_pem: bytes | str | x509.Certificate) -> dt.datetime:
    """The instant from which `needs_renewal` is true: notAfter − lifetime/3."""
    cert = _certificate(cert_pem)
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return end - (end - start) * RENEW_FRACTION


def needs_renewal(cert_pem: bytes | str | x509.Certificate, now: dt.datetime) -> bool:
    """True when less than a third of the lifetime remains (or the certificate is not yet / no longer valid)."""
    cert = _certificate(cert_pem)
    now = _aware(now)
    if now < cert.not_valid_before_utc:
        return True
    return lifetime_left(cert, now) < RENEW_FRACTION


def _check_pair(cert_pem: bytes, key_pem: bytes) -> None:
    """Raise ValueError unless `key_pem` is the private key of the first certificate in `cert_pem`."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    key = serialization.load_pem_private_key(key_pem, password=None)
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if cert.public_key().public_bytes(*fmt) != key.public_key().public_bytes(*fmt):
        raise ValueError("the private key does not belong to the certificate")


class CertReloader:
    """Polls `cert_path`/`key_path` (mtime, size, then content hash) and serves new handshakes from the newest pair.

    `start()` runs the poll in a daemon thread every `interval` seconds; `check()` is one poll (returns True when
    a new pair was taken). A pair that does not load (half-written files, key not matching) is skipped and retried
    at the next poll; the previous certificate keeps serving. `reloads` and `failures` count outcomes;
    `on_reload(cert_pem)` is called after each swap.
    """

    def __init__(self, ssl_context: ssl.SSLContext, cert_path: str | os.PathLike[str],
                 key_path: str | os.PathLike[str], *, interval: float = 1.0,
                 on_reload: Callable[[bytes], None] | None = None,
                 ca_certs: str | os.PathLike[str] | None = None) -> None:
        self.ssl_context = ssl_context
        self.ca_certs = ca_certs  # client-certificate trust, when the server verifies clients (uvicorn ssl_ca_certs)
        self.cert_path = Path(cert_path)
        self.key_path = Path(key_path)
        self.interval = float(interval)
        self.on_reload = on_reload
        self.reloads = 0
        self.failures = 0
        self._failing = 0
        self.last_error: str = ""
        self._stat: tuple | None = None
        self._digest: str = ""
        self._current: ssl.SSLContext | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        try:
            cert, key = self.cert_path.read_bytes(), self.key_path.read_bytes()
            self._stat = self._stats()
            self._digest = self._hash(cert, key)
        except OSError:
            pass
        ssl_context.sni_callback = self._select_context

    # -- the handshake side (runs inside OpenSSL's ClientHello processing, on the server's thread) --------------

    def _select_context(self, ssl_object: ssl.SSLObject | ssl.SSLSocket, server_name: str | None,
                        _context: ssl.SSLContext) -> None:
        current = self._current
        if current is not None:
            ssl_object.context = current
        return None

    # -- the polling side ----------------------------------------------------------------------------------------

    def _stats(self) -> tuple:
        a, b = self.cert_path.stat(), self.key_path.stat()
        return (a.st_mtime_ns, a.st_size, a.st_ino, b.st_mtime_ns, b.st_size, b.st_ino)

    @staticmethod
    def _hash(cert: bytes, key: bytes) -> str:
        return hashlib.sha256(cert + b"\0" + key).hexdigest()

    def _build(self, cert: bytes, key: bytes) -> ssl.SSLContext:
        _check_pair(cert, key)
        fresh = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        fresh.minimum_version = self.ssl_context.minimum_version
        fresh.options = self.ssl_context.options
        fresh.verify_mode = self.ssl_context.verify_mode
        if self.ca_certs:
            fresh.load_verify_locations(self.ca_certs)
        with tempfile.TemporaryDirectory(prefix="lahar-certs-") as tmp:
            cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert_file.write_bytes(cert)
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(key)
            fresh.load_cert_chain(cert_file, key_file)
        return fresh

    def check(self, *, force: bool = False) -> bool:
        """One poll: True when the files changed to a new valid pair and new handshakes now use it. `force` takes
        the pair on disk even when it looks unchanged: right after start, the serving context may have been built
        from an earlier pair than the one this reloader first saw (a renewal between the two reads)."""
        with self._lock:
            try:
                stat = self._stats()
            except OSError as exc:
                self.last_error = f"cannot stat certificate files: {exc}"
                return False
            if stat == self._stat and not force:
                return False
            try:
                cert, key = self.cert_path.read_bytes(), self.key_path.read_bytes()
            except OSError as exc:
                self.last_error = f"cannot read certificate files: {exc}"
                return False
            digest = self._hash(cert, key)
            if digest == self._digest and not force:
                self._stat = stat
                return False
            try:
                fresh = self._build(cert, key)
            except (ValueError, ssl.SSLError, OSError) as exc:
                # half-written or mismatched pair: keep serving the old one and look again next time
                self.failures += 1
                self._failing += 1
                self.last_error = f"new certificate not loaded: {exc}"
                # one miss is normal (a poll between the key's and the certificate's rename); three are not
                log.log(logging.WARNING if self._failing >= 3 else logging.DEBUG,
                        "%s (%s, %s); still serving the previous certificate", self.last_error,
                        self.cert_path, self.key_path)
                return False
            self._failing = 0
            self._current = fresh
            self._stat, self._digest = stat, digest
            self.reloads += 1
            self.last_error = ""
        log.info("serving certificate reloaded from %s", self.cert_path)
        if self.on_reload is not None:
            self.on_reload(cert)
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.check()
            except Exception:  # noqa: BLE001 - the poller must outlive any one bad poll
                log.exception("certificate reload poll failed")

    def start(self) -> CertReloader:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="lahar-cert-reloader", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, self.interval * 2))
            self._thread = None

    def __enter__(self) -> CertReloader:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
