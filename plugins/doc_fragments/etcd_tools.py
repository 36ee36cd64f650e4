# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # Where etcd's own binaries are; matches ETCD_TOOLS_SPEC in module_utils/etcd/args.py.
    DOCUMENTATION = r'''
options:
  etcdutl_path:
    description:
      - Path of the C(etcdutl) binary (for etcd 3.4, C(etcdctl)) that verifies and restores snapshots.
      - When unset, C(etcdutl) and then C(etcdctl) are looked for directory by directory - the directory of
        the etcd binary in use (O(etcd_path), else the first C(etcd) that runs), then O(bin_dirs), then
        E(STEWARD_ETCD_BIN_DIRS), E(PATH), C(/usr/local/bin), C(/usr/bin) and C(/opt/etcd/bin).
      - A candidate that cannot run (its C(version) command fails) is skipped; the error names every place
        looked at and every candidate rejected.
    type: path
  etcd_path:
    description:
      - Path of the C(etcd) binary in use on this host. Its directory is searched first for the client tools,
        and it runs the scratch member that replays delta snapshots.
      - When unset, the first C(etcd) that runs in the places listed under O(etcdutl_path).
    type: path
  bin_dirs:
    description:
      - Directories searched for C(etcd), C(etcdutl) and C(etcdctl) before E(STEWARD_ETCD_BIN_DIRS) and E(PATH).
    type: list
    elements: path
  tool_timeout:
    description:
      - Seconds one run of an etcd tool may take - its C(version) probe, C(snapshot status), C(snapshot restore).
        At this deadline the tool and every process in its process group are killed, and the error names the
        tool and the time spent.
      - When unset, a C(version) probe gets 20 seconds, C(snapshot status) 600 and C(snapshot restore) 3600; when
        set, a probe gets the smaller of 20 seconds and this.
      - Positive, at most a week.
    type: float
'''
