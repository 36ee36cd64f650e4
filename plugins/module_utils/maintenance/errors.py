# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Errors of the maintenance engine, by who has to act on them."""

from __future__ import annotations


class ConfigError(ValueError):
    """The maintenance.yaml is wrong; the message starts with the path of the offending field."""


class PluginError(Exception):
    """A plugin could not do its job this time (API down, bad node data, SMTP refused); retried next reconcile."""


class TemplateError(PluginError):
    """A message template failed to parse or render."""


class DataError(ValueError):
    """The cloud.sap/maintenance-data annotation cannot be read."""
