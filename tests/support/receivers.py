# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Local receivers for notification tests: an SMTP server and an HTTP webhook / Slack Web API double.

Both listen on 127.0.0.1 on a free port, serve from a background thread, record what they receive and
stop with `.stop()` (or as context managers). The SMTP server is a minimal RFC 5321 server on
`socketserver` (aiosmtpd is not installed and `smtpd` is gone in Python 3.12): EHLO/HELO, MAIL, RCPT,
DATA (dot-unstuffing), RSET, NOOP, QUIT and optional AUTH PLAIN / AUTH LOGIN, enough for smtplib and
Go's net/smtp. The webhook receiver records JSON (or form) POSTs, answers Slack's `chat.postMessage`
like the Web API (increasing `ts`, `thread_ts` recorded) and can be told to fail with an HTTP status.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import email
import email.message
import email.policy
import http.server
import itertools
import json
import socketserver
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, List, Optional, Tuple


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            raise TimeoutError('timed out after %ss waiting for %s' % (timeout, what))
        time.sleep(0.02)


# --- SMTP ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class ReceivedMail:
    """One accepted message: the envelope, the raw data and who authenticated (None: no AUTH)."""

    mail_from: str
    rcpt_tos: List[str]
    data: bytes
    auth_user: Optional[str] = None
    auth_identity: Optional[str] = None   # AUTH PLAIN's authorization identity (Go's smtp.PlainAuth identity)
    helo: str = ''

    @property
    def message(self) -> email.message.EmailMessage:
        return email.message_from_bytes(self.data, policy=email.policy.default)  # type: ignore[return-value]

    @property
    def subject(self) -> str:
        return str(self.message.get('Subject', ''))

    @property
    def body(self) -> str:
        """The text body with the wire's CRLF line ends turned back into LF."""
        msg = self.message
        part = msg.get_body(preferencelist=('plain', 'html')) if msg.is_multipart() else msg
        return part.get_content().replace('\r\n', '\n') if part is not None else ''


class _SMTPHandler(socketserver.StreamRequestHandler):
    server: '_SMTPTCPServer'

    def setup(self) -> None:
        super().setup()
        self.helo = ''
        self.auth_user: Optional[str] = None
        self.auth_identity: Optional[str] = None
        self._reset()

    def _reset(self) -> None:
        self.mail_from: Optional[str] = None
        self.rcpt_tos: List[str] = []

    def reply(self, line: str) -> None:
        self.wfile.write(line.encode('utf-8') + b'\r\n')
        self.wfile.flush()

    def read_line(self) -> Optional[str]:
        raw = self.rfile.readline(65536)
        if not raw:
            return None
        return raw.decode('utf-8', 'replace').rstrip('\r\n')

    def handle(self) -> None:
        receiver = self.server.receiver
        self.reply('220 %s steward test SMTP ready' % receiver.hostname)
        while True:
            line = self.read_line()
            if line is None:
                return
            verb, _sep, arg = line.partition(' ')
            verb = verb.upper()
            handler = getattr(self, 'smtp_' + verb, None)
            if handler is None:
                self.reply('500 5.5.2 command not recognized')
                continue
            if handler(arg.strip()) is False:
                return

    # commands: each answers one reply (or several for AUTH); False closes the connection
    def smtp_EHLO(self, arg: str) -> None:
        self.helo = arg
        self._reset()
        lines = [self.server.receiver.hostname, '8BITMIME', 'SIZE 10485760']
        if self.server.receiver.users is not None:
            lines.append('AUTH PLAIN LOGIN')
        for line in lines[:-1]:
            self.reply('250-' + line)
        self.reply('250 ' + lines[-1])

    def smtp_HELO(self, arg: str) -> None:
        self.helo = arg
        self._reset()
        self.reply('250 ' + self.server.receiver.hostname)

    def smtp_NOOP(self, arg: str) -> None:
        self.reply('250 2.0.0 OK')

    def smtp_RSET(self, arg: str) -> None:
        self._reset()
        self.reply('250 2.0.0 OK')

    def smtp_QUIT(self, arg: str) -> bool:
        self.reply('221 2.0.0 bye')
        return False

    def smtp_AUTH(self, arg: str) -> None:
        receiver = self.server.receiver
        if receiver.users is None:
            self.reply('502 5.5.1 AUTH not supported')
            return
        if self.auth_user is not None:
            self.reply('503 5.5.1 already authenticated')
            return
        mechanism, _sep, initial = arg.partition(' ')
        mechanism = mechanism.upper()
        try:
            if mechanism == 'PLAIN':
                response = initial or self._challenge('')
                if response is None:
                    return
                identity, user, password = _b64(response).split('\0', 2)
            elif mechanism == 'LOGIN':
                user_b64 = initial or self._challenge('VXNlcm5hbWU6')   # "Username:"
                if user_b64 is None:
                    return
                user = _b64(user_b64)
                password_b64 = self._challenge('UGFzc3dvcmQ6')         # "Password:"
                if password_b64 is None:
                    return
                identity, password = '', _b64(password_b64)
            else:
                self.reply('504 5.5.4 unrecognized authentication type')
                return
        except (ValueError, binascii.Error, UnicodeDecodeError):
            self.reply('501 5.5.2 cannot decode the response')
            return
        receiver.auth_attempts.append((mechanism, user))
        if receiver.users.get(user) != password:
            self.reply('535 5.7.8 authentication credentials invalid')
            return
        self.auth_user, self.auth_identity = user, identity or None
        self.reply('235 2.7.0 authentication successful')

    def _challenge(self, text: str) -> Optional[str]:
        self.reply('334 ' + text)
        line = self.read_line()
        if line is None or line == '*':
            if line == '*':
                self.reply('501 5.0.0 authentication cancelled')
            return None
        return line

    def smtp_MAIL(self, arg: str) -> None:
        if self.server.receiver.require_auth and self.auth_user is None:
            self.reply('530 5.7.0 authentication required')
            return
        if not arg.upper().startswith('FROM:'):
            self.reply('501 5.5.4 syntax: MAIL FROM:<address>')
            return
        self._reset()
        self.mail_from = _address(arg[5:])
        self.reply('250 2.1.0 OK')

    def smtp_RCPT(self, arg: str) -> None:
        if self.mail_from is None:
            self.reply('503 5.5.1 need MAIL first')
            return
        if not arg.upper().startswith('TO:'):
            self.reply('501 5.5.4 syntax: RCPT TO:<address>')
            return
        self.rcpt_tos.append(_address(arg[3:]))
        self.reply('250 2.1.5 OK')

    def smtp_DATA(self, arg: str) -> Optional[bool]:
        if not self.rcpt_tos:
            self.reply('503 5.5.1 need RCPT first')
            return None
        self.reply('354 end data with <CR><LF>.<CR><LF>')
        lines: List[bytes] = []
        while True:
            raw = self.rfile.readline(1 << 20)
            if not raw:
                return False
            if raw in (b'.\r\n', b'.\n'):
                break
            lines.append(raw[1:] if raw.startswith(b'..') else raw)
        receiver = self.server.receiver
        mail = ReceivedMail(mail_from=self.mail_from or '', rcpt_tos=list(self.rcpt_tos), data=b''.join(lines),
                            auth_user=self.auth_user, auth_identity=self.auth_identity, helo=self.helo)
        with receiver.lock:
            receiver.messages.append(mail)
        self._reset()
        self.reply('250 2.0.0 OK queued')
        return None


def _b64(text: str) -> str:
    return base64.b64decode(text.strip(), validate=True).decode('utf-8')


def _address(text: str) -> str:
    """`<a@b> SIZE=123` -> `a@b` (ESMTP parameters after the path are ignored)."""
    text = text.strip()
    if text.startswith('<'):
        return text[1:text.find('>')] if '>' in text else text[1:]
    return text.split(' ', 1)[0]


class _SMTPTCPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    receiver: 'SMTPReceiver'


class SMTPReceiver:
    """An SMTP server on 127.0.0.1 that records every message.

    `users` ({user: password}) enables AUTH PLAIN/LOGIN (advertised in EHLO); `require_auth` refuses MAIL
    before a successful AUTH. `.messages` holds ReceivedMail, `.auth_attempts` (mechanism, user) pairs.
    """

    def __init__(self, users: Optional[Dict[str, str]] = None, require_auth: bool = False, hostname: str = 'localhost'):
        self.users = users
        self.require_auth = require_auth
        self.hostname = hostname
        self.messages: List[ReceivedMail] = []
        self.auth_attempts: List[Tuple[str, str]] = []
        self.lock = threading.Lock()
        self._server = _SMTPTCPServer(('127.0.0.1', 0), _SMTPHandler)
        self._server.receiver = self
        self.host = '127.0.0.1'
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={'poll_interval': 0.05},
                                        name='smtp-receiver', daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        """`host:port`, the seed's mail plugin `address` option."""
        return '%s:%d' % (self.host, self.port)

    @property
    def url(self) -> str:
        return 'smtp://%s' % self.address

    def wait_for(self, count: int = 1, timeout: float = 10.0) -> List[ReceivedMail]:
        _wait(lambda: len(self.messages) >= count, timeout, '%d mail(s), got %d' % (count, len(self.messages)))
        return list(self.messages)

    def clear(self) -> None:
        with self.lock:
            self.messages.clear()
            self.auth_attempts.clear()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> 'SMTPReceiver':
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()


# --- HTTP webhooks and the Slack Web API ------------------------------------------------------------

@dataclasses.dataclass
class ReceivedPost:
    """One POST: `json` is the parsed JSON body, or the form fields for x-www-form-urlencoded."""

    path: str
    headers: Dict[str, str]
    body: bytes
    json: Any
    status: int                    # what the receiver answered
    ts: Optional[str] = None       # the ts given to a chat.postMessage

    @property
    def text(self) -> Optional[str]:
        return self.json.get('text') if isinstance(self.json, dict) else None

    @property
    def thread_ts(self) -> Optional[str]:
        return self.json.get('thread_ts') if isinstance(self.json, dict) else None


class _WebhookHandler(http.server.BaseHTTPRequestHandler):
    server: '_WebhookHTTPServer'
    protocol_version = 'HTTP/1.1'

    def log_message(self, format: str, *args: Any) -> None:  # pylint: disable=redefined-builtin
        return   # keep test output clean

    def do_POST(self) -> None:
        receiver = self.server.receiver
        length = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(length) if length else b''
        content_type = (self.headers.get('Content-Type') or '').split(';')[0].strip().lower()
        parsed: Any = None
        if content_type == 'application/x-www-form-urlencoded':
            parsed = dict(urllib.parse.parse_qsl(body.decode('utf-8', 'replace'), keep_blank_values=True))
        elif body:
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = None
        path = urllib.parse.urlsplit(self.path).path
        status, payload, ts = receiver.respond(path, dict(self.headers), parsed)
        post = ReceivedPost(path=path, headers=dict(self.headers), body=body, json=parsed, status=status, ts=ts)
        with receiver.lock:
            receiver.messages.append(post)
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'text/plain' if isinstance(payload, bytes) else 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.send_response(405)
        self.send_header('Content-Length', '0')
        self.end_headers()


class _WebhookHTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    receiver: 'WebhookReceiver'


class WebhookReceiver:
    """An HTTP server on 127.0.0.1 that records POSTs.

    Any path is an incoming webhook (answers 200 `ok`, as Slack's hooks do). `/api/chat.postMessage` is
    Slack's Web API: `{"ok": true, "channel", "ts", "message"}` with an increasing ts; with `tokens` set,
    a missing or unknown bearer token answers `{"ok": false, "error": "invalid_auth"}`. `fail(500, times=n)`
    makes the next n POSTs (every POST with times=None) answer that status until `recover()`.
    """

    def __init__(self, tokens: Optional[List[str]] = None):
        self.tokens = tokens
        self.messages: List[ReceivedPost] = []
        self.lock = threading.Lock()
        self._fail_status: Optional[int] = None
        self._fail_left: Optional[int] = None
        self._ts = itertools.count(1)
        self._ts_base = int(time.time())
        self._server = _WebhookHTTPServer(('127.0.0.1', 0), _WebhookHandler)
        self._server.receiver = self
        self.host = '127.0.0.1'
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={'poll_interval': 0.05},
                                        name='webhook-receiver', daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return 'http://%s:%d' % (self.host, self.port)

    @property
    def slack_api_url(self) -> str:
        """Base URL of the Slack Web API double (`<this>chat.postMessage`)."""
        return self.url + '/api/'

    def fail(self, status: Optional[int] = 500, times: Optional[int] = None) -> None:
        with self.lock:
            self._fail_status, self._fail_left = status, times

    def recover(self) -> None:
        self.fail(None, None)

    def respond(self, path: str, headers: Dict[str, str], body: Any) -> Tuple[int, Any, Optional[str]]:
        """(status, payload, ts): bytes payloads are sent as text/plain, others as JSON."""
        with self.lock:
            if self._fail_status is not None:
                status = self._fail_status
                if self._fail_left is not None:
                    self._fail_left -= 1
                    if self._fail_left <= 0:
                        self._fail_status = self._fail_left = None
                return status, {'ok': False, 'error': 'injected failure'}, None
        if not path.startswith('/api/'):
            return 200, b'ok', None
        if self.tokens is not None:
            auth = {k.lower(): v for k, v in headers.items()}.get('authorization', '')
            token = auth[7:] if auth.lower().startswith('bearer ') else (body.get('token', '') if isinstance(body, dict) else '')
            if token not in self.tokens:
                return 200, {'ok': False, 'error': 'invalid_auth'}, None
        method = path[len('/api/'):]
        if method != 'chat.postMessage':
            return 200, {'ok': False, 'error': 'unknown_method'}, None
        body = body if isinstance(body, dict) else {}
        if not body.get('channel'):
            return 200, {'ok': False, 'error': 'channel_not_found'}, None
        ts = '%d.%06d' % (self._ts_base, next(self._ts))
        message = {'type': 'message', 'text': body.get('text', ''), 'ts': ts}
        if body.get('thread_ts'):
            message['thread_ts'] = body['thread_ts']
        return 200, {'ok': True, 'channel': body['channel'], 'ts': ts, 'message': message}, ts

    def posts(self, path: Optional[str] = None) -> List[ReceivedPost]:
        with self.lock:
            return [m for m in self.messages if path is None or m.path == path]

    def wait_for(self, count: int = 1, timeout: float = 10.0, path: Optional[str] = None) -> List[ReceivedPost]:
        _wait(lambda: len(self.posts(path)) >= count, timeout, '%d POST(s) to %s, got %d' % (count, path or 'any path', len(self.posts(path))))
        return self.posts(path)

    def clear(self) -> None:
        with self.lock:
            self.messages.clear()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> 'WebhookReceiver':
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()
