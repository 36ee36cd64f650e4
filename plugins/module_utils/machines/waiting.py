# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`wait` for the machine modules: poll a MachineDeployment until it is ready (or gone) within a deadline.

The deadline covers everything, the polls included; the poll interval grows from 1 s to 5 s. A deployment
that is paused never becomes ready, and one whose replacement is stopped by a freeze may not: both end the
wait early with the reason, instead of letting the task sit until its timeout.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import readiness
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import WaitTimeout

POLL_START = 1.0
POLL_MAX = 5.0


def wait_ready(client: KubeClient, path: str, timeout: float, clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(deployment, readiness) once ready; raises WaitTimeout with the last readiness seen."""
    deadline = clock() + timeout
    interval = POLL_START
    last: Dict[str, Any] = {}
    while True:
        md = client.get(path)
        last = readiness(md)
        if last['ready']:
            return md, last
        if last['paused']:
            raise WaitTimeout('machine deployment is paused: it will not become ready until spec.paused is cleared',
                              path, last)
        remaining = deadline - clock()
        if remaining <= 0:
            why = ' (%s: %s)' % (last['frozen'].get('reason'), last['frozen'].get('message')) if last['frozen'] else ''
            raise WaitTimeout('machine deployment not ready after %ss: %d of %d machines updated and available%s' % (
                int(timeout), min(last['updated'], last['available']), last['desired'], why), path, last)
        sleep(min(interval, remaining))
        interval = min(interval * 2, POLL_MAX)


def wait_gone(client: KubeClient, path: str, timeout: float, clock: Callable[[], float] = time.monotonic,
              sleep: Callable[[float], None] = time.sleep) -> None:
    deadline = clock() + timeout
    interval = POLL_START
    while client.get_or_none(path) is not None:
        remaining = deadline - clock()
        if remaining <= 0:
            raise WaitTimeout('machine deployment still exists after %ss (its machines are being deleted)' % int(timeout), path)
        sleep(min(interval, remaining))
        interval = min(interval * 2, POLL_MAX)
