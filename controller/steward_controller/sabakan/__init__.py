# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `sabakan` and `repair` loops (seeds 000 and 001).

sabakan: one daemon per SabakanIntegration keeps the generated CKE cluster in a ConfigMap and the Nodes'
labels, annotations and taints right; with `repair` selected too, that same cycle queues RepairEntries for
failed machines under the cluster-wide limit (handlers.py). repair: a second daemon per SabakanIntegration
runs its RepairEntries through CKE's repair procedures (`spec.repair`) and deletes finished ones after
`spec.autoRepair.deleteFinishedAfter` (repair_loop.py).
"""

from __future__ import annotations

from typing import Any

from steward_controller.core.loops import Loop


def register(registry: Any, runtime: Any) -> None:
    from steward_controller.sabakan.handlers import register as register_handlers
    register_handlers(registry, runtime)


def register_repair(registry: Any, runtime: Any) -> None:
    """The repair daemon; queueing entries stays in the sabakan cycle, which asks `settings.enabled('repair')`."""
    from steward_controller.sabakan.repair_loop import register as register_loop
    register_loop(registry, runtime)


LOOPS = (
    Loop(name='sabakan', help='SabakanIntegration: generate and maintain the CKE cluster from sabakan, Node labels/taints',
         register=register),
    Loop(name='repair', help='RepairEntry: queue entries for failed sabakan machines (seed 001, in the sabakan cycle) '
                             'and run them through CKE\'s repair procedures (spec.repair)', register=register_repair),
)
