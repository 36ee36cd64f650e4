# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""DWD's prober config (api/prober/types.go), read unchanged: the same field names and defaults
(internal/prober/config.go), every error naming the field.

Differences from DWD, each because DWD's behaviour loses data or hides a mistake:
* `kubeConfigSecretName` may be empty or absent: the probed cluster is then the one the caller runs
  against (DWD requires it, because it always probes a shoot from the seed);
* `scaleUp.level` / `scaleDown.level` are required, as the seed documents (Go silently reads a missing level as 0);
* numbers are range-checked (a failure fraction of 0 would scale down on every probe);
* a target named twice is refused (two entries would race on the same replicas);
* unknown keys are accepted as DWD does, and listed in `warnings`.

Fields of our own (DWD ignores unknown keys, so a file with them still loads there):
`failureThreshold` / `successThreshold` (consecutive failed / successful lease probes before scaling down /
up; 1 and 1 act on every probe, as DWD does) and `backoffDurationForThrottledRequests` (DWD's hard-coded 10s).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, List, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.durations import metav1_duration, positive_duration
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, field_of, shown
from ansible_collections.steward.cluster.plugins.module_utils.common.names import dns_subdomain
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import constants as c
from ansible_collections.steward.cluster.plugins.module_utils.common.yaml_text import load_yaml
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.fields import Fields, boolean, listing

_GROUP_VERSION = re.compile(r'^(?:([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/)?([a-z0-9]+)$')
_KIND = re.compile(r'^[A-Z][A-Za-z0-9]*$')
MAX_THRESHOLD = 100


@dataclasses.dataclass(frozen=True)
class TargetRef:
    """autoscalingv1.CrossVersionObjectReference: a scalable resource in the watchdog's namespace."""
    api_version: str
    kind: str
    name: str

    def __str__(self) -> str:
        return '%s/%s' % (self.kind, self.name)

    def as_dict(self) -> dict:
        return {'apiVersion': self.api_version, 'kind': self.kind, 'name': self.name}


@dataclasses.dataclass(frozen=True)
class ScaleInfo:
    level: int
    initial_delay: float = c.DEFAULT_SCALE_INITIAL_DELAY
    timeout: float = c.DEFAULT_SCALE_TIMEOUT


@dataclasses.dataclass(frozen=True)
class DependentResource:
    ref: TargetRef
    optional: bool
    scale_up: ScaleInfo
    scale_down: ScaleInfo

    def info(self, direction: str) -> ScaleInfo:
        return self.scale_up if direction == 'up' else self.scale_down


@dataclasses.dataclass(frozen=True)
class ProberConfig:
    dependent_resources: Tuple[DependentResource, ...]
    kube_config_secret_name: str = ''
    probe_interval: float = c.DEFAULT_PROBE_INTERVAL
    initial_delay: float = c.DEFAULT_PROBE_INITIAL_DELAY
    probe_timeout: float = c.DEFAULT_PROBE_TIMEOUT
    backoff_jitter_factor: float = c.DEFAULT_BACKOFF_JITTER_FACTOR
    kcm_node_monitor_grace_duration: float = c.DEFAULT_KCM_NODE_MONITOR_GRACE_DURATION
    node_lease_failure_fraction: float = c.DEFAULT_NODE_LEASE_FAILURE_FRACTION
    failure_threshold: int = c.DEFAULT_FAILURE_THRESHOLD
    success_threshold: int = c.DEFAULT_SUCCESS_THRESHOLD
    throttled_backoff: float = c.DEFAULT_THROTTLED_BACKOFF
    warnings: Tuple[str, ...] = ()

    @property
    def lease_expiry_seconds(self) -> float:
        """Seconds after its last renewal a lease counts as expired: 0.75 x kcmNodeMonitorGraceDuration."""
        return self.kcm_node_monitor_grace_duration * c.EXPIRY_BUFFER_FRACTION


_TOP = ('kubeConfigSecretName', 'probeInterval', 'initialDelay', 'probeTimeout', 'backoffJitterFactor',
        'dependentResourceInfos', 'kcmNodeMonitorGraceDuration', 'nodeLeaseFailureFraction',
        'failureThreshold', 'successThreshold', 'backoffDurationForThrottledRequests')
_RESOURCE = ('ref', 'optional', 'scaleUp', 'scaleDown')
_REF = ('apiVersion', 'kind', 'name')
_SCALE = ('level', 'initialDelay', 'timeout')


def parse_prober_config(source: Any, field: str = '') -> ProberConfig:
    """The config from YAML text (the file's content) or an already parsed mapping; raises InvalidInput."""
    data = load_yaml(source, field or 'config')
    top = Fields(data, field, _TOP)
    warnings: List[str] = list(top.unknown)

    def duration(name: str, default: float, positive: bool = True) -> float:
        if not top.has(name):
            return default
        seconds = (positive_duration(top.get(name), top.field(name), metav1=True) if positive
                   else metav1_duration(top.get(name), top.field(name)))
        if seconds > validate.MAX_TIMEOUT_SECONDS:   # a grace of years is a typo that would switch the prober off
            raise InvalidInput(top.field(name), 'maximum', 'must be at most a week (168h), got %s' % shown(top.get(name)),
                               top.get(name))
        return seconds

    def number(name: str, default: float, **bounds: Any) -> float:
        return validate.number(top.get(name), top.field(name), **bounds) if top.has(name) else default

    def threshold(name: str, default: int) -> int:
        return validate.integer(top.get(name), top.field(name), 1, MAX_THRESHOLD) if top.has(name) else default

    secret = top.get('kubeConfigSecretName')
    if secret is not None and secret != '':
        secret = dns_subdomain(secret, top.field('kubeConfigSecretName'))
    infos = top.get('dependentResourceInfos')
    if infos is None or infos == []:
        raise InvalidInput(top.field('dependentResourceInfos'), 'required',
                           'must list at least one dependent resource (ref, optional, scaleUp, scaleDown)')
    resources = _resources(listing(infos, top.field('dependentResourceInfos')), top.field('dependentResourceInfos'),
                           warnings)
    return ProberConfig(
        dependent_resources=resources,
        kube_config_secret_name=secret or '',
        probe_interval=duration('probeInterval', c.DEFAULT_PROBE_INTERVAL),
        initial_delay=duration('initialDelay', c.DEFAULT_PROBE_INITIAL_DELAY, positive=False),
        probe_timeout=duration('probeTimeout', c.DEFAULT_PROBE_TIMEOUT),
        backoff_jitter_factor=number('backoffJitterFactor', c.DEFAULT_BACKOFF_JITTER_FACTOR, minimum=0, maximum=1),
        kcm_node_monitor_grace_duration=duration('kcmNodeMonitorGraceDuration', c.DEFAULT_KCM_NODE_MONITOR_GRACE_DURATION),
        node_lease_failure_fraction=number('nodeLeaseFailureFraction', c.DEFAULT_NODE_LEASE_FAILURE_FRACTION,
                                           minimum=0, maximum=1, exclusive_minimum=True),
        failure_threshold=threshold('failureThreshold', c.DEFAULT_FAILURE_THRESHOLD),
        success_threshold=threshold('successThreshold', c.DEFAULT_SUCCESS_THRESHOLD),
        throttled_backoff=duration('backoffDurationForThrottledRequests', c.DEFAULT_THROTTLED_BACKOFF, positive=False),
        warnings=tuple(warnings),
    )


def _resources(items: List[Any], where: str, warnings: List[str]) -> Tuple[DependentResource, ...]:
    resources: List[DependentResource] = []
    seen = {}
    for index, item in enumerate(items):
        path = field_of(where, index)
        fields = Fields(item, path, _RESOURCE)
        warnings.extend(fields.unknown)
        ref = _ref(fields.get('ref'), fields.field('ref'), warnings)
        key = (ref.kind, ref.name)
        if key in seen:
            raise InvalidInput(fields.field('ref'), 'unique', '%s is already listed at %s; each resource may be '
                               'listed once' % (ref, seen[key]), ref.as_dict())
        seen[key] = path
        optional = boolean(fields.get('optional'), fields.field('optional')) if fields.has('optional') else False
        resources.append(DependentResource(
            ref=ref, optional=optional,
            scale_up=_scale_info(fields.get('scaleUp'), fields.field('scaleUp'), warnings),
            scale_down=_scale_info(fields.get('scaleDown'), fields.field('scaleDown'), warnings)))
    return tuple(resources)


def _ref(value: Any, where: str, warnings: List[str]) -> TargetRef:
    if value is None:
        raise InvalidInput(where, 'required', 'is required (apiVersion, kind and name of a scalable resource)')
    fields = Fields(value, where, _REF)
    warnings.extend(fields.unknown)
    for name in _REF:
        if not fields.has(name) or fields.get(name) == '':
            raise InvalidInput(fields.field(name), 'required', 'is required')
    api_version = validate.text(fields.get('apiVersion'), fields.field('apiVersion'))
    if not _GROUP_VERSION.match(api_version):
        raise InvalidInput(fields.field('apiVersion'), 'api-version', '%s is not an API version ([group/]version, '
                           'e.g. apps/v1)' % shown(api_version), api_version)
    kind = validate.text(fields.get('kind'), fields.field('kind'))
    if not _KIND.match(kind):
        raise InvalidInput(fields.field('kind'), 'kind', '%s is not a resource kind (e.g. Deployment)' % shown(kind), kind)
    name = dns_subdomain(fields.get('name'), fields.field('name'))
    return TargetRef(api_version, kind, name)


def _scale_info(value: Any, where: str, warnings: List[str]) -> ScaleInfo:
    if value is None:
        raise InvalidInput(where, 'required', 'is required (level, and optionally initialDelay and timeout)')
    fields = Fields(value, where, _SCALE)
    warnings.extend(fields.unknown)
    if not fields.has('level'):
        raise InvalidInput(fields.field('level'), 'required', 'is required (0 is scaled first)')
    level = validate.integer(fields.get('level'), fields.field('level'), minimum=0)
    initial_delay = (metav1_duration(fields.get('initialDelay'), fields.field('initialDelay'))
                     if fields.has('initialDelay') else c.DEFAULT_SCALE_INITIAL_DELAY)
    timeout = c.DEFAULT_SCALE_TIMEOUT
    if fields.has('timeout'):
        timeout = metav1_duration(fields.get('timeout'), fields.field('timeout'))
        validate.timeout(timeout, fields.field('timeout'))
    return ScaleInfo(level=level, initial_delay=initial_delay, timeout=timeout)
