# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reaching an etcd cluster and acting on it as a whole, over the v3 JSON gateway.

  client.py           EtcdConnection (endpoints, TLS, auth, timeout: shared by modules and controller) and Gateway (one
                      fresh HTTP request per call, its own deadline); the one place that reads etcd's error texts
  cluster.py          the cluster view: members, per-endpoint health, leader, alarms, quorum (cluster_info)
  members.py          membership changes: add as learner, promote, remove, move leadership, with etcd's retry rules
  initial_cluster.py  the --initial-cluster string of a joining member (pure)
  defrag.py           rolling defragmentation, followers first, the leader last
  timing.py           each membership change and defragmentation timed, for the listeners that export metrics
"""
