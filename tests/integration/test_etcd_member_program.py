# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`steward-etcd-member` driven the way etcd's wrapper drives etcd-backup-restore: status New → start → poll
until Successful → GET /config → etcd starts from that config. A real etcd 3.5, a local snapshot store.

Fresh start; a full snapshot through /snapshot/full; the db corrupted → druid row 7: the newest full snapshot
restored, every key back; the store emptied and the db corrupted again → refused (druid would start empty), the
data dir untouched, the reason at /initialization/decision."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
import yaml

from lab.env.ports import free_port
from support.etcd_cluster import etcd_bin_dirs

# no heartbeat within a test: the backup leader's loop would write to the store the test inspects
QUIET = ('--k8s-heartbeat-duration', '1h')
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _get(url: str, timeout: float = 10):
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return answer.status, answer.read()


def _status(base: str) -> str:
    return _get(base + '/initialization/status')[1].decode()


def _initialize(base: str, deadline: float = 60) -> str:
    """The wrapper's loop: start when New, wait while Progress; the final status."""
    end = time.monotonic() + deadline
    assert _status(base) == 'New'
    _get(base + '/initialization/start?mode=full')
    while time.monotonic() < end:
        status = _status(base)
        if status in ('Successful', 'Failed'):
            return status
        time.sleep(0.1)
    raise AssertionError('initialization did not finish within %ss' % deadline)


class Program:
    def __init__(self, tmp_path, config_file: str, store: str, data_dir: str, extra=()):
        self.port = free_port()
        self.base = 'http://127.0.0.1:%d' % self.port
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, 'controller') + os.pathsep + os.environ.get('PYTHONPATH', ''))
        self.log = open(str(tmp_path / ('member-%d.log' % self.port)), 'ab')
        self.proc = subprocess.Popen(
            [sys.executable, '-m', 'steward_controller.member.main', '--config-file', config_file,
             '--data-dir', data_dir, '--server-host', '127.0.0.1', '--server-port', str(self.port),
             '--storage-provider', 'local', '--store-container', store, '--store-prefix', 'etcd-main', *extra],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        end = time.monotonic() + 30
        while time.monotonic() < end:
            try:
                _status(self.base)
                return
            except OSError:
                assert self.proc.poll() is None, open(self.log.name).read()
                time.sleep(0.1)
        raise AssertionError('the member program did not serve')

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()


class Etcd:
    def __init__(self, binary: str, config: bytes, tmp_path):
        name = yaml.safe_load(config)['name']
        path = tmp_path / ('%s.conf.yaml' % name)
        path.write_bytes(config)
        self.log = open(str(tmp_path / ('%s.log' % name)), 'ab')
        env = {k: v for k, v in os.environ.items() if not k.startswith('ETCD_')}
        self.proc = subprocess.Popen([binary, '--config-file', str(path)], stdout=self.log, stderr=subprocess.STDOUT,
                                     env=env)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(20)
        self.log.close()


@pytest.fixture
def member_env(tmp_path):
    dirs = etcd_bin_dirs()
    if not dirs:
        pytest.skip('no etcd binary (STEWARD_ETCD_BIN_DIRS)')
    client, peer = free_port(), free_port()
    bootstrap = {
        'name': 'etcd-main-0', 'initial-cluster': 'etcd-main-0=http://127.0.0.1:%d' % peer,
        'initial-advertise-peer-urls': 'http://127.0.0.1:%d' % peer,
        'listen-peer-urls': 'http://127.0.0.1:%d' % peer, 'listen-client-urls': 'http://127.0.0.1:%d' % client,
        'advertise-client-urls': 'http://127.0.0.1:%d' % client, 'initial-cluster-token': 'etcd-cluster',
    }
    config_file = tmp_path / 'bootstrap.yaml'
    config_file.write_text(yaml.safe_dump(bootstrap))
    store = tmp_path / 'store'
    store.mkdir()
    return {'etcd': os.path.join(dirs[0], 'etcd'), 'etcdctl': os.path.join(dirs[0], 'etcdctl'),
            'client': 'http://127.0.0.1:%d' % client, 'config': str(config_file), 'store': str(store),
            'data': str(tmp_path / 'data')}


def _etcdctl(env, *args) -> str:
    return subprocess.run([env['etcdctl'], '--endpoints', env['client'], *args], capture_output=True, text=True,
                          check=True, timeout=30).stdout


def _wait_serving(env, deadline: float = 30) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            _etcdctl(env, 'endpoint', 'health')
            return
        except subprocess.CalledProcessError:
            time.sleep(0.2)
    raise AssertionError('etcd did not serve')


def _corrupt(data_dir: str) -> None:
    db = os.path.join(data_dir, 'member', 'snap', 'db')
    with open(db, 'r+b') as f:
        f.write(os.urandom(8192))


def test_the_wrapper_protocol_fresh_start_restore_and_refusal(member_env, tmp_path):
    env = member_env
    program = Program(tmp_path, env['config'], env['store'], env['data'], extra=QUIET)
    etcd = None
    try:
        assert _initialize(program.base) == 'Successful'
        assert _status(program.base) == 'New', 'a read of Successful turns it back to New, as druid does'
        config = yaml.safe_load(_get(program.base + '/config')[1])
        assert config['initial-cluster-state'] == 'new' and config['name'] == 'etcd-main-0'
        assert config['data-dir'] == env['data']
        decision = json.loads(_get(program.base + '/initialization/decision')[1])
        assert decision['decision']['row'] == 1 and decision['decision']['action'] == 'start'

        etcd = Etcd(env['etcd'], _get(program.base + '/config')[1], tmp_path)
        _wait_serving(env)
        for i in range(50):
            _etcdctl(env, 'put', 'k%02d' % i, 'v%d' % i)
        taken = json.loads(_get(program.base + '/snapshot/full', timeout=60)[1])
        assert taken['name'].startswith('Full-')
        latest = json.loads(_get(program.base + '/snapshot/latest')[1])
        assert latest['fullSnapshot']['name'] == taken['name'] and latest['deltaSnapshots'] == []
        etcd.stop()
        etcd = None

        _corrupt(env['data'])
        assert _initialize(program.base) == 'Successful'
        decision = json.loads(_get(program.base + '/initialization/decision')[1])
        assert decision['decision']['row'] == 7 and decision['decision']['action'] == 'restore-then-start'
        assert decision['done']['snapshot'] == taken['name'] and decision['done']['moved_aside']
        assert os.path.isdir(decision['done']['moved_aside']), 'the corrupt data dir is kept aside, not deleted'
        etcd = Etcd(env['etcd'], _get(program.base + '/config')[1], tmp_path)
        _wait_serving(env)
        assert _etcdctl(env, 'get', 'k49', '--print-value-only') == 'v49\n'
        assert len(_etcdctl(env, 'get', 'k', '--prefix', '--keys-only').split()) == 50
        etcd.stop()
        etcd = None

        for root, _dirs, files in os.walk(env['store']):
            for name in files:
                os.remove(os.path.join(root, name))
        _corrupt(env['data'])
        before = sorted(os.listdir(os.path.join(env['data'], 'member', 'snap')))
        assert _initialize(program.base) == 'Failed'
        decision = json.loads(_get(program.base + '/initialization/decision')[1])
        assert decision['decision']['action'] == 'refuse' and 'drop every key' in decision['error']
        assert sorted(os.listdir(os.path.join(env['data'], 'member', 'snap'))) == before
        status = 0
        try:
            _get(program.base + '/healthz')
        except urllib.error.HTTPError as exc:
            status = exc.code
        assert status == 503
    finally:
        if etcd is not None:
            etcd.stop()
        program.stop()


def test_three_members_bootstrap_and_a_member_with_bad_data_rejoins_as_a_learner_keeping_quorum(tmp_path):
    """Rows 1/2 for three members, then row 4: member 2's db corrupted while the other two keep quorum: it is
    removed, its data dir moved aside, added back as a learner, started from the config the program serves,
    promoted once in sync, and holds every key. The other two keep their member ids."""
    dirs = etcd_bin_dirs()
    if not dirs:
        pytest.skip('no etcd binary (STEWARD_ETCD_BIN_DIRS)')
    etcd_bin, etcdctl = os.path.join(dirs[0], 'etcd'), os.path.join(dirs[0], 'etcdctl')
    ports = [(free_port(), free_port()) for _member in range(3)]
    names = ['etcd-main-%d' % i for i in range(3)]
    initial = ','.join('%s=http://127.0.0.1:%d' % (n, p) for n, (_c, p) in zip(names, ports))
    clients = ['http://127.0.0.1:%d' % c for c, _p in ports]
    (tmp_path / 'store').mkdir()
    programs, etcds = [], [None, None, None]

    def ctl(*args, endpoints=None):
        return subprocess.run([etcdctl, '--endpoints', ','.join(endpoints or clients), *args], capture_output=True,
                              text=True, check=True, timeout=30).stdout

    try:
        for i, name in enumerate(names):
            client, peer = ports[i]
            bootstrap = {'name': name, 'initial-cluster': initial, 'initial-cluster-token': 'etcd-cluster',
                         'initial-advertise-peer-urls': 'http://127.0.0.1:%d' % peer,
                         'listen-peer-urls': 'http://127.0.0.1:%d' % peer,
                         'listen-client-urls': clients[i], 'advertise-client-urls': clients[i]}
            (tmp_path / ('%s.boot.yaml' % name)).write_text(yaml.safe_dump(bootstrap))
            programs.append(Program(tmp_path, str(tmp_path / ('%s.boot.yaml' % name)), str(tmp_path / 'store'),
                                    str(tmp_path / ('data-%d' % i)), extra=('--endpoints', ','.join(clients)) + QUIET))
        for i, program in enumerate(programs):
            assert _initialize(program.base) == 'Successful'
            config = _get(program.base + '/config')[1]
            assert yaml.safe_load(config)['initial-cluster-state'] == 'new', (i, _get(program.base + '/initialization/decision')[1])
            etcds[i] = Etcd(etcd_bin, config, tmp_path)
        end = time.monotonic() + 30
        while time.monotonic() < end:
            try:
                ctl('endpoint', 'health')
                break
            except subprocess.CalledProcessError:
                time.sleep(0.3)
        for i in range(100):
            ctl('put', 'k%03d' % i, 'v%d' % i)
        before = {m['name']: m['ID'] for m in json.loads(ctl('member', 'list', '-w', 'json'))['members']}

        etcds[2].stop()
        etcds[2] = None
        _corrupt(str(tmp_path / 'data-2'))
        assert _initialize(programs[2].base) == 'Successful'
        decision = json.loads(_get(programs[2].base + '/initialization/decision')[1])
        assert decision['decision']['row'] == 4 and decision['decision']['action'] == 'rejoin-as-learner'
        assert os.path.isdir(decision['done']['moved_aside'])
        config = yaml.safe_load(_get(programs[2].base + '/config')[1])
        assert config['initial-cluster-state'] == 'existing' and config['initial-cluster'].count('=') == 3
        etcds[2] = Etcd(etcd_bin, _get(programs[2].base + '/config')[1], tmp_path)
        end = time.monotonic() + 60
        members = []
        while time.monotonic() < end:
            members = json.loads(ctl('member', 'list', '-w', 'json', endpoints=clients[:2]))['members']
            if len(members) == 3 and not any(m.get('isLearner') for m in members) and all(m.get('name') for m in members):
                break
            time.sleep(0.5)
        assert len(members) == 3 and not any(m.get('isLearner') for m in members), members
        after = {m['name']: m['ID'] for m in members}
        assert after['etcd-main-0'] == before['etcd-main-0'] and after['etcd-main-1'] == before['etcd-main-1']
        assert after['etcd-main-2'] != before['etcd-main-2'], 'a new member id for the rejoined member'
        assert ctl('get', 'k099', '--print-value-only', '--consistency=s', endpoints=clients[2:]) == 'v99\n'
    finally:
        for etcd in etcds:
            if etcd is not None:
                etcd.stop()
        for program in programs:
            program.stop()


def _kubeconfig(path, url: str) -> str:
    path.write_text(yaml.safe_dump({
        'apiVersion': 'v1', 'kind': 'Config', 'current-context': 'lab',
        'clusters': [{'name': 'lab', 'cluster': {'server': url}}],
        'users': [{'name': 'lab', 'user': {}}],
        'contexts': [{'name': 'lab', 'context': {'cluster': 'lab', 'user': 'lab', 'namespace': 'default'}}]}))
    return str(path)


def _lease(kube, name: str):
    return kube.get('/apis/coordination.k8s.io/v1/namespaces/default/leases/%s' % name)


def test_the_leading_member_backs_up_and_renews_druids_leases(member_env, kube, tmp_path):
    """With lease renewal on, the member renews `<pod>` as `<hex id>:Leader`; as the leader it runs the backup
    loop: a full snapshot at once (none exists), deltas after writes, and the snapshot Leases carry the newest
    revisions. A Lease the controller has not created is never created by the member."""
    env = member_env
    for name in ('etcd-main-0', 'etcd-main-full-snap'):
        kube.create('/apis/coordination.k8s.io/v1/namespaces/default/leases',
                    {'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease', 'metadata': {'name': name},
                     'spec': {'leaseDurationSeconds': 40}})
    program = Program(tmp_path, env['config'], env['store'], env['data'], extra=(
        '--enable-member-lease-renewal', '--enable-snapshot-lease-renewal', '--k8s-heartbeat-duration', '1s',
        '--kubeconfig', _kubeconfig(tmp_path / 'kubeconfig', kube.server.url), '--delta-snapshot-period', '1s',
        '--work-dir', str(tmp_path / 'work'), '--defragmentation-schedule', ''))
    etcd = None
    try:
        assert _initialize(program.base) == 'Successful'
        etcd = Etcd(env['etcd'], _get(program.base + '/config')[1], tmp_path)
        _wait_serving(env)
        for i in range(20):
            _etcdctl(env, 'put', 'd%02d' % i, 'v%d' % i)
        member_id = '%x' % int(json.loads(_etcdctl(env, 'endpoint', 'status', '-w', 'json'))[0]['Status']['header']['member_id'])
        revision = int(json.loads(_etcdctl(env, 'endpoint', 'status', '-w', 'json'))[0]['Status']['header']['revision'])
        end, latest = time.monotonic() + 60, {}
        while time.monotonic() < end:
            latest = json.loads(_get(program.base + '/snapshot/latest')[1])
            deltas = latest.get('deltaSnapshots') or []
            if latest.get('fullSnapshot') and (deltas and deltas[-1]['end_revision'] >= revision
                                               or latest['fullSnapshot']['end_revision'] >= revision):
                break
            time.sleep(0.5)
        assert latest.get('fullSnapshot'), latest
        tip = max([latest['fullSnapshot']['end_revision']] + [d['end_revision'] for d in latest['deltaSnapshots']])
        assert tip >= revision, 'every write is in the store (full + deltas)'
        # the Lease is renewed once per heartbeat (1 s) with the revision the member had then: wait for a
        # heartbeat after the writes (CI read the one before: 14 of 21)

        def renewed_after_the_writes():
            lease = _lease(kube, 'etcd-main-0')
            return lease['spec'].get('holderIdentity') == member_id + ':Leader' and int(
                ((lease['metadata'].get('annotations') or {}).get('cluster.steward.io/revision')) or 0) >= revision

        end = time.monotonic() + 10
        while time.monotonic() < end and not renewed_after_the_writes():
            time.sleep(0.3)
        assert _lease(kube, 'etcd-main-0')['spec']['holderIdentity'] == member_id + ':Leader'
        assert _lease(kube, 'etcd-main-0')['spec'].get('renewTime')
        assert _lease(kube, 'etcd-main-full-snap')['spec']['holderIdentity'] == str(latest['fullSnapshot']['end_revision'])
        # what the etcd loop's safety rules read: the member's revision, the newest verified full snapshot
        member_annotations = _lease(kube, 'etcd-main-0')['metadata']['annotations']
        assert int(member_annotations['cluster.steward.io/revision']) >= revision
        full_annotations = _lease(kube, 'etcd-main-full-snap')['metadata']['annotations']
        assert full_annotations['cluster.steward.io/verified-revision'] == str(latest['fullSnapshot']['end_revision'])
        assert full_annotations['cluster.steward.io/verified-at'].endswith('Z')
        assert kube.get_or_none('/apis/coordination.k8s.io/v1/namespaces/default/leases/etcd-main-delta-snap') is None
    finally:
        if etcd is not None:
            etcd.stop()
        program.stop()


def test_the_labs_etcd_wrapper_starts_etcd_through_the_member_program(member_env, tmp_path):
    """lab/etcd_wrapper.py (the pod runtime's stand-in for gardener's etcd-wrapper image) against the real
    program: it initializes through the sidecar, starts etcd from the served config and answers /readyz
    only once etcd serves a linearizable read; SIGTERM stops etcd with it."""
    env = member_env
    program = Program(tmp_path, env['config'], env['store'], env['data'], extra=QUIET)
    ready_port = free_port()
    wrapper = subprocess.Popen(
        [sys.executable, '-m', 'lab.etcd_wrapper', 'start-etcd',
         '--backup-restore-host-port=etcd-main-local:%d' % program.port, '--etcd-server-name=etcd-main-local',
         '--backup-restore-tls-enabled=false', '--etcd-binary', env['etcd'], '--pod-ip', '127.0.0.1',
         '--etcd-wrapper-port', str(ready_port), '--work-dir', str(tmp_path / 'wrapper')],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end, code = time.monotonic() + 60, 0
        while time.monotonic() < end:
            try:
                code = _get('http://127.0.0.1:%d/readyz' % ready_port, timeout=3)[0]
                if code == 200:
                    break
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.3)
        assert code == 200, 'the wrapper reports ready once etcd serves'
        _etcdctl(env, 'put', 'through', 'wrapper')
        assert _etcdctl(env, 'get', 'through', '--print-value-only') == 'wrapper\n'
        decision = json.loads(_get(program.base + '/initialization/decision')[1])
        assert decision['decision']['row'] == 1
    finally:
        wrapper.terminate()
        wrapper.wait(30)
        program.stop()
    with pytest.raises(subprocess.CalledProcessError):
        _etcdctl(env, '--dial-timeout', '1s', '--command-timeout', '2s', 'get', 'through')
