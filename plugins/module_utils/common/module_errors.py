# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one adapter between the engine's errors and a module's result: every module runs its validation and its
work inside `failing_cleanly(module, AreaError)`, so bad input ends as
`fail_json(msg=..., field=..., rule=..., changed=False)` and an area error as `fail_json(msg=..., changed=False)`
-- never a traceback, never "changed" on a failure.

Duck-typed on the module (anything with `fail_json`), so this file imports no AnsibleModule and the controller's
tests can use it with a stand-in.
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput


def invalid_input_result(exc: InvalidInput) -> Dict[str, Any]:
    """The fail_json keywords for an InvalidInput: the message, the field and the rule (stable words a playbook
    may match on). The value is not repeated: the message shows it (cut short), secrets never."""
    return {'msg': str(exc), 'field': exc.field, 'rule': exc.rule, 'changed': False}


@contextlib.contextmanager
def failing_cleanly(module: Any, *errors: type, **context: Any) -> Iterator[None]:
    """Run the block; InvalidInput (and its area subclasses) and the given area error types end the module with
    fail_json(changed=False) plus `context` (e.g. node=..., cluster_file=...). Anything else is a bug and keeps its
    traceback. An area error may add result keys through a `result()` method (e.g. sabakan's file and line)."""
    try:
        yield
    except InvalidInput as exc:
        module.fail_json(**dict(context, **invalid_input_result(exc)))
    except errors as exc:  # pylint: disable=catching-non-exception
        extra = exc.result() if callable(getattr(exc, 'result', None)) else {}
        module.fail_json(**dict(context, **dict(extra, msg=str(exc), changed=False)))
