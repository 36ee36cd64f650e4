# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plugin types by the name maintenance.yaml uses for them (`type: hasLabel`)."""

from __future__ import annotations

from typing import Dict, List, Type

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.checks_cluster import CLUSTER_CHECKS
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.checks_node import NODE_CHECKS
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.notifiers import NOTIFIERS
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.plugin_base import Plugin
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.schedules import SCHEDULES
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.stagger import Stagger
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.triggers import TRIGGERS

CHECKS: Dict[str, Type[Plugin]] = {cls.type_name: cls for cls in NODE_CHECKS + CLUSTER_CHECKS + [Stagger]}
TRIGGER_TYPES: Dict[str, Type[Plugin]] = {cls.type_name: cls for cls in TRIGGERS}
NOTIFICATIONS: Dict[str, Type[Plugin]] = {cls.type_name: cls for cls in NOTIFIERS}
SCHEDULE_TYPES = SCHEDULES

KINDS: Dict[str, Dict[str, Type[Plugin]]] = {'check': CHECKS, 'trigger': TRIGGER_TYPES, 'notify': NOTIFICATIONS}

# Upstream plugins that depend on SAP's infrastructure (OpenStack, Kubernikus, ESX, Prometheus):
# named in the error so a user knows the type is real but not offered here.
UPSTREAM_ONLY = {'kubernikusCount', 'prometheusInstant', 'checkHypervisor', 'hypervisorCondition', 'alterFinalizer',
                 'alterHypervisor'}


def known(kind: str) -> List[str]:
    return sorted(KINDS[kind])
