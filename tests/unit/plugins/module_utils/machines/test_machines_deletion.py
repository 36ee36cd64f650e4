"""A deleting machine: typed deletion steps, when a drain is forced, and one drain round at a time
(inventory §2 acceptance 6-8, machines.md §(f)4)."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Code, Retry
from ansible_collections.steward.cluster.plugins.module_utils.machines.config import Settings, machine_timeouts
from ansible_collections.steward.cluster.plugins.module_utils.machines.deletion import (
    DeletionView, after_drain, after_step, after_termination_mark_failed, current_step, force_reason, plan_deletion,
    termination_patch)
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import Step
from ansible_collections.steward.cluster.plugins.module_utils.machines.drain import (
    DrainInputs, DrainMemory, DrainPlan, plan_round, record_eviction)
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import VM, VMState
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import DriverError
from ansible_collections.steward.cluster.plugins.module_utils.machines.inventory import Lookup
from ansible_collections.steward.cluster.plugins.module_utils.machines.plan import ClusterAction

T0 = 1_700_000_000.0
TIMEOUTS = machine_timeouts({}, Settings())
S = Settings()


def ts(t):
    return format_micro(t)[:19] + 'Z'


def deleting(step=None, phase='Terminating', node='n1', labels=None, deleted=T0):
    md = {'name': 'm1', 'namespace': 'ns', 'uid': 'u1', 'creationTimestamp': ts(T0 - 3600),
          'deletionTimestamp': ts(deleted), 'finalizers': ['machine.sapcloud.io/operator'],
          'labels': dict({'node': node} if node else {}, **(labels or {}))}
    status = {'currentStatus': {'phase': phase}}
    if step:
        status['lastOperation'] = {'type': 'Delete', 'state': 'Processing', 'description': step.value, 'step': step.key}
    return {'metadata': md, 'spec': {'providerID': 'aws:///r/i-1'}, 'status': status}


def node(ready='True', since=T0):
    return {'metadata': {'name': 'n1'}, 'status': {'conditions': [
        {'type': 'Ready', 'status': ready, 'lastTransitionTime': ts(since)}]}}


def dview(m, the_node=None, lookup=None):
    return DeletionView(m, the_node, lookup, TIMEOUTS)


def step_of(plan):
    return ((plan.status or {}).get('lastOperation') or {}).get('step')


# --- the steps -----------------------------------------------------------------------------------------

def test_deletion_starts_with_terminating_and_get_vm_status():
    plan = plan_deletion(dview(deleting(phase='Running')), T0)
    assert plan.status['currentStatus']['phase'] == 'Terminating'
    assert step_of(plan) == 'GetVMStatus' and plan.status['lastOperation']['type'] == 'Delete'


@pytest.mark.parametrize('lookup, expected', [
    (Lookup(Code.OK, VM('aws:///r/i-1', 'n1'), 1), 'InitiateDrain'),
    (Lookup(Code.NOT_FOUND), 'InitiateDrain'),                     # MCM: go on to drain, then delete
    (Lookup(Code.UNAVAILABLE), 'GetVMStatus'),                     # retried
])
def test_get_vm_status(lookup, expected):
    plan = plan_deletion(dview(deleting(Step.GET_VM_STATUS), lookup=lookup), T0)
    assert step_of(plan) == expected


def test_a_machine_written_by_mcm_without_a_step_restarts_at_get_vm_status():
    m = deleting()
    m['status']['lastOperation'] = {'description': 'Initiate node drain'}    # text only: never parsed
    assert current_step(m) == Step.GET_VM_STATUS


@pytest.mark.parametrize('step, kind', [
    (Step.INITIATE_DRAIN, ClusterAction.DRAIN),
    (Step.DELETE_VOLUME_ATTACHMENTS, ClusterAction.DELETE_VOLUME_ATTACHMENTS),
    (Step.INITIATE_NODE_DELETION, ClusterAction.DELETE_NODE),
    (Step.INITIATE_FINALIZER_REMOVAL, ClusterAction.REMOVE_FINALIZER),
])
def test_each_step_names_its_action(step, kind):
    plan = plan_deletion(dview(deleting(step), node()), T0)
    assert plan.action == kind and plan.step == step


def test_vm_deletion_is_a_driver_call_and_not_found_counts_as_done():
    plan = plan_deletion(dview(deleting(Step.INITIATE_VM_DELETION)), T0)
    assert plan.call == Call.DELETE
    view = dview(deleting(Step.INITIATE_VM_DELETION))
    assert step_of(after_step(view, Step.INITIATE_VM_DELETION, None, T0)) == 'InitiateNodeDeletion'
    assert step_of(after_step(view, Step.INITIATE_VM_DELETION, DriverError(Code.NOT_FOUND, 'gone'), T0)) == 'InitiateNodeDeletion'
    retry = after_step(view, Step.INITIATE_VM_DELETION, DriverError(Code.UNAVAILABLE, 'down'), T0)
    assert step_of(retry) == 'InitiateVMDeletion' and retry.retry == Retry.SHORT
    denied = after_step(view, Step.INITIATE_VM_DELETION, DriverError(Code.PERMISSION_DENIED, 'no'), T0)
    assert step_of(denied) == 'InitiateVMDeletion' and denied.retry == Retry.LONG


def test_no_node_skips_the_drain_and_a_gone_node_s_volume_attachments_go_before_the_vm():
    """A Node that is gone: no drain, but the volume attachments to its name are deleted before the VM (issue 23:
    a missing Node used to go straight to the VM). No node name at all: nothing to look for."""
    assert step_of(plan_deletion(dview(deleting(Step.INITIATE_DRAIN), None), T0)) == 'DelVolumesAttachments'
    assert step_of(plan_deletion(dview(deleting(Step.INITIATE_DRAIN, node='')), T0)) == 'InitiateVMDeletion'


def test_draining_marks_the_node_terminating_once_with_mcms_reasons():
    view = dview(deleting(Step.INITIATE_DRAIN), dict(node(), metadata={'name': 'n1', 'resourceVersion': '9'}))
    patch = termination_patch(view, T0)
    assert patch['metadata'] == {'resourceVersion': '9'}
    conds = {c['type']: c for c in patch['status']['conditions']}
    assert conds['Ready']['status'] == 'True'                              # the Node's other conditions are kept
    assert (conds['Terminating']['status'], conds['Terminating']['reason']) == ('True', 'ScaleDown')
    marked = dict(node(), status={'conditions': patch['status']['conditions']})
    assert termination_patch(dview(deleting(Step.INITIATE_DRAIN), marked), T0 + 5) is None     # already marked
    failed = termination_patch(dview(deleting(phase='Failed'), node()), T0)
    assert failed['status']['conditions'][-1]['reason'] == 'Unhealthy'
    earlier = {'type': 'Terminating', 'status': 'False', 'reason': 'Theirs', 'message': 'kept'}
    mine = termination_patch(dview(deleting(Step.INITIATE_DRAIN), dict(node(), status={'conditions': [earlier]})), T0)
    assert (mine['status']['conditions'][-1]['reason'], mine['status']['conditions'][-1]['status']) == ('Theirs', 'True')
    assert termination_patch(dview(deleting(Step.INITIATE_DRAIN), None), T0) is None


def test_a_node_that_cannot_be_marked_is_not_drained_and_the_step_is_retried():
    plan = after_termination_mark_failed(dview(deleting(Step.INITIATE_DRAIN), node()), RuntimeError('conflict'), T0)
    op = plan.status['lastOperation']
    assert (op['step'], op['state']) == ('InitiateDrain', 'Failed') and 'update of node conditions - conflict' in op['description']


def test_node_deletion_then_finalizer():
    view = dview(deleting(Step.INITIATE_NODE_DELETION))
    assert step_of(after_step(view, Step.INITIATE_NODE_DELETION, None, T0)) == 'InitiateFinalizerRemoval'
    assert step_of(after_step(view, Step.INITIATE_NODE_DELETION, RuntimeError('x'), T0)) == 'InitiateNodeDeletion'


def test_without_our_finalizer_nothing_is_done():
    m = deleting(Step.INITIATE_DRAIN)
    m['metadata']['finalizers'] = []
    assert plan_deletion(dview(m, node()), T0).empty


# --- when a drain is forced ---------------------------------------------------------------------------

@pytest.mark.parametrize('machine, the_node, lookup, now, reason', [
    (deleting(labels={'force-deletion': 'True'}), node(), None, T0, 'label force-deletion'),
    (deleting(), node(), None, T0 + 7201, 'drain timeout'),
    (deleting(), node('False', T0 - 301), None, T0, 'NotReady'),
    (deleting(), node(), Lookup(Code.OK, VM('p', state=VMState.STOPPED), 1), T0, 'reports VM p stopped'),
    (deleting(), node(), Lookup(Code.OK, VM('p', state=VMState.TERMINATED), 1), T0, 'reports VM p terminated'),
])
def test_force_reasons(machine, the_node, lookup, now, reason):
    assert reason in force_reason(DeletionView(machine, the_node, lookup, TIMEOUTS), S, now)


@pytest.mark.parametrize('machine, the_node, now', [
    (deleting(labels={'force-deletion': 'no'}), node(), T0),
    (deleting(), node('False', T0 - 60), T0 + 200),    # NotReady, but not for 5 minutes yet
    (deleting(), node(), T0 + 7199),                   # healthy: only the timeout forces
])
def test_nothing_forces_a_healthy_drain_before_its_timeout(machine, the_node, now):
    assert force_reason(DeletionView(machine, the_node, Lookup(Code.OK, VM('p'), 1), TIMEOUTS), S, now) == ''


def test_after_drain():
    view = dview(deleting(Step.INITIATE_DRAIN), node())
    assert step_of(after_drain(view, DrainPlan(done=True), '', T0)) == 'InitiateVMDeletion'
    forced = after_drain(view, DrainPlan(done=True), 'label force-deletion=True', T0)
    assert step_of(forced) == 'DelVolumesAttachments'
    blocked = after_drain(view, DrainPlan(blocked=['shop/web-0: PodDisruptionBudget shop/web (minAvailable=1)']), '', T0)
    assert step_of(blocked) == 'InitiateDrain'
    text = blocked.status['lastOperation']['description']
    assert 'PodDisruptionBudget shop/web (minAvailable=1)' in text and 'until the drain timeout' in text
    condition = blocked.status['conditions'][0]
    assert (condition['type'], condition['status'], condition['reason']) == ('Drained', 'False', 'PodDisruptionBudget')


# --- drain rounds ---------------------------------------------------------------------------------------

def pod(name, volumes=False, owner='ReplicaSet', labels=None, deleting=False, uid=None):
    md = {'name': name, 'namespace': 'shop', 'uid': uid or name, 'labels': labels or {'app': name},
          'ownerReferences': [{'kind': owner, 'name': 'x', 'controller': True}] if owner else []}
    if deleting:
        md['deletionTimestamp'] = ts(T0)
    spec = {'nodeName': 'n1', 'volumes': [{'name': 'd', 'persistentVolumeClaim': {'claimName': 'c'}}] if volumes else []}
    return {'metadata': md, 'spec': spec, 'status': {'phase': 'Running'}}


PDB = {'metadata': {'name': 'web', 'namespace': 'shop'}, 'spec': {'minAvailable': 1, 'selector': {'matchLabels': {'app': 'web'}}}}


def inputs(pods, force=False, now=T0, attached=(), volume_ids=None, retries=360):
    return DrainInputs('n1', pods, [PDB], force, now, 120.0, retries, volume_ids or {}, attached)


def names(pods):
    return sorted(p['metadata']['name'] for p in pods)


def test_stateless_pods_are_evicted_together_daemonsets_stay():
    plan = plan_round(inputs([pod('a'), pod('b'), pod('ds', owner='DaemonSet'), pod('bare', owner=None)]), DrainMemory())
    assert names(plan.evict) == ['a', 'b', 'bare'] and not plan.done


def test_volume_pods_go_one_at_a_time_until_their_volumes_detach():
    memory = DrainMemory()
    pods = [pod('db-0', volumes=True), pod('db-1', volumes=True), pod('web')]
    first = plan_round(inputs(pods), memory)
    assert names(first.evict) == ['db-0', 'web']
    record_eviction(memory, pods[0], True, T0, volume_ids=['vol-0'])      # its volume IDs, resolved while it existed
    # db-0 is gone from the API (so nothing leads to its volumes any more) but its volume is still attached: db-1 waits
    second = plan_round(inputs(pods[1:], now=T0 + 5, attached=['kubernetes.io/csi/ebs.csi.aws.com^vol-0']), memory)
    assert names(second.evict) == ['web'] and 'shop/db-1' in second.waiting
    # detached: db-1 goes
    third = plan_round(inputs(pods[1:], now=T0 + 10), memory)
    assert names(third.evict) == ['db-1', 'web']
    # or the PV detach timeout passed
    fourth = plan_round(inputs(pods[1:], now=T0 + 121, attached=['kubernetes.io/csi/ebs.csi.aws.com^vol-0']), memory)
    assert names(fourth.evict) == ['db-1', 'web']


def test_the_drain_ends_when_the_last_volume_pods_volumes_detached():
    """MCM waits for every evicted volume pod's volumes, the last one's too, before the VM goes."""
    memory = DrainMemory()
    db = pod('db-0', volumes=True)
    record_eviction(memory, db, True, T0, volume_ids=['vol-0'])
    waiting = plan_round(inputs([], now=T0 + 5, attached=['kubernetes.io/csi/ebs.csi.aws.com^vol-0']), memory)
    assert not waiting.done and 'shop/db-0' in waiting.message
    assert plan_round(inputs([], now=T0 + 6), memory).done
    assert plan_round(inputs([], now=T0 + 121, attached=['kubernetes.io/csi/ebs.csi.aws.com^vol-0']), memory).done


def test_a_refused_eviction_names_the_pod_disruption_budget():
    memory = DrainMemory()
    web = pod('web', labels={'app': 'web'})
    record_eviction(memory, web, False, T0, 'Cannot evict pod as it would violate the pod\'s disruption budget.')
    plan = plan_round(inputs([web]), memory)
    assert plan.blocked == ['shop/web: PodDisruptionBudget shop/web (minAvailable=1)']
    assert 'PodDisruptionBudget shop/web' in plan.message and not plan.done


def test_evict_retries_are_counted_per_interval_not_per_round():
    memory = DrainMemory()
    web = pod('web', labels={'app': 'web'})
    record_eviction(memory, web, False, T0)
    for i in range(10):
        plan_round(inputs([web], now=T0 + i), memory)
    assert memory.attempts['shop/web'] == 1
    plan = plan_round(inputs([web], now=T0 + 25, retries=1), memory)
    assert memory.attempts['shop/web'] == 2 and plan.exhausted == ['shop/web']


def test_a_forced_drain_deletes_and_gives_up_waiting_after_a_minute():
    memory = DrainMemory()
    pods = [pod('web', labels={'app': 'web'}), pod('db', volumes=True)]
    plan = plan_round(inputs(pods, force=True), memory)
    assert names(plan.delete) == ['db', 'web'] and not plan.evict and not plan.done
    still = [pod('web', deleting=True)]
    assert not plan_round(inputs(still, force=True, now=T0 + 30), memory).done
    assert plan_round(inputs(still, force=True, now=T0 + 61), memory).done
    assert plan_round(inputs([], force=True, now=T0 + 1), DrainMemory()).done


def test_terminating_pods_are_waited_for_and_an_empty_node_is_drained():
    plan = plan_round(inputs([pod('web', deleting=True)]), DrainMemory())
    assert not plan.evict and plan.waiting == ['shop/web'] and not plan.done
    assert plan_round(inputs([pod('ds', owner='DaemonSet')]), DrainMemory()).done
