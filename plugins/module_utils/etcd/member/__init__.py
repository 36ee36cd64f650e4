# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One etcd host's own member, for the modules that run on that host (and the lab).

  binaries.py      find etcd, etcdutl and etcdctl (3.5 restores with etcdutl, 3.4 with etcdctl)
  process.py       a detached etcd process with a pid file (no systemd: the lab, containers): start, wait, stop
  service.py       how a member is stopped and started: that process, or its systemd unit
  config_file.py   the member's config file and directories, written in one step, and its restart fingerprint
  local_member.py  what the host can say about its member: data on disk, process, what the member reports
  restore_tool.py  `etcdutl snapshot restore` (or 3.4's etcdctl) into a data dir
"""
