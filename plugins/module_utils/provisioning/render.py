# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""YAML in and out, the same bytes for the same data every time (a re-run must not rewrite a file, and a
rewritten static pod manifest restarts its pod), plus content hashes."""

from __future__ import annotations

import hashlib
from typing import Any, Iterable

from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError

try:
    import yaml
    HAS_YAML = True
except ImportError:  # reported by the module through missing_required_lib
    HAS_YAML = False


def _base() -> Any:
    """LibYAML's emitter when PyYAML has it (20x faster; a cluster's files are mostly YAML), else PyYAML's own:
    both write the same bytes for these documents (a unit test renders every kind of file with both)."""
    if not HAS_YAML:
        return object
    return getattr(yaml, 'CSafeDumper', yaml.SafeDumper)


class _Dumper(_base()):  # type: ignore[misc]
    """Block style, insertion order, no aliases; multi-line strings as literal blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: Any, data: str) -> Any:
    return dumper.represent_scalar('tag:yaml.org,2002:str', data, style='|' if '\n' in data else None)


class _PureDumper(yaml.SafeDumper if HAS_YAML else object):  # type: ignore[misc]
    """The pure-Python emitter with the same settings (for the equality test, and hosts without LibYAML)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


if HAS_YAML:
    _Dumper.add_representer(str, _str)
    _PureDumper.add_representer(str, _str)


def to_yaml(doc: Any, pure: bool = False) -> bytes:
    if not HAS_YAML:
        raise ProvisioningError('the python library PyYAML is required')
    return yaml.dump(doc, Dumper=_PureDumper if pure else _Dumper, sort_keys=False, default_flow_style=False,
                     width=1000).encode()


def from_yaml(data: bytes, where: str = '') -> Any:
    if not HAS_YAML:
        raise ProvisioningError('the python library PyYAML is required')
    try:
        return yaml.safe_load(data)
    except yaml.YAMLError as exc:
        raise ProvisioningError('%s: not valid YAML: %s' % (where or 'document', exc), where) from None


def digest(parts: Iterable[bytes]) -> str:
    """sha256 over the parts, each length-prefixed (so moving bytes between parts changes the digest)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(b'%d:' % len(part))
        h.update(part)
    return h.hexdigest()
