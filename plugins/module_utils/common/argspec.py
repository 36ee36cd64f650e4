# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Building a module's argument spec from the shared option groups (each a doc fragment plus a same-named
spec constant in its area's args.py: KUBE_CONNECTION_SPEC, ETCD_CONNECTION_SPEC, SABAKAN_CONNECTION_SPEC, ...)."""

from __future__ import annotations

import copy
from typing import Any, Dict, Mapping


def argspec(*specs: Mapping[str, Any], **own: Any) -> Dict[str, Any]:
    """Deep-copied union of shared specs plus the module's own options (a module may change its copy, e.g. make
    `url` required, without touching the shared constant)."""
    merged: Dict[str, Any] = {}
    for spec in specs:
        merged.update(copy.deepcopy(dict(spec)))
    merged.update(own)
    return merged
