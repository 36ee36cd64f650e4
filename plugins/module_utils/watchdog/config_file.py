# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading one of DWD's config files (prober or weeder) from disk, checked before anything starts.

A missing file is refused naming the option that names it; a bad field inside is refused naming the option, the
file and the field (`--prober-config /etc/p.yaml: probeInterval: ...`), so the user knows which file to open.
"""

from __future__ import annotations

from typing import Any, Callable

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.validate import existing_file


def read_config_file(path: str, field: str, parse: Callable[[str, str], Any]) -> Any:
    """`parse(text, '')` of the file at `path` (`field` is the option naming it); InvalidInput otherwise."""
    with open(existing_file(path, field)) as f:
        text = f.read()
    try:
        return parse(text, '')
    except InvalidInput as exc:
        raise exc.inside('%s %s' % (field, path)) from None
