# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How notifications leave the process: an SMTP sender and an HTTP poster, each swappable in tests.

`SmtplibSender` does what Go's `smtp.SendMail` + `smtp.PlainAuth` do for upstream's mail plugin: STARTTLS
when the server offers it, PLAIN auth (with the optional identity) only over TLS or to localhost, so a
password never crosses the network in clear. `UrllibPoster` POSTs a body (ansible-core's open_url: urllib with certificate checks) and returns status and body.
"""

from __future__ import annotations

import dataclasses
import smtplib
import ssl
import urllib.error
from typing import Mapping, Optional, Sequence, Tuple

from ansible.module_utils.urls import open_url

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


class SmtplibSender(SmtpSender):
    def __init__(self, timeout: float = 30.0):
        self.timeout = timeout

    def send(self, address: str, sender: str, recipients: Sequence[str], message: bytes, auth: Optional[SmtpAuth]) -> None:
        host, port = split_address(address)
        try:
            with smtplib.SMTP(host, port, timeout=self.timeout) as smtp:
                smtp.ehlo_or_helo_if_needed()
                secure = False
                if smtp.has_extn('starttls'):
                    smtp.starttls(context=ssl.create_default_context())
                    smtp.ehlo()
                    secure = True
                if auth is not None:
                    if not secure and host not in ('localhost', '127.0.0.1', '::1'):
                        raise PluginError('SMTP server %s offers no STARTTLS: refusing to send the password unencrypted' % address)
                    plain = '%s\0%s\0%s' % (auth.identity, auth.user, auth.password)
                    smtp.auth('PLAIN', lambda challenge=None: plain, initial_response_ok=True)
                smtp.sendmail(sender, list(recipients), message)
        except (smtplib.SMTPException, OSError) as exc:
            raise PluginError('SMTP %s: %s' % (address, exc)) from exc


class UrllibPoster(HttpPoster):
    def __init__(self, timeout: float = 30.0):
        self.timeout = timeout

    def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> Tuple[int, bytes]:
        try:
            response = open_url(url, data=body, headers=dict(headers), method='POST', timeout=self.timeout)
            try:
                return response.status, response.read()
            finally:
                response.close()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read() or b''
        except (urllib.error.URLError, OSError) as exc:
            raise PluginError('POST %s: %s' % (_redact(url), getattr(exc, 'reason', exc))) from exc


def _redact(url: str) -> str:
    """Webhook URLs carry their secret in the path: show only scheme and host."""
    scheme, sep, rest = url.partition('://')
    return '%s%s%s/...' % (scheme, sep, rest.split('/', 1)[0]) if sep else '...'
