# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the controller finds its engine, the steward.cluster collection, before it imports any of it.

The engine is `ansible_collections.steward.cluster`. In the image the collection is installed into site-packages
(controller/Dockerfile), so it imports as it is and nothing here runs. Elsewhere the controller looks where Ansible
looks for collections, in this order, and puts the first that holds steward.cluster at the end of `sys.path`:
`ANSIBLE_COLLECTIONS_PATH` (the Makefile exports the build tree there), then the checkout it was installed from
(`pip install -e controller` in a checkout: its `.build/collections`, which `make` links), then Ansible's default
paths. Nothing is written into the venv: a `.pth` file there would make the checkout visible to every Ansible tool
of the venv and shadow an installed release (`ansible-galaxy collection install` answered "Nothing to do").
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import List, Optional

ENGINE = 'ansible_collections.steward.cluster'
DEFAULT_PATHS = ('~/.ansible/collections', '/usr/share/ansible/collections')


def candidates() -> List[str]:
    """Collection roots (dirs holding `ansible_collections/`) to try, in order."""
    paths: List[str] = []
    for var in ('ANSIBLE_COLLECTIONS_PATH', 'ANSIBLE_COLLECTIONS_PATHS'):
        paths.extend(p for p in os.environ.get(var, '').split(os.pathsep) if p)
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths.append(os.path.join(checkout, '.build', 'collections'))
    paths.extend(os.path.expanduser(p) for p in DEFAULT_PATHS)
    return paths


def _importable() -> bool:
    try:
        return importlib.util.find_spec(ENGINE) is not None
    except ImportError:
        return False


def ensure_engine() -> Optional[str]:
    """Make the engine importable; the collection root added to sys.path (None: it already was, or none holds it,
    and the first engine import then fails naming the module)."""
    if _importable():
        return None
    for root in candidates():
        if os.path.isfile(os.path.join(root, 'ansible_collections', 'steward', 'cluster', 'galaxy.yml')) \
                or os.path.isfile(os.path.join(root, 'ansible_collections', 'steward', 'cluster', 'MANIFEST.json')):
            sys.path.append(root)
            for name in [m for m in sys.modules if m == 'ansible_collections' or m.startswith('ansible_collections.')]:
                del sys.modules[name]  # a namespace package cached before the path was added
            importlib.invalidate_caches()
            return root
    return None
