# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `etcd` loop end to end: the real controller program (`--controllers etcd`) against the Kubernetes API
emulator, driven as a druid user drives etcd-druid: apply a druid `Etcd` with replicas 1, scale it to 3 with the
reconcile annotation, lose a member, change the etcd image (members restart one at a time, the leader last),
delete it.

There is no pod runtime here (the lab's comes separately): the test plays the StatefulSet controller and each
member's backup-restore sidecar, writing the pods, their PVCs, the member Leases' holderIdentity `<hex id>:Leader|
Member` and renewTime, and the snapshot Leases, with names and keys written out as druid documents them (no import
of the engine it checks).
"""

from __future__ import annotations

import datetime
import threading
import time
from typing import Any, Dict, List, Optional

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import Invalid

from lab.env.controller import ControllerProcess, wait_for
from support.druid_samples import sample
from support.rbac import audited, calls_of, grants_from, least_privilege

NS = 'shoot'
NAME = 'etcd-main'
ETCDS = api_path('druid.gardener.cloud/v1alpha1', 'etcds', NS)
ETCD = ETCDS + '/' + NAME
LEASES = api_path('coordination.k8s.io/v1', 'leases', NS)
PODS = api_path('v1', 'pods', NS)
PVCS = api_path('v1', 'persistentvolumeclaims', NS)
STS = api_path('apps/v1', 'statefulsets', NS, NAME)
TEMPLATE_HASH = 'cluster.steward.io/pod-template-hash'
ROLES = ('steward-controller-etcd', 'steward-controller-leases')
# Calls the loop has a grant for and this scenario does not make, with the test that does.
NOT_REACHED_HERE: Dict[Any, str] = {
    ('', 'secrets', 'get'): 'a quorum-loss recovery from a surviving member (test_druid_quorum_loss_journey.py)',
}


def micro(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%fZ')


class Sidecars:
    """Plays the StatefulSet controller and the members' sidecars: pods for the StatefulSet's replicas (Ready, on its
    pod template), their PVCs, and member/snapshot Lease renewals every 0.5 s. `stopped` members renew nothing."""

    def __init__(self, kube: KubeClient):
        self.kube = kube
        self.stopped: set = set()
        self.ids = {0: 'a1b2c3d4e5f60001', 1: 'a1b2c3d4e5f60002', 2: 'a1b2c3d4e5f60003'}
        self.revision = 100
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def start(self) -> 'Sidecars':
        self.thread.start()
        return self

    def stop(self) -> None:
        self.done.set()
        if self.thread.is_alive():
            self.thread.join(10)

    def run(self) -> None:
        while not self.done.wait(0.5):
            try:
                self.tick()
            except Exception as exc:    # the API moved under us (a deletion): next tick
                print('sidecar tick: %s' % exc)

    def tick(self) -> None:
        sts = self.kube.get_or_none(STS)
        now = time.time()
        self.revision += 1
        if sts is None:
            return
        replicas = sts['spec']['replicas']
        template = sts['spec']['template']
        for i in range(replicas):
            name = '%s-%d' % (NAME, i)
            pvc = '%s-%s' % (sts['spec']['volumeClaimTemplates'][0]['metadata']['name'], name)
            if self.kube.get_or_none(PVCS + '/' + pvc) is None:
                self.kube.create(PVCS, {'apiVersion': 'v1', 'kind': 'PersistentVolumeClaim',
                                        'metadata': {'name': pvc, 'namespace': NS,
                                                     'labels': sts['spec']['volumeClaimTemplates'][0]['metadata']['labels']},
                                        'spec': {'accessModes': ['ReadWriteOnce'],
                                                 'resources': {'requests': {'storage': '10Gi'}}},
                                        'status': {'phase': 'Bound'}})
            if i in self.stopped:
                continue
            if self.kube.get_or_none(PODS + '/' + name) is None:
                self.kube.create(PODS, {
                    'apiVersion': 'v1', 'kind': 'Pod',
                    'metadata': {'name': name, 'namespace': NS, 'labels': template['metadata']['labels'],
                                 'annotations': template['metadata']['annotations'],
                                 'ownerReferences': [{'apiVersion': 'apps/v1', 'kind': 'StatefulSet', 'name': NAME,
                                                      'uid': sts['metadata']['uid'], 'controller': True}]},
                    'spec': template['spec'],
                    'status': {'phase': 'Running', 'conditions': [{'type': 'Ready', 'status': 'True'}]}})
            lease = self.kube.get_or_none(LEASES + '/' + name)
            if lease is not None:
                role = 'Leader' if i == 0 else 'Member'
                self.kube.merge_patch(LEASES + '/' + name, {
                    'metadata': {'annotations': {'cluster.steward.io/revision': str(self.revision)}},
                    'spec': {'holderIdentity': '%s:%s' % (self.ids[i], role), 'renewTime': micro(now),
                             'leaseDurationSeconds': 2}})
        for kind, revision in (('full-snap', 100), ('delta-snap', self.revision)):
            if self.kube.get_or_none(LEASES + '/%s-%s' % (NAME, kind)) is not None:
                patch: Dict[str, Any] = {'spec': {'holderIdentity': str(revision), 'renewTime': micro(now)}}
                if kind == 'full-snap':
                    patch['metadata'] = {'annotations': {'cluster.steward.io/verified-revision': '100',
                                                         'cluster.steward.io/verified-at': micro(now)}}
                self.kube.merge_patch(LEASES + '/%s-%s' % (NAME, kind), patch)


@pytest.fixture
def druid(kube):
    """The emulator with druid's CRDs as shipped (controller/deploy/crds: the kube fixture installs every one)."""
    assert kube.get_or_none(api_path('apiextensions.k8s.io/v1', 'customresourcedefinitions', name='etcds.druid.gardener.cloud'))
    return kube


def start_controller(kube: KubeClient, tmp_path, *extra: str) -> ControllerProcess:
    return ControllerProcess(kube.server, str(tmp_path / 'controller'), args=[
        '--controllers', 'etcd', '--etcd-status-sync-period', '1s', '--etcd-member-unknown-threshold', '3s',
        '--etcd-member-notready-threshold', '3s'] + list(extra)).start()


def stop_controller(proc: ControllerProcess) -> None:
    code = proc.stop()
    assert code == 0, proc.log()[-3000:]
    assert '"level": "ERROR"' not in proc.log(), proc.log()[-3000:]


def etcd(kube: KubeClient) -> Optional[Dict[str, Any]]:
    return kube.get_or_none(ETCD)


def condition(obj: Dict[str, Any], type_: str) -> Optional[tuple]:
    for cond in (obj.get('status') or {}).get('conditions') or []:
        if cond['type'] == type_:
            return cond['status'], cond['reason']
    return None


def events(kube: KubeClient) -> List[str]:
    found = [e for e in kube.list(api_path('v1', 'events', NS)) if (e.get('involvedObject') or {}).get('name') == NAME]
    return [e['reason'] for e in sorted(found, key=lambda e: e.get('eventTime') or '')]


def template_hash(sts: Dict[str, Any]) -> str:
    return sts['spec']['template']['metadata']['annotations'][TEMPLATE_HASH]


def lease_names(kube: KubeClient) -> List[str]:
    return sorted(lease['metadata']['name'] for lease in kube.list(LEASES))


def status_is(kube: KubeClient, **want: Any):
    def check():
        obj = etcd(kube)
        st = (obj or {}).get('status') or {}
        conditions = {k: v for k, v in want.items() if k[0].isupper()}
        fields = {k: v for k, v in want.items() if not k[0].isupper()}
        ok = all(st.get(k) == v for k, v in fields.items()) and all(
            condition(obj or {}, k) == v for k, v in conditions.items())
        return obj if ok else None
    return check


def test_a_druid_etcd_from_one_to_three_members_and_deleted(druid, tmp_path):
    kube = druid
    audit = audited(kube.server)
    proc = start_controller(kube, tmp_path)
    sidecars = Sidecars(kube)
    try:
        obj = sample(replicas=1)
        for key in ('uid', 'generation'):
            del obj['metadata'][key]
        kube.create(ETCDS, obj)

        # 1. replicas 1: the components with druid's names, labels and owner, and the finalizer
        sts = wait_for(lambda: kube.get_or_none(STS), 30, 0.2, 'the StatefulSet')
        created = etcd(kube)
        assert created['metadata']['finalizers'] == ['druid.gardener.cloud/etcd']
        uid = created['metadata']['uid']
        assert sts['spec']['replicas'] == 1 and sts['spec']['serviceName'] == 'etcd-main-peer'
        assert [c['name'] for c in sts['spec']['template']['spec']['containers']] == ['etcd', 'backup-restore']
        assert sts['spec']['template']['spec']['containers'][0]['image'] == 'quay.io/coreos/etcd:v3.4.26'
        for path in (STS, api_path('v1', 'services', NS, 'etcd-main-client'), api_path('v1', 'services', NS, 'etcd-main-peer'),
                     LEASES + '/etcd-main-0', LEASES + '/etcd-main-full-snap', LEASES + '/etcd-main-delta-snap',
                     api_path('policy/v1', 'poddisruptionbudgets', NS, NAME), api_path('v1', 'serviceaccounts', NS, NAME),
                     api_path('rbac.authorization.k8s.io/v1', 'roles', NS, 'druid.gardener.cloud:etcd:etcd-main'),
                     api_path('rbac.authorization.k8s.io/v1', 'rolebindings', NS, 'druid.gardener.cloud:etcd:etcd-main')):
            made = kube.get(path)
            labels = made['metadata']['labels']
            assert labels['app.kubernetes.io/managed-by'] == 'etcd-druid' and labels['instance'] == NAME, path
            assert made['metadata']['ownerReferences'][0]['uid'] == uid, path
        assert kube.get(api_path('v1', 'services', NS, 'etcd-main-peer'))['spec']['clusterIP'] == 'None'
        (cm,) = [c for c in kube.list(api_path('v1', 'configmaps', NS)) if c['metadata']['name'].startswith('etcd-bootstrap-')]
        assert 'initial-cluster: etcd-main-0=http://etcd-main-0.etcd-main-peer.shoot.svc:2380' in cm['data']['etcd.conf.yaml']
        volumes = {v['name']: v for v in sts['spec']['template']['spec']['volumes']}
        assert volumes['etcd-config-file']['configMap']['name'] == cm['metadata']['name']
        assert lease_names(kube) == sorted(['etcd-main-0', 'etcd-main-full-snap', 'etcd-main-delta-snap'])

        # the members come up: Ready, Quorate, all members Ready, backups fresh; the reconcile is done
        sidecars.start()
        ready = wait_for(status_is(kube, ready=True, clusterSize=1, readyReplicas=1, observedGeneration=1,
                                   Ready=('True', 'Quorate'), AllMembersReady=('True', 'AllMembersReady'),
                                   BackupReady=('True', 'IncrementalBackupSucceeded'),
                                   DataVolumesReady=('True', 'NoErrorsFound')), 30, 0.3, lambda: etcd(kube).get('status'))
        (member,) = ready['status']['members']
        assert (member['name'], member['id'], member['role'], member['status'], member['reason']) == (
            'etcd-main-0', 'a1b2c3d4e5f60001', 'Leader', 'Ready', 'LeaseSucceeded')
        assert ready['status']['lastOperation']['state'] == 'Succeeded'
        assert ready['status']['etcd'] == {'apiVersion': 'apps/v1', 'kind': 'StatefulSet', 'name': NAME}

        # 2. replicas 3 without the annotation: nothing happens (druid's default), the skip is an Event
        kube.merge_patch(ETCD, {'spec': {'replicas': 3}})
        wait_for(lambda: 'ReconcileSkipped' in events(kube), 15, 0.3, 'the skip Event')
        time.sleep(2)
        assert kube.get(STS)['spec']['replicas'] == 1 and etcd(kube)['status']['observedGeneration'] == 1

        # someone edits our objects by hand; the reconcile puts them back
        kube.merge_patch(api_path('v1', 'services', NS, 'etcd-main-client'), {'spec': {'sessionAffinity': 'ClientIP'}})
        kube.merge_patch(api_path('v1', 'serviceaccounts', NS, NAME), {'automountServiceAccountToken': True})
        role_path = api_path('rbac.authorization.k8s.io/v1', 'roles', NS, 'druid.gardener.cloud:etcd:etcd-main')
        kube.merge_patch(role_path, {'rules': []})
        binding_path = api_path('rbac.authorization.k8s.io/v1', 'rolebindings', NS, 'druid.gardener.cloud:etcd:etcd-main')
        kube.merge_patch(binding_path, {'subjects': []})
        kube.merge_patch(LEASES + '/etcd-main-full-snap', {'metadata': {'labels': {'name': 'edited'}}})

        # ... with the reconcile annotation: learners, 3 replicas, the annotation gone, observedGeneration 2
        kube.merge_patch(ETCD, {'metadata': {'annotations': {'gardener.cloud/operation': 'reconcile'}}})
        wait_for(lambda: kube.get(STS)['spec']['replicas'] == 3, 30, 0.3, 'three replicas')
        scaled = kube.get(STS)
        assert scaled['metadata']['annotations']['gardener.cloud/scaled-to-multi-node'] == ''
        for name in ('etcd-main-1', 'etcd-main-2'):
            assert kube.get(LEASES + '/' + name)['metadata']['annotations']['druid.gardener.cloud/create-as-learner'] == 'true'
        cm = kube.get(api_path('v1', 'configmaps', NS, cm['metadata']['name']))
        assert 'etcd-main-2=http://etcd-main-2.etcd-main-peer.shoot.svc:2380' in cm['data']['etcd.conf.yaml']
        three = wait_for(status_is(kube, ready=True, clusterSize=3, observedGeneration=2, Ready=('True', 'Quorate'),
                                   AllMembersReady=('True', 'AllMembersReady')), 30, 0.3,
                         lambda: etcd(kube).get('status'))
        assert 'gardener.cloud/operation' not in (three['metadata'].get('annotations') or {})
        roles = sorted((m['name'], m['role']) for m in three['status']['members'])
        assert roles == [('etcd-main-0', 'Leader'), ('etcd-main-1', 'Member'), ('etcd-main-2', 'Member')]
        wait_for(lambda: kube.get(api_path('policy/v1', 'poddisruptionbudgets', NS, NAME))['spec']['minAvailable'] == 2,
                 15, 0.3, 'PDB minAvailable 2')
        assert kube.get(api_path('v1', 'services', NS, 'etcd-main-client'))['spec']['sessionAffinity'] == 'None'
        assert kube.get(role_path)['rules'] and kube.get(binding_path)['subjects']
        assert kube.get(LEASES + '/etcd-main-full-snap')['metadata']['labels']['name'] == 'etcd'
        assert kube.get(api_path('v1', 'serviceaccounts', NS, NAME))['automountServiceAccountToken'] is False
        assert kube.get(STS)['spec']['template']['metadata']['annotations'][TEMPLATE_HASH] == \
            sts['spec']['template']['metadata']['annotations'][TEMPLATE_HASH]   # no member restarted for the scale

        # 3. a member's sidecar stops renewing and its pod turns NotReady: Unknown/NotReady, quorum kept; past the
        #    grace, with a fresh verified backup, its pod is deleted (one, the limit)
        sidecars.stopped.add(2)
        kube.merge_patch(PODS + '/etcd-main-2', {'status': {'conditions': [{'type': 'Ready', 'status': 'False'}]}})
        lost = wait_for(status_is(kube, Ready=('True', 'Quorate'), AllMembersReady=('False', 'NotAllMembersReady')),
                        20, 0.3, lambda: etcd(kube).get('status'))
        assert [m['status'] for m in lost['status']['members'] if m['name'] == 'etcd-main-2'] == ['NotReady']
        wait_for(lambda: kube.get_or_none(PODS + '/etcd-main-2') is None, 30, 0.3, 'the NotReady pod deleted')
        assert 'UnreadyMemberDeleted' in events(kube)
        assert kube.get(PODS + '/etcd-main-0') and kube.get(PODS + '/etcd-main-1')
        sidecars.stopped.discard(2)
        wait_for(status_is(kube, AllMembersReady=('True', 'AllMembersReady')), 30, 0.3, 'all members Ready again')

        # 4. a new etcd image (with the reconcile annotation): the template is written with OnDelete, then the
        #    members restart one at a time, followers first and the leader last, each once all are Ready again
        kube.merge_patch(ETCD, {'metadata': {'annotations': {'gardener.cloud/operation': 'reconcile'}},
                                'spec': {'etcd': {'image': 'quay.io/coreos/etcd:v3.5.17'}}})
        old_hash = template_hash(sts)
        new_hash = wait_for(lambda: template_hash(kube.get(STS)) != old_hash and template_hash(kube.get(STS)), 30, 0.3,
                            'the new pod template')
        assert kube.get(STS)['spec']['updateStrategy'] == {'type': 'OnDelete'}

        def rolled():
            pods = kube.list(PODS)
            return len(pods) == 3 and all(p['metadata']['annotations'][TEMPLATE_HASH] == new_hash for p in pods)
        wait_for(rolled, 60, 0.3, 'every member on the new template')
        restarts = [e['message'] for e in sorted(kube.list(api_path('v1', 'events', NS)), key=lambda e: e['eventTime'])
                    if e['reason'] == 'MemberRestarted']
        assert [m.split()[1] for m in restarts] == ['etcd-main-1', 'etcd-main-2', 'etcd-main-0'], restarts
        assert 'the leader last' in restarts[-1]
        wait_for(status_is(kube, observedGeneration=3, AllMembersReady=('True', 'AllMembersReady')), 30, 0.3,
                 'generation 3 reconciled')

        # 5. delete: every component goes, then the finalizer, then the Etcd
        sidecars.stop()
        kube.delete(ETCD)
        wait_for(lambda: etcd(kube) is None, 30, 0.3, 'the Etcd gone')
        assert kube.get_or_none(STS) is None
        assert lease_names(kube) == []
        assert not kube.list(api_path('v1', 'services', NS))
        assert not [c for c in kube.list(api_path('v1', 'configmaps', NS)) if c['metadata']['name'].startswith('etcd-bootstrap-')]
        assert kube.get_or_none(api_path('policy/v1', 'poddisruptionbudgets', NS, NAME)) is None
        assert kube.get_or_none(role_path) is None and kube.get_or_none(binding_path) is None
        assert len(kube.list(PVCS)) == 3                     # the data stays
        reasons = events(kube)
        for reason in ('ComponentsApplied', 'StatefulSetCreated', 'ReconcileSucceeded', 'ReconcileSkipped', 'ScaledUp',
                       'UnreadyMemberDeleted', 'StatefulSetUpdated', 'MemberRestarted', 'ComponentsDeleted'):
            assert reason in reasons, reasons
    finally:
        sidecars.stop()
        stop_controller(proc)

    calls = calls_of(audit, ['steward-controller/', 'kopf/'])
    denied, unused = least_privilege(calls, grants_from(['controller/deploy/rbac.yaml'], ROLES), NOT_REACHED_HERE)
    assert not denied, 'calls the etcd loop makes without a grant: %s' % denied
    assert not unused, 'grants the etcd loop does not use: %s' % unused


def test_an_invalid_etcd_is_refused_by_name_and_changes_nothing(druid, tmp_path):
    kube = druid
    proc = start_controller(kube, tmp_path)
    try:
        even = sample(replicas=2)
        for key in ('uid', 'generation'):
            del even['metadata'][key]
        with pytest.raises(Invalid, match='spec.replicas'):   # the shipped CRD's rule refuses it at the API
            kube.create(ETCDS, even)
        # what no CRD rule can say: the pods' labels must hold the selector; the loop refuses it by name
        obj = sample(selector={'matchLabels': {'app': 'someone-else'}})
        for key in ('uid', 'generation'):
            del obj['metadata'][key]
        kube.create(ETCDS, obj)
        bad = wait_for(lambda: ((etcd(kube) or {}).get('status') or {}).get('lastErrors'), 30, 0.3, 'lastErrors')
        assert bad[0]['code'] == 'ERR_INVALID_SPEC'
        assert bad[0]['description'].startswith('spec.labels') and 'spec.selector' in bad[0]['description']
        assert 'InvalidSpec' in events(kube)
        assert kube.get_or_none(STS) is None and not kube.list(LEASES)
        kube.delete(ETCD)
        wait_for(lambda: etcd(kube) is None, 15, 0.3, 'an invalid Etcd deleted')
    finally:
        stop_controller(proc)
