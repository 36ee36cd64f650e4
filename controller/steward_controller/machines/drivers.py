# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The machines loop's drivers: one per provider, made on first use. AWS and Sabakan are built in; a program that
embeds the controller registers more (`register_driver`) before main() runs - the tests' fault-injecting drivers
come this way. A MachineClass whose provider has no driver is a problem of the class (`unsupported`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import Driver

if TYPE_CHECKING:  # pragma: no cover
    from steward_controller.machines.controller import MachinesController

BUILT_IN_PROVIDERS = ('AWS', 'Sabakan')
# provider -> factory(controller) -> Driver, for providers beyond the built-in ones: a program that embeds the
# controller registers them (register_driver) before main() runs; the tests' fault-injecting drivers come this way.
DRIVER_FACTORIES: Dict[str, Callable[['MachinesController'], Driver]] = {}


def register_driver(provider: str, factory: Callable[['MachinesController'], Driver]) -> None:
    """Serve MachineClasses with `provider: <provider>` by the driver `factory(controller)` makes (once)."""
    DRIVER_FACTORIES[provider] = factory


def unsupported(cls: Mapping[str, Any]) -> str:
    return 'MachineClass %s: provider %r is not supported (%s)' % (
        o.key(cls), cls.get('provider'), ', '.join(BUILT_IN_PROVIDERS + tuple(sorted(DRIVER_FACTORIES))))


class Drivers:
    # A mixin of MachinesController (controller.py), whose __init__ holds the state these methods share.

    def driver_for(self, provider: str) -> Optional[Driver]:
        with self.lock:
            driver = self._drivers.get(provider)
            if driver is None:
                driver = self._make_driver(provider)
                if driver is not None:
                    self._drivers[provider] = driver
            return driver

    def _make_driver(self, provider: str) -> Optional[Driver]:
        if provider in DRIVER_FACTORIES:
            return DRIVER_FACTORIES[provider](self)
        if provider == 'AWS':
            from ansible_collections.steward.cluster.plugins.module_utils.machines.aws import AWSDriver

            def counted(operation: str, outcome: str) -> None:
                self.metrics.requests.labels('AWS', operation).inc()
                if outcome != 'OK':
                    self.metrics.requests_failed.labels('AWS', operation).inc()
            return AWSDriver(rate=self.opts.aws_api_rate, burst=self.opts.aws_api_burst, on_request=counted)
        if provider == 'Sabakan':
            from ansible_collections.steward.cluster.plugins.module_utils.machines.sabakan_driver import SabakanDriver
            return SabakanDriver(self.client, default_url=self.opts.sabakan_url)
        return None
