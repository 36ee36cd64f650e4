# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where snapshots live, in etcd-backup-restore's layout so existing stores stay readable.

  store.py          the SnapshotStore contract and Snapshot (name, metadata, status) shared by both kinds
  local_store.py    a local directory (`/path`, `file:///path`): atomic publish, fsync of file and directory
  s3_store.py       S3 or S3-compatible (`s3://bucket/prefix`), every request within a deadline
  s3_encryption.py  server-side encryption of the objects (on by default)
  stores.py         open a store from its URL and options
  naming.py         Full-/Incr- snapshot names and what they say (revisions, time, suffix)
  compression.py    gzip / zlib with etcd-backup-restore's suffixes
  private_files.py  files and directories private from the first byte (0600 / 0700)
"""
