# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Keys and X.509 certificates with `cryptography` (no openssl subprocess): certificate authorities, leaf
certificates with SANs and usages, what a certificate says, and whether one on disk can be kept.

Time is an input (`now`, an aware datetime): tests and what-if runs pass their own clock.
Lifetimes follow kubeadm: CAs 10 years, leaves 1 year (both options). A CA is renewed only when asked,
and then with its own key, so every certificate it signed stays valid.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import math
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import PkiError

try:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    HAS_CRYPTOGRAPHY = True
except ImportError:  # reported by the module through missing_required_lib
    HAS_CRYPTOGRAPHY = False

SERVER = 'server'
CLIENT = 'client'
# Certificates start this long before `now`, so a node whose clock is a little behind accepts them.
BACKDATE = datetime.timedelta(minutes=5)
DAY = datetime.timedelta(days=1)


@dataclasses.dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, both PEM."""
    cert_pem: bytes
    key_pem: bytes


@dataclasses.dataclass(frozen=True)
class Subject:
    """What a leaf certificate must say: its subject, SANs and extended key usages."""
    common_name: str
    organizations: Tuple[str, ...] = ()
    dns_names: Tuple[str, ...] = ()
    ip_addresses: Tuple[str, ...] = ()
    usages: Tuple[str, ...] = (CLIENT,)


@dataclasses.dataclass(frozen=True)
class Decision:
    """keep, issue (missing or wrong) or renew (right but due); `reason` says why, in words."""
    action: str
    reason: str

    @property
    def changes(self) -> bool:
        return self.action != 'keep'


def _need() -> None:
    if not HAS_CRYPTOGRAPHY:
        raise PkiError('the python library cryptography is required')


# --- keys --------------------------------------------------------------------------------------
def generate_key(algorithm: str) -> Any:
    _need()
    if algorithm == 'rsa-2048':
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if algorithm == 'ecdsa-p256':
        return ec.generate_private_key(ec.SECP256R1())
    raise PkiError('unknown key algorithm %r' % algorithm)


def private_pem(key: Any) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def public_pem(key: Any) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def load_key(pem: bytes, where: str = '') -> Any:
    _need()
    try:
        return serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as exc:
        raise PkiError('%s: not an unencrypted PEM private key (%s)' % (where or 'key', exc), where) from None


def load_cert(pem: bytes, where: str = '') -> Any:
    _need()
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise PkiError('%s: not a PEM certificate (%s)' % (where or 'certificate', exc), where) from None


def split_pem(data: bytes) -> Tuple[bytes, bytes]:
    """(certificate, key) from one file holding both (kubelet-client-current.pem)."""
    cert, key = b'', b''
    for block in data.split(b'-----END ')[:-1]:
        begin = block.find(b'-----BEGIN ')
        if begin < 0:
            continue
        kind = block[begin + 11:block.find(b'-----', begin + 11)]
        pem = block[begin:] + b'-----END ' + kind + b'-----\n'
        if kind == b'CERTIFICATE' and not cert:
            cert = pem
        elif kind.endswith(b'PRIVATE KEY') and not key:
            key = pem
    return cert, key


def _same_public_key(cert: Any, key: Any) -> bool:
    return public_pem(key) == cert.public_key().public_bytes(serialization.Encoding.PEM,
                                                             serialization.PublicFormat.SubjectPublicKeyInfo)


# --- issuing -----------------------------------------------------------------------------------
def _name(common_name: str, organizations: Tuple[str, ...] = ()) -> Any:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _key_usage(ca: bool, rsa_key: bool) -> Any:
    return x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=rsa_key and not ca,
                         data_encipherment=False, key_agreement=False, key_cert_sign=ca, crl_sign=False,
                         encipher_only=False, decipher_only=False)


def _sign(builder: Any, signer: Any) -> Any:
    return builder.sign(signer, hashes.SHA256())


def new_ca(common_name: str, algorithm: str, now: datetime.datetime, days: int, key: Any = None) -> KeyPair:
    """A self-signed CA (a new key unless `key` is given: renewing a CA keeps its key)."""
    _need()
    key = key if key is not None else generate_key(algorithm)
    name = _name(common_name)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - BACKDATE).not_valid_after(now + days * DAY)
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(_key_usage(True, isinstance(key, rsa.RSAPrivateKey)), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
    return KeyPair(_sign(builder, key).public_bytes(serialization.Encoding.PEM), private_pem(key))


def issue(subject: Subject, ca: KeyPair, algorithm: str, now: datetime.datetime, days: int, key: Any = None) -> KeyPair:
    """A new key (unless `key` is given: a renewal keeps it) and a leaf certificate for it, signed by `ca`, valid
    `days` (never past the CA's own end)."""
    _need()
    ca_cert = load_cert(ca.cert_pem, 'CA certificate')
    ca_key = load_key(ca.key_pem, 'CA key')
    key = key if key is not None else generate_key(algorithm)
    not_after = min(now + days * DAY, ca_cert.not_valid_after_utc)
    usages = [{SERVER: ExtendedKeyUsageOID.SERVER_AUTH, CLIENT: ExtendedKeyUsageOID.CLIENT_AUTH}[u]
              for u in subject.usages]
    builder = (x509.CertificateBuilder().subject_name(_name(subject.common_name, subject.organizations))
               .issuer_name(ca_cert.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - BACKDATE).not_valid_after(not_after)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(_key_usage(False, isinstance(key, rsa.RSAPrivateKey)), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False))
    sans = [x509.DNSName(d) for d in subject.dns_names] + [x509.IPAddress(ipaddress.ip_address(i))
                                                           for i in subject.ip_addresses]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return KeyPair(_sign(builder, ca_key).public_bytes(serialization.Encoding.PEM), private_pem(key))


def new_service_account_key(algorithm: str) -> Tuple[bytes, bytes]:
    """(private PEM, public PEM) for signing service account tokens (sa.key / sa.pub)."""
    key = generate_key(algorithm)
    return private_pem(key), public_pem(key)


# --- reading -----------------------------------------------------------------------------------
def _names(cert: Any) -> Tuple[List[str], List[str]]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], []
    return sorted(san.get_values_for_type(x509.DNSName)), sorted(str(i) for i in san.get_values_for_type(x509.IPAddress))


def _usages(cert: Any) -> List[str]:
    try:
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return []
    names = {ExtendedKeyUsageOID.SERVER_AUTH: SERVER, ExtendedKeyUsageOID.CLIENT_AUTH: CLIENT}
    return sorted(names.get(oid, oid.dotted_string) for oid in eku)


def _attr(name: Any, oid: Any) -> List[str]:
    return [a.value for a in name.get_attributes_for_oid(oid)]


def is_ca(cert: Any) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def describe(cert_pem: bytes, now: datetime.datetime, where: str = '') -> Dict[str, Any]:
    """What a certificate says, as plain data (cert_info's row): subject, issuer, SANs, validity, days left."""
    cert = load_cert(cert_pem, where)
    dns, ips = _names(cert)
    not_after = cert.not_valid_after_utc
    left = (not_after - now).total_seconds() / 86400.0
    return {
        'subject': cert.subject.rfc4514_string(),
        'common_name': (_attr(cert.subject, NameOID.COMMON_NAME) or [''])[0],
        'organizations': _attr(cert.subject, NameOID.ORGANIZATION_NAME),
        'issuer': cert.issuer.rfc4514_string(),
        'dns_names': dns,
        'ip_addresses': ips,
        'usages': _usages(cert),
        'is_ca': is_ca(cert),
        'serial': '%x' % cert.serial_number,
        'not_before': format_rfc3339(cert.not_valid_before_utc),
        'not_after': format_rfc3339(not_after),
        'days_left': math.floor(left),
        'expired': left <= 0,
    }


def issued_by(cert: Any, ca_cert: Any) -> bool:
    """True when `ca_cert` signed `cert` (the signature verifies with the CA's public key)."""
    if cert.issuer != ca_cert.subject:
        return False
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _san_change(cert: Any, subject: Subject) -> str:
    dns, ips = _names(cert)
    have = set(dns) | set(ips)
    want = set(subject.dns_names) | {str(ipaddress.ip_address(i)) for i in subject.ip_addresses}
    if have == want:
        return ''
    added, gone = sorted(want - have), sorted(have - want)
    return 'SANs changed (%s)' % ', '.join(['+' + a for a in added] + ['-' + g for g in gone])


def check(existing: Optional[KeyPair], subject: Subject, ca: KeyPair, now: datetime.datetime,
          renew_before_days: int, where: str = '') -> Decision:
    """Can the certificate on disk stay? Missing, unreadable, signed by another CA, for another key, with another
    subject, SANs or usages: issue a new one. Right but expiring within `renew_before_days`: renew. Else keep."""
    if existing is None or not existing.cert_pem or not existing.key_pem:
        return Decision('issue', 'missing')
    try:
        cert = load_cert(existing.cert_pem, where)
        key = load_key(existing.key_pem, where)
    except PkiError as exc:
        return Decision('issue', 'unreadable: %s' % exc)
    if not _same_public_key(cert, key):
        return Decision('issue', 'the key does not match the certificate')
    ca_cert = load_cert(ca.cert_pem, 'CA certificate')
    if not issued_by(cert, ca_cert):
        return Decision('issue', 'not signed by the current CA (%s)' % ca_cert.subject.rfc4514_string())
    if _attr(cert.subject, NameOID.COMMON_NAME) != [subject.common_name] or \
            sorted(_attr(cert.subject, NameOID.ORGANIZATION_NAME)) != sorted(subject.organizations):
        return Decision('issue', 'subject changed (%s)' % cert.subject.rfc4514_string())
    san = _san_change(cert, subject)
    if san:
        return Decision('issue', san)
    if _usages(cert) != sorted(subject.usages):
        return Decision('issue', 'usages changed (%s)' % ', '.join(_usages(cert)))
    return _due(cert, now, renew_before_days, 'renew')


def _due(cert: Any, now: datetime.datetime, renew_before_days: int, action: str) -> Decision:
    left = cert.not_valid_after_utc - now
    if left <= datetime.timedelta(0):
        return Decision(action, 'expired on %s' % cert.not_valid_after_utc.strftime('%Y-%m-%d'))
    if left <= renew_before_days * DAY:
        return Decision(action, 'expires in %d days (on %s), within renew_before_days=%d' % (
            left.days, cert.not_valid_after_utc.strftime('%Y-%m-%d'), renew_before_days))
    return Decision('keep', 'valid until %s' % cert.not_valid_after_utc.strftime('%Y-%m-%d'))


def check_ca(existing: KeyPair, now: datetime.datetime, renew_before_days: int, renew: bool, where: str = '') -> Decision:
    """A CA on disk is kept unless `renew` is asked and it is due; it is never replaced by a new key here."""
    cert = load_cert(existing.cert_pem, where)
    key = load_key(existing.key_pem, where)
    if not _same_public_key(cert, key):
        raise PkiError('%s: the CA key does not match the CA certificate' % where, where)
    if not is_ca(cert):
        raise PkiError('%s: not a CA certificate (basicConstraints CA:FALSE)' % where, where)
    decision = _due(cert, now, renew_before_days, 'renew')
    if decision.changes and not renew:
        return Decision('keep', decision.reason + '; CA renewal not asked (renew_ca)')
    return decision


def renew_ca(existing: KeyPair, now: datetime.datetime, days: int) -> KeyPair:
    """The same CA (subject and key) valid for `days` from `now`: what it signed keeps verifying."""
    cert = load_cert(existing.cert_pem, 'CA certificate')
    key = load_key(existing.key_pem, 'CA key')
    return new_ca((_attr(cert.subject, NameOID.COMMON_NAME) or ['kubernetes'])[0], '', now, days, key=key)


def renew_leaf(existing: KeyPair, ca: KeyPair, now: datetime.datetime, days: int, where: str = '') -> KeyPair:
    """The same leaf again, valid `days` from `now`: its key, subject, SANs and usages kept, signed by `ca` (which
    must be the CA that signed it: a certificate from another CA is not ours to renew in place). What `check` asks
    of a certificate still holds afterwards, so a later join keeps it byte for byte."""
    _need()
    cert = load_cert(existing.cert_pem, where)
    key = load_key(existing.key_pem, where)
    if not _same_public_key(cert, key):
        raise PkiError('%s: the key does not match the certificate' % where, where)
    if not issued_by(cert, load_cert(ca.cert_pem, 'CA certificate')):
        raise PkiError('%s: not signed by the CA on this node (%s)' % (where, cert.issuer.rfc4514_string()), where)
    dns, ips = _names(cert)
    subject = Subject((_attr(cert.subject, NameOID.COMMON_NAME) or [''])[0],
                      tuple(_attr(cert.subject, NameOID.ORGANIZATION_NAME)), tuple(dns), tuple(ips),
                      tuple(u for u in _usages(cert) if u in (SERVER, CLIENT)))
    return issue(subject, ca, '', now, days, key=key)


def verify_chain(cert_pem: bytes, ca_pem: bytes) -> bool:
    return issued_by(load_cert(cert_pem), load_cert(ca_pem))
