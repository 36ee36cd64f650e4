# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""After each act of `make demo`: the alerts the lab's Prometheus (lab/prometheus.py, URL in .lab/prometheus.url)
fired during the act and the ones firing now, as one story line.

"Fired during the act" is Prometheus's own record, the `ALERTS{alertstate="firing"}` series over the act's duration
(an alert that fired and resolved within the act counts); "firing now" is /api/v1/alerts. A lab without Prometheus,
or one that does not answer, gives a note instead: the demo never fails because of it.
"""

from __future__ import annotations

import json
import math
import os
import urllib.parse
import urllib.request
from typing import Any, List, Optional

TIMEOUT = 5.0


def _get(url: str, path: str, **params: str) -> Any:
    query = ('?' + urllib.parse.urlencode(params)) if params else ''
    with urllib.request.urlopen(url + path + query, timeout=TIMEOUT) as answer:
        body = json.load(answer)
    if body.get('status') != 'success':
        raise ValueError('%s answered %s: %s' % (path, body.get('status'), body.get('error')))
    return body['data']


def prometheus_url(state_dir: str) -> Optional[str]:
    try:
        with open(os.path.join(state_dir, 'prometheus.url')) as f:
            return f.read().strip().rstrip('/') or None
    except OSError:
        return None


def firing_now(url: str) -> List[str]:
    return sorted({a['labels']['alertname'] for a in _get(url, '/api/v1/alerts')['alerts'] if a.get('state') == 'firing'})


def fired_within(url: str, seconds: float) -> List[str]:
    window = '%ds' % max(1, math.ceil(seconds))
    result = _get(url, '/api/v1/query', query='count by (alertname) (max_over_time(ALERTS{alertstate="firing"}[%s]))'
                  % window)['result']
    return sorted({r['metric']['alertname'] for r in result})


def act_alerts(state_dir: str, seconds: float) -> str:
    """The story line's text for an act that took `seconds`; never raises."""
    url = prometheus_url(state_dir)
    if url is None:
        return ('no Prometheus in this lab (%s missing: the prometheus package is not installed, or the part did '
                'not start): alerts not shown' % os.path.join(state_dir, 'prometheus.url'))
    try:
        fired, now = fired_within(url, seconds), firing_now(url)
    except Exception as exc:  # noqa: BLE001 - a Prometheus that does not answer is a note, never a failed demo
        return 'Prometheus at %s did not answer (%s): alerts not shown' % (url, exc)
    return 'fired during the act: %s; firing now: %s' % (', '.join(fired) or 'none', ', '.join(now) or 'none')
