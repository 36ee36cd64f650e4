# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The maintenance-controller's keys and state names, exactly as upstream spells them."""

from __future__ import annotations

STATE_LABEL = 'cloud.sap/maintenance-state'
PROFILE_LABEL = 'cloud.sap/maintenance-profile'
DATA_ANNOTATION = 'cloud.sap/maintenance-data'

OPERATIONAL = 'operational'
REQUIRED = 'maintenance-required'
IN_MAINTENANCE = 'in-maintenance'
STATES = (OPERATIONAL, REQUIRED, IN_MAINTENANCE)
# The node label shows the most critical state over all profiles.
SEVERITY = {OPERATIONAL: 0, REQUIRED: 1, IN_MAINTENANCE: 2}

DEFAULT_PROFILE = 'default'
PROFILE_SEPARATOR = '--'


def split_profiles(label_value: str) -> list:
    """`A--B--C` -> ['A', 'B', 'C'] (order kept, duplicates dropped); empty -> ['default']."""
    names = []
    for name in (label_value or DEFAULT_PROFILE).split(PROFILE_SEPARATOR):
        if name not in names:
            names.append(name)
    return names


def contains_profile(label_value: str, profile: str) -> bool:
    return profile in (label_value or '').split(PROFILE_SEPARATOR)
