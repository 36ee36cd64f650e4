# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rolling etcd upgrades (minor and patch), one member at a time; THE rolling plan of an etcd cluster.

  versions.py  etcd's upgrade policy as data: legal moves, minimum patches before a minor, releases not for production
  plan.py      plan_upgrade(members_state, target_version, options, now): pure, plain data in and out; the pre-flight
               verdict (typed Refusal reasons) and the ordered steps (followers first, the leader last; per member:
               move leadership away, stop, swap binary or image, start, wait until caught up)
  run.py       walking the plan on a live cluster: observe, snapshot gate, per-member MemberOps (stop/swap/start/
               restore_previous), caught-up check (revision + HashKV), the run's record for resume, rollback
  member_ops.py one member's turn (leadership moved away, caught up with the leader) and the MemberOps of hosts'
               members: a binary swapped in place (the etcd role), a static pod's image tag rewritten in its
               manifest (provisioning)
  host.py      one member's part run from its host (the etcd_upgrade module's checks and run); the static-pod member
               and the certificate reader are provisioning/etcd_static_pod.py's (that area sits above this one)

The plan knows nothing of binaries, systemd or pods (its `swap` option, 'binary' or 'image', is only named in the
steps). The `Etcd` resource's rolling update (druid/plan.py's restart row, issue 25) walks the same plan: its order
(plan.rolling_order), its gate between members (plan.next_member), the version path (plan.version_path_refusals),
one caught-up verdict (plan.revision_verdict, plan.hash_verdict; member_ops.member_caught_up is a member's readiness
in the member-side program) and one leadership hand-off (member_ops.move_leadership_away).
Imports cluster/, wire/ and member/ rooms; imported by modules, tests, bench, druid/plan.py and the member-side
program.
"""
