# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Errors of the machines area. Bad input (a MachineClass, a Machine spec, a module option) raises
common.errors.InvalidInput before anything acts; what goes wrong while acting is a MachinesError."""

from __future__ import annotations

from typing import Optional

from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Code


class MachinesError(Exception):
    """Something in the machines area failed; `where` names the object (`namespace/name`) when known."""

    def __init__(self, message: str, where: str = ''):
        super().__init__(message)
        self.where = where


class DriverError(MachinesError):
    """A driver call failed with one of MCM's codes; callers dispatch on `code` (codes.next_step), never on text.
    `retry_after` is a hint in seconds (a throttled call's backoff), None when the table decides."""

    def __init__(self, code: Code, message: str, call: Optional[Call] = None, where: str = '',
                 retry_after: Optional[float] = None):
        super().__init__(message, where)
        self.code = Code(code)
        self.call = call
        self.retry_after = retry_after

    def __str__(self) -> str:
        return '%s: %s' % (self.code.mcm_name, self.args[0])


class ClassNotReady(MachinesError):
    """The MachineClass or its Secret is missing, invalid or not usable: machines of that class wait (nothing is
    created). `field` and `rule` name the broken rule when one is (`secretRef`, `secret-opt-in`)."""

    def __init__(self, message: str, where: str = '', field: str = '', rule: str = ''):
        super().__init__(message, where)
        self.field = field
        self.rule = rule


class WaitTimeout(MachinesError):
    """A module's `wait` ran past `wait_timeout`; `state` holds what was seen last."""

    def __init__(self, message: str, where: str = '', state: Optional[dict] = None):
        super().__init__(message, where)
        self.state = state or {}

    def result(self) -> dict:
        """The readiness seen last, reported beside the message when a module's wait ends in this."""
        return {'readiness': self.state}
