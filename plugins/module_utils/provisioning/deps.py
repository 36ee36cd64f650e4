# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which third-party libraries the provisioning modules need and lack (reported through missing_required_lib).
Light on purpose: a module checks this before it imports anything heavy."""

from __future__ import annotations

from typing import List

from ansible_collections.steward.cluster.plugins.module_utils.provisioning.pki import HAS_CRYPTOGRAPHY
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.render import HAS_YAML


def missing_libraries() -> List[str]:
    return [name for name, present in (('cryptography', HAS_CRYPTOGRAPHY), ('PyYAML', HAS_YAML)) if not present]
