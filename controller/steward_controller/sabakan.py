# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Placeholder: handlers are added by the work in progress."""

from __future__ import annotations

from typing import Any


def register(registry: Any, runtime: Any) -> None:
    return None
