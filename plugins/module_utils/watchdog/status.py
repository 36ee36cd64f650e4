# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The prober's status: DWD has no custom resource, so it lives in a ConfigMap next to the targets
(`<prober name>-status`, docs/watchdog.md "Status"), one flat key per fact so that
`kubectl get cm steward-watchdog-prober-status -o jsonpath='{.data.phase}'` answers without parsing;
the last plan and the last operation are JSON documents under their own keys."""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.decision import ProbeState

STATUS_SUFFIX = '-status'
LABELS = {'app.kubernetes.io/name': 'steward-watchdog', 'app.kubernetes.io/component': 'prober-status',
          'app.kubernetes.io/part-of': 'steward-cluster'}


def status_name(owner: str) -> str:
    return owner + STATUS_SUFFIX


def probe_data(state: ProbeState, probe: Mapping[str, Any], now: float, stopped: str = '') -> Dict[str, str]:
    """The keys a probe updates (`probe`: ProbeOutcome.as_dict()); `stopped` says why probing is off."""
    fraction = probe.get('fraction')
    return {
        'phase': state.phase,
        'probing': 'false' if stopped else 'true',
        'stoppedReason': stopped,
        'lastProbeTime': rfc3339(now),
        'lastProbeResult': str(probe.get('result', '')),
        'lastProbeReason': str(probe.get('reason') or probe.get('error') or ''),
        'candidateLeases': str(probe.get('candidates', '')),
        'expiredLeases': str(probe.get('expired', '')),
        'expiredFraction': '' if fraction is None else '%.4f' % fraction,
        'failureFraction': str(probe.get('threshold', '')),
        'consecutiveFailures': str(state.failures),
        'consecutiveSuccesses': str(state.successes),
    }


def plan_data(plan: Mapping[str, Any], decided: float) -> Dict[str, str]:
    return {'lastPlan': json.dumps(dict(plan, decidedAt=rfc3339(decided)), sort_keys=True),
            'lastPlanTime': rfc3339(decided)}


def operation_data(direction: str, results: Sequence[Mapping[str, Any]], decided: float, finished: float,
                   first_scale_call: Optional[float]) -> Dict[str, str]:
    outcomes: Dict[str, int] = {}
    for r in results:
        outcomes[r['outcome']] = outcomes.get(r['outcome'], 0) + 1
    doc = {'direction': direction, 'decidedAt': rfc3339(decided), 'finishedAt': rfc3339(finished),
           'outcomes': outcomes, 'steps': list(results)}
    if first_scale_call is not None:
        doc['decisionToFirstScaleSeconds'] = round(first_scale_call - decided, 3)
    return {'lastOperation': json.dumps(doc, sort_keys=True)}


def configmap(namespace: str, owner: str, data: Mapping[str, str]) -> Dict[str, Any]:
    return {'apiVersion': 'v1', 'kind': 'ConfigMap',
            'metadata': {'name': status_name(owner), 'namespace': namespace, 'labels': dict(LABELS)},
            'data': dict(data)}
