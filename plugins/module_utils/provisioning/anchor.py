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
recorded); only recorded files are ever rewritten or removed.

Planning (`desired_files`, `plan_sync`, `plan_cleanup`) is pure. `run_cycle` and `cleanup` are the anchor's two
sequences over it - one sync (files, then the etcd member as a learner before its manifest, then its promotion),
and the stop (remove the member, quorum permitting, then every file) - returning what they changed and what was
refused, so the controller loop only reads the sources and reports.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import posixpath
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, shown
from ansible_collections.steward.cluster.plugins.module_utils.common.netaddr import url_host
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import cluster_info
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.members import ensure_member_present
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import etcd_membership, files, layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError, Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.manifests import etcd_bootstrap_flags
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


PROMOTE_TIMEOUT = 5.0   # one promotion attempt per cycle; a learner still catching up is tried again next cycle


@dataclasses.dataclass(frozen=True)
class AnchorNode:
    """The node an anchor acts for: its name and address, its etcd peer port, and the cluster's etcd client URLs."""
    name: str
    ip: str
    etcd_peer_port: int = 2380
    etcd_endpoints: Tuple[str, ...] = ()

    @property
    def peer_url(self) -> str:
        return 'https://%s:%d' % (url_host(self.ip), self.etcd_peer_port)


@dataclasses.dataclass
class AnchorReport:
    """What one sequence did. `steps`, in the order they happened: a file change applied (the record file included)
    or what an etcd membership call said; `waiting`: why a learner is not promoted yet ('' when none); `refused`: a
    removal quorum refused (nothing else was done); `error`: what stopped the sequence (the steps before it stand)."""
    steps: List[Any] = dataclasses.field(default_factory=list)   # files.Change, or str for an etcd call
    waiting: str = ''
    refused: Optional[Refused] = None
    error: Optional[Exception] = None

    @property
    def changes(self) -> List[files.Change]:
        return [step for step in self.steps if isinstance(step, files.Change)]


def etcd_connection(root: files.Root, node: AnchorNode) -> EtcdConnection:
    """The node's etcd client, with the health-check client certificate provisioning put in the etcd PKI."""
    pki = layout.ETCD_PKI_DIR
    return EtcdConnection(endpoints=node.etcd_endpoints, ca_cert=root.host(pki + '/ca.crt'),
                          client_cert=root.host(pki + '/healthcheck-client.crt'),
                          client_key=root.host(pki + '/healthcheck-client.key'))


def _apply(root: files.Root, changes: List[files.Change], report: AnchorReport) -> None:
    files.apply(root, changes)
    report.steps.extend(changes)


def _etcd_flags(root: files.Root, sources: List[Source], node: AnchorNode, report: AnchorReport
                ) -> Optional[Tuple[str, str]]:
    """The member's --initial-cluster flags: kept from the manifest on disk, or decided by adding the member."""
    if not any(s.etcd for s in sources):
        return None
    kept = etcd_bootstrap_flags(root.read(layout.MANIFEST['etcd']))
    if kept is not None:
        return kept
    if not node.etcd_endpoints:
        raise ProvisioningError('an etcd member source is anchored but --anchor-etcd-endpoints is empty')
    result = ensure_member_present(etcd_connection(root, node), name=node.name, peer_urls=[node.peer_url],
                                   learner=True, promote=False)
    report.steps.append(result['msg'])
    return result['initial_cluster'], 'existing'


def _promote(root: files.Root, node: AnchorNode, report: AnchorReport) -> None:
    """Promote the node's learner once it has started (it has a name); a learner still catching up waits."""
    try:
        member = etcd_membership.member_of(cluster_info(etcd_connection(root, node)), node.peer_url)
        if member is not None and member['is_learner'] and member['name']:
            result = ensure_member_present(etcd_connection(root, node), name=node.name, peer_urls=[node.peer_url],
                                           learner=True, promote=True, promote_timeout=PROMOTE_TIMEOUT,
                                           retry_timeout=PROMOTE_TIMEOUT)
            report.steps.append(result['msg'])
    except EtcdError as exc:
        report.waiting = str(exc)


def run_cycle(root: files.Root, sources: List[Source], node: AnchorNode) -> AnchorReport:
    """One sync: the non-etcd files first, then the etcd member's flags (kept from its manifest, or decided by adding
    the member as a learner) and the full set with its manifest, then the promotion of a learner that caught up.
    Bad input, a refusal, etcd or the disk failing end the sequence as the report's `error`."""
    report = AnchorReport()
    try:
        _apply(root, plan_sync(root, desired_files(sources, node.name, node.ip), keep_etcd_manifest=True), report)
        flags = _etcd_flags(root, sources, node, report)
        _apply(root, plan_sync(root, desired_files(sources, node.name, node.ip, flags)), report)
        if flags is not None:
            _promote(root, node, report)
    except (InvalidInput, ProvisioningError, EtcdError, OSError) as exc:
        report.error = exc
    return report


def cleanup(root: files.Root, node: AnchorNode) -> AnchorReport:
    """The stop: remove the node's etcd member (refused when it would break quorum: then everything stays), then
    every anchored file. An etcd failure keeps the files too (the member would run on without its manifest)."""
    report = AnchorReport()
    if layout.MANIFEST['etcd'] in read_record(root) and node.etcd_endpoints:
        try:
            conn = etcd_connection(root, node)
            plan = etcd_membership.plan_removal(conn, node.peer_url, None, node.name)
            if plan['member'] is not None:
                etcd_membership.remove(conn, plan['member'], check_mode=False)
                report.steps.append('removed member %s' % plan['member']['id'])
        except Refused as exc:
            report.refused = exc
            return report
        except EtcdError as exc:
            report.error = exc
            return report
    _apply(root, plan_cleanup(root), report)
    return report
