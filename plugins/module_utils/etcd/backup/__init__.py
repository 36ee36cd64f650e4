# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Continuous backups of one cluster: what the controller runs per EtcdBackup (and the modules reuse).

  backup_loop.py        the loop: full snapshots on a schedule, delta snapshots from the watch, GC and compaction
  backup_spec.py        an EtcdBackup spec checked and turned into a BackupPolicy
  cron.py               5-field cron schedules, in UTC
  gc.py                 store garbage collection with etcd-backup-restore's policies (Exponential, LimitBased)
  compaction.py         the newest full snapshot plus its deltas replayed into a new full snapshot (bounds restore time)
  backup_verify.py      a backup proven by restoring it into a scratch etcd (revision and HashKV compared)
  verification_loop.py  that proof on a schedule beside the backup loop
  copy.py               backups copied to another store (druid's EtcdCopyBackupsTask): newest first, verified, in restore order
"""
