# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""etcd: clusters, members, snapshots and continuous backups (stores in etcd-backup-restore's layout).

One room per concern; a room imports only the rooms above it in this list (and common/):
  errors.py   the area's one exception tree; args.py: the modules' shared option groups (every room may use both)
  cluster/    how to reach a cluster (EtcdConnection, the JSON Gateway) and acting on it: health, membership, defrag
  wire/       gRPC spoken directly over HTTP/2, for what the gateway cannot serve or serves too slowly
  member/     one host's own member: etcd's binaries, its process or systemd unit, its config file, what it reports
  store/      where snapshots live (a directory or S3), their names, compression and private files
  snapshot/   full and delta snapshots: take, stream, verify, fetch back, and replay deltas into a new snapshot
  backup/     the controller's continuous backups: the loop, its spec and schedule, GC, compaction, restore verification
  recovery/   bringing a cluster back: the recovery plan, each host's part of it, restoring a data dir from a backup
  upgrade/    rolling minor/patch upgrades: THE rolling plan (pure; shared with the Etcd resource), its run, resume, rollback
Each room's __init__ says what lives where. Nothing here imports AnsibleModule or kopf.
"""
