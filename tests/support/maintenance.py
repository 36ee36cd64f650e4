# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared builders for the maintenance engine tests: the seed's flatcar config, nodes, fakes."""

from __future__ import annotations

import copy
import json
import threading
from typing import Any, Dict, List, Optional

FLATCAR = '''
intervals:
  requeue: 60s
  notify: 5h
instances:
  notify:
  - type: slack
    name: approval_required
    config:
      hook: https://hooks.example/T000/B000/XXXX
      channel: "#maintenance"
      message: |
        The node {{ .Node.Name }} requires maintenance. Manual approval is required.
        Approve to drain and reboot this node by running:
        `kubectl annotate node {{ .Node.Name }} cloud.sap/maintenance-approved=true`
    schedule:
      type: periodic
      config:
        interval: 24h
  - type: slack
    name: maintenance_started
    config:
      hook: https://hooks.example/T000/B000/XXXX
      channel: "#maintenance"
      message: |
        Maintenance for node {{ .Node.Name }} has started.
    schedule:
      type: periodic
      config:
        interval: 24h
  check:
  - type: hasAnnotation
    name: reboot_needed
    config:
      key: flatcar-linux-update.v1.flatcar-linux.net/reboot-needed
      value: "true"
  - type: hasAnnotation
    name: check_approval
    config:
      key: cloud.sap/maintenance-approved
      value: "true"
  trigger:
  - type: alterAnnotation
    name: reboot-ok
    config:
      key: flatcar-linux-update.v1.flatcar-linux.net/reboot-ok
      value: "true"
  - type: alterAnnotation
    name: remove_approval
    config:
      key: cloud.sap/maintenance-approved
      remove: true
  - type: alterAnnotation
    name: remove_reboot_ok
    config:
      key: flatcar-linux-update.v1.flatcar-linux.net/reboot-ok
      remove: true
profiles:
- name: flatcar
  operational:
    transitions:
    - check: reboot_needed
      next: maintenance-required
  maintenance-required:
    notify: approval_required
    transitions:
    - check: check_approval
      trigger: remove_approval && reboot-ok
      next: in-maintenance
  in-maintenance:
    notify: maintenance_started
    transitions:
    - check: "!reboot_needed"
      trigger: remove_reboot_ok
      next: operational
'''

REBOOT_NEEDED = 'flatcar-linux-update.v1.flatcar-linux.net/reboot-needed'
REBOOT_OK = 'flatcar-linux-update.v1.flatcar-linux.net/reboot-ok'
APPROVED = 'cloud.sap/maintenance-approved'
T0 = 1767225600.0  # 2026-01-01T00:00:00Z, a Thursday


def make_node(name: str = 'node-1', labels: Optional[Dict[str, str]] = None, annotations: Optional[Dict[str, str]] = None,
              conditions: Optional[List[Dict[str, str]]] = None, rv: str = '1') -> Dict[str, Any]:
    return {'apiVersion': 'v1', 'kind': 'Node',
            'metadata': {'name': name, 'uid': 'uid-' + name, 'resourceVersion': rv, 'labels': dict(labels or {}),
                         'annotations': dict(annotations or {})},
            'spec': {}, 'status': {'conditions': list(conditions or []),
                                   'nodeInfo': {'kubeletVersion': 'v1.31.2', 'osImage': 'Flatcar Container Linux'}}}


def apply_patch(node: Dict[str, Any], patch: Dict[str, Any]) -> Dict[str, Any]:
    """RFC 7386 merge patch of metadata labels/annotations, as the API server applies it."""
    out = copy.deepcopy(node)
    for section, changes in (patch.get('metadata') or {}).items():
        target = out['metadata'].setdefault(section, {})
        for key, value in changes.items():
            if value is None:
                target.pop(key, None)
            else:
                target[key] = value
    return out


class FakeHttp:
    """Records POSTs; answers from a queue or a callable."""

    def __init__(self, answer=(200, b'ok')):
        self.calls: List[Dict[str, Any]] = []
        self.answer = answer
        self.lock = threading.Lock()

    def post(self, url, body, headers):
        with self.lock:
            self.calls.append({'url': url, 'body': body, 'headers': dict(headers), 'json': json.loads(body)})
            answer = self.answer(url, json.loads(body)) if callable(self.answer) else self.answer
        return answer


class FakeSmtp:
    def __init__(self, fail: Optional[Exception] = None):
        self.sent: List[Dict[str, Any]] = []
        self.fail = fail

    def send(self, address, sender, recipients, message, auth):
        if self.fail:
            raise self.fail
        self.sent.append({'address': address, 'from': sender, 'to': list(recipients), 'message': message, 'auth': auth})


class MemoryApi:
    """Nodes in a dict under a lock: list, get and merge-patch like the API server (resourceVersion moves on)."""

    def __init__(self, nodes: List[Dict[str, Any]]):
        self.nodes = {n['metadata']['name']: copy.deepcopy(n) for n in nodes}
        self.lock = threading.Lock()
        self.version = 100
        self.patches: List[Any] = []

    def list(self) -> List[Dict[str, Any]]:
        with self.lock:
            return [copy.deepcopy(n) for n in self.nodes.values()]

    def get(self, name: str) -> Dict[str, Any]:
        with self.lock:
            return copy.deepcopy(self.nodes[name])

    def patch(self, name: str, patch: Dict[str, Any]) -> None:
        with self.lock:
            self.version += 1
            node = apply_patch(self.nodes[name], patch)
            node['metadata']['resourceVersion'] = str(self.version)
            self.nodes[name] = node
            self.patches.append((name, patch))

    def count(self, state: str) -> int:
        with self.lock:
            return sum(1 for n in self.nodes.values() if n['metadata']['labels'].get('cloud.sap/maintenance-state') == state)
