# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Semantic versions as blang/semver (upstream's clusterSemver) parses and orders them: strict
`MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]`, no leading zeros, pre-releases sort before the release."""

from __future__ import annotations

import functools
import re
from typing import Tuple, Union

_VERSION = re.compile(r'^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$')

Identifier = Union[int, str]


@functools.total_ordering
class Version:
    def __init__(self, major: int, minor: int, patch: int, pre: Tuple[Identifier, ...] = ()):
        self.key = (major, minor, patch)
        self.pre = pre

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and (self.key, self.pre) == (other.key, other.pre)

    def __hash__(self) -> int:
        return hash((self.key, self.pre))

    def __lt__(self, other: 'Version') -> bool:
        if self.key != other.key:
            return self.key < other.key
        if not self.pre or not other.pre:
            return bool(self.pre) and not other.pre   # a pre-release is lower than the release
        for mine, theirs in zip(self.pre, other.pre):
            if mine == theirs:
                continue
            if isinstance(mine, int) and isinstance(theirs, int):
                return mine < theirs
            if isinstance(mine, int) != isinstance(theirs, int):
                return isinstance(mine, int)          # numeric identifiers sort first
            return str(mine) < str(theirs)
        return len(self.pre) < len(other.pre)

    def __str__(self) -> str:
        text = '%d.%d.%d' % self.key
        return text + ('-' + '.'.join(str(p) for p in self.pre) if self.pre else '')


def parse_version(text: str) -> Version:
    match = _VERSION.match(str(text).strip())
    if not match:
        raise ValueError('%r is not a semantic version (MAJOR.MINOR.PATCH)' % (text,))
    pre: Tuple[Identifier, ...] = ()
    if match.group(4):
        parts = []
        for part in match.group(4).split('.'):
            if part.isdigit():
                if len(part) > 1 and part.startswith('0'):
                    raise ValueError('%r: numeric pre-release identifier %r has a leading zero' % (text, part))
                parts.append(int(part))
            else:
                parts.append(part)
        pre = tuple(parts)
    return Version(int(match.group(1)), int(match.group(2)), int(match.group(3)), pre)
