# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Provisioning end to end on lab hosts (root prefixes on loopback, lab/hosts.py), with real ansible-playbook runs,
real etcd with TLS and real HAProxy run by the lab's static-pod supervisor (the kubelet's stand-in), and the lab's
API emulator for Nodes.

One scenario, in order (each test is a step and relies on the ones before): genesis and join of control-plane
nodes cp1, cp2, cp10 and workers w1, w2, each playbook first with --check --diff (nothing on disk changes) and a
second time (changed=0); owned node labels; a join script run in a fresh root against the files node_join wrote;
a full power cut (every process killed, supervisors restarted, no API) with etcd and HAProxy back from disk;
certificate renewal of what is due only; removal of cp1 while cp10 exists; re-provisioning the genesis node; and a
removal refused because it would break quorum.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import shutil
import subprocess
import tempfile
from typing import Dict

import pytest

from support.ansible import local_play, run_playbook
from lab.env.controller import wait_for

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import cluster_info
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import haproxy, layout, pki
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import read_authority
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.files import Root, read_record
from lab.provisioning import hosts as lab_hosts  # (lab/hosts.py)

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which('haproxy') is None,
                                 reason='haproxy is not installed (Debian package haproxy; .ci/run installs it as root)')]

HOSTS = (('cp1', 'control_plane'), ('cp2', 'control_plane'), ('cp10', 'control_plane'),
         ('w1', 'workers'), ('w2', 'workers'))
NAMES = [host for host, _group in HOSTS]
CONTROL_PLANE = ['cp1', 'cp2', 'cp10']
ROLE = 'steward.cluster.provisioning : '   # how role task names appear in results
# Runtime state the kubelet / supervisor / etcd change on their own: not "files on disk" of provisioning.
VOLATILE = ('run/', 'var/log/', 'var/lib/etcd/')


class Lab:
    def __init__(self, state: str, ip_base: str, kubeconfig: str):
        self.state = state
        self.inventory = os.path.join(state, 'hosts.yml')
        self.kubeconfig = kubeconfig
        self.ips = dict(zip(NAMES, lab_hosts.host_ips(ip_base, len(HOSTS))))

    def root(self, host: str) -> str:
        return lab_hosts.root_of(self.state, host)

    def play(self, playbook: str, *args: str, check: bool = False, diff: bool = False, **extra_vars):
        result = run_playbook(playbook, inventory=self.inventory, check=check, diff=diff, args=list(args),
                              extra_vars=extra_vars or None, timeout=900)
        assert result.rc == 0, (result.stdout[-6000:], result.stderr[-3000:])
        return result

    def changed(self, result) -> Dict[str, int]:
        return {host: stats.get('changed', 0) for host, stats in result.stats.items()}

    def snapshot(self) -> Dict[str, str]:
        """sha256 of every file below every host root (runtime state excluded)."""
        out = {}
        for host in NAMES:
            root = self.root(host)
            for directory, _dirs, names in os.walk(root):
                for name in names:
                    path = os.path.join(directory, name)
                    rel = os.path.relpath(path, root)
                    if rel.startswith(VOLATILE) or os.path.islink(path) or not os.path.isfile(path):
                        continue
                    with open(path, 'rb') as f:
                        out['%s:%s' % (host, rel)] = hashlib.sha256(f.read()).hexdigest()
        return out

    def etcd(self, via: str, timeout: float = 5.0) -> EtcdConnection:
        pki_dir = os.path.join(self.root(via), 'etc/kubernetes/pki/etcd')
        return EtcdConnection(endpoints=tuple('https://%s:2379' % self.ips[h] for h in CONTROL_PLANE),
                              ca_cert=os.path.join(pki_dir, 'ca.crt'),
                              client_cert=os.path.join(pki_dir, 'healthcheck-client.crt'),
                              client_key=os.path.join(pki_dir, 'healthcheck-client.key'), timeout=timeout)

    def members(self, via: str) -> Dict[str, Dict]:
        info = cluster_info(self.etcd(via))
        return {m['name']: m for m in info['members']}

    def healthy_members(self, via: str):
        try:
            info = cluster_info(self.etcd(via))
        except Exception:  # not answering yet
            return None
        return sorted(m['name'] for m in info['members'] if m['healthy']) if info['has_quorum'] else None

    def pods(self, host: str) -> Dict[str, int]:
        return lab_hosts.pod_pids(self.root(host))


@pytest.fixture(scope='module')
def lab():
    state = tempfile.mkdtemp(prefix='prov-', dir='/tmp')   # short: HAProxy's master socket path has a length limit
    ip_base = lab_hosts.free_ip_base(len(HOSTS))
    try:
        up = lab_hosts.hosts_up(state, ip_base, HOSTS)
        yield Lab(state, ip_base, up['kubeconfig'])
    finally:
        lab_hosts.hosts_down(state)
        shutil.rmtree(state, ignore_errors=True)


def test_genesis_check_mode_changes_nothing_then_genesis(lab):
    before = lab.snapshot()
    check = lab.play('steward.cluster.cluster_genesis', check=True, diff=True)
    assert lab.snapshot() == before == {}
    planned = check.result(ROLE + 'Genesis of cp1', 'cp1')
    assert planned['changed'] and planned['authority_created']
    assert 'create /etc/kubernetes/manifests/etcd.yaml' in planned['files']

    result = lab.play('steward.cluster.cluster_genesis')
    assert lab.changed(result) == {'cp1': 1}
    assert wait_for(lambda: lab.healthy_members('cp1') == ['cp1'], 60, what='cp1 healthy')
    assert sorted(lab.pods('cp1')) == ['etcd', 'haproxy']


def test_join_check_mode_changes_nothing_then_join_builds_etcd_of_three_with_tls(lab):
    before = lab.snapshot()
    check = lab.play('steward.cluster.node_join', check=True, diff=True)
    assert lab.snapshot() == before
    assert sorted(lab.members('cp1')) == ['cp1']
    assert check.result(ROLE + 'Join the node - cp2 as control-plane', 'cp2')['etcd']['actions'] == [
        "add member 'cp2' (https://%s:2380) as learner" % lab.ips['cp2']]

    result = lab.play('steward.cluster.node_join')
    assert all(lab.changed(result)[h] >= 1 for h in ('cp2', 'cp10', 'w1', 'w2'))
    members = lab.members('cp2')
    assert sorted(members) == ['cp1', 'cp10', 'cp2']
    assert not any(m['is_learner'] for m in members.values())
    assert all(m['peer_urls'][0].startswith('https://') for m in members.values())
    assert wait_for(lambda: lab.healthy_members('cp10') == ['cp1', 'cp10', 'cp2'], 60, what='etcd of 3 healthy')
    for host in NAMES:
        config = os.path.join(lab.root(host), 'etc/kubernetes/haproxy/haproxy.cfg')
        with open(config, 'rb') as f:
            assert haproxy.backends(f.read()) == ['cp1', 'cp10', 'cp2'], host
        check_run = subprocess.run(['haproxy', '-c', '-f', config], capture_output=True, text=True, check=False)
        assert check_run.returncode == 0, check_run.stdout + check_run.stderr
    assert wait_for(lambda: all('haproxy' in lab.pods(h) for h in NAMES), 30, what='haproxy on every host')
    # the supervisors registered the Nodes, as kubelets do
    assert wait_for(lambda: sorted(_node_names(lab)) == sorted(h for h in NAMES), 30, what='Nodes registered')


def test_second_runs_change_nothing(lab):
    before = lab.snapshot()
    genesis = lab.play('steward.cluster.cluster_genesis')
    join = lab.play('steward.cluster.node_join')
    assert set(lab.changed(genesis).values()) == {0}
    assert set(lab.changed(join).values()) == {0}, lab.changed(join)
    assert lab.snapshot() == before


def test_node_labels_keep_foreign_labels(lab):
    client = _client(lab)
    client.merge_patch('/api/v1/nodes/w1', {'metadata': {'labels': {'team.example.com/owner': 'blue'}}})

    def labels(name, wanted, **extra):
        return dict({'name': name, 'steward.cluster.node_labels': {'name': 'w1', 'kubeconfig': lab.kubeconfig,
                                                                   'labels': wanted}}, **extra)

    result = run_playbook(local_play([
        labels('first', {'zone': 'a', 'node-role.kubernetes.io/storage': ''}),
        labels('second', {'zone': 'b'}),
        labels('again', {'zone': 'b'}),
        labels('foreign', {'team.example.com/owner': 'red'}, ignore_errors=True),
    ]))
    assert result.rc == 0, result.stdout[-3000:]
    assert result.result('first')['set'] == {'zone': 'a', 'node-role.kubernetes.io/storage': ''}
    assert result.result('second')['removed'] == ['node-role.kubernetes.io/storage']
    assert result.result('second')['changed'] and not result.result('again')['changed']
    assert result.result('foreign')['failed'] and result.result('foreign')['rule'] == 'foreign-label'
    node_labels = client.get('/api/v1/nodes/w1')['metadata']['labels']
    assert node_labels['team.example.com/owner'] == 'blue'
    assert node_labels['zone'] == 'b' and 'node-role.kubernetes.io/storage' not in node_labels


def test_join_script_in_a_fresh_root_writes_what_node_join_wrote(lab, tmp_path):
    authority = read_authority(Root(lab.root('cp1')).read)
    script = str(tmp_path / 'w1-join.sh')
    options = {'dest': script, 'node_name': 'w1', 'address': lab.ips['w1'], 'local_address': lab.ips['w1'],
               'control_plane': [{'name': h, 'address': lab.ips[h]} for h in CONTROL_PLANE],
               'authority': {'ca.crt': authority.files()['ca.crt'].decode(),
                             'ca.key': authority.files()['ca.key'].decode()}}
    tasks = [{'name': 'script', 'steward.cluster.join_script': options},
             {'name': 'again', 'steward.cluster.join_script': options}]
    result = run_playbook(local_play(tasks))
    assert result.rc == 0, result.stdout[-3000:]
    assert result.result('script')['changed'] and not result.result('again')['changed']   # a new one = a new key
    assert 'BEGIN' not in result.stdout
    assert oct(os.stat(script).st_mode & 0o777) == '0o700'
    fresh = str(tmp_path / 'fresh')
    run = subprocess.run(['bash', script, '--root', fresh, '--no-start', '--no-wait'], capture_output=True, text=True,
                         check=False)
    assert run.returncode == 0, run.stderr
    joined, scripted = Root(lab.root('w1')), Root(fresh)
    paths = read_record(joined)['files']
    assert read_record(scripted)['files'] == paths
    for path in paths:
        a, b = joined.read(path), scripted.read(path)
        assert joined.mode(path) == scripted.mode(path), path
        if path == layout.KUBELET_CLIENT_PEM:   # a new key: the same subject, issuer and usages
            assert _cert_view(a) == _cert_view(b)
        else:
            assert a == b, path


def test_power_cut_every_process_comes_back_from_disk_without_api(lab):
    killed = lab_hosts.reboot(lab.state, api=False)
    assert all(killed[h] for h in ('cp1', 'cp2', 'cp10'))
    assert lab_hosts.api_pid(lab.state) is None
    assert wait_for(lambda: lab.healthy_members('cp1') == ['cp1', 'cp10', 'cp2'], 90, what='etcd back')
    assert wait_for(lambda: all('haproxy' in lab.pods(h) for h in NAMES), 60, what='haproxy back')
    # the API comes back last (a fresh, empty emulator): the kubelets' stand-ins register their Nodes again
    lab_hosts.start_api(lab.state)
    assert wait_for(lambda: sorted(_node_names(lab)) == sorted(h for h in NAMES), 60, what='Nodes registered again')


def test_cert_renew_renews_only_what_is_due(lab):
    authority = read_authority(Root(lab.root('cp1')).read)
    past = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=345)   # 20 days left
    due = {('cp2', layout.pki('front-proxy-client.crt')): ('front-proxy-ca', pki.Subject('front-proxy-client')),
           ('w2', layout.KUBELET_CLIENT_PEM): ('ca', pki.Subject('system:node:w2', ('system:nodes',)))}
    for (host, path), (ca, subject) in due.items():
        pair = pki.issue(subject, authority.ca(ca), 'ecdsa-p256', past, 365)
        root = Root(lab.root(host))
        if path.endswith('.pem'):
            root.write(path, pair.cert_pem + pair.key_pem, 0o600)
        else:
            root.write(path, pair.cert_pem, 0o644)
            root.write(path[:-4] + '.key', pair.key_pem, 0o600)
    before = lab.snapshot()
    result = lab.play('steward.cluster.cert_renew')
    after = lab.snapshot()
    changed = sorted(k for k in after if after[k] != before.get(k))
    assert changed == ['cp2:etc/kubernetes/manifests/kube-apiserver.yaml', 'cp2:etc/kubernetes/pki/front-proxy-client.crt',
                       'cp2:etc/kubernetes/pki/front-proxy-client.key', 'w2:var/lib/kubelet/pki/kubelet-client-current.pem']
    renewed = {h: [c['name'] for c in result.result(ROLE + 'Join the node - %s as %s' % (h, role), h)['certificates'] if c['action'] != 'keep']
               for h, role in (('cp2', 'control-plane'), ('w2', 'worker'), ('cp1', 'control-plane'))}
    assert renewed == {'cp2': ['front-proxy-client'], 'w2': ['kubelet-client'], 'cp1': []}
    for host, path in due:
        data = Root(lab.root(host)).read(path)
        assert pki.describe(pki.split_pem(data)[0] if path.endswith('.pem') else data,
                            datetime.datetime.now(datetime.timezone.utc))['days_left'] >= 364


def test_remove_cp1_leaves_cp10(lab):
    result = lab.play('steward.cluster.node_remove', provisioning_remove_node='cp1')
    assert lab.changed(result)['cp1'] >= 2
    assert sorted(lab.members('cp2')) == ['cp10', 'cp2']
    assert wait_for(lambda: lab.healthy_members('cp2') == ['cp10', 'cp2'], 30, what='etcd of 2 healthy')
    assert 'cp1' not in _node_names(lab)
    root = lab.root('cp1')
    assert read_record(Root(root))['files'] == [] and not os.path.exists(os.path.join(root, 'etc/kubernetes'))
    assert [d for d in os.listdir(os.path.join(root, 'var/lib')) if d.startswith('etcd.removed-')]
    for host in ('cp2', 'cp10', 'w1', 'w2'):
        with open(os.path.join(lab.root(host), 'etc/kubernetes/haproxy/haproxy.cfg'), 'rb') as f:
            assert haproxy.backends(f.read()) == ['cp10', 'cp2'], host
    again = lab.play('steward.cluster.node_remove', provisioning_remove_node='cp1')
    assert set(lab.changed(again).values()) == {0}


def test_genesis_node_joins_again_like_any_other(lab):
    lab.play('steward.cluster.node_join', '--limit', 'cp1')
    assert wait_for(lambda: lab.healthy_members('cp2') == ['cp1', 'cp10', 'cp2'], 60, what='cp1 back in etcd')


def test_removal_that_would_break_quorum_is_refused_and_changes_nothing(lab):
    assert lab_hosts.kill_host(lab.root('cp2'))     # cp2 loses power: cp1 and cp10 keep quorum (2 of 3)
    assert wait_for(lambda: lab.healthy_members('cp10') == ['cp1', 'cp10'], 30, what='2 of 3 healthy')
    members = sorted(lab.members('cp10'))
    before = lab.snapshot()
    result = run_playbook('steward.cluster.node_remove', inventory=lab.inventory,
                          extra_vars={'provisioning_remove_node': 'cp10'}, timeout=600)
    assert result.rc != 0
    failure = result.result(ROLE + 'Drain the node, remove its etcd member and its Node - cp10', 'cp10')
    assert failure['rule'] == 'etcd-quorum', failure
    assert sorted(lab.members('cp10')) == members
    assert 'cp10' in _node_names(lab)
    assert lab.snapshot() == before


# --- helpers -------------------------------------------------------------------------------------
def _client(lab: Lab):
    from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient
    return KubeClient.from_config(lab.kubeconfig)


def _node_names(lab: Lab):
    return [n['metadata']['name'] for n in _client(lab).list('/api/v1/nodes')]


def _cert_view(data: bytes):
    info = pki.describe(pki.split_pem(data)[0], datetime.datetime.now(datetime.timezone.utc))
    return {k: info[k] for k in ('subject', 'issuer', 'dns_names', 'ip_addresses', 'usages', 'is_ca')}
