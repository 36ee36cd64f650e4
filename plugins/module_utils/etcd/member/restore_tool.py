# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`etcdutl snapshot restore` (etcd 3.5+) or `etcdctl snapshot restore` (3.4, which has no etcdutl)."""

from __future__ import annotations

import os
from typing import Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.common.commands import run_bounded
from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import DeadlineExceeded
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.binaries import (
    find_snapshot_tool,
    run_seconds,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError

RESTORE_TIMEOUT = 3600


def run_restore_tool(snapshot_path: str, target_dir: str, *, name: str, initial_cluster: str,
                     initial_cluster_token: str, initial_advertise_peer_urls: Sequence[str],
                     tool: Optional[str] = None) -> str:
    """`etcdutl|etcdctl snapshot restore` into `target_dir` (which must not exist). Returns the tool kind."""
    binary, kind = find_snapshot_tool(tool)
    env = dict(os.environ)
    if kind == 'etcdctl':
        env['ETCDCTL_API'] = '3'
    cmd = [binary, 'snapshot', 'restore', snapshot_path, '--name', name, '--data-dir', target_dir,
           '--initial-cluster', initial_cluster, '--initial-cluster-token', initial_cluster_token,
           '--initial-advertise-peer-urls', ','.join(initial_advertise_peer_urls)]
    try:
        proc = run_bounded(cmd, run_seconds(binary, RESTORE_TIMEOUT), '%s snapshot restore' % kind, env=env)
    except DeadlineExceeded as exc:   # the tool and its process group were killed
        raise EtcdError(str(exc)) from exc
    except OSError as exc:
        raise EtcdError('cannot run %s: %s' % (binary, exc)) from exc
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise EtcdError('%s snapshot restore of %s failed (rc=%d): %s' % (
            kind, snapshot_path, proc.returncode, lines[-1] if lines else 'no output'))
    return kind
