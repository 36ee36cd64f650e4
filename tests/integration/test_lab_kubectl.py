"""A real kubectl against the lab's API emulator (lab/kube/discovery.py): discovery, the OpenAPI document and
strategic merge patches good enough for `kubectl apply -k controller/deploy`, `get`, `describe`, `scale` and
`delete`, as a user tries the collection's manifests on the lab."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import threading

import pytest

from lab.kube.api import KubeServer
from lab.paths import REPO

# PATH's kubectl, and another one to try beside it (e.g. Debian's kubernetes-client 1.20 unpacked where the
# Kubernetes project's kubectl package owns /usr/bin/kubectl)
KUBECTLS = [k for k in dict.fromkeys([shutil.which('kubectl'), os.environ.get('STEWARD_KUBECTL')]) if k]


@pytest.fixture(params=KUBECTLS or [None])
def kubectl(request, tmp_path):
    if request.param is None:
        pytest.skip('kubectl is not installed (Debian: kubernetes-client)')
    server = KubeServer(status_delay=0.2).start()
    server.install_crds(os.path.join(REPO, 'controller', 'deploy', 'crds'))
    kubeconfig = server.write_kubeconfig(str(tmp_path / 'kubeconfig'))

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run([request.param, '--kubeconfig', kubeconfig, '--cache-dir', str(tmp_path / 'cache')] +
                                list(args), capture_output=True, text=True, timeout=120, cwd=REPO,
                                env=dict(os.environ, HOME=str(tmp_path)), check=False)
        if check:
            assert result.returncode == 0, 'kubectl %s: %s%s' % (' '.join(args), result.stdout, result.stderr)
        return result
    yield run
    server.stop()


ETCD_BACKUP = '''apiVersion: cluster.steward.io/v1alpha1
kind: EtcdBackup
metadata: {name: main, namespace: kube-system}
spec:
  etcd:
    endpoints: [https://10.0.0.1:2379]
    tlsSecretRef: {name: etcd-client-tls}
  store: {provider: S3, container: etcd-backups, prefix: clusters/main, secretRef: {name: etcd-backup-s3}}
  fullSnapshotSchedule: "0 */6 * * *"
  deltaSnapshotPeriod: 20s
'''


def test_kubectl_applies_gets_describes_scales_and_deletes_the_collections_manifests(kubectl, tmp_path):
    out = kubectl('apply', '-k', 'controller/deploy').stdout
    for line in ('namespace/steward-system created', 'serviceaccount/steward-controller created',
                 'service/steward-controller-metrics created', 'deployment.apps/steward-controller created'):
        assert line in out, out
    again = kubectl('apply', '-k', 'controller/deploy').stdout
    assert 'deployment.apps/steward-controller unchanged' in again and 'created' not in again, again
    deployment = json.loads(kubectl('-n', 'steward-system', 'get', 'deployment', 'steward-controller', '-o', 'json').stdout)
    assert deployment['metadata']['annotations']['kubectl.kubernetes.io/last-applied-configuration']
    names = kubectl('get', 'ns,crd', '-o', 'name').stdout.split()
    assert 'namespace/steward-system' in names and 'customresourcedefinition.apiextensions.k8s.io/machines.machine.sapcloud.io' in names
    assert 'steward-controller' in kubectl('-n', 'steward-system', 'get', 'sa').stdout
    described = kubectl('-n', 'steward-system', 'describe', 'service', 'steward-controller-metrics').stdout
    assert 'Name:' in described and 'steward-controller-metrics' in described
    assert 'deployment.apps/steward-controller scaled' in kubectl(
        '-n', 'steward-system', 'scale', 'deployment/steward-controller', '--replicas=3').stdout
    replicas = kubectl('-n', 'steward-system', 'get', 'deployment', 'steward-controller', '-o',
                       'jsonpath={.spec.replicas}').stdout
    assert replicas == '3'
    # a changed manifest: the strategic merge patch kubectl sends keeps the containers list whole
    kubectl('-n', 'steward-system', 'set', 'env', 'deployment/steward-controller', 'LAB_TEST=1')
    deployment = json.loads(kubectl('-n', 'steward-system', 'get', 'deployment', 'steward-controller', '-o', 'json').stdout)
    container = deployment['spec']['template']['spec']['containers'][0]
    assert {'name': 'LAB_TEST', 'value': '1'} in container['env'] and container.get('image')
    assert not any(k.startswith('$') for k in json.dumps(deployment).split('"'))
    # a custom object (docs/controller.md's EtcdBackup): created, changed (a JSON merge patch), described, deleted
    backup = tmp_path / 'backup.yaml'
    backup.write_text(ETCD_BACKUP)
    assert 'etcdbackup.cluster.steward.io/main created' in kubectl('apply', '-f', str(backup)).stdout
    backup.write_text(ETCD_BACKUP.replace('deltaSnapshotPeriod: 20s', 'deltaSnapshotPeriod: 30s'))
    assert 'etcdbackup.cluster.steward.io/main configured' in kubectl('apply', '-f', str(backup)).stdout
    assert kubectl('-n', 'kube-system', 'get', 'etcdbackup', 'main', '-o', 'jsonpath={.spec.deltaSnapshotPeriod}').stdout == '30s'
    assert 'Delta Snapshot Period:' in kubectl('-n', 'kube-system', 'describe', 'etcdbackup', 'main').stdout
    kubectl('delete', '-f', str(backup))
    kubectl('-n', 'steward-system', 'delete', 'deployment', 'steward-controller')
    gone = kubectl('-n', 'steward-system', 'get', 'deployment', 'steward-controller', check=False)
    assert gone.returncode != 0 and 'NotFound' in gone.stderr
    kubectl('delete', '-f', 'controller/deploy/service.yaml')
    assert 'No resources found' in kubectl('-n', 'steward-system', 'get', 'svc').stderr


ETCD = '''apiVersion: druid.gardener.cloud/v1alpha1
kind: Etcd
metadata: {name: etcd-main, namespace: demo}
spec:
  replicas: 3
  labels: {app: etcd-main}
  etcd: {}
  backup:
    store: {provider: aws, container: etcd-backups, prefix: demo--etcd-main, secretRef: {name: etcd-backup-aws}}
---
apiVersion: v1
kind: Pod
metadata: {name: etcd-main-0, namespace: demo, labels: {app: etcd-main}}
spec:
  containers: [{name: etcd, image: "etcd-wrapper:v3.5.21"}, {name: backup-restore, image: "etcdbrctl:v0.30.1"}]
---
apiVersion: v1
kind: Event
metadata: {name: etcd-main.1, namespace: demo}
involvedObject: {apiVersion: druid.gardener.cloud/v1alpha1, kind: Etcd, name: etcd-main, namespace: demo}
reason: ScaledUp
message: scaling up 1 -> 3
type: Normal
'''


def test_kubectl_create_and_get_print_what_the_api_server_prints(kubectl, tmp_path):
    # the imperative commands write protobuf: namespace, secret (a binary file too), configmap, serviceaccount
    binary = tmp_path / 'blob'
    binary.write_bytes(bytes(range(256)))
    assert 'namespace/demo created' in kubectl('create', 'namespace', 'demo').stdout
    kubectl('-n', 'demo', 'create', 'secret', 'generic', 'etcd-backup-aws', '--from-literal=region=eu-west-1',
            '--from-file=blob=%s' % binary)
    kubectl('-n', 'demo', 'create', 'configmap', 'settings', '--from-literal=a=b')
    kubectl('-n', 'demo', 'create', 'serviceaccount', 'etcd')
    secret = json.loads(kubectl('-n', 'demo', 'get', 'secret', 'etcd-backup-aws', '-o', 'json').stdout)
    assert base64.b64decode(secret['data']['blob']) == bytes(range(256))
    assert base64.b64decode(secret['data']['region']) == b'eu-west-1'
    refused = kubectl('-n', 'demo', 'create', 'deployment', 'web', '--image=nginx', check=False)
    assert refused.returncode != 0 and 'send it as JSON' in refused.stderr, refused.stderr

    # a Secret applied with stringData is stored as data, as on a real API server
    manifest = tmp_path / 'secret.yaml'
    manifest.write_text('apiVersion: v1\nkind: Secret\nmetadata: {name: plain, namespace: demo}\n'
                        'stringData: {accessKeyID: AKID}\n')
    kubectl('apply', '-f', str(manifest))
    plain = json.loads(kubectl('-n', 'demo', 'get', 'secret', 'plain', '-o', 'json').stdout)
    assert 'stringData' not in plain and base64.b64decode(plain['data']['accessKeyID']) == b'AKID'

    # server-side printing: the API server's columns, a CRD's additionalPrinterColumns
    objects = tmp_path / 'etcd.yaml'
    objects.write_text(ETCD)
    kubectl('apply', '-f', str(objects))
    header = kubectl('-n', 'demo', 'get', 'etcd').stdout.splitlines()[0].split()
    assert header[:2] == ['NAME', 'READY'] and 'QUORATE' in header and 'AGE' in header, header
    wide = kubectl('-n', 'demo', 'get', 'etcd', '-o', 'wide').stdout.splitlines()
    assert 'CLUSTER SIZE' in wide[0] and wide[1].split()[0] == 'etcd-main', wide
    assert '3' in wide[1].split()[1:], wide   # spec.replicas under CLUSTER SIZE
    pods = kubectl('-n', 'demo', 'get', 'pods').stdout.splitlines()
    assert pods[0].split() == ['NAME', 'READY', 'STATUS', 'RESTARTS', 'AGE'], pods
    assert pods[1].split()[:4] == ['etcd-main-0', '0/2', 'Pending', '0'], pods
    secrets = kubectl('-n', 'demo', 'get', 'secrets').stdout.splitlines()
    assert secrets[0].split() == ['NAME', 'TYPE', 'DATA', 'AGE'] and \
        [line.split()[:3] for line in secrets[1:]] == [['etcd-backup-aws', 'Opaque', '2'], ['plain', 'Opaque', '1']]
    events = kubectl('-n', 'demo', 'get', 'events').stdout
    assert 'ScaledUp' in events and 'etcd/etcd-main' in events and 'scaling up 1 -> 3' in events, events
    assert kubectl('get', 'namespaces').stdout.splitlines()[0].split() == ['NAME', 'STATUS', 'AGE']
    assert 'etcd-main-0' in kubectl('-n', 'demo', 'get', 'pods', '-l', 'app=etcd-main', '-o', 'name').stdout

    # kubectl delete waits on a watch: its JSON stream is decoded (it was served as application/octet-stream)
    deleted = kubectl('-n', 'demo', 'delete', 'configmap', 'settings', '--timeout=20s')
    assert 'deleted' in deleted.stdout and 'stream serializers' not in deleted.stderr, deleted.stderr


@pytest.mark.parametrize('binary', KUBECTLS or [None])
def test_kubectl_get_watch_prints_the_api_servers_columns(binary, tmp_path):
    """`kubectl get -w` asks the watch for Tables too: each event a one-row Table, as the API server answers (the
    rows of new objects were printed without their columns). It watches from the list's resourceVersion, so the
    objects it listed are not printed again (the lab's watch sent them as ADDED before)."""
    if binary is None:
        pytest.skip('kubectl is not installed (Debian: kubernetes-client)')
    server = KubeServer(status_delay=0.2).start()
    try:
        kubeconfig = server.write_kubeconfig(str(tmp_path / 'kubeconfig'))
        argv = [binary, '--kubeconfig', kubeconfig, '--cache-dir', str(tmp_path / 'cache'), '-n', 'default']
        env = dict(os.environ, HOME=str(tmp_path))
        subprocess.run(argv + ['create', 'secret', 'generic', 'first', '--from-literal=a=b'], check=True,
                       capture_output=True, timeout=60, env=env)
        with subprocess.Popen(argv + ['get', 'secrets', '-w'], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) as watch:
            deadline = threading.Timer(30, watch.kill)   # a watch that prints nothing ends the reads (EOF)
            deadline.start()
            try:
                lines = [watch.stdout.readline().split() for line_no in range(2)]      # the list: header, one row
                subprocess.run(argv + ['create', 'secret', 'generic', 'second', '--from-literal=a=b',
                                       '--from-literal=c=d'], check=True, capture_output=True, timeout=60, env=env)
                lines.append(watch.stdout.readline().split())   # the watch from the list's resourceVersion
            finally:
                deadline.cancel()
                watch.kill()
    finally:
        server.stop()
    assert lines[0] == ['NAME', 'TYPE', 'DATA', 'AGE'] and lines[1][:3] == ['first', 'Opaque', '1'], lines
    assert lines[2][:3] == ['second', 'Opaque', '2'] and len(lines[2]) == 4, lines   # 'first' not printed again
    assert all(len(line) == 4 for line in lines), lines    # every row with the server's columns, no second header
