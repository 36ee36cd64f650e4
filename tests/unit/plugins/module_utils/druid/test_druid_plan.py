"""druid/plan.py: druid's decision table (ETCD-18) as one typed action per pass, with the gates beyond druid."""

import dataclasses

from ansible_collections.steward.cluster.plugins.module_utils.druid import components as c
from ansible_collections.steward.cluster.plugins.module_utils.druid import plan as p
from ansible_collections.steward.cluster.plugins.module_utils.druid import scale_down as sd
from ansible_collections.steward.cluster.plugins.module_utils.druid import status as st
from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import parse_etcd
from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro

from support.druid_samples import sample

NOW = 1_800_000_000.0


def lease(holder, ago=1.0, annotations=None, base=None):
    obj = dict(base or {})
    obj['metadata'] = dict(obj.get('metadata') or {}, annotations=dict(annotations or {}))
    obj['spec'] = {'holderIdentity': holder, 'renewTime': format_micro(NOW - ago)} if holder else {}
    return obj


class World:
    """One Etcd's objects as the loop would read them, built from the desired components (as if applied)."""

    def __init__(self, replicas=3, sts_replicas=None, spec_replicas=None, ages=None, ready=None, revisions=None,
                 backups=True, **_snapshot):
        obj = sample(replicas=spec_replicas if spec_replicas is not None else replicas)
        if not backups:
            obj['spec']['backup'] = {'port': 8080}
        self.spec = parse_etcd(obj)
        sts_replicas = replicas if sts_replicas is None else sts_replicas
        applied = c.desired(self.spec, sts_replicas, c.pdb_min_available(sts_replicas, True, sts_replicas))
        self.existing = dict(applied)
        sts = c.statefulset(self.spec, sts_replicas, c.config_checksum(applied[('configmap', c.configmap_name(self.spec))]))
        sts['status'] = {'replicas': sts_replicas, 'readyReplicas': sum(ready or [True] * replicas)}
        self.existing[('statefulset', self.spec.name)] = sts
        names = ['etcd-main-%d' % i for i in range(replicas)]
        ages = ages or [1.0] * replicas
        ready = ready or [True] * replicas
        revisions = revisions or [None] * replicas
        hash_ = c.template_hash_of(sts)
        self.pods = {n: {'metadata': {'name': n, 'annotations': {c.TEMPLATE_HASH: hash_}},
                         'status': {'conditions': [{'type': 'Ready', 'status': 'True' if r else 'False'}]}}
                     for n, r in zip(names, ready)}
        self.leases = {n: lease('%x:%s' % (0xa0 + i, 'Leader' if i == 0 else 'Member'), a,
                                {p.MEMBER_REVISION: str(rv)} if rv is not None else None)
                       for i, (n, a, rv) in enumerate(zip(names, ages, revisions))}
        for name, l in self.leases.items():
            self.existing[('member-lease', name)] = dict(applied.get(('member-lease', name)) or {}, spec=l['spec'])
        self.sts = sts
        self.snaps = {}

    def observed(self):
        return st.Observed(statefulset=self.sts, pods=self.pods, member_leases=self.leases,
                           snapshot_leases=self.snaps,
                           pvcs={'main-etcd-' + n: {'status': {'phase': 'Bound'}} for n in self.pods})

    def run(self, allowed=True, previous=None, options=p.Options(), request=None):
        observed = self.observed()
        thresholds = st.Thresholds(options.unknown_grace, options.notready_grace)
        status = st.compute_status(self.spec, observed, previous, NOW, thresholds)
        return p.plan(self.spec, status, observed, self.existing, NOW, allowed, options, request).action


def world(**kw):
    w = World(**kw)
    backups = kw.get('backups', True)
    verified_ago = kw.get('verified_ago', 60.0)
    if backups:
        ann = {st.VERIFIED_REVISION: str(kw.get('verified_rev', 100)), st.VERIFIED_AT: format_micro(NOW - verified_ago)} \
            if verified_ago is not None else {}
        w.snaps = {'full-snap': lease('100', 60.0, ann), 'delta-snap': lease('120', 10.0)}
    else:
        w.snaps = {}
    return w


def not_ready_for(seconds):
    """A previous status in which members 1 and 2 turned NotReady `seconds` ago."""
    return {'members': [{'name': 'etcd-main-%d' % i, 'status': 'NotReady', 'lastTransitionTime': rfc3339(NOW - seconds)}
                        for i in (1, 2)]}


def test_pink_of_health_is_nothing():
    action = world().run()
    assert isinstance(action, p.Nothing) and not action.changes and action.message.startswith('in sync: 3/3')


def test_missing_components_are_applied_before_the_statefulset():
    w = world()
    del w.existing[('client-service', 'etcd-main-client')]
    action = w.run()
    assert isinstance(action, p.ApplyComponents) and action.keys == (('client-service', 'etcd-main-client'),)
    w.existing[('client-service', 'etcd-main-client')] = c.client_service(w.spec)
    w.sts = None
    action = w.run()
    assert isinstance(action, p.CreateStatefulSet) and action.replicas == 3


def test_spec_actions_wait_for_the_gate():
    w = world()
    del w.existing[('client-service', 'etcd-main-client')]
    assert isinstance(w.run(allowed=False), p.Nothing)


def test_scale_up_one_to_three_as_learners():
    w = world(replicas=1, spec_replicas=3)
    action = w.run()
    # first the bootstrap ConfigMap (initial-cluster of 3) and the new members' Leases with create-as-learner
    assert isinstance(action, p.ApplyComponents)
    assert ('configmap', c.configmap_name(w.spec)) in action.keys and ('member-lease', 'etcd-main-2') in action.keys
    desired = p.plan(w.spec, st.compute_status(w.spec, w.observed(), None, NOW), w.observed(), w.existing, NOW, True).desired
    assert desired[('member-lease', 'etcd-main-1')]['metadata']['annotations'] == {c.CREATE_AS_LEARNER: 'true'}
    assert 'annotations' not in desired[('member-lease', 'etcd-main-0')]['metadata']
    sts = desired[('statefulset', 'etcd-main')]
    assert sts['metadata']['annotations'][c.SCALED_TO_MULTI_NODE] == ''
    # the running member's pod template does not change with the member list
    assert c.template_hash_of(sts) == c.template_hash_of(w.sts)
    for key in action.keys:
        w.existing[key] = desired[key]
    action = w.run()
    assert isinstance(action, p.ScaleUp) and (action.current, action.to) == (1, 3)
    assert action.learners == ('etcd-main-1', 'etcd-main-2') and action.multi_node


TLS = {'tlsCASecretRef': {'name': 'ca-etcd-peer'}, 'serverTLSSecretRef': {'name': 'etcd-peer-server'}}


def _peer_tls_and_three(w):
    """The Etcd of a one-member world gains spec.etcd.peerUrlTls and replicas 3 in one apply."""
    obj = sample(replicas=3)
    obj['spec']['etcd']['peerUrlTls'] = TLS
    w.spec = parse_etcd(obj)


def _desired(w):
    return p.plan(w.spec, st.compute_status(w.spec, w.observed(), None, NOW), w.observed(), w.existing, NOW,
                  True).desired


def test_a_scale_up_that_asks_for_peer_tls_rolls_the_members_onto_it_first():
    """ETCD-42 step 2: the running member goes onto peer TLS (new template, restarted through the rolling plan), the
    scale-up waits naming it until its Lease says tls-enabled "true", and only then adds members."""
    w = world(replicas=1)
    _peer_tls_and_three(w)
    action = w.run()
    # the bootstrap config turns to https peer URLs for the ONE running member: no learner, no member list of 3
    assert isinstance(action, p.ApplyComponents) and ('member-lease', 'etcd-main-1') not in action.keys
    desired = _desired(w)
    config = desired[('configmap', c.configmap_name(w.spec))]['data'][c.CONFIG_KEY]
    assert 'https://etcd-main-0.' in config and 'etcd-main-1' not in config
    assert desired[('statefulset', 'etcd-main')]['spec']['replicas'] == 1
    assert c.SCALED_TO_MULTI_NODE not in desired[('statefulset', 'etcd-main')]['metadata'].get('annotations', {})
    apply(w, action)
    action = w.run()
    # the new pod template (peer TLS volumes, the config's checksum), replicas kept at 1
    assert isinstance(action, p.UpdateStatefulSet) and action.template and 'peer TLS first' in action.message
    w.sts = dict(_desired(w)[('statefulset', 'etcd-main')], status=w.sts['status'])
    w.existing[('statefulset', 'etcd-main')] = w.sts
    assert w.sts['spec']['replicas'] == 1 and action.template == c.template_hash_of(w.sts)
    _snapshot_taken(w, w.run())
    action = w.run()
    assert isinstance(action, p.RestartMember) and action.pod == 'etcd-main-0'
    w.pods['etcd-main-0']['metadata']['annotations'][c.TEMPLATE_HASH] = c.template_hash_of(w.sts)
    # on the new template, its Lease still says "false" (its program has not updated etcd's member yet): waits
    mark(w, ['etcd-main-0'], {c.TLS_ENABLED: 'false'})
    action = w.run()
    assert isinstance(action, p.Postponed) and action.gate == p.PEER_TLS and not action.changes
    assert 'scale-up 1 -> 3 waits for peer TLS' in action.message and 'etcd-main-0 (%s: "false")' % c.TLS_ENABLED \
        in action.message
    mark(w, ['etcd-main-0'], {c.TLS_ENABLED: 'true'})
    action = w.run()
    # now the member list of three and the learners' Leases, then the scale-up
    assert isinstance(action, p.ApplyComponents) and ('member-lease', 'etcd-main-2') in action.keys
    apply(w, action)
    action = w.run()
    assert isinstance(action, p.ScaleUp) and (action.current, action.to) == (1, 3) and action.multi_node


def test_peer_tls_is_not_awaited_without_peer_tls_or_once_every_member_says_so():
    w = world(replicas=1, spec_replicas=3)
    apply(w, w.run())
    assert isinstance(w.run(), p.ScaleUp)          # no peerUrlTls: scales over http
    w = world(replicas=3, spec_replicas=5)
    obj = sample(replicas=5)
    obj['spec']['etcd']['peerUrlTls'] = TLS
    w.spec = parse_etcd(obj)
    w.sts = dict(_desired(w)[('statefulset', 'etcd-main')], status=w.sts['status'])
    w.existing[('statefulset', 'etcd-main')] = w.sts
    for pod in w.pods.values():
        pod['metadata']['annotations'][c.TEMPLATE_HASH] = c.template_hash_of(w.sts)
    mark(w, ['etcd-main-0', 'etcd-main-1'], {c.TLS_ENABLED: 'true'})
    apply(w, w.run())  # the https peer URLs of the three running members
    action = w.run()   # member 2's Lease says nothing yet: named
    assert isinstance(action, p.Postponed) and action.gate == p.PEER_TLS
    assert 'etcd-main-2 (no %s yet)' % c.TLS_ENABLED in action.message and 'etcd-main-0' not in action.message
    mark(w, ['etcd-main-2'], {c.TLS_ENABLED: 'true'})
    apply(w, w.run())
    assert isinstance(w.run(), p.ScaleUp)


def test_scale_up_waits_for_the_current_members():
    w = world(replicas=3, spec_replicas=5, ready=[True, True, False])
    for key, obj in p.plan(w.spec, st.compute_status(w.spec, w.observed(), None, NOW), w.observed(), w.existing, NOW,
                           True).desired.items():
        if key[0] != 'statefulset':
            w.existing[key] = obj
    action = w.run()
    assert isinstance(action, p.Postponed) and action.gate == 'AllMembersReady'


def apply(w, action):
    desired = p.plan(w.spec, st.compute_status(w.spec, w.observed(), None, NOW), w.observed(), w.existing, NOW, True).desired
    assert isinstance(action, p.ApplyComponents)
    for key in action.keys:
        w.existing[key] = desired[key]


def mark(w, names, annotations):
    for n in names:
        w.leases[n]['metadata']['annotations'].update(annotations)


def test_scale_down_and_then_the_superfluous_leases():
    w = world(replicas=3, spec_replicas=1)
    action = w.run()
    assert action.keys == (('configmap', c.configmap_name(w.spec)),)        # initial-cluster of 1 first
    apply(w, action)
    # the going members leave etcd first (the leading member removes them while they run), then the StatefulSet shrinks
    action = w.run()
    assert isinstance(action, p.MarkLeaving) and action.names == ('etcd-main-1', 'etcd-main-2') and action.to == 1
    assert action.at == NOW
    mark(w, action.names, {sd.LEAVING: '1', sd.LEAVING_SINCE: format_micro(action.at)})
    action = w.run()
    assert isinstance(action, p.AwaitRemoval) and action.names == ('etcd-main-1', 'etcd-main-2') and not action.changes
    mark(w, ('etcd-main-2',), {sd.REMOVED: 'a2'})
    action = w.run()
    assert isinstance(action, p.AwaitRemoval) and action.names == ('etcd-main-1',)
    mark(w, ('etcd-main-1',), {sd.REMOVED: 'a1'})
    action = w.run()
    assert isinstance(action, p.ScaleDown) and (action.current, action.to) == (3, 1)
    w.sts['spec']['replicas'] = 1
    for n in ('etcd-main-1', 'etcd-main-2'):
        del w.pods[n]
    action = w.run()
    assert isinstance(action, p.DeleteLeases) and action.names == ('etcd-main-1', 'etcd-main-2')


def test_a_scale_down_the_leading_program_does_not_carry_out_is_overdue_after_the_timeout():
    w = world(replicas=3, spec_replicas=1)
    apply(w, w.run())
    mark(w, ('etcd-main-1', 'etcd-main-2'), {sd.LEAVING: '1', sd.LEAVING_SINCE: format_micro(NOW - 301)})
    action = w.run()
    assert isinstance(action, p.RemoveMembers) and action.changes and action.warning
    assert action.names == ('etcd-main-1', 'etcd-main-2') and int(action.waited) == 301
    assert 'etcd-main-1, etcd-main-2' in action.message and '301s' in action.message and 'timeout 300s' in action.message
    assert isinstance(w.run(options=p.Options(removal_timeout=600.0)), p.AwaitRemoval)
    mark(w, ('etcd-main-2',), {sd.REMOVED: 'a2'})
    action = w.run()
    assert isinstance(action, p.RemoveMembers) and action.names == ('etcd-main-1',)


def test_a_reverted_scale_down_clears_the_marks_of_the_ordinals_kept():
    w = world(replicas=3)
    mark(w, ('etcd-main-1', 'etcd-main-2'), {sd.LEAVING: '1'})
    mark(w, ('etcd-main-2',), {sd.REMOVED: 'a2'})
    action = w.run()
    assert isinstance(action, p.MarkLeaving) and action.names == ('etcd-main-1', 'etcd-main-2') and action.to is None


def test_going_members_not_ready_are_not_restarted_by_the_unready_rule():
    w = world(replicas=3, spec_replicas=1, ready=[True, False, False])
    apply(w, w.run(previous=not_ready_for(600)))
    action = w.run(previous=not_ready_for(600))
    assert isinstance(action, p.MarkLeaving), action   # not DeletePod: ordinals 1 and 2 are going


def test_scale_down_without_leases_for_the_going_ordinals_has_nothing_to_wait_for():
    w = world(replicas=3, spec_replicas=1)
    del w.leases['etcd-main-1'], w.leases['etcd-main-2']
    apply(w, w.run())
    assert isinstance(w.run(), p.ScaleDown)


def test_scale_to_zero_needs_a_fresh_verified_backup():
    w = world(replicas=1, spec_replicas=0, verified_ago=7200.0)
    action = w.run()
    assert isinstance(action, p.Postponed) and action.gate == 'VerifiedBackup' and '7200s old' in action.message
    w = world(replicas=1, spec_replicas=0)
    assert isinstance(w.run(), p.ScaleDown)


def _hibernated(spec_replicas, lease_ages):
    """A world whose StatefulSet was scaled to 0: no pods; the member Leases named in `lease_ages` are left over, last
    renewed that many seconds ago (their members stopped with their pods)."""
    w = world(replicas=3, spec_replicas=spec_replicas)
    w.sts = dict(w.sts, spec=dict(w.sts['spec'], replicas=0), status={'replicas': 0, 'readyReplicas': 0})
    w.existing[('statefulset', 'etcd-main')] = w.sts
    w.pods = {}
    w.leases = {n: l for n, l in w.leases.items() if n in lease_ages}
    for name, ago in lease_ages.items():
        w.leases[name]['spec']['renewTime'] = format_micro(NOW - ago)
    return w


def test_a_hibernated_etcds_left_over_member_leases_are_deleted_not_taken_for_a_quorum_loss():
    # the pods went one by one; the last member's Lease is still there, unrenewed: no quorum-loss wait, no recovery
    w = _hibernated(0, {'etcd-main-0': 400.0})
    previous = {'members': [{'name': 'etcd-main-0', 'status': 'NotReady', 'lastTransitionTime': rfc3339(NOW - 400)}]}
    action = w.run(previous=previous)
    assert isinstance(action, p.DeleteLeases) and action.names == ('etcd-main-0',), action


def test_waking_a_hibernated_etcd_scales_the_statefulset_up_on_the_members_data():
    # woken before the last Lease was deleted (and long after its member stopped): the wake is not held by a quorum
    # "loss" of members that are not meant to run, and no recovery is planned
    w = _hibernated(3, {'etcd-main-0': 4000.0})
    previous = {'members': [{'name': 'etcd-main-0', 'status': 'NotReady', 'lastTransitionTime': rfc3339(NOW - 4000)}]}
    action = w.run(previous=previous)
    assert isinstance(action, p.ScaleUp) and (action.current, action.to) == (0, 3), action
    assert action.learners == ()   # the members come back on their own data: none joins as a learner


def test_a_statefulset_at_zero_while_the_spec_is_not_reconciled_says_how_it_wakes_and_recovers_nothing():
    # the StatefulSet at 0 under an Etcd of 3 (scaled by hand, or woken while the spec gate is closed): no quorum-loss
    # wait or recovery for members not meant to run; the wake is the spec's, and the plan says so
    w = _hibernated(3, {'etcd-main-0': 4000.0})
    previous = {'members': [{'name': 'etcd-main-0', 'status': 'NotReady', 'lastTransitionTime': rfc3339(NOW - 4000)}]}
    action = w.run(allowed=False, previous=previous)
    assert isinstance(action, p.Nothing) and 'the StatefulSet has 0 replicas, spec.replicas 3' in action.message
    assert 'gardener.cloud/operation: reconcile' in action.message
    # an operator's explicit recovery request is still weighed (quorum-loss row)
    action = w.run(allowed=False, previous=previous, options=p.Options(recovery_requested=True))
    assert not isinstance(action, p.Nothing) and action.message.startswith('quorum lost'), action


def _woken_with(w, image=None, peer_tls=False):
    """The hibernated world's Etcd woken (replicas 3) with what changed while it slept."""
    obj = sample(replicas=3)
    if image:
        obj['spec']['etcd']['image'] = image
    if peer_tls:
        obj['spec']['etcd']['peerUrlTls'] = TLS
    w.spec = parse_etcd(obj)


def _wake_plan(w, previous):
    observed = w.observed()
    status = st.compute_status(w.spec, observed, previous, NOW, st.Thresholds(300.0, 300.0))
    return status, p.plan(w.spec, status, observed, w.existing, NOW, True)


def test_waking_onto_a_template_changed_while_hibernated_writes_it_with_the_replicas():
    # no pod runs: the new template does not wait for AllMembersReady, and the members start on it, not on the old
    # one beside a ConfigMap already applied for the new
    w = _hibernated(3, {})
    _woken_with(w, image='quay.io/coreos/etcd:v3.5.17')
    _status, planned = _wake_plan(w, {})
    action = planned.action
    assert isinstance(action, p.ScaleUp) and action.with_template and (action.current, action.to) == (0, 3), action
    assert 'with pod template %s' % c.template_hash_of(planned.desired[('statefulset', 'etcd-main')]) in action.message


def test_waking_onto_an_etcd_the_data_cannot_go_to_is_held_by_the_version_path():
    w = _hibernated(3, {})
    _woken_with(w, image='quay.io/coreos/etcd:v3.3.27')   # a downgrade from the 3.4 the members last ran
    _status, planned = _wake_plan(w, {})
    assert isinstance(planned.action, p.Postponed) and planned.action.gate == 'VersionPath', planned.action
    assert planned.action.message.startswith('waking from 0 replicas waits: ')


def test_waking_with_peer_tls_newly_asked_wakes_over_the_http_peer_urls_the_data_names():
    w = _hibernated(3, {})
    _woken_with(w, peer_tls=True)
    # the members last ran without peer TLS: the status keeps saying so while the StatefulSet has 0 replicas
    status, planned = _wake_plan(w, {'peerUrlTLSEnabled': False})
    assert status['peerUrlTLSEnabled'] is False
    config = planned.desired[('configmap', c.configmap_name(w.spec))]['data'][c.CONFIG_KEY]
    assert 'https://' not in config and 'peer-transport-security' not in config
    assert isinstance(planned.action, p.ScaleUp) and 'over http peer URLs' in planned.action.message, planned.action
    # woken, the members start over http: the ConfigMap they read stays without peer TLS until all of them are Ready,
    # then the components with peer TLS follow (and the template rolls them, row 5)
    for ready, tls in (([True, True, False], False), ([True, True, True], True)):
        woken = world(replicas=3, ready=ready)
        _woken_with(woken, peer_tls=True)
        status, planned = _wake_plan(woken, {'peerUrlTLSEnabled': False})
        config = planned.desired[('configmap', c.configmap_name(woken.spec))]['data'][c.CONFIG_KEY]
        assert ('peer-transport-security' in config) is tls, ready
        if not tls:   # said, and the spec not taken as applied (its generation stays unreconciled)
            assert isinstance(planned.action, p.Postponed) and planned.action.gate == p.PEER_TLS, planned.action
            assert 'not yet: etcd-main-2)' in planned.action.message and not planned.spec_in_sync
    # members that last ran with peer TLS (or an Etcd that never ran) wake with it
    for previous in ({'peerUrlTLSEnabled': True}, {}):
        status, planned = _wake_plan(w, previous)
        assert status['peerUrlTLSEnabled'] is True
        assert 'peer-transport-security' in planned.desired[('configmap', c.configmap_name(w.spec))]['data'][c.CONFIG_KEY]


def _new_image(w):
    obj = sample(replicas=3)
    obj['spec']['etcd']['image'] = 'quay.io/coreos/etcd:v3.5.17'
    w.spec = parse_etcd(obj)


def test_new_image_is_gated_then_written_then_rolled_leader_last():
    w = world(ready=[True, True, False], ages=[1.0, 1.0, 1.0])
    _new_image(w)
    action = w.run()
    assert isinstance(action, p.Postponed) and action.gate == 'AllMembersReady'
    w = world()
    w.snaps['full-snap'] = lease('100', 30 * 3600.0)          # BackupReady False: FullBackupFailed
    _new_image(w)
    action = w.run()
    assert isinstance(action, p.Postponed) and action.gate == 'BackupReady'
    w = world()
    _new_image(w)
    action = w.run()
    assert isinstance(action, p.UpdateStatefulSet) and 'restart one at a time' in action.message
    desired = p.plan(w.spec, st.compute_status(w.spec, w.observed(), None, NOW), w.observed(), w.existing, NOW, True).desired
    w.sts = dict(desired[('statefulset', 'etcd-main')], status=w.sts['status'])
    w.existing[('statefulset', 'etcd-main')] = w.sts
    assert action.template == c.template_hash_of(w.sts) and action.at == NOW
    _snapshot_taken(w, w.run())
    order = []
    for step in range(3):
        action = w.run()
        assert isinstance(action, p.RestartMember), (step, action)
        order.append((action.pod, action.leader))
        w.pods[action.pod]['metadata']['annotations'][c.TEMPLATE_HASH] = c.template_hash_of(w.sts)
    assert order == [('etcd-main-1', False), ('etcd-main-2', False), ('etcd-main-0', True)]
    assert isinstance(w.run(), p.Nothing)


def _snapshot_taken(w, action, revision=130):
    """What the loop and the backup leader's program do for a TakeSnapshot: the request recorded on the StatefulSet,
    a verified full snapshot on the full-snap Lease just after it."""
    assert isinstance(action, p.TakeSnapshot), action
    w.sts['metadata'].setdefault('annotations', {})[p.UPDATE_SNAPSHOT] = p.update_snapshot_annotation(
        action.template, action.requested_at - 1)
    w.snaps['full-snap'] = lease(str(revision), 0.5, {st.VERIFIED_REVISION: str(revision),
                                                      st.VERIFIED_AT: format_micro(NOW - 0.5)})


def _rolling(w):
    """The StatefulSet on a new image (written), its pods on the old template."""
    _new_image(w)
    w.sts = dict(p.plan(w.spec, st.compute_status(w.spec, w.observed(), None, NOW), w.observed(), w.existing, NOW,
                        True).desired[('statefulset', 'etcd-main')], status=w.sts['status'])
    w.existing[('statefulset', 'etcd-main')] = w.sts
    return c.template_hash_of(w.sts)


def test_a_rolling_change_takes_a_verified_full_snapshot_before_the_first_restart():
    w = world()
    target = _rolling(w)
    action = w.run()
    assert isinstance(action, p.TakeSnapshot) and action.changes and action.template == target
    assert action.pods == ('etcd-main-0', 'etcd-main-1', 'etcd-main-2')     # the leader's program first
    assert action.requested_at == NOW and 'etcd-main-full-snap' in action.message
    # asked, no answer yet: nothing restarts, and it is no warning
    asked = p.SnapshotRequest(template=target, requested_at=NOW - 5)
    action = w.run(request=asked)
    assert isinstance(action, p.AwaitSnapshot) and not action.changes and not action.warning
    # answered at revision 130, the Lease still shows the older snapshot (revision 100, 60 s ago): still waiting
    answered = p.SnapshotRequest(template=target, requested_at=NOW - 5, revision=130)
    assert isinstance(w.run(request=answered), p.AwaitSnapshot)
    # the Lease shows it verified: the first follower restarts
    w.snaps['full-snap'] = lease('130', 1.0, {st.VERIFIED_REVISION: '130', st.VERIFIED_AT: format_micro(NOW - 60)})
    action = w.run(request=answered)
    assert isinstance(action, p.RestartMember) and action.pod == 'etcd-main-1'


def test_a_failed_or_late_pre_update_snapshot_restarts_nothing_and_says_why():
    w = world()
    target = _rolling(w)
    failed = p.SnapshotRequest(template=target, requested_at=NOW - 5, error='etcd-main-0: HTTP 500 store unreachable')
    action = w.run(request=failed)
    assert isinstance(action, p.Postponed) and action.gate == p.PRE_UPDATE_SNAPSHOT and not action.changes
    assert 'HTTP 500 store unreachable' in action.message and 'etcd-main-1' in action.message
    late = p.SnapshotRequest(template=target, requested_at=NOW - 601)
    action = w.run(request=late)
    assert isinstance(action, p.Postponed) and action.gate == p.PRE_UPDATE_SNAPSHOT
    assert 'etcd-main-full-snap' in action.message and 'within 600s' in action.message
    answered_late = p.SnapshotRequest(template=target, requested_at=NOW - 31, revision=130)
    action = w.run(request=answered_late, options=p.Options(update_snapshot_timeout=30.0))
    assert isinstance(action, p.Postponed) and 'at revision 130 or newer within 30s' in action.message
    # a request for an older template is not this change's: asked again
    other = p.SnapshotRequest(template='0123456789abcdef', requested_at=NOW - 5, revision=130)
    assert isinstance(w.run(request=other), p.TakeSnapshot)
    # nor one for this template asked before the change's recorded start (an earlier change to it: A -> B -> A)
    w.snaps['full-snap'] = lease('130', 1.0, {st.VERIFIED_REVISION: '130', st.VERIFIED_AT: format_micro(NOW - 60)})
    w.sts['metadata'].setdefault('annotations', {})[p.UPDATE_SNAPSHOT] = p.update_snapshot_annotation(target, NOW - 10)
    earlier = p.SnapshotRequest(template=target, requested_at=NOW - 900, revision=120)
    assert isinstance(w.run(request=earlier), p.TakeSnapshot)
    assert isinstance(w.run(request=dataclasses.replace(earlier, requested_at=NOW - 10)), p.RestartMember)


def test_a_resumed_rolling_change_takes_no_second_snapshot_when_a_newer_one_exists():
    """A restarted controller has no request in memory: the StatefulSet's record of the change's start (or of the
    request) against the full-snap Lease decides."""
    w = world(verified_ago=10.0)
    target = _rolling(w)
    w.sts['metadata'].setdefault('annotations', {})[p.UPDATE_SNAPSHOT] = p.update_snapshot_annotation(target, NOW - 30)
    action = w.run()
    assert isinstance(action, p.RestartMember) and action.pod == 'etcd-main-1'
    # the newest verified snapshot is older than the change: one is taken
    w.sts['metadata']['annotations'][p.UPDATE_SNAPSHOT] = p.update_snapshot_annotation(target, NOW - 5)
    assert isinstance(w.run(), p.TakeSnapshot)
    # a record of another template (an earlier change), or an unreadable one: taken too
    w.sts['metadata']['annotations'][p.UPDATE_SNAPSHOT] = p.update_snapshot_annotation('0123456789abcdef', NOW - 30)
    assert isinstance(w.run(), p.TakeSnapshot)
    w.sts['metadata']['annotations'][p.UPDATE_SNAPSHOT] = '{not json'
    assert p.update_snapshot_record(w.sts) is None and isinstance(w.run(), p.TakeSnapshot)


def test_without_backups_a_rolling_change_restarts_without_a_snapshot():
    w = world(backups=False)
    obj = sample(replicas=3)
    obj['spec']['backup'] = {'port': 8080}
    obj['spec']['etcd']['image'] = 'quay.io/coreos/etcd:v3.5.17'
    w.spec = parse_etcd(obj)
    w.sts = dict(p.plan(w.spec, st.compute_status(w.spec, w.observed(), None, NOW), w.observed(), w.existing, NOW,
                        True).desired[('statefulset', 'etcd-main')], status=w.sts['status'])
    w.existing[('statefulset', 'etcd-main')] = w.sts
    action = w.run()
    assert isinstance(action, p.RestartMember) and action.pod == 'etcd-main-1'


def test_restart_waits_for_a_verified_backup_and_a_pod_in_flight():
    w = world(verified_ago=None)
    _new_image(w)
    w.sts = dict(p.plan(w.spec, st.compute_status(w.spec, w.observed(), None, NOW), w.observed(), w.existing, NOW,
                        True).desired[('statefulset', 'etcd-main')], status=w.sts['status'])
    w.existing[('statefulset', 'etcd-main')] = w.sts
    action = w.run()
    assert isinstance(action, p.Postponed) and action.gate == 'VerifiedBackup'
    w.pods['etcd-main-2']['metadata']['deletionTimestamp'] = '2027-01-15T00:00:00Z'
    action = w.run()     # a pod going (the roll's own restart): the expected pause, no warning
    assert isinstance(action, p.Rolling) and not action.warning and not action.changes


def _unready(w, name):
    w.pods[name]['status']['conditions'] = [{'type': 'Ready', 'status': 'False'}]


def test_the_pause_after_a_restart_is_normal_and_an_untouched_unready_member_is_a_warning():
    """Between two members of a roll the loop waits for the one it restarted: an UpdateInProgress (Normal) Event;
    the same gate held by a member the change has not restarted is an UpdatePostponed Warning (found on the lab:
    every roll posted Warnings between members)."""
    w = world()
    target = _rolling(w)
    _snapshot_taken(w, w.run())
    action = w.run()
    assert isinstance(action, p.RestartMember) and action.pod == 'etcd-main-1'
    w.pods['etcd-main-1']['metadata']['annotations'][c.TEMPLATE_HASH] = target     # back on the new template
    _unready(w, 'etcd-main-1')                                                     # not Ready yet
    action = w.run()
    assert isinstance(action, p.Rolling) and not action.warning and not action.changes
    assert 'etcd-main-2' in action.message and '2 left' in action.message
    w.pods['etcd-main-1']['status']['conditions'] = [{'type': 'Ready', 'status': 'True'}]
    _unready(w, 'etcd-main-2')                     # the restarted one Ready, an untouched one not: not the roll's
    action = w.run()
    assert isinstance(action, p.Postponed) and action.gate == 'AllMembersReady' and action.warning
    w = world(ready=[True, True, False])           # unready before any restart: a Warning, as before
    _rolling(w)
    action = w.run()
    assert isinstance(action, p.Postponed) and action.gate == 'AllMembersReady' and action.warning


def test_long_not_ready_member_pod_is_deleted_while_quorate():
    w = world(ready=[True, True, False])
    prev = {'members': [{'name': 'etcd-main-2', 'status': 'NotReady', 'lastTransitionTime': rfc3339(NOW - 400)}]}
    action = w.run(previous=prev)
    assert isinstance(action, p.DeletePod) and action.pod == 'etcd-main-2' and '2 of 3 members Ready' in action.message
    prev_short = {'members': [{'name': 'etcd-main-2', 'status': 'NotReady', 'lastTransitionTime': rfc3339(NOW - 100)}]}
    assert not isinstance(w.run(previous=prev_short), p.DeletePod)


def test_a_recreated_pod_gets_its_start_and_the_grace_before_it_is_deleted_again():
    """The member's NotReady time runs from its last transition, which a replacement pod does not reset: a pod
    younger than its readiness probe's initial delay plus the grace is left to start (found on the lab: a member
    that lost its disk was deleted every second and never rejoined)."""
    w = world(ready=[True, True, False])
    prev = {'members': [{'name': 'etcd-main-2', 'status': 'NotReady', 'lastTransitionTime': rfc3339(NOW - 400)}]}
    pod = w.pods['etcd-main-2']
    pod.setdefault('spec', {})['containers'] = [
        {'name': 'etcd'}, {'name': 'backup-restore', 'readinessProbe': {'initialDelaySeconds': 15}}]
    pod['metadata']['creationTimestamp'] = rfc3339(NOW - 10)
    assert not isinstance(w.run(previous=prev), p.DeletePod)
    grace = p.Options().notready_grace
    pod['metadata']['creationTimestamp'] = rfc3339(NOW - 15 - grace + 1)
    assert not isinstance(w.run(previous=prev), p.DeletePod)
    pod['metadata']['creationTimestamp'] = rfc3339(NOW - 15 - grace - 1)
    action = w.run(previous=prev)
    assert isinstance(action, p.DeletePod) and action.pod == 'etcd-main-2'


def test_unready_pod_is_kept_without_a_verified_backup_or_over_the_limit():
    w = world(ready=[True, True, False], verified_ago=None)
    prev = {'members': [{'name': 'etcd-main-2', 'status': 'NotReady', 'lastTransitionTime': rfc3339(NOW - 400)}]}
    action = w.run(previous=prev)
    assert isinstance(action, p.Postponed) and action.gate == 'VerifiedBackup'
    w = world(replicas=5, ready=[True, True, True, False, False])
    w.pods['etcd-main-3']['metadata']['deletionTimestamp'] = '2027-01-15T00:00:00Z'
    prev = {'members': [{'name': 'etcd-main-4', 'status': 'NotReady', 'lastTransitionTime': rfc3339(NOW - 400)}]}
    action = w.run(previous=prev)
    assert isinstance(action, p.Wait) and 'limit 1' in action.message


def test_transient_quorum_loss_waits():
    w = world(ready=[True, False, False], ages=[1.0, 90.0, 90.0])
    action = w.run(previous=not_ready_for(30))
    assert isinstance(action, p.Wait) and 'quorum lost: 1 of 3' in action.message and not action.changes


def test_quorum_loss_recovers_from_the_newest_surviving_member():
    w = world(ready=[True, False, False], ages=[1.0, 400.0, 400.0], revisions=[150, 160, 155], verified_rev=100)
    action = w.run()
    assert isinstance(action, p.RecoverQuorum)
    assert (action.source, action.member, action.member_revision, action.snapshot_revision) == (
        'member', 'etcd-main-0', 150, 100)
    assert (action.newest_revision, action.loss_window) == (160, 10) and 'loss window 10' in action.message


def test_quorum_loss_recovers_from_the_verified_snapshot_when_it_is_newer():
    w = world(ready=[True, False, False], ages=[1.0, 400.0, 400.0], revisions=[90, None, None], verified_rev=100)
    action = w.run()
    assert isinstance(action, p.RecoverQuorum) and action.source == 'snapshot' and action.snapshot_revision == 100
    assert action.loss_window == 0


def test_total_loss_from_the_snapshot_and_the_window():
    w = world(ready=[False, False, False], ages=[400.0, 400.0, 400.0], revisions=[130, 131, 131], verified_rev=120)
    action = w.run()
    assert isinstance(action, p.RecoverQuorum) and action.source == 'snapshot' and action.loss_window == 11


def test_quorum_loss_without_a_source_changes_nothing():
    w = world(ready=[True, False, False], ages=[1.0, 400.0, 400.0], backups=False)
    action = w.run()
    assert isinstance(action, p.NeedsRecovery) and not action.changes


def test_pdb_follows_all_members_ready():
    w = world()
    w.existing[('poddisruptionbudget', 'etcd-main')] = c.poddisruptionbudget(w.spec, 2)
    assert isinstance(w.run(allowed=False), p.Nothing)
    w = world(ready=[True, True, False])
    w.existing[('poddisruptionbudget', 'etcd-main')] = c.poddisruptionbudget(w.spec, 2)
    action = w.run(allowed=False)
    assert isinstance(action, p.Nothing)            # 2 Ready members: minAvailable stays 2 (the highest rule)


def test_every_action_kind_has_an_event_reason():
    kinds = [k for k in vars(p).values() if isinstance(k, type) and issubclass(k, p.Action) and k is not p.Action]
    assert len(kinds) == 19
    assert len({k.event for k in kinds}) == len(kinds)


def test_spec_in_sync_only_when_no_spec_action_is_left():
    w = world()
    status = st.compute_status(w.spec, w.observed(), None, NOW)
    assert p.plan(w.spec, status, w.observed(), w.existing, NOW, True).spec_in_sync
    assert not p.plan(w.spec, status, w.observed(), w.existing, NOW, False).spec_in_sync
    del w.existing[('client-service', 'etcd-main-client')]
    assert not p.plan(w.spec, status, w.observed(), w.existing, NOW, True).spec_in_sync


def test_a_new_storage_capacity_does_not_churn_the_statefulset():
    w = world()
    obj = sample(replicas=3, storageCapacity='20Gi')
    w.spec = parse_etcd(obj)
    assert isinstance(w.run(), p.Nothing)


def _rolled_to(w, image):
    """The StatefulSet written with `image` (the pods still on the sample's image, as spec containers)."""
    for pod in w.pods.values():
        pod['spec'] = {'containers': [{'name': 'etcd', 'image': 'quay.io/coreos/etcd:v3.4.34'}]}
    obj = sample(replicas=3)
    obj['spec']['etcd']['image'] = image
    w.spec = parse_etcd(obj)
    w.sts = dict(p.plan(w.spec, st.compute_status(w.spec, w.observed(), None, NOW), w.observed(), w.existing, NOW,
                        True).desired[('statefulset', 'etcd-main')], status=w.sts['status'])
    w.existing[('statefulset', 'etcd-main')] = w.sts


def test_restart_onto_a_tag_that_skips_a_minor_is_postponed_naming_the_path():
    w = world()
    _rolled_to(w, 'quay.io/coreos/etcd:v3.6.1')
    action = w.run()
    assert isinstance(action, p.Postponed) and action.gate == 'VersionPath' and 'skips a minor' in action.message
    w = world()
    _rolled_to(w, 'quay.io/coreos/etcd:v3.5.17')
    _snapshot_taken(w, w.run())
    action = w.run()
    assert isinstance(action, p.RestartMember) and action.pod == 'etcd-main-1'
