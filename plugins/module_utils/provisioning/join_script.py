# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Promenade's self-contained `join.sh`: everything a node needs to join, in one shell script that runs without
Ansible or network access to anything but the cluster.

It carries the node's files as planned by node_files (certificates and keys, kubeconfigs, kubelet config and
unit, the load balancer config and manifest, registration labels in the kubelet flags) plus the record of what
is ours, so a node joined by the script and one joined by steward.cluster.node_join hold the same files. It
holds private keys: keep it secret (0700, delivered over an authenticated channel), like Promenade's.

    join.sh [--root DIR] [--no-start] [--no-wait] [--wait-timeout SECONDS]

`--root` writes below a root prefix (try it out, or build an image); the kubelet is started only with the real
root. The last step waits until the API reports the Node Ready, using the node's own kubelet credentials.

A script joins a worker; a control-plane node joins the same way and gets its control-plane components from the
anchor DaemonSet (`--controllers anchor`) that its labels select, as in Promenade.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import hashlib
import os
from typing import Any, Dict, Iterable, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.common.netaddr import url_host
from ansible_collections.steward.cluster.plugins.module_utils.common.files import write_atomic
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import files, layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import Authority
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError, Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.node_files import FileSpec, plan_node_files
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import ClusterSpec, NodeSpec

WRAP = 76

_HEAD = r'''#!/bin/bash
# steward.cluster join script for node %(node)s (%(role)s), cluster %(cluster)s, generated %(when)s.
# It holds private keys: keep it secret.
# Usage: %(script)s [--root DIR] [--no-start] [--no-wait] [--wait-timeout SECONDS]
set -euo pipefail
ROOT=/
START=1
WAIT=1
WAIT_TIMEOUT=3600
while [ $# -gt 0 ]; do
  case "$1" in
    --root) ROOT=$2; shift 2 ;;
    --no-start) START=0; shift ;;
    --no-wait) WAIT=0; shift ;;
    --wait-timeout) WAIT_TIMEOUT=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
ROOT=${ROOT%%/}
log() { printf '%%s join %(node)s: %%s\n' "$(date -u +%%Y-%%m-%%dT%%H:%%M:%%SZ)" "$*" >&2; }
private_dir() { mkdir -p "$ROOT$1"; chmod 0700 "$ROOT$1"; }
put() {   # put MODE PATH < base64: write atomically with its mode
  local mode=$1 path=$ROOT$2 dir tmp
  dir=$(dirname "$path")
  mkdir -p "$dir"
  tmp=$(mktemp "$dir/.join.XXXXXX")
  base64 -d > "$tmp"
  chmod "$mode" "$tmp"
  mv -f "$tmp" "$path"
}
umask 022
'''

_TAIL = r'''
if [ "$START" = 1 ] && [ -z "$ROOT" ]; then
  log "starting the kubelet"
  systemctl daemon-reload
  systemctl enable --now kubelet.service
fi
if [ "$WAIT" = 1 ]; then
  log "waiting up to ${WAIT_TIMEOUT}s for Node %(node)s to be Ready"
  deadline=$(( $(date +%%s) + WAIT_TIMEOUT ))
  pem=$ROOT%(client)s
  until curl -sf --cacert "$ROOT%(ca)s" --cert "$pem" --key "$pem" %(resolve)s"%(url)s" \
        | tr -d ' \n' | grep -o '{[^{}]*"type":"Ready"[^{}]*}' | grep -q '"status":"True"'; do
    if [ "$(date +%%s)" -ge "$deadline" ]; then log "Node %(node)s is not Ready after ${WAIT_TIMEOUT}s"; exit 1; fi
    sleep 5
  done
fi
log "joined"
'''


def _b64(content: bytes) -> List[str]:
    text = base64.b64encode(content).decode()
    return [text[i:i + WRAP] for i in range(0, len(text), WRAP)] or ['']


def render(cluster: ClusterSpec, node: NodeSpec, planned: Iterable[FileSpec], now: datetime.datetime,
           script_name: str = 'join.sh') -> str:
    """The script for `node`, writing exactly `planned` (plus the record), in path order."""
    specs = sorted(planned, key=lambda f: f.path)
    paths = [f.path for f in specs]
    record = FileSpec(layout.RECORD, files.record_content(node.name, node.role, paths + [layout.RECORD]), 0o644)
    out = [_HEAD % {'node': node.name, 'role': node.role, 'cluster': cluster.cluster_name,
                    'when': format_rfc3339(now), 'script': script_name}]
    out.append('log "writing %d files below ${ROOT:-/}"\n' % (len(specs) + 1))
    for directory in files.PRIVATE_DIRS:
        if any(p.startswith(directory + '/') for p in paths):
            out.append('private_dir %s\n' % directory)
    for spec in specs + [record]:
        out.append("put %04o %s <<'EOF'\n%s\nEOF\n" % (spec.mode, spec.path, '\n'.join(_b64(spec.content))))
    host = url_host(node.local_address)
    url = 'https://%s:%d/api/v1/nodes/%s' % (host, cluster.lb_port, node.name)
    resolve = '' if node.local_address in ('127.0.0.1', '::1') else \
        '--connect-to kubernetes:%d:%s:%d ' % (cluster.lb_port, host, cluster.lb_port)
    if resolve:
        url = 'https://kubernetes:%d/api/v1/nodes/%s' % (cluster.lb_port, node.name)
    out.append(_TAIL % {'node': node.name, 'client': layout.KUBELET_CLIENT_PEM, 'ca': layout.pki('ca.crt'),
                        'url': url, 'resolve': resolve})
    return ''.join(out)


def script_for(cluster: ClusterSpec, node: NodeSpec, authority: Authority, now: datetime.datetime,
               script_name: str = 'join.sh') -> str:
    """A fresh node's script: its files planned from nothing (new kubelet key and certificate), rendered."""
    planned = plan_node_files(cluster, node, authority, lambda path: None, now)
    return render(cluster, node, planned.files.values(), now, script_name)


@dataclasses.dataclass(frozen=True)
class JoinScriptRequest:
    """A checked join_script call (provisioning/params.parse_join_script): where the script goes, for which node."""

    dest: str
    cluster: ClusterSpec
    node: NodeSpec
    authority: Authority
    now: datetime.datetime


def existing_script_node(path: str) -> Optional[str]:
    """The node a join script at `path` was rendered for (read from the header `render` writes); '' for another
    file, None when nothing is there."""
    try:
        with open(path, 'rb') as f:
            head = f.read(512).decode('utf-8', 'replace').splitlines()
    except FileNotFoundError:
        return None
    if len(head) > 1 and head[0] == '#!/bin/bash' and head[1].startswith('# steward.cluster join script for node '):
        return head[1].split()[6]
    return ''


def write_script(request: JoinScriptRequest, *, force: bool, check_mode: bool) -> Dict[str, Any]:
    """Write the join script of `request.node` to `request.dest` (mode 0700, atomically, durable), unless a script
    of that node is already there (`force` renders a new one). Refuses (`not-ours`) to replace any other file
    without `force`; the same decision in check mode, where nothing is written."""
    dest, node = request.dest, request.node
    found = existing_script_node(dest)
    if found is not None and not force and found != node.name:
        raise Refused('%s exists and is not a join script of %s (it is %s); use force to replace it'
                      % (dest, node.name, 'one of ' + found if found else 'another file'), 'not-ours', dest)
    planned = plan_node_files(request.cluster, node, request.authority, lambda path: None, request.now)
    paths = sorted(list(planned.files) + [layout.RECORD])
    result: Dict[str, Any] = {'changed': False, 'dest': dest, 'files': paths, 'sha256': None}
    if found == node.name and not force:
        return dict(result, msg='%s already holds a join script of %s (force renders a new one)' % (dest, node.name))
    if check_mode:
        return dict(result, changed=True, msg='would write %s' % dest)
    script = render(request.cluster, node, planned.files.values(), request.now, os.path.basename(dest)).encode()
    try:
        write_atomic(dest, script, 0o700)
    except OSError as exc:
        raise ProvisioningError('cannot write %s: %s' % (dest, exc), dest) from exc
    return dict(result, changed=True, sha256=hashlib.sha256(script).hexdigest(),
                msg='wrote the join script of %s to %s' % (node.name, dest))
