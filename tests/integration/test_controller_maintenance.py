# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node maintenance end to end: the real controller process (`--maintenance-config`) against the
Kubernetes API emulator, with notifications received by the local SMTP server and webhook receiver.

* the seed's flatcar example: reboot-needed -> maintenance-required + approval mail and Slack message
  -> approve -> in-maintenance, approval removed, node drained (our drain trigger), reboot-ok set,
  started message -> reboot done -> operational, reboot-ok removed, uncordoned; Events on the Node,
  the seed's metrics (shuffles counted before the drain);
* hot reload: no reconciliation before a good config, a changed ConfigMap applies, a broken one keeps
  the last good config and posts a Warning Event on the ConfigMap;
* maxMaintenance and stagger on 100 nodes all eligible at once, reconciled by two replicas acting at
  the same time (no leader election): the limits hold in every state a watch of the Nodes sees;
* the gate's Lease mutex on its own: exclusion across identities, renewal while held, loss detected.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import socket
import threading
import time
from typing import Any, Dict, List, Optional

import pytest
import yaml

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import Conflict
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import MutexTimeout

from lab.env.controller import ControllerProcess, wait_for

NS = 'steward-system'
CONFIGMAP = api_path('v1', 'configmaps', NS, 'maintenance')
CONFIGMAPS = api_path('v1', 'configmaps', NS)
NODES = api_path('v1', 'nodes')
STATE = 'cloud.sap/maintenance-state'
PROFILE = 'cloud.sap/maintenance-profile'
REBOOT_NEEDED = 'flatcar-linux-update.v1.flatcar-linux.net/reboot-needed'
REBOOT_OK = 'flatcar-linux-update.v1.flatcar-linux.net/reboot-ok'
APPROVED = 'cloud.sap/maintenance-approved'
ARGS = ['--maintenance-config', 'configmap/%s/maintenance' % NS]


def flatcar_config(smtp_address: str, hook: str) -> str:
    """The seed's flatcar example with requeue 1s; approval goes out by mail and Slack, the start by Slack.
    Beyond the seed (which leaves draining to the update agent), the node is drained by our `drain` trigger
    when it enters in-maintenance, before reboot-ok tells the agent to reboot, and uncordoned on the way back."""
    return '''
intervals:
  requeue: 1s
  notify: 5h
instances:
  notify:
  - type: slack
    name: approval_required
    config:
      hook: %(hook)s
      channel: "#maintenance"
      message: |
        The node {{ .Node.Name }} requires maintenance. Manual approval is required.
        Approve to drain and reboot this node by running:
        `kubectl annotate node {{ .Node.Name }} cloud.sap/maintenance-approved=true`
    schedule: {type: periodic, config: {interval: 24h}}
  - type: mail
    name: approval_mail
    config:
      auth: true
      address: "%(smtp)s"
      from: maintenance@example.com
      to: [ops@example.com, oncall@example.com]
      subject: Node maintenance approval
      user: steward
      password: secret
      message: "Node {{ .Node.Name }} is {{ .State }} (profile {{ .Profile.Current }}); approve with cloud.sap/maintenance-approved=true"
    schedule: {type: periodic, config: {interval: 24h}}
  - type: slack
    name: maintenance_started
    config:
      hook: %(hook)s
      channel: "#maintenance"
      message: |
        Maintenance for node {{ .Node.Name }} has started.
    schedule: {type: periodic, config: {interval: 24h}}
  check:
  - type: hasAnnotation
    name: reboot_needed
    config: {key: %(needed)s, value: "true"}
  - type: hasAnnotation
    name: check_approval
    config: {key: cloud.sap/maintenance-approved, value: "true"}
  trigger:
  - type: alterAnnotation
    name: reboot-ok
    config: {key: %(ok)s, value: "true"}
  - type: alterAnnotation
    name: remove_approval
    config: {key: cloud.sap/maintenance-approved, remove: true}
  - type: alterAnnotation
    name: remove_reboot_ok
    config: {key: %(ok)s, remove: true}
  - type: drain
    name: drain
    config: {timeout: 20s, evictionTimeout: 10s, force: true}
  - type: uncordon
    name: uncordon
profiles:
- name: flatcar
  operational:
    transitions:
    - check: reboot_needed
      next: maintenance-required
  maintenance-required:
    notify: approval_required && approval_mail
    transitions:
    - check: check_approval
      trigger: remove_approval
      next: in-maintenance
  in-maintenance:
    enter: drain && reboot-ok
    notify: maintenance_started
    transitions:
    - check: "!reboot_needed"
      trigger: remove_reboot_ok && uncordon
      next: operational
''' % {'hook': hook, 'smtp': smtp_address, 'needed': REBOOT_NEEDED, 'ok': REBOOT_OK}


# --- helpers ----------------------------------------------------------------------------------------

def put_config(kube: KubeClient, text: str) -> Dict[str, Any]:
    if kube.get_or_none(CONFIGMAP) is None:
        return kube.create(CONFIGMAPS, {'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': 'maintenance', 'namespace': NS},
                                        'data': {'maintenance.yaml': text}})
    return kube.merge_patch(CONFIGMAP, {'data': {'maintenance.yaml': text}})


def add_node(kube: KubeClient, name: str, labels: Optional[Dict[str, str]] = None,
             annotations: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    return kube.create(NODES, {'apiVersion': 'v1', 'kind': 'Node',
                               'metadata': {'name': name, 'labels': dict(labels or {}), 'annotations': dict(annotations or {})},
                               'status': {'conditions': [{'type': 'Ready', 'status': 'True'}],
                                          'images': [{'names': ['registry.example/big:%d' % i], 'sizeBytes': 1} for i in range(3)]}})


def node(kube: KubeClient, name: str) -> Dict[str, Any]:
    return kube.get(api_path('v1', 'nodes', name=name))


def labels(kube: KubeClient, name: str) -> Dict[str, str]:
    return node(kube, name)['metadata'].get('labels') or {}


def annotations(kube: KubeClient, name: str) -> Dict[str, str]:
    return node(kube, name)['metadata'].get('annotations') or {}


def pods_on(kube: KubeClient, name: str) -> List[str]:
    return sorted(p['metadata']['name'] for p in kube.list(api_path('v1', 'pods'), field_selector='spec.nodeName=%s' % name))


def annotate(kube: KubeClient, name: str, values: Dict[str, Optional[str]]) -> None:
    kube.merge_patch(api_path('v1', 'nodes', name=name), {'metadata': {'annotations': values}})


def events(kube: KubeClient, reason: str, name: Optional[str] = None, kind: Optional[str] = None) -> List[Dict[str, Any]]:
    return [e for e in kube.list(api_path('v1', 'events', NS)) if e['reason'] == reason
            and (name is None or e['involvedObject']['name'] == name) and (kind is None or e['involvedObject']['kind'] == kind)]


@pytest.fixture
def controllers(kube, tmp_path):
    """Start replicas with `start(identity, *extra_args)`; each is stopped and its log checked after the test."""
    started: List[ControllerProcess] = []

    def start(identity: str = 'replica-0', *extra: str) -> ControllerProcess:
        proc = ControllerProcess(kube.server, str(tmp_path / identity), identity=identity, args=ARGS + list(extra)).start()
        started.append(proc)
        return proc

    yield start
    with concurrent.futures.ThreadPoolExecutor(max(1, len(started))) as pool:   # all stop (in parallel) before any assertion
        codes = list(pool.map(lambda proc: proc.stop(), started))
    for proc, code in zip(started, codes):
        assert code == 0, proc.log()[-3000:]
        assert '"level": "ERROR"' not in proc.log(), proc.log()[-4000:]


# --- the seed's flatcar example -------------------------------------------------------------------

def add_workload(kube: KubeClient, node_name: str) -> None:
    """Pods on the node: one of a Deployment (2 replicas, through its ReplicaSet), one of a DaemonSet
    (4 ready), one of a StatefulSet (3 replicas), one without owner (not counted), and one elsewhere."""
    ns = 'apps'
    deployment = kube.create(api_path('apps/v1', 'deployments', ns), {
        'apiVersion': 'apps/v1', 'kind': 'Deployment', 'metadata': {'name': 'web', 'namespace': ns},
        'spec': {'replicas': 2, 'selector': {'matchLabels': {'app': 'web'}}}})
    kube.create(api_path('apps/v1', 'replicasets', ns), {
        'apiVersion': 'apps/v1', 'kind': 'ReplicaSet',
        'metadata': {'name': 'web-5d8f', 'namespace': ns, 'ownerReferences': [
            {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'web', 'uid': deployment['metadata']['uid'], 'controller': True}]},
        'spec': {'replicas': 2, 'selector': {'matchLabels': {'app': 'web'}}}})
    kube.create(api_path('apps/v1', 'daemonsets', ns), {
        'apiVersion': 'apps/v1', 'kind': 'DaemonSet', 'metadata': {'name': 'agent', 'namespace': ns},
        'spec': {'selector': {'matchLabels': {'app': 'agent'}}}, 'status': {'numberReady': 4}})
    kube.create(api_path('apps/v1', 'statefulsets', ns), {
        'apiVersion': 'apps/v1', 'kind': 'StatefulSet', 'metadata': {'name': 'db', 'namespace': ns},
        'spec': {'replicas': 3, 'selector': {'matchLabels': {'app': 'db'}}}})
    pods = [('web-5d8f-abcde', 'ReplicaSet', 'web-5d8f', node_name), ('agent-x1', 'DaemonSet', 'agent', node_name),
            ('db-0', 'StatefulSet', 'db', node_name), ('bare', None, None, node_name),
            ('web-5d8f-zzzzz', 'ReplicaSet', 'web-5d8f', 'elsewhere')]
    for name, kind, owner, where in pods:
        meta: Dict[str, Any] = {'name': name, 'namespace': ns}
        if kind:
            meta['ownerReferences'] = [{'apiVersion': 'apps/v1', 'kind': kind, 'name': owner, 'uid': 'u-' + owner, 'controller': True}]
        kube.create(api_path('v1', 'pods', ns), {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': meta,
                                                 'spec': {'nodeName': where, 'containers': [{'name': 'c', 'image': 'x'}]}})


def test_flatcar_example_end_to_end(kube, controllers, smtp_server, webhook_server):
    hook = webhook_server.url + '/services/T000/B000/XXXX'
    put_config(kube, flatcar_config(smtp_server.address, hook))
    add_node(kube, 'flatcar-1', {PROFILE: 'flatcar'}, {REBOOT_NEEDED: 'true'})
    add_node(kube, 'plain-1')          # no profile: the default profile, which does nothing
    add_workload(kube, 'flatcar-1')
    proc = controllers()

    # reboot-needed -> maintenance-required; the approval goes out once by mail and once to Slack
    wait_for(lambda: labels(kube, 'flatcar-1').get(STATE) == 'maintenance-required', 30, 0.1, 'maintenance-required')
    mails = smtp_server.wait_for(1, timeout=15)
    posts = webhook_server.wait_for(1, timeout=15)
    assert not node(kube, 'flatcar-1').get('spec', {}).get('unschedulable')
    assert mails[0].rcpt_tos == ['ops@example.com', 'oncall@example.com']
    assert mails[0].auth_user == 'steward' and mails[0].subject == 'Node maintenance approval'
    assert mails[0].body.strip() == ('Node flatcar-1 is maintenance-required (profile flatcar); '
                                     'approve with cloud.sap/maintenance-approved=true')
    assert posts[0].path == '/services/T000/B000/XXXX' and posts[0].json['channel'] == '#maintenance'
    assert posts[0].text.startswith('The node flatcar-1 requires maintenance. Manual approval is required.')
    assert '`kubectl annotate node flatcar-1 cloud.sap/maintenance-approved=true`' in posts[0].text
    assert labels(kube, 'plain-1').get(STATE) == 'operational'
    data = json.loads(annotations(kube, 'flatcar-1')['cloud.sap/maintenance-data'])
    assert data['Profiles']['flatcar']['Current'] == 'maintenance-required'
    time.sleep(2.5)   # two more requeues: the 24h schedule sends nothing again, nothing moves without approval
    assert len(smtp_server.messages) == 1 and len(webhook_server.posts()) == 1
    assert labels(kube, 'flatcar-1').get(STATE) == 'maintenance-required'
    # the time-in-state gauge NodeMaintenanceStuck reads: the node's wait for approval, per profile
    age = wait_for(lambda: proc.metric('steward_maintenance_state_age_seconds',
                                       {'profile': 'flatcar', 'state': 'maintenance-required'}), 10, 0.2, 'state age')
    assert 0.0 < age < 60.0   # refreshed on the scheduler's ticks (at most 5 s apart)

    # approve -> in-maintenance, approval removed; entering it drains the node, then sets reboot-ok; the start is announced
    annotate(kube, 'flatcar-1', {APPROVED: 'true'})
    wait_for(lambda: labels(kube, 'flatcar-1').get(STATE) == 'in-maintenance', 15, 0.1, 'in-maintenance')
    wait_for(lambda: annotations(kube, 'flatcar-1').get(REBOOT_OK) == 'true', 30, 0.1, 'reboot-ok after the drain')
    assert APPROVED not in annotations(kube, 'flatcar-1')
    assert node(kube, 'flatcar-1')['spec'].get('unschedulable') is True
    assert pods_on(kube, 'flatcar-1') == ['agent-x1']     # DaemonSet pods stay; the unowned one went because of force
    assert pods_on(kube, 'elsewhere') == ['web-5d8f-zzzzz']
    started = webhook_server.wait_for(2, timeout=15)[1]
    assert started.text.strip() == 'Maintenance for node flatcar-1 has started.'

    # the update agent rebooted the node -> operational, reboot-ok removed, uncordoned
    annotate(kube, 'flatcar-1', {REBOOT_NEEDED: None})
    wait_for(lambda: labels(kube, 'flatcar-1').get(STATE) == 'operational', 15, 0.1, 'operational')
    assert REBOOT_OK not in annotations(kube, 'flatcar-1')
    assert 'unschedulable' not in node(kube, 'flatcar-1').get('spec', {})
    # the controller's watch of the Nodes leaves no marks of its own (kopf stores nothing for event handlers)
    assert sorted(annotations(kube, 'flatcar-1')) == ['cloud.sap/maintenance-data']
    time.sleep(1.5)
    assert len(smtp_server.messages) == 1 and len(webhook_server.posts()) == 2

    # every transition and notification is an Event on the Node
    transitions = sorted(e['message'] for e in events(kube, 'MaintenanceTransition', 'flatcar-1', 'Node'))
    assert transitions == ['profile flatcar: in-maintenance -> operational', 'profile flatcar: maintenance-required -> in-maintenance',
                           'profile flatcar: operational -> maintenance-required']
    notified = sorted(e['message'] for e in events(kube, 'MaintenanceNotification', 'flatcar-1'))
    assert notified == ['profile flatcar: notification approval_mail sent (state maintenance-required)',
                        'profile flatcar: notification approval_required sent (state maintenance-required)',
                        'profile flatcar: notification maintenance_started sent (state in-maintenance)']
    assert not events(kube, 'MaintenanceError')
    assert events(kube, 'MaintenanceConfigLoaded', 'maintenance', 'ConfigMap')

    # metrics: transitions by profile, the seed's shuffle metrics for the pods of the node that entered maintenance
    for source, target in (('operational', 'maintenance-required'), ('maintenance-required', 'in-maintenance'),
                           ('in-maintenance', 'operational')):
        assert proc.metric('maintenance_controller_transitions_total', {'profile': 'flatcar', 'from': source, 'to': target}) == 1.0
    assert proc.metric('maintenance_controller_shuffle_count', {'owner': 'deployment_web', 'profile': 'flatcar'}) == 1.0
    assert proc.metric('maintenance_controller_shuffles_per_replica', {'owner': 'deployment_web', 'profile': 'flatcar'}) == 0.5
    assert proc.metric('maintenance_controller_shuffles_per_replica', {'owner': 'daemon_set_agent', 'profile': 'flatcar'}) == 0.25
    assert proc.metric('maintenance_controller_shuffles_per_replica', {'owner': 'stateful_set_db', 'profile': 'flatcar'}) == \
        pytest.approx(1 / 3)
    assert proc.metric('maintenance_controller_notifications_total', {'profile': 'flatcar', 'instance': 'approval_mail'}) == 1.0
    assert proc.metric('steward_maintenance_config_loaded') == 1.0
    assert proc.metric('steward_maintenance_nodes', {'state': 'operational'}) == 2.0
    assert proc.metric('steward_maintenance_reconcile_duration_seconds_count') > 5


# --- hot reload -----------------------------------------------------------------------------------

def label_config(check_label: str, requeue: str = '1s') -> str:
    return yaml.safe_dump({
        'intervals': {'requeue': requeue},
        'instances': {'check': [{'type': 'hasLabel', 'name': 'wanted', 'config': {'key': check_label, 'value': 'yes'}}]},
        'profiles': [{'name': 'p', 'operational': {'transitions': [{'check': 'wanted', 'next': 'maintenance-required'}]}}]})


BROKEN = '''
intervals: {requeue: 1s}
instances:
  check:
  - {type: hasLabl, name: wanted, config: {key: c, value: "yes"}}
profiles:
- name: p
  operational: {transitions: [{check: wanted, next: maintenance-required}]}
'''


def test_config_hot_reload_and_broken_configs(kube, controllers):
    put_config(kube, BROKEN)
    add_node(kube, 'n1', {PROFILE: 'p', 'b': 'yes'})
    proc = controllers()

    # before any good config: a Warning Event on the ConfigMap, the metric, and no node touched
    warning = wait_for(lambda: events(kube, 'MaintenanceConfigInvalid', 'maintenance', 'ConfigMap'), 30, 0.2, 'the Warning Event')
    assert warning[0]['type'] == 'Warning'
    assert 'instances.check[0] (name "wanted"): unknown plugin type "hasLabl"' in warning[0]['message']
    assert 'no node is reconciled until a version loads' in warning[0]['message']
    assert proc.metric('steward_maintenance_config_loaded') == 0.0
    time.sleep(1.5)
    assert STATE not in labels(kube, 'n1')

    # a good config: n1 (label b) does not match check label a, it is only labelled operational
    put_config(kube, label_config('a'))
    wait_for(lambda: labels(kube, 'n1').get(STATE) == 'operational', 15, 0.1, 'n1 reconciled')
    assert proc.metric('steward_maintenance_config_loaded') == 1.0
    time.sleep(1.5)
    assert labels(kube, 'n1').get(STATE) == 'operational'

    # hot reload: the profile now checks label b
    good = put_config(kube, label_config('b'))['metadata']['resourceVersion']
    wait_for(lambda: labels(kube, 'n1').get(STATE) == 'maintenance-required', 15, 0.1, 'the new config applied')
    assert len(events(kube, 'MaintenanceConfigLoaded', 'maintenance', 'ConfigMap')) == 2

    # a broken version: Warning Event, metric 0, the last good config (check b) keeps working for new nodes
    put_config(kube, BROKEN)
    wait_for(lambda: len(events(kube, 'MaintenanceConfigInvalid', 'maintenance')) == 2, 15, 0.1, 'the second Warning Event')
    assert len([e for e in events(kube, 'MaintenanceConfigInvalid') if 'version %s stays active' % good in e['message']]) == 1
    assert proc.metric('steward_maintenance_config_loaded') == 0.0
    add_node(kube, 'n2', {PROFILE: 'p', 'b': 'yes'})
    add_node(kube, 'n3', {PROFILE: 'p', 'c': 'yes'})
    wait_for(lambda: labels(kube, 'n2').get(STATE) == 'maintenance-required', 15, 0.1, 'n2 under the last good config')
    wait_for(lambda: labels(kube, 'n3').get(STATE) == 'operational', 15, 0.1, 'n3 under the last good config')
    time.sleep(2.5)   # the broken version is reported once, not at every poll
    assert len(events(kube, 'MaintenanceConfigInvalid', 'maintenance')) == 2
    assert proc.metric('steward_maintenance_config_loads_total', {'outcome': 'invalid'}) == 2.0
    assert proc.metric('steward_maintenance_config_loads_total', {'outcome': 'loaded'}) == 2.0


# --- the limits under concurrency -----------------------------------------------------------------

LIMITS = '''
intervals: {requeue: 1s}
instances:
  check:
  - {type: hasLabel, name: wants, config: {key: wants-maintenance, value: "yes"}}
  - {type: maxMaintenance, name: max3, config: {max: 3}}
  - {type: stagger, name: two_per_hour, config: {duration: 1h, leaseName: stagger, leaseNamespace: %s, parallel: 2}}
profiles:
- name: limited
  operational: {transitions: [{check: wants && max3, next: in-maintenance}]}
- name: staggered
  operational: {transitions: [{check: wants && two_per_hour, next: maintenance-required}]}
''' % NS


class NodeWatch:
    """Every state the cluster's Nodes go through, in order: a watch stream applied to a local copy, with
    the counts checked after each event (every write is an observation, not only those a poll catches)."""

    def __init__(self, url: str):
        self.url = url
        self.nodes: Dict[str, Dict[str, Any]] = {}
        self.events = 0
        self.highest = {'in-maintenance': 0, 'staggered-required': 0}
        self.response: Any = None
        self.thread = threading.Thread(target=self.run, daemon=True)

    def counts(self) -> Dict[str, int]:
        maintained = sum(1 for n in self.nodes.values() if (n['metadata'].get('labels') or {}).get(STATE) == 'in-maintenance')
        staggered = 0
        for n in self.nodes.values():
            raw = (n['metadata'].get('annotations') or {}).get('cloud.sap/maintenance-data')
            if raw and json.loads(raw)['Profiles'].get('staggered', {}).get('Current') == 'maintenance-required':
                staggered += 1
        return {'in-maintenance': maintained, 'staggered-required': staggered}

    def close(self) -> None:
        """End the stream at once (closing the response does not wake a blocked read; the emulator waits for open streams)."""
        sock = getattr(getattr(getattr(self.response, 'raw', None), 'connection', None), 'sock', None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self.thread.join(5)

    def run(self) -> None:
        import requests
        self.response = requests.get(self.url + NODES, params={'watch': 'true'}, stream=True, timeout=(5, 120))
        with contextlib.suppress(requests.RequestException, AttributeError, ValueError):
            for line in self.response.iter_lines():
                if not line:
                    continue
                event = json.loads(line)
                name = event['object']['metadata']['name']
                if event['type'] == 'DELETED':
                    self.nodes.pop(name, None)
                else:
                    self.nodes[name] = event['object']
                self.events += 1
                for key, value in self.counts().items():
                    self.highest[key] = max(self.highest[key], value)


def test_max_maintenance_and_stagger_hold_with_100_nodes_and_two_replicas(kube, controllers, request):
    put_config(kube, LIMITS)
    watch = NodeWatch(kube.server.url)
    watch.thread.start()
    request.addfinalizer(watch.close)
    time.sleep(0.3)
    for i in range(100):   # two profiles per node: maxMaintenance -> in-maintenance, stagger -> maintenance-required
        add_node(kube, 'node-%03d' % i, {PROFILE: 'limited--staggered', 'wants-maintenance': 'yes'})
    # Two replicas that both act (no leader election): only the gate's Lease mutex keeps them apart.
    replicas = [controllers('replica-%d' % i, '--no-leader-election', '--maintenance-workers', '8') for i in range(2)]

    def settled() -> bool:
        assert watch.highest['in-maintenance'] <= 3 and watch.highest['staggered-required'] <= 2, watch.highest
        states = [(n['metadata'].get('labels') or {}).get(STATE) for n in watch.nodes.values()]
        return len(states) == 100 and all(states) and watch.counts() == {'in-maintenance': 3, 'staggered-required': 2}

    wait_for(settled, 90, 0.2, 'every node reconciled and the limits reached')
    time.sleep(2.5)   # more requeues by both replicas change nothing
    assert watch.highest == {'in-maintenance': 3, 'staggered-required': 2}, watch.highest
    assert watch.events > 200
    listed = kube.list(NODES)
    profiles = {n['metadata']['name']: json.loads(n['metadata']['annotations']['cloud.sap/maintenance-data'])['Profiles']
                for n in listed}
    maintained = sorted(name for name, p in profiles.items() if p['limited']['Current'] == 'in-maintenance')
    required = sorted(name for name, p in profiles.items() if p['staggered']['Current'] == 'maintenance-required')
    assert len(maintained) == 3 and len(required) == 2
    # the label shows the most critical state of the two profiles
    expected = {n: 'in-maintenance' if n in maintained else 'maintenance-required' if n in required else 'operational'
                for n in profiles}
    assert {n['metadata']['name']: n['metadata']['labels'][STATE] for n in listed} == expected

    # the stagger Leases name exactly the two nodes whose staggered profile passed
    holders = sorted(kube.get(api_path('coordination.k8s.io/v1', 'leases', NS, 'stagger-%d' % i))['spec']['holderIdentity']
                     for i in range(2))
    assert holders == required
    # both replicas reconciled; the transitions they wrote add up to the limits, each one an Event
    written = [sum(p.metric('maintenance_controller_transitions_total', {'profile': prof}) or 0 for prof in ('limited', 'staggered'))
               for p in replicas]
    assert sum(written) == 5, written
    reconciles = [p.metric('steward_maintenance_reconcile_duration_seconds_count') or 0 for p in replicas]
    assert all(count >= 100 for count in reconciles), reconciles
    assert len(events(kube, 'MaintenanceTransition')) == 5
    assert not events(kube, 'MaintenanceError')
    # each gated transition took the gate's Lease (released after each stay, so every entry is a new acquisition)
    gate = kube.get(api_path('coordination.k8s.io/v1', 'leases', NS, 'steward-maintenance-gate'))
    assert gate['spec']['leaseTransitions'] >= 5 and gate['spec'].get('holderIdentity') in (None, '', 'replica-0', 'replica-1')


# --- the gate on its own ---------------------------------------------------------------------------

def test_gate_excludes_other_replicas_renews_and_notices_loss(kube):
    from steward_controller.maintenance.gate import MaintenanceGate
    a = MaintenanceGate(kube, NS, 'replica-a', ttl=1.5, wait=1.0)
    b = MaintenanceGate(kube, NS, 'replica-b', ttl=1.5, wait=0.5)
    inside = threading.Event()
    release = threading.Event()
    holds = []

    def hold_a() -> None:
        with a.enter() as hold:
            holds.append(hold)
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=hold_a)
    thread.start()
    assert inside.wait(5)
    time.sleep(2.0)   # longer than the ttl: only renewals keep the Lease
    with pytest.raises(MutexTimeout):
        with b.enter():
            pass
    # another worker of the same replica: the holder is inside for longer than `wait` (a drain), so it gives up at once
    started = time.monotonic()
    with pytest.raises(MutexTimeout, match='has been held by another worker of this replica'):
        with a.enter():
            pass
    assert time.monotonic() - started < 0.5
    lease_path = api_path('coordination.k8s.io/v1', 'leases', NS, 'steward-maintenance-gate')
    assert kube.get(lease_path)['spec']['holderIdentity'] == 'replica-a'
    assert holds[0].renewals >= 1 and holds[0].lost == ''

    # someone takes the Lease over: the next renewal notices
    for attempt in range(20):   # the renewals write too: retry on a conflict
        lease = kube.get(lease_path)
        try:
            kube.merge_patch(lease_path, {'spec': {'holderIdentity': 'intruder'}}, resource_version=lease['metadata']['resourceVersion'])
            break
        except Conflict:
            time.sleep(0.05)
    wait_for(lambda: holds[0].lost, 5, 0.05, 'the loss noticed')
    assert 'intruder' in holds[0].lost
    release.set()
    thread.join(10)
    assert not thread.is_alive()
    # after the intruder's claim runs out, b gets in
    kube.merge_patch(lease_path, {'spec': {'holderIdentity': None}})
    with b.enter() as hold:
        assert kube.get(lease_path)['spec']['holderIdentity'] == 'replica-b' and hold.lost == ''
    assert not kube.get(lease_path)['spec'].get('holderIdentity')
