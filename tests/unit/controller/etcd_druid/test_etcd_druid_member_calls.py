"""The `etcd` loop's calls that reach the members: the full snapshot a rolling change takes first (plan.TakeSnapshot):
recorded on the StatefulSet and asked of the member programs' /snapshot/full (the leader's first) beside the passes,
over real HTTP to a stand-in of the program's endpoint; its answer (revision or error) is what the planner sees next,
and a request past its deadline or answered with an error ends as given up; and an overdue scale-down's removal
step (plan.RemoveMembers) through the pods' client URLs, marking only this Etcd's Leases."""

import base64
import json
import os
import threading
import time
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.druid import client_tls as ct
from ansible_collections.steward.cluster.plugins.module_utils.druid import components as c
from ansible_collections.steward.cluster.plugins.module_utils.druid import plan as p
from ansible_collections.steward.cluster.plugins.module_utils.druid import scale_down as sd
from ansible_collections.steward.cluster.plugins.module_utils.druid import spec as s
from ansible_collections.steward.cluster.plugins.module_utils.druid import status as st

from support.druid_samples import sample
from steward_controller.core import member_api
from steward_controller.etcd_druid import DruidOptions
from steward_controller.etcd_druid import target
from steward_controller.etcd_druid import loop as loop_module
from steward_controller.etcd_druid.loop import EtcdDruidLoop
from test_etcd_druid_recovery_loop import Client     # the loop tests' recording client, one copy

NOW = 1_800_000_000.0
KEY = ('shoot', 'etcd-main')


class Member:
    """/snapshot/full as the member program answers it (status and JSON body chosen by the test; `delay` seconds
    before the answer)."""

    def __init__(self, code=200, body=None, delay=0.0):
        self.code, self.body, self.delay, self.asked = code, body or {}, delay, []
        member = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_):
                return

            def do_GET(self):  # noqa: N802
                member.asked.append(self.path)
                time.sleep(member.delay)
                data = json.dumps(member.body).encode()
                try:
                    self.send_response(member.code)
                    self.send_header('Content-Length', str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass

        self.server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = 'http://127.0.0.1:%d/snapshot/full' % self.server.server_address[1]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def members():
    started = []

    def make(**kw):
        started.append(Member(**kw))
        return started[-1]
    yield make
    for m in started:
        m.close()


def loop(timeout=600.0):
    runtime = types.SimpleNamespace(client=Client(), health=types.SimpleNamespace(beat=lambda k: None, api_ok=lambda: None),
                                    clock=lambda: NOW, report=lambda *a, **k: None)
    return EtcdDruidLoop(runtime, DruidOptions(update_snapshot_timeout=timeout))


def answered(lp, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        request = lp.snapshots.get(KEY)
        if request is not None and (request.revision is not None or request.error):
            return request
        time.sleep(0.02)
    raise AssertionError('no answer: %r' % lp.snapshots.get(KEY))


ACTION = p.TakeSnapshot('a full snapshot first', template='8050e0e03621798d', pods=('etcd-main-0',),
                        requested_at=NOW - 2)


def test_the_answer_is_the_snapshots_revision_and_wakes_the_etcds_pass(members):
    member = members(body={'name': 'Full-00000000-00000130-1800000000.gz', 'end_revision': 130})
    lp = loop()
    lp.due[KEY] = time.monotonic() + 60
    lp.request_snapshot(KEY, ACTION, [('etcd-main-0', member.url)])
    request = answered(lp)
    assert (request.template, request.requested_at, request.revision, request.error) == (
        '8050e0e03621798d', NOW - 2, 130, '')
    assert lp.due[KEY] == 0.0 and lp.background.woken.is_set() and member.asked == ['/snapshot/full']


def test_a_failing_member_is_passed_over_and_every_failure_named(members):
    broken = members(code=500, body={'error': 'store unreachable'})
    good = members(body={'end_revision': 131})
    lp = loop()
    lp.request_snapshot(KEY, ACTION, [('etcd-main-0', broken.url), ('etcd-main-1', good.url)])
    assert answered(lp).revision == 131
    lp = loop()
    lp.request_snapshot(KEY, ACTION, [('etcd-main-0', broken.url)])
    request = answered(lp)
    assert request.revision is None and 'etcd-main-0: HTTP 500' in request.error and 'store unreachable' in request.error


def test_the_deadline_covers_every_try(members):
    slow = members(delay=1.5, body={'end_revision': 1})
    started = time.monotonic()
    with pytest.raises(member_api.SnapshotRequestFailed) as err:
        member_api.request_snapshot([('etcd-main-0', slow.url), ('etcd-main-1', slow.url)], 0.5)
    assert time.monotonic() - started < 1.4
    assert 'etcd-main-0' in str(err.value) and 'etcd-main-1: not tried, the 0s deadline passed' in str(err.value)


def test_an_answer_to_a_request_given_up_on_is_dropped(members):
    member = members(delay=0.3, body={'end_revision': 130})
    lp = loop()
    lp.request_snapshot(KEY, ACTION, [('etcd-main-0', member.url)])
    lp.snapshots.pop(KEY)          # the planner's deadline passed: the loop gave up on it
    time.sleep(0.8)
    assert KEY not in lp.snapshots


def _observed(ip='10.0.0.5'):
    spec = s.parse_etcd(sample(replicas=3))
    sts = c.statefulset(spec, 3, 'checksum')
    pods = {'etcd-main-%d' % i: {
        'metadata': {'name': 'etcd-main-%d' % i, 'labels': dict(sts['spec']['template']['metadata']['labels']),
                     'ownerReferences': [{'kind': 'StatefulSet', 'name': 'etcd-main', 'apiVersion': 'apps/v1'}]},
        'status': {'podIP': ip} if ip else {}} for i in range(3)}
    return spec, st.Observed(statefulset=sts, pods=pods)


def test_target_records_the_request_then_asks_the_leaders_program_first():
    spec, observed = _observed()
    client, asked = Client(), []
    action = p.TakeSnapshot('first', template='8050e0e03621798d', pods=('etcd-main-2', 'etcd-main-0'),
                            requested_at=NOW)
    done = target.execute(client, spec, action, {}, observed, request_snapshot=asked.append)
    assert asked == [[('etcd-main-2', 'http://10.0.0.5:%d/snapshot/full' % spec.backup.port),
                      ('etcd-main-0', 'http://10.0.0.5:%d/snapshot/full' % spec.backup.port)]]
    ((path, patch),) = client.patches
    assert path.endswith('/statefulsets/etcd-main')
    record = p.update_snapshot_record({'metadata': patch['metadata']})
    assert record == {'template': '8050e0e03621798d', 'after': NOW} and 'etcd-main-2' in done[0]
    spec, observed = _observed(ip=None)
    client = Client()
    with pytest.raises(target.SnapshotNotRequested, match='etcd-main-2, etcd-main-0'):
        target.execute(client, spec, action, {}, observed, request_snapshot=asked.append)
    assert client.patches == []     # nothing recorded for a request that was not made


def test_the_update_records_the_changes_start_on_the_statefulset(monkeypatch):
    obj = sample(replicas=3)
    spec = s.parse_etcd(obj)
    sts = {'metadata': {'name': 'etcd-main', 'annotations': {'a': 'b'}}, 'spec': {'replicas': 3}}
    desired = {('statefulset', 'etcd-main'): sts}
    written = []
    monkeypatch.setattr(target, 'apply_object', lambda client, spec_, component, obj_: written.append(obj_) or 'x')
    target.execute(Client(), spec, p.UpdateStatefulSet('new template', template='abc', at=NOW), desired, st.Observed())
    target.execute(Client(), spec, p.UpdateStatefulSet('labels'), desired, st.Observed())
    assert p.update_snapshot_record(written[0]) == {'template': 'abc', 'after': NOW}
    assert written[0]['metadata']['annotations']['a'] == 'b'
    assert p.UPDATE_SNAPSHOT not in written[1]['metadata']['annotations']
    assert p.UPDATE_SNAPSHOT not in desired[('statefulset', 'etcd-main')]['metadata']['annotations']


def test_an_overdue_removal_goes_through_the_pods_client_urls_and_marks_only_our_leases():
    spec, observed = _observed()
    ours = c.member_lease(spec, 'etcd-main-2')
    observed = st.Observed(statefulset=observed.statefulset, pods=observed.pods,
                           member_leases={'etcd-main-2': ours, 'etcd-main-1': {'metadata': {'name': 'etcd-main-1'}}})
    client, seen = Client(), []

    def remove(urls, mark):
        seen.append(urls)
        return ['marked %s' % mark('etcd-main-2', 'a2'), 'marked %s' % mark('etcd-main-1', 'a1')]
    action = p.RemoveMembers('overdue', names=('etcd-main-1', 'etcd-main-2'), waited=400.0)
    done = target.execute(client, spec, action, {}, observed, remove_members=remove)
    assert seen == [('http://10.0.0.5:%d' % spec.etcd.client_port,) * 3] and done == ['marked True', 'marked False']
    ((path, patch),) = client.patches          # etcd-main-1's Lease is not this Etcd's: not written
    assert path.endswith('/leases/etcd-main-2') and patch == {'metadata': {'annotations': {sd.REMOVED: 'a2'}}}
    spec, observed = _observed(ip=None)
    with pytest.raises(target.RemovalRefused, match='no member pod has an address'):
        target.execute(Client(), spec, action, {}, observed, remove_members=remove)
    obj = sample(replicas=3)
    obj['spec']['etcd']['clientUrlTls'] = {'tlsCASecretRef': {'name': 'ca'}, 'serverTLSSecretRef': {'name': 's'},
                                           'clientTLSSecretRef': {'name': 'c'}}
    spec, observed = s.parse_etcd(obj), _observed()[1]
    seen.clear()
    target.execute(Client(), spec, action, {}, observed, remove_members=remove)
    assert seen == [('https://10.0.0.5:%d' % spec.etcd.client_port,) * 3]   # client TLS: the members' https URLs


class Kube(Client):
    """The Etcd as the API holds it, and the status writes."""

    def __init__(self, obj):
        super().__init__()
        self.obj = obj

    def get_or_none(self, path):
        return self.obj


def _pass_with(monkeypatch, action, execute):
    """One run_pass whose planner says `action` and whose target does `execute` (the glue under test: Events and
    lastErrors of an overdue removal)."""
    obj = sample(replicas=3)
    obj['metadata']['finalizers'] = [s.FINALIZER]
    obj['status'] = {'observedGeneration': obj['metadata']['generation']}
    spec = s.parse_etcd(obj)
    posted = []
    lp = loop()
    lp.client = Kube(obj)
    lp.runtime.report = lambda body, reason, message, warning=False, **kw: posted.append((reason, message, warning))
    monkeypatch.setattr(target, 'read', lambda client, spec_: (st.Observed(statefulset=c.statefulset(spec, 3, 'x')), {}))
    monkeypatch.setattr(p, 'plan', lambda *a, **k: p.Plan(action, {}))
    monkeypatch.setattr(target, 'execute', execute)
    lp.run_pass(KEY)
    statuses = [body['status'] for path, body in lp.client.patches if path.endswith('/status')]
    return posted, statuses[-1]


def test_an_overdue_removal_is_said_in_an_event_and_last_errors(monkeypatch):
    action = p.RemoveMembers('scale-down 3 -> 1: not removed etcd-main-2 400s after', names=('etcd-main-2',),
                             waited=400.0, timeout=300.0)
    posted, status = _pass_with(monkeypatch, action, lambda *a, **k: ['superfluous members: etcd-main-2 removed'])
    assert posted == [('MemberRemovalOverdue', action.message + ': superfluous members: etcd-main-2 removed', True)]
    (error,) = [e for e in status['lastErrors'] if e['code'] == 'ERR_MEMBER_REMOVAL_OVERDUE']
    assert 'etcd-main-2' in error['description'] and '400s' in error['description']

    def refuse(*a, **k):
        raise target.RemovalRefused('not provably the going pods\' own: etcd-main-2')
    posted, status = _pass_with(monkeypatch, action, refuse)
    assert posted == [('MemberRemovalOverdue', "the leading member's program did not remove etcd-main-2 from etcd "
                       "within 300s; the loop did not remove them: not provably the going pods' own: etcd-main-2", True)]
    (error,) = [e for e in status['lastErrors'] if e['code'] == 'ERR_MEMBER_REMOVAL_OVERDUE']
    assert '400s' in error['description'] and 'not provably' in error['description']


def _b64(data):
    return base64.b64encode(data).decode()


def test_a_recovery_source_is_saved_over_client_tls_with_the_etcds_secrets(monkeypatch):
    """The save step reads the surviving member's data at its https client URL with the Etcd's CA and client
    certificate Secrets (druid/client_tls.py), held in files only during the call; a missing Secret fails the step
    naming it, before etcd is asked."""
    obj = sample(replicas=3)
    obj['spec']['etcd']['clientUrlTls'] = {'tlsCASecretRef': {'name': 'ca-etcd'}, 'serverTLSSecretRef': {'name': 's'},
                                           'clientTLSSecretRef': {'name': 'etcd-client-tls'}}
    spec = s.parse_etcd(obj)
    secrets = {'/api/v1/namespaces/%s/secrets/ca-etcd' % spec.namespace: {'data': {'ca.crt': _b64(b'CA')}},
               '/api/v1/namespaces/%s/secrets/etcd-client-tls' % spec.namespace: {'data': {
                   'tls.crt': _b64(b'CERT'), 'tls.key': _b64(b'KEY')}}}
    seen = []

    def take(conn, store, url, now, snapshot_timeout):
        files = (conn.ca_cert, conn.client_cert, conn.client_key)
        seen.append((conn.endpoints, url, [open(f, 'rb').read() for f in files], conn.client_key))
        return (types.SimpleNamespace(name='full-1'), types.SimpleNamespace(name='etcd-main-1', revision=42))
    monkeypatch.setattr(loop_module, 'parse_store', lambda *a: None)
    monkeypatch.setattr(loop_module, 'local_root', lambda runtime: '')
    monkeypatch.setattr(loop_module, 'open_druid_store', lambda *a: 'store')
    monkeypatch.setattr(loop_module, 'take_member_snapshot', take)
    lp = loop()
    lp.client = types.SimpleNamespace(get_or_none=secrets.get)
    url = ct.member_client_urls(spec, ['10.0.0.5'])[0]
    said = lp.save_source(obj, spec, url)
    assert url == 'https://10.0.0.5:%d' % spec.etcd.client_port
    assert seen[0][:3] == (('https://10.0.0.5:%d' % spec.etcd.client_port,), url, [b'CA', b'CERT', b'KEY'])
    assert not os.path.exists(seen[0][3]) and 'revision 42' in said
    lp.client = types.SimpleNamespace(get_or_none=lambda path: None)
    with pytest.raises(ct.ClientTLSError, match='tlsCASecretRef: Secret .*/ca-etcd not found'):
        lp.save_source(obj, spec, url)
    assert len(seen) == 1
