# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The record of a node's kubelet step, kept where a second run or another operator finds it: the annotation
`cluster.steward.io/upgrade` on the node's Node (`kubectl get node w1 -o jsonpath=...`), one JSON object:

    {"version": "v1.32.4", "phase": "drained", "unschedulable_before": false}

Phases, in order: `draining` (written before the drain starts), `drained`, `kubelet` (the new kubelet installed
and restarted), `done` (gated and uncordoned). A Node, not one ConfigMap, because worker batches run in parallel:
each writes only its own Node. The control-plane steps need no record: the manifest on disk says what was done.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping, Optional

ANNOTATION = 'cluster.steward.io/upgrade'
PHASES = ('draining', 'drained', 'kubelet', 'done')


@dataclasses.dataclass(frozen=True)
class Record:
    version: str
    phase: str
    unschedulable_before: bool = False

    def value(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True, separators=(',', ':'))

    def at_least(self, phase: str) -> bool:
        return PHASES.index(self.phase) >= PHASES.index(phase)


def read(node: Optional[Mapping[str, Any]]) -> Optional[Record]:
    """The node's record; None when there is none or it is not ours to read (then the step starts afresh)."""
    text = (((node or {}).get('metadata') or {}).get('annotations') or {}).get(ANNOTATION)
    try:
        data = json.loads(text) if text else None
        if not isinstance(data, dict) or data.get('phase') not in PHASES or not isinstance(data.get('version'), str):
            return None
        return Record(data['version'], data['phase'], bool(data.get('unschedulable_before')))
    except ValueError:
        return None


def drained_for(record: Optional[Record], version: str) -> bool:
    """The node was drained for this version already: the drain is not done again."""
    return record is not None and record.version == version and record.at_least('drained')
