"""The steward.cluster.etcd_upgrade playbook on members run by the etcd role (process mode): Debian's etcd 3.4 to the
wheel's 3.5 through real ansible-playbook runs while a client writes and reads; check mode first (plan, nothing
changed), then the upgrade (0 failed requests), then a second run that changes nothing. And a run SIGKILLed (with its
module) while the second member is down, started again: it finishes, and every member was started exactly once.

Members listen on 127.0.0.61-63 (standard ports, as if on separate hosts; no other test uses these addresses) and are
killed from their pid files at the end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
import yaml

from support.ansible import REPO, VENV_BIN, ansible_env, run_playbook
from support.etcd_rolling import LoadClient
from test_etcd_role import assert_ok, gateway, health, kill_by_pid_files, provision, total_changed, write_inventory

ETCD34 = os.path.join(REPO, '.build', 'etcd-3.4', 'etcd')
ETCD35 = os.path.join(REPO, '.build', 'etcd-3.5', 'etcd')
IPS = ['127.0.0.61', '127.0.0.62', '127.0.0.63']
pytestmark = pytest.mark.skipif(not (os.path.exists(ETCD34) and os.path.exists(ETCD35)),
                                reason='needs etcd 3.4 and 3.5 (make all)')


def versions():
    return [gateway(ip, '/v3/maintenance/status')['version'] for ip in IPS]


def members_on_34(base):
    """The inventory, each member with its own binary (what the role installs on a real host): the swap replaces it
    for that member only."""
    hosts = write_inventory(base, IPS)
    inventory = os.path.join(base, 'inventory.yml')
    with open(inventory) as f:
        data = yaml.safe_load(f)
    for name, host in data['etcd']['hosts'].items():
        own = os.path.join(base, name, 'bin', 'etcd')
        os.makedirs(os.path.dirname(own))
        os.symlink(ETCD34, own)
        host['etcd_binary'] = own
    with open(inventory, 'w') as f:
        yaml.safe_dump(data, f)
    return hosts, inventory


def health_of(host):
    return health(host['ansible_host'])


def starts(host):
    """How often etcd started with this log file: etcd logs one 'starting an etcd server' per start."""
    with open(host['etcd_log_file'], errors='replace') as f:
        return f.read().count('starting an etcd server')


def test_the_playbook_upgrades_34_to_35_without_a_failed_request(tmp_path):
    base = str(tmp_path)
    hosts, inventory = members_on_34(base)
    store = str(tmp_path / 'backups')
    os.makedirs(store)
    upgrade = {'etcd_upgrade_binary': ETCD35, 'etcd_backup_store': store}
    try:
        assert_ok(provision(base))
        assert all(v.startswith('3.4.') for v in versions())

        planned = run_playbook('steward.cluster.etcd_upgrade', inventory=inventory, extra_vars=upgrade, check=True)
        assert_ok(planned)
        assert all(v.startswith('3.4.') for v in versions())
        assert [n for _dir, _subdirs, files in os.walk(store) for n in files] == []   # check mode took no snapshot
        assert '"target_version": "3.5.1"' in planned.stdout and 'not recommended for production' in planned.stdout

        load = LoadClient(['http://%s:2379' % ip for ip in IPS], rate=100).start()
        try:
            done = run_playbook('steward.cluster.etcd_upgrade', inventory=inventory, extra_vars=upgrade)
        finally:
            load.stop()
        assert_ok(done)
        assert load.failed == [], load.failed[:5]
        assert load.ok > 100
        assert set(versions()) == {'3.5.1'}
        taken = [n for _dir, _subdirs, files in os.walk(store) for n in files]
        assert any(n.startswith('Full-') and not n.endswith('.json') for n in taken), taken
        for name in hosts:
            assert os.path.exists(os.path.join(base, name, 'bin', 'etcd.pre-upgrade'))
        assert os.readlink(ETCD34)                        # the shared 3.4 link the members started from is untouched

        again = run_playbook('steward.cluster.etcd_upgrade', inventory=inventory, extra_vars=upgrade)
        assert_ok(again)
        assert total_changed(again) == 0
    finally:
        kill_by_pid_files([h['etcd_pid_file'] for h in hosts.values()])


def test_a_playbook_killed_mid_run_resumes_and_starts_every_member_once(tmp_path):
    base = str(tmp_path)
    hosts, inventory = members_on_34(base)
    upgrade = {'etcd_upgrade_binary': ETCD35, 'etcd_upgrade_require_snapshot': False}
    try:
        assert_ok(provision(base))
        before = {name: starts(h) for name, h in hosts.items()}
        vars_file = os.path.join(base, 'vars.json')
        with open(vars_file, 'w') as f:
            json.dump(upgrade, f)
        cmd = [os.path.join(VENV_BIN, 'ansible-playbook'), 'steward.cluster.etcd_upgrade', '-i', inventory,
               '-e', '@' + vars_file]
        run = subprocess.Popen(cmd, env=ansible_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
        records = {name: os.path.join(os.path.dirname(h['etcd_pid_file']), 'conf', 'upgrade-record.json')
                   for name, h in hosts.items()}
        killed_at = None
        deadline = time.time() + 120
        while killed_at is None and time.time() < deadline and run.poll() is None:
            for name, path in records.items():
                try:
                    with open(path) as f:
                        record = json.load(f)
                except (OSError, ValueError):
                    continue
                # the second member of the run, between its stop and its caught-up check
                if record.get('completed') == [] and len([r for r in records.values() if os.path.exists(r)]) >= 2 \
                        and (record.get('in_flight') or {}).get('phase') == 'restart':
                    os.killpg(run.pid, signal.SIGKILL)
                    killed_at = name
                    break
            time.sleep(0.005)
        run.wait(timeout=30)
        assert killed_at, 'the run ended before its second member was in flight'
        print("killed with %s in flight; it answers: %s" % (killed_at, health_of(hosts[killed_at])))
        resumed = run_playbook('steward.cluster.etcd_upgrade', inventory=inventory, extra_vars=upgrade)
        assert_ok(resumed)
        assert set(versions()) == {'3.5.1'}
        after = {name: starts(h) for name, h in hosts.items()}
        assert {name: after[name] - before[name] for name in hosts} == {name: 1 for name in hosts}
    finally:
        kill_by_pid_files([h['etcd_pid_file'] for h in hosts.values()])
