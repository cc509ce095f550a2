"""``minikafka certs``: a development CA, a broker certificate and client certificates, as PEM.

    minikafka certs --out certs --host localhost --host 127.0.0.1 --client alice --client bob

writes ``ca.pem`` / ``ca.key`` (the CA), ``broker.pem`` (key + chain, for
``ssl.keystore.location``), ``broker.crt`` / ``broker.key`` and, per client, ``<name>.pem``
(key + chain), ``<name>.crt`` / ``<name>.key`` with subject ``CN=<name>`` (so the default
``ssl.principal.mapping.rules`` makes the principal ``User:CN=<name>``).  Keys are EC P-256,
written with mode 0600; certificates are valid for ``--days`` (default 365).  For development and
tests only: the CA key sits next to everything else.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem_cert(cert) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def _name(cn: str):
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _build(subject: str, key, issuer_name, issuer_key, days: int, *, ca: bool = False,
           hosts: list[str] = (), client: bool = False):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID

    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(_name(subject))
               .issuer_name(issuer_name or _name(subject))
               .public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False), critical=True)
    else:
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [ExtendedKeyUsageOID.SERVER_AUTH,
                                                                   ExtendedKeyUsageOID.CLIENT_AUTH]
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if hosts:
        names = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key or key, hashes.SHA256())


def _write(path: Path, data: bytes, private: bool = False) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def generate(out_dir, hosts=("localhost", "127.0.0.1"), clients=(), days: int = 365,
             ca_name: str = "minikafka-dev-ca", broker_name: str = "minikafka-broker") -> dict[str, Path]:
    """Write the CA, broker and client files into ``out_dir``; returns the paths by role."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_cert = _build(ca_name, ca_key, None, None, days, ca=True)
    _write(out / "ca.pem", _pem_cert(ca_cert))
    _write(out / "ca.key", _pem_key(ca_key), private=True)
    paths = {"ca": out / "ca.pem", "ca_key": out / "ca.key"}
    entries = [("broker", broker_name, list(hosts), False)] + [(c, c, [], True) for c in clients]
    for role, cn, names, client in entries:
        key = _key()
        cert = _build(cn, key, ca_cert.subject, ca_key, days, hosts=names, client=client)
        _write(out / f"{role}.crt", _pem_cert(cert) + _pem_cert(ca_cert))
        _write(out / f"{role}.key", _pem_key(key), private=True)
        _write(out / f"{role}.pem", _pem_key(key) + _pem_cert(cert) + _pem_cert(ca_cert), private=True)
        paths[role] = out / f"{role}.pem"
    return paths


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("certs", help="generate a development CA, broker and client certificates")
    parser.add_argument("--out", default="certs", help="output directory (default ./certs)")
    parser.add_argument("--host", action="append", default=None,
                        help="broker host name or IP for the certificate (repeat; default localhost, 127.0.0.1)")
    parser.add_argument("--client", action="append", default=[], help="client certificate CN (repeat)")
    parser.add_argument("--days", type=int, default=365)


def run(args) -> int:
    paths = generate(args.out, args.host or ["localhost", "127.0.0.1"], args.client, args.days)
    for role, path in paths.items():
        print(f"{role}: {path}")
    out = os.path.abspath(args.out)
    print("\nbroker settings (SSL listener):\n"
          f"  listeners=SSL://127.0.0.1:9093\n  ssl.keystore.location={out}/broker.pem\n"
          f"  ssl.truststore.location={out}/ca.pem   # for ssl.client.auth=required\n")
    return 0
