# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The weeder end to end: the real controller (`--controllers weeder --weeder-config FILE`) against the
emulator; the test plays the endpoints controller (Endpoints / EndpointSlices ready or not) and the kubelet
(pods in CrashLoopBackOff). DWD's weeder acceptance tests W1 to W5, Endpoints and EndpointSlices, and the
per-pod deletion limit (no deletion loop when the upstream flaps)."""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

import pytest
import yaml

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from lab.env.controller import ControllerProcess, wait_for
from support.rbac import audited, calls_of, grants_from, least_privilege

NS = 'steward-system'
PODS = api_path('v1', 'pods', NS)


def weeder_config(**extra: Any) -> Dict[str, Any]:
    config = {'watchDuration': '30s', 'servicesAndDependantSelectors': {
        'etcd-main-client': {'podSelectors': [
            {'matchExpressions': [{'key': 'role', 'operator': 'In', 'values': ['apiserver']}]},
            {'matchLabels': {'role': 'controller-manager'}}]},
        'kube-apiserver': {'podSelectors': [{'matchLabels': {'role': 'scheduler'}}]}}}
    config.update(extra)
    return config


def endpoints(name: str, ready: int) -> Dict[str, Any]:
    subsets = [{'addresses': [{'ip': '10.0.0.%d' % (i + 1)} for i in range(ready)]}] if ready else \
        [{'notReadyAddresses': [{'ip': '10.0.0.1'}]}]
    return {'apiVersion': 'v1', 'kind': 'Endpoints', 'metadata': {'name': name, 'namespace': NS}, 'subsets': subsets}


def endpoint_slice(service: str, ready: bool) -> Dict[str, Any]:
    return {'apiVersion': 'discovery.k8s.io/v1', 'kind': 'EndpointSlice', 'addressType': 'IPv4',
            'metadata': {'name': service + '-abc12', 'namespace': NS, 'labels': {'kubernetes.io/service-name': service}},
            'endpoints': [{'addresses': ['10.0.1.1'], 'conditions': {'ready': ready}}]}


def pod(name: str, role: str, state: str = 'crash', owner: Optional[str] = None) -> Dict[str, Any]:
    waiting = {'waiting': {'reason': 'CrashLoopBackOff'}} if state == 'crash' else {'running': {}}
    meta: Dict[str, Any] = {'name': name, 'namespace': NS, 'labels': {'role': role}}
    if owner:
        meta['ownerReferences'] = [{'apiVersion': 'apps/v1', 'kind': 'ReplicaSet', 'name': owner, 'uid': owner + '-uid',
                                    'controller': True}]
    return {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': meta, 'spec': {'containers': [{'name': 'c', 'image': 'x'}]},
            'status': {'phase': 'Pending' if state == 'pending' else 'Running',
                       'containerStatuses': [] if state == 'pending' else [{'name': 'c', 'state': waiting}]}}


class WeederEnv:
    def __init__(self, kube, tmp_path):
        self.kube = kube
        self.tmp_path = tmp_path
        self.controller: Optional[ControllerProcess] = None

    def start(self, config: Dict[str, Any]) -> ControllerProcess:
        path = self.tmp_path / 'weeder.yaml'
        path.write_text(yaml.safe_dump(config))
        self.controller = ControllerProcess(self.kube.server, str(self.tmp_path), identity='weeder-0', args=[
            '--controllers', 'weeder', '--weeder-config', str(path), '--kube-api-qps', '50', '--kube-api-burst', '100',
            '--lease-name', 'steward-watchdog-weeder-leader'])   # as deployed (weeder-deployment.yaml)
        self.controller.start()
        wait_for(lambda: 'weeder started' in self.controller.log(), 60, 0.5, 'the weeder to start')
        time.sleep(1.5)   # its first lists are the baseline
        return self.controller

    def set_endpoints(self, name: str, ready: int) -> None:
        path = api_path('v1', 'endpoints', NS, name)
        if self.kube.get_or_none(path) is None:
            self.kube.create(api_path('v1', 'endpoints', NS), endpoints(name, ready))
        else:
            self.kube.merge_patch(path, {'subsets': endpoints(name, ready)['subsets']})

    def add(self, *pods: Dict[str, Any]) -> None:
        for item in pods:
            self.kube.create(PODS, item)

    def names(self) -> List[str]:
        return sorted(p['metadata']['name'] for p in self.kube.list(PODS))

    def crash(self, name: str) -> None:
        self.kube.merge_patch(api_path('v1', 'pods', NS, name), {'status': {'containerStatuses': [
            {'name': 'c', 'state': {'waiting': {'reason': 'CrashLoopBackOff'}}}]}})

    def events(self, reason: str) -> List[Dict[str, Any]]:
        return [e for e in self.kube.list(api_path('v1', 'events', NS)) if e['reason'] == reason]

    def deletions(self, service: str, outcome: str = 'deleted') -> float:
        return self.controller.metric('dwd_weeder_pod_deletions_total', {'service': service, 'outcome': outcome}) or 0.0


@pytest.fixture
def weeder(kube, tmp_path):
    env = WeederEnv(kube, tmp_path)
    yield env
    if env.controller is not None:
        env.controller.stop()
        print('--- weeder log\n' + '\n'.join(env.controller.log().splitlines()[-30:]))


def gone(env: WeederEnv, *names: str):
    return lambda: not set(names) & set(env.names())


def test_dwd_w1_w4_w5_ready_deletes_crash_looping_dependants_of_both_selectors(weeder):
    """W1: Endpoints not ready -> ready: the dependant pods in CrashLoopBackOff go within seconds. W5: both
    podSelectors of the service are watched together. W4: pods matching no selector, Running or Pending stay."""
    weeder.set_endpoints('etcd-main-client', 0)
    weeder.add(pod('apiserver-1', 'apiserver'), pod('kcm-1', 'controller-manager'), pod('apiserver-ok', 'apiserver', 'run'),
               pod('apiserver-pending', 'apiserver', 'pending'), pod('other-1', 'etcd'), pod('scheduler-1', 'scheduler'))
    audit = audited(weeder.kube.server)
    controller = weeder.start(weeder_config())
    assert weeder.names() == ['apiserver-1', 'apiserver-ok', 'apiserver-pending', 'kcm-1', 'other-1', 'scheduler-1']
    weeder.set_endpoints('etcd-main-client', 1)
    wait_for(gone(weeder, 'apiserver-1', 'kcm-1'), 30, 0.5, 'the crash-looping dependants deleted')
    time.sleep(1)
    assert weeder.names() == ['apiserver-ok', 'apiserver-pending', 'other-1', 'scheduler-1']
    assert {e['involvedObject']['name'] for e in weeder.events('PodDeleted')} == {'apiserver-1', 'kcm-1'}
    assert weeder.deletions('etcd-main-client') == 2.0
    assert controller.metric('dwd_weeder_triggers_total', {'service': 'etcd-main-client'}) == 1.0
    # Least privilege (issue 19 §5): every call of the weeder is granted by its Role, every grant is a call.
    denied, unused = least_privilege(calls_of(audit, ['steward-controller/', 'kopf/']),
                                     grants_from(['controller/deploy/watchdog/weeder-rbac.yaml'],
                                                 ['steward-watchdog-weeder']), {})
    assert not denied, 'calls the weeder makes without a grant: %s' % denied
    assert not unused, 'grants the weeder does not use: %s' % unused


def test_dwd_w2_w3_window_and_non_transitions(weeder):
    """W2: a pod entering CrashLoopBackOff within watchDuration after the transition is deleted, one entering it after
    is not. W3: ready at start, ready -> ready, ready -> not ready and deleting the Endpoints delete nothing."""
    weeder.set_endpoints('etcd-main-client', 1)                     # ready before the weeder starts: the baseline
    weeder.add(pod('apiserver-1', 'apiserver'))
    weeder.start(weeder_config(watchDuration='5s'))
    weeder.set_endpoints('etcd-main-client', 2)                     # ready -> ready
    weeder.set_endpoints('etcd-main-client', 0)                     # ready -> not ready
    weeder.kube.delete(api_path('v1', 'endpoints', NS, 'etcd-main-client'))
    time.sleep(3)
    assert 'apiserver-1' in weeder.names()

    weeder.set_endpoints('etcd-main-client', 1)                     # created ready: a transition (no ready object before)
    wait_for(gone(weeder, 'apiserver-1'), 30, 0.5, 'the crash-looping pod deleted')
    weeder.add(pod('apiserver-2', 'apiserver', 'run'), pod('apiserver-3', 'apiserver', 'run'))
    weeder.crash('apiserver-2')                                     # within watchDuration
    wait_for(gone(weeder, 'apiserver-2'), 30, 0.5, 'the pod crashing within the window deleted')
    wait_for(lambda: 'weeder for etcd-main-client finished' in weeder.controller.log(), 30, 0.5, 'the window to end')
    weeder.crash('apiserver-3')                                     # after watchDuration
    time.sleep(3)
    assert 'apiserver-3' in weeder.names()


def test_endpoint_slices_and_the_deletion_limit_when_the_upstream_flaps(weeder):
    """EndpointSlices trigger like Endpoints. maxDeletionsPerPod 1: the ReplicaSet's replacement pod crash-looping
    again after the upstream flapped is not deleted a second time within deletionWindow: a Warning instead."""
    weeder.kube.create(api_path('discovery.k8s.io/v1', 'endpointslices', NS), endpoint_slice('kube-apiserver', False))
    weeder.add(pod('scheduler-a1', 'scheduler', owner='scheduler-rs'))
    weeder.start(weeder_config(maxDeletionsPerPod=1, deletionWindow='10m'))
    slice_path = api_path('discovery.k8s.io/v1', 'endpointslices', NS, 'kube-apiserver-abc12')
    weeder.kube.merge_patch(slice_path, {'endpoints': [{'addresses': ['10.0.1.1'], 'conditions': {'ready': True}}]})
    wait_for(gone(weeder, 'scheduler-a1'), 30, 0.5, 'the crash-looping pod deleted (EndpointSlice ready)')

    weeder.add(pod('scheduler-a2', 'scheduler', owner='scheduler-rs'))   # the ReplicaSet's replacement, crashing too
    for ready in (False, True):                                          # the upstream flaps
        weeder.kube.merge_patch(slice_path, {'endpoints': [{'addresses': ['10.0.1.1'], 'conditions': {'ready': ready}}]})
        time.sleep(1)
    wait_for(lambda: weeder.events('PodDeletionLimited'), 30, 0.5, 'the deletion refused by the limit')
    assert 'scheduler-a2' in weeder.names()
    assert weeder.deletions('kube-apiserver') == 1.0 and weeder.deletions('kube-apiserver', 'limited') >= 1
    (event,) = weeder.events('PodDeletionLimited')
    assert event['type'] == 'Warning' and 'ReplicaSet/scheduler-rs was deleted 1 times' in event['message']
    assert weeder.controller.metric('dwd_weeder_triggers_total', {'service': 'kube-apiserver'}) == 2.0
