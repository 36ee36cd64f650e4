# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Full and delta snapshots: taking, checking, reading back and replaying them.

  snapshot.py         full snapshots: choose a member, stream, verify, publish in two phases; list a store
  snapshot_stream.py  a member's Snapshot stream (wire/) into a private file, hashed and written back as it arrives
  verify.py           a snapshot file checked before it is published or restored (sha256, etcd's trailer, etcdutl)
  bolt.py             a fast structural check of the bbolt file itself
  watcher.py          the watch on every key (wire/) behind delta snapshots, its events encoded once
  delta.py            delta snapshots as etcd-backup-restore writes them: events, chains of deltas, their checks
  delta_encoding.py   watch events encoded once and kept compact; delta_writer.py: one delta written and published
  fetch.py            full and delta snapshots read back from a store, verified before anything uses them
  replay.py           a full snapshot plus deltas rebuilt into one snapshot in a scratch etcd (restore, compaction,
                      restore verification), every transaction landing on its recorded revision
"""
