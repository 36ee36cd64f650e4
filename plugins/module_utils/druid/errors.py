# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One exception tree for the druid area (the `Etcd` resource), so the controller loop maps failures in one place."""

from __future__ import annotations

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput


class DruidError(Exception):
    """Base of every failure of the druid area."""


class EtcdSpecError(DruidError, InvalidInput):
    """An `Etcd` object cannot be acted on: `field` (`spec.replicas`), `rule` (`odd`) and `value` say where and why.
    Raised before anything is applied; the loop reports it as an Event and in `status.lastErrors`."""

    __init__ = InvalidInput.__init__
