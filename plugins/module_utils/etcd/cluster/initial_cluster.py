# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `--initial-cluster` string of a member joining an existing cluster: pure, so the recovery
planner can work out every joiner's string before the first membership change (and start the
members' configs in parallel), and etcd_member prints the same string after the change."""

from __future__ import annotations

from typing import Any, Dict, List


def normalize_url(url: str) -> str:
    return url.strip().rstrip('/').lower()


def initial_cluster(members: List[Dict[str, Any]], new_name: str, new_peer_urls: List[str]) -> str:
    """`name=peerURL,...` (sorted) for starting the new member: every member, the new one under `new_name`.

    A member that has not started yet has no name in etcd's list; the new one gets `new_name`,
    any other unstarted one its hex id (etcd matches existing members by peer URL only).
    """
    wanted = {normalize_url(u) for u in new_peer_urls}
    entries: List[tuple] = []
    found = False
    for m in members:
        is_new = {normalize_url(u) for u in m['peer_urls']} == wanted
        found = found or is_new
        name = new_name if is_new else (m['name'] or m['id'])
        entries.extend((name, u) for u in m['peer_urls'])
    if not found:
        entries.extend((new_name, u) for u in new_peer_urls)
    # Sorted, so that check mode, the real run and later runs print the same string.
    return ','.join('%s=%s' % e for e in sorted(entries))
