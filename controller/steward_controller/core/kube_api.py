# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The client-side rate limit of the loops that talk to the API server through a token bucket (the watchdog's
prober and weeder): DWD's `--kube-api-qps` / `--kube-api-burst`, one flag each for every loop that uses them.
The prober loop adds the flags to the parser; each loop reads them with `rate_limits(args)`."""

from __future__ import annotations

import argparse
from typing import Tuple

from ansible_collections.steward.cluster.plugins.module_utils.kube.ratelimit import effective

from steward_controller.core import flags
from steward_controller.core.flags import Flag

FLAGS = (
    Flag('kube-api-qps', 'float', 5.0, 'prober and weeder: requests per second to the API server, 0 = 5'),
    Flag('kube-api-burst', 'int', 10, 'prober and weeder: burst above --kube-api-qps, 0 = 10'),
)


def rate_limits(args: argparse.Namespace) -> Tuple[float, int]:
    """DWD's reading of the flags: >= 0, and 0 means client-go's default (5, 10)."""
    value = flags.values(args, FLAGS)
    if value['kube_api_qps'] < 0:
        raise ValueError('--kube-api-qps must be >= 0 (0 means 5), got %s' % value['kube_api_qps'])
    if value['kube_api_burst'] < 0:
        raise ValueError('--kube-api-burst must be >= 0 (0 means 10), got %s' % value['kube_api_burst'])
    return effective(value['kube_api_qps'], value['kube_api_burst'])
