"""Hands for a rolling upgrade of an EtcdCluster (tests/support/etcd_cluster.py), and a client under load.

MemberProcessOps stops a member with SIGTERM (what systemd and the role do), swaps the binary directory it will start
from and starts it again; each op is idempotent. It knows nothing of the engine it serves (a test double must not
import the code it stands in front of). LoadClient writes and reads through the JSON gateway at a steady rate the way
etcd's clientv3 does with several endpoints: a connection error or an `Unavailable` answer moves it to the next
endpoint (retrying the same idempotent request, counted in `failovers`); a request is failed only when no endpoint
served it in time or one answered with another error."""

from __future__ import annotations

import base64
import signal
import subprocess
import threading
import time
from typing import Dict, List, Optional

import requests

from support.etcd_cluster import EtcdCluster


class MemberProcessOps:
    def __init__(self, cluster: EtcdCluster, name: str, new_bin_dir: str):
        self.cluster = cluster
        self.name = name
        self.bin_dir = cluster.bin_dir
        self.previous = cluster.bin_dir
        self.new_bin_dir = new_bin_dir
        self.starts = 0
        self.stops = 0
        self.after: Dict[str, object] = {}   # op name -> callable run after it (tests: a kill at that point)

    def _hook(self, op: str) -> None:
        hook = self.after.get(op)
        if hook:
            hook()

    def stop(self) -> None:
        proc = self.cluster.members[self.name].proc
        if proc is not None and proc.poll() is None:
            self.stops += 1
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self._hook('stop')

    def swap(self) -> None:
        self.bin_dir = self.new_bin_dir
        self._hook('swap')

    def restore_previous(self) -> None:
        self.bin_dir = self.previous

    def start(self) -> None:
        if self.cluster.members[self.name].running:
            return
        saved, self.cluster.bin_dir = self.cluster.bin_dir, self.bin_dir
        try:
            self.starts += 1
            self.cluster.start_member(self.name)
        finally:
            self.cluster.bin_dir = saved
        self._hook('start')


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


class LoadClient:
    """Puts `prefix/<n>` and reads it back at `rate` requests/s until stopped; counts failures and latencies."""

    def __init__(self, endpoints: List[str], rate: float = 100.0, prefix: str = 'load', timeout: float = 2.0):
        self.endpoints = list(endpoints)
        self.rate = rate
        self.prefix = prefix
        self.timeout = timeout
        self.ok = 0
        self.failed: List[str] = []
        self.failovers = 0
        self.retried: List[str] = []
        self.latencies: List[float] = []
        self.written: Dict[str, str] = {}
        self.put_revisions: List[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._current = 0

    def _request(self, session: requests.Session, path: str, body: dict) -> Optional[dict]:
        deadline = time.monotonic() + self.timeout * len(self.endpoints)
        while time.monotonic() < deadline:
            url = self.endpoints[self._current % len(self.endpoints)] + path
            r = None
            try:
                r = session.post(url, json=body, timeout=self.timeout)
                if r.status_code == 200:
                    return r.json()
                # 503 (no leader, server stopped) and the gateway's own 408 "client connection is closing" (its gRPC
                # connection to a member shutting down) are what clientv3 sees as Unavailable: try the next endpoint.
                # "raft proposal dropped" (the leader is handing over) is a definite no: the write was not applied.
                going_away = (r.status_code == 503 or 'stopped' in r.text or 'connection is closing' in r.text
                              or 'proposal dropped' in r.text)
                if not going_away:
                    raise RuntimeError('%s: %s %s' % (url, r.status_code, r.text[:200]))
            except requests.RequestException:
                pass
            self.failovers += 1
            self.retried.append(r.text[:80] if r is not None else 'connection error')
            self._current += 1
            time.sleep(0.01)
        return None

    def _run(self) -> None:
        n = 0
        interval = 1.0 / self.rate
        with requests.Session() as session:
            next_at = time.monotonic()
            while not self._stop.is_set():
                n += 1
                key, value = '%s/%06d' % (self.prefix, n), 'v%d' % n
                for path, body in (('/v3/kv/put', {'key': _b64(key), 'value': _b64(value)}),
                                   ('/v3/kv/range', {'key': _b64(key)})):
                    began = time.monotonic()
                    try:
                        answer = self._request(session, path, body)
                    except RuntimeError as exc:
                        answer, error = None, str(exc)
                    else:
                        error = 'no endpoint served %s %s' % (path, key)
                    self.latencies.append(time.monotonic() - began)
                    if answer is None:
                        self.failed.append(error)
                        continue
                    self.ok += 1
                    if path == '/v3/kv/put':
                        self.written[key] = value
                        self.put_revisions.append(int((answer.get('header') or {}).get('revision', 0)))
                    elif not answer.get('kvs'):
                        self.failed.append('read of %s found nothing' % key)
                next_at += 2 * interval
                time.sleep(max(0.0, next_at - time.monotonic()))

    def start(self) -> 'LoadClient':
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


class Watcher:
    """Watches `prefix` through the gateway's streaming /v3/watch the way a client does across a rolling restart:
    when its member goes away it watches again on the next endpoint from the revision after the last one seen.
    `revisions` is every event's revision in arrival order; `repeated` those seen twice or out of order."""

    def __init__(self, endpoints: List[str], prefix: str = 'load', start_revision: int = 0):
        self.endpoints = list(endpoints)
        self.prefix = prefix
        self.last = start_revision - 1 if start_revision else 0
        self.revisions: List[int] = []
        self.repeated: List[int] = []
        self.reconnects = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._session: Optional[requests.Session] = None

    def _run(self) -> None:
        import json
        index = 0
        end = self.prefix[:-1] + chr(ord(self.prefix[-1]) + 1)
        while not self._stop.is_set():
            url = self.endpoints[index % len(self.endpoints)] + '/v3/watch'
            body = {'create_request': {'key': _b64(self.prefix), 'range_end': _b64(end),
                                       'start_revision': self.last + 1 if self.last else 0}}
            try:
                with requests.Session() as session, session.post(url, json=body, stream=True, timeout=(1, 1)) as r:
                    for line in r.iter_lines():
                        if self._stop.is_set():
                            return
                        if not line:
                            continue
                        result = json.loads(line).get('result') or {}
                        for event in result.get('events') or []:
                            rev = int(event['kv']['mod_revision'])
                            if rev <= self.last:
                                self.repeated.append(rev)
                            else:
                                self.last = rev
                            self.revisions.append(rev)
            except (requests.RequestException, ValueError):
                pass
            if self._stop.is_set():
                return
            self.reconnects += 1
            index += 1
            time.sleep(0.01)

    def start(self) -> 'Watcher':
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
