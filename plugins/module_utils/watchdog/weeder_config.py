# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""DWD's weeder config (api/weeder/types.go), read unchanged: `watchDuration` (default 5m0s) and
`servicesAndDependantSelectors` (service name -> `podSelectors`, a list of metav1.LabelSelector, both
required), every selector checked as the API server checks it (internal/weeder/config.go).

Fields of our own (DWD ignores unknown keys): `maxDeletionsPerPod` (default 3) and `deletionWindow`
(default 10m): within any `deletionWindow` the weeder deletes a pod at most `maxDeletionsPerPod` times,
so an upstream that flaps cannot make it delete dependants in a loop (see weeder.py for how pods of one
controller are counted). `maxDeletionsPerPod: 0` removes the limit (DWD's behaviour).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.durations import metav1_duration
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, field_of, shown
from ansible_collections.steward.cluster.plugins.module_utils.common.names import dns_label
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import label_selector_string, validate_label_selector
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import constants as c
from ansible_collections.steward.cluster.plugins.module_utils.common.yaml_text import load_yaml
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.fields import Fields, listing

MAX_DELETIONS = 1000


@dataclasses.dataclass(frozen=True)
class PodSelector:
    selector: Dict[str, Any]   # normalised metav1.LabelSelector
    query: str                 # its ?labelSelector= form ('' selects every pod of the namespace)


@dataclasses.dataclass(frozen=True)
class WeederConfig:
    services: Dict[str, Tuple[PodSelector, ...]]   # service (= Endpoints) name -> dependant pod selectors
    watch_duration: float = c.DEFAULT_WATCH_DURATION
    max_deletions_per_pod: int = c.DEFAULT_MAX_DELETIONS_PER_POD
    deletion_window: float = c.DEFAULT_DELETION_WINDOW
    warnings: Tuple[str, ...] = ()


_TOP = ('watchDuration', 'servicesAndDependantSelectors', 'maxDeletionsPerPod', 'deletionWindow')
_DEPENDANTS = ('podSelectors',)


def parse_weeder_config(source: Any, field: str = '') -> WeederConfig:
    """The config from YAML text or a parsed mapping; raises InvalidInput naming the field."""
    data = load_yaml(source, field or 'config')
    top = Fields(data, field, _TOP)
    warnings: List[str] = list(top.unknown)
    watch = c.DEFAULT_WATCH_DURATION
    if top.has('watchDuration'):
        watch = metav1_duration(top.get('watchDuration'), top.field('watchDuration'))
        validate.timeout(watch, top.field('watchDuration'))
    window = c.DEFAULT_DELETION_WINDOW
    if top.has('deletionWindow'):
        window = metav1_duration(top.get('deletionWindow'), top.field('deletionWindow'))
        validate.timeout(window, top.field('deletionWindow'))
    limit = (validate.integer(top.get('maxDeletionsPerPod'), top.field('maxDeletionsPerPod'), 0, MAX_DELETIONS)
             if top.has('maxDeletionsPerPod') else c.DEFAULT_MAX_DELETIONS_PER_POD)
    where = top.field('servicesAndDependantSelectors')
    services = top.get('servicesAndDependantSelectors')
    if not services:
        raise InvalidInput(where, 'required', 'must map at least one service name to its podSelectors')
    if not isinstance(services, dict):
        raise InvalidInput(where, 'mapping', 'expected a mapping of service names to {podSelectors: [...]}, got %s'
                           % shown(services), services)
    parsed: Dict[str, Tuple[PodSelector, ...]] = {}
    for name, dependants in services.items():
        service_field = field_of(where, name)
        dns_label(name, service_field)
        fields = Fields(dependants, service_field, _DEPENDANTS)
        warnings.extend(fields.unknown)
        selectors = fields.get('podSelectors')
        if not selectors:
            raise InvalidInput(fields.field('podSelectors'), 'required', 'must list at least one label selector')
        clean = []
        for index, selector in enumerate(listing(selectors, fields.field('podSelectors'))):
            normal = validate_label_selector(selector, field_of(fields.field('podSelectors'), index))
            clean.append(PodSelector(selector=normal, query=label_selector_string(normal)))
        parsed[name] = tuple(clean)
    return WeederConfig(services=parsed, watch_duration=watch, max_deletions_per_pod=limit, deletion_window=window,
                        warnings=tuple(warnings))
