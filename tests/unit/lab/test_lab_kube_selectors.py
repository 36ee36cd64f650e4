"""The lab emulator's own label/field selector code (lab/kube/selectors.py), case by case as
k8s.io/apimachinery/pkg/labels/selector_test.go and fields/selector_test.go state the API server's behaviour."""

import pytest

from lab.kube.selectors import (SelectorError, label_selector_from_spec, parse_field_selector,
                                parse_label_selector, selector_string)

GOOD = ['', 'x=a', 'x=a,y=b,z=c', 'x!=a,y=b', 'x=', 'x= ', 'x=,z= ', 'x= ,z= ', '!x', 'x>1', 'x>1,z<5', 'x==a',
        'x in (a)', 'x in (a,b)', 'x notin (a)', 'x in ()', 'x in (,a)', 'x in (a,)', 'x in (a,,b)',
        'example.com/x=a', 'x', 'x,y', 'in=notin', 'in in (in)', 'x.y-z_w=A.b-C_d', ' x = a , y != b ']
BAD = {
    'x=a||y=b': 'values[0][x]: Invalid value: "a||y"',
    'x==a==b': "found '==', expected: ',' or 'end of string'",
    '!x=a': "found '=', expected: ',' or 'end of string'",
    'x<a': 'the value must be an integer',
    'x=a b': "found 'b', expected: ',' or 'end of string'",
    'x in (a': "found '', expected: ',' or ')'",
    'x in a': "found 'a' expected: '('",
    'x in (a b)': "found 'b', expected: ',' or ')'",
    'x,': "found '', expected: identifier after ','",
    ',x': "found ',', expected: !, identifier, or 'end of string'",
    'x y': "found 'y', expected: in, notin, =, ==, !=, gt, lt, exists, !",
    'bad key=a': "found 'key', expected",
    'a/b/c=x': 'unable to parse requirement: key: Invalid value: "a/b/c"',
    'Example.com/x=a': 'unable to parse requirement: key: Invalid value: "Example.com/x": prefix part',
    'x=-a': 'unable to parse requirement: values[0][x]: Invalid value: "-a"',
    'x=' + 'a' * 64: 'must be no more than 63 bytes',
    '(x)': "found '(', expected: !, identifier, or 'end of string'",
    'x=(a)': "found '(', expected: identifier",
    '!': "found '', expected: identifier",
}


@pytest.mark.parametrize('text', GOOD)
def test_parses_what_the_api_server_parses(text):
    parse_label_selector(text)


@pytest.mark.parametrize('text,message', sorted(BAD.items()))
def test_refuses_what_the_api_server_refuses_with_its_message(text, message):
    with pytest.raises(SelectorError) as err:
        parse_label_selector(text)
    assert message in str(err.value)


@pytest.mark.parametrize('text,labels,expected', [
    ('', {'x': 'y'}, True),
    ('x=y', {'x': 'y'}, True),
    ('x==y', {'x': 'y'}, True),
    ('x=y,z=w', {'x': 'y', 'z': 'w'}, True),
    ('x!=y,z!=w', {'x': 'z', 'z': 'a'}, True),
    ('notin=in', {'notin': 'in'}, True),
    ('x', {'x': 'z'}, True),
    ('!x', {'y': 'z'}, True),
    ('x>1', {'x': '2'}, True),
    ('x<1', {'x': '0'}, True),
    ('x in (a,b)', {'x': 'b'}, True),
    ('x notin (a,b)', {'x': 'c'}, True),
    ('x notin (a,b)', {}, True),
    ('x!=y', {}, True),
    ('x=', {'x': ''}, True),
    ('x in ()', {'x': ''}, True),
    ('x=z', {'x': 'y'}, False),
    ('x=y,z=w', {'x': 'w', 'z': 'w'}, False),
    ('x!=y,z!=w', {'x': 'z', 'z': 'w'}, False),
    ('x', {'y': 'z'}, False),
    ('!x', {'x': 'z'}, False),
    ('x>1', {'x': '0'}, False),
    ('x<1', {'x': '2'}, False),
    ('x>1', {'x': 'abc'}, False),
    ('x>1', {}, False),
    ('x in (a,b)', {}, False),
    ('x notin (a,b)', {'x': 'a'}, False),
    ('x=', {}, False),
    ('x=y,y=x', {'x': 'y'}, False),
])
def test_matches_as_requirement_matches(text, labels, expected):
    assert parse_label_selector(text).matches(labels) is expected


def test_label_selector_objects_as_pdbs_and_workloads_write_them():
    spec = {'matchLabels': {'app': 'web'},
            'matchExpressions': [{'key': 'tier', 'operator': 'In', 'values': ['a', 'b']},
                                 {'key': 'canary', 'operator': 'DoesNotExist'},
                                 {'key': 'zone', 'operator': 'NotIn', 'values': ['z9']},
                                 {'key': 'role', 'operator': 'Exists'}]}
    selector = label_selector_from_spec(spec)
    assert selector.matches({'app': 'web', 'tier': 'b', 'role': 'x', 'zone': 'z1'})
    assert not selector.matches({'app': 'web', 'tier': 'b', 'role': 'x', 'canary': 'y'})
    assert not selector.matches({'app': 'web', 'tier': 'c', 'role': 'x'})
    assert not selector.matches({'app': 'web', 'tier': 'a', 'role': 'x', 'zone': 'z9'})
    assert not selector.matches({'app': 'web', 'tier': 'a'})
    assert str(selector) == 'app=web,!canary,role,tier in (a,b),zone notin (z9)'
    assert label_selector_from_spec({}).matches({'any': 'thing'})      # empty selects everything
    assert not label_selector_from_spec(None).matches({})             # nil selects nothing
    assert selector_string({'a': 'b', 'c': 'd'}) == 'a=b,c=d'         # a ReplicationController's map


@pytest.mark.parametrize('spec,message', [
    ({'matchExpressions': [{'key': 'a', 'operator': 'Foo', 'values': ['x']}]}, 'operator: Invalid value: "Foo"'),
    ({'matchExpressions': [{'key': 'a', 'operator': 'In', 'values': []}]}, 'values: Required value'),
    ({'matchExpressions': [{'key': 'a', 'operator': 'Exists', 'values': ['x']}]}, 'values: Forbidden'),
    ({'matchExpressions': [{'key': 'bad key', 'operator': 'Exists'}]}, 'key: Invalid value: "bad key"'),
    ({'matchLabels': {'app': 'not valid'}}, 'Invalid value: "not valid"'),
    ({'matchLabels': ['app']}, 'must be a map of strings'),
])
def test_label_selector_objects_refused(spec, message):
    with pytest.raises(SelectorError) as err:
        label_selector_from_spec(spec)
    assert message in str(err.value)


def test_field_selectors():
    pod = {'metadata': {'name': 'p', 'namespace': 'ns'}, 'spec': {'nodeName': 'n1'}, 'status': {'phase': 'Running'}}
    assert parse_field_selector('spec.nodeName=n1,status.phase!=Failed', 'pods').matches(pod)
    assert parse_field_selector('metadata.name==p', 'pods').matches(pod)
    assert not parse_field_selector('spec.nodeName=', 'pods').matches(pod)
    assert parse_field_selector('spec.nodeName=', 'pods').matches({'metadata': {'name': 'q'}})
    assert parse_field_selector('spec.unschedulable=true', 'nodes').matches({'spec': {'unschedulable': True}})
    assert parse_field_selector('metadata.name=a\\,b', 'configmaps').matches({'metadata': {'name': 'a,b'}})
    with pytest.raises(SelectorError, match='field label not supported: spec.nodeName'):
        parse_field_selector('spec.nodeName=n1', 'configmaps')
    with pytest.raises(SelectorError, match="can't understand 'metadata.name'"):
        parse_field_selector('metadata.name', 'pods')
