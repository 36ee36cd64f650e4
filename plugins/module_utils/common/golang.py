# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Go standard library behaviour the seeds rely on, where a user's existing labels and annotations must mean what
they meant to the Go controller (MCM, dependency-watchdog). Durations live in `durations.py`."""

from __future__ import annotations

from typing import Any, Optional

TRUE_WORDS = ('1', 't', 'T', 'TRUE', 'true', 'True')
FALSE_WORDS = ('0', 'f', 'F', 'FALSE', 'false', 'False')


def parse_bool(value: Any) -> Optional[bool]:
    """Go's `strconv.ParseBool`: True or False for the words it accepts, None where Go returns an error ('yes',
    'on', ' true', '', a non-string). The seeds treat an error as "not set", so callers test `is True`."""
    if not isinstance(value, str):
        return None
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    return None
