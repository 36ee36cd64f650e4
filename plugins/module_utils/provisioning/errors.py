# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One exception tree for the provisioning area. Bad input is `common.errors.InvalidInput` (raised before
anything acts); these are what goes wrong, or is refused, while planning or acting. Callers match on the class
(and on `rule` for refusals), never on the message."""

from __future__ import annotations

from typing import Any, Dict, Optional


class ProvisioningError(Exception):
    """Base of every provisioning failure; `where` names the file, node or member concerned."""

    def __init__(self, message: str, where: Optional[str] = None):
        super().__init__(message)
        self.where = where

    def result(self) -> Dict[str, Any]:
        """The result fields a module adds to the message when this ends it (common/shell.fail_from)."""
        return {'where': self.where} if self.where else {}


class PkiError(ProvisioningError):
    """A key or certificate cannot be read, issued or verified (wrong CA, unreadable PEM, missing authority)."""


class LoadBalancerConfigInvalid(ProvisioningError):
    """`haproxy -c` rejected a rendered config; the live config was left as it was. `detail` is haproxy's output."""

    def __init__(self, message: str, where: Optional[str] = None, detail: str = ''):
        super().__init__(message, where)
        self.detail = detail


class Refused(ProvisioningError):
    """A safety rule stopped an operation before it changed anything. `rule` is a stable word:
    `etcd-quorum`, `cluster-exists`, `not-ours`, `foreign-member`, `authority-mismatch`, ..."""

    def __init__(self, message: str, rule: str, where: Optional[str] = None):
        super().__init__(message, where)
        self.rule = rule

    def result(self) -> Dict[str, Any]:
        return dict(super().result(), rule=self.rule, refused=True)


class NotReady(ProvisioningError):
    """Something did not come up before its deadline (the etcd member, the Node); the files are in place."""
