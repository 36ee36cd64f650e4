# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one Ansible shell: how every module in plugins/modules checks its libraries, runs its engine entry and
reports. Every module's main() has the same three lines:

    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.require_libraries(module, 'requests')
    shell.run(module, lambda p, check_mode: <area>.<entry>(parse_<module>(p), ..., check_mode), AreaError)

One failure policy (`fail_from`), so a user sees the same shape whatever module failed:

* bad input (`InvalidInput`, and every area's subclass of it): `fail_json(msg, field, rule, changed=False)` and
  no traceback - the message says what to fix, a traceback would only hide it;
* an area error (`EtcdError`, `ProvisioningError`, ...): `msg` plus the fields its `result()` method adds
  (`where`, `rule`, `refused`, `readiness`, `error`, ...) plus the traceback, which Ansible shows only at -vvv;
* a reported failure (`Failed`, e.g. a verification that found a bad backup): its message and result, no traceback;
* anything else is a bug: it leaves main() with its traceback, as Ansible shows a module crash.

Duck-typed on the module (fail_json, exit_json, warn, params, check_mode, _diff), so this file imports no
AnsibleModule and its unit tests use a stand-in.
"""

from __future__ import annotations

import importlib
import traceback
from typing import Any, Callable, Dict, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput

# The third-party libraries a module may need: the name missing_required_lib shows -> the module to import.
# One table (no HAS_* flag per area), probed when a module asks, before its work imports anything heavy.
LIBRARIES: Mapping[str, str] = {
    'requests': 'requests',
    'boto3': 'boto3',
    'PyYAML': 'yaml',
    'cryptography': 'cryptography',
}


class Failed(Exception):
    """A module's engine entry reports a failure that is an outcome, not an error (a backup that does not verify,
    a cluster not healthy in time, snapshots that could not be deleted): `fail_json(msg, **result)` without a
    traceback, the whole result kept so a playbook can read what was found."""

    def __init__(self, message: str, result: Optional[Mapping[str, Any]] = None):
        super().__init__(message)
        self.fields = dict(result or {})

    def result(self) -> Dict[str, Any]:
        return dict(self.fields)


def missing_libraries(*names: str) -> Dict[str, str]:
    """{library: import traceback} of the named libraries (LIBRARIES' keys) that cannot be imported."""
    missing = {}
    for name in names:
        try:
            importlib.import_module(LIBRARIES[name])
        except ImportError:
            missing[name] = traceback.format_exc()
    return missing


def require_libraries(module: Any, *names: str) -> None:
    """Fail the module (Ansible's missing_required_lib message, the import error at -vvv) when one of the named
    libraries is missing; `None` entries are skipped, so a module can name one only when an option needs it."""
    missing = missing_libraries(*[name for name in names if name])
    if missing:
        from ansible.module_utils.basic import missing_required_lib  # pylint: disable=import-outside-toplevel
        module.fail_json(msg=missing_required_lib(' and '.join(missing)), exception='\n'.join(missing.values()),
                         changed=False)


def failure_result(exc: BaseException) -> Dict[str, Any]:
    """The fail_json keywords for a known failure (without the traceback): the message, the typed fields callers
    match on (`field` and `rule` of bad input, whatever the error's `result()` adds), and changed=False."""
    out: Dict[str, Any] = {'msg': str(exc)}
    if isinstance(exc, InvalidInput):
        out.update(field=exc.field, rule=exc.rule)
    if callable(getattr(exc, 'result', None)):
        out.update(exc.result())
    out['changed'] = False
    return out


def fail_from(module: Any, exc: BaseException, *area_errors: type, what: Optional[str] = None,
              **context: Any) -> None:
    """End the module for `exc` by the one policy (see the module docstring); `context` adds fixed result keys
    (`node=...`, `cluster_file=...`) and `what` names the object an area error's message is about (`node n1`:
    "node n1: GET ... did not answer"; bad input names its option instead). An exception that is neither bad input,
    nor `Failed`, nor one of `area_errors` is re-raised: a bug keeps its traceback."""
    if isinstance(exc, (InvalidInput, Failed)):
        module.fail_json(**_reported(module, dict(context, **failure_result(exc))))
    elif area_errors and isinstance(exc, area_errors):
        result = dict(context, **failure_result(exc))
        if what:
            result['msg'] = '%s: %s' % (what, result['msg'])
        module.fail_json(exception=traceback.format_exc(), **_reported(module, result))
    else:
        raise exc


def _reported(module: Any, result: Dict[str, Any]) -> Dict[str, Any]:
    """`result` without its `warnings` (sent through module.warn) and with its `diff` only under --diff."""
    for warning in result.pop('warnings', None) or []:
        module.warn(warning)
    diff = result.pop('diff', None)
    if getattr(module, '_diff', False) and diff is not None:
        result['diff'] = diff
    return result


def exit_with(module: Any, result: Mapping[str, Any]) -> None:
    """Report a result: its `warnings` through module.warn, its `diff` only when Ansible runs with --diff (an entry
    leaves `diff` out, or None, when there is nothing to show), everything else as the module's result."""
    module.exit_json(**_reported(module, dict(result)))


def refuse_nul(value: Any, field: str) -> None:
    """No option value, at any depth, holds a NUL byte: no file system, header, URL or API takes one, and Python's
    own calls fail on it with a ValueError (a traceback) rather than naming the option. The one check every module
    gets before its parser runs; InvalidInput names the option (or the path inside it: `config.name`)."""
    if isinstance(value, str):
        if '\x00' in value:
            raise InvalidInput(field, 'nul', 'must not contain a NUL byte')
    elif isinstance(value, Mapping):
        for key, item in value.items():
            refuse_nul(key, field)
            refuse_nul(item, '%s.%s' % (field, key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            refuse_nul(item, '%s[%d]' % (field, index))


def run(module: Any, entry: Callable[[Mapping[str, Any], bool], Mapping[str, Any]], *area_errors: type,
        what: Optional[str] = None, **context: Any) -> None:
    """Run `entry(params, check_mode)` (parse, then act through the engine) and report its result, or fail by the
    one policy for bad input, `Failed` and `area_errors` (`what` and `context`: see fail_from). Option values
    holding a NUL byte are refused first."""
    try:
        for option, value in module.params.items():
            refuse_nul(value, option)
        result = entry(module.params, module.check_mode)
    except (InvalidInput, Failed) + tuple(area_errors) as exc:  # pylint: disable=catching-non-exception
        fail_from(module, exc, *area_errors, what=what, **context)
        return
    exit_with(module, result)
