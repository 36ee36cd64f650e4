"""Files, inputs and option checks of the sabakan Ansible surface (module_utils/sabakan/{files,source,args}.py)."""

from __future__ import annotations

import json
import os
import stat
from datetime import datetime, timezone

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.args import (
    OptionError, check_node_taints, check_wait_seconds,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.client import (
    GENERATOR_VARIABLES, REPAIR_VARIABLES, SabakanVariablesError,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import (
    ConstraintsError, MachineError, TemplateError,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.files import (
    FileError, RepairQueue, dump_yaml, load_cluster_file, load_document, load_mapping, load_reboot_queue,
    apply_file_update, load_repair_queue, parse_mode, plan_file_update, write_text_atomic,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.source import (
    SourceError, count_by, load_constraints_input, load_template, machines_from, match_machine,
)

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
TEMPLATE = {
    'name': 'cluster', 'service_subnet': '10.68.0.0/16',
    'nodes': [{'user': 'cybozu', 'control_plane': True}, {'user': 'cybozu', 'control_plane': False}],
}


def machine(serial, address, *, role='cs', rack=0, state='HEALTHY', retire='2030-01-01T00:00:00Z', labels=None,
            status=None):
    return {
        'spec': {'serial': serial, 'labels': labels or [], 'rack': rack, 'indexInRack': 1, 'role': role,
                 'ipv4': [address], 'registerDate': '2020-01-01T00:00:00Z', 'retireDate': retire,
                 'bmc': {'bmcType': 'IPMI-2.0'}},
        'status': status if status is not None else {'state': state, 'timestamp': '2025-12-31T00:00:00Z',
                                                     'duration': 86400.0},
    }


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# --- reading ----------------------------------------------------------------------------------
def test_yaml_error_names_file_line_and_problem(tmp_path):
    path = write(tmp_path, 'template.yml', 'name: c\nnodes:\n  - user: a\n   control_plane: true\n')
    with pytest.raises(FileError) as err:
        load_mapping(path, 'template')
    text = str(err.value)
    assert text.startswith('template file %s: line 4, column ' % path)
    assert 'not valid YAML or JSON' in text


def test_json_file_error_names_line_and_column(tmp_path):
    path = write(tmp_path, 'machines.json', '[\n  {"spec": {}},\n  {"spec": }\n]\n')
    with pytest.raises(FileError, match=r'^machines file .*machines\.json: line 3, column 12: not valid JSON'):
        load_document(path, 'machines')


def test_json_document_in_a_yaml_file_is_read(tmp_path):
    path = write(tmp_path, 'constraints.yml', '{"control-plane-count": 3}')
    assert load_mapping(path, 'constraints') == {'control-plane-count': 3}


@pytest.mark.parametrize('text, expected', [
    ('- a\n- b\n', 'line 1: expected a mapping at the top level, got a list'),
    ('just a string\n', "got a string ('just a string')"),
    ('', 'is empty, expected a mapping'),
])
def test_mapping_documents_must_be_mappings(tmp_path, text, expected):
    path = write(tmp_path, 't.yml', text)
    with pytest.raises(FileError) as err:
        load_mapping(path, 'template')
    assert str(err.value).startswith('template file %s: ' % path)
    assert expected in str(err.value)


def test_missing_files(tmp_path):
    missing = str(tmp_path / 'nope.yml')
    with pytest.raises(FileError, match='template file .*nope.yml: does not exist'):
        load_mapping(missing, 'template')
    assert load_mapping(missing, 'constraints', required=False) is None
    assert load_document(missing, 'machines', required=False, default=[]) == []


def test_directory_and_binary_files_are_reported(tmp_path):
    with pytest.raises(FileError, match='is a directory'):
        load_document(str(tmp_path), 'template')
    path = tmp_path / 'bin.yml'
    path.write_bytes(b'name: a\n\xff\xfe\n')
    with pytest.raises(FileError, match='line 2: not UTF-8 text'):
        load_document(str(path), 'template')


def test_cluster_file_missing_is_none_but_empty_is_an_error(tmp_path):
    assert load_cluster_file(str(tmp_path / 'cluster.yml')) is None
    path = write(tmp_path, 'cluster.yml', '\n  \n')
    with pytest.raises(FileError, match='is empty; delete it to generate a new cluster'):
        load_cluster_file(path)
    path = write(tmp_path, 'cluster2.yml', '[1, 2]\n')
    with pytest.raises(FileError, match='expected a mapping'):
        load_cluster_file(path)


# --- writing ----------------------------------------------------------------------------------
def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_write_creates_with_default_mode_and_leaves_no_temp_files(tmp_path):
    path = str(tmp_path / 'cluster.yml')
    text = dump_yaml({'name': 'c', 'nodes': []})
    write_text_atomic(path, text)
    assert open(path).read() == text == 'name: c\nnodes: []\n'
    assert mode_of(path) == 0o644
    assert os.listdir(str(tmp_path)) == ['cluster.yml']


def test_atomic_write_keeps_the_existing_mode_unless_told(tmp_path):
    path = write(tmp_path, 'cluster.yml', 'old\n')
    os.chmod(path, 0o600)
    write_text_atomic(path, 'new\n')
    assert open(path).read() == 'new\n' and mode_of(path) == 0o600
    write_text_atomic(path, 'newer\n', 0o640)
    assert open(path).read() == 'newer\n' and mode_of(path) == 0o640


def test_atomic_write_into_a_missing_directory_fails_clearly(tmp_path):
    with pytest.raises(FileError, match='directory .*nodir does not exist'):
        write_text_atomic(str(tmp_path / 'nodir' / 'cluster.yml'), 'x')


def test_yaml_output_has_no_aliases_and_keeps_key_order():
    shared = {'key': 'cke.cybozu.com/role', 'value': 'storage', 'effect': 'NoExecute'}
    text = dump_yaml({'nodes': [{'address': '10.0.0.2', 'taints': [shared]}, {'address': '10.0.0.1', 'taints': [shared]}]})
    assert '&' not in text and '*' not in text
    assert text.index('10.0.0.2') < text.index('10.0.0.1')


def test_file_update_plans_content_and_mode_then_applies(tmp_path):
    """The write/diff flow both sabakan file modules share: plan (what check mode and --diff show), then apply."""
    path = str(tmp_path / 'queue.yml')
    new = plan_file_update(path, 'entries: []\n', None, 'repair queue')
    assert new.changed and new.rewrite and not new.exists and new.diff() == {
        'before': '', 'after': 'entries: []\n', 'before_header': path + ' (absent)', 'after_header': path}
    apply_file_update(new)
    assert open(path).read() == 'entries: []\n' and stat.S_IMODE(os.stat(path).st_mode) == 0o644
    same = plan_file_update(path, None, None, 'repair queue')
    assert not same.changed and same.after == same.before == 'entries: []\n'
    chmod = plan_file_update(path, None, 0o600, 'repair queue')
    assert chmod.changed and chmod.chmod and not chmod.rewrite and chmod.diff()['before'] == chmod.diff()['after']
    apply_file_update(chmod)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and open(path).read() == 'entries: []\n'
    assert not plan_file_update(path, None, 0o600, 'repair queue').changed


@pytest.mark.parametrize('value, expected', [(None, None), ('0644', 0o644), ('600', 0o600), (0o640, 0o640)])
def test_parse_mode(value, expected):
    assert parse_mode(value) == expected


@pytest.mark.parametrize('value', ['rw-r--r--', '0999', True, '', 0o17777])
def test_parse_mode_rejects(value):
    with pytest.raises(FileError, match='^mode: '):
        parse_mode(value)


# --- repair queue -----------------------------------------------------------------------------
def test_repair_queue_missing_file_is_empty_and_append_numbers_entries(tmp_path):
    path = str(tmp_path / 'repair-queue.yml')
    queue = load_repair_queue(path)
    assert queue.entries == [] and queue.write_index == 0
    added = queue.append([{'address': '10.0.0.3', 'machine_type': 'IPMI-2.0', 'operation': 'unreachable'},
                          {'address': '10.0.0.4', 'machine_type': 'iDRAC-9', 'operation': 'unhealthy'}],
                         now=NOW, serials={'10.0.0.3': 'abc', '10.0.0.4': 'def'})
    assert added == [
        {'index': 0, 'address': '10.0.0.3', 'machine_type': 'IPMI-2.0', 'operation': 'unreachable', 'serial': 'abc',
         'status': 'queued', 'created': '2026-01-01T00:00:00Z'},
        {'index': 1, 'address': '10.0.0.4', 'machine_type': 'iDRAC-9', 'operation': 'unhealthy', 'serial': 'def',
         'status': 'queued', 'created': '2026-01-01T00:00:00Z'},
    ]
    write_text_atomic(path, dump_yaml(queue.as_document()))
    again = load_repair_queue(path)
    assert again.entries == added and again.write_index == 2
    # A deleted entry never gives its index back: write_index only grows.
    again.entries.pop()
    write_text_atomic(path, dump_yaml(again.as_document()))
    third = load_repair_queue(path)
    assert third.append([{'address': '10.0.0.9'}], now=NOW)[0]['index'] == 2


def test_repair_queue_without_write_index_continues_after_the_highest_index(tmp_path):
    path = write(tmp_path, 'q.yml', 'entries:\n- {index: 4, address: 10.0.0.1, status: succeeded}\n')
    assert load_repair_queue(path).write_index == 5


@pytest.mark.parametrize('text, expected', [
    ('- a\n', 'expected a mapping {entries: [...], write_index: N}, got a list'),
    ('entries: {}\n', 'entries must be a list'),
    ('entries: []\nwrite_idx: 3\n', 'unknown key(s) write_idx'),
    ('entries:\n- {index: 0}\n', 'entries[0].address: expected the machine address'),
    ('entries:\n- {index: 0, address: a}\n- {index: 0, address: b}\n', 'entries[1].index: 0 is used by another entry'),
    ('entries:\n- {index: -1, address: a}\n', 'entries[0].index: expected a non-negative integer'),
    ('entries:\n- {index: 0, address: a, status: done}\n', "entries[0].status: 'done' is not one of queued"),
    ('entries:\n- {index: 5, address: a}\nwrite_index: 3\n', 'write_index 3 is not above the highest entry index 5'),
])
def test_repair_queue_errors_name_the_file_and_the_entry(tmp_path, text, expected):
    path = write(tmp_path, 'q.yml', text)
    with pytest.raises(FileError) as err:
        load_repair_queue(path)
    assert str(err.value).startswith('repair queue file %s: ' % path)
    assert expected in str(err.value)


def test_repair_queue_document_shape():
    queue = RepairQueue()
    queue.append([{'address': '10.0.0.1', 'machine_type': 't', 'operation': 'unhealthy'}], now=NOW)
    assert list(queue.as_document()) == ['entries', 'write_index']


# --- reboot queue -----------------------------------------------------------------------------
def test_reboot_queue(tmp_path):
    path = write(tmp_path, 'reboot.yml', 'entries:\n- {node: 10.0.0.1, status: Rebooting}\n- {node: 10.0.0.2}\n')
    assert load_reboot_queue(path) == [{'node': '10.0.0.1', 'status': 'rebooting'},
                                       {'node': '10.0.0.2', 'status': 'queued'}]
    assert load_reboot_queue(write(tmp_path, 'empty.yml', '')) == []


@pytest.mark.parametrize('text, expected', [
    ('entries:\n- {status: queued}\n', 'entries[0].node: expected the node address'),
    ('entries:\n- {node: a, status: sleeping}\n', "entries[0].status: 'sleeping' is not one of"),
    ('[]\n', 'expected a mapping'),
])
def test_reboot_queue_errors(tmp_path, text, expected):
    path = write(tmp_path, 'reboot.yml', text)
    with pytest.raises(FileError) as err:
        load_reboot_queue(path)
    assert str(err.value).startswith('reboot queue file %s: ' % path) and expected in str(err.value)


def test_missing_reboot_queue_is_an_error(tmp_path):
    with pytest.raises(FileError, match='does not exist; create it with "entries: \\[\\]"'):
        load_reboot_queue(str(tmp_path / 'reboot.yml'))


# --- machine sources --------------------------------------------------------------------------
def fleet():
    return [
        machine('boot0', '10.0.0.1', role='boot'),
        machine('cs1', '10.0.0.2', role='cs', rack=0),
        machine('ss1', '10.0.1.3', role='ss', rack=1, labels=[{'name': 'product', 'value': 'R640'}]),
        machine('cs2', '10.0.2.4', role='cs', rack=2, state='UNREACHABLE'),
        machine('cs3', '10.0.3.5', role='cs', rack=3, state='RETIRED'),
        machine('ss2', '10.0.4.6', role='ss', rack=4, state='UNHEALTHY', retire='2026-03-01T00:00:00Z'),
    ]


def serials(machines):
    return [m['spec']['serial'] for m in machines]


@pytest.mark.parametrize('kwargs', [{}, {'url': 'http://x', 'machines': []}, {'machines': [], 'machines_file': 'f'}])
def test_exactly_one_machine_source(kwargs):
    with pytest.raises(SourceError, match='give exactly one machine source'):
        machines_from(**kwargs)


def test_offline_machines_use_the_generator_defaults():
    found = machines_from(machines=fleet(), now=NOW)
    assert serials(found) == ['cs1', 'ss1', 'cs2', 'ss2']  # no boot server, no RETIRED machine


def test_offline_machines_use_the_repair_defaults():
    found = machines_from(machines=fleet(), defaults=REPAIR_VARIABLES, now=NOW)
    assert serials(found) == ['cs2', 'ss2']


@pytest.mark.parametrize('variables, expected', [
    ({'having': None, 'notHaving': None}, ['boot0', 'cs1', 'ss1', 'cs2', 'cs3', 'ss2']),
    ({'having': {'roles': ['ss']}}, ['ss1', 'ss2']),
    ({'having': {'racks': [0, 1], 'roles': ['cs', 'ss']}}, ['cs1', 'ss1']),
    ({'having': {'labels': [{'name': 'product', 'value': 'R640'}]}}, ['ss1']),
    ({'notHaving': {'labels': [{'name': 'product', 'value': 'R640'}]}}, ['boot0', 'cs1', 'cs2', 'cs3', 'ss2']),
    ({'having': {'minDaysBeforeRetire': 100}}, ['cs1', 'ss1', 'cs2']),  # ss2 retires in 59 days
    ({'notHaving': {'minDaysBeforeRetire': 100}}, ['ss2']),
    ({'notHaving': {'states': ['UNREACHABLE', 'RETIRED']}}, ['boot0', 'cs1', 'ss1', 'ss2']),
])
def test_offline_machines_follow_sabakan_matching(variables, expected):
    assert serials(machines_from(machines=fleet(), variables=variables, now=NOW)) == expected


def test_bad_variables_are_rejected_before_anything():
    with pytest.raises(SabakanVariablesError, match='did you mean'):
        machines_from(machines=fleet(), variables={'having': {'states': ['healthy']}}, now=NOW)


def test_machines_file_shapes(tmp_path):
    data = fleet()
    for name, document in (('list.json', data), ('info.json', {'machines': data}),
                           ('answer.json', {'data': {'searchMachines': data}}), ('search.yml', {'searchMachines': data})):
        path = write(tmp_path, name, json.dumps(document))
        assert serials(machines_from(machines_file=path, now=NOW)) == ['cs1', 'ss1', 'cs2', 'ss2'], name


def test_malformed_offline_machine_names_file_index_serial_and_field(tmp_path):
    data = fleet()
    data[2]['spec']['rack'] = 'one'
    path = write(tmp_path, 'm.json', json.dumps(data))
    with pytest.raises(MachineError) as err:
        machines_from(machines_file=path, now=NOW)
    assert str(err.value).startswith('machines_file: machines file %s: machines[2] (serial ss1): spec.rack must be an '
                                     'integer' % path)
    assert err.value.field == 'machines_file'
    with pytest.raises(MachineError, match='expected a list of sabakan machines'):
        machines_from(machines_file=write(tmp_path, 'n.json', '{"foo": 1}'), now=NOW)


def test_offline_status_duration_and_timestamp_complete_each_other():
    from_stamp = machine('a', '10.0.0.1', status={'state': 'RETIRED', 'timestamp': '2025-12-31T23:50:00Z'})
    from_duration = machine('b', '10.0.0.2', status={'state': 'RETIRED', 'duration': 120})
    neither = machine('c', '10.0.0.3', status={'state': 'HEALTHY'})
    found = machines_from(machines=[from_stamp, from_duration, neither], variables={'notHaving': None}, now=NOW)
    assert [m['status']['duration'] for m in found] == [600.0, 120, 0.0]
    assert found[1]['status']['timestamp'] == '2025-12-31T23:58:00Z'
    assert found[2]['status']['timestamp'] == '2026-01-01T00:00:00Z'
    assert 'duration' not in from_stamp['status']  # the caller's data is not changed


def test_match_machine_with_no_conditions():
    assert match_machine(fleet()[0], {'having': None, 'notHaving': None}, NOW)
    assert not match_machine(fleet()[0], GENERATOR_VARIABLES, NOW)


def test_count_by():
    assert count_by(fleet()) == {'by_state': {'HEALTHY': 3, 'RETIRED': 1, 'UNHEALTHY': 1, 'UNREACHABLE': 1},
                                 'by_role': {'boot': 1, 'cs': 3, 'ss': 2}}


# --- template and constraints -----------------------------------------------------------------
def test_template_from_file_or_mapping(tmp_path):
    path = write(tmp_path, 'template.json', json.dumps(TEMPLATE))
    assert load_template(template_file=path) == TEMPLATE
    assert load_template(template=TEMPLATE) == TEMPLATE
    with pytest.raises(SourceError, match='exactly one of template'):
        load_template(TEMPLATE, path)
    with pytest.raises(SourceError, match='exactly one of template'):
        load_template()


def test_invalid_template_file_names_the_file(tmp_path):
    bad = dict(TEMPLATE, nodes=[{'user': 'cybozu', 'control_plane': True}])
    path = write(tmp_path, 'template.yml', json.dumps(bad))
    with pytest.raises(TemplateError, match=r'^template_file: template file .*template\.yml: template\.nodes: template '
                                            r'must contain at least two') as err:
        load_template(template_file=path)
    assert err.value.field == 'template_file'


def test_constraints_from_file_mapping_or_defaults(tmp_path):
    path = write(tmp_path, 'c.yml', 'control-plane-count: 3\nminimum-workers: 2\n')
    assert load_constraints_input(constraints_file=path).control_plane_count == 3
    assert load_constraints_input({'maximum-workers': 5}).maximum_workers == 5
    assert load_constraints_input().as_dict()['minimum-workers'] == 1
    assert load_constraints_input(constraints_file=write(tmp_path, 'empty.yml', '')).control_plane_count == 1
    with pytest.raises(SourceError, match='at most one'):
        load_constraints_input({}, path)


def test_bad_constraints_file_names_the_file(tmp_path):
    path = write(tmp_path, 'c.yml', 'control-plane-cont: 3\n')
    with pytest.raises(ConstraintsError, match=r'^constraints_file: constraints file .*c\.yml: unknown constraint\(s\) '
                                               r'control-plane-cont') as err:
        load_constraints_input(constraints_file=path)
    assert err.value.field == 'constraints_file'


# --- option checks ----------------------------------------------------------------------------
def test_node_taints():
    taints = {'10.0.0.1': [{'key': 'example.com/broken', 'value': 'yes', 'effect': 'NoSchedule'}], '10.0.0.2': None}
    assert check_node_taints(taints) == {'10.0.0.1': [{'key': 'example.com/broken', 'value': 'yes',
                                                       'effect': 'NoSchedule'}], '10.0.0.2': []}
    assert check_node_taints(None) == {}


@pytest.mark.parametrize('taints, expected', [
    ({'n': 'x'}, r'node_taints\[n\]: expected a list'),
    ({'n': [{'value': 'x'}]}, r'node_taints\[n\]\[0\]: expected \{key, value, effect\}'),
    ({'n': [{'key': 'k', 'effect': 'NoWay'}]}, r"node_taints\[n\]\[0\].effect: 'NoWay' is not one of"),
])
def test_node_taints_errors(taints, expected):
    with pytest.raises(OptionError, match=expected):
        check_node_taints(taints)


def test_wait_seconds():
    assert check_wait_seconds(300) == 300.0
    with pytest.raises(OptionError, match='wait_retired_seconds'):
        check_wait_seconds(-1)


def test_offline_machines_with_one_serial_or_address_twice_are_refused():
    """sabakan's own invariants: planning from such a list would put one server in the cluster twice."""
    data = fleet()
    twice = data + [dict(data[0], spec=dict(data[0]['spec'], ipv4=['10.99.0.1']))]
    with pytest.raises(MachineError, match=r'machines\[6\]: spec.serial is also machines\[0\]') as err:
        machines_from(machines=twice, now=NOW)
    assert err.value.field == 'machines'
    same_ip = data + [dict(data[0], spec=dict(data[0]['spec'], serial='other'))]
    with pytest.raises(MachineError, match=r'spec.ipv4 is also machines\[0\]'):
        machines_from(machines=same_ip, now=NOW)
