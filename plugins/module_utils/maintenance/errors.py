# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Errors of the maintenance engine: one base (MaintenanceError), subclasses by who has to act on them.

Bad input (maintenance.yaml, a config source, the data annotation) is also a
`common.errors.InvalidInput`: `field` is the path of the offending field, `rule` the broken rule.
"""

from __future__ import annotations

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput


class MaintenanceError(Exception):
    """Base of every maintenance-area failure; the message says what was wrong and where."""


class ConfigError(MaintenanceError, InvalidInput):
    """The maintenance.yaml (or the object holding it) is wrong; nothing acts on it."""

    def result(self) -> dict:
        """A module's failure says that the maintenance config is what is wrong (common/shell.fail_from)."""
        return {'msg': 'maintenance config: %s' % self}


class DataError(MaintenanceError, InvalidInput):
    """The cloud.sap/maintenance-data annotation cannot be read; the node is left alone."""


class OptionError(MaintenanceError, InvalidInput):
    """A module option is malformed (`field` names the option and the item); nothing was read or written."""


class PluginError(MaintenanceError):
    """A plugin could not do its job this time (API down, bad node data, SMTP refused); retried next reconcile."""


class TemplateError(PluginError):
    """A message template failed to parse or render."""
