# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes objects as plain data: what the API server does to them, done locally (to plan, or to keep a local
view between writes)."""

from __future__ import annotations

import copy
from typing import Any, Mapping


def merge_patch(base: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (what `client.merge_patch` asks the server for), on plain data: a mapping merges
    key by key, None removes a key, anything else replaces. Neither argument is changed; the result shares no
    mutable part with `patch`.

    One difference from the RFC, kept from the machines area's two copies this replaces: where `base` has no
    mapping, `patch` is taken whole, its None values kept (the RFC would apply it to {} and drop them). Applied to
    an object that has the mapping, the result is the RFC's."""
    if not isinstance(patch, Mapping) or not isinstance(base, Mapping):
        return copy.deepcopy(patch)
    out = dict(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out
