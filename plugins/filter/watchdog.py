# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that check a DWD prober or weeder config with the engine's parser (the one the controller runs) and
return it as the text of DWD's `dep-config.yaml`, so a role fails on a bad config before it applies anything."""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.prober_config import parse_prober_config
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.weeder_config import parse_weeder_config

try:
    import yaml
except ImportError:  # pragma: no cover - ansible-core depends on PyYAML
    yaml = None


def _render(value, parse, what):
    data = dict(value) if hasattr(value, 'items') else value
    try:
        parse(data, "")
    except InvalidInput as exc:
        raise AnsibleFilterError('invalid %s: %s (rule %s)' % (what, exc, exc.rule))
    if isinstance(data, str):
        return data
    return yaml.safe_dump(_plain(data), default_flow_style=False, sort_keys=False)


def _plain(value):
    """Ansible's lazy containers and unsafe strings as plain YAML types."""
    if hasattr(value, 'items'):
        return dict((str(k), _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    for kind in (bool, str, int, float):   # tagged subclasses (ansible-core 2.19) as their plain type
        if isinstance(value, kind):
            return kind(value)
    return value


def watchdog_prober_config(value):
    return _render(value, parse_prober_config, 'prober config')


def watchdog_weeder_config(value):
    return _render(value, parse_weeder_config, 'weeder config')


class FilterModule(object):
    def filters(self):
        return {'watchdog_prober_config': watchdog_prober_config, 'watchdog_weeder_config': watchdog_weeder_config}
