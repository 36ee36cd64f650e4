#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's EC2 (and S3): moto's server application behind a thin layer that adds what moto 5.2.5 lacks and
the machine controller's safety depends on. Measured against moto 5.2.5: a repeated ClientToken creates a
second instance, DescribeInstances is immediately consistent, nothing is ever throttled. Here:

* ClientToken on RunInstances as EC2 documents it: the same token with the same parameters answers the original
  reservation again and creates nothing; the same token with other parameters is `IdempotentParameterMismatch`
  (400). Tokens are scoped by access key and region and kept until a reset. A failed call records nothing.
* describe lag (off by default): an instance created less than N seconds ago is left out of DescribeInstances
  and DescribeInstanceStatus answers, and asking for it by id is `InvalidInstanceID.NotFound` (400), as EC2's
  eventual consistency does.
* request-rate limit (off by default): a token bucket (rate per second, burst) over every EC2 call; above it the
  answer is `RequestLimitExceeded` (503) with EC2's XML error body, which botocore retries as throttling.
* calls counted per Action, throttled ones too, so tests can assert API budgets.
* everything else (S3, other services, moto's own /moto-api) passes unchanged.
* moto's lookups of a resource's tags, of an instance by id and of the backend for a request by key instead of
  by scanning everything (lab/cloud/moto_index.py): a filtered DescribeInstances of 500 instances took 2.1 s, 1.6 s
  of it the tag scans (now 1.1 s). Same answers (a test compares them with the index off);
  `{"moto_index": false}` turns it off.
* AMIs: the few in lab/ec2-amis.json (Flatcar, Ubuntu, Amazon Linux) instead of moto's ~1,300 per region, which
  cost seconds at every backend start and reset. RunInstances accepts any ImageId, as moto does.

Requests whose User-Agent carries `steward-lab/` (the node emulator, lab/cloud/nodes.py, standing in for kubelets that
never call EC2) are served without lag, limit or counting: lab machinery is not the system under test.

The layer is WSGI middleware around the application the moto server runs, in one process (one HTTP hop, one
port). Admin endpoint (JSON): `GET /_lab/ec2` (settings and counts); `POST /_lab/ec2` with any of
`{"describe_lag": seconds, "rate_limit": {"per_second": r, "burst": b} | null, "moto_index": bool,
"reset_counts": true}`;
`POST /_lab/ec2/reset` (moto's reset plus this layer's tokens, ages, counts and settings).

    python -m lab.cloud.ec2_fidelity serve --host 127.0.0.1 --port 0 --url-file ec2.url [--pid-file ec2.pid]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import signal
import sys
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from collections import Counter
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple
from urllib.parse import parse_qsl

from lab.paths import LAB

LAB_AGENT = 'steward-lab/'
# The lab's fixed test credentials and default region (moto accepts any keys; these are no secret).
LAB_ACCESS_KEY_ID = 'AKIDSTEWARDLAB000001'
LAB_SECRET_ACCESS_KEY = 'steward-lab-secret-key'
LAB_REGION = 'eu-west-1'
AMIS_FILE = os.path.join(LAB, 'ec2-amis.json')
ADMIN = '/_lab/ec2'
_SCOPE = re.compile(r'Credential=([^/,\s]+)/[0-9]{8}/([^/]+)/([^/]+)/aws4_request')
_INSTANCE_ID = re.compile(r'<instanceId>(i-[0-9a-f]+)</instanceId>')

Response = Tuple[str, List[Tuple[str, str]], bytes]


class TokenBucket:
    """`per_second` tokens a second up to `burst`; a call takes one or is throttled."""

    def __init__(self, per_second: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if not per_second > 0 or int(burst) < 1:
            raise ValueError('rate_limit needs per_second > 0 and burst >= 1, got %r, %r' % (per_second, burst))
        self.per_second, self.burst, self.clock = float(per_second), int(burst), clock
        self.tokens, self.stamp = float(burst), clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.per_second)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


def ec2_error(status: str, code: str, message: str) -> Response:
    """EC2's error answer: `<Response><Errors><Error>...` (what botocore's EC2 parser reads)."""
    body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>%s</Code><Message>%s</Message>'
            '</Error></Errors><RequestID>%s</RequestID></Response>' % (code, message, uuid.uuid4())).encode()
    return status, [('Content-Type', 'text/xml;charset=UTF-8'), ('Content-Length', str(len(body)))], body


def _json(status: str, data: Any) -> Response:
    body = json.dumps(data, sort_keys=True).encode()
    return status, [('Content-Type', 'application/json'), ('Content-Length', str(len(body)))], body


class Ec2Fidelity:
    """WSGI middleware: EC2 fidelity in front of `app` (moto's DomainDispatcherApplication)."""

    def __init__(self, app: Callable, clock: Callable[[], float] = time.monotonic,
                 reset_backends: Optional[Callable[[], None]] = None,
                 moto_index: Optional[Callable[[bool], None]] = None) -> None:
        self.app = app
        self.clock = clock
        self.reset_backends = reset_backends
        self.use_moto_index = moto_index
        self._lock = threading.Lock()
        self._token_locks: Dict[Tuple[str, str, str], threading.Lock] = {}
        self._reset_state()

    def _reset_state(self) -> None:
        with self._lock:
            self.tokens: Dict[Tuple[str, str, str], Tuple[Tuple[Tuple[str, str], ...], Response]] = {}
            self.born: Dict[str, float] = {}
            self.describe_lag = 0.0
            self.bucket: Optional[TokenBucket] = None
            self.calls: Counter = Counter()
            self.throttled: Counter = Counter()
            self.lab_calls: Counter = Counter()
            self.moto_index = self.use_moto_index is not None
        if self.use_moto_index is not None:
            self.use_moto_index(True)

    # --- WSGI ----------------------------------------------------------------------------------
    def __call__(self, environ: Dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        path = environ.get('PATH_INFO', '')
        if path == ADMIN or path.startswith(ADMIN + '/'):
            return self._reply(start_response, self._admin(environ, path))
        if path == '/moto-api/reset' and environ.get('REQUEST_METHOD') == 'POST':
            self._reset_state()
            return self.app(environ, start_response)
        match = _SCOPE.search(environ.get('HTTP_AUTHORIZATION', ''))
        if not match or match.group(3) != 'ec2':
            return self.app(environ, start_response)  # S3 and the rest: unchanged
        access_key, region = match.group(1), match.group(2)
        params = self._params(environ)
        action = params.get('Action', '')
        if LAB_AGENT in environ.get('HTTP_USER_AGENT', ''):
            with self._lock:
                self.lab_calls[action] += 1
            return self._reply(start_response, self._forward_recording(environ, action))
        with self._lock:
            self.calls[action] += 1
            allowed = self.bucket is None or self.bucket.take()
            if not allowed:
                self.throttled[action] += 1
        if not allowed:
            return self._reply(start_response, ec2_error('503 Service Unavailable', 'RequestLimitExceeded',
                                                         'Request limit exceeded.'))
        if action == 'RunInstances' and params.get('ClientToken'):
            answer = self._run_instances(environ, (access_key, region, params['ClientToken']), params)
        elif action in ('DescribeInstances', 'DescribeInstanceStatus') and self.describe_lag > 0:
            answer = self._describe(environ, action, params)
        else:
            answer = self._forward_recording(environ, action)
        return self._reply(start_response, answer)

    @staticmethod
    def _reply(start_response: Callable, answer: Response) -> List[bytes]:
        status, headers, body = answer
        start_response(status, headers)
        return [body]

    @staticmethod
    def _params(environ: Dict[str, Any]) -> Dict[str, str]:
        """The query-API parameters (form body, or query string); the body is put back for moto."""
        length = int(environ.get('CONTENT_LENGTH') or 0)
        body = environ['wsgi.input'].read(length) if length else b''
        environ['wsgi.input'] = io.BytesIO(body)
        pairs = parse_qsl(environ.get('QUERY_STRING', ''), keep_blank_values=True)
        if 'x-www-form-urlencoded' in environ.get('CONTENT_TYPE', ''):
            pairs += parse_qsl(body.decode('utf-8', 'replace'), keep_blank_values=True)
        return dict(pairs)

    def _forward(self, environ: Dict[str, Any]) -> Response:
        captured: Dict[str, Any] = {}

        def start(status: str, headers: List[Tuple[str, str]], exc_info: Any = None) -> Callable:
            captured['status'], captured['headers'] = status, list(headers)
            return lambda data: None

        chunks = self.app(environ, start)
        try:
            body = b''.join(chunks)
        finally:
            if hasattr(chunks, 'close'):
                chunks.close()
        return captured['status'], captured['headers'], body

    def _forward_recording(self, environ: Dict[str, Any], action: str) -> Response:
        answer = self._forward(environ)
        if action == 'RunInstances' and answer[0].startswith('200'):
            now = self.clock()
            with self._lock:
                for instance_id in _INSTANCE_ID.findall(answer[2].decode('utf-8', 'replace')):
                    self.born.setdefault(instance_id, now)
        return answer

    # --- ClientToken ---------------------------------------------------------------------------
    def _run_instances(self, environ: Dict[str, Any], key: Tuple[str, str, str], params: Dict[str, str]) -> Response:
        """EC2's idempotency: one reservation per token; other parameters under the same token are refused."""
        fingerprint = tuple(sorted((k, v) for k, v in params.items() if k != 'ClientToken'))
        with self._lock:
            token_lock = self._token_locks.setdefault(key, threading.Lock())
        with token_lock:  # a concurrent retry waits for the first call and then gets its answer
            with self._lock:
                known = self.tokens.get(key)
            if known is not None:
                if known[0] != fingerprint:
                    return ec2_error('400 Bad Request', 'IdempotentParameterMismatch',
                                     'Arguments on this idempotent request are inconsistent with arguments used in '
                                     'previous request(s).')
                return known[1]
            answer = self._forward_recording(environ, 'RunInstances')
            if answer[0].startswith('200'):
                with self._lock:
                    self.tokens[key] = (fingerprint, answer)
            return answer

    # --- describe lag --------------------------------------------------------------------------
    def _hidden(self) -> set:
        cutoff = self.clock() - self.describe_lag
        with self._lock:
            return {i for i, born in self.born.items() if born > cutoff}

    def _describe(self, environ: Dict[str, Any], action: str, params: Dict[str, str]) -> Response:
        hidden = self._hidden()
        asked = [v for k, v in params.items() if re.match(r'^InstanceId\.[0-9]+$', k)]
        missing = [i for i in asked if i in hidden]
        if missing:
            return ec2_error('400 Bad Request', 'InvalidInstanceID.NotFound',
                             "The instance ID '%s' does not exist" % missing[0] if len(missing) == 1 else
                             "The instance IDs '%s' do not exist" % ', '.join(missing))
        status, headers, body = self._forward(environ)
        if not hidden or not status.startswith('200'):
            return status, headers, body
        body = _without_instances(body, hidden, action)
        headers = [(k, v) for k, v in headers if k.lower() != 'content-length'] + [('Content-Length', str(len(body)))]
        return status, headers, body

    # --- admin ---------------------------------------------------------------------------------
    def settings(self) -> Dict[str, Any]:
        with self._lock:
            return {'describe_lag': self.describe_lag,
                    'rate_limit': None if self.bucket is None else {'per_second': self.bucket.per_second,
                                                                    'burst': self.bucket.burst},
                    'moto_index': self.moto_index,
                    'calls': dict(self.calls), 'throttled': dict(self.throttled), 'lab_calls': dict(self.lab_calls)}

    def configure(self, data: Dict[str, Any]) -> None:
        """Apply admin settings; ValueError (nothing changed) for a bad value."""
        unknown = set(data) - {'describe_lag', 'rate_limit', 'moto_index', 'reset_counts'}
        if unknown:
            raise ValueError('unknown settings: %s' % ', '.join(sorted(unknown)))
        lag = self.describe_lag
        if 'describe_lag' in data:
            lag = data['describe_lag']
            if isinstance(lag, bool) or not isinstance(lag, (int, float)) or not 0 <= lag < 86400:
                raise ValueError('describe_lag must be seconds in [0, 86400), got %r' % (lag,))
        bucket = self.bucket
        if 'rate_limit' in data:
            limit = data['rate_limit']
            if limit is None:
                bucket = None
            elif not isinstance(limit, dict) or set(limit) - {'per_second', 'burst'} or 'per_second' not in limit:
                raise ValueError('rate_limit must be null or {"per_second": r, "burst": b}, got %r' % (limit,))
            else:
                per_second = limit['per_second']
                burst = limit.get('burst') or max(1, int(per_second))
                if isinstance(per_second, bool) or not isinstance(per_second, (int, float)) or \
                        isinstance(burst, bool) or not isinstance(burst, int):
                    raise ValueError('rate_limit per_second must be a number and burst an integer, got %r' % (limit,))
                bucket = TokenBucket(per_second, burst, self.clock)
        index = data.get('moto_index', self.moto_index)
        if not isinstance(index, bool) or (index and self.use_moto_index is None):
            raise ValueError('moto_index must be true or false (true only over moto), got %r' % (index,))
        with self._lock:
            self.describe_lag, self.bucket, self.moto_index = float(lag), bucket, index
            if self.use_moto_index is not None:
                self.use_moto_index(index)
            if data.get('reset_counts'):
                self.calls, self.throttled, self.lab_calls = Counter(), Counter(), Counter()

    def _admin(self, environ: Dict[str, Any], path: str) -> Response:
        method = environ.get('REQUEST_METHOD')
        if path == ADMIN + '/reset' and method == 'POST':
            if self.reset_backends is not None:
                self.reset_backends()
            self._reset_state()
            return _json('200 OK', self.settings())
        if path != ADMIN:
            return _json('404 Not Found', {'error': 'no such admin path: %s' % path})
        if method == 'GET':
            return _json('200 OK', self.settings())
        if method != 'POST':
            return _json('405 Method Not Allowed', {'error': 'GET or POST'})
        try:
            length = int(environ.get('CONTENT_LENGTH') or 0)
            data = json.loads(environ['wsgi.input'].read(length) or b'{}')
            if not isinstance(data, dict):
                raise ValueError('the body must be a JSON object')
            self.configure(data)
        except ValueError as exc:
            return _json('400 Bad Request', {'error': str(exc)})
        return _json('200 OK', self.settings())


def _local(tag: str) -> str:
    return tag.rsplit('}', 1)[-1]


def _children(node: ET.Element, name: str) -> List[ET.Element]:
    return [c for c in node if _local(c.tag) == name]


def _instance_id(item: ET.Element) -> Optional[str]:
    return next((c.text for c in item if _local(c.tag) == 'instanceId'), None)


def _without_instances(body: bytes, hidden: set, action: str) -> bytes:
    """A Describe answer without the hidden instances (and without reservations left empty)."""
    root = ET.fromstring(body)
    if root.tag.startswith('{'):
        ET.register_namespace('', root.tag[1:].split('}', 1)[0])  # keep the answer's default namespace
    if action == 'DescribeInstances':
        for reservations in _children(root, 'reservationSet'):
            for reservation in list(reservations):
                for instances in _children(reservation, 'instancesSet'):
                    for item in list(instances):
                        if _instance_id(item) in hidden:
                            instances.remove(item)
                    if not len(instances):
                        reservations.remove(reservation)
    else:
        for statuses in _children(root, 'instanceStatusSet'):
            for item in list(statuses):
                if _instance_id(item) in hidden:
                    statuses.remove(item)
    return ET.tostring(root, encoding='utf-8', xml_declaration=True)


# --- serving ---------------------------------------------------------------------------------------
def make_app() -> Ec2Fidelity:
    # moto loads ~1,300 AMIs into every region's backend, on first use and after every reset (seconds each on a
    # busy machine); the lab serves a handful (lab/ec2-amis.json). Must be set before moto is imported.
    os.environ.setdefault('MOTO_AMIS_PATH', AMIS_FILE)
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from moto.core.base_backend import BackendDict
    from moto.core.model_instances import reset_model_data
    from lab.cloud.moto_index import use_index

    def reset_backends() -> None:
        BackendDict.reset()
        reset_model_data()

    return Ec2Fidelity(DomainDispatcherApplication(create_backend_app), reset_backends=reset_backends,
                       moto_index=use_index)


def warm_up(app: Ec2Fidelity, region: str = LAB_REGION) -> None:
    """Serve one EC2 and one S3 call in-process before announcing the URL: moto imports a service's code on its
    first request (many seconds on a busy machine), which would otherwise land in some test's first call."""
    from werkzeug.test import Client
    client = Client(app)
    for service, kwargs in (('ec2', {'data': 'Action=DescribeInstances&Version=2016-11-15',
                                     'content_type': 'application/x-www-form-urlencoded'}), ('s3', {})):
        auth = 'AWS4-HMAC-SHA256 Credential=warmup/20260101/%s/%s/aws4_request, SignedHeaders=host, Signature=0' % (
            region, service)
        client.open('/', method='POST' if service == 'ec2' else 'GET',
                    headers={'Authorization': auth, 'User-Agent': LAB_AGENT + 'warm-up'}, **kwargs)


def serve(host: str, port: int, url_file: Optional[str] = None, pid_file: Optional[str] = None) -> None:
    """Serve until SIGTERM/SIGINT; the URL is printed and written to url_file once the port is bound and moto is
    warm. The files are removed again on the way out (when they still name this process)."""
    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import make_server

    app = make_app()
    warm_up(app)
    server = make_server(host, port, app, threaded=True, request_handler=MotoRequestHandler)
    url = 'http://%s:%d' % (host, server.server_address[1])
    if pid_file:
        _write_atomic(pid_file, '%d\n' % os.getpid())
    if url_file:
        _write_atomic(url_file, url + '\n')
    print('ec2 fidelity server listening on %s' % url, flush=True)

    def stop(signum: int, frame: Any) -> None:
        """Nothing here is kept on disk: leave at once (a clean interpreter shutdown takes seconds)."""
        for path, text in ((url_file, url), (pid_file, str(os.getpid()))):
            try:
                if path and open(path).read().strip() == text:
                    os.unlink(path)
            except OSError:
                pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.serve_forever()


def _write_atomic(path: str, text: str) -> None:
    tmp = '%s.%d.tmp' % (path, os.getpid())
    with open(tmp, 'w') as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    sub = parser.add_subparsers(dest='command', required=True)
    run = sub.add_parser('serve', help='serve EC2 and S3 (moto) with the fidelity layer')
    run.add_argument('--host', default='127.0.0.1')
    run.add_argument('--port', type=int, default=0, help='0: a free port')
    run.add_argument('--url-file', help='write the URL here once listening')
    run.add_argument('--pid-file', help='write this process id here')
    args = parser.parse_args(argv)
    serve(args.host, args.port, args.url_file, args.pid_file)
    return 0


if __name__ == '__main__':
    sys.exit(main())
