"""The lab emulator's CEL interpreter (lab/kube/cel.py): the rule shapes of the collection's CRDs (every rule of
controller/deploy/crds is read), evaluated as the API server evaluates them, and rules outside the subset refused
when the CRD is registered rather than let through."""

from __future__ import annotations

import glob
import os

import pytest
import yaml

from lab.kube import cel

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def holds(rule, value, old=None):
    return cel.Rule({'rule': rule, 'message': 'm'}).holds(value, old)[0]


@pytest.mark.parametrize('rule, value, expected', [
    ('self <= 1 || self % 2 == 1', 0, True),
    ('self <= 1 || self % 2 == 1', 1, True),
    ('self <= 1 || self % 2 == 1', 3, True),
    ('self <= 1 || self % 2 == 1', 2, False),
    ('self <= 1 || self % 2 == 1', 4, False),
    ("!has(self.x)", {'y': 1}, True),
    ("!has(self.x)", {'x': None}, False),
    ("self.startsWith('https://') && isURL(self)", 'https://10.0.0.1:2380', True),
    ("self.startsWith('https://') && isURL(self)", 'http://10.0.0.1:2380', False),
    ('isURL(self)', 'not a url', False),
    ('isURL(self)', 'http://minio.lab:9000', True),
    ("self.type == 'delta' ? !has(self.isFinal) || self.isFinal == false : true", {'type': 'delta', 'isFinal': True}, False),
    ("self.type == 'delta' ? !has(self.isFinal) || self.isFinal == false : true", {'type': 'full', 'isFinal': True}, True),
    ('self.all(m, m.size() > 0)', ['a', 'bc'], True),
    ('self.exists(m, m == "b")', ['a', 'bc'], False),
    ('self.filter(m, m.startsWith("a")).size() == 1', ['a', 'bc'], True),
    ('size(self) == 2 && "a" in self', ['a', 'bc'], True),
])
def test_rule_shapes(rule, value, expected):
    assert holds(rule, value) is expected


DURATIONS = ('!(has(self.deltaSnapshotPeriod) && has(self.garbageCollectionPeriod)) || '
             'duration(self.deltaSnapshotPeriod).getSeconds() < duration(self.garbageCollectionPeriod).getSeconds()')


@pytest.mark.parametrize('value, expected', [
    ({}, True),
    ({'deltaSnapshotPeriod': '300s'}, True),
    ({'deltaSnapshotPeriod': '300s', 'garbageCollectionPeriod': '43200s'}, True),
    ({'deltaSnapshotPeriod': '1h', 'garbageCollectionPeriod': '1h'}, False),
    ({'deltaSnapshotPeriod': '1h30m', 'garbageCollectionPeriod': '90m'}, False),
    ({'deltaSnapshotPeriod': '1.5m', 'garbageCollectionPeriod': '91s'}, True),
])
def test_go_durations_compare_by_seconds(value, expected):
    assert holds(DURATIONS, value) is expected


def test_a_runtime_error_fails_the_rule_with_cels_reason():
    ok, why = cel.Rule({'rule': 'self.missing == 1', 'message': 'm'}).holds({'x': 1}, None)
    assert not ok and 'no such key: missing' in why
    ok, why = cel.Rule({'rule': "duration(self) == duration('1s')", 'message': 'm'}).holds('soon', None)
    assert not ok and 'invalid duration' in why
    # CEL's && and || are commutative: a deciding side wins over an erring one.
    assert holds('self.missing == 1 || true', {}) is True
    assert holds('self.missing == 1 && false', {}) is False


def test_transition_rules_run_on_updates_where_the_old_value_exists():
    schema = {'type': 'object', 'properties': {'spec': {'type': 'object', 'properties': {
        'storageClass': {'type': 'string', 'x-kubernetes-validations': [
            {'rule': 'self == oldSelf', 'message': 'immutable'}]},
        'replicas': {'type': 'integer', 'x-kubernetes-validations': [
            {'rule': 'self <= 1 || self % 2 == 1', 'message': 'odd'}]}}}}}
    rules = cel.validator(schema)
    obj = {'spec': {'storageClass': 'fast', 'replicas': 3}}
    assert rules.causes(obj) == []                                          # create: no oldSelf
    assert rules.causes(obj, {'spec': {'replicas': 1}}) == []               # the old object has no storageClass
    assert rules.causes(obj, {'spec': {'storageClass': 'slow'}}) == [('spec.storageClass', 'immutable', 'fast')]
    assert rules.causes({'spec': {'replicas': 2}}) == [('spec.replicas', 'odd', 2)]


def test_rules_outside_the_subset_are_refused_at_registration():
    with pytest.raises(cel.CelUnsupported):
        cel.validator({'type': 'object', 'x-kubernetes-validations': [{'rule': 'self.x ~ 1'}]})
    with pytest.raises(cel.CelUnsupported):
        cel.validator({'type': 'object', 'x-kubernetes-validations': [{'rule': 'has(self)'}]})


def test_every_rule_of_the_collections_crds_is_read():
    seen = 0
    for path in glob.glob(os.path.join(REPO, 'controller', 'deploy', 'crds', '*.yaml')):
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                for version in (doc or {}).get('spec', {}).get('versions', []):
                    rules = cel.validator(version['schema']['openAPIV3Schema'])
                    seen += sum(len(r) for r in rules.rules.values()) if rules else 0
    assert seen >= 8   # the Etcd CRD's and the tasks' rules
