"""etcd static pods upgraded by image tag (`etcd_upgrade` with `target_image`), on three lab host roots each run by
the lab's static-pod supervisor (lab/provisioning/supervisor.py, the kubelet's stand-in, which runs Debian's etcd for
an `etcd:3.4.*` tag and the wheel's for `etcd:3.5.*`): 3.4 -> 3.5 under a client's load, member by member through the
module's entry (upgrade_member, what the playbook runs on each host), with a run that died right after rewriting one
member's manifest resumed; a member certificate inside the window refused in check mode.

Not covered here: TLS between members (the manifests are plain HTTP on 127.0.0.1; the provisioning lab's TLS
manifests are exercised by test_provisioning_lab.py, not upgraded) and the playbook's static-pod hosts."""

from __future__ import annotations

import datetime
import json
import os
import time

import pytest
import yaml

from support.etcd_cluster import etcd_bin_dirs, etcd_version
from support.etcd_rolling import LoadClient
from support.upgrade_lab import etcd_manifest
from lab.env.ports import free_port
from lab.provisioning import hosts as lab_hosts

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.etcd_static_pod import (
    StaticPodMember,
    upgrade_member,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.run import UpgradeError, observe
from ansible_collections.steward.cluster.plugins.modules.etcd_upgrade import SPEC

DIRS = {etcd_version(d).rsplit('.', 1)[0]: d for d in etcd_bin_dirs()}
pytestmark = pytest.mark.skipif(not {'3.4', '3.5'} <= set(DIRS), reason='needs etcd 3.4 and 3.5 (make all)')
NAMES = ('cp1', 'cp2', 'cp3')
MANIFEST = '/etc/kubernetes/manifests/etcd.yaml'


class StaticPodHosts:
    def __init__(self, base):
        self.base = base
        self.ports = {n: (free_port(), free_port()) for n in NAMES}
        self.roots = {n: os.path.join(base, 'hosts', n) for n in NAMES}
        self.endpoints = ['http://127.0.0.1:%d' % self.ports[n][0] for n in NAMES]

    def manifest_path(self, name):
        return os.path.join(self.roots[name], MANIFEST.lstrip('/'))

    def start(self, image):
        for name in NAMES:
            os.makedirs(os.path.dirname(self.manifest_path(name)), exist_ok=True)
            with open(self.manifest_path(name), 'w') as f:
                f.write(etcd_manifest(name, self.ports, image))
            lab_hosts.start_supervisor(self.roots[name], interval=0.2)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                state = observe(EtcdConnection(endpoints=tuple(self.endpoints)))
                if len(state['members']) == 3 and all(m['healthy'] for m in state['members']):
                    return self
            except Exception:  # not up yet
                pass
            time.sleep(0.3)
        raise TimeoutError('static-pod etcd did not come up:\n%s' % self.logs())

    def starts(self, name):
        """How many times the supervisor started the etcd pod on this host (its log, the kubelet's events)."""
        with open(os.path.join(self.roots[name], 'var/log/supervisor.log')) as f:
            return sum(1 for line in f if ': started etcd (pid' in line)

    def logs(self):
        out = []
        for name in NAMES:
            for rel in ('var/log/supervisor.log', 'var/log/pods/etcd.log'):
                path = os.path.join(self.roots[name], rel)
                if os.path.exists(path):
                    with open(path, 'rb') as f:
                        out.append('%s %s: %s' % (name, rel, f.read()[-1500:].decode('utf-8', 'replace')))
        return '\n'.join(out)

    def stop(self):
        for name in NAMES:
            lab_hosts.stop_host(self.roots[name])


@pytest.fixture
def hosts34(tmp_path):
    hosts = StaticPodHosts(str(tmp_path))
    try:
        yield hosts.start('registry.k8s.io/etcd:%s-0' % etcd_version(DIRS['3.4']))
    finally:
        hosts.stop()


def _params(hosts, name, target_image, tmp_path, **extra):
    p = {k: v.get('default') for k, v in SPEC.items()}
    p.update(endpoints=hosts.endpoints, member=name, target_image=target_image, root=hosts.roots[name],
             client_url='http://127.0.0.1:%d' % hosts.ports[name][0], store=str(tmp_path / 'backups'),
             bin_dirs=[DIRS['3.5']], tmp_dir=str(tmp_path), caught_up_timeout=60)
    p.update(extra)
    return p


def test_34_to_35_by_image_tag_under_load_resuming_a_run_that_died_after_a_manifest_rewrite(hosts34, tmp_path):
    target = etcd_version(DIRS['3.5'])
    image = 'registry.k8s.io/etcd:%s-0' % target
    conn = EtcdConnection(endpoints=tuple(hosts34.endpoints))
    hosts34_version = etcd_version(DIRS['3.4'])
    assert {m['version'] for m in observe(conn)['members']} == {hosts34_version}

    # check mode: the target version from the tag, the plan (image swaps), nothing written
    before = {n: open(hosts34.manifest_path(n), 'rb').read() for n in NAMES}
    checked = upgrade_member(_params(hosts34, 'cp1', image, tmp_path), check_mode=True)
    assert checked['target_version'] == target and checked['verdict']['ok']
    assert checked['plan']['swap'] == 'image' and {s['swap'] for s in checked['plan']['steps']} == {'image'}
    order = [s['name'] for s in checked['plan']['steps']]
    assert sorted(order) == sorted(NAMES) and checked['plan']['steps'][-1]['was_leader']
    assert {n: open(hosts34.manifest_path(n), 'rb').read() for n in NAMES} == before

    # a run that died right after rewriting the first member's manifest (its record says so)
    first = order[0]
    first_params = _params(hosts34, first, image, tmp_path)
    StaticPodMember(first_params).ops().swap()
    record = StaticPodMember(first_params).record_path()
    with open(record, 'w') as f:
        first_id = next(m['id'] for m in observe(conn)['members'] if m['name'] == first)
        json.dump({'target_version': target, 'in_flight': {'id': first_id, 'name': first, 'phase': 'restart'},
                   'completed': []}, f)

    load = LoadClient(hosts34.endpoints, rate=100).start()
    upgraded = {}
    try:
        for name in order:   # what the playbook does: the hosts in the plan's order, one at a time
            result = upgrade_member(_params(hosts34, name, image, tmp_path, in_flight=first), check_mode=False)
            upgraded[name] = result['upgraded']
    finally:
        load.stop()
    assert load.failed == [], load.failed[:5]
    assert load.ok > 50
    state = observe(conn)
    assert {m['version'] for m in state['members']} == {target} and state['cluster_version'] == '3.5'
    assert all(yaml.safe_load(open(hosts34.manifest_path(n)))['spec']['containers'][0]['image'] == image
               for n in NAMES)
    # every member's pod started twice in all: once at 3.4, once at 3.5 - the resumed one was not restarted again
    assert {n: hosts34.starts(n) for n in NAMES} == {n: 2 for n in NAMES}, hosts34.logs()
    previous = os.path.join(hosts34.roots[first], 'etc/kubernetes/tmp/etcd.yaml.pre-upgrade')
    assert open(previous, 'rb').read() == before[first]
    print('static-pod upgrade figures:', {n: [(u['name'], u['seconds']) for u in v] for n, v in upgraded.items()},
          'requests ok', load.ok, 'retried', len(load.retried), 'max latency %.3f' % max(load.latencies))
    # a second run on any host changes nothing
    again = upgrade_member(_params(hosts34, order[-1], image, tmp_path), check_mode=False)
    assert again['changed'] is False and again['plan']['steps'] == []


def _short_lived_cert(path, hours):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'cp2')])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(hours=hours)).sign(key, hashes.SHA256()))
    with open(path, 'wb') as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    return cert.not_valid_after_utc


def test_a_peer_certificate_ending_within_the_window_refuses_naming_it(hosts34, tmp_path):
    """The static pod's --peer-cert-file (read from its manifest below the root) ends in 2 h; the window is a day."""
    root = tmp_path / 'cp2-copy'
    pki = root / 'etc/kubernetes/pki/etcd'
    pki.mkdir(parents=True)
    not_after = _short_lived_cert(str(pki / 'peer.crt'), hours=2)
    _short_lived_cert(str(pki / 'server.crt'), hours=24 * 365)
    manifest = yaml.safe_load(open(hosts34.manifest_path('cp2')))
    manifest['spec']['containers'][0]['command'] += ['--cert-file=/etc/kubernetes/pki/etcd/server.crt',
                                                     '--peer-cert-file=/etc/kubernetes/pki/etcd/peer.crt']
    (root / 'etc/kubernetes/manifests').mkdir(parents=True)
    (root / 'etc/kubernetes/manifests/etcd.yaml').write_text(yaml.safe_dump(manifest))
    image = 'registry.k8s.io/etcd:%s-0' % etcd_version(DIRS['3.5'])
    params = _params(hosts34, 'cp2', image, tmp_path, root=str(root))
    with pytest.raises(UpgradeError) as err:
        upgrade_member(params, check_mode=True)
    refusals = err.value.result()['verdict']['refusals']
    assert [r['reason'] for r in refusals] == ['cert-expiring']
    message = refusals[0]['message']
    assert refusals[0]['member'] == 'cp2' and '/etc/kubernetes/pki/etcd/peer.crt' in message
    assert not_after.strftime('%Y-%m-%dT%H:%M:%S') in message and '86400s' in message
    # a narrower window passes (check mode: nothing happens either way)
    assert upgrade_member(dict(params, cert_window=3600), check_mode=True)['verdict']['ok']


def test_the_playbook_upgrades_static_pods_by_image_tag(hosts34, tmp_path):
    """ansible-playbook steward.cluster.etcd_upgrade -e etcd_upgrade_image=...: check mode prints the target version
    from the tag and changes nothing; the run upgrades every member under load; a second run changes nothing."""
    from support.ansible import run_playbook
    from lab.paths import venv_python
    inventory = tmp_path / 'inventory.yml'
    inventory.write_text(yaml.safe_dump({'control_plane': {'hosts': {n: {
        'ansible_host': '127.0.0.1', 'ansible_connection': 'local', 'ansible_python_interpreter': venv_python(),
        'provisioning_root': hosts34.roots[n]} for n in NAMES}}}))
    target = etcd_version(DIRS['3.5'])
    store = tmp_path / 'backups'
    store.mkdir()
    upgrade = {'etcd_upgrade_image': 'registry.k8s.io/etcd:%s-0' % target, 'etcd_upgrade_endpoints': hosts34.endpoints,
               'etcd_upgrade_tls': False, 'etcd_backup_store': str(store), 'etcd_bin_dirs': [DIRS['3.5']]}
    before = {n: open(hosts34.manifest_path(n), 'rb').read() for n in NAMES}
    planned = run_playbook('steward.cluster.etcd_upgrade', inventory=str(inventory), extra_vars=upgrade, check=True)
    assert planned.rc == 0, planned.stdout[-4000:]
    assert '"target_version": "%s"' % target in planned.stdout
    assert {n: open(hosts34.manifest_path(n), 'rb').read() for n in NAMES} == before
    assert list(store.iterdir()) == []

    load = LoadClient(hosts34.endpoints, rate=100).start()
    try:
        done = run_playbook('steward.cluster.etcd_upgrade', inventory=str(inventory), extra_vars=upgrade)
    finally:
        load.stop()
    assert done.rc == 0, done.stdout[-6000:]
    assert load.failed == [], load.failed[:5]
    conn = EtcdConnection(endpoints=tuple(hosts34.endpoints))
    assert {m['version'] for m in observe(conn)['members']} == {target}
    assert {n: hosts34.starts(n) for n in NAMES} == {n: 2 for n in NAMES}, hosts34.logs()
    assert any(p.name.startswith('Full-') for p in store.rglob('*')), 'the pre-upgrade snapshot'
    again = run_playbook('steward.cluster.etcd_upgrade', inventory=str(inventory), extra_vars=upgrade)
    assert again.rc == 0 and sum(s.get('changed', 0) for s in again.stats.values()) == 0, again.stdout[-3000:]


def test_a_static_pod_that_does_not_come_up_at_the_target_gets_its_previous_manifest_back(hosts34, tmp_path):
    """A patch target no local binary has (etcd:3.4.99-0: the supervisor runs Debian's 3.4 for any 3.4 tag, so the pod
    reports the old version and never catches up at the target): the run stops at the first member, puts its previous
    manifest back (the pod serves at the old version again) and touches no other member."""
    old = etcd_version(DIRS['3.4'])
    params = {n: _params(hosts34, n, 'registry.k8s.io/etcd:3.4.99-0', tmp_path, require_snapshot=False,
                         caught_up_timeout=6) for n in NAMES}
    order = [s['name'] for s in upgrade_member(params['cp1'], check_mode=True)['plan']['steps']]
    before = {n: open(hosts34.manifest_path(n), 'rb').read() for n in NAMES}
    with pytest.raises(UpgradeError) as err:
        upgrade_member(params[order[0]], check_mode=False)
    result = err.value.result()
    assert result['reason'] == 'member-failed' and result['member'] == order[0]
    assert result['rollback']['action'] == 'previous-binary' and result['rollback']['swap'] == 'image'
    assert {n: open(hosts34.manifest_path(n), 'rb').read() for n in NAMES} == before
    state = observe(EtcdConnection(endpoints=tuple(hosts34.endpoints)))
    assert {m['version'] for m in state['members']} == {old} and all(m['healthy'] for m in state['members'])
    assert {n: hosts34.starts(n) for n in order[1:]} == {n: 1 for n in order[1:]}
