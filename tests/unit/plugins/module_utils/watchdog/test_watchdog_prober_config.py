"""The prober config: DWD's YAML unchanged (its example ConfigMap and its own test data), DWD's defaults,
our extensions, and an error naming the field for every bad input."""

import textwrap

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.prober_config import TargetRef, parse_prober_config

# gardener/dependency-watchdog example/01-dwd-prober-configmap.yaml (dep-config.yaml), unchanged.
DWD_EXAMPLE = textwrap.dedent('''
    kubeConfigSecretName: "dwd-api-server-probe-secret"
    kcmNodeMonitorGraceDuration: 40s
    nodeLeaseFailureFraction: 0.6
    dependentResourceInfos:
      - ref:
          kind: "Deployment"
          name: "kube-controller-manager"
          apiVersion: "apps/v1"
        optional: false
        scaleUp:
          level: 0
        scaleDown:
          level: 1
      - ref:
          kind: "Deployment"
          name: "machine-controller-manager"
          apiVersion: "apps/v1"
        optional: false
        scaleUp:
          level: 1
          initialDelay: 30s
        scaleDown:
          level: 0
      - ref:
          kind: "Deployment"
          name: "cluster-autoscaler"
          apiVersion: "apps/v1"
        optional: true
        scaleUp:
          level: 2
        scaleDown:
          level: 0
''')

# internal/prober/testdata/valid_config.yaml: note `backOffJitterFactor` (Go matches JSON keys ignoring case).
DWD_TESTDATA = textwrap.dedent('''
    kubeConfigSecretName: "dwd-api-server-probe-secret"
    probeInterval: 30s
    initialDelay: 5s
    backOffJitterFactor: 0.3
    kcmNodeMonitorGraceDuration: 2m
    dependentResourceInfos:
      - ref: {kind: "Deployment", name: "kube-controller-manager", apiVersion: "apps/v1"}
        optional: false
        scaleUp: {level: 0, replicas: 1}
        scaleDown: {level: 1, timeout: 45s}
''')


def test_dwd_example_loads_with_dwd_defaults():
    config = parse_prober_config(DWD_EXAMPLE)
    assert config.kube_config_secret_name == 'dwd-api-server-probe-secret'
    assert (config.probe_interval, config.initial_delay, config.probe_timeout) == (10.0, 30.0, 30.0)
    assert config.backoff_jitter_factor == 0.2
    assert config.kcm_node_monitor_grace_duration == 40.0 and config.lease_expiry_seconds == 30.0
    assert config.node_lease_failure_fraction == 0.6
    assert (config.failure_threshold, config.success_threshold, config.throttled_backoff) == (1, 1, 10.0)
    kcm, mcm, ca = config.dependent_resources
    assert kcm.ref == TargetRef('apps/v1', 'Deployment', 'kube-controller-manager') and not kcm.optional
    assert (kcm.scale_up.level, kcm.scale_down.level) == (0, 1)
    assert (kcm.scale_up.initial_delay, kcm.scale_up.timeout) == (0.0, 30.0)
    assert mcm.scale_up.initial_delay == 30.0 and ca.optional and ca.scale_up.level == 2
    assert config.warnings == ()


def test_dwd_testdata_keys_match_ignoring_case_and_unknown_keys_warn():
    config = parse_prober_config(DWD_TESTDATA)
    assert config.backoff_jitter_factor == 0.3        # `backOffJitterFactor`
    assert config.kcm_node_monitor_grace_duration == 120.0
    assert config.dependent_resources[0].scale_down.timeout == 45.0
    assert config.warnings == ('dependentResourceInfos[0].scaleUp.replicas',)


def test_our_extensions_and_optional_secret():
    config = parse_prober_config({
        'failureThreshold': 3, 'successThreshold': 2, 'backoffDurationForThrottledRequests': '5s',
        'dependentResourceInfos': [{'ref': {'apiVersion': 'apps/v1', 'kind': 'StatefulSet', 'name': 'x'},
                                    'scaleUp': {'level': 0}, 'scaleDown': {'level': 0}}]})
    assert (config.failure_threshold, config.success_threshold, config.throttled_backoff) == (3, 2, 5.0)
    assert config.kube_config_secret_name == ''       # probe the cluster the watchdog runs in


def config_with(**overrides):
    base = {'dependentResourceInfos': [{'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'kcm'},
                                        'scaleUp': {'level': 0}, 'scaleDown': {'level': 0}}]}
    base.update(overrides)
    return base


def resource_with(**overrides):
    item = {'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'kcm'},
            'scaleUp': {'level': 0}, 'scaleDown': {'level': 0}}
    item.update(overrides)
    return {'dependentResourceInfos': [item]}


@pytest.mark.parametrize('config, field, rule', [
    ({}, 'dependentResourceInfos', 'required'),
    ({'dependentResourceInfos': []}, 'dependentResourceInfos', 'required'),
    ({'dependentResourceInfos': {'a': 1}}, 'dependentResourceInfos', 'list'),
    (config_with(probeInterval='0s'), 'probeInterval', 'positive'),
    (config_with(probeInterval=10), 'probeInterval', 'duration'),
    (config_with(probeTimeout='soon'), 'probeTimeout', 'duration'),
    (config_with(initialDelay='-1s'), 'initialDelay', 'non-negative'),
    (config_with(kcmNodeMonitorGraceDuration='0s'), 'kcmNodeMonitorGraceDuration', 'positive'),
    (config_with(nodeLeaseFailureFraction=0), 'nodeLeaseFailureFraction', 'minimum'),
    (config_with(nodeLeaseFailureFraction=1.5), 'nodeLeaseFailureFraction', 'maximum'),
    (config_with(nodeLeaseFailureFraction='lots'), 'nodeLeaseFailureFraction', 'number'),
    (config_with(backoffJitterFactor=-0.1), 'backoffJitterFactor', 'minimum'),
    (config_with(failureThreshold=0), 'failureThreshold', 'minimum'),
    (config_with(successThreshold=1.5), 'successThreshold', 'integer'),
    (config_with(kubeConfigSecretName='Not_A_Name'), 'kubeConfigSecretName', 'dns-subdomain'),
    (resource_with(ref=None), 'dependentResourceInfos[0].ref', 'required'),
    (resource_with(ref={'apiVersion': 'apps/v/1', 'kind': 'Deployment', 'name': 'kcm'}),
     'dependentResourceInfos[0].ref.apiVersion', 'api-version'),
    (resource_with(ref={'apiVersion': 'apps/v1', 'kind': 'deployment', 'name': 'kcm'}),
     'dependentResourceInfos[0].ref.kind', 'kind'),
    (resource_with(ref={'apiVersion': 'apps/v1', 'kind': 'Deployment'}), 'dependentResourceInfos[0].ref.name', 'required'),
    (resource_with(ref={'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'KCM'}),
     'dependentResourceInfos[0].ref.name', 'dns-subdomain'),
    (resource_with(optional='true'), 'dependentResourceInfos[0].optional', 'boolean'),
    (resource_with(scaleUp=None), 'dependentResourceInfos[0].scaleUp', 'required'),
    (resource_with(scaleDown={'initialDelay': '1s'}), 'dependentResourceInfos[0].scaleDown.level', 'required'),
    (resource_with(scaleDown={'level': -1}), 'dependentResourceInfos[0].scaleDown.level', 'minimum'),
    (resource_with(scaleDown={'level': 'one'}), 'dependentResourceInfos[0].scaleDown.level', 'integer'),
    (resource_with(scaleUp={'level': 0, 'timeout': '0s'}), 'dependentResourceInfos[0].scaleUp.timeout', 'minimum'),
    (resource_with(scaleUp={'level': 0, 'initialDelay': 'later'}), 'dependentResourceInfos[0].scaleUp.initialDelay',
     'duration'),
    ('probeInterval: [', 'config', 'yaml'),
    ('- a list', '', 'mapping'),
])
def test_bad_config_names_field_and_rule(config, field, rule):
    with pytest.raises(InvalidInput) as info:
        parse_prober_config(config)
    assert (info.value.field, info.value.rule) == (field, rule)


def test_a_target_listed_twice_is_refused():
    item = {'ref': {'apiVersion': 'apps/v1', 'kind': 'Deployment', 'name': 'kcm'},
            'scaleUp': {'level': 0}, 'scaleDown': {'level': 0}}
    with pytest.raises(InvalidInput, match=r'dependentResourceInfos\[1\]\.ref: Deployment/kcm is already listed at '
                                           r'dependentResourceInfos\[0\]') as info:
        parse_prober_config({'dependentResourceInfos': [item, dict(item)]})
    assert info.value.rule == 'unique'


def test_yaml_error_names_the_line():
    with pytest.raises(InvalidInput, match=r'config: is not valid YAML at line 2'):
        parse_prober_config('dependentResourceInfos:\n  - ref: {kind: [}\n')
