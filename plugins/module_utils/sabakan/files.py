# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The files the sabakan area reads and writes: templates, constraints, machine lists, cluster
files, the repair queue and the reboot queue.

Every reader names the file, the line and what was expected, because these files are edited by
hand; every writer replaces the file atomically (temp file in the same directory, fsync, rename)
so a crash leaves either the old or the new file, never half of one.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, List, Mapping, Optional, Sequence

try:
    import yaml
except ImportError:
    yaml = None
    HAS_YAML = False
else:
    HAS_YAML = True

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.files import write_atomic
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import FileError
from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339

DEFAULT_FILE_MODE = 0o644
REPAIR_STATUSES = ('queued', 'processing', 'succeeded', 'failed')
REBOOT_STATUSES = ('queued', 'draining', 'rebooting', 'cancelled')


# --- reading ----------------------------------------------------------------------------------
def _yaml_problem(what: str, path: str, exc: Exception) -> FileError:
    mark = getattr(exc, 'problem_mark', None) or getattr(exc, 'context_mark', None)
    problem = getattr(exc, 'problem', None) or str(exc)
    context = getattr(exc, 'context', None)
    text = f'{problem} ({context})' if context else problem
    if mark is not None:
        return FileError(f'{what} file {path}', 'yaml', f'line {mark.line + 1}, column {mark.column + 1}: '
                         f'not valid YAML or JSON: {text}')
    return FileError(f'{what} file {path}', 'yaml', f'not valid YAML or JSON: {text}')


def parse_document(text: str, what: str, path: str) -> Any:
    """YAML (which also reads JSON); a text that starts like JSON is read as JSON for exact positions."""
    stripped = text.lstrip()
    if (stripped[:1] in ('{', '[') and path.endswith('.json')) or yaml is None:
        try:
            return json.loads(text)
        except ValueError as exc:
            line, column = getattr(exc, 'lineno', 0), getattr(exc, 'colno', 0)
            msg = getattr(exc, 'msg', str(exc))
            hint = '' if path.endswith('.json') else ' (PyYAML is not installed, so only JSON can be read)'
            raise FileError(f'{what} file {path}', 'json', f'line {line}, column {column}: not valid JSON: {msg}{hint}') from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _yaml_problem(what, path, exc) from None
    try:
        return validate.document_size(data, f'{what} file {path}')
    except InvalidInput as exc:
        raise exc.recast(FileError) from None


def read_text(path: str, what: str) -> Optional[str]:
    """The file's text, or None when it does not exist. Only a regular file is opened (a FIFO would block)."""
    try:
        if os.path.isdir(path):
            raise FileError(f'{what} file {path}', 'file', 'is a directory, expected a file')
        if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
            raise FileError(f'{what} file {path}', 'file', 'is not a regular file (a FIFO, socket or device)')
        with open(path, 'rb') as handle:
            raw = handle.read()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise FileError(f'{what} file {path}', 'file', 'is a directory, expected a file') from None
    except OSError as exc:
        raise FileError(f'{what} file {path}', 'readable', f'cannot read it: {exc.strerror or exc}') from None
    try:
        return raw.decode('utf-8')
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b'\n') + 1
        raise FileError(f'{what} file {path}', 'utf-8', f'line {line}: not UTF-8 text') from None


def load_document(path: str, what: str, *, required: bool = True, default: Any = None) -> Any:
    """The parsed YAML/JSON document of `path`; a missing file is an error unless `required` is false."""
    text = read_text(path, what)
    if text is None:
        if required:
            raise FileError(f'{what} file {path}', 'exists', 'does not exist')
        return default
    return parse_document(text, what, path)


def load_mapping(path: str, what: str, *, required: bool = True, empty_ok: bool = False) -> Optional[Dict[str, Any]]:
    """A document that must be a mapping (template, constraints, cluster, queues).

    None when the file is missing and not required, or when it is empty and `empty_ok`.
    """
    text = read_text(path, what)
    if text is None:
        if required:
            raise FileError(f'{what} file {path}', 'exists', 'does not exist')
        return None
    data = parse_document(text, what, path)
    if data is None:
        if empty_ok:
            return None
        raise FileError(f'{what} file {path}', 'required', 'is empty, expected a mapping')
    if not isinstance(data, dict):
        raise FileError(f'{what} file {path}', 'type', f'line 1: expected a mapping at the top level, got {_kind(data)}')
    return data


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return 'a list'
    if isinstance(value, str):
        return f'a string ({value[:40]!r})'
    return type(value).__name__


def load_cluster_file(path: str) -> Optional[Dict[str, Any]]:
    """The current cluster, or None when the file does not exist yet (the first run generates it).

    An empty file is an error, not "no cluster": regenerating from scratch would replace every node.
    """
    text = read_text(path, 'cluster')
    if text is None:
        return None
    if not text.strip():
        raise FileError(f'cluster file {path}', 'required', 'is empty; delete it to generate a new cluster from the template, '
                        'or restore it from a backup')
    data = parse_document(text, 'cluster', path)
    if not isinstance(data, dict):
        raise FileError(f'cluster file {path}', 'type', f'line 1: expected a mapping (CKE cluster.yml), got {_kind(data)}')
    return data


# --- writing ----------------------------------------------------------------------------------
if HAS_YAML:
    class _Dumper(yaml.SafeDumper):
        """Plain block YAML without anchors (nodes share template parts; aliases would confuse readers)."""

        def ignore_aliases(self, data: Any) -> bool:
            return True


def dump_yaml(data: Any) -> str:
    if yaml is None:
        raise FileError('', 'dependency', 'PyYAML is required to write YAML files')
    return yaml.dump(data, Dumper=_Dumper, default_flow_style=False, sort_keys=False, allow_unicode=True,
                     width=1000)


def file_mode(path: str) -> Optional[int]:
    """Permission bits of `path`, or None when it does not exist."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def write_text_atomic(path: str, text: str, mode: Optional[int] = None) -> None:
    """Replace `path` with `text` (common/files.write_atomic: temp file, fsync, rename, fsync the directory).

    The mode is `mode`, else the existing file's, else DEFAULT_FILE_MODE.
    """
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileError(path, 'exists', f'directory {directory} does not exist')
    if mode is None:
        mode = file_mode(path)
    if mode is None:
        mode = DEFAULT_FILE_MODE
    try:
        write_atomic(path, text, mode)
    except OSError as exc:
        raise FileError(path, 'writable', f'cannot write it: {exc.strerror or exc}') from None


@dataclass(frozen=True)
class FileUpdate:
    """Writing one file the way the sabakan modules do: planned first (content and mode), so check mode and
    --diff show what would change, then applied with apply_file_update (atomic rename, never a partial file)."""

    path: str
    before: str            # the current text ('' when the file does not exist)
    after: str             # the text the file has afterwards
    exists: bool
    mode: Optional[int]    # wanted mode; None keeps the file's (a new file gets DEFAULT_FILE_MODE)
    rewrite: bool          # the content is written
    chmod: bool            # only the mode changes

    @property
    def changed(self) -> bool:
        return self.rewrite or self.chmod

    def diff(self) -> Dict[str, str]:
        """Text diff with headers, as --diff shows files."""
        return {'before': self.before, 'after': self.after, 'after_header': self.path,
                'before_header': self.path if self.exists else '%s (absent)' % self.path}


def plan_file_update(path: str, after: Optional[str], mode: Optional[int], what: str) -> FileUpdate:
    """`after` None keeps the content (only a differing `mode` is applied); reads the file, writes nothing."""
    text = read_text(path, what)
    current_mode = file_mode(path)
    rewrite = after is not None
    chmod = not rewrite and mode is not None and current_mode is not None and current_mode != mode
    return FileUpdate(path=path, before=text or '', after=after if rewrite else (text or ''), exists=text is not None,
                      mode=mode, rewrite=rewrite, chmod=chmod)


def apply_file_update(update: FileUpdate) -> None:
    """Make the planned change (nothing when it changes nothing); FileError when the file cannot be written."""
    if update.rewrite:
        write_text_atomic(update.path, update.after, update.mode)
    elif update.chmod and update.mode is not None:
        try:
            os.chmod(update.path, update.mode)
        except OSError as exc:
            raise FileError(update.path, 'writable', f'cannot change its mode: {exc.strerror or exc}') from None


def parse_mode(value: Any) -> Optional[int]:
    """The `mode` option (common.validate.file_mode: an octal string such as "0644", or YAML's 0644); None stays None."""
    if value is None:
        return None
    try:
        return validate.file_mode(value, 'mode')
    except InvalidInput as exc:
        raise exc.recast(FileError) from None


# --- the repair queue -------------------------------------------------------------------------
@dataclass
class RepairQueue:
    """CKE's repair queue as a file: entries stay until a user deletes them (they mark "recent repairs")."""

    entries: List[Dict[str, Any]] = field(default_factory=list)
    write_index: int = 0

    def as_document(self) -> Dict[str, Any]:
        return {'entries': self.entries, 'write_index': self.write_index}

    def append(self, new: Sequence[Mapping[str, Any]], *, now: datetime,
               serials: Optional[Mapping[str, str]] = None) -> List[Dict[str, Any]]:
        """Add planned entries ({address, machine_type, operation}) with the next indexes; returns them."""
        added: List[Dict[str, Any]] = []
        created = format_rfc3339(now)
        for planned in new:
            entry = {
                'index': self.write_index,
                'address': planned['address'],
                'machine_type': planned.get('machine_type', ''),
                'operation': planned.get('operation', ''),
                'serial': (serials or {}).get(planned['address'], planned.get('serial', '')),
                'status': 'queued',
                'created': created,
            }
            self.write_index += 1
            self.entries.append(entry)
            added.append(entry)
        return added


def _int_field(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FileError(where, 'minimum', f'expected a non-negative integer, got {value!r}', value)
    return value


def parse_repair_queue(data: Any, path: str) -> RepairQueue:
    what = f'repair queue file {path}'
    if data is None:
        return RepairQueue()
    if not isinstance(data, dict):
        raise FileError(what, 'type', f'expected a mapping {{entries: [...], write_index: N}}, got {_kind(data)}')
    unknown = sorted(set(data) - {'entries', 'write_index'})
    if unknown:
        raise FileError(what, 'known', f'unknown key(s) {", ".join(map(str, unknown))}; expected entries and write_index')
    entries = data.get('entries')
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise FileError(what, 'type', f'entries must be a list, got {_kind(entries)}')
    indexes = set()
    for position, entry in enumerate(entries):
        where = f'{what}: entries[{position}]'
        if not isinstance(entry, dict):
            raise FileError(where, 'type', 'expected a mapping with index, address, machine_type, operation, status')
        address = entry.get('address')
        if not isinstance(address, str) or not address:
            raise FileError(f'{where}.address', 'required', f'expected the machine address (a non-empty string), got {address!r}')
        if 'index' in entry:
            index = _int_field(entry['index'], f'{where}.index')
            if index in indexes:
                raise FileError(f'{where}.index', 'unique', f'{index} is used by another entry', index)
            indexes.add(index)
        status = entry.get('status', 'queued')
        if status not in REPAIR_STATUSES:
            raise FileError(f'{where}.status', 'one-of', f'{status!r} is not one of {", ".join(REPAIR_STATUSES)}')
    next_index = max(indexes) + 1 if indexes else 0
    if data.get('write_index') is None:
        write_index = max(next_index, len(entries))
    else:
        write_index = _int_field(data['write_index'], f'{what}: write_index')
        if write_index < next_index:
            raise FileError(what, 'write-index', f'write_index {write_index} is not above the highest entry index '
                            f'{next_index - 1}; new entries would reuse an index')
    return RepairQueue(entries=[dict(e) for e in entries], write_index=write_index)


def load_repair_queue(path: str) -> RepairQueue:
    """The queue in `path`; a missing or empty file is an empty queue (the first run creates it)."""
    return parse_repair_queue(load_document(path, 'repair queue', required=False), path)


# --- the reboot queue -------------------------------------------------------------------------
def parse_reboot_queue(data: Any, path: str) -> List[Dict[str, str]]:
    what = f'reboot queue file {path}'
    if data is None:
        return []
    if not isinstance(data, dict):
        raise FileError(what, 'type', f'expected a mapping {{entries: [{{node, status}}, ...]}}, got {_kind(data)}')
    entries = data.get('entries')
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise FileError(what, 'type', f'entries must be a list, got {_kind(entries)}')
    result = []
    for position, entry in enumerate(entries):
        where = f'{what}: entries[{position}]'
        if not isinstance(entry, dict):
            raise FileError(where, 'type', 'expected a mapping with node and status')
        node = entry.get('node')
        if not isinstance(node, str) or not node:
            raise FileError(f'{where}.node', 'required', f'expected the node address (a non-empty string), got {node!r}')
        status = entry.get('status', 'queued')
        if not isinstance(status, str) or status.lower() not in REBOOT_STATUSES:
            raise FileError(f'{where}.status', 'one-of', f'{status!r} is not one of {", ".join(REBOOT_STATUSES)}')
        result.append({'node': node, 'status': status.lower()})
    return result


def load_reboot_queue(path: str) -> List[Dict[str, str]]:
    """Reboot queue entries {node, status}. The file must exist: a mistyped path must not hide a rebooting
    machine from the repairer (it would repair a machine that is only being rebooted)."""
    text = read_text(path, 'reboot queue')
    if text is None:
        raise FileError(f'reboot queue file {path}', 'exists', 'does not exist; create it with "entries: []" '
                        'or leave reboot_queue_file unset')
    return parse_reboot_queue(parse_document(text, 'reboot queue', path), path)
