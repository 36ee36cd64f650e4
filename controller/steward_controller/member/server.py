# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""etcd-backup-restore's HTTP endpoints, as etcd's wrapper and druid call them.

  GET /initialization/status   `New`, `Progress`, `Successful` or `Failed` (plain text); a read of Successful or
                               Failed turns it back to New, as etcd-backup-restore does, so a restarted etcd
                               initializes again
  GET|POST /initialization/start?mode=full|sanity&failbelowrevision=N   starts one initialization (once)
  GET /config                  the member's etcd config (YAML): the bootstrap config with this member's name,
                               initial-cluster as the decision needs it and initial-cluster-state
  GET /healthz                 200 {"health": true} once initialized, the member answers and - once after each etcd
                               start - it has caught up with the leader (revision within --readiness-max-lag of the
                               leader's and HashKV equal at a common revision: etcd/upgrade's member_caught_up, the
                               check steward.cluster.etcd_upgrade runs between members); 503 while it catches up or
                               once the program is stopping, with {"caughtUp": {ok, reason, message, revision, lag}}
  GET /snapshot/latest         the newest full snapshot and the deltas that continue it (the chain a restore uses)
  GET /snapshot/full           takes a full snapshot now (the store must be configured)
  GET /snapshot/delta          the backup leader writes its buffered events as a delta now and answers with it
  On a follower both are proxied to the leading member's program (its etcd's client URL host, this program's port),
  as etcd-backup-restore's followers do, so whichever pod a caller asks, the backup leader answers; a request that
  was proxied once is answered where it lands (no loop). When the leader's program cannot be reached, a full
  snapshot is taken here instead (it is as valid, from this member's etcd) and a delta is a 502 naming it.
Ours beside druid's: GET /initialization/decision, the last decision with its reason (JSON), so a Failed
status can be explained without reading logs; GET /leader/handoff, the etcd container's preStop hook (the `etcd`
loop renders it): the member stops being ready and, when its etcd leads, moves leadership to a caught-up follower
within --leader-handoff-timeout before the kubelet signals etcd, so the hand-off comes first on a real cluster too
(Kubernetes signals a pod's containers at the same time); 200 {"handedTo": <member id or null>} either way (a
preStop hook's failure stops nothing).
"""

from __future__ import annotations

import json
import threading
import time
import traceback
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Mapping, Optional
from urllib.parse import parse_qs, urlparse

import yaml

from ansible_collections.steward.cluster.plugins.module_utils.common.netaddr import url_host
from ansible_collections.steward.cluster.plugins.module_utils.druid.components import HANDOFF_PATH
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import Gateway, member_id_hex
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import members_from_raw
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.members import promote_learner
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, EtcdUnavailable
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery import initialization as init
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta import plan_chain
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot import take_full_snapshot
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.member_ops import (
    READY_MAX_LAG, member_caught_up)

from steward_controller.member.initializer import Initializer, initial_cluster_for, others

NEW, PROGRESS, SUCCESSFUL, FAILED = 'New', 'Progress', 'Successful', 'Failed'
PROXIED_FROM = 'X-Steward-Proxied-From'   # set on a request a follower forwards: answered where it lands
PROXIED_TO = 'X-Steward-Proxied-To'       # set on the follower's answer: which program answered


class MemberState:
    """The initialization status and the bootstrap config, shared by the handler threads."""

    def __init__(self, initializer: Initializer, bootstrap: Dict[str, Any], upload_timeout: float = 300):
        self.initializer = initializer
        self.bootstrap = bootstrap
        self.status = NEW
        self.initialized = False
        self.error = ''
        self.upload_timeout = upload_timeout
        self.uploaded: Optional[Dict[str, Any]] = None
        self.promoted: Optional[str] = None
        self.heartbeat: Any = None   # leader.Heartbeat, set by main: the backup leader's runner lives there
        self.lock = threading.Lock()
        # Readiness: caught up once since etcd last started (HashKV costs a pass over the keyspace: not every probe)
        self.catch_up = True            # --readiness-catch-up
        self.max_lag = READY_MAX_LAG    # --readiness-max-lag
        self.caught_up = False
        self.last_catch_up: Dict[str, Any] = {}
        self.stopping = False           # SIGTERM or the preStop hook: the pod is going away, so it is no longer ready
        self.handoff = True             # --leader-handoff
        self.handoff_timeout = 10.0     # --leader-handoff-timeout
        self._stop_lock = threading.Lock()
        self._handed_off = False
        self.server_port = 8080         # --server-port (serve() sets the one it bound)
        self.proxy_timeout = 900.0      # --etcd-snapshot-timeout: a proxied snapshot request's deadline

    def full_published(self, snapshot: Mapping[str, Any]) -> Dict[str, Any]:
        """A full snapshot this program took outside the backup runner (GET /snapshot/full, the upload after a
        restore) was verified before it was published: the full-snap Lease says so, as for the runner's own, so
        the loop's gates and a quorum-loss plan see the newest verified revision, not an older one."""
        leases = getattr(self.heartbeat, 'leases', None)
        revision = snapshot.get('end_revision')
        if leases is not None and isinstance(revision, int):
            leases.snapshot('full', revision, verified=True)
        return dict(snapshot)

    def prepare_stop(self) -> Optional[str]:
        """The pod is being stopped (its preStop hook, or SIGTERM): no longer ready, and leadership moved off this
        member when its etcd leads (the new leader's id; None when it did not lead or could not move it). Once: the
        hook and SIGTERM come at about the same time (a kubelet signals the containers without a hook at once), and
        the second waits for the first's hand-off instead of racing it with a MoveLeader of its own."""
        self.stopping = True
        with self._stop_lock:
            if self._handed_off or not (self.handoff and self.initialized and self.heartbeat is not None):
                return None
            self._handed_off = True
            return self.heartbeat.hand_off(self.handoff_timeout)

    def leader_program(self) -> Optional[str]:
        """The base URL of the leading member's program (the host of the leader's first client URL, this program's
        port: every pod of the StatefulSet runs the program on the same port); None when this member's etcd leads.
        EtcdError when the leader or its URL cannot be read."""
        url = self.initializer.options.client_url
        with Gateway(self.initializer.conn.with_endpoints([url])) as gateway:
            status = gateway.status(url, timeout=2)
            if str(status.get('leader')) == str(status['header']['member_id']):
                return None
            if not status.get('leader') or str(status.get('leader')) == '0':
                raise EtcdUnavailable('the member at %s knows no leader' % url)
            leader = member_id_hex(status['leader'])
            members = members_from_raw(gateway.member_list(url))
        found = next((m for m in members if m['id'] == leader), None)
        host = urlparse(((found or {}).get('client_urls') or [''])[0]).hostname
        if not host:
            raise EtcdUnavailable('the leader %s has no client URL in the member list' % leader)
        return 'http://%s:%d' % (url_host(host), self.server_port)

    def start(self, mode: str, fail_below: int) -> bool:
        with self.lock:
            if self.status != NEW:
                return False
            self.status = PROGRESS
            self.caught_up = False   # etcd (re)starts after this initialization: it catches up again
        threading.Thread(target=self._run, args=(mode, fail_below), daemon=True).start()
        return True

    def _run(self, mode: str, fail_below: int) -> None:
        try:
            done = self.initializer.run(mode, fail_below)
            ok, error = True, ''
        except (EtcdError, OSError, ValueError) as exc:
            done, ok, error = None, False, str(exc)
        except Exception as exc:  # pylint: disable=broad-except  # a bug: Failed, with its traceback, never Progress forever
            traceback.print_exc()
            done, ok, error = None, False, 'bug: %s: %s' % (exc.__class__.__name__, exc)
        print('initialization %s: %s' % ('succeeded' if ok else 'failed', json.dumps(
            (self.initializer.last or {}).get('decision')) if ok else error), flush=True)
        with self.lock:
            self.status, self.initialized, self.error = (SUCCESSFUL if ok else FAILED), ok, error
        action = (done or {}).get('done') or {}
        if ok and action.get('upload_full'):
            threading.Thread(target=self._upload_full, daemon=True).start()
        if ok and action.get('member_id'):
            threading.Thread(target=self._promote, args=(action['member_id'],), daemon=True).start()

    def _promote(self, member_id: str) -> None:
        """ETCD-33: the learner is promoted once etcd allows it (its log caught up with the leader's)."""
        peers = self.initializer.conn.with_endpoints(others(self.initializer.conn, self.initializer.options.client_url))
        try:
            promote_learner(peers, peers.endpoints[0], member_id, retry_timeout=self.upload_timeout)
            self.promoted = member_id
        except EtcdError as exc:
            self.error = 'promotion of learner %s: %s' % (member_id, exc)

    def _upload_full(self) -> None:
        """druid row 7 / ETCD-31 step 3: once the restored member serves, a full snapshot of it is taken and
        uploaded before the others join from it."""
        conn = self.initializer.conn.with_endpoints([self.initializer.options.client_url])
        deadline = time.monotonic() + self.upload_timeout
        while time.monotonic() < deadline:
            try:
                self.uploaded = take_full_snapshot(conn, self.initializer.store, now=time.time())
                self.full_published(self.uploaded['snapshot'])
                return
            except EtcdError:
                time.sleep(1)

    def read_status(self) -> str:
        with self.lock:
            status = self.status
            if status in (SUCCESSFUL, FAILED):
                self.status = NEW
            return status

    def config(self) -> Dict[str, Any]:
        options = self.initializer.options
        config = dict(self.bootstrap)
        config['name'] = options.name
        decision = (self.initializer.last or {}).get('decision') or {}
        done = (self.initializer.last or {}).get('done') or {}
        if decision.get('single_member'):
            config['initial-cluster'] = ','.join('%s=%s' % (options.name, u) for u in options.peer_urls)
        elif done.get('initial_cluster'):
            config['initial-cluster'] = done['initial_cluster']
        else:
            config['initial-cluster'] = initial_cluster_for(options, self._members())
        config['initial-cluster-state'] = decision.get('cluster_state') or init.NEW
        config['initial-advertise-peer-urls'] = ','.join(options.peer_urls)
        if options.client_url:   # druid's bootstrap config maps every member to its URLs: etcd wants this one's
            config['advertise-client-urls'] = options.client_url
        config['data-dir'] = options.data_dir
        return config

    def _members(self):
        peers = others(self.initializer.conn, self.initializer.options.client_url)
        if not peers:
            return []
        try:
            with Gateway(self.initializer.conn.with_endpoints(peers)) as gateway:
                return gateway.member_list()
        except EtcdError:
            return []

    def healthy(self) -> bool:
        """The readiness the pod's probe reads: initialized, not stopping, etcd answers, and it has caught up with
        the leader since it last started (so the `etcd` loop's next rolling restart, gated on AllMembersReady,
        waits for it; the same verdict the etcd_upgrade run waits for between members)."""
        url = self.initializer.options.client_url
        if not self.initialized or not url:
            return self.initialized
        if self.stopping:
            return False
        if self.caught_up or not self.catch_up:
            try:
                with Gateway(self.initializer.conn.with_endpoints([url])) as gateway:
                    gateway.status(url, timeout=2)
                return True
            except EtcdError:
                self.caught_up = False   # etcd went away: it catches up again before it is ready
                return False
        verdict = member_caught_up(self.initializer.conn.with_endpoints([url]), url, self.max_lag)
        self.last_catch_up = {'ok': verdict.ok, 'reason': verdict.reason.value if verdict.reason else None,
                              'message': verdict.message, 'revision': verdict.revision, 'lag': verdict.lag}
        if verdict.ok:
            print('caught up with the leader: %s' % verdict.message, flush=True)
        self.caught_up = verdict.ok
        return verdict.ok


def _handler(state: MemberState):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt: str, *args: Any) -> None:  # quiet: the program logs decisions itself
            return

        def _send(self, code: int, body: Any, content_type: str = 'application/json') -> None:
            data = body if isinstance(body, bytes) else (
                body.encode() if isinstance(body, str) else json.dumps(body, default=str).encode())
            self.send_response(code)
            self.send_header('Content-Type', content_type)
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.do_GET()

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            url = urlparse(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            if url.path == '/metrics' and getattr(state, 'metrics', None) is not None:
                return self._send(200, *state.metrics.exposition())
            if url.path == '/initialization/status':
                return self._send(200, state.read_status(), 'text/plain')
            if url.path == '/initialization/start':
                mode = query.get('mode') or init.FULL
                try:
                    fail_below = int(query.get('failbelowrevision') or 0)
                    if mode not in init.MODES:
                        raise ValueError('mode %r is not one of %s' % (mode, ', '.join(init.MODES)))
                except ValueError as exc:
                    return self._send(400, {'error': str(exc)})
                state.start(mode, fail_below)
                return self._send(200, b'', 'text/plain')
            if url.path == '/initialization/decision':
                return self._send(200, dict(state.initializer.last, error=state.error))
            if url.path == '/config':
                return self._send(200, yaml.safe_dump(state.config(), sort_keys=True), 'application/yaml')
            if url.path == '/healthz':
                healthy = state.healthy()
                return self._send(200 if healthy else 503, {'health': healthy, 'caughtUp': state.last_catch_up})
            if url.path == HANDOFF_PATH:
                moved = state.prepare_stop()
                if moved:
                    print('stopping: leadership handed to %s (the preStop hook)' % moved, flush=True)
                return self._send(200, {'handedTo': moved})
            if url.path in ('/snapshot/full', '/snapshot/delta') and not self.headers.get(PROXIED_FROM):
                if self._proxy_to_leader(url.path):
                    return None
            if url.path in ('/snapshot/latest', '/snapshot/full'):
                return self._snapshot(url.path)
            if url.path == '/snapshot/delta':
                runner = getattr(state.heartbeat, 'runner', None)
                if runner is None:
                    return self._send(405, {'error': 'this member is not the backup leader'})
                request = runner.request_delta()
                if not request.done.wait(60):
                    return self._send(504, {'error': 'the delta snapshot was not written within 60s'})
                if request.snapshot is None:
                    return self._send(200, {'name': None, 'reason': 'no event since the last snapshot'})
                return self._send(200, request.snapshot.to_dict())
            return self._send(404, {'error': 'no such endpoint: %s' % url.path})

        def _proxy_to_leader(self, path: str) -> bool:
            """Forward a snapshot request to the leading member's program and relay its answer (True); False when
            this member leads, or (a full snapshot) the leader's program cannot be reached: answered here."""
            try:
                leader = state.leader_program()
            except EtcdError as exc:
                if path == '/snapshot/delta':
                    self._send(502, {'error': 'the leading member is not known: %s' % exc})
                    return True
                print('snapshot request: the leader is not known (%s): answered here' % exc, flush=True)
                return False
            if leader is None:
                return False
            target = leader + self.path
            request = urllib.request.Request(target, headers={PROXIED_FROM: state.initializer.options.name or 'member'})
            try:
                with urllib.request.urlopen(request, timeout=state.proxy_timeout) as answer:
                    code, body, kind = answer.status, answer.read(), answer.headers.get('Content-Type') or ''
            except urllib.error.HTTPError as exc:
                code, body, kind = exc.code, exc.read(), exc.headers.get('Content-Type') or ''
            except OSError as exc:
                if path == '/snapshot/delta':
                    self._send(502, {'error': 'the leading member\'s program at %s did not answer: %s' % (leader, exc)})
                    return True
                print('snapshot request: the leader\'s program at %s did not answer (%s): answered here' % (
                    leader, exc), flush=True)
                return False
            self.send_response(code)
            self.send_header('Content-Type', kind or 'application/json')
            self.send_header('Content-Length', str(len(body)))
            self.send_header(PROXIED_TO, target)
            self.end_headers()
            self.wfile.write(body)
            return True

        def _snapshot(self, path: str) -> None:
            store = state.initializer.store
            if store is None:
                return self._send(405, {'error': 'no snapshot store is configured'})
            try:
                if path == '/snapshot/full':
                    conn = state.initializer.conn.with_endpoints([state.initializer.options.client_url])
                    return self._send(200, state.full_published(
                        take_full_snapshot(conn, store, now=time.time())['snapshot']))
                chain = plan_chain(store.list())   # the engine's chain: what a restore would use
                return self._send(200, {'fullSnapshot': chain.base.to_dict() if chain.base else None,
                                        'deltaSnapshots': [d.to_dict() for d in chain.deltas]})
            except EtcdError as exc:
                return self._send(500, {'error': str(exc)})
    return Handler


def serve(state: MemberState, host: str, port: int) -> ThreadingHTTPServer:
    """The HTTP server, started in a daemon thread; `shutdown()` stops it."""
    server = ThreadingHTTPServer((host, port), _handler(state))
    server.daemon_threads = True
    state.server_port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
