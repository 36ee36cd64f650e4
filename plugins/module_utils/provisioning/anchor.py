# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The anchor pattern (seed 002): keep a node's static pod manifests and files equal to their ConfigMap / Secret
sources, rewrite what drifted, and remove them again when the anchor stops - so the kubelet keeps running the
control plane after a full reboot with no API server, while the cluster still manages what runs.

A source is a ConfigMap or Secret labelled `cluster.steward.io/anchor` whose annotation
`cluster.steward.io/anchor-path` names a directory on the node; each data key is one file in it (ConfigMaps 0644,
Secrets 0600, or `cluster.steward.io/anchor-mode`). `cluster.steward.io/anchor-node: <node>` limits a source to one
node (per-node certificates). `$(NODE_NAME)` and `$(NODE_IP)` in a file are the node's name and address. A source
annotated `cluster.steward.io/anchor-etcd: member` holds the node's etcd manifest: `$(ETCD_INITIAL_CLUSTER)` and
`$(ETCD_INITIAL_CLUSTER_STATE)` are the flags the member joins with (decided by the anchor when it adds the member
as a learner, and kept from the file on disk afterwards).

Everything written is recorded in /etc/kubernetes/steward-anchor.json (apart from what provisioning itself
recorded); only recorded files are ever rewritten or removed. Pure planning here; the controller loop does I/O.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import posixpath
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, shown
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import files, layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.node_files import FileSpec

SOURCE_LABEL = 'cluster.steward.io/anchor'
PATH_ANNOTATION = 'cluster.steward.io/anchor-path'
MODE_ANNOTATION = 'cluster.steward.io/anchor-mode'
NODE_ANNOTATION = 'cluster.steward.io/anchor-node'
ETCD_ANNOTATION = 'cluster.steward.io/anchor-etcd'
ANCHOR_RECORD = '/etc/kubernetes/steward-anchor.json'
# Directories an anchor may write into; anything else in a source is refused (a source is not a way to write
# arbitrary host files through the anchor's host mount).
ALLOWED_DIRS = ('/etc/kubernetes', '/var/lib/kubelet', '/etc/systemd/system/kubelet.service.d')


@dataclasses.dataclass(frozen=True)
class Source:
    kind: str                       # ConfigMap | Secret
    namespace: str
    name: str
    directory: str
    mode: int
    data: Mapping[str, bytes]
    etcd: bool = False

    @property
    def ref(self) -> str:
        return '%s %s/%s' % (self.kind, self.namespace, self.name)


def _allowed(directory: str) -> bool:
    return any(directory == d or directory.startswith(d + '/') for d in ALLOWED_DIRS)


def _decoded(value: Any, field: str) -> bytes:
    """Base64 as the API server stores Secret data and binaryData (the content itself is never shown)."""
    try:
        return base64.b64decode(value, validate=True)
    except (TypeError, ValueError):
        raise InvalidInput(field, 'base64', 'is not base64 text', secret=True) from None


def parse_source(obj: Mapping[str, Any], node_name: str) -> Optional[Source]:
    """A ConfigMap / Secret as an anchor source, None when it is for another node; InvalidInput (field names the
    object and annotation) when its annotations are wrong."""
    meta = obj.get('metadata') or {}
    annotations = meta.get('annotations') or {}
    kind = obj.get('kind') or ('Secret' if 'type' in obj else 'ConfigMap')
    where = '%s %s/%s' % (kind, meta.get('namespace'), meta.get('name'))
    target = annotations.get(NODE_ANNOTATION)
    if target and target != node_name:
        return None
    directory = validate.absolute_path(annotations.get(PATH_ANNOTATION) or '', '%s: %s' % (where, PATH_ANNOTATION))
    if not _allowed(directory):
        raise InvalidInput('%s: %s' % (where, PATH_ANNOTATION), 'anchor-dir', '%s is not below %s' % (
            shown(directory), ', '.join(ALLOWED_DIRS)), directory)
    default_mode = '0600' if kind == 'Secret' else '0644'
    mode = validate.file_mode(annotations.get(MODE_ANNOTATION) or default_mode, '%s: %s' % (where, MODE_ANNOTATION))
    data: Dict[str, bytes] = {}
    for section, encoded in (('data', kind == 'Secret'), ('binaryData', True)):
        for key, value in (obj.get(section) or {}).items():
            field = '%s: %s.%s' % (where, section, key)
            validate.path_component(key, field)
            data[key] = _decoded(value, field) if encoded else str(value).encode()
    etcd = (annotations.get(ETCD_ANNOTATION) or '') == 'member'
    return Source(kind, meta.get('namespace') or '', meta.get('name') or '', directory, mode, data, etcd)


def substitute(content: bytes, values: Mapping[str, str]) -> bytes:
    for key, value in values.items():
        content = content.replace(('$(%s)' % key).encode(), value.encode())
    return content


def desired_files(sources: Iterable[Source], node_name: str, node_ip: str,
                  etcd_flags: Optional[Tuple[str, str]] = None) -> Dict[str, FileSpec]:
    """Every file the sources put on this node; two sources writing one path is refused (InvalidInput)."""
    values = {'NODE_NAME': node_name, 'NODE_IP': node_ip}
    if etcd_flags is not None:
        values.update(ETCD_INITIAL_CLUSTER=etcd_flags[0], ETCD_INITIAL_CLUSTER_STATE=etcd_flags[1])
    out: Dict[str, FileSpec] = {}
    owners: Dict[str, str] = {}
    for source in sources:
        if source.etcd and etcd_flags is None:
            continue   # written once the member was added (the loop decides the flags first)
        for key, content in sorted(source.data.items()):
            path = posixpath.join(source.directory, key)
            if path in owners:
                raise InvalidInput('%s: data.%s' % (source.ref, key), 'unique-path', '%s is also written by %s'
                                   % (path, owners[path]), path)
            owners[path] = source.ref
            out[path] = FileSpec(path, substitute(content, values), source.mode, source.kind == 'Secret')
    return out


def read_record(root: files.Root) -> List[str]:
    data = root.read(ANCHOR_RECORD)
    if not data:
        return []
    try:
        return sorted(str(p) for p in json.loads(data.decode()).get('files') or [])
    except (ValueError, UnicodeDecodeError, AttributeError):
        return []


def record(paths: Iterable[str]) -> FileSpec:
    content = (json.dumps({'files': sorted(set(paths))}, indent=2, sort_keys=True) + '\n').encode()
    return FileSpec(ANCHOR_RECORD, content, 0o644)


def plan_sync(root: files.Root, desired: Mapping[str, FileSpec], keep_etcd_manifest: bool = False) -> List[files.Change]:
    """Changes that bring the node to `desired`: drifted files rewritten, files this anchor wrote earlier and no
    source wants any more removed (never a file it did not record). Manifests go last, as in provisioning."""
    previous = read_record(root)
    stale = [p for p in previous if p not in desired and not (keep_etcd_manifest and p == layout.MANIFEST['etcd'])]
    wanted = dict(desired)
    kept = [p for p in previous if p not in stale and p not in desired]
    wanted[ANCHOR_RECORD] = record(list(desired) + kept)
    changes = files.plan(root, wanted, stale)
    return sorted(changes, key=lambda c: (c.path.startswith(layout.MANIFESTS_DIR + '/'), c.path))


def plan_cleanup(root: files.Root) -> List[files.Change]:
    """Removal of everything this anchor recorded (manifests first, so the kubelet stops the pods), then the record."""
    previous = read_record(root)
    changes = files.plan(root, {}, previous)
    changes.sort(key=lambda c: (not c.path.startswith(layout.MANIFESTS_DIR + '/'), c.path))
    if root.exists(ANCHOR_RECORD):
        changes.append(files.Change(ANCHOR_RECORD, files.REMOVE, 'file', root.read(ANCHOR_RECORD), None, None, False))
    return changes
