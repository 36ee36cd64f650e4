"""Error-code table, retry delays, settings and per-machine overrides, Node health, GetMachineStatus from one listing,
and what a plan asks of the shells (cloud slots, whether a set/deployment job is needed)."""

import random

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.machines import health
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import (
    NEXT_STEP, Call, Code, Next, Retry, auto_retried, is_failure, next_step, retry_delay)
from ansible_collections.steward.cluster.plugins.module_utils.machines.config import (
    Settings, check_settings, machine_timeouts, parse_node_conditions)
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import Step
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import VM, MachineContext, VMState
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import DriverError
from ansible_collections.steward.cluster.plugins.module_utils.machines.deployment import DeploymentPlan
from ansible_collections.steward.cluster.plugins.module_utils.machines.inventory import Inventory
from ansible_collections.steward.cluster.plugins.module_utils.machines.machineset import SetPlan
from ansible_collections.steward.cluster.plugins.module_utils.machines.plan import ClusterAction, Event, MachinePlan


# --- the code -> next-step table (MCM's machine_error_codes.md) -------------------------------------

@pytest.mark.parametrize('call, code, step, retry', [
    (Call.STATUS, Code.NOT_FOUND, Next.CREATE, Retry.SHORT),             # drives creation
    (Call.STATUS, Code.UNIMPLEMENTED, Next.CREATE, Retry.SHORT),
    (Call.STATUS, Code.OUT_OF_RANGE, Next.SEVERAL_VMS, Retry.MEDIUM),    # several VMs: never create another
    (Call.STATUS, Code.UNINITIALIZED, Next.INITIALIZE, Retry.SHORT),
    (Call.CREATE, Code.RESOURCE_EXHAUSTED, Next.FAIL, Retry.RESOURCE_EXHAUSTED),   # --resource-exhausted-retry
    (Call.CREATE, Code.UNAVAILABLE, Next.RETRY, Retry.SHORT),
    (Call.CREATE, Code.DEADLINE_EXCEEDED, Next.RETRY, Retry.SHORT),
    (Call.CREATE, Code.INTERNAL, Next.FAIL, Retry.MEDIUM),
    (Call.CREATE, Code.THROTTLED, Next.RETRY, Retry.THROTTLED),          # ours: never a 3-minute wait
    (Call.INITIALIZE, Code.UNIMPLEMENTED, Next.SKIP, Retry.SHORT),
    (Call.INITIALIZE, Code.NOT_FOUND, Next.SKIP, Retry.SHORT),
    (Call.INITIALIZE, Code.UNINITIALIZED, Next.RETRY, Retry.SHORT),
    (Call.DELETE, Code.NOT_FOUND, Next.DONE, Retry.SHORT),               # already gone = deleted
    (Call.DELETE, Code.ABORTED, Next.RETRY, Retry.SHORT),
    (Call.DELETE, Code.PERMISSION_DENIED, Next.FAIL, Retry.MEDIUM),
    (Call.LIST, Code.UNIMPLEMENTED, Next.SKIP, Retry.LONG),
])
def test_next_step_table(call, code, step, retry):
    assert next_step(call, code) == (step, retry)


def test_table_has_a_row_for_every_call_and_code():
    assert len(NEXT_STEP) == len(Call) * len(Code)
    assert all(next_step(call, Code.OK)[0] == Next.PROCEED for call in Call)


@pytest.mark.parametrize('call, code, expected', [
    (Call.STATUS, Code.OUT_OF_RANGE, True), (Call.CREATE, Code.OUT_OF_RANGE, False),
    (Call.INITIALIZE, Code.INTERNAL, True), (Call.CREATE, Code.INTERNAL, False),
    (Call.DELETE, Code.UNAVAILABLE, True), (Call.LIST, Code.PERMISSION_DENIED, False),
])
def test_auto_retry_column(call, code, expected):
    assert auto_retried(call, code) is expected


def test_codes_print_as_mcm_names_and_steps_have_stable_keys():
    assert Code.UNINITIALIZED.mcm_name == 'Uninitialized' and int(Code.UNINITIALIZED) == 17
    assert str(DriverError(Code.NOT_FOUND, 'gone')) == 'NotFound: gone'
    assert Step.INITIATE_DRAIN.key == 'InitiateDrain' and Step.from_key('InitiateDrain') == Step.INITIATE_DRAIN
    assert Step.INITIATE_DRAIN.value == 'Initiate node drain'      # MCM's description text
    assert Step.from_key('nonsense') is None


# --- settings and per-machine overrides --------------------------------------------------------------

def test_defaults_are_mcms():
    s = Settings()
    assert (s.machine_creation_timeout, s.machine_health_timeout, s.machine_drain_timeout) == (1200, 600, 7200)
    assert (s.safety_up, s.safety_down, s.machine_max_evict_retries, s.concurrent_syncs) == (2, 1, 360, 50)
    assert s.node_conditions == ('KernelDeadlock', 'ReadonlyFilesystem', 'DiskPressure', 'NetworkUnavailable')
    assert s.max_replacements == 1
    assert check_settings(s) is s


@pytest.mark.parametrize('change, field, rule', [
    ({'machine_health_timeout': 0}, 'machine_health_timeout', 'minimum'),
    ({'safety_up': 1, 'safety_down': 2}, 'safety_down', 'maximum'),
    ({'fleet_freeze_fraction': 1.5}, 'fleet_freeze_fraction', 'maximum'),
    ({'max_replacements': 0}, 'max_replacements', 'minimum'),
    ({'node_conditions': ('Disk Pressure',)}, 'node_conditions', 'node-conditions'),
])
def test_bad_settings_name_the_field(change, field, rule):
    with pytest.raises(InvalidInput) as info:
        check_settings(Settings(**change))
    assert (info.value.field, info.value.rule) == (field, rule)


def test_machine_overrides_win_and_drain_timeout_sets_the_retries():
    t = machine_timeouts({'healthTimeout': '30s', 'creationTimeout': '5m', 'drainTimeout': '10m',
                          'nodeConditions': 'DiskPressure', 'disableHealthTimeout': True}, Settings())
    assert (t.health, t.creation, t.drain, t.node_conditions, t.disable_health_timeout) == (30, 300, 600, ('DiskPressure',), True)
    assert t.max_evict_retries == 30           # 10m / 20s per eviction attempt (MCM-22)
    assert machine_timeouts({'maxEvictRetries': 5}, Settings()).max_evict_retries == 5
    assert machine_timeouts({}, Settings()).max_evict_retries == 360


@pytest.mark.parametrize('spec, field', [
    ({'healthTimeout': '10 minutes'}, 'spec.healthTimeout'),
    ({'drainTimeout': '0s'}, 'spec.drainTimeout'),
    ({'maxEvictRetries': -1}, 'spec.maxEvictRetries'),
    ({'disableHealthTimeout': 'yes'}, 'spec.disableHealthTimeout'),
    ({'nodeConditions': 'Disk$Pressure'}, 'spec.nodeConditions'),
])
def test_bad_machine_fields_are_named(spec, field):
    with pytest.raises(InvalidInput) as info:
        machine_timeouts(spec, Settings())
    assert info.value.field == field


def test_node_conditions_parse():
    assert parse_node_conditions(' A, B ,', 'f') == ('A', 'B')
    assert parse_node_conditions('', 'f') == ()


# --- health --------------------------------------------------------------------------------------------

def node(*conditions, taints=()):
    return {'metadata': {'name': 'n'}, 'spec': {'taints': list(taints)},
            'status': {'conditions': [{'type': t, 'status': s, 'lastHeartbeatTime': 'x'} for t, s in conditions]}}


CHECKED = ('KernelDeadlock', 'DiskPressure')


@pytest.mark.parametrize('the_node, healthy, reachable', [
    (node(('Ready', 'True')), True, True),
    (node(('Ready', 'True'), ('DiskPressure', 'True')), False, True),      # a live kubelet reporting trouble
    (node(('Ready', 'True'), ('MemoryPressure', 'True')), True, True),     # not a checked condition
    (node(('Ready', 'True'), ('DiskPressure', 'Unknown')), False, True),   # anything but False is bad (MCM)
    (node(('Ready', 'True'), ('DiskPressure', '')), False, True),
    (node(('Ready', 'True'), ('DiskPressure', 'False'), ('KernelDeadlock', 'False')), True, True),
    (node(('Ready', 'False')), False, True),
    (node(('Ready', 'Unknown')), False, False),                            # the kubelet stopped talking
    (node(), False, True),
    (None, False, False),
])
def test_health_from_node_conditions(the_node, healthy, reachable):
    verdict = health.judge(the_node, CHECKED)
    assert (verdict.healthy, verdict.reachable) == (healthy, reachable)


def test_an_unknown_condition_is_named_in_the_verdict():
    assert health.judge(node(('Ready', 'True'), ('DiskPressure', 'Unknown')), CHECKED).describe() == 'DiskPressure=Unknown'


def test_critical_components_taint_and_conditions_without_heartbeats():
    tainted = node(('Ready', 'True'), taints=[{'key': 'node.gardener.cloud/critical-components-not-ready',
                                               'effect': 'NoSchedule'}])
    assert health.has_critical_components_taint(tainted)
    assert not health.has_critical_components_taint(node(('Ready', 'True')))
    assert health.status_conditions(tainted) == [{'type': 'Ready', 'status': 'True'}]
    assert health.same_conditions(health.status_conditions(tainted), tainted['status']['conditions'])


# --- GetMachineStatus from one listing -----------------------------------------------------------------

def m(uid='u1', name='m1', provider_id=''):
    return MachineContext('ns', name, uid, provider_id)


def test_lookup_by_owner_tag_then_name_then_provider_id():
    inv = Inventory([VM('aws:///r/i-1', 'n1', 'm1', 'u1'), VM('aws:///r/i-2', 'n2', 'legacy', ''),
                     VM('aws:///r/i-3', 'n3', 'x', 'u9', state=VMState.TERMINATED)], 0, 1)
    assert inv.lookup(m()).vm.provider_id == 'aws:///r/i-1'
    assert inv.lookup(m('u2', 'legacy')).vm.provider_id == 'aws:///r/i-2'      # made by MCM: Name tag only
    assert inv.lookup(m('u2', 'other')).code == Code.NOT_FOUND
    assert inv.lookup(m('u2', 'other', 'aws:///r/i-3')).vm.state == VMState.TERMINATED
    assert inv.lookup(m('u9', 'x')).vm.state == VMState.TERMINATED            # still listed: evidence


def test_two_live_vms_for_one_machine_are_out_of_range_and_a_foreign_name_match_is_not_ours():
    inv = Inventory([VM('p1', owner_uid='u1'), VM('p2', owner_uid='u1')], 0, 1)
    lookup = inv.lookup(m())
    assert (lookup.code, lookup.candidates, lookup.vm) == (Code.OUT_OF_RANGE, 2, None)
    inv = Inventory([VM('p1', machine_name='m1', owner_uid='someone-else')], 0, 1)
    assert inv.lookup(m()).code == Code.NOT_FOUND


def test_a_failed_listing_answers_its_error_code():
    inv = Inventory([], 0, 1, DriverError(Code.THROTTLED, 'slow down'))
    assert not inv.ok and inv.lookup(m()).code == Code.THROTTLED


def test_answers_the_flow_goes_on_with_are_not_failures():
    """The failure counter follows the table: Unimplemented from InitializeMachine (nothing to initialize) or NotFound
    from a delete are answers MCM goes on with; every call of a 100-machine scale-out would count otherwise."""
    assert not is_failure(Call.INITIALIZE, Code.UNIMPLEMENTED)
    assert not is_failure(Call.DELETE, Code.NOT_FOUND)
    assert not is_failure(Call.STATUS, Code.NOT_FOUND)
    assert not is_failure(Call.CREATE, Code.OK)
    assert is_failure(Call.CREATE, Code.THROTTLED)
    assert is_failure(Call.CREATE, Code.INVALID_ARGUMENT)
    assert is_failure(Call.INITIALIZE, Code.UNINITIALIZED)
    assert is_failure(Call.STATUS, Code.OUT_OF_RANGE)


# --- what a plan asks of the shells --------------------------------------------------------------------

def test_creates_and_deletions_before_the_vm_is_deleted_may_call_the_cloud():
    """(moved here from the controller's tests with MachinePlan.calls_cloud)"""
    assert MachinePlan('ns/m', 'u', call=Call.CREATE).calls_cloud(deleting=False)
    assert not MachinePlan('ns/m', 'u', status={'currentStatus': {'phase': 'Running'}}).calls_cloud(deleting=False)
    for step in (Step.GET_VM_STATUS, Step.INITIATE_DRAIN, Step.DELETE_VOLUME_ATTACHMENTS, Step.INITIATE_VM_DELETION, None):
        assert MachinePlan('ns/m', 'u', action=ClusterAction.DRAIN, step=step).calls_cloud(deleting=True), step
    for step in (Step.INITIATE_NODE_DELETION, Step.INITIATE_FINALIZER_REMOVAL):
        assert not MachinePlan('ns/m', 'u', action=ClusterAction.DELETE_NODE, step=step).calls_cloud(deleting=True), step


def test_retry_delays_are_the_settings_periods_an_exact_delay_or_a_jittered_throttle():
    s = Settings(short_retry=5.0, medium_retry=180.0, long_retry=600.0, resource_exhausted_retry=900.0)
    rng = random.Random(7)
    assert [retry_delay(r, s, rng) for r in (Retry.SHORT, Retry.MEDIUM, Retry.LONG, Retry.RESOURCE_EXHAUSTED)] == [
        5.0, 180.0, 600.0, 900.0]
    assert retry_delay(Retry.CONFLICT, s, rng) == 0.2
    throttled = [retry_delay(Retry.THROTTLED, s, rng) for _unused in range(50)]
    assert all(1.0 <= d <= 5.0 for d in throttled) and len(set(throttled)) > 1
    assert retry_delay(Retry.LONG, s, rng, retry_after=42.0) == 42.0          # an exact delay wins over the class
    assert retry_delay(Retry.LONG, s, rng, retry_after=0.01, floor=0.2) == 0.2


def test_set_and_deployment_plans_have_work_only_when_they_write_something():
    assert not SetPlan('ns/s', 'u').has_work and not SetPlan('ns/s', 'u', waiting='frozen').has_work
    for fields in ({'create': 1}, {'delete': ['m']}, {'adopt': ['m']}, {'status': {'replicas': 1}},
                   {'metadata': {'labels': {}}}, {'remove_finalizer': True}, {'events': [Event('R', 'm')]}):
        assert SetPlan('ns/s', 'u', **fields).has_work, fields
    assert not DeploymentPlan('ns/d', 'u').has_work
    for fields in ({'create_set': {'metadata': {}}}, {'set_patches': {'s': {}}}, {'delete_sets': ['s']},
                   {'adopt_sets': ['s']}, {'patch': {'spec': {}}}, {'status': {'replicas': 1}},
                   {'remove_finalizer': True}, {'events': [Event('R', 'm')]}):
        assert DeploymentPlan('ns/d', 'u', **fields).has_work, fields
