"""The lab's pod runtime (lab/pods/runtime.py) against the lab's API emulator: StatefulSets of etcd images become
real etcd processes on loopback pod IPs that form a cluster, in ordinal order; pod status, Endpoints, PVC
directories, restarts and deletions as Kubernetes does them. Each test has its own emulator, state dir and pod
network, and stops every process it started."""

from __future__ import annotations

import base64
import os
import subprocess
import time
from typing import Any, Dict, List

import pytest
import requests

from lab import parts
from lab.env.controller import wait_for
from lab.kube.api import KubeServer
from lab.paths import REPO, module_argv
from lab.pods import images, network
from lab.pods.runtime import Runtime

ETCDCTL = os.path.join(REPO, '.build', 'etcd-3.5', 'etcdctl')
NS = 'default'
pytestmark = pytest.mark.skipif(images.etcd_binary('3.5') is None, reason='no etcd 3.5 binary: run make all')


class Lab:
    """An emulator (pod runtime mode) and the runtime as its own process, on a pod network of its own."""

    def __init__(self, state_dir: str) -> None:
        self.state = state_dir
        self.network = network.reserve()
        self.cidr = self.network.cidr
        self.kube = KubeServer(status_delay=0.2, pod_runtime=True).start()
        self.record = os.path.join(state_dir, 'pods-runtime.pid')
        self.log = os.path.join(state_dir, 'pods-runtime.log')
        self.argv = module_argv('lab.pods.runtime', 'run', '--kube-url', self.kube.url, '--state-dir', state_dir,
                                '--pod-cidr', self.cidr, '--interval', '0.2')
        parts.start(self.record, self.argv, self.log)

    def restart_runtime(self) -> None:
        pid = parts.read_record(self.record)['pid']
        parts.stop(self.record)    # (nothing left to stop after a SIGKILL: the record no longer matches)
        try:
            os.waitpid(pid, os.WNOHANG)   # the killed runtime was this process's child
        except ChildProcessError:
            pass
        parts.start(self.record, self.argv, self.log)

    def stop(self) -> None:
        parts.stop(self.record)
        Runtime(self.kube.url, self.state, self.cidr).stop_all()   # anything the runtime left (it stops them itself)
        self.kube.stop()
        self.network.close()

    def get(self, path: str) -> Dict[str, Any]:
        return requests.get(self.kube.url + path, timeout=10).json()

    def post(self, path: str, body: Dict[str, Any]) -> None:
        answer = requests.post(self.kube.url + path, json=body, timeout=10)
        assert answer.status_code == 201, answer.text

    def delete(self, path: str) -> None:
        assert requests.delete(self.kube.url + path, timeout=10).status_code == 200

    def pods(self) -> Dict[str, Dict[str, Any]]:
        return {p['metadata']['name']: p for p in self.get('/api/v1/namespaces/%s/pods' % NS)['items']}

    def runtime_log(self) -> str:
        with open(self.log, errors='replace') as f:
            return f.read()[-4000:]


@pytest.fixture
def lab(tmp_path):
    lab = Lab(str(tmp_path))
    yield lab
    lab.stop()


def etcd_set(name: str, image: str, replicas: int, probe: Dict[str, Any]) -> Dict[str, Any]:
    peers = ','.join('%s-%d=http://%s-%d.%s-peer.%s.svc.cluster.local:2380' % (name, i, name, i, name, NS)
                     for i in range(replicas))
    return {
        'apiVersion': 'apps/v1', 'kind': 'StatefulSet', 'metadata': {'name': name, 'namespace': NS},
        'spec': {
            'replicas': replicas, 'serviceName': name + '-peer', 'selector': {'matchLabels': {'app': name}},
            'template': {'metadata': {'labels': {'app': name}}, 'spec': {'containers': [{
                'name': 'etcd', 'image': image,
                'env': [{'name': 'POD_NAME', 'valueFrom': {'fieldRef': {'fieldPath': 'metadata.name'}}}],
                'args': ['--name=$(POD_NAME)', '--data-dir=/var/etcd/data/new.etcd',
                         '--listen-client-urls=http://0.0.0.0:2379', '--listen-peer-urls=http://0.0.0.0:2380',
                         '--advertise-client-urls=http://$(POD_NAME).%s-peer.%s.svc:2379' % (name, NS),
                         '--initial-advertise-peer-urls=http://$(POD_NAME).%s-peer.%s.svc:2380' % (name, NS),
                         '--initial-cluster=' + peers, '--initial-cluster-state=new',
                         '--initial-cluster-token=' + name],
                'ports': [{'name': 'client', 'containerPort': 2379}, {'name': 'peer', 'containerPort': 2380}],
                'volumeMounts': [{'name': name, 'mountPath': '/var/etcd/data'}],
                'readinessProbe': dict(probe, periodSeconds=1, failureThreshold=1)}]}},
            'volumeClaimTemplates': [{'metadata': {'name': name}, 'spec': {
                'accessModes': ['ReadWriteOnce'], 'resources': {'requests': {'storage': '1Gi'}}}}]}}


def services(lab: Lab, name: str) -> None:
    lab.post('/api/v1/namespaces/%s/services' % NS, {
        'apiVersion': 'v1', 'kind': 'Service', 'metadata': {'name': name + '-peer', 'namespace': NS},
        'spec': {'clusterIP': 'None', 'publishNotReadyAddresses': True, 'selector': {'app': name},
                 'ports': [{'name': 'peer', 'port': 2380, 'targetPort': 'peer'}]}})
    lab.post('/api/v1/namespaces/%s/services' % NS, {
        'apiVersion': 'v1', 'kind': 'Service', 'metadata': {'name': name + '-client', 'namespace': NS},
        'spec': {'selector': {'app': name}, 'ports': [{'name': 'client', 'port': 2379, 'targetPort': 2379}]}})


def ready(pod: Dict[str, Any]) -> bool:
    return any(c['type'] == 'Ready' and c['status'] == 'True' for c in (pod.get('status') or {}).get('conditions') or [])


def pid_of(pod: Dict[str, Any]) -> int:
    container_id = pod['status']['containerStatuses'][0]['containerID']
    assert container_id.startswith('lab://')
    return int(container_id[len('lab://'):])


def etcdctl(*args: str) -> str:
    return subprocess.run([ETCDCTL] + list(args), capture_output=True, text=True, timeout=30, check=True,
                          env=dict(os.environ, ETCDCTL_API='3')).stdout


def cmdline(pid: int) -> List[str]:
    with open('/proc/%d/cmdline' % pid, 'rb') as f:
        return [p.decode() for p in f.read().split(b'\0') if p]


def test_three_etcd_pods_form_a_cluster_in_ordinal_order(lab):
    services(lab, 'main')
    lab.post('/apis/apps/v1/namespaces/%s/statefulsets' % NS,
             etcd_set('main', 'quay.io/coreos/etcd:v3.5.1', 3, {'tcpSocket': {'port': 2379}}))
    seen: List[Dict[str, bool]] = []

    def all_ready():
        pods = lab.pods()
        seen.append({name: ready(p) for name, p in pods.items()})
        return len(pods) == 3 and all(ready(p) for p in pods.values())
    wait_for(all_ready, timeout=90, interval=0.05, what=lab.runtime_log)
    for snapshot in seen:   # OrderedReady: pod i+1 exists only while pod i is Ready
        for i in (1, 2):
            if 'main-%d' % i in snapshot:
                assert snapshot.get('main-%d' % (i - 1)), snapshot
    pods = lab.pods()
    ips = [pods['main-%d' % i]['status']['podIP'] for i in range(3)]
    assert len(set(ips)) == 3 and all(ip.startswith(lab.cidr.rsplit('.', 1)[0] + '.') for ip in ips)
    for i, name in enumerate(sorted(pods)):
        pid = pid_of(pods[name])
        argv = cmdline(pid)
        assert argv[0] == images.etcd_binary('3.5') and '--name=%s' % name in argv
        assert '--data-dir=%s' % os.path.join(lab.state, 'pods', 'pvc', NS, 'main-main-%d' % i, 'new.etcd') in argv
        assert os.path.isdir(os.path.join(lab.state, 'pods', 'pvc', NS, 'main-main-%d' % i, 'new.etcd', 'member'))
    # the peer DNS names reached the right members: every member advertises its own pod IP
    wait_for(lambda: len(etcdctl('--endpoints', 'http://%s:2379' % ips[0], 'member', 'list').splitlines()) == 3,
             timeout=30, what='three members')
    members = etcdctl('--endpoints', ','.join('http://%s:2379' % ip for ip in ips), 'member', 'list', '-w', 'simple')
    for i, ip in enumerate(ips):
        assert 'main-%d, http://%s:2380, http://%s:2379' % (i, ip, ip) in members, members
    etcdctl('--endpoints', 'http://%s:2379' % ips[2], 'put', 'k', 'v')
    assert etcdctl('--endpoints', 'http://%s:2379' % ips[0], 'get', 'k', '--print-value-only').strip() == 'v'
    # Endpoints and the StatefulSet's status from the real pods
    endpoints = lab.get('/api/v1/namespaces/%s/endpoints/main-client' % NS)
    assert sorted(a['ip'] for a in endpoints['subsets'][0]['addresses']) == sorted(ips)
    assert endpoints['subsets'][0]['ports'] == [{'name': 'client', 'port': 2379, 'protocol': 'TCP'}]
    peer = lab.get('/api/v1/namespaces/%s/endpoints/main-peer' % NS)
    assert peer['subsets'][0]['ports'] == [{'name': 'peer', 'port': 2380, 'protocol': 'TCP'}]
    status = lab.get('/apis/apps/v1/namespaces/%s/statefulsets/main' % NS)['status']
    assert status['replicas'] == 3 and status['readyReplicas'] == 3
    # a killed process comes back, restartCount one higher, same pod
    old_pid = pid_of(pods['main-1'])
    os.kill(old_pid, 9)
    wait_for(lambda: lab.pods()['main-1']['status']['containerStatuses'][0]['restartCount'] == 1 and
             ready(lab.pods()['main-1']), timeout=30, what=lab.runtime_log)
    again = lab.pods()['main-1']
    assert pid_of(again) != old_pid and again['metadata']['uid'] == pods['main-1']['metadata']['uid']
    assert again['status']['containerStatuses'][0]['lastState']['terminated']['exitCode'] == 137
    # deleting a pod kills its process; the set recreates it with the same IP, and it rejoins with its data
    victim = pid_of(lab.pods()['main-2'])
    lab.delete('/api/v1/namespaces/%s/pods/main-2' % NS)
    wait_for(lambda: not os.path.exists('/proc/%d' % victim) or _zombie(victim), timeout=30, what='main-2 stopped')
    wait_for(lambda: 'main-2' in lab.pods() and ready(lab.pods()['main-2']) and
             lab.pods()['main-2']['metadata']['uid'] != pods['main-2']['metadata']['uid'], timeout=60,
             what=lab.runtime_log)
    assert lab.pods()['main-2']['status']['podIP'] == ips[2]
    assert etcdctl('--endpoints', 'http://%s:2379' % ips[2], 'get', 'k', '--print-value-only').strip() == 'v'


def _zombie(pid: int) -> bool:
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] == 'Z'
    except OSError:
        return True


def test_etcd_34_tag_runs_debians_etcd_and_a_deleted_pvc_goes_once_no_pod_uses_it(lab):
    if images.etcd_binary('3.4') is None:
        pytest.skip("no etcd 3.4 binary (Debian's etcd-server package)")
    # configured as druid does it: a config file from a ConfigMap, naming peers by DNS name and the PVC's mount path
    lab.post('/api/v1/namespaces/%s/configmaps' % NS, {
        'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'old-bootstrap', 'namespace': NS},
        'data': {'etcd.conf.yaml': 'name: old-0\ndata-dir: /var/etcd/data/new.etcd\n'
                                   'listen-client-urls: http://0.0.0.0:2379\nlisten-peer-urls: http://0.0.0.0:2380\n'
                                   'advertise-client-urls: http://old-0.old-peer.default.svc:2379\n'
                                   'initial-advertise-peer-urls: http://old-0.old-peer.default.svc:2380\n'
                                   'initial-cluster: old-0=http://old-0.old-peer.default.svc:2380\n'
                                   'initial-cluster-state: new\n'}})
    # readiness as druid's etcd container checks it: a command against `<name>-local`, a host alias of 127.0.0.1
    probe = {'exec': {'command': ['/bin/sh', '-ec', 'ETCDCTL_API=3 %s --endpoints=http://old-local:2379 endpoint health'
                                  % ETCDCTL]}}
    body = etcd_set('old', 'registry.k8s.io/etcd:3.4.13-0', 1, probe)
    template = body['spec']['template']['spec']
    template['hostAliases'] = [{'ip': '127.0.0.1', 'hostnames': ['old-local']}]
    template['containers'][0]['args'] = ['--config-file=/var/etcd/config/etcd.conf.yaml']
    template['containers'][0]['volumeMounts'].append({'name': 'config', 'mountPath': '/var/etcd/config'})
    template['volumes'] = [{'name': 'config', 'configMap': {'name': 'old-bootstrap'}}]
    lab.post('/apis/apps/v1/namespaces/%s/statefulsets' % NS, body)
    wait_for(lambda: 'old-0' in lab.pods() and ready(lab.pods()['old-0']), timeout=60, what=lab.runtime_log)
    pod = lab.pods()['old-0']
    argv = cmdline(pid_of(pod))
    assert images.binary_minor(argv[0]) == '3.4'
    ip = pod['status']['podIP']
    config = argv[1].split('=', 1)[1]
    assert config.startswith(os.path.join(lab.state, 'pods', 'volumes', NS, pod['metadata']['uid'], 'config'))
    with open(config) as f:
        text = f.read()
    assert 'initial-cluster: old-0=http://%s:2380' % ip in text and 'listen-client-urls: http://%s:2379' % ip in text
    assert 'data-dir: %s/new.etcd' % os.path.join(lab.state, 'pods', 'pvc', NS, 'old-old-0') in text
    assert etcdctl('--endpoints', 'http://%s:2379' % ip, 'member', 'list').split(', ')[3] == 'http://%s:2380' % ip
    assert requests.get('http://%s:2379/version' % ip, timeout=5).json()['etcdserver'].startswith('3.4.')
    etcdctl('--endpoints', 'http://%s:2379' % ip, 'put', 'k', 'old')
    # a runtime killed and started again adopts the running process (no second etcd, same containerID)
    os.kill(parts.read_record(lab.record)['pid'], 9)
    lab.restart_runtime()
    time.sleep(2)
    assert pid_of(lab.pods()['old-0']) == pid_of(pod) and ready(lab.pods()['old-0'])
    assert 'started pid' not in lab.runtime_log().split('pod runtime: API')[-1]
    pvc_path = '/api/v1/namespaces/%s/persistentvolumeclaims/old-old-0' % NS
    directory = os.path.join(lab.state, 'pods', 'pvc', NS, 'old-old-0')
    assert lab.get(pvc_path)['status']['phase'] == 'Bound' and os.path.isdir(os.path.join(directory, 'new.etcd'))
    # deleted while the pod uses it: Terminating (deletionTimestamp), directory kept, etcd keeps running
    lab.delete(pvc_path)
    time.sleep(1.5)
    pvc = lab.get(pvc_path)
    assert pvc['metadata'].get('deletionTimestamp') and pvc['metadata']['finalizers'] == ['kubernetes.io/pvc-protection']
    assert os.path.isdir(os.path.join(directory, 'new.etcd'))
    # the pod goes: the directory and the PVC go; the set then makes a new PVC and a new, empty member
    old_uid = pod['metadata']['uid']
    lab.delete('/api/v1/namespaces/%s/pods/old-0' % NS)
    wait_for(lambda: 'old-0' in lab.pods() and lab.pods()['old-0']['metadata']['uid'] != old_uid and
             ready(lab.pods()['old-0']), timeout=60, what=lab.runtime_log)
    new = lab.get(pvc_path)
    assert new['metadata']['uid'] != pvc['metadata']['uid'] and not new['metadata'].get('deletionTimestamp')
    assert etcdctl('--endpoints', 'http://%s:2379' % ip, 'get', 'k', '--print-value-only').strip() == ''
    # scale to 0 (the scale subresource, as kubectl scale): the pod and its process go, the PVC stays (Retain)
    pid = pid_of(lab.pods()['old-0'])
    answer = requests.patch(lab.kube.url + '/apis/apps/v1/namespaces/%s/statefulsets/old/scale' % NS,
                            json={'spec': {'replicas': 0}}, headers={'Content-Type': 'application/merge-patch+json'},
                            timeout=10)
    assert answer.status_code == 200, answer.text
    wait_for(lambda: not lab.pods() and (not os.path.exists('/proc/%d' % pid) or _zombie(pid)), timeout=30,
             what=lab.runtime_log)
    assert os.path.isdir(directory) and lab.get(pvc_path)['metadata']['name'] == 'old-old-0'
    wait_for(lambda: lab.get('/apis/apps/v1/namespaces/%s/statefulsets/old' % NS)['status']['replicas'] == 0,
             timeout=10, what='status.replicas 0')


def test_an_image_the_lab_cannot_run_waits_with_the_reason(lab):
    body = etcd_set('odd', 'gardener/etcd-wrapper:v0.4.0', 1, {'tcpSocket': {'port': 2379}})
    lab.post('/apis/apps/v1/namespaces/%s/statefulsets' % NS, body)
    wait_for(lambda: 'odd-0' in lab.pods() and lab.pods()['odd-0'].get('status', {}).get('containerStatuses'),
             timeout=30, what=lab.runtime_log)
    status = lab.pods()['odd-0']['status']
    assert status['phase'] == 'Pending' and not ready(lab.pods()['odd-0'])
    waiting = status['containerStatuses'][0]['state']['waiting']
    assert waiting['reason'] == 'LabImageUnknown' and "'v0.4.0'" in waiting['message']
    assert 'containerID' not in status['containerStatuses'][0]


def test_an_image_tag_change_rolls_the_members_from_34_to_35_keeping_their_data(lab):
    if images.etcd_binary('3.4') is None:
        pytest.skip("no etcd 3.4 binary (Debian's etcd-server package)")
    services(lab, 'roll')
    body = etcd_set('roll', 'quay.io/coreos/etcd:v3.4.13', 3, {'httpGet': {'path': '/health', 'port': 'client'}})
    body['spec']['podManagementPolicy'] = 'Parallel'
    lab.post('/apis/apps/v1/namespaces/%s/statefulsets' % NS, body)
    wait_for(lambda: len(lab.pods()) == 3 and all(ready(p) for p in lab.pods().values()), timeout=90,
             what=lab.runtime_log)
    ips = {name: p['status']['podIP'] for name, p in lab.pods().items()}
    endpoints = ','.join('http://%s:2379' % ip for ip in ips.values())
    wait_for(lambda: subprocess.run([ETCDCTL, '--endpoints', endpoints, 'endpoint', 'health'], capture_output=True,
                                    timeout=30, check=False).returncode == 0, timeout=30, what='a healthy cluster')
    members = sorted(etcdctl('--endpoints', endpoints, 'member', 'list').splitlines())
    etcdctl('--endpoints', endpoints, 'put', 'before', 'upgrade')
    answer = requests.patch(lab.kube.url + '/apis/apps/v1/namespaces/%s/statefulsets/roll' % NS, json={'spec': {'template': {
        'spec': {'containers': [dict(body['spec']['template']['spec']['containers'][0],
                                     image='quay.io/coreos/etcd:v3.5.1')]}}}},
        headers={'Content-Type': 'application/merge-patch+json'}, timeout=10)
    assert answer.status_code == 200, answer.text
    order: List[str] = []

    def rolled():
        pods = lab.pods()
        for name, pod in sorted(pods.items()):
            statuses = (pod.get('status') or {}).get('containerStatuses') or [{}]
            if statuses[0].get('image', '').endswith('v3.5.1') and name not in order:
                order.append(name)
        return len(pods) == 3 and all(ready(p) and p['status']['containerStatuses'][0]['image'].endswith('v3.5.1')
                                      for p in pods.values())
    wait_for(rolled, timeout=120, interval=0.1, what=lab.runtime_log)
    assert order == ['roll-2', 'roll-1', 'roll-0']       # the highest ordinal first
    for name, pod in lab.pods().items():
        assert images.binary_minor(cmdline(pid_of(pod))[0]) == '3.5' and pod['status']['podIP'] == ips[name]
    wait_for(lambda: subprocess.run([ETCDCTL, '--endpoints', endpoints, 'endpoint', 'health'], capture_output=True,
                                    timeout=30, check=False).returncode == 0, timeout=30, what='a healthy cluster')
    assert sorted(etcdctl('--endpoints', endpoints, 'member', 'list').splitlines()) == members   # same IDs
    assert etcdctl('--endpoints', endpoints, 'get', 'before', '--print-value-only').strip() == 'upgrade'
    status = lab.get('/apis/apps/v1/namespaces/%s/statefulsets/roll' % NS)['status']
    assert status['updatedReplicas'] == 3 and status['readyReplicas'] == 3


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def test_a_running_pods_secret_and_configmap_volumes_follow_their_objects(lab):
    """As a kubelet refreshes them (lab: every VOLUME_REFRESH seconds): a rotated Secret key or an edited ConfigMap
    key reaches the running pod's files without a restart; a volume mounted with subPath is left as it was (a kubelet
    never updates those)."""
    b64 = base64.b64encode
    secret_path = '/api/v1/namespaces/%s/secrets/certs' % NS
    map_path = '/api/v1/namespaces/%s/configmaps/settings' % NS
    lab.post('/api/v1/namespaces/%s/secrets' % NS, {'apiVersion': 'v1', 'kind': 'Secret', 'metadata': {
        'name': 'certs', 'namespace': NS}, 'data': {'tls.crt': b64(b'first').decode()}})
    lab.post('/api/v1/namespaces/%s/configmaps' % NS, {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {
        'name': 'settings', 'namespace': NS}, 'data': {'level': 'info'}})
    body = etcd_set('vol', 'quay.io/coreos/etcd:v3.5.1', 1, {'tcpSocket': {'port': 2379}})
    template = body['spec']['template']['spec']
    template['containers'][0]['volumeMounts'] += [
        {'name': 'certs', 'mountPath': '/var/etcd/ssl'}, {'name': 'settings', 'mountPath': '/etc/settings'},
        {'name': 'pinned', 'mountPath': '/etc/pinned/level', 'subPath': 'level'}]
    template['volumes'] = [{'name': 'certs', 'secret': {'secretName': 'certs'}},
                           {'name': 'settings', 'configMap': {'name': 'settings'}},
                           {'name': 'pinned', 'configMap': {'name': 'settings'}}]
    lab.post('/apis/apps/v1/namespaces/%s/statefulsets' % NS, body)
    wait_for(lambda: 'vol-0' in lab.pods() and ready(lab.pods()['vol-0']), timeout=60, what=lab.runtime_log)
    pod = lab.pods()['vol-0']
    pid = pid_of(pod)
    volumes = os.path.join(lab.state, 'pods', 'volumes', NS, pod['metadata']['uid'])
    cert, level, pinned = (os.path.join(volumes, 'certs', 'tls.crt'), os.path.join(volumes, 'settings', 'level'),
                           os.path.join(volumes, 'pinned', 'level'))
    assert (_read(cert), _read(level), _read(pinned)) == ('first', 'info', 'info')
    secret = lab.get(secret_path)
    secret['data']['tls.crt'] = b64(b'rotated').decode()
    assert requests.put(lab.kube.url + secret_path, json=secret, timeout=10).status_code == 200
    settings = lab.get(map_path)
    settings['data']['level'] = 'debug'
    assert requests.put(lab.kube.url + map_path, json=settings, timeout=10).status_code == 200
    wait_for(lambda: _read(cert) == 'rotated' and _read(level) == 'debug', timeout=20,
             what=lambda: 'volumes not refreshed: %r %r' % (_read(cert), _read(level)))
    assert _read(pinned) == 'info'                       # subPath: never updated
    assert pid_of(lab.pods()['vol-0']) == pid            # no restart
