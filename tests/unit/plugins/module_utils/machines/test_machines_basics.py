"""Error-code table, settings and per-machine overrides, Node health, and GetMachineStatus from one listing."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.machines import health
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import (
    NEXT_STEP, Call, Code, Next, Retry, auto_retried, is_failure, next_step)
from ansible_collections.steward.cluster.plugins.module_utils.machines.config import (
    Settings, check_settings, machine_timeouts, parse_node_conditions)
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import Step
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import VM, MachineContext, VMState
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import DriverError
from ansible_collections.steward.cluster.plugins.module_utils.machines.inventory import Inventory


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
    (node(('Ready', 'False')), False, True),
    (node(('Ready', 'Unknown')), False, False),                            # the kubelet stopped talking
    (node(), False, True),
    (None, False, False),
])
def test_health_from_node_conditions(the_node, healthy, reachable):
    verdict = health.judge(the_node, CHECKED)
    assert (verdict.healthy, verdict.reachable) == (healthy, reachable)


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
