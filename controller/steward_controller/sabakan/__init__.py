# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `sabakan` and `repair` loops (seeds 000 and 001).

sabakan: one daemon per SabakanIntegration keeps the generated CKE cluster in a ConfigMap and the Nodes'
labels, annotations and taints right. repair: within that same cycle, RepairEntries for failed machines
under the cluster-wide limit; selecting `repair` without `sabakan` has nothing to act on.
handlers.py holds both.
"""

from __future__ import annotations

from typing import Any

from steward_controller.core.loops import Loop


def register(registry: Any, runtime: Any) -> None:
    from steward_controller.sabakan.handlers import register as register_handlers
    register_handlers(registry, runtime)


def register_repair(registry: Any, runtime: Any) -> None:
    """Nothing of its own to register: the sabakan cycle asks `settings.enabled('repair')`."""


LOOPS = (
    Loop(name='sabakan', help='SabakanIntegration: generate and maintain the CKE cluster from sabakan, Node labels/taints',
         register=register),
    Loop(name='repair', help='RepairEntry: repair queue entries for failed sabakan machines (seed 001; runs in the '
                             'sabakan cycle)', register=register_repair),
)
