"""Owned node labels (foreign labels never touched) and the HAProxy config rendered from the control-plane set."""

from __future__ import annotations

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.provisioning import haproxy
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.labels import OWNED_ANNOTATION, plan_labels

from provisioning_fixtures import cluster


def _node(labels, owned=None):
    annotations = {OWNED_ANNOTATION: owned} if owned is not None else {}
    return {'metadata': {'name': 'w1', 'labels': labels, 'annotations': annotations}}


@pytest.mark.parametrize('labels, owned, desired, to_set, remove, owned_after', [
    ({'other/x': '1'}, None, {'a': '1'}, {'a': '1'}, [], ['a']),
    ({'other/x': '1', 'a': '1'}, 'a', {'a': '1'}, {}, [], ['a']),
    ({'other/x': '1', 'a': '1'}, 'a', {'a': '2', 'b': '3'}, {'a': '2', 'b': '3'}, [], ['a', 'b']),
    ({'other/x': '1', 'a': '1', 'b': '3'}, 'a,b', {'b': '3'}, {}, ['a'], ['b']),
    ({'other/x': '1', 'a': '1'}, 'a', {}, {}, ['a'], []),
    ({'other/x': '1'}, 'a', {}, {}, [], []),                        # owned key already gone: ownership dropped
    ({'other/x': '1'}, None, {'other/x': '1'}, {}, [], []),         # same value, someone else's: left theirs
], ids=['add', 'same', 'change-and-add', 'remove-one', 'remove-all', 'gone', 'foreign-equal'])
def test_owned_label_plans(labels, owned, desired, to_set, remove, owned_after):
    plan = plan_labels(_node(labels, owned), desired)
    assert plan.set == to_set
    assert plan.remove == remove
    assert plan.owned == owned_after
    assert plan.after['other/x'] == '1'


def test_foreign_label_with_another_value_is_refused():
    with pytest.raises(Refused) as err:
        plan_labels(_node({'team': 'blue'}), {'team': 'red'})
    assert err.value.rule == 'foreign-label'
    assert "team is 'blue', not 'red'" in str(err.value)


def test_patch_records_ownership_and_removes_with_null():
    plan = plan_labels(_node({'a': '1', 'x': 'y'}, 'a'), {'b': '2'})
    assert plan.patch('42') == {'metadata': {'labels': {'b': '2', 'a': None},
                                             'annotations': {OWNED_ANNOTATION: 'b'}, 'resourceVersion': '42'}}
    assert not plan_labels(_node({'b': '2'}, 'b'), {'b': '2'}).changed
    assert plan_labels(_node({}, ''), {}).patch()['metadata']['annotations'] == {OWNED_ANNOTATION: None}


def test_haproxy_lists_every_control_plane_node_by_exact_name():
    spec = cluster()
    config = haproxy.render(spec, '127.0.0.1')
    assert haproxy.backends(config) == ['cp1', 'cp10', 'cp2']
    assert b'  server cp10 10.0.0.10:6443 check\n' in config
    assert b'  bind 127.0.0.1:6553\n' in config
    smaller = cluster(control_plane=[{'name': 'cp10', 'address': '10.0.0.10'}, {'name': 'cp2', 'address': '10.0.0.2'}])
    assert haproxy.backends(haproxy.render(smaller, '127.0.0.1')) == ['cp10', 'cp2']
    assert haproxy.render(spec, '127.0.0.1') == config   # same set, same bytes
