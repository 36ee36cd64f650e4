"""The steward.cluster.etcd_upgrade playbook on members run by the etcd role (process mode): Debian's etcd 3.4 to the
wheel's 3.5 through real ansible-playbook runs while a client writes and reads; check mode first (plan, nothing
changed), then the upgrade (0 failed requests), then a second run that changes nothing.

Members listen on 127.0.0.61-63 (standard ports, as if on separate hosts; no other test uses these addresses) and are
killed from their pid files at the end."""

from __future__ import annotations

import os

import pytest
import yaml

from support.ansible import REPO, run_playbook
from support.etcd_rolling import LoadClient
from test_etcd_role import assert_ok, gateway, kill_by_pid_files, provision, total_changed, write_inventory

ETCD34 = os.path.join(REPO, '.build', 'etcd-3.4', 'etcd')
ETCD35 = os.path.join(REPO, '.build', 'etcd-3.5', 'etcd')
IPS = ['127.0.0.61', '127.0.0.62', '127.0.0.63']
pytestmark = pytest.mark.skipif(not (os.path.exists(ETCD34) and os.path.exists(ETCD35)),
                                reason='needs etcd 3.4 and 3.5 (make all)')


def versions():
    return [gateway(ip, '/v3/maintenance/status')['version'] for ip in IPS]


def test_the_playbook_upgrades_34_to_35_without_a_failed_request(tmp_path):
    base = str(tmp_path)
    hosts = write_inventory(base, IPS)
    # each member its own binary (what the role installs on a real host): the swap replaces it for that member only
    inventory = os.path.join(base, 'inventory.yml')
    data = yaml.safe_load(open(inventory))
    for name, host in data['etcd']['hosts'].items():
        own = os.path.join(base, name, 'bin', 'etcd')
        os.makedirs(os.path.dirname(own))
        os.symlink(ETCD34, own)
        host['etcd_binary'] = own
    yaml.safe_dump(data, open(inventory, 'w'))
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
