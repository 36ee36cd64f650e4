# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connections to etcd: how to reach a cluster (`EtcdConnection`) and its v3 JSON gateway (`Gateway`).

Two transports, each used where it is best:
* the v3 JSON gateway over `requests` for cluster operations (members, learners, promote,
  move-leader, status, alarms, compaction, defragment, health). Every call is a fresh HTTP request
  with its own timeout, so a dead endpoint never poisons later calls;
* gRPC spoken directly over HTTP/2 (etcd/wire/) for what the gateway cannot serve or serves too slowly:
  the snapshot and watch streams, HashKV and a replay's transactions.
"""

from __future__ import annotations

import base64
import contextlib
import json
import dataclasses
import os
import shutil
import tempfile
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple
from urllib.parse import urlsplit

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import Deadline, DeadlineExceeded, read_within
from ansible_collections.steward.cluster.plugins.module_utils.common.http_deadline import watch_pool_manager, watching
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import (
    EtcdError,
    EtcdUnavailable,
    MembershipError,
    Refusal,
)

try:
    import requests
    HAS_REQUESTS = True
except ImportError:  # reported by the module through missing_required_lib
    HAS_REQUESTS = False

# etcd's own message when a membership change comes within ~5 s of the last one (strict reconfig check).
UNHEALTHY_CLUSTER = 'unhealthy cluster'
# The texts of etcd's answers that name a reason callers act on (read here only, see gateway_error).
_REFUSALS = (
    (Refusal.UNHEALTHY, (UNHEALTHY_CLUSTER, 'not enough started members')),
    (Refusal.NO_LEADER, ('no leader', 'leader changed')),
    (Refusal.TIMEOUT, ('timed out', 'deadline exceeded')),
    (Refusal.LEARNER_NOT_READY, ('in sync with leader', 'not started', 'is not ready')),
    (Refusal.TOO_MANY_LEARNERS, ('too many learner',)),
)


@dataclasses.dataclass(frozen=True)
class EtcdConnection:
    """How to reach a cluster: endpoints plus optional TLS and auth. Shared by modules and controller."""

    endpoints: Tuple[str, ...]
    ca_cert: Optional[str] = None
    client_cert: Optional[str] = None
    client_key: Optional[str] = None
    user: Optional[str] = None
    password: Optional[str] = None
    timeout: float = 5.0

    @classmethod
    def from_params(cls, params: Dict[str, Any], prefix: str = '') -> 'EtcdConnection':
        """Build from the `etcd_connection` argspec options (named `<prefix><option>`, e.g. `etcd_timeout`), checked
        by the validation home first: endpoints are URLs or host:port, a timeout is positive and finite, given TLS
        files exist and a client certificate comes with its key (InvalidInput names the option)."""
        endpoints = params.get(prefix + 'endpoints') or ['http://127.0.0.1:2379']
        if isinstance(endpoints, str):
            endpoints = [e.strip() for e in endpoints.split(',') if e.strip()]
        for index, endpoint in enumerate(endpoints):
            validate.endpoint_url(endpoint, '%sendpoints[%d]' % (prefix, index), default_scheme='http')
        timeout = params.get(prefix + 'timeout')
        validate.tls_files(params.get(prefix + 'ca_cert'), params.get(prefix + 'client_cert'),
                           params.get(prefix + 'client_key'), prefix)
        if params.get(prefix + 'user') is not None:
            validate.text(params[prefix + 'user'], prefix + 'user', max_length=256)
        if params.get(prefix + 'password') is not None:
            validate.credential(params[prefix + 'password'], prefix + 'password')
        return cls(
            endpoints=tuple(endpoints),
            ca_cert=params.get(prefix + 'ca_cert'),
            client_cert=params.get(prefix + 'client_cert'),
            client_key=params.get(prefix + 'client_key'),
            user=params.get(prefix + 'user'),
            password=params.get(prefix + 'password'),
            timeout=5.0 if timeout is None else validate.timeout(timeout, prefix + 'timeout'),
        )

    @property
    def secure(self) -> bool:
        return bool(self.ca_cert) or any(e.startswith('https://') for e in self.endpoints)

    def url(self, endpoint: str) -> str:
        """Normalise 'host:port' or a full URL to 'scheme://host:port'."""
        if '://' not in endpoint:
            endpoint = ('https://' if self.secure else 'http://') + endpoint
        parts = urlsplit(endpoint)
        return '%s://%s' % (parts.scheme, parts.netloc)

    def host_port(self, endpoint: str) -> Tuple[str, int]:
        parts = urlsplit(self.url(endpoint))
        return parts.hostname or '127.0.0.1', parts.port or 2379

    def with_endpoints(self, endpoints: Iterable[str]) -> 'EtcdConnection':
        return dataclasses.replace(self, endpoints=tuple(endpoints))


@contextlib.contextmanager
def pem_connection(endpoints: Iterable[str], ca_pem: bytes, cert_pem: bytes, key_pem: bytes,
                   timeout: float = 5.0) -> Iterator[EtcdConnection]:
    """An EtcdConnection with TLS material held in memory (a CA, a client certificate and its key, PEM): requests
    reads only files, so they are written to a 0700 temporary directory, 0600 each, removed afterwards (the key
    never outlives the call)."""
    directory = tempfile.mkdtemp(prefix='steward-etcd-')
    try:
        paths = {}
        for name, data in (('ca.crt', ca_pem), ('client.crt', cert_pem), ('client.key', key_pem)):
            paths[name] = os.path.join(directory, name)
            fd = os.open(paths[name], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, 'wb') as f:
                f.write(data)
        yield EtcdConnection(endpoints=tuple(endpoints), ca_cert=paths['ca.crt'], client_cert=paths['client.crt'],
                             client_key=paths['client.key'], timeout=timeout)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def b64(value: Any) -> str:
    if isinstance(value, str):
        value = value.encode()
    return base64.b64encode(value).decode()


def member_id_hex(member_id: Any) -> str:
    """etcd prints member IDs in hex; the gateway returns them as decimal strings."""
    return '%x' % int(member_id)


class Gateway:
    """Calls to etcd's v3 JSON gateway (`POST /v3/...`) on one endpoint at a time."""

    def __init__(self, conn: EtcdConnection):
        if not HAS_REQUESTS:
            raise EtcdError('the python library requests is required')
        self.conn = conn
        self._session = requests.Session()
        for adapter in self._session.adapters.values():   # a member dripping its headers is cut at the deadline
            watch_pool_manager(adapter.poolmanager)
        # Passed with every request: requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override a
        # Session's `verify`, which would silently replace the etcd CA with the system bundle.
        self._verify: Any = conn.ca_cert or True
        self._cert = (conn.client_cert, conn.client_key) if conn.client_cert and conn.client_key else None
        self._tokens: Dict[str, str] = {}

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> 'Gateway':
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def token(self, endpoint: str, timeout: float) -> Optional[str]:
        """The auth token for `endpoint` (None without a user): the gateway's and gRPC's are the same, so the
        gRPC calls (wire/http2.py) send it as their `token` header."""
        if not self.conn.user:
            return None
        if endpoint not in self._tokens:
            body = self._raw(endpoint, '/v3/auth/authenticate',
                             {'name': self.conn.user, 'password': self.conn.password or ''}, timeout, auth=False)
            self._tokens[endpoint] = body.get('token', '')
        return self._tokens[endpoint]

    def _raw(self, endpoint: str, path: str, body: Dict[str, Any], timeout: float, auth: bool = True) -> Dict[str, Any]:
        url = self.conn.url(endpoint) + path
        headers = {}
        if auth:
            token = self.token(endpoint, timeout)
            if token:
                headers['Authorization'] = token
        deadline = Deadline(timeout, 'POST %s' % path)
        try:
            # the timeout bounds the whole answer, headers included, not each read: a server dripping a byte a second
            # is given up on
            with watching(deadline, self.conn.url(endpoint)):
                resp = self._session.post(url, json=body, timeout=timeout, headers=headers, verify=self._verify,
                                          cert=self._cert, stream=True)
                raw = read_within(lambda: resp.raw.read1(65536, decode_content=True), deadline, self.conn.url(endpoint))
        except DeadlineExceeded as exc:
            raise EtcdUnavailable(str(exc)) from exc
        except requests.exceptions.SSLError as exc:
            raise EtcdUnavailable('TLS handshake with %s failed: %s' % (url, exc)) from exc
        except requests.exceptions.RequestException as exc:
            raise EtcdUnavailable('%s did not answer within %ss (%.1fs spent): %s' % (
                url, timeout, deadline.spent(), exc.__class__.__name__)) from exc
        try:
            data = json.loads(raw or b'{}')
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
        if resp.status_code != 200:
            message = data.get('message') or data.get('error') or raw.decode('utf-8', 'replace').strip()[:300]
            raise gateway_error(url, resp.status_code, message)
        return data

    def call(self, endpoint: str, path: str, body: Optional[Dict[str, Any]] = None,
             timeout: Optional[float] = None) -> Dict[str, Any]:
        return self._raw(endpoint, path, body or {}, timeout or self.conn.timeout)

    def first(self, path: str, body: Optional[Dict[str, Any]] = None,
              endpoints: Optional[Iterable[str]] = None, timeout: Optional[float] = None) -> Tuple[str, Dict[str, Any]]:
        """Call the first endpoint that answers; (endpoint, response)."""
        errors: List[EtcdUnavailable] = []
        for endpoint in endpoints or self.conn.endpoints:
            try:
                return endpoint, self.call(endpoint, path, body, timeout)
            except EtcdUnavailable as exc:
                errors.append(exc)
        refusal = next((e.refusal for e in errors if e.refusal is not None), None)
        raise EtcdUnavailable('no etcd endpoint answered %s: %s' % (path, '; '.join(str(e) for e in errors)), refusal)

    # --- typed helpers used across the engine -----------------------------------------------
    def status(self, endpoint: str, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The member's status; EtcdUnavailable when the answer is not etcd's (a 200 with garbage is no member:
        facts and recovery plans count only what answers as etcd does, with a cluster and a member id)."""
        status = self.call(endpoint, '/v3/maintenance/status', {}, timeout)
        header = status.get('header')
        if not isinstance(header, dict) or not header.get('cluster_id') or not header.get('member_id') \
                or not isinstance(status.get('version'), str):
            raise EtcdUnavailable('%s answered /v3/maintenance/status, but not as etcd does (no cluster id, member id '
                                  'and version)' % self.conn.url(endpoint))
        return status

    def member_list(self, endpoint: Optional[str] = None, linearizable: bool = False) -> List[Dict[str, Any]]:
        body = {'linearizable': True} if linearizable else {}
        if endpoint:
            return self.call(endpoint, '/v3/cluster/member/list', body).get('members', [])
        return self.first('/v3/cluster/member/list', body)[1].get('members', [])

    def alarms(self, endpoint: str) -> List[Dict[str, Any]]:
        return self.call(endpoint, '/v3/maintenance/alarm', {'action': 'GET'}).get('alarms', []) or []

    def linearizable_read(self, endpoint: str, timeout: Optional[float] = None) -> Dict[str, Any]:
        """A quorum read of one key: succeeds only when the member's cluster has a leader and quorum."""
        return self.call(endpoint, '/v3/kv/range', {'key': b64('health'), 'count_only': True}, timeout)


def refusal_of(message: str) -> Optional[Refusal]:
    """The reason in an etcd error text (the gateway's `message`/`error`), if it is one callers act on."""
    low = (message or '').lower()
    for refusal, texts in _REFUSALS:
        if any(text in low for text in texts):
            return refusal
    return None


def gateway_error(url: str, status: int, message: str) -> EtcdError:
    """The typed error for a non-200 gateway answer: the only place that reads etcd's error text."""
    low = (message or '').lower()
    refusal = refusal_of(message)
    if 'member' in low or UNHEALTHY_CLUSTER in low or 'learner' in low or 'peerurl' in low:
        return MembershipError('%s: %s' % (url, message), refusal)
    if status in (502, 503, 504) or 'no leader' in low or 'timed out' in low or 'deadline' in low:
        return EtcdUnavailable('%s: %s' % (url, message), refusal)
    return EtcdError('%s answered HTTP %s: %s' % (url, status, message), refusal)
