"""The sabakan modules in real ansible-playbook runs against the lab sabakan server over HTTP.

Machine failures, retirements and outages are made on the server (states, its clock, fault modes);
every assertion reads what the module returned and what is on disk.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from types import SimpleNamespace

import pytest
import yaml

from support.ansible import local_play, run_playbook


from lab.sabakan.datacenter import generate_datacenter

# Seed 000's example: control planes on compute servers, workers compute:storage:gpu = 6:3:1.
TEMPLATE_631 = {
    'name': 'cluster',
    'nodes': [
        {'user': 'cybozu', 'control_plane': True, 'labels': {'cke.cybozu.com/role': 'compute'}},
        {'user': 'cybozu', 'labels': {'cke.cybozu.com/role': 'compute', 'cke.cybozu.com/weight': '6.0'}},
        {'user': 'cybozu', 'labels': {'cke.cybozu.com/role': 'storage', 'cke.cybozu.com/weight': '3.0'},
         'taints': [{'key': 'cke.cybozu.com/role', 'value': 'storage', 'effect': 'NoExecute'}]},
        {'user': 'cybozu', 'labels': {'cke.cybozu.com/role': 'gpu', 'cke.cybozu.com/weight': '1.0'},
         'taints': [{'key': 'cke.cybozu.com/role', 'value': 'gpu', 'effect': 'PreferNoSchedule'}]},
    ],
    'service_subnet': '10.68.0.0/16',
}
CONSTRAINTS = {'control-plane-count': 3, 'minimum-workers': 10}
STATE_TAINT = 'cke.cybozu.com/state'


@pytest.fixture
def dc(sabakan_server):
    """4 racks x 10 machines (1 boot + 3 compute, 3 storage, 3 gpu per rack), all HEALTHY."""
    sabakan_server.set_machines(generate_datacenter(4, 10, seed=7, now=sabakan_server.now(),
                                                    roles=('compute', 'storage', 'gpu')))
    return sabakan_server


@pytest.fixture
def files(tmp_path):
    template = tmp_path / 'template.yml'
    template.write_text(yaml.safe_dump(TEMPLATE_631))
    return {'cluster': str(tmp_path / 'cluster.yml'), 'template': str(template), 'dir': tmp_path}


def cluster_args(server, files, **extra):
    args = {'url': server.url, 'cluster_file': files['cluster'], 'template_file': files['template'],
            'constraints': CONSTRAINTS}
    args.update(extra)
    return args


def run_cluster(server, files, *, check=False, diff=False, **extra):
    """One sabakan_cluster task; returns (PlaybookResult, the task's result)."""
    play = local_play([{'name': 'cluster', 'steward.cluster.sabakan_cluster': cluster_args(server, files, **extra)}])
    result = run_playbook(play, check=check, diff=diff)
    return result, result.result('cluster')


def read_cluster(files):
    with open(files['cluster']) as handle:
        return yaml.safe_load(handle)


def snapshot(path):
    """Bytes and mtime of a file (None when absent), to prove a run left it alone."""
    if not os.path.exists(path):
        return None
    with open(path, 'rb') as handle:
        return handle.read(), os.stat(path).st_mtime_ns


def serial_of(server, address):
    return next(m['spec']['serial'] for m in server.machines() if m['spec']['ipv4'][0] == address)


def workers(cluster):
    return [n for n in cluster['nodes'] if not n['control_plane']]


def state_taint(node):
    return next(('%s:%s' % (t['value'], t['effect']) for t in node['taints'] if t['key'] == STATE_TAINT), None)


# --- sabakan_cluster --------------------------------------------------------------------------
def test_generate_the_631_example_then_second_run_changes_nothing(dc, files):
    run, res = run_cluster(dc, files)
    assert run.rc == 0, res
    assert res['changed'] is True and res['operation'] == 'new'
    assert res['machine_count'] == 36  # 40 machines minus the 4 boot servers
    cluster = read_cluster(files)
    assert res['cluster'] == cluster
    cps = [n for n in cluster['nodes'] if n['control_plane']]
    assert len(cps) == 3
    assert {n['labels']['cke.cybozu.com/role'] for n in cps} == {'compute'}
    assert len({n['labels']['cke.cybozu.com/rack'] for n in cps}) == 3  # spread over racks
    assert all(n['labels']['node-role.kubernetes.io/master'] == 'true' for n in cps)
    assert Counter(n['labels']['cke.cybozu.com/role'] for n in workers(cluster)) == {'compute': 6, 'storage': 3, 'gpu': 1}
    for node in workers(cluster):
        role = node['labels']['cke.cybozu.com/role']
        if role == 'compute':
            assert node['taints'] == []
        else:
            assert node['taints'][0]['key'] == 'cke.cybozu.com/role' and node['taints'][0]['value'] == role
    assert sorted(c['change'] for c in res['node_changes']) == ['added'] * 13
    before = snapshot(files['cluster'])

    run, res = run_cluster(dc, files)
    assert run.rc == 0 and res['changed'] is False
    assert res['operation'] == '' and res['node_changes'] == [] and res['changes'] == []
    assert res['cluster'] == cluster
    assert snapshot(files['cluster']) == before


def test_check_mode_with_diff_shows_node_changes_and_writes_nothing(dc, files):
    run, res = run_cluster(dc, files, check=True, diff=True)
    assert run.rc == 0 and res['changed'] is True and res['operation'] == 'new'
    assert res['diff']['before'] == '' and 'cke.cybozu.com/role: compute' in res['diff']['after']
    assert not os.path.exists(files['cluster'])

    run_cluster(dc, files)
    before = snapshot(files['cluster'])
    victim = workers(read_cluster(files))[0]['address']
    dc.set_state(serial_of(dc, victim), 'RETIRING')
    run, res = run_cluster(dc, files, check=True, diff=True)
    assert run.rc == 0 and res['changed'] is True
    # A RETIRING worker is no longer HEALTHY: "increase worker" fires first (before "taint nodes") and
    # the rebuilt nodes carry the state taint.
    assert res['operation'] == 'increase worker'
    assert len(res['changes']) == 1 and res['changes'][0].startswith('add new worker: ')
    added = res['changes'][0].split(': ')[1]
    assert sorted(res['node_changes'], key=lambda c: c['change']) == [
        {'address': added, 'change': 'added', 'detail': 'worker'},
        {'address': victim, 'change': 'retainted', 'detail': 'none -> retiring:NoExecute'}]
    assert res['diff']['before'] == before[0].decode()
    assert 'value: retiring' in res['diff']['after'] and 'value: retiring' not in res['diff']['before']
    assert snapshot(files['cluster']) == before


def test_retiring_worker_is_tainted_then_removed_after_the_wait(dc, files):
    keep_retired = {'notHaving': {'roles': ['boot']}}  # RETIRED machines stay visible, so the wait applies
    run_cluster(dc, files, variables=keep_retired)
    victim = workers(read_cluster(files))[-1]['address']
    serial = serial_of(dc, victim)

    dc.set_state(serial, 'RETIRING')
    run, res = run_cluster(dc, files, variables=keep_retired)
    assert res['changed'] and res['operation'] == 'increase worker'  # 9 healthy workers < minimum-workers
    node = next(n for n in read_cluster(files)['nodes'] if n['address'] == victim)
    assert state_taint(node) == 'retiring:NoExecute'
    assert len(workers(read_cluster(files))) == 11

    dc.set_state(serial, 'RETIRED')
    run, res = run_cluster(dc, files, variables=keep_retired)
    assert res['operation'] == 'taint nodes'
    assert res['node_changes'] == [{'address': victim, 'change': 'retainted',
                                    'detail': 'retiring:NoExecute -> retired:NoExecute'}]
    run, res = run_cluster(dc, files, variables=keep_retired)
    assert res['changed'] is False  # retired for less than 300 s: kept

    dc.advance(400)
    run, res = run_cluster(dc, files, variables=keep_retired)
    assert run.rc == 0 and res['changed'] is True
    assert res['operation'] == 'decrease worker'
    assert res['changes'][0] == 'remove retired worker: ' + victim
    assert res['node_changes'] == [{'address': victim, 'change': 'removed', 'detail': 'worker'}]
    cluster = read_cluster(files)
    assert victim not in [n['address'] for n in cluster['nodes']]
    assert len(workers(cluster)) == 10
    run, res = run_cluster(dc, files, variables=keep_retired)
    assert res['changed'] is False


def test_with_default_variables_a_retired_machine_is_removed_as_non_existent(dc, files):
    run_cluster(dc, files)
    victim = workers(read_cluster(files))[0]['address']
    dc.set_state(serial_of(dc, victim), 'RETIRED')
    run, res = run_cluster(dc, files)
    assert res['operation'] == 'remove non-existent node'
    assert 'remove non-existent worker: ' + victim in res['changes']
    assert victim not in [n['address'] for n in read_cluster(files)['nodes']]


def test_failed_control_plane_is_replaced(dc, files):
    run_cluster(dc, files)
    bad = [n['address'] for n in read_cluster(files)['nodes'] if n['control_plane']][0]
    dc.set_state(serial_of(dc, bad), 'UNREACHABLE')
    run, res = run_cluster(dc, files, diff=True)
    assert res['operation'] == 'replace control plane'
    kinds = {(c['address'], c['change']) for c in res['node_changes']}
    assert (bad, 'demoted') in kinds
    assert any(change == 'added' for _addr, change in kinds)
    cluster = read_cluster(files)
    assert len([n for n in cluster['nodes'] if n['control_plane']]) == 3
    assert bad in [n['address'] for n in workers(cluster)]


def test_too_many_non_existent_control_planes_fails_and_keeps_the_file(dc, files):
    run_cluster(dc, files)
    before = snapshot(files['cluster'])
    gone = [n['address'] for n in read_cluster(files)['nodes'] if n['control_plane']][:2]
    dc.set_machines([m for m in dc.machines() if m['spec']['ipv4'][0] not in gone])
    run, res = run_cluster(dc, files)
    assert run.rc != 0 and res['failed']
    assert res['error'] == 'TooManyNonExistent'
    assert res['msg'].startswith('TooManyNonExistent: too many non-existent control plane nodes: 2 of 3')
    assert all(address in res['msg'] for address in gone)
    assert 'restore the missing machines' in res['msg']
    assert snapshot(files['cluster']) == before


def test_a_cluster_that_violates_the_constraints_fails_and_keeps_the_file(dc, files):
    """The module plans like the controller: no Update step removes surplus workers, so a maximum below the
    current count is a ConstraintViolation (CKE's Constraints.Check), not a silent success."""
    run_cluster(dc, files)
    before = snapshot(files['cluster'])
    run, res = run_cluster(dc, files, constraints={'control-plane-count': 3, 'minimum-workers': 4, 'maximum-workers': 4})
    assert run.rc != 0 and res['error'] == 'ConstraintViolation'
    assert res['msg'] == ('ConstraintViolation: the cluster does not satisfy the constraints: number of worker nodes '
                          'exceeds the maximum')
    assert snapshot(files['cluster']) == before


def test_not_enough_machines_fails_with_not_available(dc, files):
    run, res = run_cluster(dc, files, constraints={'control-plane-count': 3, 'minimum-workers': 40})
    assert res['error'] == 'NotAvailable' and res['msg'].startswith('NotAvailable: ')
    assert not os.path.exists(files['cluster'])


@pytest.mark.parametrize('mode, seconds, timeout, error', [
    ('http500', 0, 30, 'SabakanUnavailable'),
    ('graphql_error', 0, 30, 'SabakanQueryError'),
    ('garbage', 0, 30, 'SabakanResponseError'),
    ('slow', 5, 1, 'SabakanUnavailable'),
])
def test_sabakan_outage_fails_and_keeps_the_file(dc, files, mode, seconds, timeout, error):
    run_cluster(dc, files)
    before = snapshot(files['cluster'])
    dc.set_state(serial_of(dc, workers(read_cluster(files))[0]['address']), 'RETIRING')  # a change is due
    dc.set_fault(mode, seconds)
    run, res = run_cluster(dc, files, timeout=timeout)
    assert run.rc != 0 and res['failed']
    assert res['error'] == error and res['msg'].startswith(error + ': ')
    assert dc.url in res['msg']
    assert snapshot(files['cluster']) == before
    dc.set_fault('none')
    run, res = run_cluster(dc, files, timeout=timeout)
    assert run.rc == 0 and res['changed'] and snapshot(files['cluster']) != before


def test_unreachable_sabakan_fails(files):
    run, res = run_cluster(SimpleNamespace(url='http://127.0.0.1:9/graphql'), files, timeout=2)
    assert res['error'] == 'SabakanUnavailable' and '127.0.0.1:9' in res['msg']
    assert not os.path.exists(files['cluster'])


def test_malformed_template_file_error_names_the_file_and_line(dc, files):
    with open(files['template'], 'w') as handle:
        handle.write('name: cluster\nnodes:\n  - user: cybozu\n   control_plane: true\n')
    run, res = run_cluster(dc, files)
    assert res['failed'] and res['error'] == 'FileError'
    assert res['msg'].startswith('FileError: template_file: template file %s: line 4, column' % files['template'])
    assert res['field'] == 'template_file'
    assert not os.path.exists(files['cluster'])


def test_invalid_template_error_names_the_file(dc, files):
    bad = dict(TEMPLATE_631, nodes=TEMPLATE_631['nodes'] + [{'user': 'x', 'control_plane': True}])
    with open(files['template'], 'w') as handle:
        yaml.safe_dump(bad, handle)
    run, res = run_cluster(dc, files)
    assert res['error'] == 'TemplateError'
    assert res['msg'].startswith('TemplateError: template_file: template file %s: template.nodes: template must contain '
                                 'only one control plane node' % files['template'])


def test_bad_options_fail_before_anything(dc, files):
    run, res = run_cluster(dc, files, constraints={'control-plane-cont': 3})
    assert res['error'] == 'ConstraintsError' and 'control-plane-cont' in res['msg']
    assert (res['field'], res['rule']) == ('constraints', 'known')
    run, res = run_cluster(dc, files, variables={'having': {'states': ['healthy']}})
    assert res['error'] == 'SabakanVariablesError' and "did you mean 'HEALTHY'" in res['msg']
    run, res = run_cluster(dc, files, now='yesterday')
    assert res['error'] == 'MachineError' and 'now' in res['msg']
    assert not os.path.exists(files['cluster'])


def test_offline_planning_from_a_saved_machine_list_matches_the_live_run(dc, files, tmp_path):
    now = '2026-01-01T00:00:00Z'
    run, res = run_cluster(dc, files, now=now)
    live = read_cluster(files)
    info = run_playbook(local_play([{'name': 'info', 'steward.cluster.sabakan_machine_info': {
        'url': dc.url, 'preset': 'all'}}])).result('info')
    machines_file = tmp_path / 'machines.json'
    machines_file.write_text(json.dumps({'machines': info['machines']}))
    offline = dict(files, cluster=str(tmp_path / 'offline.yml'))
    play = local_play([{'name': 'cluster', 'steward.cluster.sabakan_cluster': {
        'machines_file': str(machines_file), 'now': now, 'cluster_file': offline['cluster'],
        'template_file': files['template'], 'constraints': CONSTRAINTS, 'mode': '0600'}}])
    res = run_playbook(play).result('cluster')
    assert res['changed'] and res['machine_count'] == 36  # boot servers filtered out locally
    assert read_cluster(offline) == live
    assert oct(os.stat(offline['cluster']).st_mode & 0o777) == '0o600'


def test_module_defaults_through_the_action_group(dc, files):
    play = local_play([{'name': 'cluster', 'steward.cluster.sabakan_cluster': {
        'cluster_file': files['cluster'], 'template_file': files['template'], 'constraints': CONSTRAINTS}}],
        module_defaults={'group/steward.cluster.sabakan': {'url': dc.url}})
    res = run_playbook(play).result('cluster')
    assert res['changed'] and res['operation'] == 'new'


# --- sabakan_repair ---------------------------------------------------------------------------
def repair(server, tmp_path, *, check=False, diff=False, **extra):
    args = {'url': server.url, 'queue_file': str(tmp_path / 'repair-queue.yml'),
            'constraints': {'maximum-repair-queue-entries': 3}}
    args.update(extra)
    run = run_playbook(local_play([{'name': 'repair', 'steward.cluster.sabakan_repair': args}]), check=check, diff=diff)
    return run, run.result('repair')


def fail_machines(server, count):
    """Mark the first `count` non-boot machines UNHEALTHY / UNREACHABLE (alternating); returns them."""
    chosen = [m for m in server.machines() if m['spec']['role'] != 'boot'][:count]
    for position, machine in enumerate(chosen):
        server.set_state(machine['spec']['serial'], 'UNHEALTHY' if position % 2 == 0 else 'UNREACHABLE')
    return chosen


def test_repair_queues_failed_machines_once(sabakan_server, tmp_path):
    failed = fail_machines(sabakan_server, 2)
    run, res = repair(sabakan_server, tmp_path, diff=True)
    assert run.rc == 0 and res['changed'] is True
    assert res['queue_length'] == 2 and res['machine_count'] == 2 and res['blocked'] == ''
    expected = [{'index': i, 'address': m['spec']['ipv4'][0], 'machine_type': m['spec']['bmc']['bmcType'],
                 'operation': op, 'serial': m['spec']['serial'], 'status': 'queued'}
                for i, (m, op) in enumerate(zip(failed, ['unhealthy', 'unreachable']))]
    assert [{k: v for k, v in e.items() if k != 'created'} for e in res['entries']] == expected
    with open(str(tmp_path / 'repair-queue.yml')) as handle:
        queue = yaml.safe_load(handle)
    assert queue['write_index'] == 2 and queue['entries'] == res['entries']
    assert res['diff']['before'] == '' and 'write_index: 2' in res['diff']['after']
    before = snapshot(str(tmp_path / 'repair-queue.yml'))

    run, res = repair(sabakan_server, tmp_path)
    assert res['changed'] is False and res['entries'] == [] and res['queue_length'] == 2
    assert {s['reason'] for s in res['skipped_machines']} == {'a repair entry for this address already exists'}
    assert snapshot(str(tmp_path / 'repair-queue.yml')) == before


def test_repair_limit_queues_nothing_at_all(sabakan_server, tmp_path):
    fail_machines(sabakan_server, 2)
    run, res = repair(sabakan_server, tmp_path, constraints={'maximum-repair-queue-entries': 1})
    assert run.rc == 0 and res['changed'] is False and res['entries'] == []
    assert res['blocked'].startswith('too many repair requests: 0 existing entries + 2 new failures > '
                                     'maximum-repair-queue-entries=1')
    assert any('too many repair requests' in w for w in res.get('warnings', []))
    assert not os.path.exists(str(tmp_path / 'repair-queue.yml'))
    # With the default limit (0) nothing is ever queued either.
    run, res = repair(sabakan_server, tmp_path, constraints={})
    assert res['entries'] == [] and 'maximum-repair-queue-entries=0' in res['blocked']


def test_repair_existing_entries_count_toward_the_limit(sabakan_server, tmp_path):
    first = fail_machines(sabakan_server, 2)
    repair(sabakan_server, tmp_path)
    others = [m for m in sabakan_server.machines() if m['spec']['role'] != 'boot'][2:4]
    for machine in others:
        sabakan_server.set_state(machine['spec']['serial'], 'UNHEALTHY')
    run, res = repair(sabakan_server, tmp_path)  # 2 existing + 2 new > 3
    assert res['changed'] is False and '2 existing entries + 2 new failures' in res['blocked']
    with open(str(tmp_path / 'repair-queue.yml')) as handle:
        assert [e['serial'] for e in yaml.safe_load(handle)['entries']] == [m['spec']['serial'] for m in first]


def test_repair_check_mode_shows_entries_and_writes_nothing(sabakan_server, tmp_path):
    fail_machines(sabakan_server, 1)
    run, res = repair(sabakan_server, tmp_path, check=True, diff=True)
    assert res['changed'] is True and len(res['entries']) == 1 and res['queue_length'] == 1
    assert 'status: queued' in res['diff']['after']
    assert not os.path.exists(str(tmp_path / 'repair-queue.yml'))


def test_repair_waits_for_rebooting_and_out_of_cluster_machines(sabakan_server, tmp_path):
    candidates = [m for m in sabakan_server.machines() if m['spec']['role'] != 'boot'][:3]
    member, rebooting, outsider = (m['spec']['ipv4'][0] for m in candidates)
    for machine in candidates:
        sabakan_server.set_state(machine['spec']['serial'], 'UNREACHABLE')
    cluster_file = tmp_path / 'cluster.yml'
    cluster_file.write_text(yaml.safe_dump({'name': 'c', 'service_subnet': '10.68.0.0/16', 'nodes': [
        {'address': member, 'user': 'cybozu', 'control_plane': True},
        {'address': rebooting, 'user': 'cybozu', 'control_plane': False}]}))
    reboot_file = tmp_path / 'reboot-queue.yml'
    reboot_file.write_text(yaml.safe_dump({'entries': [{'node': rebooting, 'status': 'rebooting'}]}))
    constraints = {'maximum-repair-queue-entries': 5, 'wait-seconds-to-repair-rebooting': 600}
    run, res = repair(sabakan_server, tmp_path, constraints=constraints, cluster_file=str(cluster_file),
                      reboot_queue_file=str(reboot_file))
    assert [e['address'] for e in res['entries']] == [member]
    reasons = {s['address']: s['reason'] for s in res['skipped_machines']}
    assert reasons[rebooting].startswith('rebooting; unreachable for')
    assert reasons[outsider].startswith('not a cluster node; unreachable for')

    sabakan_server.advance(700)
    run, res = repair(sabakan_server, tmp_path, constraints=constraints, cluster_file=str(cluster_file),
                      reboot_queue_file=str(reboot_file))
    assert sorted(e['address'] for e in res['entries']) == sorted([rebooting, outsider])
    assert [e['index'] for e in res['entries']] == [1, 2] and res['queue_length'] == 3


def test_repair_bad_files_fail_clearly(sabakan_server, tmp_path):
    queue = tmp_path / 'repair-queue.yml'
    queue.write_text('entries:\n- {index: 0}\n')
    run, res = repair(sabakan_server, tmp_path)
    assert res['error'] == 'FileError'
    assert res['msg'] == 'FileError: queue_file: repair queue file %s: entries[0].address: expected the machine ' \
                         'address (a non-empty string), got None' % queue
    assert res['field'] == 'queue_file'
    queue.unlink()
    run, res = repair(sabakan_server, tmp_path, reboot_queue_file=str(tmp_path / 'missing.yml'))
    assert res['error'] == 'FileError' and 'missing.yml: does not exist' in res['msg']
    assert not queue.exists()


# --- sabakan_machine_info ---------------------------------------------------------------------
def test_machine_info_returns_machines_and_counts(sabakan_server):
    sabakan_server.set_state(next(m['spec']['serial'] for m in sabakan_server.machines()
                                  if m['spec']['role'] == 'ss'), 'UNHEALTHY')
    tasks = [
        {'name': 'default', 'steward.cluster.sabakan_machine_info': {'url': sabakan_server.url}},
        {'name': 'all', 'steward.cluster.sabakan_machine_info': {'url': sabakan_server.url, 'preset': 'all'}},
        {'name': 'repair', 'steward.cluster.sabakan_machine_info': {'url': sabakan_server.url, 'preset': 'repair'}},
        {'name': 'rack0', 'steward.cluster.sabakan_machine_info': {
            'url': sabakan_server.url, 'variables': {'having': {'racks': [0]}}}},
    ]
    run = run_playbook(local_play(tasks), check=True)
    assert run.rc == 0 and run.changed() == 0
    default = run.result('default')
    assert default['count'] == 28 == len(default['machines'])  # 4 x 8 minus the boot servers
    assert default['by_role'] == {'cs': 14, 'ss': 14}
    assert default['by_state'] == {'HEALTHY': 27, 'UNHEALTHY': 1}
    assert default['variables'] == {'having': None, 'notHaving': {'roles': ['boot'], 'states': ['RETIRED']}}
    machine = default['machines'][0]
    assert set(machine['spec']) >= {'serial', 'rack', 'role', 'ipv4', 'registerDate', 'retireDate', 'bmc'}
    assert set(machine['status']) == {'state', 'timestamp', 'duration'}
    assert run.result('all')['count'] == 32 and run.result('all')['by_role']['boot'] == 4
    assert run.result('repair')['count'] == 1
    assert {m['spec']['rack'] for m in run.result('rack0')['machines']} == {0}
    assert run.result('rack0')['count'] == 7


def test_machine_info_failure(sabakan_server):
    sabakan_server.set_fault('graphql_error')
    run = run_playbook(local_play([{'name': 'info', 'steward.cluster.sabakan_machine_info': {'url': sabakan_server.url}}]))
    res = run.result('info')
    assert run.rc != 0 and res['error'] == 'SabakanQueryError' and 'injected GraphQL error' in res['msg']
