# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How notifications leave the process: an SMTP sender and an HTTP poster, each swappable in tests.

`SmtplibSender` does what Go's `smtp.SendMail` + `smtp.PlainAuth` do for upstream's mail plugin: STARTTLS
when the server offers it, PLAIN auth (with the optional identity) only over TLS or to localhost, so a
password never crosses the network in clear. `UrllibPoster` POSTs a body (urllib with certificate checks) and
returns status and body.

Each send runs under one deadline (`timeout`, default 30s) over the whole exchange, through common/http_deadline:
a socket timeout bounds each read only, so a webhook or an SMTP server that drips its answer a byte at a time would
otherwise hold a maintenance worker for as long as it likes. At the deadline the sockets are shut down and the send
fails with a PluginError that says it gave up and after how long.
"""

from __future__ import annotations

import dataclasses
import http.client
import smtplib
import urllib.error
import urllib.request
from typing import Any, Mapping, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import Deadline
from ansible_collections.steward.cluster.plugins.module_utils.common.tls import client_context
from ansible_collections.steward.cluster.plugins.module_utils.common.http_deadline import (
    watch_socket, watched_handlers, watching)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import PluginError


@dataclasses.dataclass(frozen=True)
class SmtpAuth:
    identity: str
    user: str
    password: str = dataclasses.field(repr=False)


class SmtpSender:
    def send(self, address: str, sender: str, recipients: Sequence[str], message: bytes, auth: Optional[SmtpAuth]) -> None:
        raise NotImplementedError


class HttpPoster:
    def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> Tuple[int, bytes]:
        raise NotImplementedError


def split_address(address: str) -> Tuple[str, int]:
    host, sep, port = address.rpartition(':')
    if not sep or not port.isdigit():
        raise PluginError('SMTP address %r must be host:port' % address)
    return host.strip('[]'), int(port)


class _WatchedSMTP(smtplib.SMTP):
    """smtplib's client with its socket under the deadline's watch, the one STARTTLS wraps around it included."""

    def _get_socket(self, host: str, port: int, timeout: float) -> Any:
        return watch_socket(super()._get_socket(host, port, timeout))  # pylint: disable=protected-access

    def starttls(self, *args: Any, **kwargs: Any) -> Any:  # pylint: disable=signature-differs
        answer = super().starttls(*args, **kwargs)
        watch_socket(self.sock)
        return answer


class SmtplibSender(SmtpSender):
    def __init__(self, timeout: float = 30.0):
        self.timeout = timeout

    def send(self, address: str, sender: str, recipients: Sequence[str], message: bytes, auth: Optional[SmtpAuth]) -> None:
        host, port = split_address(address)
        deadline = Deadline(self.timeout, 'SMTP send')
        try:
            with watching(deadline, address), _WatchedSMTP(host, port, timeout=deadline.remaining()) as smtp:
                smtp.ehlo_or_helo_if_needed()
                secure = False
                if smtp.has_extn('starttls'):
                    smtp.starttls(context=client_context())
                    smtp.ehlo()
                    secure = True
                if auth is not None:
                    if not secure and host not in ('localhost', '127.0.0.1', '::1'):
                        raise PluginError('SMTP server %s offers no STARTTLS: refusing to send the password unencrypted' % address)
                    plain = '%s\0%s\0%s' % (auth.identity, auth.user, auth.password)
                    smtp.auth('PLAIN', lambda challenge=None: plain, initial_response_ok=True)
                smtp.sendmail(sender, list(recipients), message)
        except (smtplib.SMTPException, OSError) as exc:   # DeadlineExceeded is a TimeoutError, an OSError
            raise PluginError('SMTP %s: %s' % (address, exc)) from exc


class UrllibPoster(HttpPoster):
    def __init__(self, timeout: float = 30.0):
        self.timeout = timeout
        self._opener = urllib.request.build_opener(*watched_handlers(client_context()))

    def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> Tuple[int, bytes]:
        endpoint = _redact(url)
        deadline = Deadline(self.timeout, 'POST')
        request = urllib.request.Request(url, data=body, headers=dict(headers), method='POST')
        try:
            with watching(deadline, endpoint):
                try:
                    with self._opener.open(request, timeout=deadline.remaining()) as response:
                        answer = response.status, response.read()
                except urllib.error.HTTPError as exc:
                    answer = exc.code, exc.read() or b''
                deadline.check(endpoint)   # a body cut short by the deadline is not an answer
                return answer
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            raise PluginError('POST %s: %s' % (endpoint, getattr(exc, 'reason', exc))) from exc


def _redact(url: str) -> str:
    """Webhook URLs carry their secret in the path: show only scheme and host."""
    scheme, sep, rest = url.partition('://')
    return '%s%s%s/...' % (scheme, sep, rest.split('/', 1)[0]) if sep else '...'
