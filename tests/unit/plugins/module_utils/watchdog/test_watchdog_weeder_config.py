"""The weeder config: DWD's YAML unchanged, its default watchDuration, our deletion limit, selector errors."""

import textwrap

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.weeder_config import parse_weeder_config

# gardener/dependency-watchdog example/02-dwd-weeder-configmap.yaml (dep-config.yaml), unchanged.
DWD_EXAMPLE = textwrap.dedent('''
    watchDuration: 5m0s
    servicesAndDependantSelectors:
      etcd-main-client:
        podSelectors:
          - matchExpressions:
              - key: gardener.cloud/role
                operator: In
                values:
                  - controlplane
              - key: role
                operator: In
                values:
                  - apiserver
      kube-apiserver:
        podSelectors:
          - matchExpressions:
              - key: gardener.cloud/role
                operator: In
                values:
                  - controlplane
              - key: role
                operator: NotIn
                values:
                  - main
                  - apiserver
''')


def test_dwd_example_loads():
    config = parse_weeder_config(DWD_EXAMPLE)
    assert config.watch_duration == 300.0
    assert sorted(config.services) == ['etcd-main-client', 'kube-apiserver']
    (etcd,) = config.services['etcd-main-client']
    assert etcd.query == 'gardener.cloud/role in (controlplane),role in (apiserver)'
    assert config.services['kube-apiserver'][0].query == 'gardener.cloud/role in (controlplane),role notin (apiserver,main)'
    assert (config.max_deletions_per_pod, config.deletion_window) == (3, 600.0)
    assert config.warnings == ()


def test_defaults_and_extensions():
    config = parse_weeder_config({'servicesAndDependantSelectors': {'etcd': {'podSelectors': [{'matchLabels': {'a': 'b'}}]}},
                                  'maxDeletionsPerPod': 0, 'deletionWindow': '1h', 'extra': 1})
    assert config.watch_duration == 300.0                  # DWD's default 5m0s
    assert (config.max_deletions_per_pod, config.deletion_window) == (0, 3600.0)
    assert config.services['etcd'][0].query == 'a=b'
    assert config.warnings == ('extra',)


@pytest.mark.parametrize('config, field, rule', [
    ({}, 'servicesAndDependantSelectors', 'required'),
    ({'servicesAndDependantSelectors': ['etcd']}, 'servicesAndDependantSelectors', 'mapping'),
    ({'servicesAndDependantSelectors': {'Etcd_Main': {'podSelectors': [{}]}}}, 'servicesAndDependantSelectors.Etcd_Main',
     'dns-label'),
    ({'servicesAndDependantSelectors': {'etcd': {}}}, 'servicesAndDependantSelectors.etcd.podSelectors', 'required'),
    ({'servicesAndDependantSelectors': {'etcd': {'podSelectors': [{'matchExpressions': [
        {'key': 'role', 'operator': 'In'}]}]}}},
     'servicesAndDependantSelectors.etcd.podSelectors[0].matchExpressions[0].values', 'non-empty'),
    ({'servicesAndDependantSelectors': {'etcd': {'podSelectors': [{'matchExpressions': [
        {'key': 'role', 'operator': 'Exists', 'values': ['x']}]}]}}},
     'servicesAndDependantSelectors.etcd.podSelectors[0].matchExpressions[0].values', 'empty'),
    ({'servicesAndDependantSelectors': {'etcd': {'podSelectors': [{'matchExpressions': [
        {'key': 'role', 'operator': 'Equals', 'values': ['x']}]}]}}},
     'servicesAndDependantSelectors.etcd.podSelectors[0].matchExpressions[0].operator', 'choice'),
    ({'servicesAndDependantSelectors': {'etcd': {'podSelectors': [{'matchLabels': {'bad key!': 'x'}}]}}},
     'servicesAndDependantSelectors.etcd.podSelectors[0].matchLabels.bad key!', 'qualified-name'),
    ({'servicesAndDependantSelectors': {'etcd': {'podSelectors': [{'matchLabel': {'a': 'b'}}]}}},
     'servicesAndDependantSelectors.etcd.podSelectors[0].matchLabel', 'unknown-field'),
    ({'watchDuration': '0s', 'servicesAndDependantSelectors': {'etcd': {'podSelectors': [{}]}}}, 'watchDuration', 'minimum'),
    ({'watchDuration': 300, 'servicesAndDependantSelectors': {'etcd': {'podSelectors': [{}]}}}, 'watchDuration', 'duration'),
    ({'maxDeletionsPerPod': -1, 'servicesAndDependantSelectors': {'etcd': {'podSelectors': [{}]}}},
     'maxDeletionsPerPod', 'minimum'),
])
def test_bad_config_names_field_and_rule(config, field, rule):
    with pytest.raises(InvalidInput) as info:
        parse_weeder_config(config)
    assert (info.value.field, info.value.rule) == (field, rule)
