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
there afterwards.

The scenario runs once in `make test`: as bench/druid_rolling.py's `--smoke` run (the benchmark from a clean shell,
tests/support/bench_smoke.py: ours at this test's 60 requests/s), whose summary records everything checked here. It
was run twice before (this test in-process, and the benchmark's smoke run in test_bench_smoke.py), ~90 s each."""

from __future__ import annotations

from support.bench_smoke import run_smoke

RATE = 60.0          # bench/druid_rolling.py's --smoke rate
LOAD_AROUND = 4.0    # the benchmark's load runs 2 s before the image change and 2 s after every pod is Ready


def test_image_tag_3_4_to_3_5_rolls_leader_last_without_a_failed_request(tmp_path):
    summary = run_smoke('druid_rolling', str(tmp_path))
    (run,) = summary['runs']
    assert summary['rate'] == RATE and run['kind'] == 'ours', (summary['rate'], run['kind'])
    # the deadlines this test waited with when it drove the lab itself: 90 s, 100 s, then 40 s
    assert run['seconds_to_ready_before'] <= 90, 'three members Ready on 3.4: %ss' % run['seconds_to_ready_before']
    versions = run['versions_before']
    assert len(versions) == 3 and all(v.startswith('3.4.') for v in versions), versions
    assert run['seconds_to_new_version'] <= 100, 'all members on 3.5: %ss' % run['seconds_to_new_version']
    assert run['seconds_total'] - run['seconds_to_new_version'] <= 40, 'three members Ready on 3.5: %ss after' % (
        run['seconds_total'] - run['seconds_to_new_version'])
    assert run['versions_after'] and all(v.startswith('3.5.') for v in run['versions_after']), run['versions_after']
    leader = run['leader_before']

    assert run['requests_failed'] == 0, run['failures']
    assert run['requests_ok'] > RATE * (30 + LOAD_AROUND), \
        'the client ran through the upgrade: %d requests' % run['requests_ok']
    missing = run['acknowledged_keys_missing_per_member']
    assert len(missing) == 3 and not any(missing.values()), (missing, run['missing_examples'])
    restarts = run['restart_events']
    names = [m.split()[1] for m in restarts]
    assert sorted(names) == ['etcd-main-0', 'etcd-main-1', 'etcd-main-2'], restarts
    assert names[-1] == leader and 'the leader last' in restarts[-1], (leader, restarts)
    assert not any('the leader last' in m for m in restarts[:-1]), restarts
    # the old leader's sidecar moved leadership before its etcd stopped (the etcd container's preStop hook asks it
    # first, as a kubelet runs it before the signal; else etcd's own transfer on stop applies); the benchmark keeps
    # the lines of its log that name leadership or the hand-off, and whether the runtime ran the leader's hook
    sidecar = '\n'.join(run['leader_sidecar_leadership_lines'])
    assert 'stopping: leadership handed to' in sidecar or 'hand-off' not in sidecar, sidecar[-2000:]
    print('old leader %s: %s' % (leader, [line for line in run['leader_sidecar_leadership_lines']
                                          if 'leadership' in line]))
    assert run['leader_prestop_ran'], 'the old leader\'s etcd container ran its preStop hook before its SIGTERM'
