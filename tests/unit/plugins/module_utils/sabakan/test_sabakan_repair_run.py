# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The repair planner (CKE's repairOps rules) and repair_exec.apply with real commands and recording ports."""

from __future__ import annotations

import sys
from typing import Any, Dict, List, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.sabakan import repair_exec
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.repair_config import load_repair_config
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.repair_run import (
    DRAINING, FAILED, PROCESSING, QUEUED, SUCCEEDED, WAITING, WATCHING, Action, Entry, finished_to_delete, plan_pass,
)

NOW = 1_000_000.0


def config(**extra: Any):
    data = {'repair_procedures': [{'machine_types': ['qemu'], 'repair_operations': [{
        'operation': 'unhealthy',
        'repair_steps': [{'repair_command': ['true'], 'need_drain': True, 'watch_seconds': 60},
                         {'repair_command': ['true'], 'watch_seconds': 10}],
        'health_check_command': ['sh', '-c', 'echo true']}]}]}
    data.update(extra)
    return load_repair_config(data)


def entry(name: str, **kw: Any) -> Entry:
    fields: Dict[str, Any] = dict(address='10.0.0.%s' % name[-1], machine_type='qemu', operation='unhealthy',
                                  node='node-' + name, created=float(ord(name[-1])))
    fields.update(kw)
    return Entry(name=name, **fields)


def actions(plan) -> Dict[str, Tuple[Action, int]]:
    return {d.entry.name: (d.action, d.step) for d in plan.decisions}


def test_queued_entry_drains_first_when_the_step_needs_it_and_executes_when_not_a_node():
    plan = plan_pass([entry('e1'), entry('e2', node=None)], config(max_concurrent_repairs=2), {}, now=NOW)
    assert actions(plan) == {'e1': (Action.DRAIN, 0), 'e2': (Action.EXECUTE, 0)}


def test_healthy_machine_finishes_at_once_whatever_its_step_and_outside_the_limit():
    entries = [entry('e1', status=PROCESSING, step=1, step_status=WATCHING, last_transition=NOW),
               entry('e2', status=QUEUED), entry('e3', status=QUEUED)]
    plan = plan_pass(entries, config(), {'e1': True, 'e2': True, 'e3': False}, now=NOW)
    assert actions(plan) == {'e1': (Action.SUCCEED, 1), 'e2': (Action.SUCCEED, 0), 'e3': (Action.DRAIN, 0)}


def test_max_concurrent_repairs_processing_first_then_oldest_queued():
    entries = [entry('e1'), entry('e2'), entry('e3', status=PROCESSING, step_status=WATCHING, last_transition=NOW)]
    plan = plan_pass(entries, config(max_concurrent_repairs=2), {}, now=NOW)
    got = actions(plan)
    assert got['e3'] == (Action.WAIT, 0) and got['e1'] == (Action.DRAIN, 0)     # e3 holds a slot while watching
    assert got['e2'] == (Action.WAIT, 0) and 'max_concurrent_repairs=2' in plan.decisions[-1].reason
    assert plan.active == 2


def test_one_api_server_at_a_time_and_api_servers_first():
    entries = [entry('e1'), entry('e2', api_server=True), entry('e3', api_server=True)]
    plan = plan_pass(entries, config(max_concurrent_repairs=3), {}, now=NOW)
    got = actions(plan)
    assert got == {'e2': (Action.DRAIN, 0), 'e3': (Action.WAIT, 0), 'e1': (Action.DRAIN, 0)}
    assert [d.entry.name for d in plan.decisions][:2] == ['e2', 'e3']


def test_watch_expired_moves_to_the_next_step_at_once_and_past_the_last_step_fails():
    in_watch = entry('e1', status=PROCESSING, step=0, step_status=WATCHING, last_transition=NOW - 30)
    assert actions(plan_pass([in_watch], config(), {'e1': False}, now=NOW))['e1'] == (Action.WAIT, 0)
    expired = entry('e1', status=PROCESSING, step=0, step_status=WATCHING, last_transition=NOW - 61)
    assert actions(plan_pass([expired], config(), {'e1': False}, now=NOW))['e1'] == (Action.EXECUTE, 1)
    last = entry('e1', status=PROCESSING, step=1, step_status=WATCHING, last_transition=NOW - 11)
    decision = plan_pass([last], config(), {'e1': None}, now=NOW).decisions[0]
    assert (decision.action, decision.step) == (Action.FAIL, 2) and 'after all 2 repair step(s)' in decision.reason


def test_drain_back_off_neither_acts_nor_takes_a_slot_and_a_stale_drain_times_out():
    backing = entry('e1', status=PROCESSING, step_status=WAITING, drain_backoff_expire=NOW + 100)
    plan = plan_pass([backing, entry('e2')], config(), {}, now=NOW)
    assert actions(plan) == {'e1': (Action.WAIT, 0), 'e2': (Action.DRAIN, 0)}
    stale = entry('e1', status=PROCESSING, step_status=DRAINING, last_transition=NOW - 601)
    assert actions(plan_pass([stale], config(), {}, now=NOW))['e1'] == (Action.DRAIN_TIMEOUT, 0)
    fresh = entry('e1', status=PROCESSING, step_status=DRAINING, last_transition=NOW - 5)
    assert actions(plan_pass([fresh], config(), {}, now=NOW))['e1'] == (Action.DRAIN, 0)


def test_no_procedure_takes_no_slot_and_finished_entries_are_left_alone():
    entries = [entry('e1', machine_type='other'), entry('e2', status=SUCCEEDED), entry('e3', status=FAILED),
               entry('e4')]
    plan = plan_pass(entries, config(), {}, now=NOW)
    assert actions(plan) == {'e1': (Action.UNCONFIGURED, 0), 'e4': (Action.DRAIN, 0)}


def test_one_machine_one_repair():
    plan = plan_pass([entry('e1'), entry('x1')], config(max_concurrent_repairs=2), {}, now=NOW)
    assert sorted(a.value for a, _unused in actions(plan).values()) == ['drain', 'wait']


def test_finished_entries_are_deleted_only_after_the_retention():
    entries = [entry('e1', status=SUCCEEDED, last_transition=NOW - 100), entry('e2', status=FAILED, last_transition=NOW - 5),
               entry('e3', status=PROCESSING, last_transition=NOW - 1000)]
    assert finished_to_delete(entries, None, NOW) == []
    assert [e.name for e in finished_to_delete(entries, 60, NOW)] == ['e1']


# --- repair_exec.apply: real commands, recording ports ----------------------------------------------------
class Recorder(repair_exec.Ports):
    def __init__(self, drained: bool = True) -> None:
        self.saved: List[Dict[str, Any]] = []
        self.events: List[Tuple[str, str, bool]] = []
        self.drained = drained
        self.uncordoned: List[str] = []

    def save(self, entry, fields):
        self.saved.append(dict(fields))

    def event(self, entry, reason, message, warning=False):
        self.events.append((reason, message, warning))

    def drain(self, entry, config):
        return self.drained, True, 'node %s drained' % entry.node if self.drained else 'PDB refused'

    def uncordon(self, entry):
        self.uncordoned.append(entry.node)
        return 'Node %s uncordoned' % entry.node

    def sleep(self, seconds):
        return True

    def clock(self):
        return NOW


def one_step(command: List[str], **step: Any):
    return load_repair_config({'repair_procedures': [{'machine_types': ['qemu'], 'repair_operations': [{
        'operation': 'unhealthy', 'repair_steps': [dict({'repair_command': command, 'need_drain': True}, **step)],
        'health_check_command': ['sh', '-c', 'echo true']}]}]})


def test_drain_then_command_with_the_address_last_and_its_output_in_an_event():
    cfg = one_step([sys.executable, '-c', 'import sys; print("reset", sys.argv[-1])'])
    ports = Recorder()
    e = entry('e1')
    decision = plan_pass([e], cfg, {}, now=NOW).decisions[0]
    assert repair_exec.apply(decision, cfg, ports) == PROCESSING
    assert ports.saved[0]['step_status'] == DRAINING and ports.saved[-1]['step_status'] == WATCHING
    reasons = [r for r, _unused, _unused in ports.events]
    assert reasons == ['RepairDrained', 'RepairCommand']
    assert ports.events[1][1].endswith('reset 10.0.0.1') and '-c' not in ports.events[1][1]


def test_command_timeout_fails_after_retries_with_a_warning_naming_the_node():
    cfg = one_step(['sh', '-c', 'sleep 30'], command_timeout_seconds=1, command_retries=1, command_interval=1)
    ports = Recorder()
    decision = plan_pass([entry('e1')], cfg, {}, now=NOW).decisions[0]
    assert repair_exec.apply(decision, cfg, ports) == FAILED
    failed = [(r, m) for r, m, w in ports.events if w]
    assert [r for r, _unused in failed] == ['RepairCommandFailed', 'RepairCommandFailed', 'RepairFailed']
    assert all('Node node-e1' in m for _unused, m in failed) and 'attempt 2/2' in failed[1][1]
    assert ports.saved[-1]['status'] == FAILED and ports.uncordoned == []     # left cordoned


def test_failed_drain_uncordons_and_backs_off():
    cfg = one_step(['true'])
    ports = Recorder(drained=False)
    decision = plan_pass([entry('e1')], cfg, {}, now=NOW).decisions[0]
    assert repair_exec.apply(decision, cfg, ports, jitter=lambda: 0.5) == PROCESSING
    assert ports.uncordoned == ['node-e1']
    last = ports.saved[-1]
    assert last['step_status'] == WAITING and last['drain_backoff_count'] == 1
    assert last['drain_backoff_expire'] == NOW + 300 + 0.5 * 300


def test_success_runs_the_success_command_and_uncordons_what_the_repair_cordoned():
    data = {'repair_procedures': [{'machine_types': ['qemu'], 'repair_operations': [{
        'operation': 'unhealthy', 'repair_steps': [{'repair_command': ['true']}],
        'health_check_command': ['sh', '-c', 'echo true'], 'success_command': ['false']}]}]}
    cfg = load_repair_config(data)
    ports = Recorder()
    decision = plan_pass([entry('e1', status=PROCESSING, step_status=WATCHING)], cfg, {'e1': True}, now=NOW).decisions[0]
    assert repair_exec.apply(decision, cfg, ports, cordoned=True) == FAILED          # CKE: success_command failed
    data['repair_procedures'][0]['repair_operations'][0]['success_command'] = ['true']
    cfg = load_repair_config(data)
    ports = Recorder()
    assert repair_exec.apply(decision, cfg, ports, cordoned=True) == SUCCEEDED
    assert ports.uncordoned == ['node-e1'] and ports.saved[-1]['cordoned'] is False


def test_health_check_is_healthy_only_when_it_prints_true():
    cfg = one_step(['true'])
    operation = cfg.operation_for('qemu', 'unhealthy')
    assert repair_exec.health_check(operation, '10.0.0.1')[0] is True
    echo = load_repair_config({'repair_procedures': [{'machine_types': ['qemu'], 'repair_operations': [{
        'operation': 'unhealthy', 'repair_steps': [{'repair_command': ['true']}],
        'health_check_command': ['echo', 'true']}]}]}).operation_for('qemu', 'unhealthy')
    assert repair_exec.health_check(echo, '10.0.0.1')[0] is False    # prints "true 10.0.0.1": the address is last
    other = load_repair_config({'repair_procedures': [{'machine_types': ['qemu'], 'repair_operations': [{
        'operation': 'unhealthy', 'repair_steps': [{'repair_command': ['true']}],
        'health_check_command': ['sh', '-c', 'echo TRUE']}]}]}).operation_for('qemu', 'unhealthy')
    assert repair_exec.health_check(other, '10.0.0.1')[0] is False
    broken = load_repair_config({'repair_procedures': [{'machine_types': ['qemu'], 'repair_operations': [{
        'operation': 'unhealthy', 'repair_steps': [{'repair_command': ['true']}],
        'health_check_command': ['/nonexistent/check']}]}]}).operation_for('qemu', 'unhealthy')
    verdict, result = repair_exec.health_check(broken, '10.0.0.1')
    assert verdict is None and result.error
