# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""watchdog_probe's parameters, parsed once: the prober config (given inline or read from a file, checked as the
controller's prober checks it), the namespace and the owner; InvalidInput names the option before the cluster is
contacted, in check mode too."""

from __future__ import annotations

from typing import Any, Dict, Mapping

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.names import dns_label
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.prober_config import (
    ProberConfig, parse_prober_config)


def load_config(params: Mapping[str, Any]) -> ProberConfig:
    """The checked config (raises InvalidInput naming `config.<field>` or the file)."""
    if params['config'] is not None:
        return parse_prober_config(params['config'], 'config')
    path = validate.existing_file(params['config_file'], 'config_file')
    with open(path) as f:
        try:
            return parse_prober_config(f.read(), '')
        except InvalidInput as exc:
            raise InvalidInput('config_file', exc.rule, '%s: %s' % (path, exc), exc.value) from None


def parse_watchdog_probe(params: Mapping[str, Any]) -> Dict[str, Any]:
    return dict(config=load_config(params), namespace=dns_label(params['namespace'], 'namespace'),
                owner=validate.text(params['owner'], 'owner', max_length=253))
