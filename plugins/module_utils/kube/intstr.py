# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes' IntOrString values (`2` or `"25%"`), as apimachinery's intstr reads them: one home for every area
that meets them (MachineDeployment maxSurge / maxUnavailable, PodDisruptionBudget minAvailable / maxUnavailable)."""

from __future__ import annotations

import math
from typing import Any, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput


def parse_int_or_percent(value: Any, field: str) -> Tuple[int, bool]:
    """(number, is_percent). `2` or `"25%"`; anything else is refused with the field named."""
    if isinstance(value, bool):
        raise InvalidInput(field, 'int-or-percent', 'expected an integer or a percentage like "25%%", got %r' % (value,), value)
    if isinstance(value, int):
        if value < 0:
            raise InvalidInput(field, 'minimum', 'must not be negative, got %d' % value, value)
        return value, False
    if isinstance(value, str):
        text = value.strip()
        if text.endswith('%') and text[:-1].isdigit():
            return int(text[:-1]), True
        if text.isdigit():
            return int(text), False
    raise InvalidInput(field, 'int-or-percent', 'expected an integer or a percentage like "25%%", got %r' % (value,), value)


def scaled(value: Any, total: int, round_up: bool, field: str) -> int:
    """intstr.GetScaledValueFromIntOrPercent."""
    number, percent = parse_int_or_percent(value, field)
    if not percent:
        return number
    exact = number * total / 100.0
    return int(math.ceil(exact)) if round_up else int(math.floor(exact))
