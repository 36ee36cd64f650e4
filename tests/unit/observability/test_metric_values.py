# -*- coding: utf-8 -*-
"""The new families carry the values the alerts read: the certificate expiry of the anchor's files (real
certificates on a real directory tree), the loops' heartbeat ages, the restore-verification outcome."""

from __future__ import annotations

import datetime
import json
import os
import types

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster import timing
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.naming import full_name
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import Snapshot
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import anchor, pki

from steward_controller.anchor import AnchorOptions
from steward_controller.anchor.loop import AnchorLoop, AnchorMetrics
from steward_controller.core.metrics import Health, Metrics
from steward_controller.core.seed_metrics import MembershipFamilies
from steward_controller.etcd_backup.handlers import StatusReporter
from steward_controller.etcd_backup.metrics import VerificationMetrics


def samples(metrics: Metrics, family: str):
    for fam in text_string_to_metric_families(metrics.render().decode()):
        for s in fam.samples:
            if s.name == family:
                yield s.labels, s.value


def write(root, path, data):
    host = os.path.join(root, path.lstrip('/'))
    os.makedirs(os.path.dirname(host), exist_ok=True)
    with open(host, 'wb') as f:
        f.write(data)


def test_the_anchor_exports_the_expiry_of_every_certificate_it_keeps(tmp_path):
    now = datetime.datetime.now(datetime.timezone.utc)
    ca = pki.new_ca('kubernetes', 'ecdsa-p256', now, 3650)
    leaf = pki.issue(pki.Subject('kube-apiserver', usages=(pki.SERVER,)), ca, 'ecdsa-p256', now, 20)
    root = str(tmp_path)
    write(root, '/etc/kubernetes/pki/ca.crt', ca.cert_pem)
    write(root, '/etc/kubernetes/pki/apiserver.crt', leaf.cert_pem)
    write(root, '/etc/kubernetes/pki/apiserver.key', leaf.key_pem)
    write(root, '/etc/kubernetes/pki/broken.crt', b'not a certificate')
    write(root, '/etc/kubernetes/pki/kept-nowhere.crt', leaf.cert_pem)  # not in the record: not the anchor's
    write(root, anchor.ANCHOR_RECORD, json.dumps({'files': [
        '/etc/kubernetes/pki/ca.crt', '/etc/kubernetes/pki/apiserver.crt', '/etc/kubernetes/pki/apiserver.key',
        '/etc/kubernetes/pki/broken.crt']}).encode())
    metrics = Metrics()
    runtime = types.SimpleNamespace(metrics=metrics, clock=now.timestamp, health=Health())
    options = AnchorOptions(root=root, node_name='cp1', node_ip='10.0.0.1', namespace='steward-system', selector='',
                            interval=10, cleanup=False, etcd_endpoints=(), etcd_peer_port=2380)
    loop = AnchorLoop(runtime, options, AnchorMetrics(metrics.registry))
    loop.certificate_metrics()
    got = {s['path']: v for s, v in samples(metrics, 'steward_certificate_expiry_timestamp_seconds')}
    assert set(got) == {'/etc/kubernetes/pki/ca.crt', '/etc/kubernetes/pki/apiserver.crt'}
    assert abs(got['/etc/kubernetes/pki/apiserver.crt'] - (now.timestamp() + 20 * 86400)) < 2
    assert got['/etc/kubernetes/pki/ca.crt'] > now.timestamp() + 3000 * 86400
    # the anchor stops keeping apiserver.crt (its source removed): its series goes, so no alert stays on it
    write(root, anchor.ANCHOR_RECORD, json.dumps({'files': ['/etc/kubernetes/pki/ca.crt']}).encode())
    loop.certificate_metrics()
    got = {s['path']: v for s, v in samples(metrics, 'steward_certificate_expiry_timestamp_seconds')}
    assert set(got) == {'/etc/kubernetes/pki/ca.crt'}


def test_heartbeat_ages_grow_while_a_loop_does_not_beat():
    clock = [1000.0]
    health = Health(clock=lambda: clock[0])
    metrics = Metrics()
    metrics.watch(health)
    health.beat('machines')
    clock[0] += 90
    health.beat('operator-loop')
    got = {s['loop']: v for s, v in samples(metrics, 'steward_controller_heartbeat_age_seconds')}
    assert got == {'machines': 90.0, 'operator-loop': 0.0}
    clock[0] -= 500   # a clock stepping back never makes an age negative
    assert min(health.ages().values()) == 0.0


def test_restore_verification_outcome_and_restoration_duration():
    metrics = Metrics()
    verification = VerificationMetrics(metrics.registry, clock=lambda: 2000.0)
    verification.observe('ns/main', True, 42, 3.5, 1990.0)
    assert dict((s['resource'], v) for s, v in samples(metrics, 'steward_etcdbackup_restore_verified')) == {'ns/main': 1}
    verification.observe('ns/main', False, None, 1.0, 1995.0)
    assert dict((s['resource'], v) for s, v in samples(metrics, 'steward_etcdbackup_restore_verified')) == {'ns/main': 0}
    counts = {s['succeeded']: v for s, v in samples(metrics, 'etcdbr_restoration_duration_seconds_count')}
    assert counts == {'true': 1, 'false': 1}
    verification.forget('ns/main')
    assert not list(samples(metrics, 'steward_etcdbackup_restore_verified'))


def test_membership_gauges_follow_the_backup_loops_member_list():
    """etcdbr_cluster_size and etcdbr_is_learner from the member list the backup loop reads (read_members)."""
    metrics = Metrics()
    runtime = types.SimpleNamespace(metrics=metrics, clock=lambda: 1000.0)
    body = {'metadata': {'namespace': 'ns', 'name': 'main', 'uid': 'u'}}
    reporter = StatusReporter(runtime, body)
    reporter.members([{'id': 'a1', 'name': 'etcd1', 'is_learner': False},
                      {'id': 'b2', 'name': 'etcd2', 'is_learner': False},
                      {'id': 'c3', 'name': '', 'is_learner': True}])   # a learner that has not started: its id
    assert list(samples(metrics, 'etcdbr_cluster_size')) == [({'etcd': 'ns/main'}, 3.0)]
    learners = {s['member']: v for s, v in samples(metrics, 'etcdbr_is_learner') if s['etcd'] == 'ns/main'}
    assert learners == {'etcd1': 0.0, 'etcd2': 0.0, 'c3': 1.0}
    reporter.members([{'id': 'a1', 'name': 'etcd1', 'is_learner': False},
                      {'id': 'c3', 'name': 'etcd3', 'is_learner': False}])   # etcd2 removed, the learner promoted
    learners = {s['member']: v for s, v in samples(metrics, 'etcdbr_is_learner')}
    assert learners == {'etcd1': 0.0, 'etcd3': 0.0}
    assert list(samples(metrics, 'etcdbr_cluster_size')) == [({'etcd': 'ns/main'}, 2.0)]
    reporter.forget_members()
    assert not list(samples(metrics, 'etcdbr_cluster_size')) and not list(samples(metrics, 'etcdbr_is_learner'))


def test_the_newest_stored_full_snapshot_is_exported_at_the_loops_start():
    """A controller restarted while snapshots fail still says how old the newest backup is (EtcdBackupStale)."""
    metrics = Metrics()
    runtime = types.SimpleNamespace(metrics=metrics, clock=lambda: 1000.0)
    reporter = StatusReporter(runtime, {'metadata': {'namespace': 'ns', 'name': 'main'}})
    reporter.state(0, None)   # an empty store: nothing to say
    assert not list(samples(metrics, 'etcdbr_snapshot_latest_timestamp'))
    base = Snapshot(key='v2/Full-00000000-00000042-1700000000', name=full_name(42, 1700000000), size=10, modified=0.0, status='valid')
    reporter.state(50, base)
    assert list(samples(metrics, 'etcdbr_snapshot_latest_timestamp')) == [({'resource': 'ns/main', 'kind': 'Full'},
                                                                           1700000000.0)]
    assert list(samples(metrics, 'etcdbr_snapshot_latest_revision')) == [({'resource': 'ns/main', 'kind': 'Full'}, 42.0)]
    later = Snapshot(key='v2/Full-00000000-00000060-1700000100', name=full_name(60, 1700000100), size=10, modified=0.0, status='valid')
    reporter.state(60, later)   # after a snapshot of this run: snapshot_taken says it, not the store
    assert list(samples(metrics, 'etcdbr_snapshot_latest_revision')) == [({'resource': 'ns/main', 'kind': 'Full'}, 42.0)]


def test_the_membership_families_count_each_engine_call_by_outcome():
    """MembershipFamilies.observe: a learner add counts in the add histogram and in etcdbr_is_learner_count_total,
    promotions and removals in theirs, a defragmentation by endpoint; a voter add has no seed family. Every
    `succeeded` series of the membership families is there at zero before anything happened (as upstream)."""
    registry = CollectorRegistry()
    families = MembershipFamilies(registry)

    def get(name, **labels):
        return registry.get_sample_value(name, labels)

    assert get('etcdbr_is_learner_count_total', succeeded='false') == 0
    assert get('etcdbr_member_remove_duration_seconds_count', succeeded='true') == 0
    for call in (timing.EtcdCall(timing.ADD_LEARNER, 'e4', True, 5.5), timing.EtcdCall(timing.ADD_LEARNER, 'e5', False, 60),
                 timing.EtcdCall(timing.ADD_MEMBER, 'e6', True, 1), timing.EtcdCall(timing.PROMOTE, 'e4', True, 0.3),
                 timing.EtcdCall(timing.REMOVE, 'e5', True, 0.02),
                 timing.EtcdCall(timing.DEFRAGMENT, 'http://127.0.0.1:2379', False, 2)):
        families.observe(call)
    assert get('etcdbr_is_learner_count_total', succeeded='true') == 1
    assert get('etcdbr_is_learner_count_total', succeeded='false') == 1
    assert get('etcdbr_add_learner_duration_seconds_sum', succeeded='true') == 5.5
    assert get('etcdbr_add_learner_duration_seconds_bucket', succeeded='false', le='60.0') == 1
    assert get('etcdbr_member_promote_duration_seconds_count', succeeded='true') == 1
    assert get('etcdbr_member_remove_duration_seconds_sum', succeeded='true') == 0.02
    assert get('etcdbr_defragmentation_duration_seconds_count', succeeded='false', endpoint='http://127.0.0.1:2379') == 1
