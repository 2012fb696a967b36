"""The simulated cluster's CA and the kubelets' serving certificate, made fresh per server.

What a cluster with `serverTLSBootstrap: true` has: kubelet serving certificates
signed by the cluster CA (the CA a pod finds in its ServiceAccount volume,
`ca.crt`), with the node's addresses as IP SANs and the names kubelet CSRs carry
(`system:node:<name>` in `system:nodes`). (Without serverTLSBootstrap a kubelet
signs its own, which no client verifies against the cluster CA; a second
`cluster_ca_signed` call makes a CA that did not sign this one, for that test.)

`cryptography` is already in the dependency tree (kubernetes -> google-auth).
Keys are P-256: generating one takes microseconds, an RSA key tens of ms.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class ServingFiles:
    ca_file: str  # PEM: the CA a client verifies with
    cert_file: str  # PEM: the kubelet's serving certificate
    key_file: str  # PEM: its key


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _builder(subject: x509.Name, issuer: x509.Name, key) -> x509.CertificateBuilder:
    now = datetime.now(UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=2))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )


def _serving(builder: x509.CertificateBuilder) -> x509.CertificateBuilder:
    return (
        builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True
        )  # digitalSignature only
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(LOOPBACK)), x509.DNSName("localhost")]),
            critical=False,
        )
    )


def _write(directory: Path, name: str, data: bytes) -> str:
    path = directory / name
    path.write_bytes(data)
    path.chmod(0o600)
    return str(path)


def _key_pem(key) -> bytes:
    pkcs8, none = serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    return key.private_bytes(serialization.Encoding.PEM, pkcs8, none)


def cluster_ca_signed(directory: str | Path) -> ServingFiles:
    """A cluster CA and a kubelet serving certificate for 127.0.0.1 it signed (serverTLSBootstrap)."""
    directory = Path(directory)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("sim-cluster-ca")
    ca = (
        _builder(ca_name, ca_name, ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    cert = (
        _serving(_builder(_name("system:node:sim", "system:nodes"), ca_name, key))
        .add_extension(aki, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return ServingFiles(
        _write(directory, "ca.crt", ca.public_bytes(pem)),
        _write(directory, "kubelet.crt", cert.public_bytes(pem)),
        _write(directory, "kubelet.key", _key_pem(key)),
    )
