# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An etcd member's config file, its directories and its restart fingerprint, written in one step.

The role used to spend five module runs on this (file, template = stat + copy, copy = stat + copy);
a recovery writes configs on every host and on its critical path, so it is one run here (issue 17).
Same behaviour: directories get their mode (and owner), the YAML config and the fingerprint file are
replaced atomically only when their content changes, and the caller restarts etcd only when the
fingerprint (what etcd reads at every start) changed, never for bootstrap-only keys.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import re
from typing import Any, Dict, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.files import write_atomic
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError

HEADER = ('# Ansible managed (steward.cluster.etcd role); etcd runs as `etcd --config-file %s`.\n'
          '# initial-cluster, initial-cluster-state and initial-cluster-token are read only while the data dir\n'
          '# is empty; the role switches initial-cluster-state to `existing` once the cluster is healthy, so a\n'
          '# member that loses its data dir cannot bootstrap a cluster of its own.\n')


class ConfigFileError(EtcdError):
    """A directory or file of the member's configuration could not be written."""


# A string YAML (1.1, as etcd's go-yaml reads it) takes as itself without quotes; anything else is quoted.
_PLAIN = re.compile(r'^[A-Za-z0-9/_.][A-Za-z0-9/_.:=,@+-]*$')
_AMBIGUOUS = re.compile(r'^(y|yes|n|no|true|false|on|off|null|~|[-+]?(\d[\d_]*)?(\.\d*)?([eE][-+]?\d+)?|0x[0-9a-fA-F]+|'
                        r'[-+]?\.(inf|nan)|\d+:[\d:]+)$', re.IGNORECASE)


def _scalar(value: Any, flow: bool = False) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return json.dumps(value)
    text = str(value)
    if _PLAIN.match(text) and not _AMBIGUOUS.match(text) and not (flow and ',' in text):
        return text
    return json.dumps(text)  # a JSON string is a YAML double-quoted string


def _yaml(value: Dict[str, Any], indent: int = 0) -> List[str]:
    lines: List[str] = []
    pad = ' ' * indent
    for key, item in value.items():
        if isinstance(item, dict) and item:
            lines.append('%s%s:' % (pad, key))
            lines.extend(_yaml(item, indent + 2))
        elif isinstance(item, dict):
            lines.append('%s%s: {}' % (pad, key))
        elif isinstance(item, (list, tuple)):
            lines.append('%s%s: [%s]' % (pad, key, ', '.join(_scalar(v, flow=True) for v in item)))
        else:
            lines.append('%s%s: %s' % (pad, key, _scalar(item)))
    return lines


def _check_keys(config: Any, field: str) -> None:
    """Every key (nested ones too) one line of text: etcd's flags are names, and a newline in a key would write a
    config etcd refuses to start with."""
    if not isinstance(config, dict):
        raise InvalidInput(field, 'mapping', 'expected a mapping, got %r' % (config,), config)
    for key, value in config.items():
        validate.text(key, field, max_length=253)   # the message shows the key
        if isinstance(value, dict):
            _check_keys(value, '%s.%s' % (field, key))


def render(config: Dict[str, Any], path: str) -> str:
    """The config file's text: the header, then the config as block YAML in the given key order (written here:
    the module runs on the etcd hosts, which need not have PyYAML). Nested mappings are blocks, lists flow."""
    return HEADER % path + '\n'.join(_yaml(config)) + '\n'


def _read(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigFileError('cannot read %s: %s' % (path, exc)) from exc


def check_owner_group(owner: Optional[str], group: Optional[str]) -> None:
    """`owner` and `group`, when given, are one-line names: with a NUL byte the user database lookup fails with a
    ValueError (a traceback), not a "no such user"."""
    for field, name in (('owner', owner), ('group', group)):
        if name is not None:
            validate.text(name, field, max_length=256)


def _ids(owner: Optional[str], group: Optional[str]) -> tuple:
    """(uid, gid) of `owner` and `group`, -1 for the one not given."""
    check_owner_group(owner, group)
    try:
        uid = pwd.getpwnam(owner).pw_uid if owner else -1
        gid = grp.getgrnam(group).gr_gid if group else -1
    except KeyError as exc:
        raise ConfigFileError('no such user or group: %s' % exc) from exc
    return uid, gid


def _check_parent(target: str, field: str, created: List[str]) -> None:
    """The directory `target` is written into exists (or is one of the `directories` this call creates, or is
    created with one of them) and is a writable directory; InvalidInput naming `field` otherwise."""
    parent = os.path.dirname(target) or '.'
    if any(p == parent or p.startswith(parent.rstrip('/') + '/') for p in created):
        return
    if not os.path.isdir(parent):
        raise InvalidInput(field, 'directory', 'the directory of %s does not exist or is not a directory' % target,
                           target)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidInput(field, 'writable', 'cannot write into %s' % parent, target)


def _restore(path: str, before: Optional[str], before_mode: Optional[int]) -> None:
    """Put the config file back as it was after a later step of the same change failed."""
    try:
        if before is None:
            os.unlink(path)
        else:
            write_atomic(path, before, before_mode if before_mode is not None else 0o600)
    except OSError:
        pass   # the error being raised says what failed; the fingerprint still names the old settings


def apply_config(*, path: str, config: Dict[str, Any], mode: int, directories: List[Dict[str, Any]],
                 fingerprint_path: str, fingerprint: str, owner: Optional[str] = None, group: Optional[str] = None,
                 check_mode: bool = False) -> Dict[str, Any]:
    """Bring directories, config file and fingerprint file to the wanted state; the same plan in check mode.
    Every path is checked (absolute, the files not directories) before anything is written."""
    for field, target in (('path', path), ('fingerprint_path', fingerprint_path)):
        validate.regular_file_or_absent(target, field)   # a directory or a FIFO (reading it would block): refused
    for index, entry in enumerate(directories):
        validate.absolute_path(entry.get('path'), 'directories[%d].path' % index)
    validate.text(fingerprint, 'fingerprint')
    _check_keys(config, 'config')
    uid, gid = _ids(owner, group)
    created = [entry['path'] for entry in directories]
    for field, target in (('path', path), ('fingerprint_path', fingerprint_path)):
        _check_parent(target, field, created)   # before anything is written: a half-applied config is worse
    actions: List[str] = []
    for entry in directories:
        directory, want = entry['path'], int(entry['mode'])
        try:
            st = os.stat(directory)
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise ConfigFileError('cannot read %s: %s' % (directory, exc)) from exc
        wrong_owner = st is not None and ((uid != -1 and st.st_uid != uid) or (gid != -1 and st.st_gid != gid))
        if st is None:
            actions.append('create directory %s (%04o)' % (directory, want))
        elif st.st_mode & 0o7777 != want or wrong_owner:
            actions.append('set mode %04o%s on %s' % (want, ' and owner' if wrong_owner else '', directory))
        else:
            continue
        if not check_mode:
            try:
                os.makedirs(directory, exist_ok=True)
                os.chmod(directory, want)
                if uid != -1 or gid != -1:
                    os.chown(directory, uid, gid)
            except OSError as exc:
                raise ConfigFileError('cannot prepare directory %s: %s' % (directory, exc)) from exc
    content = render(config, path)
    before = _read(path)
    config_changed = before != content
    fingerprint_text = fingerprint.strip() + '\n'
    fingerprint_changed = _read(fingerprint_path) != fingerprint_text
    if config_changed:
        actions.append('write %s' % path)
    elif before is not None and os.stat(path).st_mode & 0o7777 != mode:
        actions.append('set mode %04o on %s' % (mode, path))
    if fingerprint_changed:
        actions.append('write %s' % fingerprint_path)
    if not check_mode:
        before_mode = os.stat(path).st_mode & 0o7777 if before is not None else None
        try:
            if config_changed:
                write_atomic(path, content, mode)
            elif before_mode is not None and before_mode != mode:
                os.chmod(path, mode)
        except OSError as exc:
            raise ConfigFileError('cannot write %s: %s' % (path, exc)) from exc
        if fingerprint_changed:
            try:
                write_atomic(fingerprint_path, fingerprint_text, 0o644)
            except OSError as exc:
                _restore(path, before, before_mode)   # the config and its fingerprint change together, or neither
                raise ConfigFileError('cannot write %s (%s left as it was): %s' % (fingerprint_path, path, exc)) \
                    from exc
    return {'changed': bool(actions), 'config_changed': config_changed, 'fingerprint_changed': fingerprint_changed,
            'config_existed': before is not None, 'actions': actions, 'path': path,
            'diff': {'before': before or '', 'after': content, 'before_header': path, 'after_header': path}}
