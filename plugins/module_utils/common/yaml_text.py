# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one way the engine reads a YAML document given as text (a config file, a ConfigMap key, a custom resource's
string field, a static-pod manifest): PyYAML's safe loader, a size limit on the parsed document, and a syntax error
that names the field and the line. Callers recast InvalidInput to their area's exception where they need one.

PyYAML is imported inside the function: it is an ansible-core and controller dependency, but module_utils must
import without it (ansible-test's import sanity test has no PyYAML).
"""

from __future__ import annotations

from typing import Any

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput


def load_yaml(text: Any, field: str) -> Any:
    """One YAML document (text or UTF-8 bytes) parsed safely; anything else is returned as it is (a module option
    given as a dict is already parsed). A syntax error raises InvalidInput(field, 'yaml') naming the line; a
    document of more than validate.MAX_DOCUMENT_VALUES values once aliases are expanded ("billion laughs")
    raises InvalidInput(field, 'max-size')."""
    if isinstance(text, bytes):
        text = text.decode('utf-8', errors='replace')
    if not isinstance(text, str):
        return text
    import yaml  # PyYAML; only text needs it
    try:
        return validate.document_size(yaml.safe_load(text), field)
    except yaml.YAMLError as exc:
        mark = getattr(exc, 'problem_mark', None)
        where = ' at line %d, column %d' % (mark.line + 1, mark.column + 1) if mark is not None else ''
        problem = getattr(exc, 'problem', None) or str(exc).splitlines()[0]
        raise InvalidInput(field, 'yaml', 'is not valid YAML%s: %s' % (where, problem)) from None
