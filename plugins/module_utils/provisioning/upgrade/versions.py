# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes versions and the version skew policy (kubernetes.io/releases/version-skew-policy) as data.

The policy, as the plan applies it:
* kube-apiserver: in an HA cluster the newest and oldest instances are at most one minor apart; the control plane
  moves one minor at a time (kubeadm refuses to skip a minor too).
* kube-controller-manager, kube-scheduler: never newer than the apiservers they talk to (any of them: they reach
  the apiservers through the node-local load balancer), at most one minor older.
* kubelet and kube-proxy: never newer than kube-apiserver; at most three minors older (two before 1.28).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, shown

_VERSION = re.compile(r'^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$')
_KUBELET_VERSION = re.compile(r'\bv?(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)\b')

# Minor skews the policy allows (see the module docstring).
APISERVER_HA_SKEW = 1
COMPONENT_SKEW = 1


def kubelet_skew(apiserver_minor: int) -> int:
    """How many minors a kubelet (or kube-proxy) may lag behind kube-apiserver: 3 since 1.28, 2 before."""
    return 3 if apiserver_minor >= 28 else 2


@dataclasses.dataclass(frozen=True, order=True)
class Version:
    """A Kubernetes release `v1.31.4` (a pre-release such as `v1.32.0-rc.1` sorts before its release)."""
    major: int
    minor: int
    patch: int
    release: int = 1          # 0 for a pre-release, so it sorts before the release of the same patch
    pre: str = ''

    def __str__(self) -> str:
        return 'v%d.%d.%d%s' % (self.major, self.minor, self.patch, '-' + self.pre if self.pre else '')

    @property
    def semver(self) -> str:
        """Without the leading v (`1.31.4`): what package managers name."""
        return str(self)[1:]

    def minors_after(self, other: 'Version') -> int:
        """How many minors this is ahead of `other` (negative when behind); majors count as 100 minors."""
        return (self.major - other.major) * 100 + self.minor - other.minor


def parse(text: Optional[str]) -> Optional[Version]:
    """`v1.31.4`, `1.31.4`, `v1.32.0-rc.1` -> Version; None when it is not one."""
    match = _VERSION.match((text or '').strip())
    if not match:
        return None
    major, minor, patch, pre = match.groups()
    return Version(int(major), int(minor), int(patch), 0 if pre else 1, pre or '')


def parse_option(value: object, field: str) -> Version:
    """A version an operator typed: `vX.Y.Z` (kubeadm's spelling); InvalidInput names the option otherwise."""
    version = parse(value) if isinstance(value, str) else None
    if version is None or not str(value).startswith('v'):
        raise InvalidInput(field, 'kubernetes-version', 'expected a Kubernetes version such as v1.32.4, got %s'
                           % shown(value), value)
    return version


def image_version(image: Optional[str]) -> Optional[Version]:
    """The version an image reference's tag names: `registry.k8s.io/kube-apiserver:v1.31.4` -> v1.31.4; None for
    a reference without a tag or with a digest only (nothing says which release it is)."""
    if not image:
        return None
    reference = image.split('@', 1)[0]
    last = reference.rsplit('/', 1)[-1]
    if ':' not in last:
        return None
    return parse(last.rsplit(':', 1)[1])


def with_tag(image: str, version: Version) -> str:
    """The image reference with its tag replaced by the version (a digest is dropped: it named the old image)."""
    reference = image.split('@', 1)[0]
    head, _sep, last = reference.rpartition('/')
    name = last.split(':', 1)[0]
    return '%s%s:%s' % (head + '/' if head else '', name, version)


def kubelet_version(output: Optional[str]) -> Optional[Version]:
    """`kubelet --version` prints `Kubernetes v1.31.4`; the Node reports `v1.31.4` (or `v1.31.4+k3s1`)."""
    match = _KUBELET_VERSION.search(output or '')
    return parse(match.group(1)) if match else None
