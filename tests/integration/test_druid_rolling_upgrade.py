# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A druid user changes the etcd image tag 3.4 -> 3.5 of a three-member `Etcd` under a steady client load, on the
lab's parts, every piece real (tests/support/druid_lab.py: the API emulator, the pod runtime running etcd through the
lab's etcd-wrapper stand-in and `steward-etcd-member` as the sidecar, the controller's `etcd` loop).

The rolling update is the engine's one rolling plan (etcd/upgrade/plan.py, shared with steward.cluster.etcd_upgrade):
followers first, the leader last, the next member only once every pod is Ready again, where a restarted member is
Ready only once it has caught up with the leader (revision and HashKV, the sidecar's /healthz), and a leader's
sidecar hands leadership to a caught-up follower when its pod is deleted. A client writing and reading through every
member's client URL (as etcd's clientv3 with all endpoints) sees no failed request, and every acknowledged key is
there afterwards."""

from __future__ import annotations

import pytest

from lab.pods import images
from support.druid_lab import DruidLab
from support.etcd_rolling import LoadClient

pytestmark = pytest.mark.skipif(images.etcd_binary('3.5') is None or images.etcd_binary('3.4') is None,
                                reason='needs etcd 3.4 and 3.5 binaries: run make all')


def test_image_tag_3_4_to_3_5_rolls_leader_last_without_a_failed_request(tmp_path):
    lab = DruidLab(str(tmp_path)).start()
    load = None
    try:
        lab.create(3, 'v3.4.34')
        lab.wait(lambda: lab.all_ready(3), 90, 'three members Ready on 3.4')
        urls = lab.client_urls()
        assert len(urls) == 3 and all(v.startswith('3.4.') for v in lab.versions(urls).values()), lab.versions(urls)
        leader = next(m['name'] for m in lab.status()['members'] if m['role'] == 'Leader')

        load = LoadClient(urls, rate=60.0, prefix='load/').start()
        lab.set_image('v3.5.17')
        lab.wait(lambda: all(v.startswith('3.5.') for v in lab.versions(urls).values()), 100, 'all members on 3.5')
        lab.wait(lambda: lab.all_ready(3), 40, 'three members Ready on 3.5')
        load.stop()

        assert load.failed == [], load.failed[:5]
        assert load.ok > 60 * 30, 'the client ran through the upgrade: %d requests' % load.ok
        for url in urls:
            found = lab.read_prefix(url, 'load/')
            missing = [k for k in load.written if found.get(k) != load.written[k]]
            assert not missing, '%s lacks %d acknowledged keys, e.g. %s' % (url, len(missing), missing[:3])
        restarts = [e['message'] for e in lab.events('MemberRestarted')]
        names = [m.split()[1] for m in restarts]
        assert sorted(names) == ['etcd-main-0', 'etcd-main-1', 'etcd-main-2'], restarts
        assert names[-1] == leader and 'the leader last' in restarts[-1], (leader, restarts)
        assert not any('the leader last' in m for m in restarts[:-1]), restarts
        # the old leader's sidecar moved leadership before its etcd stopped (the etcd container's preStop hook asks it
        # first, as a kubelet runs it before the signal; else etcd's own transfer on stop applies)
        with open(str(tmp_path / 'pods' / 'logs' / 'demo' / leader / 'backup-restore.log'), errors='replace') as f:
            sidecar = f.read()
        assert 'stopping: leadership handed to' in sidecar or 'hand-off' not in sidecar, sidecar[-2000:]
        print('old leader %s: %s' % (leader, [line for line in sidecar.splitlines() if 'leadership' in line]))
        with open(str(tmp_path / 'runtime.log'), errors='replace') as f:
            assert 'pod demo/%s container etcd: preStop GET' % leader in f.read()   # the hook ran before etcd's SIGTERM
    finally:
        if load is not None:
            load.stop()
        lab.stop()
