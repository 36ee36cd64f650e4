# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The control loops a process can run, selected with `--controllers`.

Each loop lives in its own subpackage of `steward_controller` whose `__init__` defines `LOOPS`, a tuple
of `Loop`. The `__init__` stays light (argparse only): `--help` and flag parsing must not import kopf or
the engine. The loop's `register` imports its handlers when the operator starts.

A new loop: add its package name to LOOP_PACKAGES, define `LOOPS = (Loop(...),)` in its `__init__`,
put its handlers beside it. Nothing else in the shared runtime changes.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

# Order is the order of `--help` and of registration.
LOOP_PACKAGES = (
    'steward_controller.etcd_backup',
    'steward_controller.etcd_druid',
    'steward_controller.etcd_tasks',
    'steward_controller.sabakan',
    'steward_controller.maintenance',
    'steward_controller.prober',
    'steward_controller.weeder',
    'steward_controller.machines',
    'steward_controller.anchor',
    'steward_controller.provisioning_api',
)
ALL = 'all'


class LoopSelectionError(ValueError):
    """`--controllers` named a loop that does not exist (the message lists the known ones)."""


@dataclasses.dataclass(frozen=True)
class Loop:
    """One control loop.

    name:          the word for `--controllers` (lowercase, dashes).
    help:          one line for `--help`.
    register:      `register(registry, runtime)`: add the loop's kopf handlers (imports them lazily).
    add_arguments: adds the loop's own flags to its argument group (a core/flags.py table: each flag has an
                   environment variable, and a bad value names both).
    options:       turns the parsed flags into the loop's validated options object (kept in
                   `Settings.loop_options[name]`); raises ValueError with the flag name on bad input.
    watches_resources: whether it registers kopf handlers on resources; a process of loops that do not
                   (the watchdog's, the provisioning anchor and API) turns kopf's discovery of CRDs and
                   namespaces off, so it needs no right to list them (least privilege per loop).
    """
    name: str
    help: str
    register: Callable[[Any, Any], None]
    add_arguments: Optional[Callable[[Any], None]] = None
    options: Optional[Callable[[argparse.Namespace], Any]] = None
    watches_resources: bool = True


def all_loops(packages: Sequence[str] = LOOP_PACKAGES) -> Tuple[Loop, ...]:
    loops: List[Loop] = []
    for package in packages:
        loops.extend(importlib.import_module(package).LOOPS)
    names = [loop.name for loop in loops]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise RuntimeError('loop names defined twice: %s' % ', '.join(duplicates))
    return tuple(loops)


def select(spec: str, loops: Sequence[Loop]) -> Tuple[str, ...]:
    """Names of the loops `spec` selects ("all", or a comma-separated list), in registration order."""
    known = [loop.name for loop in loops]
    words = [w.strip() for w in (spec or ALL).split(',') if w.strip()]
    if not words:
        raise LoopSelectionError('--controllers is empty; known loops: %s (or %s)' % (', '.join(known), ALL))
    if ALL in words:
        if len(words) > 1:
            raise LoopSelectionError('--controllers: "%s" cannot be combined with other names' % ALL)
        return tuple(known)
    unknown = [w for w in words if w not in known]
    if unknown:
        raise LoopSelectionError('--controllers: unknown loop %s; known loops: %s (or %s)' % (
            ', '.join(repr(u) for u in unknown), ', '.join(known), ALL))
    return tuple(name for name in known if name in words)


def loop_options(loops: Sequence[Loop], args: argparse.Namespace) -> Dict[str, Any]:
    """Each loop's options object (None for loops without options)."""
    return {loop.name: (loop.options(args) if loop.options else None) for loop in loops}
