# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's provisioning loops as real processes (`python -m steward_controller`) against the Kubernetes API
emulator: the anchor keeping a node's files equal to their ConfigMap/Secret sources (drift rewritten, removal on
stop) and joining an etcd member as a learner before its manifest, promoted, removed on stop - with real etcd run by
the lab's static-pod supervisor; and the Promenade-compatible API with bearer tokens checked by TokenReview."""

from __future__ import annotations

import base64
import datetime
import os
import shutil
import subprocess
import tempfile

import pytest
import requests

from lab.env.controller import ControllerProcess, wait_for
from support.rbac import audited, calls_of, grants_from, least_privilege
from lab.env.ports import free_port
from lab.kube.api import repo_path

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import cluster_info
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import anchor, files, layout, manifests
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import new_authority
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.node_files import plan_node_files
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.provision import Request, provision
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import parse_cluster, parse_node
from lab.provisioning import hosts as lab_hosts  # (lab/hosts.py)

NS = 'kube-system'
NOW = datetime.datetime.now(datetime.timezone.utc)


def _configmap(kube, name, path, data, **annotations):
    body = {'apiVersion': 'v1', 'kind': 'ConfigMap',
            'metadata': {'name': name, 'namespace': NS, 'labels': {anchor.SOURCE_LABEL: 'true'},
                         'annotations': dict({anchor.PATH_ANNOTATION: path}, **annotations)}, 'data': data}
    return kube.create('/api/v1/namespaces/%s/configmaps' % NS, body)


def _secret(kube, namespace, name, data, labels=None, annotations=None, type_='Opaque'):
    body = {'apiVersion': 'v1', 'kind': 'Secret', 'type': type_,
            'metadata': {'name': name, 'namespace': namespace, 'labels': labels or {}, 'annotations': annotations or {}},
            'data': {k: base64.b64encode(v).decode() for k, v in data.items()}}
    return kube.create('/api/v1/namespaces/%s/secrets' % namespace, body)


def _read(path):
    try:
        with open(path, 'rb') as f:
            return f.read()
    except FileNotFoundError:
        return None


def test_anchor_keeps_files_equal_to_sources_and_removes_them_on_stop(kube, tmp_path):
    root = tmp_path / 'host'
    root.mkdir()
    (root / 'etc/kubernetes/manifests').mkdir(parents=True)
    (root / 'etc/kubernetes/manifests/operator.yaml').write_bytes(b'not the anchor\'s')
    target = str(root / 'etc/kubernetes/manifests/kube-scheduler.yaml')
    _configmap(kube, 'scheduler', '/etc/kubernetes/manifests', {'kube-scheduler.yaml': 'node: $(NODE_NAME)\n'})
    audit = audited(kube.server)
    controller = ControllerProcess(kube.server, str(tmp_path / 'ctl'), args=[
        '--controllers', 'anchor', '--no-leader-election', '--anchor-root', str(root), '--anchor-node-name', 'cp1',
        '--anchor-node-ip', '127.0.0.1', '--anchor-interval', '0.3']).start()
    try:
        assert wait_for(lambda: _read(target) == b'node: cp1\n', 60, what='anchored file')
        assert oct(os.stat(target).st_mode & 0o777) == '0o644'
        with open(target, 'wb') as f:
            f.write(b'edited by hand\n')
        assert wait_for(lambda: _read(target) == b'node: cp1\n', 30, what='drift rewritten')
        kube.merge_patch('/api/v1/namespaces/%s/configmaps/scheduler' % NS, {'data': {'kube-scheduler.yaml': 'v2\n'}})
        assert wait_for(lambda: _read(target) == b'v2\n', 30, what='source change written')
        _configmap(kube, 'extra', '/etc/kubernetes', {'extra.conf': 'x'})
        assert wait_for(lambda: _read(str(root / 'etc/kubernetes/extra.conf')) == b'x', 30, what='second source')
        kube.delete('/api/v1/namespaces/%s/configmaps/extra' % NS)
        assert wait_for(lambda: _read(str(root / 'etc/kubernetes/extra.conf')) is None, 30, what='removed source')
        assert wait_for(lambda: (controller.metric('steward_anchor_writes_total', {'reason': 'drift'}) or 0) >= 1, 10,
                        what='drift metric')
        # A wrong source (issue 19 §2): nothing is synced (leaving it out would remove what it wrote), the source gets
        # a Warning Event naming the annotation, the value and the rule; fixed, syncing goes on.
        _configmap(kube, 'wrong', 'etc/relative', {'x.conf': 'x'})
        with open(target, 'wb') as f:
            f.write(b'edited while a source is wrong\n')
        event = wait_for(lambda: [e for e in kube.list('/api/v1/namespaces/%s/events' % NS)
                                  if e['reason'] == 'InvalidAnchorSource'], 30, what='the Warning Event')[0]
        assert event['type'] == 'Warning' and event['involvedObject']['name'] == 'wrong'
        assert 'cluster.steward.io/anchor-path' in event['message'] and '(rule: absolute-path)' in event['message']
        assert _read(target) == b'edited while a source is wrong\n'
        kube.delete('/api/v1/namespaces/%s/configmaps/wrong' % NS)
        assert wait_for(lambda: _read(target) == b'v2\n', 30, what='syncing again')
    finally:
        assert controller.stop() == 0, controller.log()[-3000:]
    assert _read(target) is None and _read(str(root / anchor.ANCHOR_RECORD.lstrip('/'))) is None
    # Least privilege (issue 19 §5): every call of the anchor is granted by its Role, every grant is a call.
    denied, unused = least_privilege(calls_of(audit, ['steward-controller/', 'kopf/']),
                                     grants_from(['controller/deploy/provisioning/anchor.yaml'], ['steward-anchor']), {})
    assert not denied, 'calls the anchor makes without a grant: %s' % denied
    assert not unused, 'grants the anchor does not use: %s' % unused
    assert _read(str(root / 'etc/kubernetes/manifests/operator.yaml')) == b'not the anchor\'s'


@pytest.mark.skipif(not os.path.exists(repo_path('.build', 'etcd-3.5', 'etcd')), reason='no etcd binary: run make all')
def test_anchor_adds_an_etcd_learner_before_the_manifest_promotes_it_and_removes_it_on_stop(kube, tmp_path):
    state = tempfile.mkdtemp(prefix='anchor-', dir='/tmp')
    hosts = (('cp1', 'control_plane'), ('cp2', 'control_plane'))
    base = lab_hosts.free_ip_base(2)
    ip1, ip2 = lab_hosts.host_ips(base, 2)
    controller = None
    try:
        lab_hosts.hosts_up(state, base, hosts, api=False)
        cluster = parse_cluster({'control_plane': [{'name': 'cp1', 'address': ip1}, {'name': 'cp2', 'address': ip2}]})
        cp1 = parse_node({'node_name': 'cp1', 'address': ip1, 'role': 'control-plane', 'local_address': ip1}, cluster)
        cp2 = parse_node({'node_name': 'cp2', 'address': ip2, 'role': 'control-plane', 'local_address': ip2}, cluster)
        authority = new_authority('ecdsa-p256', NOW, 3650)
        provision(Request(cluster, cp1, lab_hosts.root_of(state, 'cp1'), NOW, authority=authority, bootstrap=True,
                          wait_timeout=60, lb_validate_command=None), check_mode=False)
        # genesis of another node while cp1's cluster answers: refused, nothing written
        with pytest.raises(Refused) as refused:
            provision(Request(cluster, cp2, lab_hosts.root_of(state, 'cp2'), NOW, authority=authority, bootstrap=True,
                              lb_validate_command=None), check_mode=False)
        assert refused.value.rule == 'cluster-exists'
        assert not os.path.exists(os.path.join(lab_hosts.root_of(state, 'cp2'), 'etc'))
        # cp2's etcd certificates (a per-node Secret) and its etcd manifest template (a ConfigMap), as a chart would
        placeholders = ('$(ETCD_INITIAL_CLUSTER)', '$(ETCD_INITIAL_CLUSTER_STATE)')
        planned = plan_node_files(cluster, cp2, authority, lambda p: None, NOW, placeholders)
        certs = {os.path.basename(p): f.content for p, f in planned.files.items() if p.startswith(layout.ETCD_PKI_DIR)}
        _secret(kube, NS, 'cp2-etcd-pki', certs, labels={anchor.SOURCE_LABEL: 'true'},
                annotations={anchor.PATH_ANNOTATION: layout.ETCD_PKI_DIR, anchor.NODE_ANNOTATION: 'cp2'})
        template = manifests.etcd(cluster, cp2, '$(ETCD_INITIAL_CLUSTER)', '$(ETCD_INITIAL_CLUSTER_STATE)', ())
        _configmap(kube, 'etcd', layout.MANIFESTS_DIR, {'etcd.yaml': template.decode()},
                   **{anchor.ETCD_ANNOTATION: 'member', anchor.NODE_ANNOTATION: 'cp2'})
        conn = EtcdConnection(endpoints=('https://%s:2379' % ip1, 'https://%s:2379' % ip2),
                              ca_cert=os.path.join(lab_hosts.root_of(state, 'cp1'), 'etc/kubernetes/pki/etcd/ca.crt'),
                              client_cert=os.path.join(lab_hosts.root_of(state, 'cp1'),
                                                       'etc/kubernetes/pki/etcd/healthcheck-client.crt'),
                              client_key=os.path.join(lab_hosts.root_of(state, 'cp1'),
                                                      'etc/kubernetes/pki/etcd/healthcheck-client.key'))

        def voters():
            info = cluster_info(conn)
            return sorted(m['name'] for m in info['members'] if not m['is_learner'] and m['id'] in info['healthy_members'])

        controller = ControllerProcess(kube.server, os.path.join(state, 'ctl'), args=[
            '--controllers', 'anchor', '--no-leader-election', '--anchor-root', lab_hosts.root_of(state, 'cp2'),
            '--anchor-node-name', 'cp2', '--anchor-node-ip', ip2, '--anchor-interval', '0.5',
            '--anchor-etcd-endpoints', 'https://%s:2379' % ip1]).start()
        assert wait_for(lambda: voters() == ['cp1', 'cp2'], 120, what='cp2 promoted'), controller.log()[-3000:]
        log = controller.log()
        assert log.index("as learner") < log.index('etcd.yaml')   # the member existed before its manifest
        # etcd-backup-restore's membership families count the anchor's learner add and promotion (issue 27)
        assert controller.metric('etcdbr_is_learner_count_total', {'succeeded': 'true'}) == 1
        assert controller.metric('etcdbr_add_learner_duration_seconds_count', {'succeeded': 'true'}) == 1
        assert controller.metric('etcdbr_member_promote_duration_seconds_count', {'succeeded': 'true'}) == 1
        code = controller.stop(timeout=90)
        assert code == 0, controller.log()[-5000:]
        controller = None
        assert wait_for(lambda: sorted(m['name'] for m in cluster_info(conn)['members']) == ['cp1'], 30,
                        what='cp2 removed on stop')
        assert not os.path.exists(os.path.join(lab_hosts.root_of(state, 'cp2'), 'etc/kubernetes/manifests/etcd.yaml'))
        assert wait_for(lambda: 'etcd' not in lab_hosts.pod_pids(lab_hosts.root_of(state, 'cp2')), 30, what='etcd stopped')
    finally:
        if controller is not None:
            controller.kill()
        lab_hosts.hosts_down(state)
        shutil.rmtree(state, ignore_errors=True)


def test_provisioning_api_join_scripts_and_owned_node_labels(kube, tmp_path):
    authority = new_authority('ecdsa-p256', NOW, 3650)
    kube.create('/api/v1/namespaces/%s/configmaps' % NS, {'apiVersion': 'v1', 'kind': 'ConfigMap',
                'metadata': {'name': 'cluster', 'namespace': NS},
                'data': {'cluster.yaml': 'control_plane: [{name: cp1, address: 10.0.0.11}]\ncluster_name: lab\n'}})
    _secret(kube, NS, 'ca', {'ca.crt': authority.files()['ca.crt'], 'ca.key': authority.files()['ca.key']})
    _secret(kube, 'steward-system', 'drydock-token', {'token': b'good-token'},
            annotations={'kubernetes.io/service-account.name': 'drydock'}, type_='kubernetes.io/service-account-token')
    _secret(kube, 'other', 'intruder-token', {'token': b'other-token'},
            annotations={'kubernetes.io/service-account.name': 'intruder'}, type_='kubernetes.io/service-account-token')
    kube.create('/api/v1/nodes', {'apiVersion': 'v1', 'kind': 'Node',
                                  'metadata': {'name': 'w1', 'labels': {'team.example.com/owner': 'blue'}}})
    port = free_port()
    audit = audited(kube.server)
    controller = ControllerProcess(kube.server, str(tmp_path / 'ctl'), args=[
        '--controllers', 'provisioning-api', '--no-leader-election', '--provisioning-api-host', '127.0.0.1',
        '--provisioning-api-port', str(port), '--provisioning-cluster-config', '%s/cluster' % NS,
        '--provisioning-authority', '%s/ca' % NS, '--provisioning-api-allowed-groups',
        'system:serviceaccounts:steward-system']).start()
    url = 'http://127.0.0.1:%d/api/v1.0' % port
    good = {'Authorization': 'Bearer good-token'}
    try:
        assert wait_for(lambda: _status(url + '/health') == 204, 60, what='API up'), controller.log()[-3000:]
        params = {'hostname': 'w7', 'ip': '10.0.1.7', 'labels.static': 'zone=a', 'labels.dynamic': 'rack=r1',
                  'design_ref': 'ignored'}
        assert requests.get(url + '/join-scripts', params=params, timeout=30).status_code == 401
        assert requests.get(url + '/join-scripts', params=params, timeout=30,
                            headers={'Authorization': 'Bearer wrong'}).status_code == 401
        assert requests.get(url + '/join-scripts', params=params, timeout=30,
                            headers={'Authorization': 'Bearer other-token'}).status_code == 403
        answer = requests.get(url + '/join-scripts', params=params, headers=good, timeout=60)
        assert answer.status_code == 200, answer.text
        assert answer.headers['Content-Type'].startswith('text/x-shellscript')
        script = tmp_path / 'join.sh'
        script.write_text(answer.text)
        run = subprocess.run(['bash', str(script), '--root', str(tmp_path / 'w7'), '--no-start', '--no-wait'],
                             capture_output=True, text=True, check=False)
        assert run.returncode == 0, run.stderr
        joined = files.Root(str(tmp_path / 'w7'))
        assert files.read_record(joined)['node'] == 'w7'
        assert b'--node-labels=rack=r1,zone=a' in joined.read(layout.KUBELET_FLAGS)
        assert b'server cp1 10.0.0.11:6443' in joined.read(layout.LB_CONFIG)
        bad = requests.get(url + '/join-scripts', params={'hostname': 'w7', 'ip': 'nope'}, headers=good, timeout=30)
        assert bad.status_code == 400 and bad.json()['field'] == 'address' and bad.json()['rule'] == 'ip-address'

        put = requests.put(url + '/node-labels/w1', json={'zone': 'a', 'rack': 'r1'}, headers=good, timeout=30)
        assert put.status_code == 200 and put.json()['set'] == {'rack': 'r1', 'zone': 'a'}, put.text
        put = requests.put(url + '/node-labels/w1', json={'zone': 'b'}, headers=good, timeout=30)
        assert put.json()['removed'] == ['rack']
        labels = kube.get('/api/v1/nodes/w1')['metadata']['labels']
        assert labels == {'team.example.com/owner': 'blue', 'zone': 'b'}
        conflict = requests.put(url + '/node-labels/w1', json={'team.example.com/owner': 'red'}, headers=good, timeout=30)
        assert conflict.status_code == 409 and conflict.json()['rule'] == 'foreign-label'
        assert requests.put(url + '/node-labels/w9', json={}, headers=good, timeout=30).status_code == 404
        assert requests.put(url + '/node-labels/w1', data='[1]', headers=good, timeout=30).status_code == 400
        assert controller.metric('steward_provisioning_api_requests_total',
                                 {'endpoint': '/api/v1.0/node-labels/{node}', 'code': '409'}) == 1.0
        assert 'good-token' not in controller.log() and 'BEGIN' not in controller.log()
    finally:
        assert controller.stop() == 0, controller.log()[-3000:]
    # Least privilege (issue 19 §5): every call of the API is granted by its roles, every grant is a call.
    grants = grants_from(['controller/deploy/provisioning/api.yaml'], ['steward-provisioning-api'],
                         rename={'steward-system': NS, 'provisioning-cluster': 'cluster', 'provisioning-authority': 'ca'})
    denied, unused = least_privilege(calls_of(audit, ['steward-controller/', 'kopf/']), grants, {})
    assert not denied, 'calls the provisioning API makes without a grant: %s' % denied
    assert not unused, 'grants the provisioning API does not use: %s' % unused


def _status(url):
    try:
        return requests.get(url, timeout=5).status_code
    except requests.RequestException:
        return None
