"""A small certificate authority: a self-signed CA, and serving/client certificates it signs (`cryptography`).

Sits under devcluster (its HTTPS serving certificate) and the webhooks (their `caBundle`); PEM in, PEM out,
so the files are exactly what kubeconfig, uvicorn and AdmissionWebhook `caBundle` fields expect.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["KeyPair", "hosts", "is_signed_by", "issue", "load", "new_ca", "serving_hosts", "split_pem", "write"]


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, both PEM."""

    cert_pem: bytes
    key_pem: bytes

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    @property
    def private_key(self) -> ec.EllipticCurvePrivateKey:
        key = serialization.load_pem_private_key(self.key_pem, password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return key


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _validity(days: int, now: dt.datetime | None = None) -> tuple[dt.datetime, dt.datetime]:
    now = now or dt.datetime.now(dt.UTC)
    return now - dt.timedelta(minutes=5), now + dt.timedelta(days=days)


def new_ca(common_name: str, days: int = 3650, *, now: dt.datetime | None = None) -> KeyPair:
    """A self-signed CA certificate (ECDSA P-256) allowed to sign certificates, valid from `now` (default: now)."""
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    not_before, not_after = _validity(days, now)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def issue(ca: KeyPair, *, common_name: str, hosts: list[str] | tuple[str, ...] = (), days: int = 365,
          client: bool = False, organizations: tuple[str, ...] = (), now: dt.datetime | None = None) -> KeyPair:
    """A leaf certificate signed by `ca`: serving (SANs from `hosts`, DNS names or IPs) or, with `client`, client auth."""
    key = _new_key()
    ca_cert, ca_key = ca.certificate, ca.private_key
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    not_before, not_after = _validity(days, now)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attrs))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=False,
                                     crl_sign=False, content_commitment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client
                                              else ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def write(pair: KeyPair, cert_path: str | os.PathLike[str], key_path: str | os.PathLike[str]) -> None:
    """Write both PEM files (the key readable by the owner only), creating parent directories."""
    cert_path, key_path = Path(cert_path), Path(key_path)
    cert_path.parent.mkdir(parents=True, exist_ok=True)
    key_path.parent.mkdir(parents=True, exist_ok=True)
    cert_path.write_bytes(pair.cert_pem)
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pair.key_pem)


def load(cert_path: str | os.PathLike[str], key_path: str | os.PathLike[str]) -> KeyPair:
    """Read a pair written by `write` (or any PEM certificate + unencrypted key)."""
    return KeyPair(Path(cert_path).read_bytes(), Path(key_path).read_bytes())


def serving_hosts(service: str, namespace: str) -> list[str]:
    """The names a webhook Service is reached by, plus loopback: what `lahar certs` puts in the serving SANs."""
    svc = f"{service}.{namespace}.svc"
    return [service, f"{service}.{namespace}", svc, f"{svc}.cluster.local", "localhost", "127.0.0.1"]


def hosts(cert_pem: bytes) -> list[str]:
    """The DNS names and IP addresses in a certificate's subjectAltName, in order (empty without the extension)."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    out: list[str] = []
    for name in san:
        if isinstance(name, x509.DNSName):
            out.append(name.value)
        elif isinstance(name, x509.IPAddress):
            out.append(str(name.value))
    return out


def is_signed_by(cert_pem: bytes, ca_cert_pem: bytes) -> bool:
    """True when `ca_cert_pem`'s key signed `cert_pem` (the first certificate of each)."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    ca = x509.load_pem_x509_certificate(ca_cert_pem)
    if cert.issuer != ca.subject:
        return False
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def split_pem(bundle: bytes) -> list[bytes]:
    """The PEM certificates of a bundle, each with its BEGIN/END lines and a trailing newline."""
    out: list[bytes] = []
    begin, end = b"-----BEGIN CERTIFICATE-----", b"-----END CERTIFICATE-----"
    pos = 0
    while True:
        start = bundle.find(begin, pos)
        if start < 0:
            return out
        stop = bundle.find(end, start)
        if stop < 0:
            return out
        pos = stop + len(end)
        out.append(bundle[start:pos] + b"\n")
