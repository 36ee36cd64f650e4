"""One machine's decisions: MCM's creation flow, health checks and timeouts (inventory §2 acceptance 1-4, 16),
and positive evidence from the cloud."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro
from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Code, Retry
from ansible_collections.steward.cluster.plugins.module_utils.machines.config import Settings, machine_timeouts
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import VM, CreateResult, VMState
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import DriverError
from ansible_collections.steward.cluster.plugins.module_utils.machines.inventory import Lookup
from ansible_collections.steward.cluster.plugins.module_utils.machines.machine import MachineView, after_call, plan_machine
from ansible_collections.steward.cluster.plugins.module_utils.machines.plan import ClusterAction

from support.machines_sim import MachinesSim

T0 = 1_700_000_000.0
TIMEOUTS = machine_timeouts({}, Settings())


def ts(t):
    return format_micro(t)[:19] + 'Z'


def machine(phase=None, provider_id='', node='', created=T0, since=None, op=None, finalizer=True, **spec):
    md = {'name': 'm1', 'namespace': 'ns', 'uid': 'u1', 'creationTimestamp': ts(created), 'labels': {},
          'finalizers': ['machine.sapcloud.io/operator'] if finalizer else []}
    if node:
        md['labels']['node'] = node
    status = {}
    if phase is not None:
        status['currentStatus'] = {'phase': phase, 'lastUpdateTime': ts(since if since is not None else created)}
    if op:
        status['lastOperation'] = dict(zip(('type', 'state', 'description'), op))
    return {'metadata': md, 'spec': dict({'class': {'name': 'c'}, 'providerID': provider_id}, **spec), 'status': status}


def node(ready='True', name='n1', taints=(), **conditions):
    conds = [{'type': 'Ready', 'status': ready, 'lastTransitionTime': ts(T0)}]
    conds += [{'type': k, 'status': v, 'lastTransitionTime': ts(T0)} for k, v in conditions.items()]
    return {'metadata': {'name': name, 'annotations': {}}, 'spec': {'taints': list(taints)}, 'status': {'conditions': conds}}


FOUND = Lookup(Code.OK, VM('aws:///r/i-1', 'n1', 'm1', 'u1'), 1)
NOT_FOUND = Lookup(Code.NOT_FOUND)


def view(m, the_node=None, lookup=FOUND, **kw):
    return MachineView(m, the_node, lookup, kw.pop('timeouts', TIMEOUTS), **kw)


def phase_of(plan):
    return ((plan.status or {}).get('currentStatus') or {}).get('phase')


def op_of(plan):
    op = (plan.status or {}).get('lastOperation') or {}
    return op.get('type'), op.get('state')


# --- creation (acceptance 1, 3) -------------------------------------------------------------------

def test_a_new_machine_without_a_vm_is_created():
    plan = plan_machine(view(machine(), lookup=NOT_FOUND), T0)
    assert plan.call == Call.CREATE and plan.status is None


def test_an_existing_vm_is_adopted_never_created_again():
    plan = plan_machine(view(machine()), T0)
    assert plan.call is None
    assert plan.spec == {'providerID': 'aws:///r/i-1'} and plan.metadata == {'labels': {'node': 'n1'}}
    assert phase_of(plan) == 'Pending' and op_of(plan) == ('Create', 'Processing')
    assert plan.status['lastOperation']['description'] == 'Creating machine on cloud provider'


def test_several_vms_for_one_machine_surface_out_of_range_and_create_nothing():
    plan = plan_machine(view(machine(), lookup=Lookup(Code.OUT_OF_RANGE, None, 2)), T0)
    assert plan.call is None
    assert plan.status['lastOperation']['errorCode'] == 'OutOfRange' and phase_of(plan) == 'CrashLoopBackOff'


def test_no_listing_yet_creates_nothing_and_waits_for_one():
    """GetMachineStatus first, also for drivers whose CreateMachine is idempotent for their own VMs: a VM someone
    else made for this machine (MCM, by Name tag) would otherwise get a twin."""
    plan = plan_machine(view(machine(), lookup=None), T0)
    assert plan.call is None and plan.status is None and 'first cloud listing' in plan.waiting


@pytest.mark.parametrize('code, retry', [(Code.UNAVAILABLE, Retry.SHORT), (Code.THROTTLED, Retry.THROTTLED),
                                         (Code.PERMISSION_DENIED, Retry.MEDIUM)])
def test_a_failed_listing_is_crash_loop_back_off_with_the_clouds_message_and_creates_nothing(code, retry):
    """MCM: a GetMachineStatus error is Create/Failed, CrashLoopBackOff (Failed after creationTimeout)."""
    lookup = Lookup(code, message='DescribeInstances: the EC2 endpoint did not answer')
    plan = plan_machine(view(machine(), lookup=lookup), T0 + 60)
    assert plan.call is None and phase_of(plan) == 'CrashLoopBackOff' and op_of(plan) == ('Create', 'Failed')
    op = plan.status['lastOperation']
    assert op['description'] == 'Cloud provider message - DescribeInstances: the EC2 endpoint did not answer'
    assert op['errorCode'] == code.mcm_name and plan.retry == retry
    late = plan_machine(view(machine(), lookup=lookup), T0 + 1201)
    assert phase_of(late) == 'Failed' and late.failed == 'creation-timeout'


def test_the_finalizer_is_added_first():
    plan = plan_machine(view(machine(finalizer=False), lookup=NOT_FOUND), T0)
    assert plan.metadata == {'finalizers': ['machine.sapcloud.io/operator']}


def test_create_success_records_provider_id_and_node_then_initializes():
    """MCM's order: providerID and `node` label written, InitializeMachine, then Pending."""
    plan = after_call(view(machine()), Call.CREATE, CreateResult('aws:///r/i-9', 'ip-10-0-0-9'), T0 + 1)
    assert plan.spec == {'providerID': 'aws:///r/i-9'} and plan.metadata == {'labels': {'node': 'ip-10-0-0-9'}}
    assert plan.call == Call.INITIALIZE and plan.status is None
    stored = machine('', 'aws:///r/i-9', 'ip-10-0-0-9')
    done = after_call(view(stored), Call.INITIALIZE, CreateResult('aws:///r/i-9', 'ip-10-0-0-9'), T0 + 2)
    assert phase_of(done) == 'Pending' and op_of(done) == ('Create', 'Processing') and done.call is None


@pytest.mark.parametrize('code, retry', [(Code.UNAVAILABLE, Retry.SHORT), (Code.RESOURCE_EXHAUSTED, Retry.RESOURCE_EXHAUSTED),
                                         (Code.INTERNAL, Retry.MEDIUM), (Code.THROTTLED, Retry.THROTTLED)])
def test_create_failure_is_crash_loop_back_off_with_mcms_retry_class(code, retry):
    """Acceptance 2: phase CrashLoopBackOff, lastOperation Create/Failed with the message, retried."""
    plan = after_call(view(machine()), Call.CREATE, DriverError(code, 'no capacity'), T0 + 60)
    assert phase_of(plan) == 'CrashLoopBackOff' and op_of(plan) == ('Create', 'Failed')
    assert plan.status['lastOperation']['description'] == 'Cloud provider message - no capacity'
    assert plan.status['lastOperation']['errorCode'] == code.mcm_name
    assert plan.retry == retry and not plan.failed


def test_create_failure_after_the_creation_timeout_is_failed():
    plan = after_call(view(machine()), Call.CREATE, DriverError(Code.UNAVAILABLE, 'down'), T0 + 1201)
    assert phase_of(plan) == 'Failed' and plan.failed == 'creation-timeout'


def test_a_throttled_create_keeps_the_drivers_backoff():
    plan = after_call(view(machine()), Call.CREATE, DriverError(Code.THROTTLED, 'slow', retry_after=2.5), T0)
    assert plan.retry_after == 2.5


def test_stale_node_fails_the_machine_and_deletes_the_new_vm():
    stale = dict(node(), spec={'providerID': 'aws:///r/i-old'})
    plan = after_call(view(machine()), Call.CREATE, CreateResult('aws:///r/i-9', 'n1'), T0, stale_node=stale)
    assert phase_of(plan) == 'Failed' and plan.call == Call.DELETE and plan.failed == 'stale-node'
    assert plan.retry == Retry.SHORT           # MCM: ShortRetry; the set replaces it at once


# --- initialization (acceptance 16) ------------------------------------------------------------------

def test_a_vm_that_needs_initialization_gets_initialize_machine():
    lookup = Lookup(Code.OK, VM('aws:///r/i-1', 'n1', 'm1', 'u1', needs_init=True), 1)
    plan = plan_machine(view(machine(), lookup=lookup), T0)
    assert plan.call == Call.INITIALIZE and plan.spec == {'providerID': 'aws:///r/i-1'}


def test_uninitialized_is_crash_loop_back_off_naming_instance_initialization():
    m = machine('', 'aws:///r/i-1', 'n1')
    plan = after_call(view(m), Call.INITIALIZE, DriverError(Code.UNINITIALIZED, 'src/dst check'), T0)
    op = plan.status['lastOperation']
    assert phase_of(plan) == 'CrashLoopBackOff' and (op['type'], op['state']) == ('Create', 'Failed')
    assert 'InstanceInitialization' in op['description'] and op['step'] == 'InstanceInitialization'
    assert op['errorCode'] == 'Uninitialized' and plan.retry == Retry.SHORT
    # the next reconcile retries InitializeMachine on the VM its providerID names (no second create), also
    # when the listing does not show the VM yet
    looping = machine('CrashLoopBackOff', 'aws:///r/i-1', 'n1')
    looping['status']['lastOperation'] = op
    again = plan_machine(view(looping, lookup=NOT_FOUND), T0 + 5)
    assert again.call == Call.INITIALIZE and again.status is None
    needs = Lookup(Code.OK, VM('aws:///r/i-1', 'n1', 'm1', 'u1', needs_init=True), 1)
    assert plan_machine(view(looping, lookup=needs), T0 + 5).call == Call.INITIALIZE
    # initialized meanwhile (the listing says so): Pending
    done = plan_machine(view(looping), T0 + 5)
    assert done.call is None and phase_of(done) == 'Pending'


def test_a_crash_loop_back_off_machine_with_a_vm_whose_create_answer_was_lost_goes_on_with_it():
    """A providerID and a failure that was not initialization: the VM exists, so Pending (no second create)."""
    again = plan_machine(view(machine('CrashLoopBackOff', 'aws:///r/i-1', 'n1'), lookup=NOT_FOUND), T0 + 5)
    assert again.call is None and phase_of(again) == 'Pending'


def test_unimplemented_initialization_goes_on_as_normal():
    plan = after_call(view(machine('', 'aws:///r/i-1', 'n1')), Call.INITIALIZE, DriverError(Code.UNIMPLEMENTED, 'no'), T0)
    assert phase_of(plan) == 'Pending'


# --- health (acceptance 1, 4) ----------------------------------------------------------------------

def test_pending_becomes_running_when_the_node_is_ready():
    m = machine('Pending', 'aws:///r/i-1', 'n1', op=('Create', 'Processing', 'Creating machine on cloud provider'))
    plan = plan_machine(view(m, node()), T0 + 90)
    assert phase_of(plan) == 'Running' and op_of(plan) == ('Create', 'Successful')
    assert plan.status['lastOperation']['description'].startswith('Machine is now ready')
    assert plan.status['conditions'][0]['type'] == 'Ready'


def test_pending_waits_while_critical_components_are_not_ready():
    taint = {'key': 'node.gardener.cloud/critical-components-not-ready', 'effect': 'NoSchedule'}
    plan = plan_machine(view(machine('Pending', 'aws:///r/i-1', 'n1'), node(taints=[taint])), T0 + 10)
    assert phase_of(plan) is None


@pytest.mark.parametrize('the_node', [node(DiskPressure='True'), node('False'), None])
def test_running_becomes_unknown_when_unhealthy_or_node_missing(the_node):
    m = machine('Running', 'aws:///r/i-1', 'n1')
    plan = plan_machine(view(m, the_node), T0 + 10)
    assert phase_of(plan) == 'Unknown' and op_of(plan) == ('HealthCheck', 'Processing')


def test_unknown_stays_until_the_health_timeout_then_fails():
    m = machine('Unknown', 'aws:///r/i-1', 'n1', since=T0)
    early = plan_machine(view(m, node('False')), T0 + 599)
    assert phase_of(early) is None and early.retry_after == pytest.approx(1.0)
    late = plan_machine(view(m, node('False')), T0 + 601)
    assert phase_of(late) == 'Failed' and late.failed == 'health-timeout' and op_of(late) == ('HealthCheck', 'Failed')


def test_unknown_recovers_before_the_timeout():
    m = machine('Unknown', 'aws:///r/i-1', 'n1', since=T0, op=('HealthCheck', 'Processing', 'x'))
    plan = plan_machine(view(m, node()), T0 + 100)
    assert phase_of(plan) == 'Running' and op_of(plan) == ('HealthCheck', 'Successful')


def test_per_machine_health_timeout_and_disable():
    quick = machine_timeouts({'healthTimeout': '30s'}, Settings())
    m = machine('Unknown', 'aws:///r/i-1', 'n1', since=T0)
    assert phase_of(plan_machine(view(m, node('False'), timeouts=quick), T0 + 31)) == 'Failed'
    never = machine_timeouts({'disableHealthTimeout': True}, Settings())
    assert phase_of(plan_machine(view(m, node('False'), timeouts=never), T0 + 99999)) is None


def test_the_safety_gate_holds_an_unknown_machine_and_says_why():
    m = machine('Unknown', 'aws:///r/i-1', 'n1', since=T0)
    plan = plan_machine(view(m, node('Unknown'), may_fail=False, gate='FleetFreeze: 3 of 3 unreachable'), T0 + 601)
    assert phase_of(plan) is None and plan.waiting.startswith('FleetFreeze')


def test_pending_past_the_creation_timeout_fails():
    m = machine('Pending', 'aws:///r/i-1', 'n1', op=('Create', 'Processing', 'x'))
    plan = plan_machine(view(m, None), T0 + 1201)
    assert phase_of(plan) == 'Failed' and plan.failed == 'creation-timeout'


# --- positive evidence ---------------------------------------------------------------------------------

@pytest.mark.parametrize('state', [VMState.TERMINATED, VMState.SHUTTING_DOWN])
def test_a_terminated_vm_fails_the_machine_at_once_even_when_gated(state):
    m = machine('Running', 'aws:///r/i-1', 'n1')
    lookup = Lookup(Code.OK, VM('aws:///r/i-1', 'n1', 'm1', 'u1', state=state), 1)
    plan = plan_machine(view(m, node(), lookup=lookup, may_fail=False, gate='FleetFreeze'), T0 + 1)
    assert phase_of(plan) == 'Failed' and plan.failed == 'vm-gone'


def test_a_failed_machine_without_a_provider_id_waits_for_its_set_and_is_not_failed_again():
    """Its VM was deleted as stale or ended before it joined: the creation flow must not run again (it would find
    the terminated VM and fail the machine, with an Event, on every pass until the set deletes it)."""
    m = machine('Failed', '', op=('Create', 'Failed', 'VM gone before it joined'))
    gone = Lookup(Code.OK, VM('aws:///r/i-1', 'n1', 'm1', 'u1', state=VMState.TERMINATED), 1)
    plan = plan_machine(view(m, None, lookup=gone), T0 + 30)
    assert plan.status is None and plan.call is None and plan.action is None and plan.events == []
    assert plan.retry == Retry.SHORT


def test_a_vm_missing_from_enough_listings_fails_the_machine():
    m = machine('Unknown', 'aws:///r/i-1', 'n1', since=T0)
    assert phase_of(plan_machine(view(m, None, lookup=NOT_FOUND, vm_missing=True), T0 + 1)) == 'Failed'
    assert phase_of(plan_machine(view(m, None, lookup=NOT_FOUND, vm_missing=False), T0 + 1)) is None


def test_a_stopped_vm_is_not_evidence_of_loss():
    lookup = Lookup(Code.OK, VM('aws:///r/i-1', 'n1', 'm1', 'u1', state=VMState.STOPPED), 1)
    plan = plan_machine(view(machine('Running', 'aws:///r/i-1', 'n1'), node('Unknown'), lookup=lookup), T0)
    assert phase_of(plan) == 'Unknown'


# --- node-initiated deletion, API freeze (acceptance 9, 14) -------------------------------------------

@pytest.mark.parametrize('value, deletes', [('true', True), ('True', True), ('false', False), ('', False)])
def test_trigger_deletion_annotation_on_the_node(value, deletes):
    n = node()
    n['metadata']['annotations']['node.machine.sapcloud.io/trigger-deletion-by-mcm'] = value
    plan = plan_machine(view(machine('Running', 'aws:///r/i-1', 'n1'), n), T0)
    assert (plan.action == ClusterAction.DELETE_MACHINE) is deletes


def test_an_api_freeze_acts_on_nothing():
    plan = plan_machine(view(machine(), lookup=NOT_FOUND, frozen='APIServerUnreachable: x'), T0)
    assert plan.call is None and plan.status is None and plan.waiting.startswith('APIServerUnreachable')


def test_a_missing_class_is_reported_and_nothing_is_created():
    plan = plan_machine(view(machine(), lookup=NOT_FOUND, class_problem='MachineClass ns/c not found'), T0)
    assert plan.call is None and plan.status['lastOperation']['errorCode'] == 'InvalidArgument'


# --- the creation flow applied (apply.run_machine over the in-memory world) ---------------------------

def test_initialize_machine_follows_create_machine_and_an_uninitialized_vm_is_retried_not_recreated():
    """Acceptance 16 through apply.py: CreateMachine, then InitializeMachine in the same action; UNINITIALIZED
    twice -> CrashLoopBackOff naming InstanceInitialization, retried by providerID; then Running on one VM."""
    sim = MachinesSim()
    sim.add_class('c1')
    sim.cloud.needs_init = True          # its listing says so until InitializeMachine succeeds
    sim.cloud.fail(Call.INITIALIZE, Code.UNINITIALIZED, times=2)
    sim.add_deployment(replicas=1, cls='c1')
    sim.run_until(lambda: sim.cloud.calls.get(Call.CREATE.value))
    [m] = sim.machines()
    op = m['status']['lastOperation']
    assert (sim.cloud.calls[Call.CREATE.value], sim.cloud.calls[Call.INITIALIZE.value]) == (1, 1)
    assert (m['status']['currentStatus']['phase'], op['state'], op['errorCode'], op['step']) == (
        'CrashLoopBackOff', 'Failed', 'Uninitialized', 'InstanceInitialization')
    assert m['spec']['providerID'].startswith('fake:///') and m['metadata']['labels']['node']
    sim.run_until(lambda: sim.phases() == ['Running'])
    assert sim.cloud.calls[Call.CREATE.value] == 1 and sim.cloud.calls[Call.INITIALIZE.value] == 3
    assert len(sim.cloud.vms) == 1


def test_a_driver_without_initialize_machine_goes_on_as_normal():
    sim = MachinesSim()
    sim.add_class('c1')
    sim.cloud.fail(Call.INITIALIZE, Code.UNIMPLEMENTED, times=1)
    sim.add_deployment(replicas=1, cls='c1')
    sim.run_until(lambda: sim.phases() == ['Running'])
    assert (sim.cloud.calls[Call.CREATE.value], sim.cloud.calls[Call.INITIALIZE.value]) == (1, 1)
    assert not [e for e in sim.events if e[1] == 'MachineCreateFailed']


# --- a node name reused by a new VM (EC2 hands a terminated instance's private IP to the next one) --------------

def test_a_node_of_another_vm_is_not_the_machines_node():
    m = machine('Pending', 'aws:///r/i-new', 'n1', op=('Create', 'Processing', 'Creating machine on cloud provider'))
    other = dict(node(), spec={'providerID': 'aws:///r/i-old'})
    assert o.node_of(m, {'n1': other}.get) is None and o.node_of(m, {'n1': dict(node(), spec={'providerID': 'aws:///r/i-new'})}.get)
    assert o.node_of(machine(), {'n1': other}.get) is None          # no node label yet
    plan = plan_machine(view(m, o.node_of(m, {'n1': other}.get)), T0 + 90)
    assert phase_of(plan) is None                                 # still Pending: the old Node's Ready is not its own


class ReusedNames(MachinesSim):
    """The next VM gets the node name of an old VM whose Node is still there."""

    def __init__(self, old_vm_gone: bool):
        super().__init__()
        self.old_vm_gone = old_vm_gone

    def vm_gone(self, provider_id):
        return self.old_vm_gone and provider_id == 'fake:///vm-old'


@pytest.mark.parametrize('gone', [True, False])
def test_a_reused_node_name_is_stale_only_while_the_old_vm_lives(gone):
    sim = ReusedNames(old_vm_gone=gone)
    sim.add_class('c1')
    sim.nodes['node-00001'] = {'metadata': {'name': 'node-00001'}, 'spec': {'providerID': 'fake:///vm-old'},
                               'status': {'conditions': [sim._ready('True')]}}
    sim.add_deployment(replicas=1, cls='c1')
    sim.run_until(lambda: sim.cloud.calls.get(Call.CREATE.value))
    [first] = sim.machines()
    if not gone:      # MCM's stale-node guard: that VM is deleted and the machine replaced
        assert o.phase(first).value == 'Failed' and 'old node obj' in o.last_operation(first)['description']
        return
    assert o.phase(first).value == 'Pending' and first['spec']['providerID'] == 'fake:///vm-00001'
    sim.step(count=5)
    assert o.phase(sim.machines()[0]).value == 'Pending'          # the old Node's Ready is not its own
    del sim.nodes['node-00001']                                   # the old VM's Node goes (its machine, the cloud)
    sim.run_until(lambda: sim.phases() == ['Running'])
    assert sim.cloud.calls[Call.CREATE.value] == 1 and sim.nodes['node-00001']['spec']['providerID'] == 'fake:///vm-00001'
