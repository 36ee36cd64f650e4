"""lab/kube/tables.py (server-side printing) and lab/kube/protobuf.py (kubectl's protobuf bodies), the pieces a
real kubectl cannot pin down alone (tests/integration/test_lab_kubectl.py drives both with kubectl)."""

from __future__ import annotations

import pytest

from lab.kube import protobuf, tables


def test_jsonpath_filters_as_druids_printer_columns_use_them():
    etcd = {'status': {'conditions': [{'type': 'Ready', 'status': 'True'}, {'type': 'BackupReady', 'status': 'False'}],
                       'members': [{'name': 'a'}, {'name': 'b'}]}}
    assert tables.jsonpath(etcd, '.status.conditions[?(@.type=="BackupReady")].status') == ['False']
    assert tables.jsonpath(etcd, '.status.conditions[?(@.type=="Gone")].status') == []
    assert tables.jsonpath(etcd, '.status.members[*].name') == ['a', 'b']
    assert tables.jsonpath(etcd, '.status.members[-1].name') == ['b']
    assert tables.jsonpath({'metadata': {'labels': {'a.b/c': 'x'}}}, ".metadata.labels['a.b/c']") == ['x']
    assert tables.jsonpath(etcd, '.status.members[') == []


@pytest.mark.parametrize('seconds, text', [(0, '0s'), (119, '119s'), (120, '2m'), (125, '2m5s'), (600, '10m'),
                                           (3 * 3600, '3h'), (3 * 3600 + 60, '3h1m'), (47 * 3600, '47h'),
                                           (50 * 3600, '2d2h'), (30 * 86400, '30d'), (800 * 86400, '2y70d')])
def test_ages_read_as_kubectl_prints_them(seconds, text):
    assert tables.human_duration(seconds) == text


def test_a_crd_without_printer_columns_gets_age_and_a_list_keeps_its_resource_version():
    item = {'metadata': {'name': 'x', 'creationTimestamp': '2026-01-01T00:00:00Z'}}
    body = {'metadata': {'resourceVersion': '7'}, 'items': [item]}
    table = tables.table(body, tables.crd_columns([]), now=1767225600.0 + 90)
    assert [c['name'] for c in table['columnDefinitions']] == ['Name', 'Age']
    assert table['rows'][0]['cells'] == ['x', '90s'] and table['metadata'] == {'resourceVersion': '7'}
    assert table['rows'][0]['object']['kind'] == 'PartialObjectMetadata'


def _field(number: int, payload: bytes) -> bytes:   # length-delimited, as protoc writes it (sizes < 128 here)
    return bytes([number << 3 | 2, len(payload)]) + payload


def test_a_protobuf_namespace_reads_as_its_json_and_empty_fields_are_left_out():
    meta = _field(1, b'demo') + _field(3, b'') + _field(6, b'') + _field(11, _field(1, b'team') + _field(2, b'a'))
    raw = _field(1, meta)
    body = protobuf.MAGIC + _field(1, _field(1, b'v1') + _field(2, b'Namespace')) + _field(2, raw)
    assert protobuf.decode(body) == {'apiVersion': 'v1', 'kind': 'Namespace',
                                     'metadata': {'name': 'demo', 'labels': {'team': 'a'}}}


def test_protobuf_bodies_the_emulator_cannot_read_are_named():
    with pytest.raises(protobuf.ProtobufError) as bad:
        protobuf.decode(b'{"kind": "Namespace"}')
    assert not bad.value.unsupported and 'envelope' in str(bad.value)
    deployment = protobuf.MAGIC + _field(1, _field(1, b'apps/v1') + _field(2, b'Deployment'))
    with pytest.raises(protobuf.ProtobufError) as other:
        protobuf.decode(deployment)
    assert other.value.unsupported and 'not Deployment' in str(other.value) and 'kubectl apply -f' in str(other.value)
    with pytest.raises(protobuf.ProtobufError):
        protobuf.decode(protobuf.MAGIC + bytes([1 << 3 | 2, 50]) + b'short')


def test_a_claim_being_deleted_reads_terminating_as_kubectl_prints_it():
    columns = tables.BUILTIN[('', 'persistentvolumeclaims')]
    claim = {'metadata': {'name': 'data-etcd-0', 'deletionTimestamp': '2026-01-01T00:00:00Z'},
             'status': {'phase': 'Bound'}}
    row = tables.table(claim, columns, now=0.0)['rows'][0]['cells']
    assert row[:2] == ['data-etcd-0', 'Terminating']
    del claim['metadata']['deletionTimestamp']
    assert tables.table(claim, columns, now=0.0)['rows'][0]['cells'][1] == 'Bound'
