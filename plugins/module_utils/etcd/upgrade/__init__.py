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
  member_ops.py the MemberOps of hosts' members: a binary swapped in place (the etcd role), a static pod's image tag
               rewritten in its manifest (provisioning)
  host.py      one member's part run from its host (the etcd_upgrade module's checks and run); the static-pod member
               and the certificate reader are provisioning/etcd_static_pod.py's (that area sits above this one)

The plan knows nothing of binaries, systemd or pods (its `swap` option, 'binary' or 'image', is only named in the
steps): the `Etcd` resource's rolling update (image change, issue 25) is meant to call plan_upgrade with the same
inputs and walk the same steps with MemberOps that change a pod's image.
Imports cluster/, wire/ and member/ rooms; nothing imports this room except modules, tests and bench.
"""
