"""A machine's node template on its Node (MCM's syncNodeTemplates): labels, annotations and taints added and kept,
and removed only when the last-applied annotation says this controller (or MCM) put them there."""

import copy
import json

from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines.node_template import node_patch

LAST = 'node.machine.sapcloud.io/last-applied-anno-labels-taints'


def machine(labels=None, annotations=None, taints=None):
    template = {'metadata': {}, 'spec': {}}
    if labels is not None:
        template['metadata']['labels'] = labels
    if annotations is not None:
        template['metadata']['annotations'] = annotations
    if taints is not None:
        template['spec']['taints'] = taints
    return {'metadata': {'name': 'm', 'namespace': 'ns'}, 'spec': {'nodeTemplate': template}}


def node(labels=None, annotations=None, taints=None, version='7'):
    return {'metadata': {'name': 'n', 'resourceVersion': version, 'labels': dict(labels or {}),
                         'annotations': dict(annotations or {})}, 'spec': {'taints': list(taints or [])}}


def applied(patch, before):
    """The Node after the merge patch (what the API server would store)."""
    out = copy.deepcopy(before)
    for part in ('labels', 'annotations'):
        merged = dict(before['metadata'].get(part) or {})
        for k, v in ((patch.get('metadata') or {}).get(part) or {}).items():
            if v is None:
                merged.pop(k, None)
            else:
                merged[k] = v
        out['metadata'][part] = merged
    if 'taints' in (patch.get('spec') or {}):
        out['spec']['taints'] = patch['spec']['taints']
    return out


def test_the_template_is_added_and_the_nodes_own_keys_are_left_alone():
    m = machine({'pool': 'a'}, {'team': 'x'}, [{'key': 'dedicated', 'value': 'web', 'effect': 'NoSchedule'}])
    n = node({'kubernetes.io/hostname': 'n'}, {'kubelet': 'y'}, [{'key': 'other', 'effect': 'NoExecute'}])
    patch = node_patch(m, n)
    assert patch['metadata']['resourceVersion'] == '7'                 # applies only to the Node it was computed from
    assert patch['metadata']['labels'] == {'pool': 'a'}
    assert patch['metadata']['annotations']['team'] == 'x'
    assert json.loads(patch['metadata']['annotations'][LAST]) == {
        'metadata': {'labels': {'pool': 'a'}, 'annotations': {'team': 'x'}},
        'spec': {'taints': [{'key': 'dedicated', 'value': 'web', 'effect': 'NoSchedule'}]}}
    assert patch['spec']['taints'] == [{'key': 'other', 'effect': 'NoExecute'},
                                       {'key': 'dedicated', 'value': 'web', 'effect': 'NoSchedule'}]
    after = applied(patch, n)
    assert after['metadata']['labels'] == {'kubernetes.io/hostname': 'n', 'pool': 'a'}
    assert node_patch(m, after) is None                                 # in sync: nothing to write


def test_only_keys_the_last_applied_template_names_are_removed():
    before = machine({'pool': 'a', 'tier': 'web'}, {'team': 'x'}, [{'key': 'dedicated', 'value': 'web', 'effect': 'NoSchedule'}])
    n = applied(node_patch(before, node({'mine': '1'}, {}, [{'key': 'other', 'effect': 'NoExecute'}])),
                node({'mine': '1'}, {}, [{'key': 'other', 'effect': 'NoExecute'}]))
    patch = node_patch(machine({'pool': 'b'}), n)
    assert patch['metadata']['labels'] == {'pool': 'b', 'tier': None}
    assert patch['metadata']['annotations']['team'] is None
    assert patch['spec']['taints'] == [{'key': 'other', 'effect': 'NoExecute'}]
    after = applied(patch, n)
    assert after['metadata']['labels'] == {'mine': '1', 'pool': 'b'}
    assert node_patch(machine({'pool': 'b'}), after) is None


def test_a_taint_is_matched_by_key_and_effect_and_its_value_follows_the_template():
    m = machine(taints=[{'key': 'k', 'value': 'new', 'effect': 'NoSchedule'}])
    n = node(taints=[{'key': 'k', 'value': 'old', 'effect': 'NoSchedule'}, {'key': 'k', 'value': 'x', 'effect': 'NoExecute'}])
    assert node_patch(m, n)['spec']['taints'] == [{'key': 'k', 'value': 'new', 'effect': 'NoSchedule'},
                                                  {'key': 'k', 'value': 'x', 'effect': 'NoExecute'}]


def test_mcms_own_last_applied_annotation_is_honoured():
    """A Node taken over from MCM: its annotation (Go's JSON of NodeTemplateSpec) says what MCM put there."""
    mcm = json.dumps({'metadata': {'creationTimestamp': None, 'labels': {'old': '1'}}, 'spec': {'taints': [
        {'key': 'gone', 'value': 'v', 'effect': 'NoSchedule'}]}})
    n = node({'old': '1', 'kept': '1'}, {LAST: mcm}, [{'key': 'gone', 'value': 'v', 'effect': 'NoSchedule'}])
    patch = node_patch(machine({'new': '1'}), n)
    assert patch['metadata']['labels'] == {'old': None, 'new': '1'} and patch['spec']['taints'] == []


def test_an_unreadable_annotation_removes_nothing_and_is_rewritten():
    n = node({'x': '1'}, {LAST: '{not json'})
    patch = node_patch(machine({'y': '1'}), n)
    assert patch['metadata']['labels'] == {'y': '1'}
    assert json.loads(patch['metadata']['annotations'][LAST]) == {'metadata': {'labels': {'y': '1'}}}


def test_an_empty_template_writes_nothing_and_an_emptied_one_clears_the_record():
    assert node_patch(machine(), node({'x': '1'})) is None
    record = json.dumps({'metadata': {'labels': {'x': '1'}}})
    patch = node_patch(machine(), node({'x': '1'}, {LAST: record}))
    assert patch['metadata']['labels'] == {'x': None} and patch['metadata']['annotations'] == {LAST: None}


def test_replacing_patch_nulls_what_the_wanted_value_lacks():
    assert o.replacing_patch({'a': {'x': 1, 'y': 2}, 'b': 1}, {'a': {'x': 1}}) == {'a': {'y': None}, 'b': None}
    assert o.replacing_patch({'a': 1}, {'a': 1}) == {}
    assert o.replacing_patch(None, {'a': 1}) == {'a': 1}
    assert o.replacing_patch({'a': {'x': 1}}, {'a': {}}) == {'a': {'x': None}}
