"""Test PKI: a CA, a server certificate for 127.0.0.1 and a client certificate (cryptography)."""

from __future__ import annotations

import datetime
import ipaddress
import os
from typing import Dict

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def _cert(subject: str, key, issuer_name, issuer_key, *, ca: bool = False, usage=None, ips=(), dns=()):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .issuer_name(issuer_name or x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if usage:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    if ips:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
            + [x509.DNSName(name) for name in ('localhost',) + tuple(dns)]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(directory: str, ips=('127.0.0.1',), dns=()) -> Dict[str, str]:
    """Write ca.crt, server.crt/key (for `ips` and `dns` besides localhost) and client.crt/key; returns their
    paths."""
    os.makedirs(directory, exist_ok=True)
    ca_key = _key()
    ca = _cert('steward-test-ca', ca_key, None, ca_key, ca=True)
    server_key, client_key = _key(), _key()
    server = _cert('etcd-server', server_key, ca.subject, ca_key,
                   usage=[ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH], ips=ips, dns=dns)
    client = _cert('root', client_key, ca.subject, ca_key, usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    files = {'ca': ca.public_bytes(serialization.Encoding.PEM),
             'server_cert': server.public_bytes(serialization.Encoding.PEM), 'server_key': _pem_key(server_key),
             'client_cert': client.public_bytes(serialization.Encoding.PEM), 'client_key': _pem_key(client_key)}
    names = {'ca': 'ca.crt', 'server_cert': 'server.crt', 'server_key': 'server.key', 'client_cert': 'client.crt',
             'client_key': 'client.key'}
    paths = {}
    for kind, data in files.items():
        paths[kind] = os.path.join(directory, names[kind])
        with open(paths[kind], 'wb') as f:
            f.write(data)
    return paths


def ca_pem() -> Dict[str, str]:
    """A self-signed CA as PEM text, {ca.crt, ca.key} (the `authority` the provisioning modules take)."""
    key = _key()
    cert = _cert('steward-test-ca', key, None, key, ca=True)
    return {'ca.crt': cert.public_bytes(serialization.Encoding.PEM).decode(), 'ca.key': _pem_key(key).decode()}
