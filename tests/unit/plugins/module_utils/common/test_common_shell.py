"""The one module shell (common/shell.py): one failure policy, one exit path, one missing-library check. These
tests moved here with the adapter from test_common_deadline_adapter.py (failing_cleanly became shell.run)."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common import shell, validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError, Refused
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import FileError, SabakanUnavailable


class FakeModule:
    """Records fail_json, exit_json and warn like AnsibleModule (whose fail_json and exit_json exit)."""

    def __init__(self, params=None, check_mode=False, diff=False):
        self.params = params or {}
        self.check_mode = check_mode
        self._diff = diff
        self.failed = None
        self.exited = None
        self.warnings = []

    def fail_json(self, **kwargs):
        self.failed = kwargs
        raise SystemExit(1)

    def exit_json(self, **kwargs):
        self.exited = kwargs
        raise SystemExit(0)

    def warn(self, text):
        self.warnings.append(text)


class AreaError(Exception):
    def result(self):
        return {'line': 3}


def run(module, entry, *errors, **context):
    with pytest.raises(SystemExit):
        shell.run(module, entry, *errors, **context)
    return module


def test_bad_input_fails_with_field_and_rule_and_no_traceback():
    def entry(params, check_mode):
        validate.timeout(-1, 'wait_timeout')
    module = run(FakeModule(), entry, AreaError, node='n1')
    assert module.failed == {'msg': 'wait_timeout: must be greater than 0, got -1', 'field': 'wait_timeout',
                             'rule': 'minimum', 'changed': False, 'node': 'n1'}


def test_area_errors_add_their_result_fields_and_the_traceback_bugs_stay_visible():
    def entry(params, check_mode):
        raise AreaError('store unreadable')
    module = run(FakeModule(), entry, AreaError)
    assert 'Traceback' in module.failed.pop('exception')
    assert module.failed == {'msg': 'store unreadable', 'changed': False, 'line': 3}
    with pytest.raises(ZeroDivisionError):
        shell.run(FakeModule(), lambda params, check_mode: 1 / 0, AreaError)
    with pytest.raises(AreaError):   # not named by the module: a bug, with its traceback
        shell.run(FakeModule(), lambda params, check_mode: (_unused for _unused in ()).throw(AreaError('x')))


def test_area_results_carry_what_callers_match_on():
    assert shell.failure_result(Refused('quorum would be lost', 'etcd-quorum', 'etcd1')) == {
        'msg': 'quorum would be lost', 'rule': 'etcd-quorum', 'refused': True, 'where': 'etcd1', 'changed': False}
    assert shell.failure_result(ProvisioningError('no', None)) == {'msg': 'no', 'changed': False}
    assert shell.failure_result(SabakanUnavailable('down')) == {'msg': 'SabakanUnavailable: down',
                                                                'error': 'SabakanUnavailable', 'changed': False}
    bad_file = shell.failure_result(FileError('cluster_file', 'yaml', 'not YAML'))
    assert bad_file == {'msg': 'FileError: cluster_file: not YAML', 'error': 'FileError', 'field': 'cluster_file',
                        'rule': 'yaml', 'changed': False}


def test_failed_reports_its_result_without_a_traceback():
    def entry(params, check_mode):
        raise shell.Failed('1 snapshot not verified', {'ok': False, 'warnings': ['late'], 'diff': {'before': 1}})
    module = run(FakeModule(), entry)
    assert module.failed == {'msg': '1 snapshot not verified', 'ok': False, 'changed': False}
    assert module.warnings == ['late']


def test_exit_with_warns_and_shows_the_diff_only_under_diff():
    result = {'changed': True, 'warnings': ['w1', 'w2'], 'diff': {'before': 'a', 'after': 'b'}}
    module = run(FakeModule(), lambda params, check_mode: dict(result))
    assert module.exited == {'changed': True} and module.warnings == ['w1', 'w2']
    module = run(FakeModule(diff=True), lambda params, check_mode: dict(result))
    assert module.exited == {'changed': True, 'diff': {'before': 'a', 'after': 'b'}}
    module = run(FakeModule(diff=True), lambda params, check_mode: {'changed': False, 'diff': None})
    assert module.exited == {'changed': False}


def test_entry_gets_params_and_check_mode():
    seen = []
    run(FakeModule({'a': 1}, check_mode=True), lambda params, check_mode: seen.append((params, check_mode)) or {})
    assert seen == [({'a': 1}, True)]


def test_require_libraries_names_what_is_missing(monkeypatch):
    monkeypatch.setitem(shell.LIBRARIES, 'nosuchlib', 'steward_no_such_module_anywhere')
    module = FakeModule()
    shell.require_libraries(module, 'requests', None)   # present (and None skipped): nothing happens
    assert module.failed is None
    with pytest.raises(SystemExit):
        shell.require_libraries(module, 'requests', 'nosuchlib')
    assert 'nosuchlib' in module.failed['msg'] and 'requests' not in module.failed['msg']
    assert 'steward_no_such_module_anywhere' in module.failed['exception'] and module.failed['changed'] is False


def test_invalid_input_is_reported_even_when_no_area_error_is_named():
    def entry(params, check_mode):
        raise InvalidInput('name', 'dns-label', 'name: bad')
    assert run(FakeModule(), entry).failed['rule'] == 'dns-label'


def test_a_nul_byte_anywhere_in_the_options_is_refused_before_the_entry_runs():
    ran = []
    module = run(FakeModule({'config': {'nodes': ['ok', 'a\x00b']}}), lambda params, check_mode: ran.append(1))
    assert module.failed['field'] == 'config.nodes[1]' and module.failed['rule'] == 'nul' and not ran
    assert 'a\x00b' not in module.failed['msg']   # the value may be a secret: not shown


def test_what_names_the_object_of_an_area_error_not_of_bad_input():
    def unreachable(params, check_mode):
        raise AreaError('GET /api/v1/nodes/n1: no answer')
    module = run(FakeModule(), unreachable, AreaError, what='node n1', node='n1')
    assert module.failed['msg'] == 'node n1: GET /api/v1/nodes/n1: no answer' and module.failed['node'] == 'n1'

    def bad(params, check_mode):
        raise InvalidInput('name', 'exists', 'node n2 not found')
    assert run(FakeModule(), bad, AreaError, what='node n2').failed['msg'] == 'name: node n2 not found'
