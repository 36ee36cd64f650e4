# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An `Etcd`'s own client TLS Secrets -> a connection to its members' client URLs: the one home of that mapping, for
every controller-side caller that speaks to the members' etcd (the `etcd` loop's own member removal of an overdue
scale-down and its quorum-loss save of a surviving member, the `etcd-tasks` loop's on-demand maintenance).

druid's TLSConfig (ETCD-05) under `spec.etcd.clientUrlTls`: the CA in `tlsCASecretRef`, key `dataKey` (default
`ca.crt`); the client certificate etcd asks for (`client-cert-auth`) in `clientTLSSecretRef`, keys `tls.crt` and
`tls.key`. A missing reference, Secret or key is a ClientTLSError naming the field, the Secret and the key, before
anything is asked of etcd. The PEM material never touches disk here: `member_connection` hands it to the etcd
client's `pem_connection`, which keeps it in a 0700 temporary directory for the connection's life only (the HTTP
library and Python's ssl module load certificates and keys from files alone).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
from typing import Any, Callable, ContextManager, Iterable, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.druid.errors import DruidError
from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import TLS, EtcdSpec, SecretRef
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection, pem_connection

FIELD = 'spec.etcd.clientUrlTls'
CA_KEY = 'ca.crt'
CERT_KEY = 'tls.crt'
KEY_KEY = 'tls.key'

# (namespace, name) -> the Secret as the API returns it, or None when it does not exist
ReadSecret = Callable[[str, str], Optional[Mapping[str, Any]]]


class ClientTLSError(DruidError):
    """The Etcd's client TLS material cannot be had: `field` (the TLSConfig field), `secret` ('<ns>/<name>', '' when
    no reference is given) and `key` say which."""

    def __init__(self, message: str, field: str, secret: str = '', key: str = ''):
        super().__init__(message)
        self.field, self.secret, self.key = field, secret, key


@dataclasses.dataclass(frozen=True)
class SecretKey:
    """One key of one Secret a TLSConfig names; `field` is where the reference is (for messages)."""
    field: str
    namespace: str
    name: str
    key: str


@dataclasses.dataclass(frozen=True)
class ClientPEM:
    """PEM bytes of a CA, a client certificate and its key (the key is left out of repr: it must reach no log)."""
    ca: bytes
    cert: bytes
    key: bytes = dataclasses.field(repr=False)


def secret_keys(tls: Optional[TLS], field: str = FIELD) -> Optional[Tuple[SecretKey, SecretKey, SecretKey]]:
    """(CA, client certificate, client key) as Secret keys; None without client TLS (plain http). etcd asks a client
    for a certificate (druid's etcd config sets client-cert-auth), so a TLSConfig without `clientTLSSecretRef`
    cannot be spoken to: ClientTLSError."""
    if tls is None:
        return None
    if tls.client is None:
        raise ClientTLSError('%s.clientTLSSecretRef: required to reach the members over client TLS (etcd asks for a '
                             'client certificate)' % field, field + '.clientTLSSecretRef')
    ca_field, client_field = field + '.tlsCASecretRef', field + '.clientTLSSecretRef'
    return (_key(tls.ca, ca_field, tls.ca.data_key or CA_KEY), _key(tls.client, client_field, CERT_KEY),
            _key(tls.client, client_field, KEY_KEY))


def _key(ref: SecretRef, field: str, key: str) -> SecretKey:
    return SecretKey(field=field, namespace=ref.namespace, name=ref.name, key=key)


def secret_value(secret: Optional[Mapping[str, Any]], where: SecretKey) -> bytes:
    """One key of a Secret (as the API returns it, or None when absent), decoded; ClientTLSError naming the field,
    the Secret and the key when the Secret or the key is missing, empty or not base64."""
    shown = '%s/%s' % (where.namespace, where.name)
    if secret is None:
        raise ClientTLSError('%s: Secret %s not found' % (where.field, shown), where.field, shown, where.key)
    value = (secret.get('data') or {}).get(where.key)
    if not value:
        raise ClientTLSError('%s: Secret %s has no key %r' % (where.field, shown, where.key), where.field, shown,
                             where.key)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise ClientTLSError('%s: Secret %s key %r is not base64' % (where.field, shown, where.key), where.field,
                             shown, where.key) from exc


def client_pem(tls: Optional[TLS], read_secret: ReadSecret, field: str = FIELD) -> Optional[ClientPEM]:
    """The PEM material of a client connection to the members (None without client TLS); each Secret read once."""
    keys = secret_keys(tls, field)
    if keys is None:
        return None
    secrets = {}
    for where in keys:
        if (where.namespace, where.name) not in secrets:
            secrets[(where.namespace, where.name)] = read_secret(where.namespace, where.name)
    ca, cert, key = (secret_value(secrets[(w.namespace, w.name)], w) for w in keys)
    return ClientPEM(ca=ca, cert=cert, key=key)


def client_scheme(spec: EtcdSpec) -> str:
    return 'https' if spec.etcd.client_tls is not None else 'http'


def member_client_urls(spec: EtcdSpec, addresses: Iterable[str]) -> Tuple[str, ...]:
    """`<scheme>://<pod IP>:<clientPort>` per address, in the given order (empty addresses left out)."""
    return tuple('%s://%s:%d' % (client_scheme(spec), ip, spec.etcd.client_port) for ip in addresses if ip)


def member_connection(spec: EtcdSpec, endpoints: Iterable[str], read_secret: ReadSecret,
                      timeout: float = 5.0) -> ContextManager[EtcdConnection]:
    """A connection to `endpoints` (the members' client URLs) for a `with`: plain, or with the Etcd's client TLS
    Secrets. The Secrets are read, and a ClientTLSError raised, when this is called: before anything is connected."""
    pem = client_pem(spec.etcd.client_tls, read_secret)
    if pem is None:
        return contextlib.nullcontext(EtcdConnection(endpoints=tuple(endpoints), timeout=timeout))
    return pem_connection(endpoints, pem.ca, pem.cert, pem.key, timeout=timeout)
